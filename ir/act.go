package ir

// The activations of today's mobile and LLaMA-style models: SiLU (x·σ(x),
// also the gate of SwiGLU), and MobileNetV3's piecewise-linear hard
// sigmoid and hard swish. Each is one elementwise op with a backward op
// reading the forward input, so their sharding rules are the elementwise
// ones and autodiff of a shard is the shard of the gradient.
const (
	OpSiLU        OpKind = "silu"        // x·σ(x)
	OpHardSwish   OpKind = "hardswish"   // x·relu6(x+3)/6
	OpHardSigmoid OpKind = "hardsigmoid" // relu6(x+3)/6

	OpSiLUGrad        OpKind = "silu_grad"        // (x, dy)
	OpHardSwishGrad   OpKind = "hardswish_grad"   // (x, dy)
	OpHardSigmoidGrad OpKind = "hardsigmoid_grad" // (x, dy)
)

// actKinds lists this file's operator kinds, for Kinds.
func actKinds() []OpKind {
	return []OpKind{OpSiLU, OpHardSwish, OpHardSigmoid, OpSiLUGrad, OpHardSwishGrad, OpHardSigmoidGrad}
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
	case OpHardSwish:
		return opDef{1, inferUnary, gradVia(OpHardSwishGrad, false), workEW(5, 2)}, true
	case OpHardSigmoid:
		return opDef{1, inferUnary, gradVia(OpHardSigmoidGrad, false), workEW(3, 2)}, true
	case OpSiLUGrad:
		return opDef{2, inferSameShape, nil, workEW(9, 3)}, true
	case OpHardSwishGrad, OpHardSigmoidGrad:
		return opDef{2, inferSameShape, nil, workEW(4, 3)}, true
	}
	return opDef{}, false
}

// SiLU is x·σ(x) (PyTorch's SiLU, also called swish).
func (b *Builder) SiLU(x TensorID) TensorID { return b.emit1(OpSiLU, Attrs{}, x) }

// HardSwish is x·relu6(x+3)/6, PyTorch's Hardswish.
func (b *Builder) HardSwish(x TensorID) TensorID { return b.emit1(OpHardSwish, Attrs{}, x) }

// HardSigmoid is relu6(x+3)/6, PyTorch's Hardsigmoid.
func (b *Builder) HardSigmoid(x TensorID) TensorID { return b.emit1(OpHardSigmoid, Attrs{}, x) }
