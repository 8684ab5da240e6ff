package cluster

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Plausible ranges. A cluster or profile value outside its range is legal
// (hap plans with it) but almost surely a mistake — a bare number read in
// base units ("bandwidth: 10" is 10 bytes/s), a unit slip, an exponent
// typed twice — so parsing warns about it (Warning), naming the field.
// Each range is wider than every real device or network by about an order
// of magnitude at each end: a warning means "no hardware is like this",
// not "unusual hardware".
const (
	// MinPlausibleLinkBandwidth is a tenth of 1 Gb/s Ethernet's 125 MB/s,
	// the slowest network a GPU cluster is built on.
	MinPlausibleLinkBandwidth = 125e6 / 10
	// MaxPlausibleLinkBandwidth is ten times NVLink 5's 1.8 TB/s per GPU
	// (Blackwell, 2024), the fastest link there is.
	MaxPlausibleLinkBandwidth = 1.8e12 * 10

	// MinPlausibleLatency is half a microsecond: a hop of NCCL over NVLink,
	// the fastest link, takes 1–3 µs with the protocol's overhead
	// (nccl-tests small messages). A latency of exactly 0 is an idealisation
	// (communication costs bandwidth only) and is not warned about.
	MinPlausibleLatency = 0.5e-6
	// MaxPlausibleLatency is 10 ms, a network hop across a metro area;
	// datacenter Ethernet is tens of microseconds (DefaultEthernetLatency).
	MaxPlausibleLatency = 10e-3

	// MinPlausibleFLOPS is a tenth of 1 TFLOP/s, itself about the FP32
	// peak of the slowest GPU anyone trains on (K80, P4: 2–5 TFLOP/s per
	// chip).
	MinPlausibleFLOPS = 1e12 / 10
	// MaxPlausibleFLOPS is ten times 1 PFLOP/s, about the dense FP16
	// tensor-core peak of the fastest GPU (B200: 2.25 PFLOP/s; its FP32 is
	// 80 TFLOP/s, TF32 1.1 PFLOP/s).
	MaxPlausibleFLOPS = 1e15 * 10

	// MinPlausibleMemory is 1 GB: the smallest GPU memory hap's catalog
	// could hold is a few GB (a T4 has 16, a P4 8).
	MinPlausibleMemory = 1e9
	// MaxPlausibleMemory is 3 TB, ten times the largest GPU memory (B300:
	// 288 GB of HBM3e).
	MaxPlausibleMemory = 288e9 * 10

	// MinPlausibleMemBandwidth is a tenth of 100 GB/s, about the slowest
	// GPU memory (GDDR5 on small boards; a P4 has 192 GB/s).
	MinPlausibleMemBandwidth = 100e9 / 10
	// MaxPlausibleMemBandwidth is ten times B200's 8 TB/s of HBM3e.
	MaxPlausibleMemBandwidth = 8e12 * 10
)

// Warning is a value a cluster or profile file gives that is legal but
// implausible (the ranges above): where it is (file, line, field) and why
// it is suspect. Parsing returns warnings beside the value; callers write
// them where their user will see them.
type Warning struct {
	File  string
	Line  int // 0 when unknown
	Field string
	Msg   string
}

// String is the warning as one line, "FILE:LINE: FIELD: message", as
// FileError writes errors.
func (w Warning) String() string {
	var b strings.Builder
	if w.File == "" {
		b.WriteString("<input>")
	} else {
		b.WriteString(w.File)
	}
	if w.Line > 0 {
		fmt.Fprintf(&b, ":%d", w.Line)
	}
	b.WriteString(": ")
	if w.Field != "" {
		b.WriteString(w.Field)
		b.WriteString(": ")
	}
	b.WriteString(w.Msg)
	return b.String()
}

// Quantity kinds with a plausible range, for YAMLDoc.Plausible.
const (
	QuantityLinkBandwidth = iota
	QuantityLatency
	QuantityFLOPS
	QuantityMemory
	QuantityMemBandwidth
)

// quantityRange is one kind's range: its bounds, what it is, how to write
// a value of it, and the unit a bare number is in.
type quantityRange struct {
	min, max float64
	what     string
	format   func(float64) string
	bare     string
	example  string
}

func rangeOf(kind int) quantityRange {
	switch kind {
	case QuantityLinkBandwidth:
		return quantityRange{MinPlausibleLinkBandwidth, MaxPlausibleLinkBandwidth, "link", si("B/s"), "bytes/s", `"10Gb/s", "100GB/s"`}
	case QuantityLatency:
		return quantityRange{MinPlausibleLatency, MaxPlausibleLatency, "link", seconds, "seconds", `"5us", "0.02ms"`}
	case QuantityFLOPS:
		return quantityRange{MinPlausibleFLOPS, MaxPlausibleFLOPS, "GPU", si("FLOP/s"), "FLOP/s", `"15.7TFLOPS"`}
	case QuantityMemory:
		return quantityRange{MinPlausibleMemory, MaxPlausibleMemory, "GPU", si("B"), "bytes", `"16GiB", "80GB"`}
	case QuantityMemBandwidth:
		return quantityRange{MinPlausibleMemBandwidth, MaxPlausibleMemBandwidth, "GPU memory", si("B/s"), "bytes/s", `"900GB/s"`}
	}
	panic(fmt.Sprintf("cluster: no plausible range for quantity kind %d", kind)) // a programmer error
}

// implausible says why v, a quantity of kind given as text s, is outside
// its plausible range, or "" when it is inside (or is a zero latency).
func implausible(kind int, v float64, s string) string {
	r := rangeOf(kind)
	if v >= r.min && v <= r.max || kind == QuantityLatency && v == 0 {
		return ""
	}
	side := "below"
	if v > r.max {
		side = "above"
	}
	msg := fmt.Sprintf("%s is %s any real %s's (plausible: %s to %s)", r.format(v), side, r.what, r.format(r.min), r.format(r.max))
	if _, unit, err := splitQuantity(s); err == nil && unit == "" {
		msg += fmt.Sprintf("; a bare number is in %s: give a unit, e.g. %s", r.bare, r.example)
	}
	return msg
}

// Plausible records a warning when v, parsed from node n (field), is
// outside the plausible range of its kind (a Quantity* constant).
func (p *YAMLDoc) Plausible(n *yaml.Node, field string, kind int, v float64) {
	s := ""
	line := 0
	if n != nil {
		s, line = n.Value, n.Line
	}
	if msg := implausible(kind, v, s); msg != "" {
		p.Warnings = append(p.Warnings, Warning{File: p.File, Line: line, Field: field, Msg: msg})
	}
}

// Warnf records a warning at node n.
func (p *YAMLDoc) Warnf(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.Warnings = append(p.Warnings, Warning{File: p.File, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// si writes a value with three significant digits and a decimal prefix
// (k to P), or in e-notation of the base unit past them: "12.5 MB/s",
// "1e+42 FLOP/s".
func si(unit string) func(float64) string {
	return func(v float64) string {
		for _, p := range [...]struct {
			prefix string
			scale  float64
		}{{"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
			if v >= p.scale && v < 1000*p.scale {
				return fmt.Sprintf("%.3g %s%s", v/p.scale, p.prefix, unit)
			}
		}
		return fmt.Sprintf("%.3g %s", v, unit)
	}
}

// seconds writes a time with three significant digits in ns, µs, ms or s.
func seconds(v float64) string {
	switch {
	case v == 0:
		return "0 s"
	case v < 1e-6:
		return fmt.Sprintf("%.3g ns", v*1e9)
	case v < 1e-3:
		return fmt.Sprintf("%.3g µs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.3g ms", v*1e3)
	}
	return fmt.Sprintf("%.3g s", v)
}
