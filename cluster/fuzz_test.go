package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseCluster: ParseCluster never panics; whatever it accepts is valid and survives a JSON round trip.
func FuzzParseCluster(f *testing.F) {
	f.Add([]byte(validYAML))
	f.Add([]byte("nodes:\n  - device: K80\n    count: 1\n"))
	f.Add([]byte("a: &x [*x]\nnodes: *x\n"))
	f.Add([]byte(`{"nodes": [{"device": "T4", "count": 2, "intra": {"class": "pcie", "bandwidth": 1e9}}]}`))
	if files, err := filepath.Glob("../examples/clusters/*"); err == nil {
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCluster(data, "fuzz.yaml")
		if err != nil {
			if _, ok := err.(*FileError); !ok {
				t.Fatalf("error is %T, not *FileError: %v", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid cluster: %v", err)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseCluster(out, "fuzz.yaml")
		if err != nil {
			t.Fatalf("round trip failed: %v\n%s", err, out)
		}
		if !equalClusters(c, back) {
			t.Fatalf("round trip changed the cluster:\n%s", out)
		}
	})
}
