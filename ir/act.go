package ir

import "fmt"

// The activations of today's mobile and LLaMA-style models: SiLU (x·σ(x)),
// SwiGLU's gated product silu(gate)·up, and MobileNetV3's piecewise-linear
// hard sigmoid and hard swish. Each is one elementwise op with a backward
// op reading the forward inputs, so their sharding rules are the
// elementwise ones and autodiff of a shard is the shard of the gradient.
//
// SwiGLU is one op rather than silu then mul because of what the backward
// keeps: mul's gradient reads silu(gate) as well as up, so the pair holds
// three FFN-wide activations per layer until the backward (gate, silu(gate)
// and up), the fused op two (gate and up; its gradient recomputes σ). It
// also reads and writes the FFN-wide tensors once instead of twice.
const (
	OpSiLU        OpKind = "silu"        // x·σ(x)
	OpSwiGLU      OpKind = "swiglu"      // (gate, up) → silu(gate)·up; equal shapes
	OpHardSwish   OpKind = "hardswish"   // x·relu6(x+3)/6
	OpHardSigmoid OpKind = "hardsigmoid" // relu6(x+3)/6

	OpSiLUGrad        OpKind = "silu_grad"        // (x, dy)
	OpSwiGLUGrad      OpKind = "swiglu_grad"      // (gate, up, dy) → dgate, dup
	OpHardSwishGrad   OpKind = "hardswish_grad"   // (x, dy)
	OpHardSigmoidGrad OpKind = "hardsigmoid_grad" // (x, dy)
)

// actKinds lists this file's operator kinds, for Kinds.
func actKinds() []OpKind {
	return []OpKind{OpSiLU, OpSwiGLU, OpHardSwish, OpHardSigmoid, OpSiLUGrad, OpSwiGLUGrad, OpHardSwishGrad, OpHardSigmoidGrad}
}

// lookupAct is the operator table's entries for this file's kinds.
//
// FLOPs per element: SiLU's forward is an exp, an add, a divide and a
// multiply (counted 5, as sigmoid's 4 plus the product); its backward
// recomputes σ and forms dy·σ·(1 + x·(1 − σ)). The hard variants are a
// few compares and multiply-adds.
func lookupAct(k OpKind) (opDef, bool) {
	switch k {
	case OpSiLU:
		return opDef{1, inferUnary, gradVia(OpSiLUGrad, false), workEW(5, 2)}, true
	case OpSwiGLU:
		return opDef{2, inferSwiGLU, gradSwiGLU, workSwiGLU}, true
	case OpHardSwish:
		return opDef{1, inferUnary, gradVia(OpHardSwishGrad, false), workEW(5, 2)}, true
	case OpHardSigmoid:
		return opDef{1, inferUnary, gradVia(OpHardSigmoidGrad, false), workEW(3, 2)}, true
	case OpSiLUGrad:
		return opDef{2, inferSameShape, nil, workEW(9, 3)}, true
	case OpSwiGLUGrad:
		return opDef{3, inferSwiGLUGrad, nil, workSwiGLUGrad}, true
	case OpHardSwishGrad, OpHardSigmoidGrad:
		return opDef{2, inferSameShape, nil, workEW(4, 3)}, true
	}
	return opDef{}, false
}

// inferSwiGLU: gate and up are one float dtype and one shape, the
// output's. Unlike mul, swiglu does not broadcast: its operands are the
// gate and up projections of the same tokens, always the same shape, and
// a broadcast would need a reduction in the backward that the fused
// kernel does not do.
func inferSwiGLU(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	gate, up := in[0], in[1]
	if err := sameDType(gate, up); err != nil {
		return nil, err
	}
	if !gate.Shape.Equal(up.Shape) {
		return nil, fmt.Errorf("shape mismatch: swiglu gate %q %v and up %q %v must have equal shapes", gate.Name, gate.Shape, up.Name, up.Shape)
	}
	return one(gate.Shape, gate.DType), nil
}

// inferSwiGLUGrad: (gate, up, dy) of one shape → dgate, dup of it.
func inferSwiGLUGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if _, err := inferSwiGLU(a, in[:2]); err != nil {
		return nil, err
	}
	dy := in[2]
	if !dy.Shape.Equal(in[0].Shape) || dy.DType != in[0].DType {
		return nil, fmt.Errorf("shape mismatch: swiglu_grad dy %q %s%v must match gate %q %s%v", dy.Name, dy.DType, dy.Shape, in[0].Name, in[0].DType, in[0].Shape)
	}
	s := in[0].Shape
	return []OutSpec{{Shape: s.Clone(), DType: dy.DType}, {Shape: s.Clone(), DType: dy.DType}}, nil
}

// gradSwiGLU: one swiglu_grad gives both gradients, dgate = dy·up·σ(1 +
// gate(1 − σ)) and dup = dy·silu(gate), from one read of gate, up and dy.
// Both are emitted even when one operand needs none (an input up): the
// pass is the same and the spare output is never read.
func gradSwiGLU(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return c.emit(OpSwiGLUGrad, Attrs{}, op.Inputs[0], op.Inputs[1], dy[0])[:2]
}

// workSwiGLU: the forward is silu's 5 FLOPs an element and the product,
// reading gate and up and writing the output once (silu then mul read and
// write 5 tensors of that size, this 3). The backward is swiglu_grad's.
func workSwiGLU(a *Attrs, in, out []*Tensor) (Work, Work) {
	n := numel(out[0])
	b := n * float64(out[0].DType.Size())
	_, bwd := workSwiGLUGrad(a, in, out)
	return Work{ClassElementwise, 6 * n, 3 * b}, bwd
}

// workSwiGLUGrad: σ recomputed (4 FLOPs), silu(gate) (1), dup (1) and
// dgate = (dy·up)·σ·(1 + gate·(1 − σ)) (6); gate, up and dy read and
// dgate, dup written once.
func workSwiGLUGrad(_ *Attrs, _, out []*Tensor) (Work, Work) {
	n := numel(out[0])
	b := n * float64(out[0].DType.Size())
	w := Work{ClassElementwise, 12 * n, 5 * b}
	return w, w
}

// SiLU is x·σ(x) (PyTorch's SiLU, also called swish).
func (b *Builder) SiLU(x TensorID) TensorID { return b.emit1(OpSiLU, Attrs{}, x) }

// SwiGLU is silu(gate)·up, LLaMA's gated feed-forward activation, as one
// op; gate and up have equal shapes.
func (b *Builder) SwiGLU(gate, up TensorID) TensorID { return b.emit1(OpSwiGLU, Attrs{}, gate, up) }

// HardSwish is x·relu6(x+3)/6, PyTorch's Hardswish.
func (b *Builder) HardSwish(x TensorID) TensorID { return b.emit1(OpHardSwish, Attrs{}, x) }

// HardSigmoid is relu6(x+3)/6, PyTorch's Hardsigmoid.
func (b *Builder) HardSigmoid(x TensorID) TensorID { return b.emit1(OpHardSigmoid, Attrs{}, x) }
