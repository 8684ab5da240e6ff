package spmd

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"hap/ir"
)

// InstrKind distinguishes computation from communication.
type InstrKind uint8

const (
	// Compute runs a forward op under one of its rules.
	Compute InstrKind = iota
	// Comm changes one tensor's layout.
	Comm
)

// Instr is one instruction of a distributed program.
type Instr struct {
	Kind InstrKind
	// Compute: the forward op and its rule.
	Op   ir.OpID
	Rule Rule
	// Comm: the tensor, its layout before and after, the instruction
	// (all_gather, reduce_scatter, all_reduce, all_to_all, dynamic_slice or
	// pad) and, for uneven all-gather and reduce-scatter pieces, the method
	// ("padded" or "grouped").
	Tensor     ir.TensorID
	From, To   Layout
	Collective ir.OpKind
	Method     string

	// Mesh programs only (zero otherwise). Compute: Outer is the rule
	// across replicas (Rule is among a replica's ranks). Comm: Axis is the
	// axis the instruction communicates along, From and To are layouts
	// along it, and Other is the tensor's layout along the other axis,
	// which the instruction keeps.
	Outer Rule
	Axis  Axis
	Other Layout
}

// LeafLayout says how a fed tensor (input, label, parameter) is held:
// Layout among ranks and, in a mesh program, Outer across replicas.
type LeafLayout struct {
	Tensor ir.TensorID
	Layout Layout
	Outer  Layout
}

// Placement is the leaf's placement.
func (lf LeafLayout) Placement() Placement { return Placement{Outer: lf.Outer, Inner: lf.Layout} }

// Program is a distributed program for a forward graph: segments with
// their integer lengths per device, the layouts of the fed tensors, and the
// instruction sequence. Lowering derives backward and update from it.
//
// With a Mesh the program is 2-D (see mesh.go): Devices is then the ranks
// of one replica, Segments cut among them, and the mesh says which devices
// form the replicas and how its own segments cut across them.
type Program struct {
	Devices  int
	Segments []Segment
	Leaves   []LeafLayout
	Instrs   []Instr
	Mesh     *Mesh
	// CommSwaps, when set, reorders the lowered program's communication
	// streams: each pair names two collectives by the IDs lowering gives
	// them (devprog.Comm.ID, the same for the same program), the second
	// issued before the first (devprog.Program.ApplySwaps). It is the order
	// package order searched for a plan; empty means the order lowering
	// lists the collectives in. The synthesizer leaves it empty.
	CommSwaps [][2]int
	// CommDigest, when set, is the lowered collectives' digest the swaps
	// were found for (devprog.Program.CollectiveDigest); lowering refuses
	// the swaps for a program whose collectives differ.
	CommDigest string
	// Recompute lists the units of activation recomputation: each a set
	// of forward ops (a layer) whose activations backward does not keep
	// from forward. Lowering keeps only what the unit reads from outside
	// it and runs the unit's forward again, its collectives included,
	// just before the unit's backward (lower/recompute.go). Empty: every
	// activation backward reads is kept, as without recomputation.
	Recompute [][]ir.OpID
}

// SegmentsUsed reports, per segment of a 1-D program, whether some
// layout of it (a leaf's, a rule's, a layout change's) is a Gather on
// that segment. A segment no layout names still has lengths, which cut
// nothing: the solver leaves them wherever its search ended, and a report
// should not read them as a split.
func (p *Program) SegmentsUsed() []bool {
	used := make([]bool, len(p.Segments))
	mark := func(ls ...Layout) {
		for _, l := range ls {
			if l.Kind == Gather && l.Seg >= 0 && l.Seg < len(used) {
				used[l.Seg] = true
			}
		}
	}
	for _, lf := range p.Leaves {
		mark(lf.Layout)
	}
	for _, in := range p.Instrs {
		mark(in.Rule.In...)
		mark(in.Rule.Out...)
		mark(in.From, in.To)
	}
	return used
}

// InPlacement is the placement instruction i (a compute) reads its j-th
// input in; OutPlacement the one its j-th output gets.
func (p *Program) InPlacement(i, j int) Placement {
	in := &p.Instrs[i]
	pl := Placement{Outer: I, Inner: in.Rule.In[j]}
	if p.Mesh != nil {
		pl.Outer = in.Outer.In[j]
	}
	return pl
}

// OutPlacement is the placement compute instruction i gives its j-th output.
func (p *Program) OutPlacement(i, j int) Placement {
	in := &p.Instrs[i]
	pl := Placement{Outer: I, Inner: in.Rule.Out[j]}
	if p.Mesh != nil {
		pl.Outer = in.Outer.Out[j]
	}
	return pl
}

// FromTo is the placements communication instruction i reads and writes.
func (p *Program) FromTo(i int) (from, to Placement) {
	in := &p.Instrs[i]
	return along(in.Axis, in.From, in.Other), along(in.Axis, in.To, in.Other)
}

// LossPlacement is where the loss must end: Reduce on every axis.
func (p *Program) LossPlacement() Placement {
	if p.Mesh == nil {
		return Placement{Outer: I, Inner: R}
	}
	return Placement{Outer: R, Inner: R}
}

// Methods for uneven collectives.
const (
	MethodPadded  = "padded"
	MethodGrouped = "grouped"
)

// Conversion names the instruction that turns layout from into to, or ""
// when no single instruction does.
func Conversion(from, to Layout) ir.OpKind {
	switch {
	case from.Kind == Gather && to.Kind == Identity:
		return ir.OpAllGather
	case from.Kind == Reduce && to.Kind == Gather:
		return ir.OpReduceScatter
	case from.Kind == Reduce && to.Kind == Identity:
		return ir.OpAllReduce
	case from.Kind == Gather && to.Kind == Gather && from.Dim != to.Dim:
		return ir.OpAllToAll
	case from.Kind == Identity && to.Kind == Gather:
		return ir.OpDynamicSlice
	case from.Kind == Gather && to.Kind == Reduce:
		return ir.OpPad
	}
	return ""
}

// ErrPrecondition is wrapped by Check errors about unmet preconditions.
var ErrPrecondition = errors.New("precondition not established")

// InstrError locates a Check failure.
type InstrError struct {
	Index int // instruction index, or −1 for program-level problems
	What  string
	Err   error
}

func (e *InstrError) Error() string {
	if e.Index < 0 {
		return e.What + ": " + e.Err.Error()
	}
	return fmt.Sprintf("instruction %d (%s): %v", e.Index, e.What, e.Err)
}

func (e *InstrError) Unwrap() error { return e.Err }

// Describe names an instruction for people.
func (p *Program) Describe(g *ir.Graph, i int) string {
	in := &p.Instrs[i]
	if in.Kind == Compute {
		if in.Op < 0 || int(in.Op) >= len(g.Ops) {
			return fmt.Sprintf("compute op %d", in.Op)
		}
		op := &g.Ops[in.Op]
		if p.Mesh != nil {
			return fmt.Sprintf("compute %q (%s) %s across replicas × %s among ranks", op.Name, op.Kind, in.Outer.Name, in.Rule.Name)
		}
		return fmt.Sprintf("compute %q (%s) %s", op.Name, op.Kind, in.Rule.Name)
	}
	name := fmt.Sprint(in.Tensor)
	if in.Tensor >= 0 && int(in.Tensor) >= 0 && int(in.Tensor) < len(g.Tensors) {
		name = fmt.Sprintf("%q", g.Tensors[in.Tensor].Name)
	}
	if p.Mesh != nil {
		return fmt.Sprintf("%s across %s of %s %s→%s (%s along the other axis)", in.Collective, in.Axis, name, in.From, in.To, in.Other)
	}
	return fmt.Sprintf("%s of %s %s→%s", in.Collective, name, in.From, in.To)
}

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}

func layoutSet(ls []Layout) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return "{" + strings.Join(sortedStrings(s), ", ") + "}"
}

func hasLayout(ls []Layout, l Layout) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// Check proves p a valid distributed program for the forward graph g: the
// segments' lengths are non-negative and sum to their units; every fed
// tensor has one layout that fits it (parameters are not Reduce); every
// instruction's precondition holds when it runs (the tensor is available in
// the layout it reads, the rule is one of the op's rules, the collective is
// the one that performs the conversion); every op runs exactly once; and
// the loss ends as Reduce. The error names the first instruction at fault.
//
// A mesh program is checked the same way with placements for layouts: the
// mesh names every device once, nested segments cut each replica's share
// exactly, every placement is one the two axes can hold together (see
// checkPlacement), each compute instruction's rules are the op's rules
// across replicas and among ranks, and each communication converts the
// layout along its axis. The loss ends as Reduce on both axes.
func Check(g *ir.Graph, p *Program) error {
	prog := func(format string, args ...any) error {
		return &InstrError{Index: -1, What: "program", Err: fmt.Errorf(format, args...)}
	}
	if p.Devices < 1 {
		return prog("%d devices", p.Devices)
	}
	if err := p.checkMesh(); err != nil {
		return prog("%v", err)
	}
	for i, s := range p.Segments {
		if s.Within != nil {
			continue // checkMesh did
		}
		if len(s.Lengths) != p.Devices {
			return prog("segment %q has %d lengths for %d devices", s.Name, len(s.Lengths), p.Devices)
		}
		sum := 0
		for _, l := range s.Lengths {
			if l < 0 {
				return prog("segment %q has a negative length in %v", s.Name, s.Lengths)
			}
			sum += l
		}
		if sum != s.Units || s.Units < 1 {
			return prog("segment %d %q lengths %v sum to %d, want %d units", i, s.Name, s.Lengths, sum, s.Units)
		}
	}
	unitOf := map[ir.OpID]int{}
	for u, ops := range p.Recompute {
		if len(ops) == 0 {
			return prog("recompute unit %d has no ops", u)
		}
		for _, op := range ops {
			if op < 0 || int(op) >= len(g.Ops) {
				return prog("recompute unit %d names op %d, which does not exist", u, op)
			}
			if v, ok := unitOf[op]; ok {
				return prog("op %q is in recompute units %d and %d", g.Ops[op].Name, v, u)
			}
			unitOf[op] = u
		}
	}
	avail := make([][]Placement, len(g.Tensors))
	for _, lf := range p.Leaves {
		if lf.Tensor < 0 || int(lf.Tensor) >= len(g.Tensors) {
			return prog("leaf layout for tensor %d, which does not exist", lf.Tensor)
		}
		t := &g.Tensors[lf.Tensor]
		if !t.Kind.IsLeaf() {
			return prog("leaf layout for %q, which is computed", t.Name)
		}
		if avail[lf.Tensor] != nil {
			return prog("%q has two leaf layouts", t.Name)
		}
		pl := lf.Placement()
		if err := p.checkPlacement(pl, t.Shape); err != nil {
			if p.Mesh == nil && pl.Outer == I {
				return prog("%q %v cannot be laid out as %s", t.Name, t.Shape, lf.Layout)
			}
			return prog("%s %q: %v", t.Kind, t.Name, err)
		}
		if pl.Inner.Kind == Reduce || pl.Outer.Kind == Reduce {
			return prog("%s %q cannot start as Reduce", t.Kind, t.Name)
		}
		avail[lf.Tensor] = []Placement{pl}
	}
	for i := range g.Tensors {
		if g.Tensors[i].Kind.IsLeaf() && avail[i] == nil {
			return prog("%s %q has no layout", g.Tensors[i].Kind, g.Tensors[i].Name)
		}
	}
	done := make([]bool, len(g.Ops))
	for i := range p.Instrs {
		in := &p.Instrs[i]
		fail := func(err error) error { return &InstrError{Index: i, What: p.Describe(g, i), Err: err} }
		switch in.Kind {
		case Comm:
			if in.Tensor < 0 || int(in.Tensor) >= len(g.Tensors) {
				return fail(fmt.Errorf("tensor %d does not exist", in.Tensor))
			}
			if p.Mesh == nil && (in.Axis != AxisRanks || in.Other != I) {
				return fail(fmt.Errorf("communication across %s with %s along the other axis needs a mesh program", in.Axis, in.Other))
			}
			if in.Axis > AxisReplicas {
				return fail(fmt.Errorf("unknown axis %d", in.Axis))
			}
			t := &g.Tensors[in.Tensor]
			from, to := p.FromTo(i)
			if !hasPlacement(avail[in.Tensor], from) {
				return fail(fmt.Errorf("%w: %q is needed as %s but is available as %s", ErrPrecondition, t.Name, p.describePlacement(from), p.placementSet(avail[in.Tensor])))
			}
			if want := Conversion(in.From, in.To); want == "" || want != in.Collective {
				return fail(fmt.Errorf("%s does not turn %s into %s (that takes %q)", in.Collective, in.From, in.To, want))
			}
			if !t.DType.IsFloat() && in.Collective != ir.OpDynamicSlice {
				return fail(fmt.Errorf("%q is %s: no %s moves integers (only a local dynamic_slice of Identity)", t.Name, t.DType, in.Collective))
			}
			if err := p.checkPlacement(to, t.Shape); err != nil {
				if p.Mesh == nil {
					return fail(fmt.Errorf("%q %v cannot be laid out as %s", t.Name, t.Shape, in.To))
				}
				return fail(fmt.Errorf("%q: %v", t.Name, err))
			}
			switch in.Method {
			case "", MethodPadded, MethodGrouped:
			default:
				return fail(fmt.Errorf("unknown method %q", in.Method))
			}
			if !hasPlacement(avail[in.Tensor], to) {
				avail[in.Tensor] = append(avail[in.Tensor], to)
			}
		case Compute:
			if in.Op < 0 || int(in.Op) >= len(g.Ops) {
				return fail(fmt.Errorf("op %d does not exist", in.Op))
			}
			op := &g.Ops[in.Op]
			if done[in.Op] {
				return fail(fmt.Errorf("op %q runs twice", op.Name))
			}
			if !isRule(g, op, p.Segments, in.Rule) {
				return fail(fmt.Errorf("rule %q, %s → %s, is not a sharding rule of %s", in.Rule.Name, layoutSet(in.Rule.In), layoutSet(in.Rule.Out), op.Kind))
			}
			if p.Mesh == nil && (in.Outer.Name != "" || in.Outer.In != nil || in.Outer.Out != nil) {
				return fail(fmt.Errorf("a rule across replicas (%s) needs a mesh program", in.Outer.Name))
			}
			if p.Mesh != nil && !isRule(g, op, p.Mesh.Segments, in.Outer) {
				return fail(fmt.Errorf("%s → %s is not a sharding rule of %s across replicas", layoutSet(in.Outer.In), layoutSet(in.Outer.Out), op.Kind))
			}
			for j, t := range op.Inputs {
				if pl := p.InPlacement(i, j); !hasPlacement(avail[t], pl) {
					return fail(fmt.Errorf("%w: input %q is needed as %s but is available as %s", ErrPrecondition, g.Tensors[t].Name, p.describePlacement(pl), p.placementSet(avail[t])))
				}
			}
			for j, t := range op.Outputs {
				pl := p.OutPlacement(i, j)
				if err := p.checkPlacement(pl, g.Tensors[t].Shape); err != nil {
					return fail(fmt.Errorf("output %q: %v", g.Tensors[t].Name, err))
				}
				avail[t] = []Placement{pl}
			}
			done[in.Op] = true
		default:
			return fail(fmt.Errorf("unknown instruction kind %d", in.Kind))
		}
	}
	for i := range g.Ops {
		if !done[i] && g.Ops[i].Phase == ir.Forward {
			return prog("op %q never runs", g.Ops[i].Name)
		}
	}
	if want := p.LossPlacement(); g.Loss != ir.NoTensor && !hasPlacement(avail[g.Loss], want) {
		return prog("%w: the loss %q must end as %s but is available as %s", ErrPrecondition, g.Tensors[g.Loss].Name, p.describePlacement(want), p.placementSet(avail[g.Loss]))
	}
	return nil
}

// isRule reports whether r is one of op's rules under segs: its layouts
// and its name, which a plan document records and reports print; a name
// no rule has is an edited or corrupt program.
func isRule(g *ir.Graph, op *ir.Op, segs []Segment, r Rule) bool {
	if len(r.In) != len(op.Inputs) || len(r.Out) != len(op.Outputs) {
		return false
	}
	for _, x := range Rules(g, op, segs) {
		if x.Equal(r) && x.Name == r.Name {
			return true
		}
	}
	return false
}
