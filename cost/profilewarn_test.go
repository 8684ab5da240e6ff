package cost

import (
	"strings"
	"testing"

	"hap/cluster"
)

// A profile's implausible measurements are warned about with file, line
// and field, and so are its entries the cluster does not use.
func TestProfileWarnings(t *testing.T) {
	prof, warnings, err := ParseProfileWarn([]byte(`devices:
  V100:
    mem_bandwidth: 900
  A100:
    classes:
      matmul: {flops: 100TFLOPS}
links:
  nvlink: {bandwidth: 100GB/s, latency: 5}
  infiniband: {bandwidth: 200Gb/s}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p.yaml:3: devices.V100.mem_bandwidth: 900 B/s is below any real GPU memory's",
		"p.yaml:8: links.nvlink.latency: 5 s is above any real link's",
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings %v, want %d", warnings, len(want))
	}
	for i, w := range warnings {
		if !strings.HasPrefix(w.String(), want[i]) {
			t.Errorf("warning %q, want %q…", w, want[i])
		}
	}
	// v100-8: one machine of eight V100s on NVLink.
	c, err := cluster.Load("v100-8")
	if err != nil {
		t.Fatal(err)
	}
	unused := prof.Unused(c)
	wantUnused := []string{
		"p.yaml:4: devices.A100-SXM4-40GB: cluster v100-8 has no A100-SXM4-40GB",
		"p.yaml:9: links.infiniband: cluster v100-8 has no infiniband link",
	}
	if len(unused) != len(wantUnused) {
		t.Fatalf("unused %v, want %d", unused, len(wantUnused))
	}
	for i, w := range unused {
		if !strings.HasPrefix(w.String(), wantUnused[i]) {
			t.Errorf("unused %q, want %q…", w, wantUnused[i])
		}
	}
	// The example profile fits its cluster: nothing to say.
	lab, err := cluster.Load("../examples/clusters/lab-measured.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, w, err := LoadProfileWarn(lab.ProfilePath())
	if err != nil || len(w) > 0 || len(p.Unused(lab)) > 0 {
		t.Errorf("example profile: %v, warnings %v, unused %v", err, w, p.Unused(lab))
	}
}
