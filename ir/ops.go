package ir

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// OpKind names an operator.
type OpKind string

// Forward operators (differentiable unless noted).
const (
	OpMatMul            OpKind = "matmul"              // a[...,m,k]·b[...,k,n] or a·b[k,n]; TransA/TransB
	OpAdd               OpKind = "add"                 // a+b, broadcast (arith.go)
	OpMul               OpKind = "mul"                 // a*b, broadcast (arith.go)
	OpBias              OpKind = "bias"                // x + b broadcast: b's dims are x's dims Axes
	OpReLU              OpKind = "relu"                //
	OpGELU              OpKind = "gelu"                // exact: x·Φ(x)
	OpSigmoid           OpKind = "sigmoid"             //
	OpTanh              OpKind = "tanh"                //
	OpDropout           OpKind = "dropout"             // Rate, Seed; mask from a counter-based hash of the element index
	OpSoftmax           OpKind = "softmax"             // over the last dim
	OpLogSoftmax        OpKind = "log_softmax"         // over the last dim
	OpLayerNorm         OpKind = "layer_norm"          // (x, gamma, beta) over the last dim; Eps
	OpEmbedding         OpKind = "embedding"           // (ids int64[...], table[V,d]) → [...,d]
	OpReshape           OpKind = "reshape"             // Shape
	OpPermute           OpKind = "permute"             // Perm: out dim i is in dim Perm[i]
	OpConcat            OpKind = "concat"              // Axis; two or more inputs
	OpSplit             OpKind = "split"               // Axis, Sizes; one output per size
	OpSlice             OpKind = "slice"               // Axis, [Start, End)
	OpAttention         OpKind = "attention"           // (q[...,S,D], k[...,T,D], v[...,T,Dv][, mask[S,T]]); Scale, Causal, KVGroup (ops_llama.go)
	OpConv2D            OpKind = "conv2d"              // (x[N,C,H,W], w[O,C,KH,KW]); Stride, Pad
	OpMaxPool2D         OpKind = "max_pool2d"          // Kernel, Stride
	OpAdaptiveAvgPool2D OpKind = "adaptive_avg_pool2d" // Shape = [OH, OW]
	OpCrossEntropy      OpKind = "cross_entropy"       // (logits[N,C], labels int64[N]) → Σ loss, scalar
	OpNLLLoss           OpKind = "nll_loss"            // (logp[N,C], labels int64[N]) → −Σ logp[i,label], scalar
	OpTop2Gate          OpKind = "top2_gate"           // logits[...,T,E] → combine[...,T,E,C], dispatch[...,T,E,C] (no grad); Capacity per group
	OpEinsum            OpKind = "einsum"              // two operands; Equation like "tec,td->ecd"
	OpReduceSum         OpKind = "reduce_sum"          // sums over Axes, removing them
	OpFillLike          OpKind = "fill_like"           // a tensor shaped like the input, every element Scale (no grad)
)

// Backward operators, emitted by autodiff; not themselves differentiable.
const (
	OpReLUGrad              OpKind = "relu_grad"                // (x, dy)
	OpGELUGrad              OpKind = "gelu_grad"                // (x, dy)
	OpSigmoidGrad           OpKind = "sigmoid_grad"             // (y, dy)
	OpTanhGrad              OpKind = "tanh_grad"                // (y, dy)
	OpSoftmaxGrad           OpKind = "softmax_grad"             // (y, dy)
	OpLogSoftmaxGrad        OpKind = "log_softmax_grad"         // (y, dy)
	OpLayerNormGrad         OpKind = "layer_norm_grad"          // (x, gamma, dy) → dx, dgamma, dbeta
	OpEmbeddingGrad         OpKind = "embedding_grad"           // (ids, dy) → dtable; Shape = table shape
	OpPad                   OpKind = "pad"                      // slice's adjoint: dy placed at Start on Axis of zeros shaped Shape
	OpAttentionGrad         OpKind = "attention_grad"           // (q, k, v, dy[, mask]) → dq, dk, dv
	OpConv2DGradInput       OpKind = "conv2d_grad_input"        // (dy, w); Shape = x shape
	OpConv2DGradWeight      OpKind = "conv2d_grad_weight"       // (x, dy); Shape = w shape
	OpMaxPool2DGrad         OpKind = "max_pool2d_grad"          // (x, dy)
	OpAdaptiveAvgPool2DGrad OpKind = "adaptive_avg_pool2d_grad" // (dy); Shape = x shape
	OpCrossEntropyGrad      OpKind = "cross_entropy_grad"       // (logits, labels, dloss)
	OpNLLLossGrad           OpKind = "nll_loss_grad"            // (labels, dloss); Shape = logp shape
	OpTop2GateGrad          OpKind = "top2_gate_grad"           // (logits, dcombine)
)

// Collective operators. They appear only in the per-device programs that
// lowering emits: each device's program holds its local shard, and the op
// exchanges data with the other members of its group (Attrs.Group, or
// every device in order when it is empty). Sizes gives every rank's length
// along Axis, Rank this device's index in the group. Their gradients are their adjoint collectives, so autodiff of a
// device's local program yields the distributed backward pass.
const (
	OpAllGather     OpKind = "all_gather"     // Gather(Axis) → Identity: pieces of Sizes concatenated; grad reduce_scatter
	OpReduceScatter OpKind = "reduce_scatter" // Reduce → Gather(Axis): the sum, cut into Sizes; grad all_gather
	OpAllReduce     OpKind = "all_reduce"     // Reduce → Identity: the sum; grad all_reduce
	OpAllToAll      OpKind = "all_to_all"     // Gather(Axes[0]) → Gather(Axes[1]); Sizes along Axes[0], Split along Axes[1]
	OpDynamicSlice  OpKind = "dynamic_slice"  // Identity → Gather(Axis): the local piece, no communication; grad pad
	OpReplicate     OpKind = "replicate"      // a value every device of its group holds whole; identity forward, all_reduce (same group) backward
)

// IsCollective reports whether kind exchanges data between devices.
func IsCollective(k OpKind) bool {
	switch k {
	case OpAllGather, OpReduceScatter, OpAllReduce, OpAllToAll:
		return true
	}
	return false
}

// Optimizer update operators.
const (
	OpSGDUpdate  OpKind = "sgd_update"  // (p, g) → p − LR·g
	OpAdamUpdate OpKind = "adam_update" // (p, g, m, v, step) → p', m', v'; LR, Betas, Eps
)

// Work classes: an op's kind of arithmetic, the cost model's unit of
// efficiency (cost.ClassEfficiency, and a measured profile's rows).
const (
	ClassMatMul        = "matmul"
	ClassConv          = "conv"
	ClassAttention     = "attention"
	ClassElementwise   = "elementwise"
	ClassReduction     = "reduction"
	ClassNormalization = "normalization"
	ClassEmbedding     = "embedding"
	ClassDataMovement  = "data-movement"
	ClassLoss          = "loss"
	ClassOptimizer     = "optimizer"
)

// Work is the arithmetic and memory traffic of one op execution: a work
// class, floating-point operations and bytes moved to and from device
// memory. Forward and backward work of an op are separate Work values. It is
// what the IR states and what the cost model (cost.Model.ComputeTime) and
// the per-device program format (devprog.Kernel) price.
type Work struct {
	Class string  `json:"class"`
	FLOPs float64 `json:"flops"`
	Bytes float64 `json:"bytes"`
}

// OutSpec is what shape inference derives for one output.
type OutSpec struct {
	Shape  Shape
	DType  DType
	NoGrad bool
}

// opDef is one operator's table entry.
type opDef struct {
	// inputs is the exact arity, or −n for "at least n".
	inputs int
	infer  func(a *Attrs, in []*Tensor) ([]OutSpec, error)
	// grad emits the ops computing each input's gradient from the outputs'
	// gradients dy (NoTensor where an output gets none) and returns one
	// tensor per input (NoTensor where the input gets none). nil: the op is
	// not differentiable.
	grad func(c *gradCtx, op *Op, dy []TensorID) []TensorID
	work func(a *Attrs, in, out []*Tensor) (fwd, bwd Work)
}

// Kinds lists every operator kind, sorted.
func Kinds() []OpKind {
	ks := []OpKind{OpMatMul, OpAdd, OpMul, OpBias, OpReLU, OpGELU, OpSigmoid, OpTanh, OpDropout, OpSoftmax,
		OpLogSoftmax, OpLayerNorm, OpEmbedding, OpReshape, OpPermute, OpConcat, OpSplit, OpSlice, OpAttention,
		OpConv2D, OpMaxPool2D, OpAdaptiveAvgPool2D, OpCrossEntropy, OpNLLLoss, OpTop2Gate, OpEinsum,
		OpReduceSum, OpFillLike, OpReLUGrad, OpGELUGrad, OpSigmoidGrad, OpTanhGrad, OpSoftmaxGrad,
		OpLogSoftmaxGrad, OpLayerNormGrad, OpEmbeddingGrad, OpPad, OpAttentionGrad, OpConv2DGradInput,
		OpConv2DGradWeight, OpMaxPool2DGrad, OpAdaptiveAvgPool2DGrad, OpCrossEntropyGrad, OpNLLLossGrad,
		OpTop2GateGrad, OpSGDUpdate, OpAdamUpdate, OpAllGather, OpReduceScatter, OpAllReduce, OpAllToAll,
		OpDynamicSlice, OpReplicate}
	ks = append(ks, actKinds()...)
	ks = append(ks, llamaKinds()...)
	ks = append(ks, poolKinds()...)
	ks = append(ks, batchNormKinds()...)
	ks = append(ks, arithKinds()...)
	ks = append(ks, gatherKinds()...)
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// IsDifferentiable reports whether autodiff can propagate through kind.
func IsDifferentiable(k OpKind) bool {
	d, ok := lookup(k)
	return ok && d.grad != nil
}

// lookup is the operator table. It is a switch rather than a package-level
// map because entries refer to the builder, which refers back to the table.
func lookup(k OpKind) (opDef, bool) {
	switch k {
	case OpMatMul:
		return opDef{2, inferMatMul, gradMatMul, workMatMul}, true
	case OpAdd:
		return opDef{2, inferBroadcast, gradAddBroadcast, workBroadcast(1)}, true
	case OpMul:
		return opDef{2, inferBroadcast, gradMulBroadcast, workBroadcast(1)}, true
	case OpBias:
		return opDef{2, inferBias, gradBias, workEW(1, 2)}, true
	case OpReLU:
		return opDef{1, inferUnary, gradVia(OpReLUGrad, false), workEW(1, 2)}, true
	case OpGELU:
		return opDef{1, inferUnary, gradVia(OpGELUGrad, false), workEW(20, 2)}, true
	case OpSigmoid:
		return opDef{1, inferUnary, gradVia(OpSigmoidGrad, true), workEW(4, 2)}, true
	case OpTanh:
		return opDef{1, inferUnary, gradVia(OpTanhGrad, true), workEW(4, 2)}, true
	case OpDropout:
		return opDef{1, inferDropout, gradDropout, workEW(3, 2)}, true
	case OpSoftmax:
		return opDef{1, inferLastDim, gradVia(OpSoftmaxGrad, true), workNorm(5)}, true
	case OpLogSoftmax:
		return opDef{1, inferLastDim, gradVia(OpLogSoftmaxGrad, true), workNorm(5)}, true
	case OpLayerNorm:
		return opDef{3, inferLayerNorm, gradLayerNorm, workNorm(8)}, true
	case OpEmbedding:
		return opDef{2, inferEmbedding, gradEmbedding, workEmbedding}, true
	case OpReshape:
		return opDef{1, inferReshape, gradReshape, workFree}, true
	case OpPermute:
		return opDef{1, inferPermute, gradPermute, workMove}, true
	case OpConcat:
		return opDef{-2, inferConcat, gradConcat, workMove}, true
	case OpSplit:
		return opDef{1, inferSplit, gradSplit, workMove}, true
	case OpSlice:
		return opDef{1, inferSlice, gradSlice, workMove}, true
	case OpAttention:
		return opDef{-3, inferAttention, gradAttention, workAttention}, true
	case OpConv2D:
		return opDef{2, inferConv2D, gradConv2D, workConv2D}, true
	case OpMaxPool2D:
		return opDef{1, inferMaxPool, gradMaxPool, workPool}, true
	case OpAdaptiveAvgPool2D:
		return opDef{1, inferAdaptivePool, gradAdaptivePool, workPool}, true
	case OpCrossEntropy:
		return opDef{2, inferLoss, gradCrossEntropy, workLoss(6)}, true
	case OpNLLLoss:
		return opDef{2, inferLoss, gradNLL, workLoss(1)}, true
	case OpTop2Gate:
		return opDef{1, inferTop2Gate, gradTop2Gate, workGate}, true
	case OpEinsum:
		return opDef{2, inferEinsum, gradEinsum, workEinsum}, true
	case OpReduceSum:
		return opDef{1, inferReduceSum, gradReduceSum, workReduce}, true
	case OpFillLike:
		return opDef{1, inferFillLike, nil, workEW(0, 1)}, true

	case OpReLUGrad, OpGELUGrad, OpSigmoidGrad, OpTanhGrad:
		return opDef{2, inferSameShape, nil, workEW(4, 3)}, true
	case OpSoftmaxGrad, OpLogSoftmaxGrad:
		return opDef{2, inferSameShape, nil, workNorm(4)}, true
	case OpLayerNormGrad:
		return opDef{3, inferLayerNormGrad, nil, workNorm(12)}, true
	case OpEmbeddingGrad:
		return opDef{2, inferEmbeddingGrad, nil, workEmbedding}, true
	case OpPad:
		return opDef{1, inferPad, gradPad, workMove}, true
	case OpAllGather:
		return opDef{1, inferGatherLike(false), gradVia2(OpReduceScatter), workFree}, true
	case OpReduceScatter:
		return opDef{1, inferGatherLike(true), gradVia2(OpAllGather), workFree}, true
	case OpDynamicSlice:
		return opDef{1, inferDynamicSlice, gradDynamicSlice, workFree}, true
	case OpAllReduce:
		return opDef{1, inferUnary, gradVia2(OpAllReduce), workFree}, true
	case OpReplicate:
		return opDef{1, inferUnary, gradVia2(OpAllReduce), workFree}, true
	case OpAllToAll:
		return opDef{1, inferAllToAll, gradAllToAll, workFree}, true
	case OpAttentionGrad:
		return opDef{-4, inferAttentionGrad, nil, workAttentionGrad}, true
	case OpConv2DGradInput:
		return opDef{2, inferConvGradInput, nil, workConv2DGradInput}, true
	case OpConv2DGradWeight:
		return opDef{2, inferConvGradWeight, nil, workConv2DGradWeight}, true
	case OpMaxPool2DGrad:
		return opDef{2, inferMaxPoolGrad, nil, workPool}, true
	case OpAdaptiveAvgPool2DGrad:
		return opDef{1, inferAdaptivePoolGrad, nil, workPool}, true
	case OpCrossEntropyGrad:
		return opDef{3, inferCrossEntropyGrad, nil, workLoss(6)}, true
	case OpNLLLossGrad:
		return opDef{2, inferNLLGrad, nil, workLoss(1)}, true
	case OpTop2GateGrad:
		return opDef{2, inferTop2GateGrad, nil, workGate}, true
	case OpSGDUpdate:
		return opDef{2, inferSameShape, nil, workOpt(2)}, true
	case OpAdamUpdate:
		return opDef{5, inferAdam, nil, workOpt(12)}, true
	}
	if d, ok := lookupAct(k); ok {
		return d, true
	}
	if d, ok := lookupPool(k); ok {
		return d, true
	}
	if d, ok := lookupBatchNorm(k); ok {
		return d, true
	}
	if d, ok := lookupLlama(k); ok {
		return d, true
	}
	if d, ok := lookupGather(k); ok {
		return d, true
	}
	return lookupArith(k)
}

// ---- shape inference ----

func errShapes(what string, a, b *Tensor) error {
	return fmt.Errorf("shape mismatch: %s: %q is %s%v, %q is %s%v", what, a.Name, a.DType, a.Shape, b.Name, b.DType, b.Shape)
}

func needFloat(ts ...*Tensor) error {
	for _, t := range ts {
		if !t.DType.IsFloat() {
			return fmt.Errorf("input %q is %s; want a float tensor", t.Name, t.DType)
		}
	}
	return nil
}

func sameDType(ts ...*Tensor) error {
	if err := needFloat(ts...); err != nil {
		return err
	}
	for _, t := range ts[1:] {
		if t.DType != ts[0].DType {
			return fmt.Errorf("dtype mismatch: %q is %s, %q is %s", ts[0].Name, ts[0].DType, t.Name, t.DType)
		}
	}
	return nil
}

func one(s Shape, dt DType) []OutSpec { return []OutSpec{{Shape: s.Clone(), DType: dt}} }

func inferUnary(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := needFloat(in[0]); err != nil {
		return nil, err
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferSameShape(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	for _, t := range in[1:] {
		if !t.Shape.Equal(in[0].Shape) {
			return nil, errShapes("operands must have equal shapes", in[0], t)
		}
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferDropout(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if !(a.Rate >= 0 && a.Rate < 1) {
		return nil, fmt.Errorf("dropout rate %v outside [0, 1)", a.Rate)
	}
	return inferUnary(a, in)
}

func inferLastDim(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if len(in[0].Shape) == 0 {
		return nil, fmt.Errorf("input %q is a scalar; want rank ≥ 1", in[0].Name)
	}
	return inferUnary(a, in)
}

func checkAxes(axes []int, rank int, what string) error {
	for i, ax := range axes {
		if ax < 0 || ax >= rank {
			return fmt.Errorf("%s axis %d out of range for rank %d", what, ax, rank)
		}
		if i > 0 && ax <= axes[i-1] {
			return fmt.Errorf("%s axes %v must be strictly increasing", what, axes)
		}
	}
	return nil
}

func inferBias(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, b := in[0], in[1]
	if err := sameDType(x, b); err != nil {
		return nil, err
	}
	if err := checkAxes(a.Axes, len(x.Shape), "bias"); err != nil {
		return nil, err
	}
	if len(b.Shape) != len(a.Axes) {
		return nil, errShapes(fmt.Sprintf("bias over axes %v", a.Axes), x, b)
	}
	for i, ax := range a.Axes {
		if b.Shape[i] != x.Shape[ax] {
			return nil, errShapes(fmt.Sprintf("bias over axes %v", a.Axes), x, b)
		}
	}
	return one(x.Shape, x.DType), nil
}

// matmulDims returns (batch, m, k) of a and (k, n) of b under the transposes.
func inferMatMul(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, w := in[0], in[1]
	if err := sameDType(x, w); err != nil {
		return nil, err
	}
	rx, rw := len(x.Shape), len(w.Shape)
	if rx < 2 || rw < 2 {
		return nil, errShapes("matmul operands need rank ≥ 2", x, w)
	}
	m, k := x.Shape[rx-2], x.Shape[rx-1]
	if a.TransA {
		m, k = k, m
	}
	k2, n := w.Shape[rw-2], w.Shape[rw-1]
	if a.TransB {
		k2, n = n, k2
	}
	if k != k2 {
		return nil, errShapes(fmt.Sprintf("matmul contraction %d vs %d (trans_a=%v trans_b=%v)", k, k2, a.TransA, a.TransB), x, w)
	}
	batch := x.Shape[:rx-2]
	switch {
	case rw == 2:
		if a.TransA && rx > 2 {
			return nil, errShapes("matmul with trans_a needs b batched like a", x, w)
		}
	case rw == rx:
		if !Shape(batch).Equal(w.Shape[:rw-2]) {
			return nil, errShapes("matmul batch dimensions differ", x, w)
		}
	default:
		return nil, errShapes("matmul b must be rank 2 or match a's rank", x, w)
	}
	out := append(Shape{}, batch...)
	return one(append(out, m, n), x.DType), nil
}

func inferLayerNorm(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, g, b := in[0], in[1], in[2]
	if err := sameDType(x, g, b); err != nil {
		return nil, err
	}
	if len(x.Shape) == 0 {
		return nil, fmt.Errorf("input %q is a scalar", x.Name)
	}
	d := x.Shape[len(x.Shape)-1]
	if !g.Shape.Equal(Shape{d}) || !b.Shape.Equal(Shape{d}) {
		return nil, errShapes("layer_norm gamma and beta must be [last dim of x]", x, g)
	}
	if !(a.Eps > 0) {
		return nil, fmt.Errorf("layer_norm eps %v must be positive", a.Eps)
	}
	return one(x.Shape, x.DType), nil
}

func inferLayerNormGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, g, dy := in[0], in[1], in[2]
	if err := sameDType(x, g, dy); err != nil {
		return nil, err
	}
	if !x.Shape.Equal(dy.Shape) || len(x.Shape) == 0 || !g.Shape.Equal(Shape{x.Shape[len(x.Shape)-1]}) {
		return nil, errShapes("layer_norm_grad", x, dy)
	}
	return []OutSpec{{Shape: x.Shape.Clone(), DType: x.DType}, {Shape: g.Shape.Clone(), DType: x.DType}, {Shape: g.Shape.Clone(), DType: x.DType}}, nil
}

func inferEmbedding(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	ids, tab := in[0], in[1]
	if ids.DType != Int64 {
		return nil, fmt.Errorf("embedding ids %q are %s; want int64", ids.Name, ids.DType)
	}
	if err := needFloat(tab); err != nil {
		return nil, err
	}
	if len(tab.Shape) != 2 {
		return nil, fmt.Errorf("embedding table %q is %v; want [vocab, dim]", tab.Name, tab.Shape)
	}
	return one(append(ids.Shape.Clone(), tab.Shape[1]), tab.DType), nil
}

func inferEmbeddingGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	ids, dy := in[0], in[1]
	if ids.DType != Int64 {
		return nil, fmt.Errorf("embedding ids %q are %s; want int64", ids.Name, ids.DType)
	}
	if err := needFloat(dy); err != nil {
		return nil, err
	}
	if len(a.Shape) != 2 || !dy.Shape.Equal(append(ids.Shape.Clone(), a.Shape[1])) {
		return nil, errShapes(fmt.Sprintf("embedding_grad for table %v", a.Shape), ids, dy)
	}
	return one(Shape(a.Shape), dy.DType), nil
}

func inferReshape(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	s := Shape(a.Shape)
	for _, d := range s {
		if d < 0 {
			return nil, fmt.Errorf("reshape target %v has a negative dimension", s)
		}
	}
	if s.Numel() != in[0].Shape.Numel() {
		return nil, fmt.Errorf("shape mismatch: cannot reshape %q %v (%d elements) to %v (%d elements)", in[0].Name, in[0].Shape, in[0].Shape.Numel(), s, s.Numel())
	}
	return one(s, in[0].DType), nil
}

func inferPermute(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if len(a.Perm) != len(x.Shape) {
		return nil, fmt.Errorf("perm %v has %d entries; %q has rank %d", a.Perm, len(a.Perm), x.Name, len(x.Shape))
	}
	seen := make([]bool, len(a.Perm))
	out := make(Shape, len(a.Perm))
	for i, p := range a.Perm {
		if p < 0 || p >= len(a.Perm) || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", a.Perm, len(a.Perm)-1)
		}
		seen[p] = true
		out[i] = x.Shape[p]
	}
	return one(out, x.DType), nil
}

func inferConcat(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if a.Axis < 0 || a.Axis >= len(x.Shape) {
		return nil, fmt.Errorf("concat axis %d out of range for rank %d", a.Axis, len(x.Shape))
	}
	out := x.Shape.Clone()
	for _, t := range in[1:] {
		if t.DType != x.DType || len(t.Shape) != len(x.Shape) {
			return nil, errShapes("concat operands differ in rank or dtype", x, t)
		}
		for d := range t.Shape {
			if d != a.Axis && t.Shape[d] != x.Shape[d] {
				return nil, errShapes(fmt.Sprintf("concat operands differ off axis %d", a.Axis), x, t)
			}
		}
		out[a.Axis] += t.Shape[a.Axis]
	}
	return one(out, x.DType), nil
}

func inferSplit(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if a.Axis < 0 || a.Axis >= len(x.Shape) {
		return nil, fmt.Errorf("split axis %d out of range for rank %d", a.Axis, len(x.Shape))
	}
	sum := 0
	out := make([]OutSpec, len(a.Sizes))
	for i, s := range a.Sizes {
		if s <= 0 {
			return nil, fmt.Errorf("split sizes %v must be positive", a.Sizes)
		}
		sum += s
		sh := x.Shape.Clone()
		sh[a.Axis] = s
		out[i] = OutSpec{Shape: sh, DType: x.DType}
	}
	if len(a.Sizes) == 0 || sum != x.Shape[a.Axis] {
		return nil, fmt.Errorf("split sizes %v do not sum to dim %d of %q %v", a.Sizes, a.Axis, x.Name, x.Shape)
	}
	return out, nil
}

func inferSlice(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if a.Axis < 0 || a.Axis >= len(x.Shape) {
		return nil, fmt.Errorf("slice axis %d out of range for rank %d", a.Axis, len(x.Shape))
	}
	if a.Start < 0 || a.End < a.Start || a.End > x.Shape[a.Axis] {
		return nil, fmt.Errorf("slice [%d,%d) out of range for dim %d of %q %v", a.Start, a.End, a.Axis, x.Name, x.Shape)
	}
	out := x.Shape.Clone()
	out[a.Axis] = a.End - a.Start
	return one(out, x.DType), nil
}

func inferPad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	dy := in[0]
	s := Shape(a.Shape)
	if len(s) != len(dy.Shape) || a.Axis < 0 || a.Axis >= len(s) || a.Start < 0 || a.Start+dy.Shape[a.Axis] > s[a.Axis] {
		return nil, fmt.Errorf("pad of %q %v into %v at %d on axis %d does not fit", dy.Name, dy.Shape, s, a.Start, a.Axis)
	}
	for d := range s {
		if d != a.Axis && s[d] != dy.Shape[d] {
			return nil, fmt.Errorf("pad of %q %v into %v differs off axis %d", dy.Name, dy.Shape, s, a.Axis)
		}
	}
	return one(s, dy.DType), nil
}

// checkPieces validates a collective's per-rank lengths and rank.
func checkPieces(a *Attrs, rank int) error {
	if a.Axis < 0 || a.Axis >= rank {
		return fmt.Errorf("axis %d out of range for rank %d", a.Axis, rank)
	}
	if len(a.Sizes) == 0 || a.Rank < 0 || a.Rank >= len(a.Sizes) {
		return fmt.Errorf("rank %d outside the group of %d", a.Rank, len(a.Sizes))
	}
	if len(a.Group) > 0 && len(a.Group) != len(a.Sizes) {
		return fmt.Errorf("%d pieces %v for a group of %d devices %v", len(a.Sizes), a.Sizes, len(a.Group), a.Group)
	}
	for _, s := range a.Sizes {
		if s < 0 {
			return fmt.Errorf("piece sizes %v must be non-negative", a.Sizes)
		}
	}
	return nil
}

func sumInts(s []int) int {
	t := 0
	for _, v := range s {
		t += v
	}
	return t
}

// inferGatherLike: from a local piece (Sizes[Rank] along Axis) to the whole
// (ΣSizes), or, when shrink, the reverse.
func inferGatherLike(shrink bool) func(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	return func(a *Attrs, in []*Tensor) ([]OutSpec, error) {
		x := in[0]
		if err := needFloat(x); err != nil {
			return nil, err
		}
		if err := checkPieces(a, len(x.Shape)); err != nil {
			return nil, err
		}
		from, to := a.Sizes[a.Rank], sumInts(a.Sizes)
		if shrink {
			from, to = to, from
		}
		if x.Shape[a.Axis] != from {
			return nil, fmt.Errorf("input %q is %v; dim %d should be %d for pieces %v at rank %d", x.Name, x.Shape, a.Axis, from, a.Sizes, a.Rank)
		}
		out := x.Shape.Clone()
		out[a.Axis] = to
		return one(out, x.DType), nil
	}
}

// inferDynamicSlice is inferGatherLike(true) for any dtype: integer ids
// and labels are sliced too.
func inferDynamicSlice(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := *in[0]
	dt := x.DType
	x.DType = Float64
	out, err := inferGatherLike(true)(a, []*Tensor{&x})
	if err != nil {
		return nil, err
	}
	out[0].DType = dt
	return out, nil
}

func inferAllToAll(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if len(a.Axes) != 2 || a.Axes[0] == a.Axes[1] {
		return nil, fmt.Errorf("all_to_all wants axes [from, to], got %v", a.Axes)
	}
	i, j := a.Axes[0], a.Axes[1]
	if j < 0 || j >= len(x.Shape) {
		return nil, fmt.Errorf("axis %d out of range for rank %d", j, len(x.Shape))
	}
	b := *a
	b.Axis = i
	if err := checkPieces(&b, len(x.Shape)); err != nil {
		return nil, err
	}
	if len(a.Split) != len(a.Sizes) {
		return nil, fmt.Errorf("all_to_all split %v and sizes %v differ in group size", a.Split, a.Sizes)
	}
	for _, s := range a.Split {
		if s < 0 {
			return nil, fmt.Errorf("split %v must be non-negative", a.Split)
		}
	}
	if x.Shape[i] != a.Sizes[a.Rank] || x.Shape[j] != sumInts(a.Split) {
		return nil, fmt.Errorf("input %q is %v; want dim %d = %d and dim %d = %d", x.Name, x.Shape, i, a.Sizes[a.Rank], j, sumInts(a.Split))
	}
	out := x.Shape.Clone()
	out[i], out[j] = sumInts(a.Sizes), a.Split[a.Rank]
	return one(out, x.DType), nil
}

func convOut(h, k, stride, pad int) int { return (h+2*pad-k)/stride + 1 }

func inferConv2D(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, w := in[0], in[1]
	if err := sameDType(x, w); err != nil {
		return nil, err
	}
	if len(x.Shape) != 4 || len(w.Shape) != 4 {
		return nil, errShapes("conv2d wants x[N,C,H,W] and w[O,C/groups,KH,KW]", x, w)
	}
	if err := checkConvGroups(a, x, w); err != nil {
		return nil, err
	}
	if a.Stride < 1 || a.Pad < 0 {
		return nil, fmt.Errorf("conv2d stride %d must be ≥ 1 and pad %d ≥ 0", a.Stride, a.Pad)
	}
	oh, ow := convOut(x.Shape[2], w.Shape[2], a.Stride, a.Pad), convOut(x.Shape[3], w.Shape[3], a.Stride, a.Pad)
	if x.Shape[2]+2*a.Pad < w.Shape[2] || x.Shape[3]+2*a.Pad < w.Shape[3] {
		return nil, errShapes("conv2d kernel larger than padded input", x, w)
	}
	return one(Shape{x.Shape[0], w.Shape[0], oh, ow}, x.DType), nil
}

func inferConvGradInput(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	dy, w := in[0], in[1]
	xs := &Tensor{Name: "x", Shape: Shape(a.Shape), DType: dy.DType}
	fwd, err := inferConv2D(a, []*Tensor{xs, w})
	if err != nil {
		return nil, err
	}
	if !fwd[0].Shape.Equal(dy.Shape) {
		return nil, errShapes("conv2d_grad_input dy must match the forward output", xs, dy)
	}
	return one(xs.Shape, dy.DType), nil
}

func inferConvGradWeight(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, dy := in[0], in[1]
	ws := &Tensor{Name: "w", Shape: Shape(a.Shape), DType: x.DType}
	fwd, err := inferConv2D(a, []*Tensor{x, ws})
	if err != nil {
		return nil, err
	}
	if !fwd[0].Shape.Equal(dy.Shape) {
		return nil, errShapes("conv2d_grad_weight dy must match the forward output", x, dy)
	}
	return one(ws.Shape, x.DType), nil
}

func inferMaxPool(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if len(x.Shape) != 4 {
		return nil, fmt.Errorf("max_pool2d wants x[N,C,H,W], got %q %v", x.Name, x.Shape)
	}
	if a.Pad != 0 {
		// Padded (−∞ around the image, PyTorch's padding): avg_pool2d's
		// geometry and checks.
		s, err := avgPoolOut(a, x.Shape, x.Name)
		if err != nil {
			return nil, fmt.Errorf("max_pool2d: %w", err)
		}
		return one(s, x.DType), nil
	}
	if a.Kernel < 1 || a.Stride < 1 || a.Kernel > x.Shape[2] || a.Kernel > x.Shape[3] {
		return nil, fmt.Errorf("max_pool2d kernel %d stride %d invalid for %q %v", a.Kernel, a.Stride, x.Name, x.Shape)
	}
	return one(Shape{x.Shape[0], x.Shape[1], (x.Shape[2]-a.Kernel)/a.Stride + 1, (x.Shape[3]-a.Kernel)/a.Stride + 1}, x.DType), nil
}

func inferMaxPoolGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	fwd, err := inferMaxPool(a, in[:1])
	if err != nil {
		return nil, err
	}
	if !fwd[0].Shape.Equal(in[1].Shape) {
		return nil, errShapes("max_pool2d_grad dy must match the forward output", in[0], in[1])
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferAdaptivePool(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if len(x.Shape) != 4 || len(a.Shape) != 2 || a.Shape[0] < 1 || a.Shape[1] < 1 {
		return nil, fmt.Errorf("adaptive_avg_pool2d wants x[N,C,H,W] and shape [OH,OW], got %q %v and %v", x.Name, x.Shape, a.Shape)
	}
	return one(Shape{x.Shape[0], x.Shape[1], a.Shape[0], a.Shape[1]}, x.DType), nil
}

func inferAdaptivePoolGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	dy := in[0]
	if len(a.Shape) != 4 || len(dy.Shape) != 4 || dy.Shape[0] != a.Shape[0] || dy.Shape[1] != a.Shape[1] {
		return nil, fmt.Errorf("adaptive_avg_pool2d_grad: dy %v does not fit input shape %v", dy.Shape, a.Shape)
	}
	return one(Shape(a.Shape), dy.DType), nil
}

func checkLabels(logits, labels *Tensor) error {
	if labels.DType != Int64 {
		return fmt.Errorf("labels %q are %s; want int64", labels.Name, labels.DType)
	}
	if len(logits.Shape) != 2 || !labels.Shape.Equal(Shape{logits.Shape[0]}) {
		return errShapes("loss wants scores[N,C] and labels[N]", logits, labels)
	}
	return needFloat(logits)
}

func inferLoss(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := checkLabels(in[0], in[1]); err != nil {
		return nil, err
	}
	return one(Shape{}, in[0].DType), nil
}

func inferCrossEntropyGrad(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := checkLabels(in[0], in[1]); err != nil {
		return nil, err
	}
	if len(in[2].Shape) != 0 {
		return nil, fmt.Errorf("cross_entropy_grad dloss %q must be a scalar, got %v", in[2].Name, in[2].Shape)
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferNLLGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	s := &Tensor{Name: "logp", Shape: Shape(a.Shape), DType: in[1].DType}
	if err := checkLabels(s, in[0]); err != nil {
		return nil, err
	}
	if len(in[1].Shape) != 0 {
		return nil, fmt.Errorf("nll_loss_grad dloss %q must be a scalar, got %v", in[1].Name, in[1].Shape)
	}
	return one(s.Shape, in[1].DType), nil
}

func inferTop2Gate(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	// Dims before the last two are groups, each gated on its own (GShard's
	// group dimension): capacity counts tokens within one group.
	if r := len(x.Shape); r < 2 || x.Shape[r-1] < 2 {
		return nil, fmt.Errorf("top2_gate wants logits[groups..., tokens, experts ≥ 2], got %q %v", x.Name, x.Shape)
	}
	if a.Capacity < 1 {
		return nil, fmt.Errorf("top2_gate capacity %d must be ≥ 1", a.Capacity)
	}
	s := append(x.Shape.Clone(), a.Capacity)
	return []OutSpec{{Shape: s, DType: x.DType}, {Shape: s.Clone(), DType: x.DType, NoGrad: true}}, nil
}

func inferTop2GateGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	fwd, err := inferTop2Gate(a, in[:1])
	if err != nil {
		return nil, err
	}
	if !in[1].Shape.Equal(fwd[0].Shape) {
		return nil, errShapes("top2_gate_grad dcombine must match combine", in[0], in[1])
	}
	return one(in[0].Shape, in[0].DType), nil
}

// Einsum is a parsed two-operand einsum equation: single-letter indices,
// none repeated within an operand.
type Einsum struct{ A, B, Out string }

// ParseEinsum parses "ab,bc->ac".
func ParseEinsum(eq string) (Einsum, error) {
	lhs, out, ok := strings.Cut(eq, "->")
	a, b, ok2 := strings.Cut(lhs, ",")
	if !ok || !ok2 {
		return Einsum{}, fmt.Errorf("einsum equation %q: want \"a,b->out\"", eq)
	}
	e := Einsum{A: a, B: b, Out: out}
	for _, s := range []string{a, b, out} {
		for i, r := range s {
			if r < 'a' || r > 'z' {
				return Einsum{}, fmt.Errorf("einsum equation %q: index %q is not a lowercase letter", eq, r)
			}
			if strings.ContainsRune(s[i+1:], r) {
				return Einsum{}, fmt.Errorf("einsum equation %q: index %q repeated in %q", eq, r, s)
			}
		}
	}
	for _, r := range out {
		if !strings.ContainsRune(a+b, r) {
			return Einsum{}, fmt.Errorf("einsum equation %q: output index %q appears in no operand", eq, r)
		}
	}
	// Gradients are einsums too; they need each operand index in the other
	// operand or the output.
	for _, p := range [][2]string{{a, b}, {b, a}} {
		for _, r := range p[0] {
			if !strings.ContainsRune(p[1]+out, r) {
				return Einsum{}, fmt.Errorf("einsum equation %q: index %q is summed within one operand (unsupported)", eq, r)
			}
		}
	}
	return e, nil
}

// Sizes maps each index letter to its extent, checking consistency.
func (e Einsum) Sizes(a, b Shape) (map[rune]int, error) {
	if len(a) != len(e.A) || len(b) != len(e.B) {
		return nil, fmt.Errorf("einsum %s,%s->%s: operand ranks %d and %d do not match", e.A, e.B, e.Out, len(a), len(b))
	}
	sz := map[rune]int{}
	for _, p := range []struct {
		idx string
		s   Shape
	}{{e.A, a}, {e.B, b}} {
		for i, r := range p.idx {
			if v, ok := sz[r]; ok && v != p.s[i] {
				return nil, fmt.Errorf("einsum %s,%s->%s: index %q is %d in one place and %d in another", e.A, e.B, e.Out, r, v, p.s[i])
			}
			sz[r] = p.s[i]
		}
	}
	return sz, nil
}

func inferEinsum(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := sameDType(in[0], in[1]); err != nil {
		return nil, err
	}
	e, err := ParseEinsum(a.Equation)
	if err != nil {
		return nil, err
	}
	sz, err := e.Sizes(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, errShapes(err.Error(), in[0], in[1])
	}
	out := make(Shape, len(e.Out))
	for i, r := range e.Out {
		out[i] = sz[r]
	}
	return one(out, in[0].DType), nil
}

func inferReduceSum(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x := in[0]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if err := checkAxes(a.Axes, len(x.Shape), "reduce_sum"); err != nil {
		return nil, err
	}
	var out Shape
	for d, n := range x.Shape {
		if !containsInt(a.Axes, d) {
			out = append(out, n)
		}
	}
	return one(out, x.DType), nil
}

func inferFillLike(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := needFloat(in[0]); err != nil {
		return nil, err
	}
	return []OutSpec{{Shape: in[0].Shape.Clone(), DType: in[0].DType, NoGrad: true}}, nil
}

func inferAdam(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if _, err := inferSameShape(a, in[:4]); err != nil {
		return nil, err
	}
	if len(in[4].Shape) != 0 {
		return nil, fmt.Errorf("adam step %q must be a scalar", in[4].Name)
	}
	if len(a.Betas) != 2 {
		return nil, fmt.Errorf("adam wants betas [β1, β2], got %v", a.Betas)
	}
	p := in[0]
	return []OutSpec{{Shape: p.Shape.Clone(), DType: p.DType}, {Shape: p.Shape.Clone(), DType: p.DType}, {Shape: p.Shape.Clone(), DType: p.DType}}, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ---- work estimates ----

func bytesOf(ts ...*Tensor) float64 {
	var b float64
	for _, t := range ts {
		b += float64(t.Shape.Numel() * t.DType.Size())
	}
	return b
}

func numel(t *Tensor) float64 { return float64(t.Shape.Numel()) }

// workEW: flopsPerElem per output element, tensors moved = touched tensors of
// the output's size; the backward reads dy and one saved tensor and writes dx.
func workEW(flopsPerElem float64, touched float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(_ *Attrs, in, out []*Tensor) (Work, Work) {
		n := numel(out[0])
		b := n * float64(out[0].DType.Size())
		return Work{ClassElementwise, flopsPerElem * n, touched * b},
			Work{ClassElementwise, (flopsPerElem + 1) * n, float64(len(in)+2) * b}
	}
}

func workNorm(flopsPerElem float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(_ *Attrs, in, out []*Tensor) (Work, Work) {
		n := numel(out[0])
		return Work{ClassNormalization, flopsPerElem * n, bytesOf(in...) + bytesOf(out...)},
			Work{ClassNormalization, 2 * flopsPerElem * n, 2*bytesOf(in...) + bytesOf(out...)}
	}
}

func workFree(_ *Attrs, _, _ []*Tensor) (Work, Work) {
	return Work{Class: ClassDataMovement}, Work{Class: ClassDataMovement}
}

func workMove(_ *Attrs, in, out []*Tensor) (Work, Work) {
	w := Work{ClassDataMovement, 0, bytesOf(in...) + bytesOf(out...)}
	return w, w
}

func workMatMul(a *Attrs, in, out []*Tensor) (Work, Work) {
	r := len(in[0].Shape)
	k := in[0].Shape[r-1]
	if a.TransA {
		k = in[0].Shape[r-2]
	}
	f := 2 * numel(out[0]) * float64(k)
	b := bytesOf(in...) + bytesOf(out...)
	// Backward: one matmul per input gradient, each as large as the forward.
	return Work{ClassMatMul, f, b}, Work{ClassMatMul, 2 * f, 2 * b}
}

func workEmbedding(_ *Attrs, in, out []*Tensor) (Work, Work) {
	b := bytesOf(in[0]) + 2*bytesOf(out[0])
	return Work{ClassEmbedding, 0, b}, Work{ClassEmbedding, numel(out[0]), b + bytesOf(out[0])}
}

// workConv2D: (x, w) → y. The three convolution kinds have the same MAC
// count, N·O·OH·OW·C·KH·KW, from the forward's x, w and y, which each kind
// holds in other places; each kind says which (the shapes alone cannot: a
// gradient of a weight whose batch, input and output channels are all 256
// — VGG19's block3 at batch 256 — has the shapes a gradient of an input
// would).
func workConv2D(_ *Attrs, in, out []*Tensor) (Work, Work) {
	return convWork(in[0].Shape, in[1].Shape, out[0].Shape, in[0].DType)
}

// workConv2DGradInput: (dy, w) → dx, with Attrs.Shape the shape of x.
func workConv2DGradInput(a *Attrs, in, _ []*Tensor) (Work, Work) {
	return convWork(Shape(a.Shape), in[1].Shape, in[0].Shape, in[0].DType)
}

// workConv2DGradWeight: (x, dy) → dw, with Attrs.Shape the shape of w.
func workConv2DGradWeight(a *Attrs, in, _ []*Tensor) (Work, Work) {
	return convWork(in[0].Shape, Shape(a.Shape), in[1].Shape, in[0].DType)
}

// convWork is a convolution's work from its forward's input x, weight w and
// output y: 2 FLOPs a MAC, every tensor read or written once.
func convWork(x, w, y Shape, dt DType) (Work, Work) {
	macs := float64(y.Numel()) * float64(w[1]*w[2]*w[3])
	b := float64((x.Numel() + w.Numel() + y.Numel()) * dt.Size())
	return Work{ClassConv, 2 * macs, b}, Work{ClassConv, 4 * macs, 2 * b}
}

func workPool(_ *Attrs, in, out []*Tensor) (Work, Work) {
	b := bytesOf(in...) + bytesOf(out...)
	return Work{ClassReduction, numel(in[0]), b}, Work{ClassReduction, numel(in[0]), 2 * b}
}

func workLoss(flopsPerElem float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(_ *Attrs, in, out []*Tensor) (Work, Work) {
		n := numel(in[0])
		return Work{ClassLoss, flopsPerElem * n, bytesOf(in...)}, Work{ClassLoss, flopsPerElem * n, 2 * bytesOf(in[0])}
	}
}

func workGate(_ *Attrs, in, out []*Tensor) (Work, Work) {
	n := numel(in[0])
	b := bytesOf(in[0]) + bytesOf(out...)
	return Work{ClassReduction, 10 * n, b}, Work{ClassReduction, 10 * n, b}
}

func workEinsum(a *Attrs, in, out []*Tensor) (Work, Work) {
	e, err := ParseEinsum(a.Equation)
	if err != nil {
		return Work{Class: ClassMatMul}, Work{Class: ClassMatMul}
	}
	sz, err := e.Sizes(in[0].Shape, in[1].Shape)
	if err != nil {
		return Work{Class: ClassMatMul}, Work{Class: ClassMatMul}
	}
	f := 2.0
	for _, n := range sz {
		f *= float64(n)
	}
	b := bytesOf(in...) + bytesOf(out...)
	return Work{ClassMatMul, f, b}, Work{ClassMatMul, 2 * f, 2 * b}
}

func workReduce(_ *Attrs, in, out []*Tensor) (Work, Work) {
	b := bytesOf(in...) + bytesOf(out...)
	return Work{ClassReduction, numel(in[0]), b}, Work{ClassElementwise, 0, b}
}

func workOpt(flopsPerElem float64) func(a *Attrs, in, out []*Tensor) (Work, Work) {
	return func(_ *Attrs, in, out []*Tensor) (Work, Work) {
		return Work{ClassOptimizer, flopsPerElem * numel(in[0]), bytesOf(in...) + bytesOf(out...)}, Work{Class: ClassOptimizer}
	}
}

// DefaultAttentionScale is 1/√d, the scale of scaled-dot-product attention.
func DefaultAttentionScale(headDim int) float64 { return 1 / math.Sqrt(float64(headDim)) }
