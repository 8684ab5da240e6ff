package ir

import (
	"strings"
	"testing"
)

// swiglu's output is gate's shape and dtype; operands of other shapes or
// dtypes are refused naming the op and both operands.
func TestSwiGLUShapes(t *testing.T) {
	b := NewBuilder("s", Float32)
	y := b.SwiGLU(b.Param("gate", 2, 3, 5), b.Param("up", 2, 3, 5))
	if s := b.Shape(y); !s.Equal(Shape{2, 3, 5}) {
		t.Fatalf("swiglu shape %v, want [2,3,5]", s)
	}
	if _, err := b.Finish(NoTensor); err != nil {
		t.Fatal(err)
	}
	b = NewBuilder("bad", Float32)
	b.SwiGLU(b.Param("gate", 2, 3, 5), b.Param("up", 2, 5))
	_, err := b.Finish(NoTensor)
	if err == nil {
		t.Fatal("swiglu of [2,3,5] and [2,5] accepted")
	}
	for _, w := range []string{"swiglu", `"gate" [2,3,5]`, `"up" [2,5]`, "equal shapes"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	b = NewBuilder("bad", Float32)
	b.SwiGLU(b.Param("gate", 4), b.Input("up", Float64, 4))
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), "dtype mismatch") {
		t.Errorf("swiglu of float32 and float64: %v", err)
	}
	b = NewBuilder("bad", Float32)
	b.Emit(OpSwiGLUGrad, Attrs{}, b.Param("gate", 3, 4), b.Param("up", 3, 4), b.Param("dy", 4, 3))
	if _, err := b.Finish(NoTensor); err == nil || !strings.Contains(err.Error(), "swiglu_grad dy") {
		t.Errorf("swiglu_grad with a misshapen dy: %v", err)
	}
}

// The step differentiates swiglu into one swiglu_grad reading gate, up and
// dy and giving both gradients; forward and backward are elementwise work
// with the FLOPs and bytes stated in act.go, the forward moving 3 tensors
// where silu then mul move 5.
func TestSwiGLUGradient(t *testing.T) {
	b := NewBuilder("s", Float64)
	gate, up := b.Param("gate", 4, 6), b.Param("up", 4, 6)
	y := b.SwiGLU(gate, up)
	g, err := b.Finish(b.ReduceSum(y, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	const n, bytes = 24.0, 24.0 * 8
	fwd, bwd := g.Work(g.Ops[0].ID)
	if fwd != (Work{ClassElementwise, 6 * n, 3 * bytes}) {
		t.Errorf("swiglu work %+v", fwd)
	}
	if bwd != (Work{ClassElementwise, 12 * n, 5 * bytes}) {
		t.Errorf("swiglu backward work %+v", bwd)
	}
	if !IsDifferentiable(OpSwiGLU) || IsDifferentiable(OpSwiGLUGrad) {
		t.Error("swiglu should be differentiable, swiglu_grad not")
	}
	step, err := BuildTrainStep(g, SGD(0.1))
	if err != nil {
		t.Fatal(err)
	}
	var grads []*Op
	for i := range step.Ops {
		switch step.Ops[i].Kind {
		case OpSwiGLUGrad:
			grads = append(grads, &step.Ops[i])
		case OpSiLU, OpSiLUGrad, OpMul:
			t.Errorf("step has a %s op (%s); swiglu's backward is swiglu_grad alone", step.Ops[i].Kind, step.Ops[i].Name)
		}
	}
	if len(grads) != 1 {
		t.Fatalf("%d swiglu_grads in the step, want 1", len(grads))
	}
	op := grads[0]
	if len(op.Inputs) != 3 || op.Inputs[0] != gate || op.Inputs[1] != up || len(op.Outputs) != 2 {
		t.Fatalf("swiglu_grad inputs %v outputs %v; want gate, up, dy → dgate, dup", op.Inputs, op.Outputs)
	}
	if w, _ := step.Work(op.ID); w != bwd {
		t.Errorf("swiglu_grad work %+v, want swiglu's backward %+v", w, bwd)
	}
	for _, s := range step.Train.Params {
		want := op.Outputs[0]
		if s.Param == up {
			want = op.Outputs[1]
		}
		if s.Grad != want {
			t.Errorf("gradient of %s is tensor %d; want swiglu_grad's output %d", step.Tensors[s.Param].Name, s.Grad, want)
		}
	}
}
