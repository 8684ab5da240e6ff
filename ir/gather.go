package ir

import "fmt"

// Gather along one dim by int64 positions, torch.gather: for Axis 1 of a
// rank-3 x, out[i][j][k] = x[i][index[i][j][k]][k]. The index has x's
// rank and x's size on every other dim (torch allows smaller; hap does
// not), and the output is shaped like the index. The positions are
// constants (a buffer or an input), so the index gets no gradient; x's
// is gather_grad, a scatter-add of dy into zeros shaped like x.
const (
	OpGather     OpKind = "gather"      // (x, index int64) → x's entries at index along Axis; index's shape, x's dtype
	OpGatherGrad OpKind = "gather_grad" // (index, dy) → dx: dy scatter-added at index along Axis; Shape = x shape
)

func gatherKinds() []OpKind { return []OpKind{OpGather, OpGatherGrad} }

// lookupGather is the operator table's entries for this file's kinds.
func lookupGather(k OpKind) (opDef, bool) {
	switch k {
	case OpGather:
		return opDef{2, inferGather, gradGather, workGather}, true
	case OpGatherGrad:
		return opDef{2, inferGatherGrad, nil, workGatherGrad}, true
	}
	return opDef{}, false
}

// checkGatherIndex checks an index against the gathered tensor's shape x
// (the forward's x, or gather_grad's Shape): int64, x's rank, Axis inside
// it, and x's size on every dim but Axis.
func checkGatherIndex(kind OpKind, axis int, x Shape, xName string, index *Tensor) error {
	if index.DType != Int64 {
		return fmt.Errorf("%s index %q is %s; want int64", kind, index.Name, index.DType)
	}
	if len(x) == 0 {
		return fmt.Errorf("%s of scalar %q; want rank ≥ 1", kind, xName)
	}
	if axis < 0 || axis >= len(x) {
		return fmt.Errorf("%s axis %d out of range for %q of rank %d", kind, axis, xName, len(x))
	}
	if len(index.Shape) != len(x) {
		return fmt.Errorf("%s index %q %v has rank %d; want %q's rank %d", kind, index.Name, index.Shape, len(index.Shape), xName, len(x))
	}
	for d := range x {
		if d != axis && index.Shape[d] != x[d] {
			return fmt.Errorf("%s index %q %v and %q %v differ on dim %d: hap gathers with an index of x's size on every dim but axis %d",
				kind, index.Name, index.Shape, xName, x, d, axis)
		}
	}
	return nil
}

func inferGather(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	x, index := in[0], in[1]
	if err := needFloat(x); err != nil {
		return nil, err
	}
	if err := checkGatherIndex(OpGather, a.Axis, x.Shape, x.Name, index); err != nil {
		return nil, err
	}
	return one(index.Shape, x.DType), nil
}

func inferGatherGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	index, dy := in[0], in[1]
	if err := needFloat(dy); err != nil {
		return nil, err
	}
	if err := checkGatherIndex(OpGatherGrad, a.Axis, Shape(a.Shape), "x", index); err != nil {
		return nil, err
	}
	if !dy.Shape.Equal(index.Shape) {
		return nil, errShapes("gather_grad dy must have the index's shape", index, dy)
	}
	return one(Shape(a.Shape), dy.DType), nil
}

// gradGather: dx is dy scatter-added into zeros shaped like x; the
// positions are constants and get no gradient.
func gradGather(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	a := Attrs{Axis: op.Attrs.Axis, Shape: c.t(op.Inputs[0]).Shape.Clone()}
	return []TensorID{c.emit1(OpGatherGrad, a, op.Inputs[1], dy[0]), NoTensor}
}

// workGather: a copy, no arithmetic. The forward reads the index and one x
// element per output and writes the output; the backward reads the index
// and dy, adds each dy element into dx and writes dx (x's size, zeroed
// first).
func workGather(_ *Attrs, in, out []*Tensor) (Work, Work) {
	fwd := Work{ClassDataMovement, 0, bytesOf(in[1]) + 2*bytesOf(out[0])}
	bwd := Work{ClassDataMovement, numel(out[0]), bytesOf(in[1]) + bytesOf(out[0]) + 2*bytesOf(in[0])}
	return fwd, bwd
}

// workGatherGrad prices gather_grad as gather's backward: in = (index,
// dy), out = dx.
func workGatherGrad(_ *Attrs, in, out []*Tensor) (Work, Work) {
	w := Work{ClassDataMovement, numel(in[1]), bytesOf(in...) + 2*bytesOf(out[0])}
	return w, w
}

// Gather is x's entries at index along axis (torch.gather): index is an
// int64 tensor of x's rank with x's size on every other dim; the output
// has index's shape.
func (b *Builder) Gather(x TensorID, axis int, index TensorID) TensorID {
	return b.emit1(OpGather, Attrs{Axis: axis}, x, index)
}
