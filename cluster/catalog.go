package cluster

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode"
)

// DeviceSpec is one GPU model's datasheet facts. Throughputs are dense (no structured sparsity) at the
// boost clock, as NVIDIA's datasheets state them; memory is the labelled capacity taken as GiB (2^30
// bytes — the usable amount is a little lower; override it per node where it matters).
type DeviceSpec struct {
	// Name is the catalog key, e.g. "V100-SXM2-16GB". Lookups (LookupDevice) ignore case and punctuation and accept Aliases.
	Name string `json:"name"`
	// Aliases are shorter names that also resolve to this entry (e.g. "V100").
	Aliases []string `json:"aliases,omitempty"`
	// Arch is the GPU architecture (Pascal, Volta, Turing, Ampere, Ada, Hopper).
	Arch string `json:"arch"`
	// FormFactor is the board: PCIe, SXM2, SXM4, SXM5, SXM.
	FormFactor string `json:"form_factor"`
	// FP32 is the peak single-precision (non-tensor) throughput in FLOP/s.
	FP32 float64 `json:"fp32_flops"`
	// FP16 is the peak FP16/BF16 throughput in FLOP/s: tensor cores with FP32 accumulation where the
	// device has them (BF16 from Ampere on; for GeForce boards the FP32-accumulate rate, which is half
	// the FP16-accumulate rate), packed FP16 on Pascal (which has no BF16).
	FP16 float64 `json:"fp16_flops"`
	// Memory is the device memory in bytes.
	Memory int64 `json:"memory_bytes"`
	// MemBandwidth is the peak device-memory bandwidth in bytes/s.
	MemBandwidth float64 `json:"mem_bandwidth"`
	// TDP is the board power in watts (informative).
	TDP int `json:"tdp_watts"`
	// Source names the datasheet the numbers come from.
	Source string `json:"source"`
}

const (
	tera = 1e12
	giga = 1e9
	gib  = int64(1) << 30
)

// catalogTable is the immutable source of Catalog; it is only ever copied out.
var catalogTable = [...]DeviceSpec{
	{Name: "P100-PCIE-16GB", Aliases: []string{"P100", "P100-PCIE"}, Arch: "Pascal", FormFactor: "PCIe",
		FP32: 9.3 * tera, FP16: 18.7 * tera, Memory: 16 * gib, MemBandwidth: 732 * giga, TDP: 250,
		Source: "NVIDIA Tesla P100 datasheet (PCIe, 16 GB)"},
	{Name: "P100-SXM2-16GB", Aliases: []string{"P100-SXM2"}, Arch: "Pascal", FormFactor: "SXM2",
		FP32: 10.6 * tera, FP16: 21.2 * tera, Memory: 16 * gib, MemBandwidth: 732 * giga, TDP: 300,
		Source: "NVIDIA Tesla P100 datasheet (NVLink)"},
	{Name: "V100-SXM2-16GB", Aliases: []string{"V100", "V100-SXM2"}, Arch: "Volta", FormFactor: "SXM2",
		FP32: 15.7 * tera, FP16: 125 * tera, Memory: 16 * gib, MemBandwidth: 900 * giga, TDP: 300,
		Source: "NVIDIA Tesla V100 datasheet (V100 for NVLink)"},
	{Name: "V100-SXM2-32GB", Aliases: []string{"V100-32GB"}, Arch: "Volta", FormFactor: "SXM2",
		FP32: 15.7 * tera, FP16: 125 * tera, Memory: 32 * gib, MemBandwidth: 900 * giga, TDP: 300,
		Source: "NVIDIA Tesla V100 datasheet (V100 for NVLink)"},
	{Name: "V100-PCIE-16GB", Aliases: []string{"V100-PCIE"}, Arch: "Volta", FormFactor: "PCIe",
		FP32: 14 * tera, FP16: 112 * tera, Memory: 16 * gib, MemBandwidth: 900 * giga, TDP: 250,
		Source: "NVIDIA Tesla V100 datasheet (V100 for PCIe)"},
	{Name: "V100-PCIE-32GB", Arch: "Volta", FormFactor: "PCIe",
		FP32: 14 * tera, FP16: 112 * tera, Memory: 32 * gib, MemBandwidth: 900 * giga, TDP: 250,
		Source: "NVIDIA Tesla V100 datasheet (V100 for PCIe)"},
	{Name: "T4", Arch: "Turing", FormFactor: "PCIe",
		FP32: 8.1 * tera, FP16: 65 * tera, Memory: 16 * gib, MemBandwidth: 320 * giga, TDP: 70,
		Source: "NVIDIA T4 datasheet (mixed precision FP16/FP32)"},
	{Name: "A10", Arch: "Ampere", FormFactor: "PCIe",
		FP32: 31.2 * tera, FP16: 125 * tera, Memory: 24 * gib, MemBandwidth: 600 * giga, TDP: 150,
		Source: "NVIDIA A10 datasheet"},
	{Name: "L4", Arch: "Ada", FormFactor: "PCIe",
		FP32: 30.3 * tera, FP16: 121 * tera, Memory: 24 * gib, MemBandwidth: 300 * giga, TDP: 72,
		Source: "NVIDIA L4 datasheet"},
	{Name: "A100-SXM4-40GB", Aliases: []string{"A100", "A100-40GB"}, Arch: "Ampere", FormFactor: "SXM4",
		FP32: 19.5 * tera, FP16: 312 * tera, Memory: 40 * gib, MemBandwidth: 1555 * giga, TDP: 400,
		Source: "NVIDIA A100 datasheet (A100 40GB SXM)"},
	{Name: "A100-SXM4-80GB", Aliases: []string{"A100-80GB"}, Arch: "Ampere", FormFactor: "SXM4",
		FP32: 19.5 * tera, FP16: 312 * tera, Memory: 80 * gib, MemBandwidth: 2039 * giga, TDP: 400,
		Source: "NVIDIA A100 datasheet (A100 80GB SXM)"},
	{Name: "A100-PCIE-80GB", Aliases: []string{"A100-PCIE"}, Arch: "Ampere", FormFactor: "PCIe",
		FP32: 19.5 * tera, FP16: 312 * tera, Memory: 80 * gib, MemBandwidth: 1935 * giga, TDP: 300,
		Source: "NVIDIA A100 datasheet (A100 80GB PCIe)"},
	{Name: "H100-SXM5-80GB", Aliases: []string{"H100", "H100-SXM"}, Arch: "Hopper", FormFactor: "SXM5",
		FP32: 67 * tera, FP16: 989.4 * tera, Memory: 80 * gib, MemBandwidth: 3350 * giga, TDP: 700,
		Source: "NVIDIA H100 datasheet (H100 SXM; tensor rate without sparsity)"},
	{Name: "H100-PCIE-80GB", Aliases: []string{"H100-PCIE"}, Arch: "Hopper", FormFactor: "PCIe",
		FP32: 51 * tera, FP16: 756 * tera, Memory: 80 * gib, MemBandwidth: 2000 * giga, TDP: 350,
		Source: "NVIDIA H100 datasheet (H100 PCIe; tensor rate without sparsity)"},
	{Name: "H200-SXM-141GB", Aliases: []string{"H200"}, Arch: "Hopper", FormFactor: "SXM",
		FP32: 67 * tera, FP16: 989.4 * tera, Memory: 141 * gib, MemBandwidth: 4800 * giga, TDP: 700,
		Source: "NVIDIA H200 datasheet (H200 SXM; tensor rate without sparsity)"},
	{Name: "RTX-3090", Aliases: []string{"3090"}, Arch: "Ampere", FormFactor: "PCIe",
		FP32: 35.6 * tera, FP16: 71 * tera, Memory: 24 * gib, MemBandwidth: 936 * giga, TDP: 350,
		Source: "NVIDIA Ampere GA102 whitepaper (GeForce RTX 3090; FP16 tensor with FP32 accumulate)"},
	{Name: "RTX-4090", Aliases: []string{"4090"}, Arch: "Ada", FormFactor: "PCIe",
		FP32: 82.6 * tera, FP16: 165.2 * tera, Memory: 24 * gib, MemBandwidth: 1008 * giga, TDP: 450,
		Source: "NVIDIA Ada Lovelace architecture whitepaper (GeForce RTX 4090; FP16 tensor with FP32 accumulate)"},
}

// Catalog returns a fresh copy of the device catalog sorted by name (byte order), so callers may
// modify it freely and output built from it is deterministic.
func Catalog() []DeviceSpec {
	out := make([]DeviceSpec, len(catalogTable))
	for i, d := range catalogTable {
		d.Aliases = append([]string(nil), d.Aliases...)
		out[i] = d
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DeviceNames returns the catalog names, sorted.
func DeviceNames() []string {
	cat := Catalog()
	names := make([]string, len(cat))
	for i, d := range cat {
		names[i] = d.Name
	}
	return names
}

// LookupDevice finds a catalog entry by name or alias. Case, spaces and
// punctuation do not count, nor a leading "NVIDIA", "Tesla" or "GeForce",
// so "rtx4090", "RTX 4090" and "NVIDIA GeForce RTX 4090" all name the
// RTX-4090, and "a100_80gb" the A100-SXM4-80GB (TestDeviceKeysAreUnique
// keeps every name and alias distinct under that reading).
func LookupDevice(name string) (DeviceSpec, bool) {
	key := deviceKey(name)
	for _, d := range Catalog() {
		if deviceKey(d.Name) == key {
			return d, true
		}
		for _, a := range d.Aliases {
			if deviceKey(a) == key {
				return d, true
			}
		}
	}
	return DeviceSpec{}, false
}

// deviceKey is name as LookupDevice compares it: its letters and digits,
// lower-cased, after any leading vendor or product-line words.
func deviceKey(name string) string {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for len(words) > 1 && (words[0] == "nvidia" || words[0] == "tesla" || words[0] == "geforce") {
		words = words[1:]
	}
	return strings.Join(words, "")
}

// FormatCatalog writes specs as an aligned text table (TFLOPS, GiB, GB/s), one row per device in the
// order given.
func FormatCatalog(w io.Writer, specs []DeviceSpec) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCH\tFORM\tFP32 TFLOPS\tFP16/BF16 TFLOPS\tMEMORY GiB\tMEM BW GB/s\tALIASES")
	for _, d := range specs {
		aliases := strings.Join(d.Aliases, ",")
		if aliases == "" {
			aliases = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%g\t%.0f\t%s\n", d.Name, d.Arch, d.FormFactor,
			d.FP32/tera, d.FP16/tera, float64(d.Memory)/float64(gib), d.MemBandwidth/giga, aliases)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing device table: %w", err)
	}
	return nil
}
