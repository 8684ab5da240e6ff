package cluster

import "testing"

func TestMatchDevice(t *testing.T) {
	const gib = int64(1) << 30
	cases := []struct {
		name string
		mem  int64
		want string // "" for no match
	}{
		{"NVIDIA H100 80GB HBM3", 80 * gib, "H100-SXM5-80GB"},
		{"NVIDIA H100 PCIe", 80 * gib, "H100-PCIE-80GB"},
		{"NVIDIA H200", 141 * gib, "H200-SXM-141GB"},
		{"NVIDIA A100-SXM4-40GB", 40 * gib, "A100-SXM4-40GB"},
		{"NVIDIA A100-SXM4-80GB", 80 * gib, "A100-SXM4-80GB"},
		{"NVIDIA A100 80GB PCIe", 80 * gib, "A100-PCIE-80GB"},
		{"NVIDIA A10", 24 * gib, "A10"},
		{"Tesla V100-SXM2-32GB", 32 * gib, "V100-SXM2-32GB"},
		{"Tesla V100-PCIE-16GB", 16 * gib, "V100-PCIE-16GB"},
		{"Tesla P100-PCIE-16GB", 16 * gib, "P100-PCIE-16GB"},
		{"Tesla T4", 15 * gib, "T4"},
		{"NVIDIA L4", 23 * gib, "L4"},
		{"NVIDIA GeForce RTX 3090", 24 * gib, "RTX-3090"},
		{"NVIDIA GeForce RTX 4090", 24 * gib, "RTX-4090"},
		{"Fake GPU 0", 80 * gib, ""},
		{"NVIDIA A1000", 8 * gib, ""},
	}
	for _, c := range cases {
		d, ok := MatchDevice(c.name, c.mem)
		if got := map[bool]string{true: d.Name, false: ""}[ok]; got != c.want {
			t.Errorf("MatchDevice(%q, %d GiB) = %q, want %q", c.name, c.mem/gib, got, c.want)
		}
	}
}
