package ir

import (
	"math"
	"strings"
	"testing"
)

// Element counts never overflow: a product past MaxElements is reported,
// however large its factors, and no wrapped count comes back.
func TestCheckedNumel(t *testing.T) {
	for _, tc := range []struct {
		s    Shape
		n    int64
		fits bool
	}{
		{Shape{}, 1, true},
		{Shape{3, 4}, 12, true},
		{Shape{1 << 25, 1 << 25}, 1 << 50, true},
		{Shape{1<<25 + 1, 1 << 25}, 0, false},
		{Shape{math.MaxInt64, 16}, 0, false},
		{Shape{1 << 32, 1 << 32, 1 << 32}, 0, false}, // wraps to 0 in int64 arithmetic
		{Shape{math.MaxInt64, 0}, 0, true},           // empty, however wide
		{Shape{2, -1}, 0, false},
	} {
		n, fits := tc.s.CheckedNumel()
		if n != tc.n || fits != tc.fits {
			t.Errorf("%v: %d, %v; want %d, %v", tc.s, n, fits, tc.n, tc.fits)
		}
	}
}

// The builder refuses a tensor past MaxElements, naming it: a declared
// one, and one an op would make from in-range inputs.
func TestBuilderRefusesOversizedTensors(t *testing.T) {
	b := NewBuilder("big", Float32)
	b.Input("x", Float32, math.MaxInt64, 16)
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), `input "x"`) || !strings.Contains(err.Error(), "2^50") {
		t.Errorf("declared: %v", err)
	}
	b = NewBuilder("outer", Float32)
	x := b.Input("x", Float32, 1<<26, 1)
	w := b.Param("w", 1, 1<<26)
	b.MatMul(x, w) // [2^26, 2^26]: 2^52 elements
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), "matmul") || !strings.Contains(err.Error(), "2^50") {
		t.Errorf("made by an op: %v", err)
	}
}
