package cost

import (
	"hap/ir"
	"math"
	"strings"
	"testing"
)

// FormatProfile's output parses back to the same profile (to six
// significant digits), and the example profile survives a round trip.
func TestFormatProfileRoundTrip(t *testing.T) {
	lat := 12.5e-6
	p := &Profile{
		Precision: FP32,
		Devices: map[string]DeviceProfile{
			"H100-SXM5-80GB": {MemBandwidth: 2.91234567e12, Classes: map[string]ClassProfile{
				ir.ClassMatMul: {FLOPS: 4.5e13}, ir.ClassElementwise: {FLOPS: 1.234e9}, ir.ClassConv: {Efficiency: 0.55},
			}},
			"T4": {Classes: map[string]ClassProfile{ir.ClassLoss: {FLOPS: 3.3e-3}}},
		},
		Links: map[string]LinkProfile{"nvlink": {Bandwidth: 3.456e11, Latency: &lat}, "pcie": {Bandwidth: 1.1e10}},
	}
	out := FormatProfile(p, "measured by a test\non no GPU")
	if !strings.HasPrefix(string(out), "# measured by a test\n# on no GPU\n") {
		t.Errorf("header: %q", out)
	}
	q, err := ParseProfile(out, "round.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Abs(b) }
	if q.Precision != FP32 || len(q.Devices) != 2 || len(q.Links) != 2 {
		t.Fatalf("parsed %+v from\n%s", q, out)
	}
	for name, d := range p.Devices {
		e := q.Devices[name]
		if !near(e.MemBandwidth, d.MemBandwidth) || len(e.Classes) != len(d.Classes) {
			t.Errorf("%s: %+v, want %+v", name, e, d)
		}
		for cl, c := range d.Classes {
			if !near(e.Classes[cl].FLOPS, c.FLOPS) || e.Classes[cl].Efficiency != c.Efficiency {
				t.Errorf("%s %s: %+v, want %+v", name, cl, e.Classes[cl], c)
			}
		}
	}
	if l := q.Links["nvlink"]; !near(l.Bandwidth, 3.456e11) || l.Latency == nil || !near(*l.Latency, lat) {
		t.Errorf("nvlink: %+v", l)
	}
	if l := q.Links["pcie"]; !near(l.Bandwidth, 1.1e10) || l.Latency != nil {
		t.Errorf("pcie: %+v", l)
	}
	if string(FormatProfile(q, "measured by a test\non no GPU")) != string(out) {
		t.Errorf("a second round trip changed the text")
	}
	ex, err := LoadProfile("../examples/profiles/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseProfile(FormatProfile(ex, ""), "lab-again.yaml"); err != nil {
		t.Errorf("the example profile does not round-trip: %v", err)
	}
}
