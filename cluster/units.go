package cluster

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Unit tables (unexported, never written): suffix → multiplier and divisor to the SI base unit
// (value × m / d, so that "5us" is exactly 5e-6 and "10.4Gb/s" exactly 1.3e9). Decimal prefixes are
// powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024; a lowercase "b" means bits, an
// uppercase "B" bytes.
type unitScale struct {
	name string
	m, d float64
}

var (
	bandwidthUnits = [...]unitScale{
		{"B/s", 1, 1}, {"kB/s", 1e3, 1}, {"KB/s", 1e3, 1}, {"MB/s", 1e6, 1}, {"GB/s", 1e9, 1}, {"TB/s", 1e12, 1},
		{"KiB/s", 1 << 10, 1}, {"MiB/s", 1 << 20, 1}, {"GiB/s", 1 << 30, 1}, {"TiB/s", 1 << 40, 1},
		{"b/s", 1, 8}, {"kb/s", 1e3, 8}, {"Kb/s", 1e3, 8}, {"Mb/s", 1e6, 8}, {"Gb/s", 1e9, 8}, {"Tb/s", 1e12, 8},
		{"bps", 1, 8}, {"kbps", 1e3, 8}, {"Kbps", 1e3, 8}, {"Mbps", 1e6, 8}, {"Gbps", 1e9, 8}, {"Tbps", 1e12, 8},
	}
	latencyUnits = [...]unitScale{{"s", 1, 1}, {"ms", 1, 1e3}, {"us", 1, 1e6}, {"µs", 1, 1e6}, {"μs", 1, 1e6}, {"ns", 1, 1e9}}
	byteUnits    = [...]unitScale{
		{"B", 1, 1}, {"kB", 1e3, 1}, {"KB", 1e3, 1}, {"MB", 1e6, 1}, {"GB", 1e9, 1}, {"TB", 1e12, 1},
		{"KiB", 1 << 10, 1}, {"MiB", 1 << 20, 1}, {"GiB", 1 << 30, 1}, {"TiB", 1 << 40, 1},
	}
	flopsUnits = [...]unitScale{
		{"FLOPS", 1, 1}, {"FLOP/s", 1, 1}, {"GFLOPS", 1e9, 1}, {"GFLOP/s", 1e9, 1}, {"TFLOPS", 1e12, 1},
		{"TFLOP/s", 1e12, 1}, {"PFLOPS", 1e15, 1}, {"PFLOP/s", 1e15, 1},
	}
)

// splitQuantity splits "10.4 Gb/s" into 10.4 and "Gb/s". A bare number has an empty unit.
func splitQuantity(s string) (float64, string, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && strings.IndexByte("+-.0123456789eE", s[i]) >= 0 {
		// Stop at an 'e'/'E' that starts a unit rather than an exponent ("5e" is not a number, "ns" is).
		if (s[i] == 'e' || s[i] == 'E') && (i+1 >= len(s) || strings.IndexByte("+-0123456789", s[i+1]) < 0) {
			break
		}
		i++
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if num == "" {
		return 0, "", fmt.Errorf("%q is not a number with an optional unit", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, "", fmt.Errorf("%q is not a finite number", num)
	}
	return v, unit, nil
}

func parseWithUnits(s, what string, units []unitScale, examples string) (float64, error) {
	v, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w (e.g. %s)", what, err, examples)
	}
	if unit == "" {
		return v, nil
	}
	var u unitScale
	for _, x := range units {
		if x.name == unit {
			u = x
		}
	}
	if u.name == "" {
		return 0, fmt.Errorf("%s: unknown unit %q in %q (e.g. %s)", what, unit, s, examples)
	}
	v = v * u.m / u.d
	if math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s: %q is too large", what, s)
	}
	return v, nil
}

// ParseBandwidth parses a bandwidth such as "10.4Gb/s", "25 Gbps", "150GB/s" or "12GiB/s" into bytes/s.
// A bare number is bytes/s. It must be positive.
func ParseBandwidth(s string) (float64, error) {
	v, err := parseWithUnits(s, "bandwidth", bandwidthUnits[:], `"10.4Gb/s", "150GB/s"`)
	if err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("bandwidth %q must be positive", s)
	}
	return v, nil
}

// ParseLatency parses a latency such as "5us", "2.5µs", "1ms" into seconds. A bare number is seconds.
// It must not be negative.
func ParseLatency(s string) (float64, error) {
	v, err := parseWithUnits(s, "latency", latencyUnits[:], `"5us", "0.02ms"`)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("latency %q must not be negative", s)
	}
	return v, nil
}

// ParseBytes parses a memory size such as "16GiB" or "15.5GB" into bytes. A bare number is bytes.
// It must be positive.
func ParseBytes(s string) (int64, error) {
	v, err := parseWithUnits(s, "memory size", byteUnits[:], `"16GiB", "40GB"`)
	if err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("memory size %q must be positive", s)
	}
	if v >= math.MaxInt64/2 {
		return 0, fmt.Errorf("memory size %q is too large", s)
	}
	return int64(math.Round(v)), nil
}

// ParseFLOPS parses a throughput such as "15.7TFLOPS" or "14 TFLOP/s" into FLOP/s. A bare number is
// FLOP/s. It must be positive.
func ParseFLOPS(s string) (float64, error) {
	v, err := parseWithUnits(s, "throughput", flopsUnits[:], `"15.7TFLOPS", "900GFLOP/s"`)
	if err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("throughput %q must be positive", s)
	}
	return v, nil
}
