package ir

import (
	"errors"
	"fmt"
	"slices"
)

// Graph is a tensor program. Tensors[i].ID == i and Ops[i].ID == i; Ops are
// in topological order.
type Graph struct {
	Name    string
	Tensors []Tensor
	Ops     []Op
	// Loss is the scalar the training step minimises, or NoTensor.
	Loss TensorID
	// Train describes the backward and update part; nil for a forward graph.
	Train *TrainInfo
}

// TrainInfo ties each parameter to its gradient, its updated value and its
// optimizer state, so a runtime can feed a step and read its results.
type TrainInfo struct {
	Optimizer Optimizer
	Params    []ParamSlot
	// Step is the scalar step counter (1 on the first update) Adam's bias
	// correction reads, or NoTensor for optimizers without one. The runtime
	// feeds it and increments it after each step.
	Step TensorID
	// ForwardOps is the number of forward ops: Ops[:ForwardOps] is the
	// forward graph the step was derived from.
	ForwardOps int
	// Accumulations are the adds backward makes to sum the gradients of a
	// tensor that several ops read, in step order. A cost model needs them
	// apart: they work on the tensor as its reader holds it, not on the
	// reader's share of the work.
	Accumulations []Accumulation
	// GradStarts are, for every tensor whose gradients Accumulations sum,
	// the reader whose gradient the sum starts from (no add): in the
	// order of the tensors' first accumulations. A distributed program
	// sums per layout its readers hold the tensor in, and a cost model
	// that prices the sum so needs every reader, the first included.
	GradStarts []GradStart
}

// GradStart is the reader whose gradient backward meets first among those
// of tensor Tensor, the start of its sum.
type GradStart struct {
	Tensor TensorID
	Of     OpID // the forward op that reads the tensor
	Slot   int  // the tensor's input slot in Of
}

// Accumulation is one add of a reader's gradient into the sum of a
// tensor's gradients.
type Accumulation struct {
	Add  OpID // the add, a backward op with GradOf == Of
	Of   OpID // the forward op that reads the tensor
	Slot int  // the tensor's input slot in Of
}

// ParamSlot is one trainable parameter in a training step.
type ParamSlot struct {
	Param    TensorID
	Grad     TensorID
	Updated  TensorID
	State    []TensorID // optimizer state fed in (Adam: m, v)
	NewState []TensorID // the same state after the update
}

// Tensor returns the tensor with the given ID.
func (g *Graph) Tensor(id TensorID) *Tensor { return &g.Tensors[id] }

// Op returns the op with the given ID.
func (g *Graph) Op(id OpID) *Op { return &g.Ops[id] }

// TensorByName finds a tensor by name.
func (g *Graph) TensorByName(name string) (TensorID, bool) {
	for i := range g.Tensors {
		if g.Tensors[i].Name == name {
			return TensorID(i), true
		}
	}
	return NoTensor, false
}

// TensorsOfKind lists tensors of one kind in ID order.
func (g *Graph) TensorsOfKind(k TensorKind) []TensorID {
	var ids []TensorID
	for i := range g.Tensors {
		if g.Tensors[i].Kind == k {
			ids = append(ids, TensorID(i))
		}
	}
	return ids
}

// Consumers returns, for every tensor, the ops that read it, in op order.
func (g *Graph) Consumers() [][]OpID {
	c := make([][]OpID, len(g.Tensors))
	for i := range g.Ops {
		for _, in := range g.Ops[i].Inputs {
			c[in] = append(c[in], OpID(i))
		}
	}
	return c
}

// ParamCount is the number of trainable scalars.
func (g *Graph) ParamCount() int64 {
	var n int64
	for i := range g.Tensors {
		if g.Tensors[i].Kind == Param {
			n += int64(g.Tensors[i].Shape.Numel())
		}
	}
	return n
}

// Clone returns a deep copy.
func (g *Graph) Clone() *Graph {
	c := &Graph{Name: g.Name, Loss: g.Loss}
	c.Tensors = make([]Tensor, len(g.Tensors))
	for i, t := range g.Tensors {
		t.Shape = t.Shape.Clone()
		c.Tensors[i] = t
	}
	c.Ops = make([]Op, len(g.Ops))
	for i, op := range g.Ops {
		op.Inputs = append([]TensorID{}, op.Inputs...)
		op.Outputs = append([]TensorID{}, op.Outputs...)
		op.Attrs = cloneAttrs(op.Attrs)
		c.Ops[i] = op
	}
	if g.Train != nil {
		t := *g.Train
		t.Params = make([]ParamSlot, len(g.Train.Params))
		for i, p := range g.Train.Params {
			p.State = append([]TensorID{}, p.State...)
			p.NewState = append([]TensorID{}, p.NewState...)
			t.Params[i] = p
		}
		t.Accumulations = slices.Clone(g.Train.Accumulations)
		t.GradStarts = slices.Clone(g.Train.GradStarts)
		c.Train = &t
	}
	return c
}

// Reordered returns a copy of g whose ops run in order: its k-th op is
// g's op order[k], renumbered k, with every reference to an op (producers,
// GradOf, accumulations) renumbered with it; tensors keep their IDs. A
// runtime issues ops in slice order, so this is how a searched issue order
// reaches it. order must be a permutation of g's ops in which every op
// comes after the producers of its inputs, and (for a training step) the
// forward ops must stay first, as TrainInfo.ForwardOps says they are.
func (g *Graph) Reordered(order []OpID) (*Graph, error) {
	if len(order) != len(g.Ops) {
		return nil, fmt.Errorf("order names %d ops; graph %q has %d", len(order), g.Name, len(g.Ops))
	}
	place := make([]OpID, len(g.Ops)) // old ID → new ID
	for i := range place {
		place[i] = NoOp
	}
	for k, id := range order {
		if id < 0 || int(id) >= len(g.Ops) {
			return nil, fmt.Errorf("order[%d] = %d: graph %q has no op %d", k, id, g.Name, id)
		}
		if place[id] != NoOp {
			return nil, fmt.Errorf("order[%d] names op %q again (order[%d])", k, g.Ops[id].Name, place[id])
		}
		place[id] = OpID(k)
		if g.Train != nil && (k < g.Train.ForwardOps) != (int(id) < g.Train.ForwardOps) {
			return nil, fmt.Errorf("order[%d] = op %q: the %d forward ops must stay first", k, g.Ops[id].Name, g.Train.ForwardOps)
		}
	}
	c := g.Clone()
	ops := make([]Op, len(c.Ops))
	for k, id := range order {
		op := c.Ops[id]
		for _, in := range op.Inputs {
			if prod := g.Tensors[in].Producer; prod != NoOp && place[prod] > OpID(k) {
				return nil, fmt.Errorf("order runs op %q before op %q, which computes its input %q", op.Name, g.Ops[prod].Name, g.Tensors[in].Name)
			}
		}
		op.ID = OpID(k)
		if op.GradOf != NoOp {
			op.GradOf = place[op.GradOf]
		}
		ops[k] = op
	}
	c.Ops = ops
	for i := range c.Tensors {
		if prod := c.Tensors[i].Producer; prod != NoOp {
			c.Tensors[i].Producer = place[prod]
		}
	}
	if c.Train != nil {
		for i := range c.Train.Accumulations {
			a := &c.Train.Accumulations[i]
			a.Add, a.Of = place[a.Add], place[a.Of]
		}
		for i := range c.Train.GradStarts {
			c.Train.GradStarts[i].Of = place[c.Train.GradStarts[i].Of]
		}
		// Accumulations are listed in step order.
		slices.SortStableFunc(c.Train.Accumulations, func(x, y Accumulation) int { return int(x.Add) - int(y.Add) })
	}
	return c, nil
}

// ErrInvalidGraph is wrapped by every error Check returns.
var ErrInvalidGraph = errors.New("invalid graph")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidGraph, fmt.Sprintf(format, args...))
}

// Check validates the graph: dense IDs, unique names, every op of a known
// kind with the right arity, inputs defined before use (which also rules out
// cycles), every computed tensor produced by exactly one op, shapes and
// dtypes equal to what shape inference derives, and a scalar float loss.
func (g *Graph) Check() error {
	names := make(map[string]TensorID, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.ID != TensorID(i) {
			return invalid("tensor %d has ID %d", i, t.ID)
		}
		if t.Name == "" {
			return invalid("tensor %d has no name", i)
		}
		if prev, dup := names[t.Name]; dup {
			return invalid("tensor name %q used twice (tensors %d and %d)", t.Name, prev, i)
		}
		names[t.Name] = t.ID
		for _, d := range t.Shape {
			// Zero is allowed: a device may hold an empty shard.
			if d < 0 {
				return invalid("tensor %q has a negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		if _, ok := t.Shape.CheckedNumel(); !ok {
			return invalid("tensor %q: shape %v has more than 2^50 elements (ir.MaxElements)", t.Name, t.Shape)
		}
		if t.Kind.IsLeaf() && t.Producer != NoOp {
			return invalid("%s tensor %q must not be produced by an op", t.Kind, t.Name)
		}
		if !t.Kind.IsLeaf() && (t.Producer < 0 || int(t.Producer) >= len(g.Ops)) {
			return invalid("tensor %q is dangling: no op produces it", t.Name)
		}
	}
	defined := make([]bool, len(g.Tensors))
	for i := range g.Tensors {
		defined[i] = g.Tensors[i].Kind.IsLeaf()
	}
	opNames := make(map[string]bool, len(g.Ops))
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.ID != OpID(i) {
			return invalid("op %d has ID %d", i, op.ID)
		}
		if opNames[op.Name] {
			return invalid("op name %q used twice", op.Name)
		}
		opNames[op.Name] = true
		for _, in := range op.Inputs {
			if in < 0 || int(in) >= len(g.Tensors) {
				return invalid("op %q (%s) reads tensor %d, which does not exist", op.Name, op.Kind, in)
			}
			if !defined[in] {
				return invalid("op %q (%s) reads %q before it is computed (a cycle, or ops out of order)", op.Name, op.Kind, g.Tensors[in].Name)
			}
		}
		for _, out := range op.Outputs {
			if out < 0 || int(out) >= len(g.Tensors) {
				return invalid("op %q (%s) writes tensor %d, which does not exist", op.Name, op.Kind, out)
			}
			if g.Tensors[out].Producer != op.ID {
				return invalid("op %q (%s) writes %q, whose producer is recorded as op %d", op.Name, op.Kind, g.Tensors[out].Name, g.Tensors[out].Producer)
			}
			if defined[out] {
				return invalid("tensor %q is written twice (op %q)", g.Tensors[out].Name, op.Name)
			}
			defined[out] = true
		}
		specs, err := g.infer(op)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidGraph, err)
		}
		if len(specs) != len(op.Outputs) {
			return invalid("op %q (%s) has %d outputs, want %d", op.Name, op.Kind, len(op.Outputs), len(specs))
		}
		for j, s := range specs {
			t := &g.Tensors[op.Outputs[j]]
			if !t.Shape.Equal(s.Shape) || t.DType != s.DType {
				return invalid("op %q (%s) output %q is declared %s%v but computes %s%v", op.Name, op.Kind, t.Name, t.DType, t.Shape, s.DType, s.Shape)
			}
		}
	}
	if g.Loss != NoTensor {
		if g.Loss < 0 || int(g.Loss) >= len(g.Tensors) {
			return invalid("loss refers to tensor %d, which does not exist", g.Loss)
		}
		t := &g.Tensors[g.Loss]
		if len(t.Shape) != 0 || !t.DType.IsFloat() {
			return invalid("loss %q must be a float scalar, got %s%v", t.Name, t.DType, t.Shape)
		}
	}
	return nil
}

// infer runs shape inference for op against the graph's current tensors.
func (g *Graph) infer(op *Op) ([]OutSpec, error) {
	specs, err := g.inferRaw(op)
	if err != nil {
		return nil, fmt.Errorf("op %q (%s): %w", op.Name, op.Kind, err)
	}
	return specs, nil
}

// inferRaw is infer without naming the op in errors.
func (g *Graph) inferRaw(op *Op) ([]OutSpec, error) {
	def, ok := lookup(op.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", op.Kind)
	}
	if def.inputs >= 0 && len(op.Inputs) != def.inputs {
		return nil, fmt.Errorf("takes %d inputs, got %d", def.inputs, len(op.Inputs))
	}
	if def.inputs < 0 && len(op.Inputs) < -def.inputs {
		return nil, fmt.Errorf("takes at least %d inputs, got %d", -def.inputs, len(op.Inputs))
	}
	in := make([]*Tensor, len(op.Inputs))
	for i, id := range op.Inputs {
		in[i] = &g.Tensors[id]
	}
	return def.infer(&op.Attrs, in)
}

// Work returns the forward and backward work of a forward op, for the cost
// model: FLOPs and bytes moved, from the shapes.
func (g *Graph) Work(id OpID) (fwd, bwd Work) { return g.WorkAt(id, nil) }

// WorkAt is Work with op id's operands shaped by shape (nil: as in g): the
// work of one device's kernel of it under a sharding, whose operands are
// the tensors' local pieces.
func (g *Graph) WorkAt(id OpID, shape func(TensorID) Shape) (fwd, bwd Work) {
	op := &g.Ops[id]
	def, _ := lookup(op.Kind)
	operand := func(t TensorID) *Tensor {
		if shape == nil {
			return &g.Tensors[t]
		}
		local := g.Tensors[t]
		local.Shape = shape(t)
		return &local
	}
	in := make([]*Tensor, len(op.Inputs))
	for i, t := range op.Inputs {
		in[i] = operand(t)
	}
	out := make([]*Tensor, len(op.Outputs))
	for i, t := range op.Outputs {
		out[i] = operand(t)
	}
	attrs := &op.Attrs
	if shape != nil && len(op.Outputs) > 0 && Shape(attrs.Shape).Equal(g.Tensors[op.Outputs[0]].Shape) {
		// Attributes that name the output's shape (a convolution's
		// gradients, a pad, a reshape) follow it, as they do in a
		// device's local graph.
		local := *attrs
		local.Shape = out[0].Shape
		attrs = &local
	}
	if def.work == nil {
		return Work{Class: ClassElementwise}, Work{Class: ClassElementwise}
	}
	if w, empty := emptyShardWork(in, out); empty {
		return w, w
	}
	return def.work(attrs, in, out)
}

// emptyShardWork is the work of an op over an empty shard — a device given
// no units of a segment, whose local tensors have a zero dimension — and
// whether it is one: the kernel reads nothing, so with every output empty
// it does nothing, and with an input empty it writes its outputs' zeros
// (a weight's gradient over no samples). The work functions price a
// shape's FLOPs and the bytes it reads, weights included, which for an
// empty shard a kernel does not read: the encoding prices an op's time in
// proportion to the device's share (encode's timeline), zero at none, and
// the simulator must agree.
func emptyShardWork(in, out []*Tensor) (Work, bool) {
	emptyIn := false
	for _, t := range in {
		emptyIn = emptyIn || t.Shape.Numel() == 0
	}
	written := 0.0 // the outputs' bytes
	emptyOut := len(out) > 0
	for _, t := range out {
		n := t.Shape.Numel()
		emptyOut = emptyOut && n == 0
		written += float64(n * t.DType.Size())
	}
	if !emptyIn && !emptyOut {
		return Work{}, false
	}
	return Work{Class: ClassElementwise, Bytes: written}, true
}
