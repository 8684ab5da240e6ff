package ir

import (
	"fmt"
	"math"
)

// Elementwise arithmetic with numpy-style broadcasting, tensor-by-number
// forms, reductions with keep-dims, and the two normalisations without an
// affine shift (RMSNorm, plain layer norm). add and mul (ops.go) broadcast
// the same way; with equal shapes they are exactly what they were.
//
// Broadcasting aligns shapes at their last dims; a missing or size-1 dim
// of one operand stretches over the other's. A size-1 dim stretches over
// size 0 too: a device's empty shard of a dim a broadcast operand lacks.
const (
	OpSub           OpKind = "sub"             // a−b, broadcast
	OpDiv           OpKind = "div"             // a/b, broadcast
	OpNeg           OpKind = "neg"             // −x
	OpExp           OpKind = "exp"             // eˣ
	OpLog           OpKind = "log"             // ln x
	OpSqrt          OpKind = "sqrt"            // √x
	OpRsqrt         OpKind = "rsqrt"           // 1/√x
	OpReciprocal    OpKind = "reciprocal"      // 1/x
	OpPowScalar     OpKind = "pow_scalar"      // x^Value
	OpAddScalar     OpKind = "add_scalar"      // x+Value
	OpMulScalar     OpKind = "mul_scalar"      // x·Value
	OpMaskedFill    OpKind = "masked_fill"     // (x, mask) → Value where mask ≠ 0, else x; mask broadcasts to x, no grad
	OpMean          OpKind = "mean"            // over Axes; KeepDims; Shape (per device) the unsharded input shape
	OpVar           OpKind = "var"             // over Axes, divided by N − Correction; KeepDims
	OpAmax          OpKind = "amax"            // the maximum over Axes; KeepDims
	OpRMSNorm       OpKind = "rms_norm"        // (x, w[d]) → x / √(mean(x²) + Eps) · w over the last dim
	OpLayerNormBare OpKind = "layer_norm_bare" // x → (x − mean) / √(var + Eps) over the last dim: layer_norm without gamma and beta

	OpAmaxGrad          OpKind = "amax_grad"            // (x, y, dy) → dx: dy shared equally among the maxima; Axes, KeepDims
	OpRMSNormGrad       OpKind = "rms_norm_grad"        // (x, w, dy) → dx, dw
	OpLayerNormBareGrad OpKind = "layer_norm_bare_grad" // (x, dy) → dx
)

// arithKinds lists this file's kinds, for Kinds.
func arithKinds() []OpKind {
	return []OpKind{OpSub, OpDiv, OpNeg, OpExp, OpLog, OpSqrt, OpRsqrt, OpReciprocal, OpPowScalar, OpAddScalar,
		OpMulScalar, OpMaskedFill, OpMean, OpVar, OpAmax, OpRMSNorm, OpLayerNormBare, OpAmaxGrad, OpRMSNormGrad,
		OpLayerNormBareGrad}
}

// lookupArith is the operator table's entry for this file's kinds.
func lookupArith(k OpKind) (opDef, bool) {
	switch k {
	case OpSub:
		return opDef{2, inferBroadcast, gradSub, workBroadcast(1)}, true
	case OpDiv:
		return opDef{2, inferBroadcast, gradDiv, workBroadcast(4)}, true
	case OpNeg:
		return opDef{1, inferUnary, gradNeg, workEW(1, 2)}, true
	case OpExp:
		return opDef{1, inferUnary, gradExp, workEW(8, 2)}, true
	case OpLog:
		return opDef{1, inferUnary, gradLog, workEW(8, 2)}, true
	case OpSqrt:
		return opDef{1, inferUnary, gradSqrt, workEW(4, 2)}, true
	case OpRsqrt:
		return opDef{1, inferUnary, gradRsqrt, workEW(5, 2)}, true
	case OpReciprocal:
		return opDef{1, inferUnary, gradReciprocal, workEW(4, 2)}, true
	case OpPowScalar:
		return opDef{1, inferUnary, gradPowScalar, workEW(10, 2)}, true
	case OpAddScalar:
		return opDef{1, inferUnary, gradAddScalar, workEW(1, 2)}, true
	case OpMulScalar:
		return opDef{1, inferUnary, gradMulScalar, workEW(1, 2)}, true
	case OpMaskedFill:
		return opDef{2, inferMaskedFill, gradMaskedFill, workBroadcast(1)}, true
	case OpMean:
		return opDef{1, inferKeepReduce, gradMean, workKeepReduce(1, 1)}, true
	case OpVar:
		return opDef{1, inferKeepReduce, gradVar, workKeepReduce(3, 4)}, true
	case OpAmax:
		return opDef{1, inferKeepReduce, gradAmax, workKeepReduce(1, 2)}, true
	case OpRMSNorm:
		return opDef{2, inferRMSNorm, gradRMSNorm, workNorm(4)}, true
	case OpLayerNormBare:
		return opDef{1, inferLayerNormBare, gradLayerNormBare, workNorm(7)}, true
	case OpAmaxGrad:
		return opDef{3, inferAmaxGrad, nil, workAmaxGrad}, true
	case OpRMSNormGrad:
		return opDef{3, inferRMSNormGrad, nil, workNorm(8)}, true
	case OpLayerNormBareGrad:
		return opDef{2, inferLayerNormBareGrad, nil, workNorm(10)}, true
	}
	return opDef{}, false
}

// BroadcastShapes is the shape a and b broadcast to, with ok false when a
// pair of aligned dims differs and neither is 1.
func BroadcastShapes(a, b Shape) (Shape, bool) {
	r := max(len(a), len(b))
	out := make(Shape, r)
	for i := 0; i < r; i++ {
		da, db := 1, 1
		if j := i - (r - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (r - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db:
			out[i] = da
		case da == 1:
			out[i] = db
		case db == 1:
			out[i] = da
		default:
			return nil, false
		}
	}
	return out, true
}

// BroadcastDim is the dim of an operand of shape in that lines up with
// dim d of the broadcast output out, or −1 when the operand lacks it or
// stretches a size-1 dim over it: the sharding rules split an operand
// with the output only along dims it really has.
func BroadcastDim(in, out Shape, d int) int {
	j := d - (len(out) - len(in))
	if j < 0 || in[j] != out[d] {
		return -1
	}
	return j
}

func inferBroadcast(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	s, ok := BroadcastShapes(in[0].Shape, in[1].Shape)
	if !ok {
		return nil, errShapes("operands do not broadcast (aligned at the last dim, each pair equal or one of them 1)", in[0], in[1])
	}
	return one(s, in[0].DType), nil
}

func inferMaskedFill(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, m := in[0], in[1]
	if err := sameDType(x, m); err != nil {
		return nil, err
	}
	if s, ok := BroadcastShapes(x.Shape, m.Shape); !ok || !s.Equal(x.Shape) {
		return nil, errShapes("masked_fill's mask must broadcast to x's shape", x, m)
	}
	return one(x.Shape, x.DType), nil
}

// keepShape is x's shape with the reduced axes kept as size 1.
func keepShape(x Shape, axes []int) Shape {
	s := x.Clone()
	for _, a := range axes {
		s[a] = 1
	}
	return s
}

// reducedShape is x's shape after reducing axes, kept as 1 or removed.
func reducedShape(x Shape, axes []int, keep bool) Shape {
	if keep {
		return keepShape(x, axes)
	}
	out := Shape{}
	for d, n := range x {
		if !containsInt(axes, d) {
			out = append(out, n)
		}
	}
	return out
}

func inferKeepReduce(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if len(a.Axes) == 0 {
		return nil, fmt.Errorf("reduction of %q %v over no axes; name at least one", x.Name, x.Shape)
	}
	if err := checkAxes(a.Axes, len(x.Shape), "reduction"); err != nil {
		return nil, err
	}
	if a.Shape != nil && len(a.Shape) != len(x.Shape) {
		return nil, fmt.Errorf("reduction of %q %v: unsharded shape %v has another rank", x.Name, x.Shape, a.Shape)
	}
	if a.Correction < 0 {
		return nil, fmt.Errorf("var correction %d must be non-negative", a.Correction)
	}
	return one(reducedShape(x.Shape, a.Axes, a.KeepDims), x.DType), nil
}

func inferAmaxGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	fwd, err := inferKeepReduce(a, in[:1])
	if err != nil {
		return nil, err
	}
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	if !in[1].Shape.Equal(fwd[0].Shape) || !in[2].Shape.Equal(fwd[0].Shape) {
		return nil, errShapes("amax_grad y and dy must have the forward output's shape", in[0], in[2])
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferRMSNorm(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, w := in[0], in[1]
	if err := sameDType(x, w); err != nil {
		return nil, err
	}
	if len(x.Shape) == 0 || !w.Shape.Equal(Shape{x.Shape[len(x.Shape)-1]}) {
		return nil, errShapes("rms_norm wants x[…,d] and weight[d]", x, w)
	}
	if !(a.Eps > 0) {
		return nil, fmt.Errorf("rms_norm eps %v must be positive", a.Eps)
	}
	return one(x.Shape, x.DType), nil
}

func inferRMSNormGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if _, err := inferRMSNorm(a, in[:2]); err != nil {
		return nil, err
	}
	if !in[2].Shape.Equal(in[0].Shape) || in[2].DType != in[0].DType {
		return nil, errShapes("rms_norm_grad dy must match x", in[0], in[2])
	}
	return []OutSpec{{Shape: in[0].Shape.Clone(), DType: in[0].DType}, {Shape: in[1].Shape.Clone(), DType: in[0].DType}}, nil
}

func inferLayerNormBare(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if len(in[0].Shape) == 0 {
		return nil, fmt.Errorf("input %q is a scalar; want rank ≥ 1", in[0].Name)
	}
	if !(a.Eps > 0) {
		return nil, fmt.Errorf("layer_norm_bare eps %v must be positive", a.Eps)
	}
	return inferUnary(a, in)
}

func inferLayerNormBareGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if _, err := inferLayerNormBare(a, in[:1]); err != nil {
		return nil, err
	}
	if !in[1].Shape.Equal(in[0].Shape) || in[1].DType != in[0].DType {
		return nil, errShapes("layer_norm_bare_grad dy must match x", in[0], in[1])
	}
	return one(in[0].Shape, in[0].DType), nil
}

// ---- work ----

// workBroadcast prices a broadcasting binary op: every operand read once,
// the output written once; the backward reads dy and the operands and
// writes one gradient per operand. With equal shapes it is workEW(flops,
// 3), add and mul's price before they broadcast, so no plan changes.
func workBroadcast(flopsPerElem float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(a *Attrs, in, out []*Tensor) (Work, Work) {
		if in[0].Shape.Equal(out[0].Shape) && in[1].Shape.Equal(out[0].Shape) {
			return workEW(flopsPerElem, 3)(a, in, out)
		}
		n := numel(out[0])
		b := bytesOf(in...) + bytesOf(out...)
		return Work{ClassElementwise, flopsPerElem * n, b},
			Work{ClassElementwise, (flopsPerElem + 1) * n, 2*bytesOf(in...) + 2*bytesOf(out...)}
	}
}

// workKeepReduce: fwd flops per input element (var: subtract, square,
// add), the backward's likewise (it writes a gradient of the input's size).
func workKeepReduce(fwdFlops, bwdFlops float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(_ *Attrs, in, out []*Tensor) (Work, Work) {
		n := numel(in[0])
		b := bytesOf(in...) + bytesOf(out...)
		return Work{ClassReduction, fwdFlops * n, b}, Work{ClassElementwise, bwdFlops * n, 2*bytesOf(in...) + bytesOf(out...)}
	}
}

func workAmaxGrad(_ *Attrs, in, out []*Tensor) (Work, Work) {
	w := Work{ClassReduction, 2 * numel(in[0]), bytesOf(in...) + bytesOf(out...)}
	return w, w
}

// ---- gradients ----

// sumTo reduces a gradient d of a broadcast output to an operand's shape:
// summed over the dims the operand lacks or stretched from size 1, then
// reshaped to it. d itself when no dim was broadcast.
func (c *gradCtx) sumTo(d TensorID, to Shape) TensorID {
	s := c.t(d).Shape
	if s.Equal(to) {
		return d
	}
	var axes []int
	off := len(s) - len(to)
	for i := range s {
		if i < off || (to[i-off] == 1 && s[i] != 1) {
			axes = append(axes, i)
		}
	}
	if len(axes) > 0 {
		d = c.emit1(OpReduceSum, Attrs{Axes: axes}, d)
	}
	if !c.t(d).Shape.Equal(to) {
		d = c.emit1(OpReshape, Attrs{Shape: to.Clone()}, d)
	}
	return d
}

// gradAddBroadcast is add's gradient: dy itself for equal shapes (what it
// always was), dy summed to each operand's shape otherwise.
func gradAddBroadcast(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	dx := none(2)
	for i, in := range op.Inputs {
		if c.need(in) {
			dx[i] = c.sumTo(dy[0], c.t(in).Shape)
		}
	}
	return dx
}

func gradMulBroadcast(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	dx := none(2)
	for i, in := range op.Inputs {
		if c.need(in) {
			dx[i] = c.sumTo(c.emit1(OpMul, Attrs{}, dy[0], op.Inputs[1-i]), c.t(in).Shape)
		}
	}
	return dx
}

func gradSub(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	dx := none(2)
	if a := op.Inputs[0]; c.need(a) {
		dx[0] = c.sumTo(dy[0], c.t(a).Shape)
	}
	if b := op.Inputs[1]; c.need(b) {
		dx[1] = c.sumTo(c.emit1(OpNeg, Attrs{}, dy[0]), c.t(b).Shape)
	}
	return dx
}

// gradDiv: with q = dy/b, da = q and db = −q·a/b = −q·y.
func gradDiv(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	dx := none(2)
	a, b := op.Inputs[0], op.Inputs[1]
	q := c.emit1(OpDiv, Attrs{}, dy[0], b)
	if c.need(a) {
		dx[0] = c.sumTo(q, c.t(a).Shape)
	}
	if c.need(b) {
		dx[1] = c.sumTo(c.emit1(OpNeg, Attrs{}, c.emit1(OpMul, Attrs{}, q, op.Outputs[0])), c.t(b).Shape)
	}
	return dx
}

func gradNeg(c *gradCtx, _ *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpNeg, Attrs{}, dy[0])}
}

func gradExp(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpMul, Attrs{}, dy[0], op.Outputs[0])}
}

func gradLog(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpDiv, Attrs{}, dy[0], op.Inputs[0])}
}

// gradSqrt: d√x = 1/(2√x) = ½·dy/y.
func gradSqrt(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	q := c.emit1(OpDiv, Attrs{}, dy[0], op.Outputs[0])
	return []TensorID{c.emit1(OpMulScalar, Attrs{Value: 0.5}, q)}
}

// gradRsqrt: d x^−½ = −½·x^−3/2 = −½·y³.
func gradRsqrt(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	y3 := c.emit1(OpPowScalar, Attrs{Value: 3}, op.Outputs[0])
	return []TensorID{c.emit1(OpMul, Attrs{}, dy[0], c.emit1(OpMulScalar, Attrs{Value: -0.5}, y3))}
}

// gradReciprocal: d(1/x) = −1/x² = −y².
func gradReciprocal(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	y := op.Outputs[0]
	return []TensorID{c.emit1(OpNeg, Attrs{}, c.emit1(OpMul, Attrs{}, dy[0], c.emit1(OpMul, Attrs{}, y, y)))}
}

// gradPowScalar: d xᵖ = p·xᵖ⁻¹ (zero for p = 0).
func gradPowScalar(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	p := op.Attrs.Value
	x := op.Inputs[0]
	if p == 0 {
		return []TensorID{c.emit1(OpFillLike, Attrs{}, x)}
	}
	d := dy[0]
	if p != 1 {
		d = c.emit1(OpMul, Attrs{}, d, c.emit1(OpMulScalar, Attrs{Value: p}, c.emit1(OpPowScalar, Attrs{Value: p - 1}, x)))
	}
	return []TensorID{d}
}

func gradAddScalar(_ *gradCtx, _ *Op, dy []TensorID) []TensorID { return []TensorID{dy[0]} }

func gradMulScalar(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpMulScalar, Attrs{Value: op.Attrs.Value}, dy[0])}
}

// gradMaskedFill: filled elements do not depend on x; the mask is a
// constant and gets no gradient.
func gradMaskedFill(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpMaskedFill, Attrs{}, dy[0], op.Inputs[1]), NoTensor}
}

// ReduceCount is the number of elements a keep-dims reduction of an input
// of shape x combines into each output: the product of the reduced dims of
// the unsharded shape when the op records one (a device's shard of a
// reduced dim still divides by the whole count), else of x.
func ReduceCount(a *Attrs, x Shape) int {
	s := x
	if len(a.Shape) == len(x) {
		s = Shape(a.Shape)
	}
	n := 1
	for _, ax := range a.Axes {
		n *= s[ax]
	}
	return n
}

// keptDy is dy with the reduced dims as size 1, so it broadcasts over x.
func (c *gradCtx) keptDy(op *Op, dy TensorID) TensorID {
	if op.Attrs.KeepDims {
		return dy
	}
	return c.emit1(OpReshape, Attrs{Shape: keepShape(c.t(op.Inputs[0]).Shape, op.Attrs.Axes)}, dy)
}

// gradMean: dx = dy/N spread over the reduced dims (zeros plus the
// broadcast dy, scaled).
func gradMean(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	x := op.Inputs[0]
	spread := c.emit1(OpAdd, Attrs{}, c.emit1(OpFillLike, Attrs{}, x), c.keptDy(op, dy[0]))
	return []TensorID{c.emit1(OpMulScalar, Attrs{Value: 1 / float64(ReduceCount(&op.Attrs, c.t(x).Shape))}, spread)}
}

// gradVar: dx = 2·(x − mean)·dy/(N − correction).
func gradVar(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	x := op.Inputs[0]
	a := op.Attrs
	m := c.emit1(OpMean, Attrs{Axes: cloneInts(a.Axes), KeepDims: true}, x)
	d := c.emit1(OpMul, Attrs{}, c.emit1(OpSub, Attrs{}, x, m), c.keptDy(op, dy[0]))
	den := float64(ReduceCount(&a, c.t(x).Shape) - a.Correction)
	return []TensorID{c.emit1(OpMulScalar, Attrs{Value: 2 / den}, d)}
}

func gradAmax(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := Attrs{Axes: cloneInts(op.Attrs.Axes), KeepDims: op.Attrs.KeepDims}
	return []TensorID{c.emit1(OpAmaxGrad, a, op.Inputs[0], op.Outputs[0], dy[0])}
}

func gradRMSNorm(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return c.emit(OpRMSNormGrad, Attrs{Eps: op.Attrs.Eps}, op.Inputs[0], op.Inputs[1], dy[0])[:2]
}

func gradLayerNormBare(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpLayerNormBareGrad, Attrs{Eps: op.Attrs.Eps}, op.Inputs[0], dy[0])}
}

// ---- builder ----

// Sub is a−b, broadcast.
func (b *Builder) Sub(x, y TensorID) TensorID { return b.emit1(OpSub, Attrs{}, x, y) }

// Div is a/b, broadcast.
func (b *Builder) Div(x, y TensorID) TensorID { return b.emit1(OpDiv, Attrs{}, x, y) }

// Neg is −x.
func (b *Builder) Neg(x TensorID) TensorID { return b.emit1(OpNeg, Attrs{}, x) }

// Exp is eˣ.
func (b *Builder) Exp(x TensorID) TensorID { return b.emit1(OpExp, Attrs{}, x) }

// Log is ln x.
func (b *Builder) Log(x TensorID) TensorID { return b.emit1(OpLog, Attrs{}, x) }

// Sqrt is √x.
func (b *Builder) Sqrt(x TensorID) TensorID { return b.emit1(OpSqrt, Attrs{}, x) }

// Rsqrt is 1/√x.
func (b *Builder) Rsqrt(x TensorID) TensorID { return b.emit1(OpRsqrt, Attrs{}, x) }

// Reciprocal is 1/x.
func (b *Builder) Reciprocal(x TensorID) TensorID { return b.emit1(OpReciprocal, Attrs{}, x) }

// PowScalar is xᵖ.
func (b *Builder) PowScalar(x TensorID, p float64) TensorID {
	return b.emit1(OpPowScalar, Attrs{Value: p}, x)
}

// AddScalar is x+s.
func (b *Builder) AddScalar(x TensorID, s float64) TensorID {
	return b.emit1(OpAddScalar, Attrs{Value: s}, x)
}

// MulScalar is x·s.
func (b *Builder) MulScalar(x TensorID, s float64) TensorID {
	return b.emit1(OpMulScalar, Attrs{Value: s}, x)
}

// MaskedFill is v where mask ≠ 0, else x; mask (a constant of x's dtype)
// broadcasts to x.
func (b *Builder) MaskedFill(x, mask TensorID, v float64) TensorID {
	return b.emit1(OpMaskedFill, Attrs{Value: v}, x, mask)
}

// Mean averages over axes, keeping them as size 1 when keep.
func (b *Builder) Mean(x TensorID, keep bool, axes ...int) TensorID {
	return b.emit1(OpMean, Attrs{Axes: axes, KeepDims: keep}, x)
}

// Var is the variance over axes divided by N − correction (1: unbiased,
// PyTorch's default; 0: the population variance).
func (b *Builder) Var(x TensorID, correction int, keep bool, axes ...int) TensorID {
	return b.emit1(OpVar, Attrs{Axes: axes, KeepDims: keep, Correction: correction}, x)
}

// Amax is the maximum over axes.
func (b *Builder) Amax(x TensorID, keep bool, axes ...int) TensorID {
	return b.emit1(OpAmax, Attrs{Axes: axes, KeepDims: keep}, x)
}

// RMSNormEps is LLaMA's RMSNorm epsilon.
const RMSNormEps = 1e-6

// RMSNorm is x/√(mean(x²) + eps)·w over the last dim.
func (b *Builder) RMSNorm(x, w TensorID, eps float64) TensorID {
	return b.emit1(OpRMSNorm, Attrs{Eps: eps}, x, w)
}

// LayerNormBare is layer norm over the last dim without scale or shift
// (PyTorch's elementwise_affine=False). Over another dim, permute it last
// first (ConvNeXt's channels-first norm is permute, norm, permute back).
func (b *Builder) LayerNormBare(x TensorID, eps float64) TensorID {
	return b.emit1(OpLayerNormBare, Attrs{Eps: eps}, x)
}

// PowExact is x^p computed as the CPU and CUDA kernels do: integer
// exponents by repeated multiplication (exact for negative x, and equal
// between backends), others by math.Pow.
func PowExact(x, p float64) float64 {
	if p == math.Trunc(p) && math.Abs(p) <= 64 {
		n := int(math.Abs(p))
		r := 1.0
		for i := 0; i < n; i++ {
			r *= x
		}
		if p < 0 {
			return 1 / r
		}
		return r
	}
	return math.Pow(x, p)
}
