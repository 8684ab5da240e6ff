package cpu

import (
	"strings"
	"testing"

	"hap/ir"
)

func gatherCheck[F Float](t *testing.T, dt ir.DType) {
	t.Helper()
	// x[2,3,2] = 0..11; gather along the middle dim by idx[2,2,2].
	xs := make([]float64, 12)
	for i := range xs {
		xs[i] = float64(i)
	}
	x := FromFloat64[F](ir.Shape{2, 3, 2}, xs)
	idx := NewTensor[F](ir.Shape{2, 2, 2}, ir.Int64)
	copy(idx.Ints, []int64{2, 0, 2, 2, 1, 1, 0, 2})
	y := NewTensor[F](ir.Shape{2, 2, 2}, dt)
	op := &ir.Op{Kind: ir.OpGather, Attrs: ir.Attrs{Axis: 1}}
	if err := Exec(nil, op, []*Tensor[F]{x, idx}, []*Tensor[F]{y}); err != nil {
		t.Fatal(err)
	}
	// out[o][j][i] = x[o][idx[o][j][i]][i] = 6o + 2·idx + i.
	want := []float64{4, 1, 4, 5, 8, 9, 6, 11}
	for i, w := range want {
		if float64(y.Data[i]) != w {
			t.Fatalf("%s gather = %v, want %v", dt, y.Data, want)
		}
	}
	// The gradient adds dy where each position was picked, twice for
	// repeats.
	dy := FromFloat64[F](ir.Shape{2, 2, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8})
	dx := NewTensor[F](ir.Shape{2, 3, 2}, dt)
	gop := &ir.Op{Kind: ir.OpGatherGrad, Attrs: ir.Attrs{Axis: 1, Shape: []int{2, 3, 2}}}
	if err := Exec(nil, gop, []*Tensor[F]{idx, dy}, []*Tensor[F]{dx}); err != nil {
		t.Fatal(err)
	}
	wantDx := []float64{0, 2, 0, 0, 4, 4, 7, 0, 5, 6, 0, 8}
	for i, w := range wantDx {
		if float64(dx.Data[i]) != w {
			t.Fatalf("%s gather_grad = %v, want %v", dt, dx.Data, wantDx)
		}
	}
	// A position outside x is an error naming the op, not a panic.
	idx.Ints[5] = 3
	err := Exec(nil, op, []*Tensor[F]{x, idx}, []*Tensor[F]{y})
	if err == nil || !strings.Contains(err.Error(), "gather index 3 at element 5 outside [0,3)") {
		t.Errorf("%s: out-of-range gather: %v", dt, err)
	}
	idx.Ints[5] = -1
	err = Exec(nil, gop, []*Tensor[F]{idx, dy}, []*Tensor[F]{dx})
	if err == nil || !strings.Contains(err.Error(), "gather_grad index -1 at element 5 outside [0,3)") {
		t.Errorf("%s: out-of-range gather_grad: %v", dt, err)
	}
}

// gather and its gradient on a hand-checked case in both element types,
// and out-of-range positions refused.
func TestGatherKernels(t *testing.T) {
	gatherCheck[float32](t, ir.Float32)
	gatherCheck[float64](t, ir.Float64)
}

// Along the first and last dims the kernels agree with indexing by hand.
func TestGatherEdgeAxes(t *testing.T) {
	x := FromFloat64[float64](ir.Shape{3, 2}, []float64{10, 11, 20, 21, 30, 31})
	for _, c := range []struct {
		axis int
		is   ir.Shape
		idx  []int64
		want []float64
	}{
		{0, ir.Shape{1, 2}, []int64{2, 0}, []float64{30, 11}},
		{1, ir.Shape{3, 3}, []int64{1, 1, 0, 0, 1, 0, 1, 0, 0}, []float64{11, 11, 10, 20, 21, 20, 31, 30, 30}},
	} {
		idx := NewTensor[float64](c.is, ir.Int64)
		copy(idx.Ints, c.idx)
		y := NewTensor[float64](c.is, ir.Float64)
		if err := Exec(nil, &ir.Op{Kind: ir.OpGather, Attrs: ir.Attrs{Axis: c.axis}}, []*Tensor[float64]{x, idx}, []*Tensor[float64]{y}); err != nil {
			t.Fatal(err)
		}
		for i, w := range c.want {
			if y.Data[i] != w {
				t.Errorf("axis %d: %v, want %v", c.axis, y.Data, c.want)
				break
			}
		}
	}
}
