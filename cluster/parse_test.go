package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validYAML = `name: t
nodes:
  - name: a
    device: V100
    count: 2
    intra: {class: nvlink, bandwidth: 100GB/s}
  - name: b
    device: p100
    count: 1
inter: {class: ethernet, bandwidth: 10Gb/s}
`

func TestParseValid(t *testing.T) {
	c, err := ParseCluster([]byte(validYAML), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Nodes[0].Device != "V100-SXM2-16GB" || c.Nodes[1].Device != "P100-PCIE-16GB" {
		t.Errorf("aliases not canonicalised: %+v", c.Nodes)
	}
	if c.Nodes[0].Intra.Latency != DefaultNVLinkLatency || c.Inter.Latency != DefaultEthernetLatency {
		t.Errorf("default latencies not applied: %+v %+v", c.Nodes[0].Intra, c.Inter)
	}
	if c.Inter.NICsPerNode != 1 || c.Inter.Bandwidth != 1.25e9 {
		t.Errorf("inter = %+v", c.Inter)
	}
	devs := c.Devices()
	if len(devs) != 3 || devs[2].Node != 1 || devs[1].Local != 1 {
		t.Errorf("devices = %+v", devs)
	}
}

func TestParseOverridesAndReplicas(t *testing.T) {
	src := `nodes:
  - {name: w, device: RTX-3090, count: 2, replicas: 3, intra: {class: pcie, bandwidth: 12GB/s, latency: 6us},
     overrides: {memory: 20GiB, fp32: 30TFLOPS, fp16: 60TFLOPS, mem_bandwidth: 850GB/s}}
inter: {class: infiniband, bandwidth: 100Gb/s, nics_per_node: 2}
profile: prof.yaml
`
	c, err := ParseCluster([]byte(src), "dir/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "lab" || len(c.Nodes) != 3 || c.Nodes[2].Name != "w-2" || c.NumDevices() != 6 {
		t.Fatalf("cluster = %+v", c)
	}
	s := c.Nodes[0].Spec()
	if s.Memory != 20<<30 || s.FP32 != 30e12 || s.FP16 != 60e12 || s.MemBandwidth != 850e9 || s.Name != "RTX-3090" {
		t.Errorf("overrides not applied: %+v", s)
	}
	if got := c.ProfilePath(); got != filepath.Join("dir", "prof.yaml") {
		t.Errorf("ProfilePath = %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		line      int
		field     string
		msg       string
	}{
		{"unknown device", "nodes:\n  - device: K80\n    count: 1\n", 2, "nodes[0].device",
			`unknown device type "K80" (known: A10, A100-PCIE-80GB,`},
		{"zero devices", "nodes:\n  - device: T4\n    count: 0\n", 3, "nodes[0].count", "device count must be at least 1, got 0"},
		{"negative devices", "nodes:\n  - device: T4\n    count: -2\n", 3, "nodes[0].count", "must be at least 1"},
		{"fractional count", "nodes:\n  - device: T4\n    count: 1.5\n", 3, "nodes[0].count", "must be a whole number"},
		{"missing count", "nodes:\n  - device: T4\n", 2, "nodes[0].count", "missing"},
		{"missing device", "nodes:\n  - count: 1\n", 2, "nodes[0].device", "missing: the device type (known: A10"},
		{"no nodes", "name: x\n", 1, "nodes", "missing"},
		{"empty nodes", "nodes: []\n", 1, "nodes", "empty"},
		{"nodes not a list", "nodes: 3\n", 1, "nodes", "must be a list"},
		{"missing intra", "nodes:\n  - device: T4\n    count: 2\n", 2, "nodes[0].intra", "needs an intra-node link"},
		{"negative bandwidth", "nodes:\n  - device: T4\n    count: 2\n    intra: {class: pcie, bandwidth: -3GB/s}\n", 4,
			"nodes[0].intra.bandwidth", "must be positive"},
		{"missing bandwidth", "nodes:\n  - device: T4\n    count: 2\n    intra:\n      class: pcie\n", 5,
			"nodes[0].intra.bandwidth", "missing: the link bandwidth"},
		{"empty bandwidth", "nodes:\n  - device: T4\n    count: 2\n    intra:\n      class: pcie\n      bandwidth:\n", 6,
			"nodes[0].intra.bandwidth", "has no value"},
		{"bad unit", "nodes:\n  - device: T4\n    count: 2\n    intra: {class: pcie, bandwidth: 3 GB}\n", 4,
			"nodes[0].intra.bandwidth", `unknown unit "GB"`},
		{"negative latency", "nodes:\n  - device: T4\n    count: 2\n    intra: {class: pcie, bandwidth: 3GB/s, latency: -1us}\n", 4,
			"nodes[0].intra.latency", "must not be negative"},
		{"bad intra class", "nodes:\n  - device: T4\n    count: 2\n    intra: {class: ethernet, bandwidth: 3GB/s}\n", 4,
			"nodes[0].intra.class", `unknown link class "ethernet" (known: nvlink, pcie)`},
		{"missing inter", "nodes:\n  - {device: T4, count: 1}\n  - {device: T4, count: 1}\n", 1, "inter", "2 nodes need an inter-node link"},
		{"inter zero bandwidth", "nodes:\n  - {device: T4, count: 1}\n  - {device: T4, count: 1}\ninter: {class: ethernet, bandwidth: 0}\n", 4,
			"inter.bandwidth", "must be positive"},
		{"zero nics", "nodes:\n  - {device: T4, count: 1}\n  - {device: T4, count: 1}\ninter: {class: ethernet, bandwidth: 1Gb/s, nics_per_node: 0}\n", 4,
			"inter.nics_per_node", "NIC count must be at least 1"},
		{"unknown field", "nodes:\n  - device: T4\n    count: 1\n    gpus: 4\n", 4, "nodes[0].gpus", "unknown field (known fields here: name, device, count"},
		{"duplicate field", "nodes:\n  - device: T4\n    device: T4\n    count: 1\n", 3, "nodes[0].device", "given twice"},
		{"duplicate node", "nodes:\n  - {name: a, device: T4, count: 1}\n  - {name: a, device: T4, count: 1}\ninter: {class: ethernet, bandwidth: 1Gb/s}\n", 3,
			"nodes[1].name", `duplicate node name "a" (also on line 2)`},
		{"bad override", "nodes:\n  - device: T4\n    count: 1\n    overrides: {memory: -1GB}\n", 4, "nodes[0].overrides.memory", "must be positive"},
		{"too many devices", "nodes:\n  - {device: T4, count: 100000, intra: {class: pcie, bandwidth: 1GB/s}}\n", 2, "nodes[0]", "more than 16384 devices"},
		{"not a mapping", "- a\n- b\n", 1, "", "the file must be a mapping of fields"},
		{"syntax", "nodes: [\n", 0, "", "not valid YAML or JSON"},
		{"empty", "", 0, "", "empty file"},
		{"json unknown device", `{"nodes": [{"device": "X1", "count": 1}]}`, 1, "nodes[0].device", `unknown device type "X1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCluster([]byte(tc.src), "bad.yaml")
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FileError", err)
			}
			if fe.File != "bad.yaml" || fe.Line != tc.line || fe.Field != tc.field || !strings.Contains(fe.Err.Error(), tc.msg) {
				t.Errorf("got %q (line %d, field %q); want line %d, field %q, message containing %q",
					err, fe.Line, fe.Field, tc.line, tc.field, tc.msg)
			}
			if want := "bad.yaml"; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
}

func TestLoadFileErrorNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, []byte("nodes:\n  - device: K80\n    count: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":2: nodes[0].device: unknown device type") {
		t.Errorf("Load error = %v", err)
	}
}

// The documented examples parse, and paper-16.yaml / modern-24.json / multi-nic.yaml equal their built-ins.
func TestExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../examples/clusters/*")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if b, ok := Builtin(c.Name); ok {
			b.Source, c.Source = "", ""
			if b.Description == "" || c.Description == "" {
				b.Description, c.Description = "", ""
			}
			if !equalClusters(b, c) {
				t.Errorf("%s differs from built-in %s:\n%+v\n%+v", f, c.Name, c, b)
			}
		}
	}
}
