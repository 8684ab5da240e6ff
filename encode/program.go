package encode

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
}

// LeafLayout says how a fed tensor (input, label, parameter) is held.
type LeafLayout struct {
	Tensor ir.TensorID
	Layout Layout
}

// Program is a distributed program for a forward graph: segments with
// their integer lengths per device, the layouts of the fed tensors, and the
// instruction sequence. Lowering derives backward and update from it.
type Program struct {
	Devices  int
	Segments []Segment
	Leaves   []LeafLayout
	Instrs   []Instr
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
		return fmt.Sprintf("compute %q (%s) %s", op.Name, op.Kind, in.Rule.Name)
	}
	name := fmt.Sprint(in.Tensor)
	if in.Tensor >= 0 && int(in.Tensor) >= 0 && int(in.Tensor) < len(g.Tensors) {
		name = fmt.Sprintf("%q", g.Tensors[in.Tensor].Name)
	}
	return fmt.Sprintf("%s of %s %s→%s", in.Collective, name, in.From, in.To)
}

func layoutSet(ls []Layout) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	sort.Strings(s)
	return "{" + strings.Join(s, ", ") + "}"
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
func Check(g *ir.Graph, p *Program) error {
	prog := func(format string, args ...any) error {
		return &InstrError{Index: -1, What: "program", Err: fmt.Errorf(format, args...)}
	}
	if p.Devices < 1 {
		return prog("%d devices", p.Devices)
	}
	for i, s := range p.Segments {
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
	avail := make([][]Layout, len(g.Tensors))
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
		if !Fits(lf.Layout, t.Shape, p.Segments) {
			return prog("%q %v cannot be laid out as %s", t.Name, t.Shape, lf.Layout)
		}
		if lf.Layout.Kind == Reduce {
			return prog("%s %q cannot start as Reduce", t.Kind, t.Name)
		}
		avail[lf.Tensor] = []Layout{lf.Layout}
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
			t := &g.Tensors[in.Tensor]
			if !hasLayout(avail[in.Tensor], in.From) {
				return fail(fmt.Errorf("%w: %q is needed as %s but is available as %s", ErrPrecondition, t.Name, in.From, layoutSet(avail[in.Tensor])))
			}
			if want := Conversion(in.From, in.To); want == "" || want != in.Collective {
				return fail(fmt.Errorf("%s does not turn %s into %s (that takes %q)", in.Collective, in.From, in.To, want))
			}
			if !Fits(in.To, t.Shape, p.Segments) {
				return fail(fmt.Errorf("%q %v cannot be laid out as %s", t.Name, t.Shape, in.To))
			}
			switch in.Method {
			case "", MethodPadded, MethodGrouped:
			default:
				return fail(fmt.Errorf("unknown method %q", in.Method))
			}
			if !hasLayout(avail[in.Tensor], in.To) {
				avail[in.Tensor] = append(avail[in.Tensor], in.To)
			}
		case Compute:
			if in.Op < 0 || int(in.Op) >= len(g.Ops) {
				return fail(fmt.Errorf("op %d does not exist", in.Op))
			}
			op := &g.Ops[in.Op]
			if done[in.Op] {
				return fail(fmt.Errorf("op %q runs twice", op.Name))
			}
			valid := false
			for _, r := range Rules(g, op, p.Segments) {
				valid = valid || r.equal(in.Rule)
			}
			if !valid {
				return fail(fmt.Errorf("%s → %s is not a sharding rule of %s", layoutSet(in.Rule.In), layoutSet(in.Rule.Out), op.Kind))
			}
			for j, t := range op.Inputs {
				if !hasLayout(avail[t], in.Rule.In[j]) {
					return fail(fmt.Errorf("%w: input %q is needed as %s but is available as %s", ErrPrecondition, g.Tensors[t].Name, in.Rule.In[j], layoutSet(avail[t])))
				}
			}
			for j, t := range op.Outputs {
				avail[t] = []Layout{in.Rule.Out[j]}
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
	if g.Loss != ir.NoTensor && !hasLayout(avail[g.Loss], R) {
		return prog("%w: the loss %q must end as Reduce but is available as %s", ErrPrecondition, g.Tensors[g.Loss].Name, layoutSet(avail[g.Loss]))
	}
	return nil
}
