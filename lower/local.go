package lower

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"hap/ir"
	"hap/spmd"
)

// Local is one device's forward program: the original ops on local shards,
// with collectives where the distributed program communicates. Autodiff of
// Graph (ir.BuildTrainStep) is that device's share of the distributed
// backward pass and update.
type Local struct {
	Rank  int
	Graph *ir.Graph
	// Leaf maps each original tensor to the local tensor fed for it
	// (ir.NoTensor for computed tensors).
	Leaf []ir.TensorID
	// Layout is each original leaf's layout (among ranks, for a mesh
	// program) and Placement its placement on both axes.
	Layout    []spmd.Layout
	Placement []spmd.Placement
	// Origin is, per local op, the original forward op it was emitted
	// for: a compute's own op, and for a layout change or a parameter's
	// replicate op the consumer it is made for (the next compute). It is
	// how lowering finds a recompute unit's local ops (recompute.go).
	Origin []ir.OpID
}

// BuildLocal lowers program p of forward graph g for device rank (the
// global device index; for a mesh program, a device of p.Mesh).
//
// In a mesh program every collective names its group: the device's
// replica for communication among ranks, the devices of its rank in every
// replica for communication across replicas. A parameter that is Identity
// along an axis passes through a replicate op over that axis's group, so
// its gradient is summed there: across replicas first (nearest the leaf),
// then among ranks; backward runs them in the other order.
func BuildLocal(g *ir.Graph, p *spmd.Program, rank int) (*Local, error) {
	if err := spmd.Check(g, p); err != nil {
		return nil, err
	}
	return buildLocal(g, p, rank)
}

// TrainSteps lowers checked program p of g for every device and derives
// each one's training step (ir.BuildTrainStep), one worker per CPU: the
// program is checked once, not once per device (on 64 devices that check
// cost more than the lowering).
func TrainSteps(g *ir.Graph, p *spmd.Program, opt ir.Optimizer) ([]*ir.Graph, error) {
	if err := spmd.Check(g, p); err != nil {
		return nil, err
	}
	steps := make([]*ir.Graph, p.NumDevices())
	if err := eachDevice(len(steps), func(r int) error {
		loc, err := buildLocal(g, p, r)
		if err != nil {
			return err
		}
		steps[r], err = TrainStep(loc, p, opt)
		return err
	}); err != nil {
		return nil, err
	}
	return steps, nil
}

// CostSteps is TrainSteps for pricing: each device's training step, or
// one that costs the same. A device's local program depends on which
// device it is only through its piece of each segment (Program.Piece: a
// dimension cut along a segment is the device's length of it, and in a
// mesh program its replica's lengths are its collectives' pieces), the
// groups its collectives name (a mesh program's), and where its pieces
// sit among the others' (a collective's rank, a pad's start, a dropout's
// or embedding's offset), which the cost model never reads; autodiff
// copies those attributes and never branches on them. So devices that
// hold the same pieces (pieceClasses) share one step, lowered and derived
// once, for the lowest of them, and the others are not lowered at all: in
// a program without a mesh the very same step (an even program has one,
// an uneven one a step per distinct set of lengths: bert-base's dp-cp on
// paper-64, 3 for 64 devices); in a mesh program a copy naming the
// device's own groups (regroup: megatron on paper-64, 2 steps derived for
// 64 devices). TestCostStepsScheduleAsTrainSteps holds every device's
// schedule to the one its own step gives, on hand-written (meshes among
// them) and random uneven programs. The steps are for the simulator;
// executing or verifying a program needs each device's own (TrainSteps).
func CostSteps(g *ir.Graph, p *spmd.Program, opt ir.Optimizer) ([]*ir.Graph, error) {
	if err := spmd.Check(g, p); err != nil {
		return nil, err
	}
	class := pieceClasses(p)
	steps := make([]*ir.Graph, len(class))
	own := func(r int) error {
		loc, err := buildLocal(g, p, r)
		if err != nil {
			return err
		}
		steps[r], err = TrainStep(loc, p, opt)
		return err
	}
	if err := eachDevice(len(class), func(r int) error {
		if class[r] != r {
			return nil
		}
		return own(r)
	}); err != nil {
		return nil, err
	}
	return steps, eachDevice(len(class), func(r int) error {
		c := class[r]
		switch {
		case c == r:
			return nil
		case p.Mesh == nil:
			steps[r] = steps[c]
			return nil
		}
		if steps[r] = regroup(steps[c], p, c, r); steps[r] == nil {
			return own(r)
		}
		return nil
	})
}

// pieceClasses maps each device of p to the lowest device that holds the
// same piece of every segment (CostSteps): of a mesh program, in a
// replica whose pieces among its ranks are the same, too.
func pieceClasses(p *spmd.Program) []int {
	class := make([]int, p.NumDevices())
	first := map[string]int{}
	var key []byte
	for d := range class {
		key = key[:0]
		ri, k := p.Coord(d)
		if p.Mesh != nil {
			for _, s := range p.Mesh.Segments {
				key = binary.AppendUvarint(key, uint64(s.Lengths[ri]))
			}
		}
		for _, s := range p.Segments {
			if s.Within == nil {
				key = binary.AppendUvarint(key, uint64(s.Lengths[k]))
				continue
			}
			// Nested in a mesh segment: the replica's row of lengths,
			// which its collectives among ranks carry, and the device's.
			row := s.Lengths[ri*p.Devices : (ri+1)*p.Devices]
			for _, l := range row {
				key = binary.AppendUvarint(key, uint64(l))
			}
			key = binary.AppendUvarint(key, uint64(row[k]))
		}
		if c, ok := first[string(key)]; ok {
			class[d] = c
		} else {
			class[d], first[string(key)] = d, d
		}
	}
	return class
}

// regroup is mesh program p's step for device d made from step, device
// c's, where they hold the same pieces: a copy whose ops name d's groups
// where they name c's. nil when c's two groups are one, so that which of
// d's an op means is not known, or an op names another group.
func regroup(step *ir.Graph, p *spmd.Program, c, d int) *ir.Graph {
	ranks, replicas := p.Group(spmd.AxisRanks, c), p.Group(spmd.AxisReplicas, c)
	if slices.Equal(ranks, replicas) {
		return nil
	}
	ranksOf, replicasOf := p.Group(spmd.AxisRanks, d), p.Group(spmd.AxisReplicas, d)
	out := *step
	out.Ops = slices.Clone(step.Ops)
	for i := range out.Ops {
		a := &out.Ops[i].Attrs
		switch {
		case len(a.Group) == 0:
		case slices.Equal(a.Group, ranks):
			a.Group = ranksOf
		case slices.Equal(a.Group, replicas):
			a.Group = replicasOf
		default:
			return nil
		}
	}
	return &out
}

// eachDevice runs f for devices 0..n-1, one worker per CPU, and returns
// the lowest device's error (deterministic).
func eachDevice(n int, f func(r int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				errs[r] = f(r)
			}
		}()
	}
	for r := range n {
		next <- r
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// buildLocal is BuildLocal of a program already checked against g.
func buildLocal(g *ir.Graph, p *spmd.Program, rank int) (*Local, error) {
	if rank < 0 || rank >= p.NumDevices() {
		return nil, fmt.Errorf("lowering %s: device %d is not one of the program's %d", g.Name, rank, p.NumDevices())
	}
	mesh := p.Mesh != nil
	b := ir.NewBuilder(fmt.Sprintf("%s@%d", g.Name, rank), ir.Float32)
	loc := &Local{Rank: rank, Leaf: make([]ir.TensorID, len(g.Tensors)), Layout: make([]spmd.Layout, len(g.Tensors)),
		Placement: make([]spmd.Placement, len(g.Tensors))}
	for i := range loc.Leaf {
		loc.Leaf[i] = ir.NoTensor
	}
	// vals[t][placement] is the local tensor holding t in that placement.
	vals := make([]map[spmd.Placement]ir.TensorID, len(g.Tensors))
	set := func(t ir.TensorID, pl spmd.Placement, v ir.TensorID) {
		if vals[t] == nil {
			vals[t] = map[spmd.Placement]ir.TensorID{}
		}
		vals[t][pl] = v
	}
	local := func(pl spmd.Placement, shape ir.Shape) ir.Shape {
		_, s := p.Piece(pl, shape, rank)
		return s
	}
	// nextCompute[i] is the op of the first compute instruction at or
	// after i: what a layout change at i is made for.
	nextCompute := make([]ir.OpID, len(p.Instrs))
	cur := ir.NoOp
	for i := len(p.Instrs) - 1; i >= 0; i-- {
		if p.Instrs[i].Kind == spmd.Compute {
			cur = p.Instrs[i].Op
		}
		nextCompute[i] = cur
	}
	origin := map[ir.TensorID]ir.OpID{} // local tensor → the op its producer is for
	emit := func(kind ir.OpKind, a ir.Attrs, in ...ir.TensorID) []ir.TensorID {
		outs := b.Emit(kind, a, in...)
		for _, o := range outs {
			origin[o] = cur
		}
		return outs
	}
	replicate := map[ir.TensorID][]ir.Attrs{}
	for _, lf := range p.Leaves {
		t := &g.Tensors[lf.Tensor]
		pl := lf.Placement()
		v := b.Leaf(t.Kind, t.Name, t.DType, local(pl, t.Shape), t.Init)
		loc.Leaf[lf.Tensor], loc.Layout[lf.Tensor], loc.Placement[lf.Tensor] = v, lf.Layout, pl
		if t.Kind == ir.Param {
			// A device holding the whole parameter along an axis gets its
			// gradient summed along it: a replicate op whose adjoint is
			// that all-reduce. They are emitted just before the parameter's
			// first consumer and its input layout changes (see get and the
			// loop below), so that in the reversed backward the all-reduce
			// comes right after the parameter's gradient is complete and
			// those changes' adjoints, and overlaps the rest of backward,
			// as data-parallel runtimes bucket it.
			if mesh && pl.Outer.Kind == spmd.Identity {
				replicate[lf.Tensor] = append(replicate[lf.Tensor], ir.Attrs{Group: p.Group(spmd.AxisReplicas, rank)})
			}
			if pl.Inner.Kind == spmd.Identity {
				a := ir.Attrs{}
				if mesh {
					a.Group = p.Group(spmd.AxisRanks, rank)
				}
				replicate[lf.Tensor] = append(replicate[lf.Tensor], a)
			}
		}
		set(lf.Tensor, pl, v)
	}
	get := func(t ir.TensorID, pl spmd.Placement) ir.TensorID {
		if as := replicate[t]; len(as) > 0 {
			delete(replicate, t)
			restore := b.Scope(g.Tensors[t].Name)
			for _, a := range as {
				vals[t][pl] = emit(ir.OpReplicate, a, vals[t][pl])[0]
			}
			restore()
		}
		return vals[t][pl]
	}
	// A compute's parameters are replicated before the layout changes that
	// precede it, so that in the reversed backward their all-reduces come
	// after those changes' adjoints: an activation's adjoint blocks the
	// backward, the all-reduce nothing (encode's timeline prices it so).
	for i := range p.Instrs {
		in := &p.Instrs[i]
		cur = nextCompute[i]
		if i == 0 || p.Instrs[i-1].Kind == spmd.Compute {
			j := i
			for j < len(p.Instrs) && p.Instrs[j].Kind == spmd.Comm {
				j++
			}
			if j < len(p.Instrs) {
				for _, t := range g.Ops[p.Instrs[j].Op].Inputs {
					if len(replicate[t]) > 0 {
						get(t, loc.Placement[t])
					}
				}
			}
		}
		if in.Kind == spmd.Comm {
			t := &g.Tensors[in.Tensor]
			from, to := p.FromTo(i)
			a := commAttrs(p, in, t.Shape, local(to, t.Shape), rank)
			restore := b.Scope(t.Name + ".comm")
			v := emit(in.Collective, a, get(in.Tensor, from))[0]
			restore()
			if err := b.Err(); err != nil {
				return nil, fmt.Errorf("lowering %s for device %d: %w", p.Describe(g, i), rank, err)
			}
			set(in.Tensor, to, v)
			continue
		}
		op := &g.Ops[in.Op]
		inputs := make([]ir.TensorID, len(op.Inputs))
		for j, t := range op.Inputs {
			inputs[j] = get(t, p.InPlacement(i, j))
		}
		a := localAttrs(g, p, i, rank)
		restore := b.Scope(op.Name)
		outs := emit(op.Kind, a, inputs...)
		restore()
		if err := b.Err(); err != nil {
			return nil, fmt.Errorf("lowering %s for device %d: %w", p.Describe(g, i), rank, err)
		}
		for j, t := range op.Outputs {
			pl := p.OutPlacement(i, j)
			want := local(pl, g.Tensors[t].Shape)
			if got := b.Shape(outs[j]); !got.Equal(want) {
				what := pl.Inner.String()
				if mesh {
					what = pl.String()
				}
				return nil, fmt.Errorf("lowering %s for device %d: local output %q is %v, layout %s wants %v", p.Describe(g, i), rank, g.Tensors[t].Name, got, what, want)
			}
			set(t, pl, outs[j])
		}
	}
	lg, err := b.Finish(vals[g.Loss][p.LossPlacement()])
	if err != nil {
		return nil, fmt.Errorf("lowering %s for device %d: %w", g.Name, rank, err)
	}
	loc.Graph = lg
	loc.Origin = make([]ir.OpID, len(lg.Ops))
	for i := range lg.Ops {
		loc.Origin[i] = ir.NoOp
		if outs := lg.Ops[i].Outputs; len(outs) > 0 {
			if o, ok := origin[outs[0]]; ok {
				loc.Origin[i] = o
			}
		}
	}
	return loc, nil
}

// commAttrs sets a collective's pieces along the axis it communicates on,
// this device's rank there and, in a mesh program, its group. out is the
// device's shape of the result (a pad's target).
func commAttrs(p *spmd.Program, in *spmd.Instr, shape, out ir.Shape, rank int) ir.Attrs {
	pieces := func(l spmd.Layout) ([]int, int) { return p.AxisPieces(in.Axis, l, shape, rank) }
	var a ir.Attrs
	switch in.Collective {
	case ir.OpAllGather:
		sizes, r := pieces(in.From)
		a = ir.Attrs{Axis: in.From.Dim, Sizes: sizes, Rank: r, Method: in.Method}
	case ir.OpReduceScatter:
		sizes, r := pieces(in.To)
		a = ir.Attrs{Axis: in.To.Dim, Sizes: sizes, Rank: r, Method: in.Method}
	case ir.OpAllToAll:
		sizes, r := pieces(in.From)
		split, _ := pieces(in.To)
		a = ir.Attrs{Axes: []int{in.From.Dim, in.To.Dim}, Sizes: sizes, Split: split, Rank: r}
	case ir.OpDynamicSlice:
		sizes, r := pieces(in.To)
		return ir.Attrs{Axis: in.To.Dim, Sizes: sizes, Rank: r}
	case ir.OpPad:
		sizes, r := pieces(in.From)
		start := 0
		for _, s := range sizes[:r] {
			start += s
		}
		return ir.Attrs{Axis: in.From.Dim, Start: start, Shape: out.Clone()}
	}
	if p.Mesh != nil && ir.IsCollective(in.Collective) {
		a.Group = p.Group(in.Axis, rank)
	}
	return a
}

// localAttrs adapts compute instruction i's op attributes to device rank's
// shapes: reshape targets shrink to the local piece, dropout learns where
// its piece sits (so its mask matches the unsharded op's), mean learns the
// unsharded count it divides by, and a vocabulary-sharded embedding learns
// its first row.
func localAttrs(g *ir.Graph, p *spmd.Program, i, rank int) ir.Attrs {
	in := &p.Instrs[i]
	op := &g.Ops[in.Op]
	a := op.Attrs
	out := g.Tensors[op.Outputs[0]].Shape
	switch op.Kind {
	case ir.OpReshape:
		_, a.Shape = p.Piece(p.OutPlacement(i, 0), out, rank)
	case ir.OpDropout:
		a.Shape = out.Clone()
		a.Offset, _ = p.Piece(p.OutPlacement(i, 0), out, rank)
	case ir.OpMean:
		// A device's piece of a reduced dim (spmd's split-reduced) still
		// divides by the unsharded count: the op records the unsharded
		// input shape (ir.ReduceCount), and so does the gradient autodiff
		// derives from it. Kept dims do not enter the count.
		a.Shape = g.Tensors[op.Inputs[0]].Shape.Clone()
	case ir.OpConv2D:
		a.Groups = localGroups(g, p, i, rank, op)
	case ir.OpEmbedding:
		pl := p.InPlacement(i, 1)
		if (pl.Inner.Kind == spmd.Gather && pl.Inner.Dim == 0) || (pl.Outer.Kind == spmd.Gather && pl.Outer.Dim == 0) {
			off, _ := p.Piece(pl, g.Tensors[op.Inputs[1]].Shape, rank)
			a.Partial = true
			a.Offset = []int{off[0]}
		}
	}
	return a
}

// localGroups is the number of groups of a grouped convolution on device
// rank: its share of x's channels holds that share of the groups (spmd's
// split-groups rule cuts at group boundaries). A device holding no
// channels keeps the original count, as 0 would read as 1 and an empty
// shard fits any count (ir.ConvGroups).
func localGroups(g *ir.Graph, p *spmd.Program, i, rank int, op *ir.Op) int {
	if op.Attrs.Groups <= 1 {
		return op.Attrs.Groups
	}
	xs := g.Tensors[op.Inputs[0]].Shape
	_, local := p.Piece(p.InPlacement(i, 0), xs, rank)
	if local[1] == 0 || local[1] == xs[1] {
		return op.Attrs.Groups
	}
	return op.Attrs.Groups * local[1] / xs[1]
}
