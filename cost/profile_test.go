package cost

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
)

func TestProfileExampleApplies(t *testing.T) {
	c, err := cluster.Load("../examples/clusters/lab-measured.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Device 0 is the RTX-4090, 1–2 the RTX-3090s.
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"4090 matmul measured", m.FLOPRate(0, ir.ClassMatMul), 60e12},
		{"4090 attention efficiency", m.FLOPRate(0, ir.ClassAttention), 82.6e12 * 0.45},
		{"4090 conv default", m.FLOPRate(0, ir.ClassConv), 82.6e12 * EfficiencyConv},
		{"3090 matmul measured", m.FLOPRate(1, ir.ClassMatMul), 27e12},
		// The node overrides FP32 to 30 TFLOPS; the profile's efficiency applies to it.
		{"3090 conv efficiency on override", m.FLOPRate(1, ir.ClassConv), 30e12 * 0.55},
		{"3090 mem bandwidth measured", m.MemBandwidth(1), 820e9},
		{"4090 mem bandwidth default", m.MemBandwidth(0), 1008e9 * MemoryBandwidthEfficiency},
	} {
		if math.Abs(tc.got-tc.want) > 1e-6*tc.want {
			t.Errorf("%s: %g, want %g", tc.name, tc.got, tc.want)
		}
	}
	// pcie measured 11 GB/s, 6 µs: send-recv of 11e9 bytes inside the 3090 node = base + 6e-6 + 1.
	if s, err := m.CollectiveTime(Call{Kind: SendRecv, Group: []int{1, 2}, Bytes: fill(2, 11e9)}); err != nil || math.Abs(s-CollectiveBaseLatency-1.000006) > 1e-12 {
		t.Errorf("pcie send-recv %g, %v", s, err)
	}
	// ethernet 9.4 Gb/s from the profile (measured: no line-rate efficiency), 40 µs latency from the
	// cluster file.
	if s, err := m.CollectiveTime(Call{Kind: SendRecv, Group: []int{0, 1}, Bytes: fill(2, 9.4e9/8)}); err != nil || math.Abs(s-CollectiveBaseLatency-1.00004) > 1e-12 {
		t.Errorf("ethernet send-recv %g, %v", s, err)
	}
	// NoProfile ignores the file.
	m2, err := New(c, Options{NoProfile: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.FLOPRate(1, ir.ClassMatMul); got != 30e12*EfficiencyMatmul {
		t.Errorf("NoProfile: 3090 matmul %g", got)
	}
}

func TestProfileMissingFile(t *testing.T) {
	c := &cluster.Cluster{Name: "x", Nodes: []cluster.Node{{Name: "a", Device: "T4", Count: 1}},
		Profile: "nope.yaml", Source: "/nonexistent/dir/x.yaml"}
	if _, err := New(c, Options{}); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("error %v", err)
	}
}

func TestProfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line      int
		field     string
		msg       string
	}{
		{"unknown device", "devices:\n  K80: {classes: {matmul: {flops: 1TFLOPS}}}\n", 2, "devices.K80", `unknown device type "K80" (known: A10`},
		{"unknown class", "devices:\n  V100:\n    classes:\n      fft: {efficiency: 0.5}\n", 4, "devices.V100.classes.fft", `unknown op class "fft" (known: attention, conv`},
		{"both", "devices:\n  V100:\n    classes:\n      matmul: {flops: 1TFLOPS, efficiency: 0.5}\n", 4, "devices.V100.classes.matmul", "not both"},
		{"neither", "devices:\n  V100:\n    classes:\n      matmul: {}\n", 4, "devices.V100.classes.matmul", "give flops"},
		{"efficiency range", "devices:\n  V100:\n    classes:\n      matmul: {efficiency: 1.5}\n", 4, "devices.V100.classes.matmul.efficiency", "in (0, 1]"},
		{"negative flops", "devices:\n  V100:\n    classes:\n      matmul: {flops: -1TFLOPS}\n", 4, "devices.V100.classes.matmul.flops", "must be positive"},
		{"dup device via alias", "devices:\n  V100: {mem_bandwidth: 1GB/s}\n  V100-SXM2-16GB: {mem_bandwidth: 1GB/s}\n", 3, "devices.V100-SXM2-16GB", "given twice"},
		{"unknown link", "links:\n  token-ring: {bandwidth: 1Gb/s}\n", 2, "links.token-ring", `unknown link class "token-ring"`},
		{"negative link bw", "links:\n  pcie: {bandwidth: -1GB/s}\n", 2, "links.pcie.bandwidth", "must be positive"},
		{"empty link", "links:\n  pcie: {}\n", 2, "links.pcie", "give a bandwidth"},
		{"unknown field", "device: {}\n", 1, "device", "unknown field"},
		{"bad precision", "precision: fp8\n", 1, "precision", "unknown precision"},
		{"syntax", "devices: {\n", 0, "", "not valid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProfile([]byte(tc.src), "p.yaml")
			var fe *cluster.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *cluster.FileError", err)
			}
			if fe.Line != tc.line || fe.Field != tc.field || !strings.Contains(fe.Err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "p.yaml") {
				t.Errorf("got %q (line %d, field %q); want line %d, field %q, containing %q", err, fe.Line, fe.Field, tc.line, tc.field, tc.msg)
			}
		})
	}
}

func FuzzParseProfile(f *testing.F) {
	if data, err := os.ReadFile("../examples/profiles/lab.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("links:\n  pcie: {latency: 0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data, "fuzz.yaml")
		if err != nil {
			var fe *cluster.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *cluster.FileError", err)
			}
			return
		}
		for _, d := range p.Devices {
			for _, c := range d.Classes {
				if !(c.FLOPS > 0) && !(c.Efficiency > 0 && c.Efficiency <= 1) {
					t.Fatalf("accepted class profile %+v", c)
				}
			}
		}
	})
}

// A measured rate far above the datasheet is a unit slip or another
// device's profile: refused with the field, the figure and the peak, not
// planned with.
func TestProfileRatesAbovePeakAreRefused(t *testing.T) {
	c := &cluster.Cluster{Name: "x", Nodes: []cluster.Node{{Name: "a", Device: "T4", Count: 1}}}
	for _, tc := range []struct {
		name string
		dp   DeviceProfile
		want string // "" means accepted
	}{
		{"matmul TFLOPS for GFLOPS", DeviceProfile{Classes: map[string]ClassProfile{ir.ClassMatMul: {FLOPS: 65e15}}}, "devices.T4.classes.matmul: 6.5e+04 TFLOPS measured, above the device's peak of 65 TFLOPS"},
		{"bandwidth TB/s for GB/s", DeviceProfile{MemBandwidth: 300e12}, "devices.T4.mem_bandwidth: 3e+05 GB/s measured"},
		{"FP16 tensor-core rate", DeviceProfile{Classes: map[string]ClassProfile{ir.ClassMatMul: {FLOPS: 60e12}}}, ""},
		{"boost clock above the datasheet", DeviceProfile{MemBandwidth: 330e9}, ""},
	} {
		p := &Profile{Source: "p.yaml", Devices: map[string]DeviceProfile{"T4": tc.dp}}
		_, err := New(c, Options{Profile: p})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml")):
			t.Errorf("%s: %v, want an error naming p.yaml and %q", tc.name, err, tc.want)
		}
	}
}
