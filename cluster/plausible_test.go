package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Values legal but outside any real device or network are warned about,
// one warning each, naming the file, line and field; the cluster still
// parses.
func TestImplausibleValuesWarn(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field, want string
	}{
		{"bare bandwidth", "nodes:\n  - device: V100\n    count: 2\n    intra: {class: nvlink, bandwidth: 10}\n", "nodes[0].intra.bandwidth", "a bare number is in bytes/s"},
		{"huge bandwidth", "nodes:\n  - device: V100\n    count: 2\n    intra: {class: nvlink, bandwidth: 1000TB/s}\n", "nodes[0].intra.bandwidth", "above any real link's"},
		{"bare latency", "nodes:\n  - device: V100\n    count: 2\n    intra: {class: nvlink, bandwidth: 100GB/s, latency: 5}\n", "nodes[0].intra.latency", "a bare number is in seconds"},
		{"tiny latency", "nodes:\n  - {device: V100, count: 1}\n  - {device: V100, count: 1}\ninter: {class: ethernet, bandwidth: 10Gb/s, latency: 1ns}\n", "inter.latency", "below any real link's"},
		{"fp32", "nodes:\n  - device: V100\n    count: 1\n    overrides: {fp32: 1e30TFLOPS}\n", "nodes[0].overrides.fp32", "above any real GPU's"},
		{"fp16", "nodes:\n  - device: V100\n    count: 1\n    overrides: {fp16: 125}\n", "nodes[0].overrides.fp16", "a bare number is in FLOP/s"},
		{"memory", "nodes:\n  - device: V100\n    count: 1\n    overrides: {memory: 16}\n", "nodes[0].overrides.memory", "a bare number is in bytes"},
		{"mem bandwidth", "nodes:\n  - device: V100\n    count: 1\n    overrides: {mem_bandwidth: 900MB/s}\n", "nodes[0].overrides.mem_bandwidth", "below any real GPU memory's"},
	} {
		c, warnings, err := ParseWarn([]byte(tc.yaml), "lab.yaml")
		if err != nil || c == nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(warnings) != 1 {
			t.Errorf("%s: %d warnings %v, want 1", tc.name, len(warnings), warnings)
			continue
		}
		w := warnings[0]
		if s := w.String(); w.Field != tc.field || w.Line == 0 || !strings.HasPrefix(s, "lab.yaml:") ||
			!strings.Contains(s, tc.field+": ") || !strings.Contains(s, tc.want) || strings.Contains(s, "\n") {
			t.Errorf("%s: warning %q (field %q, line %d), want one line on %s mentioning %q", tc.name, s, w.Field, w.Line, tc.field, tc.want)
		}
	}
}

// Nothing real is warned about: the built-ins (as their JSON files), the
// example clusters, the edges of each range, and a latency of 0 (an
// idealisation).
func TestPlausibleValuesDoNotWarn(t *testing.T) {
	files, err := filepath.Glob("../examples/clusters/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example clusters: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, w, err := ParseWarn(data, f); err != nil || len(w) > 0 {
			t.Errorf("%s: %v, warnings %v", f, err, w)
		}
	}
	for _, c := range Builtins() {
		if _, w, err := LoadWarn(c.Name); err != nil || len(w) > 0 {
			t.Errorf("built-in %s: %v, warnings %v", c.Name, err, w)
		}
	}
	for _, tc := range []struct {
		kind int
		v    float64
	}{
		{QuantityLinkBandwidth, MinPlausibleLinkBandwidth}, {QuantityLinkBandwidth, MaxPlausibleLinkBandwidth},
		{QuantityLinkBandwidth, 1.25e8}, {QuantityLinkBandwidth, 1.8e12}, // 1 GbE, NVLink 5
		{QuantityLatency, 0}, {QuantityLatency, MinPlausibleLatency}, {QuantityLatency, MaxPlausibleLatency},
		{QuantityFLOPS, MinPlausibleFLOPS}, {QuantityFLOPS, MaxPlausibleFLOPS}, {QuantityFLOPS, 15.7e12},
		{QuantityMemory, MinPlausibleMemory}, {QuantityMemory, MaxPlausibleMemory}, {QuantityMemory, 16 << 30},
		{QuantityMemBandwidth, MinPlausibleMemBandwidth}, {QuantityMemBandwidth, MaxPlausibleMemBandwidth},
	} {
		if msg := implausible(tc.kind, tc.v, ""); msg != "" {
			t.Errorf("quantity %d, %g: %s", tc.kind, tc.v, msg)
		}
	}
}
