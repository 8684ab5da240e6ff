package ir

import (
	"errors"
	"fmt"
	"slices"
)

// Optimizer configures the update part of a training step.
type Optimizer struct {
	Kind  string  `json:"kind"` // "sgd" or "adam"
	LR    float64 `json:"lr"`
	Beta1 float64 `json:"beta1,omitempty"`
	Beta2 float64 `json:"beta2,omitempty"`
	Eps   float64 `json:"eps,omitempty"`
}

// LossGradScope scopes the seed of backward, the loss's gradient of one,
// which no forward op's scope covers.
const LossGradScope = "loss.grad"

// SGD is plain stochastic gradient descent: p ← p − lr·g.
func SGD(lr float64) Optimizer { return Optimizer{Kind: "sgd", LR: lr} }

// Adam is Kingma & Ba's optimizer with PyTorch's default β and ε.
func Adam(lr float64) Optimizer {
	return Optimizer{Kind: "adam", LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
}

// ErrNotTrainable is returned when a graph cannot become a training step.
var ErrNotTrainable = errors.New("graph is not trainable")

// gradCtx is what an operator's gradient function sees.
type gradCtx struct {
	b   *Builder
	req []bool // req[t]: tensor t needs a gradient
}

func (c *gradCtx) t(id TensorID) *Tensor { return &c.b.g.Tensors[id] }
func (c *gradCtx) need(id TensorID) bool { return c.req[id] }
func (c *gradCtx) emit(kind OpKind, a Attrs, in ...TensorID) []TensorID {
	return c.b.Emit(kind, a, in...)
}
func (c *gradCtx) emit1(kind OpKind, a Attrs, in ...TensorID) TensorID {
	return c.b.Emit(kind, a, in...)[0]
}

// RequiresGrad marks the tensors that depend on a parameter through
// differentiable values: exactly those autodiff computes gradients for.
func RequiresGrad(g *Graph) []bool {
	req := make([]bool, len(g.Tensors))
	for i := range g.Tensors {
		req[i] = g.Tensors[i].Kind == Param && g.Tensors[i].DType.IsFloat()
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		any := false
		for _, in := range op.Inputs {
			any = any || req[in]
		}
		for _, out := range op.Outputs {
			req[out] = any && !g.Tensors[out].NoGrad
		}
	}
	return req
}

// trainStepGrowth is how many more ops (and tensors) than the forward graph
// BuildTrainStep makes room for up front: backward emits about two per
// forward op, the update a few per parameter.
const trainStepGrowth = 3

// BuildTrainStep derives one training step from a forward graph with a
// loss: the backward ops (reverse-mode, gradients of shared tensors summed),
// then one update op per parameter. The result is a new graph; fwd is not
// modified.
func BuildTrainStep(fwd *Graph, opt Optimizer) (*Graph, error) {
	if fwd.Train != nil {
		return nil, fmt.Errorf("%w: %s is already a training step", ErrNotTrainable, fwd.Name)
	}
	if fwd.Loss == NoTensor {
		return nil, fmt.Errorf("%w: %s has no loss", ErrNotTrainable, fwd.Name)
	}
	if err := fwd.Check(); err != nil {
		return nil, err
	}
	switch opt.Kind {
	case "sgd", "adam":
	default:
		return nil, fmt.Errorf("unknown optimizer %q (want sgd or adam)", opt.Kind)
	}
	g := fwd.Clone()
	// Backward and the update roughly triple a graph: growing its slices
	// once spares the copies appending op by op would make.
	g.Ops = slices.Grow(g.Ops, trainStepGrowth*len(g.Ops))
	g.Tensors = slices.Grow(g.Tensors, trainStepGrowth*len(g.Tensors))
	loss := g.Tensors[g.Loss]
	b := builderOn(g, loss.DType)
	req := RequiresGrad(g)
	if !req[g.Loss] {
		return nil, fmt.Errorf("%w: loss %q does not depend on any parameter", ErrNotTrainable, loss.Name)
	}
	grads := make([]TensorID, len(g.Tensors))
	for i := range grads {
		grads[i] = NoTensor
	}
	nFwd := len(g.Ops)
	b.phase = Backward
	b.gradOf = loss.Producer
	b.scope = LossGradScope
	grads[g.Loss] = b.emit1(OpFillLike, Attrs{Scale: 1}, g.Loss)
	c := &gradCtx{b: b, req: req}
	var acc []Accumulation
	var starts []GradStart
	start := map[TensorID]GradStart{} // each tensor's first gradient's reader
	for i := nFwd - 1; i >= 0; i-- {
		op := g.Ops[i] // a copy: Emit appends to g.Ops
		dys := make([]TensorID, len(op.Outputs))
		anyDy := false
		for j, out := range op.Outputs {
			dys[j] = grads[out]
			anyDy = anyDy || dys[j] != NoTensor
		}
		anyReq := false
		for _, in := range op.Inputs {
			anyReq = anyReq || req[in]
		}
		if !anyDy || !anyReq {
			continue
		}
		def, _ := lookup(op.Kind)
		if def.grad == nil {
			return nil, fmt.Errorf("%w: op %q (%s) lies between parameters and the loss but has no gradient", ErrNotTrainable, op.Name, op.Kind)
		}
		b.gradOf = op.ID
		b.scope = op.Name + ".grad"
		dxs := def.grad(c, &op, dys)
		for j, in := range op.Inputs {
			if dxs[j] == NoTensor || !req[in] {
				continue
			}
			if grads[in] == NoTensor {
				grads[in] = dxs[j]
				start[in] = GradStart{Tensor: in, Of: op.ID, Slot: j}
			} else {
				grads[in] = b.Add(grads[in], dxs[j])
				if b.err == nil {
					if s, ok := start[in]; ok {
						starts = append(starts, s)
						delete(start, in)
					}
					acc = append(acc, Accumulation{Add: g.Tensors[grads[in]].Producer, Of: op.ID, Slot: j})
				}
			}
		}
		if b.err != nil {
			return nil, fmt.Errorf("differentiating op %q (%s): %w", op.Name, op.Kind, b.err)
		}
	}

	b.phase, b.gradOf, b.scope = Update, NoOp, ""
	info := &TrainInfo{Optimizer: opt, Step: NoTensor, ForwardOps: nFwd, Accumulations: acc, GradStarts: starts}
	if opt.Kind == "adam" {
		info.Step = b.state("adam.step", Shape{})
	}
	for _, p := range fwd.TensorsOfKind(Param) {
		pt := g.Tensors[p]
		if grads[p] == NoTensor {
			return nil, fmt.Errorf("%w: parameter %q does not affect the loss", ErrNotTrainable, pt.Name)
		}
		b.scope = pt.Name + ".update"
		slot := ParamSlot{Param: p, Grad: grads[p]}
		switch opt.Kind {
		case "sgd":
			slot.Updated = b.emit1(OpSGDUpdate, Attrs{LR: opt.LR}, p, grads[p])
		case "adam":
			m := b.state(pt.Name+".adam_m", pt.Shape)
			v := b.state(pt.Name+".adam_v", pt.Shape)
			out := b.Emit(OpAdamUpdate, Attrs{LR: opt.LR, Betas: []float64{opt.Beta1, opt.Beta2}, Eps: opt.Eps}, p, grads[p], m, v, info.Step)
			slot.Updated, slot.State, slot.NewState = out[0], []TensorID{m, v}, []TensorID{out[1], out[2]}
		}
		info.Params = append(info.Params, slot)
	}
	if b.err != nil {
		return nil, fmt.Errorf("building the update of %s: %w", fwd.Name, b.err)
	}
	g.Train = info
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("training step of %s: %w", fwd.Name, err)
	}
	return g, nil
}

// ---- gradient functions, one per differentiable operator ----

func none(n int) []TensorID {
	d := make([]TensorID, n)
	for i := range d {
		d[i] = NoTensor
	}
	return d
}

func gradMatMul(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	d, A, B := dy[0], op.Inputs[0], op.Inputs[1]
	a := op.Attrs
	dx := none(2)
	if c.need(A) {
		if !a.TransA {
			dx[0] = c.emit1(OpMatMul, Attrs{TransB: !a.TransB}, d, B)
		} else {
			dx[0] = c.emit1(OpMatMul, Attrs{TransA: a.TransB, TransB: true}, B, d)
		}
	}
	if c.need(B) {
		xs, ws := c.t(A).Shape, c.t(B).Shape
		if len(ws) == 2 && len(xs) > 2 {
			// A weight shared across the batch dims: flatten them into rows.
			// Rows are the product of the leading dims (not numel/k: a
			// device's shard may be empty).
			k := xs[len(xs)-1]
			xf := c.emit1(OpReshape, Attrs{Shape: []int{xs[:len(xs)-1].Numel(), k}}, A)
			ds := c.t(d).Shape
			n := ds[len(ds)-1]
			df := c.emit1(OpReshape, Attrs{Shape: []int{ds[:len(ds)-1].Numel(), n}}, d)
			if !a.TransB {
				dx[1] = c.emit1(OpMatMul, Attrs{TransA: true}, xf, df)
			} else {
				dx[1] = c.emit1(OpMatMul, Attrs{TransA: true}, df, xf)
			}
		} else if !a.TransB {
			dx[1] = c.emit1(OpMatMul, Attrs{TransA: !a.TransA}, A, d)
		} else {
			dx[1] = c.emit1(OpMatMul, Attrs{TransA: true, TransB: a.TransA}, d, A)
		}
	}
	return dx
}

// complement lists 0..rank−1 without axes.
func complement(axes []int, rank int) []int {
	var out []int
	for d := 0; d < rank; d++ {
		if !containsInt(axes, d) {
			out = append(out, d)
		}
	}
	return out
}

func gradBias(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	dx := []TensorID{dy[0], NoTensor}
	if c.need(op.Inputs[1]) {
		rank := len(c.t(op.Inputs[0]).Shape)
		dx[1] = c.emit1(OpReduceSum, Attrs{Axes: complement(op.Attrs.Axes, rank)}, dy[0])
	}
	return dx
}

// gradVia differentiates a unary op with one backward op reading either the
// forward input or (useOutput) the forward output, and dy.
func gradVia(kind OpKind, useOutput bool) func(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return func(c *gradCtx, op *Op, dy []TensorID) []TensorID {
		saved := op.Inputs[0]
		if useOutput {
			saved = op.Outputs[0]
		}
		return []TensorID{c.emit1(kind, Attrs{}, saved, dy[0])}
	}
}

func gradDropout(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	// The mask is a function of (seed, element index), so applying the same
	// dropout to dy multiplies by the same mask and scale.
	// Copy every attribute: a shard's Offset and global Shape place it.
	return []TensorID{c.emit1(OpDropout, cloneAttrs(op.Attrs), dy[0])}
}

func gradLayerNorm(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	out := c.emit(OpLayerNormGrad, Attrs{Eps: op.Attrs.Eps}, op.Inputs[0], op.Inputs[1], dy[0])
	return out[:3]
}

func gradEmbedding(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := Attrs{Shape: c.t(op.Inputs[1]).Shape.Clone(), Partial: op.Attrs.Partial, Offset: cloneInts(op.Attrs.Offset)}
	return []TensorID{NoTensor, c.emit1(OpEmbeddingGrad, a, op.Inputs[0], dy[0])}
}

func gradReshape(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpReshape, Attrs{Shape: c.t(op.Inputs[0]).Shape.Clone()}, dy[0])}
}

// InversePerm returns q with q[perm[i]] = i.
func InversePerm(perm []int) []int {
	inv := make([]int, len(perm))
	for i, p := range perm {
		inv[p] = i
	}
	return inv
}

func gradPermute(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpPermute, Attrs{Perm: InversePerm(op.Attrs.Perm)}, dy[0])}
}

func gradConcat(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	sizes := make([]int, len(op.Inputs))
	for i, in := range op.Inputs {
		sizes[i] = c.t(in).Shape[op.Attrs.Axis]
	}
	return c.emit(OpSplit, Attrs{Axis: op.Attrs.Axis, Sizes: sizes}, dy[0])[:len(sizes)]
}

func gradSplit(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	parts := make([]TensorID, len(dy))
	for i, d := range dy {
		if d == NoTensor {
			d = c.emit1(OpFillLike, Attrs{}, op.Outputs[i])
		}
		parts[i] = d
	}
	if len(parts) == 1 {
		return parts
	}
	return []TensorID{c.emit1(OpConcat, Attrs{Axis: op.Attrs.Axis}, parts...)}
}

func gradSlice(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := op.Attrs
	return []TensorID{c.emit1(OpPad, Attrs{Axis: a.Axis, Start: a.Start, Shape: c.t(op.Inputs[0]).Shape.Clone()}, dy[0])}
}

func gradConv2D(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	x, w := op.Inputs[0], op.Inputs[1]
	a := op.Attrs
	dx := none(2)
	if c.need(x) {
		dx[0] = c.emit1(OpConv2DGradInput, Attrs{Stride: a.Stride, Pad: a.Pad, Groups: a.Groups, Shape: c.t(x).Shape.Clone()}, dy[0], w)
	}
	if c.need(w) {
		dx[1] = c.emit1(OpConv2DGradWeight, Attrs{Stride: a.Stride, Pad: a.Pad, Groups: a.Groups, Shape: c.t(w).Shape.Clone()}, x, dy[0])
	}
	return dx
}

func gradMaxPool(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpMaxPool2DGrad, Attrs{Kernel: op.Attrs.Kernel, Stride: op.Attrs.Stride, Pad: op.Attrs.Pad}, op.Inputs[0], dy[0])}
}

func gradAdaptivePool(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpAdaptiveAvgPool2DGrad, Attrs{Shape: c.t(op.Inputs[0]).Shape.Clone()}, dy[0])}
}

func gradCrossEntropy(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpCrossEntropyGrad, Attrs{}, op.Inputs[0], op.Inputs[1], dy[0]), NoTensor}
}

func gradNLL(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return []TensorID{c.emit1(OpNLLLossGrad, Attrs{Shape: c.t(op.Inputs[0]).Shape.Clone()}, op.Inputs[1], dy[0]), NoTensor}
}

func gradTop2Gate(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	if dy[0] == NoTensor {
		return none(1)
	}
	return []TensorID{c.emit1(OpTop2GateGrad, Attrs{Capacity: op.Attrs.Capacity}, op.Inputs[0], dy[0])}
}

func gradEinsum(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	e, _ := ParseEinsum(op.Attrs.Equation)
	dx := none(2)
	if c.need(op.Inputs[0]) {
		dx[0] = c.emit1(OpEinsum, Attrs{Equation: e.Out + "," + e.B + "->" + e.A}, dy[0], op.Inputs[1])
	}
	if c.need(op.Inputs[1]) {
		dx[1] = c.emit1(OpEinsum, Attrs{Equation: e.Out + "," + e.A + "->" + e.B}, dy[0], op.Inputs[0])
	}
	return dx
}

func gradReduceSum(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	x := op.Inputs[0]
	zeros := c.emit1(OpFillLike, Attrs{}, x)
	return []TensorID{c.emit1(OpBias, Attrs{Axes: complement(op.Attrs.Axes, len(c.t(x).Shape))}, zeros, dy[0])}
}

// gradVia2 differentiates a collective by its adjoint collective, with the
// same attributes.
func gradVia2(kind OpKind) func(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	return func(c *gradCtx, op *Op, dy []TensorID) []TensorID {
		return []TensorID{c.emit1(kind, cloneAttrs(op.Attrs), dy[0])}
	}
}

func gradAllToAll(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := cloneAttrs(op.Attrs)
	a.Axes = []int{op.Attrs.Axes[1], op.Attrs.Axes[0]}
	a.Sizes, a.Split = a.Split, a.Sizes
	return []TensorID{c.emit1(OpAllToAll, a, dy[0])}
}

// gradDynamicSlice places the local gradient at the piece's offset in
// zeros: a partial value whose sum over devices is the whole gradient.
func gradDynamicSlice(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := op.Attrs
	return []TensorID{c.emit1(OpPad, Attrs{Axis: a.Axis, Start: sumInts(a.Sizes[:a.Rank]), Shape: c.t(op.Inputs[0]).Shape.Clone()}, dy[0])}
}

func gradPad(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := op.Attrs
	n := c.t(op.Inputs[0]).Shape[a.Axis]
	return []TensorID{c.emit1(OpSlice, Attrs{Axis: a.Axis, Start: a.Start, End: a.Start + n}, dy[0])}
}
