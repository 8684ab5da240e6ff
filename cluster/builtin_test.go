package cluster

import (
	"bytes"
	"encoding/json"
	"testing"

	"hap/internal/golden"
)

func TestBuiltinsValidAndSized(t *testing.T) {
	want := map[string]struct{ devices, nodes, v100, p100 int }{
		"paper-8":   {8, 8, 2, 6},
		"paper-16":  {16, 8, 4, 12},
		"paper-29":  {29, 8, 8, 21},
		"paper-32":  {32, 8, 8, 24},
		"paper-64":  {64, 8, 16, 48},
		"v100-8":    {8, 1, 8, 0},
		"a100-8":    {8, 1, 0, 0},
		"modern-24": {24, 3, 8, 0},
		"h100-16":   {16, 2, 0, 0},
	}
	bs := Builtins()
	if len(bs) != len(want) {
		t.Errorf("got %d built-ins, want %d", len(bs), len(want))
	}
	for i, c := range bs {
		if c.Name != BuiltinNames()[i] {
			t.Errorf("Builtins()[%d] = %s, BuiltinNames()[%d] = %s", i, c.Name, i, BuiltinNames()[i])
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		w, ok := want[c.Name]
		if !ok {
			t.Errorf("unexpected built-in %s", c.Name)
			continue
		}
		v100, p100 := 0, 0
		for _, d := range c.Devices() {
			switch d.Spec.Name {
			case "V100-SXM2-16GB":
				v100++
			case "P100-PCIE-16GB":
				p100++
			}
		}
		if c.NumDevices() != w.devices || len(c.Nodes) != w.nodes || v100 != w.v100 || p100 != w.p100 {
			t.Errorf("%s: %d devices on %d nodes (%d V100, %d P100); want %+v", c.Name, c.NumDevices(), len(c.Nodes), v100, p100, w)
		}
	}
}

func TestPaper29Layout(t *testing.T) {
	c, ok := Builtin("paper-29")
	if !ok {
		t.Fatal("no paper-29")
	}
	var counts []int
	for _, n := range c.Nodes {
		counts = append(counts, n.Count)
	}
	want := []int{7, 1, 3, 8, 1, 6, 1, 2}
	for i := range want {
		if i >= len(counts) || counts[i] != want[i] {
			t.Fatalf("node counts %v, want %v", counts, want)
		}
	}
	if bw := c.Inter.Bandwidth * 8 / 1e9; bw != 10.4 {
		t.Errorf("inter-node bandwidth %g Gb/s, want 10.4", bw)
	}
}

func TestLoadBuiltinAndUnknown(t *testing.T) {
	c, err := Load("paper-64")
	if err != nil || c.NumDevices() != 64 || c.Source != "builtin:paper-64" {
		t.Fatalf("Load(paper-64) = %v, %v", c, err)
	}
	_, err = Load("paper-7")
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("built-ins: paper-8, paper-16")) {
		t.Errorf("Load(paper-7) error = %v; want a list of built-ins", err)
	}
}

// Each built-in marshals to JSON that parses back to the same cluster.
func TestBuiltinJSONRoundTrip(t *testing.T) {
	for _, c := range Builtins() {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseCluster(data, c.Name+".json")
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.Name, err, data)
		}
		back.Source = c.Source
		if !equalClusters(c, back) {
			t.Errorf("%s: round trip changed the cluster:\n%+v\n%+v", c.Name, c, back)
		}
	}
}

func TestFormatClustersGolden(t *testing.T) {
	var b bytes.Buffer
	if err := FormatClusters(&b, Builtins()); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "clusters.golden", b.Bytes(), *update)
}

func equalClusters(a, b *Cluster) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb) && a.Source == b.Source
}

func TestValidateProgrammatic(t *testing.T) {
	pcie := Link{Class: LinkPCIe, Bandwidth: 1e9}
	eth := InterLink{Link: Link{Class: LinkEthernet, Bandwidth: 1e9}, NICsPerNode: 1}
	for _, tc := range []struct {
		name string
		c    Cluster
		msg  string
	}{
		{"no nodes", Cluster{Name: "x"}, "no nodes"},
		{"unknown device", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "K80", Count: 1}}}, `unknown device type "K80"`},
		{"zero count", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4"}}}, "count must be at least 1"},
		{"no intra", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4", Count: 2}}}, `intra: unknown link class ""`},
		{"negative intra bw", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4", Count: 2, Intra: Link{LinkPCIe, -1, 0}}}}, "bandwidth must be positive"},
		{"no inter", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4", Count: 1}, {Name: "b", Device: "T4", Count: 1}}}, "inter: unknown link class"},
		{"zero NICs", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4", Count: 1}, {Name: "b", Device: "T4", Count: 1}},
			Inter: InterLink{Link: eth.Link}}, "nics_per_node must be at least 1"},
		{"duplicate names", Cluster{Name: "x", Nodes: []Node{{Name: "a", Device: "T4", Count: 2, Intra: pcie}, {Name: "a", Device: "T4", Count: 1}},
			Inter: eth}, "duplicate node name"},
	} {
		err := tc.c.Validate()
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.msg)) {
			t.Errorf("%s: error %v, want containing %q", tc.name, err, tc.msg)
		}
	}
}
