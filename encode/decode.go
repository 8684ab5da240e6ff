package encode

import (
	"fmt"

	"hap/ir"
	"hap/spmd"
)

// Decode turns a choice into a distributed program whose communication is
// exactly what Evaluate priced: every needed layout made once per tensor,
// from the layout the tensor is produced in, by the canonical instruction
// (or by all-to-all, where the choice says so).
func (e *Encoding) Decode(ch *Choice) (*spmd.Program, error) {
	g := e.G
	segs := make([]spmd.Segment, len(e.Segs))
	for s := range segs {
		segs[s] = e.Segs[s]
		segs[s].Lengths = append([]int{}, ch.Lengths[s]...)
	}
	p := &spmd.Program{Devices: e.N, Segments: segs, Recompute: e.RecomputeOps()}
	avail := make([]map[spmd.Layout]bool, len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if !t.Kind.IsLeaf() {
			continue
		}
		l := e.have(ch, e.tclassOf[i])
		p.Leaves = append(p.Leaves, spmd.LeafLayout{Tensor: t.ID, Layout: l})
		avail[i] = map[spmd.Layout]bool{l: true}
	}
	var make_ func(t ir.TensorID, q spmd.Layout) error
	make_ = func(t ir.TensorID, q spmd.Layout) error {
		if avail[t][q] {
			return nil
		}
		tc := e.tclassOf[t]
		h := e.have(ch, tc)
		emit := func(from spmd.Layout, kind ir.OpKind) {
			in := spmd.Instr{Kind: spmd.Comm, Tensor: t, From: from, To: q, Collective: kind}
			if kind == ir.OpAllGather || kind == ir.OpReduceScatter {
				in.Method = spmd.MethodPadded
				if e.grouped(ch, tc, q) {
					in.Method = spmd.MethodGrouped
				}
			}
			p.Instrs = append(p.Instrs, in)
			avail[t][q] = true
		}
		switch {
		case h.Kind == spmd.Identity && q.Kind == spmd.Gather:
			emit(h, ir.OpDynamicSlice)
		case h.Kind == spmd.Gather && q.Kind == spmd.Identity:
			emit(h, ir.OpAllGather)
		case h.Kind == spmd.Gather && q.Kind == spmd.Gather && e.usesAllToAll(ch, tc):
			emit(h, ir.OpAllToAll)
		case h.Kind == spmd.Gather && q.Kind == spmd.Gather:
			if err := make_(t, spmd.I); err != nil {
				return err
			}
			emit(spmd.I, ir.OpDynamicSlice)
		case h.Kind == spmd.Gather && q.Kind == spmd.Reduce:
			emit(h, ir.OpPad)
		case h.Kind == spmd.Reduce && q.Kind == spmd.Identity:
			emit(h, ir.OpAllReduce)
		case h.Kind == spmd.Reduce && q.Kind == spmd.Gather:
			_, via, err := e.tensorComm(ch, tc)
			if err != nil {
				return fmt.Errorf("making %q %s from %s: %w", g.Tensors[t].Name, q, h, err)
			}
			if via {
				if err := make_(t, spmd.I); err != nil {
					return err
				}
				emit(spmd.I, ir.OpDynamicSlice)
			} else {
				emit(h, ir.OpReduceScatter)
			}
		default:
			return fmt.Errorf("%w: %q is %s, a consumer needs %s", ErrInfeasibleChoice, g.Tensors[t].Name, h, q)
		}
		return nil
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		r := e.Classes[e.classOf[i]].Rules[ch.Rule[e.classOf[i]]]
		// Leaves' layout changes first: the timeline prices them as
		// prefetched ahead of the block's activation changes (P before Fa,
		// and in backward the blocking adjoints before the gradients'), and
		// the communication stream runs in program order.
		for _, leaves := range [...]bool{true, false} {
			for j, t := range op.Inputs {
				if g.Tensors[t].Kind.IsLeaf() != leaves {
					continue
				}
				if err := make_(t, r.In[j]); err != nil {
					return nil, fmt.Errorf("op %q: %w", op.Name, err)
				}
			}
		}
		p.Instrs = append(p.Instrs, spmd.Instr{Kind: spmd.Compute, Op: op.ID, Rule: r})
		for j, t := range op.Outputs {
			avail[t] = map[spmd.Layout]bool{r.Out[j]: true}
		}
	}
	if err := spmd.Check(g, p); err != nil {
		return nil, err
	}
	return p, nil
}

// grouped reports the method for making layout q of class tc: the one
// pruning fixed (prune.go), else the choice's.
func (e *Encoding) grouped(ch *Choice, tc int, q spmd.Layout) bool {
	for qi, l := range e.Layouts(tc) {
		if l == q {
			return e.groupedAt(ch, tc, qi)
		}
	}
	return false
}

// groupedAt is grouped for layout index qi.
func (e *Encoding) groupedAt(ch *Choice, tc, qi int) bool {
	switch e.methodOf(tc, qi) {
	case methodPadded:
		return false
	case methodGrouped:
		return true
	}
	return ch.Grouped != nil && ch.Grouped[tc] != nil && ch.Grouped[tc][qi]
}
