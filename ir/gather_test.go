package ir

import (
	"strings"
	"testing"
)

// gather's output is shaped like its index, in x's dtype; a malformed
// index or axis is refused naming the op, the tensors and the dim.
func TestGatherShapes(t *testing.T) {
	b := NewBuilder("g", Float32)
	x := b.Param("x", 2, 5, 3)
	y := b.Gather(x, 1, b.Input("idx", Int64, 2, 7, 3))
	if s := b.Shape(y); !s.Equal(Shape{2, 7, 3}) {
		t.Fatalf("gather shape %v, want [2,7,3]", s)
	}
	if _, err := b.Finish(NoTensor); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		axis  int
		xs    Shape
		is    Shape
		idt   DType
		wants []string
	}{
		{"float index", 1, Shape{2, 5, 3}, Shape{2, 4, 3}, Float32, []string{"gather", `"idx"`, "want int64"}},
		{"rank", 1, Shape{2, 5, 3}, Shape{2, 4}, Int64, []string{"gather", "rank 2", "rank 3"}},
		{"other dim", 1, Shape{2, 5, 3}, Shape{2, 4, 2}, Int64, []string{"gather", "differ on dim 2", "[2,4,2]", "[2,5,3]"}},
		{"smaller dim", 2, Shape{2, 5, 3}, Shape{1, 5, 3}, Int64, []string{"differ on dim 0"}},
		{"axis", 3, Shape{2, 5, 3}, Shape{2, 5, 3}, Int64, []string{"gather axis 3 out of range"}},
		{"negative axis", -1, Shape{2, 5, 3}, Shape{2, 5, 3}, Int64, []string{"gather axis -1 out of range"}},
	} {
		b := NewBuilder("bad", Float32)
		x := b.Param("x", c.xs...)
		var idx TensorID
		if c.idt == Int64 {
			idx = b.Input("idx", Int64, c.is...)
		} else {
			idx = b.Input("idx", Float32, c.is...)
		}
		b.Gather(x, c.axis, idx)
		_, err := b.Finish(NoTensor)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	// gather_grad: dy must be shaped like the index, the index fit Shape.
	b = NewBuilder("grad", Float32)
	b.Emit(OpGatherGrad, Attrs{Axis: 0, Shape: []int{4, 3}}, b.Input("idx", Int64, 6, 3), b.Param("dy", 6, 2))
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), "gather_grad dy must have the index's shape") {
		t.Errorf("gather_grad with a misshapen dy: %v", err)
	}
	b = NewBuilder("grad", Float32)
	b.Emit(OpGatherGrad, Attrs{Axis: 0, Shape: []int{4, 2}}, b.Input("idx", Int64, 6, 3), b.Param("dy", 6, 3))
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), "differ on dim 1") {
		t.Errorf("gather_grad with an index that does not fit Shape: %v", err)
	}
}

// The training step differentiates gather into one gather_grad of x's
// shape on the same axis, with no gradient for the index; both are data
// movement, the backward's bytes covering dx.
func TestGatherGradient(t *testing.T) {
	b := NewBuilder("g", Float64)
	x := b.Param("x", 2, 5, 3)
	idx := b.Input("idx", Int64, 2, 4, 3)
	y := b.Gather(x, 1, idx)
	g, err := b.Finish(b.ReduceSum(y, 0, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	fwd, bwd := g.Work(g.Ops[0].ID)
	if fwd.Class != ClassDataMovement || fwd.FLOPs != 0 || fwd.Bytes != 24*8+2*24*8 {
		t.Errorf("gather work %+v", fwd)
	}
	if bwd.Class != ClassDataMovement || bwd.FLOPs != 24 || bwd.Bytes != 24*8+24*8+2*30*8 {
		t.Errorf("gather backward work %+v", bwd)
	}
	if !IsDifferentiable(OpGather) || IsDifferentiable(OpGatherGrad) {
		t.Error("gather should be differentiable, gather_grad not")
	}
	step, err := BuildTrainStep(g, SGD(0.1))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range step.Ops {
		op := &step.Ops[i]
		if op.Kind != OpGatherGrad {
			continue
		}
		n++
		if op.Attrs.Axis != 1 || !Shape(op.Attrs.Shape).Equal(Shape{2, 5, 3}) || op.Inputs[0] != idx {
			t.Errorf("gather_grad attrs %+v inputs %v", op.Attrs, op.Inputs)
		}
		if s := step.Tensors[op.Outputs[0]].Shape; !s.Equal(Shape{2, 5, 3}) {
			t.Errorf("gather_grad output %v", s)
		}
	}
	if n != 1 {
		t.Errorf("%d gather_grads in the step, want 1", n)
	}
}
