package cluster

import (
	"math"
	"strings"
	"testing"
)

func TestParseUnits(t *testing.T) {
	type parser func(string) (float64, error)
	bytesF := func(s string) (float64, error) { v, err := ParseBytes(s); return float64(v), err }
	for _, tc := range []struct {
		name  string
		parse parser
		in    string
		want  float64
		err   string
	}{
		{"bits", ParseBandwidth, "10.4Gb/s", 1.3e9, ""},
		{"bps", ParseBandwidth, "25 Gbps", 3.125e9, ""},
		{"bytes", ParseBandwidth, "150GB/s", 150e9, ""},
		{"binary", ParseBandwidth, "1GiB/s", 1 << 30, ""},
		{"bare", ParseBandwidth, "1e9", 1e9, ""},
		{"zero bw", ParseBandwidth, "0GB/s", 0, "must be positive"},
		{"negative bw", ParseBandwidth, "-5GB/s", 0, "must be positive"},
		{"bad unit", ParseBandwidth, "5 furlongs", 0, `unknown unit "furlongs"`},
		{"not a number", ParseBandwidth, "fast", 0, "not a number"},
		{"inf", ParseBandwidth, "1e999", 0, "not a finite number"},
		{"us", ParseLatency, "5us", 5e-6, ""},
		{"micro sign", ParseLatency, "2.5µs", 2.5e-6, ""},
		{"ms", ParseLatency, "1ms", 1e-3, ""},
		{"ns", ParseLatency, "800ns", 800e-9, ""},
		{"zero latency", ParseLatency, "0", 0, ""},
		{"negative latency", ParseLatency, "-1us", 0, "must not be negative"},
		{"GiB", bytesF, "16GiB", 16 << 30, ""},
		{"GB", bytesF, "40GB", 40e9, ""},
		{"zero bytes", bytesF, "0", 0, "must be positive"},
		{"TFLOPS", ParseFLOPS, "15.7TFLOPS", 15.7e12, ""},
		{"TFLOP/s", ParseFLOPS, "14 TFLOP/s", 14e12, ""},
	} {
		got, err := tc.parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: parse(%q) error = %v, want containing %q", tc.name, tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tc.want) > 1e-9*math.Abs(tc.want) {
			t.Errorf("%s: parse(%q) = %g, %v; want %g", tc.name, tc.in, got, err, tc.want)
		}
	}
}
