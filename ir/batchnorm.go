package ir

import "fmt"

// Batch normalisation in training mode, as three ops the planner sees:
//
//	sum   = reduce_sum(x, every dim but 1)        [C]
//	sumsq = reduce_sum(x·x, every dim but 1)      [C]
//	y     = batch_norm(x, sum, sumsq, γ, β)       x's shape
//
// batch_norm normalises each channel by the batch statistics its sums
// give (mean = sum·k, var = sumsq·k − mean², k = Scale = 1 / elements per
// channel, biased as PyTorch's training-mode normalisation). Splitting the
// statistics out is what makes a batch-dim split correct and priced: on a
// shard of the batch the two reduce_sums leave partial sums, which the
// planner must all-reduce (2·C values, SyncBatchNorm's exchange) before
// batch_norm reads them whole; in backward batch_norm_grad's dsum and dsumsq
// come back through the adjoint all-reduces the same way. A channel split
// needs no exchange at all. Scale stays the global count on every device,
// so a shard normalises by the whole batch's statistics.
//
// batch_norm_running updates the running mean and variance (state tensors)
// from the same sums, PyTorch's momentum rule with the unbiased variance:
// r' = (1 − m)·r + m·stat. Its outputs replace its state inputs after each
// step (StateUpdates).
const (
	OpBatchNorm        OpKind = "batch_norm"         // (x[N,C,…], sum[C], sumsq[C], gamma[C], beta[C]) → y; Eps, Scale = 1/(N·…)
	OpBatchNormGrad    OpKind = "batch_norm_grad"    // (x, sum, sumsq, gamma, dy) → dx, dsum, dsumsq, dgamma, dbeta
	OpBatchNormRunning OpKind = "batch_norm_running" // (running_mean[C], running_var[C], sum[C], sumsq[C]) → mean', var' (no grad); Scale, Momentum
)

func batchNormKinds() []OpKind { return []OpKind{OpBatchNorm, OpBatchNormGrad, OpBatchNormRunning} }

func lookupBatchNorm(k OpKind) (opDef, bool) {
	switch k {
	case OpBatchNorm:
		return opDef{5, inferBatchNorm, gradBatchNorm, workBatchNorm}, true
	case OpBatchNormGrad:
		return opDef{5, inferBatchNormGrad, nil, workBatchNormGrad}, true
	case OpBatchNormRunning:
		return opDef{4, inferBatchNormRunning, nil, workEW(6, 6)}, true
	}
	return opDef{}, false
}

// checkChannelVecs checks that every vector is [C] for x[N,C,…].
func checkChannelVecs(op string, x *Tensor, vecs ...*Tensor) error {
	if len(x.Shape) < 2 {
		return fmt.Errorf("%s wants x[N,C,…] of rank ≥ 2, got %q %v", op, x.Name, x.Shape)
	}
	for _, v := range vecs {
		if !v.Shape.Equal(Shape{x.Shape[1]}) {
			return errShapes(fmt.Sprintf("%s wants per-channel vectors [C] = [%d]", op, x.Shape[1]), x, v)
		}
	}
	return nil
}

func checkBatchNormAttrs(op string, a *Attrs) error {
	if !(a.Eps > 0) {
		return fmt.Errorf("%s eps %v must be positive", op, a.Eps)
	}
	if !(a.Scale > 0 && a.Scale <= 1) {
		return fmt.Errorf("%s scale %v must be 1 / (elements per channel), in (0, 1]", op, a.Scale)
	}
	return nil
}

func inferBatchNorm(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	if err := checkChannelVecs("batch_norm", in[0], in[1:]...); err != nil {
		return nil, err
	}
	if err := checkBatchNormAttrs("batch_norm", a); err != nil {
		return nil, err
	}
	return one(in[0].Shape, in[0].DType), nil
}

func inferBatchNormGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, dy := in[0], in[4]
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	if err := checkChannelVecs("batch_norm_grad", x, in[1:4]...); err != nil {
		return nil, err
	}
	if !dy.Shape.Equal(x.Shape) {
		return nil, errShapes("batch_norm_grad dy must match x", x, dy)
	}
	if err := checkBatchNormAttrs("batch_norm_grad", a); err != nil {
		return nil, err
	}
	c := Shape{x.Shape[1]}
	out := []OutSpec{{Shape: x.Shape.Clone(), DType: x.DType}}
	for i := 0; i < 4; i++ {
		out = append(out, OutSpec{Shape: c.Clone(), DType: x.DType})
	}
	return out, nil
}

func inferBatchNormRunning(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if err := sameDType(in...); err != nil {
		return nil, err
	}
	c := in[0].Shape
	for _, t := range in[1:] {
		if len(c) != 1 || !t.Shape.Equal(c) {
			return nil, errShapes("batch_norm_running wants four [C] vectors", in[0], t)
		}
	}
	// The unbiased variance needs two elements per channel (PyTorch
	// refuses training-mode batch norm on one value per channel too).
	if !(a.Scale > 0 && a.Scale < 1) {
		return nil, fmt.Errorf("batch_norm_running scale %v must be 1 / (elements per channel ≥ 2)", a.Scale)
	}
	if !(a.Momentum >= 0 && a.Momentum <= 1) {
		return nil, fmt.Errorf("batch_norm_running momentum %v outside [0, 1]", a.Momentum)
	}
	return []OutSpec{{Shape: c.Clone(), DType: in[0].DType, NoGrad: true}, {Shape: c.Clone(), DType: in[0].DType, NoGrad: true}}, nil
}

func gradBatchNorm(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	in := op.Inputs
	a := Attrs{Eps: op.Attrs.Eps, Scale: op.Attrs.Scale}
	return c.emit(OpBatchNormGrad, a, in[0], in[1], in[2], in[3], dy[0])[:5]
}

// workBatchNorm: per element a subtract, a multiply by the inverse
// standard deviation, a scale and a shift (the per-channel statistics are
// C-sized); x read and y written once. The sums are their reduce_sums'.
func workBatchNorm(_ *Attrs, in, out []*Tensor) (Work, Work) {
	n := numel(in[0])
	f := Work{ClassNormalization, 4 * n, bytesOf(in...) + bytesOf(out...)}
	b, _ := workBatchNormGrad(nil, append(in[:4:4], out[0]), nil)
	return f, b
}

// workBatchNormGrad: x and dy read twice (the per-channel reductions, then
// dx), dx written; about 10 FLOPs an element.
func workBatchNormGrad(_ *Attrs, in, _ []*Tensor) (Work, Work) {
	n := numel(in[0])
	w := Work{ClassNormalization, 10 * n, 5 * bytesOf(in[0])}
	return w, w
}

// StateUpdate is a state tensor and the tensor holding its next value,
// which a training run feeds as the state in the following step.
type StateUpdate struct{ State, Updated TensorID }

// StateUpdates lists the state a graph's forward ops update
// (batch_norm_running's running statistics), in op order.
func StateUpdates(g *Graph) []StateUpdate {
	var out []StateUpdate
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind == OpBatchNormRunning {
			out = append(out, StateUpdate{op.Inputs[0], op.Outputs[0]}, StateUpdate{op.Inputs[1], op.Outputs[1]})
		}
	}
	return out
}

// BatchNormMomentum and BatchNormEps are PyTorch's BatchNorm2d defaults.
const (
	BatchNormMomentum = 0.1
	BatchNormEps      = 1e-5
)

// BatchNorm is training-mode batch normalisation of x[N,C,…] over every dim
// but the channels (1), with scale gamma and shift beta; runningMean and
// runningVar (state tensors, or NoTensor for none, as
// track_running_stats=False) are updated with momentum.
func (b *Builder) BatchNorm(x, gamma, beta, runningMean, runningVar TensorID, eps, momentum float64) TensorID {
	s := b.Shape(x)
	if len(s) < 2 {
		b.fail(fmt.Errorf("batch norm of %v: want x[N,C,…]", s))
		return NoTensor
	}
	var axes []int
	per := 1
	for d := range s {
		if d != 1 {
			axes = append(axes, d)
			per *= s[d]
		}
	}
	if per == 0 {
		b.fail(fmt.Errorf("batch norm of %v: no elements per channel", s))
		return NoTensor
	}
	k := 1 / float64(per)
	sum := b.ReduceSum(x, axes...)
	sumsq := b.ReduceSum(b.Mul(x, x), axes...)
	y := b.emit1(OpBatchNorm, Attrs{Eps: eps, Scale: k}, x, sum, sumsq, gamma, beta)
	if runningMean != NoTensor || runningVar != NoTensor {
		b.Emit(OpBatchNormRunning, Attrs{Scale: k, Momentum: momentum}, runningMean, runningVar, sum, sumsq)
	}
	return y
}
