package cluster

import (
	"bytes"
	"flag"
	"sort"
	"testing"

	"hap/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestCatalogHasRequiredDevices(t *testing.T) {
	for _, name := range []string{
		"P100-PCIE-16GB", "P100-SXM2-16GB", "V100-SXM2-16GB", "V100-SXM2-32GB", "T4", "A10", "L4",
		"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "RTX-3090", "RTX-4090",
	} {
		if _, ok := LookupDevice(name); !ok {
			t.Errorf("catalog lacks %s", name)
		}
	}
}

func TestCatalogSortedAndSane(t *testing.T) {
	cat := Catalog()
	if !sort.SliceIsSorted(cat, func(i, j int) bool { return cat[i].Name < cat[j].Name }) {
		t.Error("catalog not sorted by name")
	}
	seen := map[string]string{}
	for _, d := range cat {
		if d.FP32 <= 0 || d.FP16 < d.FP32 || d.Memory <= 0 || d.MemBandwidth <= 0 || d.Source == "" {
			t.Errorf("%s: implausible entry %+v", d.Name, d)
		}
		for _, n := range append([]string{d.Name}, d.Aliases...) {
			if prev, dup := seen[n]; dup {
				t.Errorf("name %q used by %s and %s", n, prev, d.Name)
			}
			seen[n] = d.Name
		}
	}
	// A fresh copy each call: mutating one must not affect the next.
	cat[0].FP32 = -1
	cat[0].Aliases = append(cat[0].Aliases, "x")
	if again := Catalog(); again[0].FP32 <= 0 || len(again[0].Aliases) == len(cat[0].Aliases) {
		t.Error("Catalog returned shared state")
	}
}

func TestLookupDevice(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"V100", "V100-SXM2-16GB"},
		{"v100-sxm2-32gb", "V100-SXM2-32GB"},
		{"P100", "P100-PCIE-16GB"},
		{"a100-80gb", "A100-SXM4-80GB"},
		{"H200", "H200-SXM-141GB"},
		{"4090", "RTX-4090"},
		{"rtx4090", "RTX-4090"},
		{"RTX 4090", "RTX-4090"},
		{"NVIDIA GeForce RTX 3090", "RTX-3090"},
		{"a100_80gb", "A100-SXM4-80GB"},
		{"Tesla V100-SXM2-16GB", "V100-SXM2-16GB"},
		{"NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"},
		{" h100 pcie ", "H100-PCIE-80GB"},
	} {
		got, ok := LookupDevice(tc.in)
		if !ok || got.Name != tc.want {
			t.Errorf("LookupDevice(%q) = %q, %v; want %q", tc.in, got.Name, ok, tc.want)
		}
	}
	for _, bad := range []string{"K80", "A1000", "nvidia", "", "V100 32"} {
		if got, ok := LookupDevice(bad); ok {
			t.Errorf("LookupDevice(%q) = %q; want unknown", bad, got.Name)
		}
	}
}

// TestDeviceKeysAreUnique: no two catalog names or aliases read the same
// once LookupDevice drops case and punctuation, so a lookup never depends
// on the catalog's order.
func TestDeviceKeysAreUnique(t *testing.T) {
	owner := map[string]string{}
	for _, d := range Catalog() {
		for _, n := range append([]string{d.Name}, d.Aliases...) {
			k := deviceKey(n)
			if prev, ok := owner[k]; ok && prev != d.Name {
				t.Errorf("%q of %s reads as %q, as a name of %s does", n, d.Name, k, prev)
			}
			owner[k] = d.Name
		}
	}
}

func TestFormatCatalogGolden(t *testing.T) {
	var b bytes.Buffer
	if err := FormatCatalog(&b, Catalog()); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "catalog.golden", b.Bytes(), *update)
}
