package lower

import (
	"fmt"

	"hap/ir"
	"hap/spmd"
)

// Activation recomputation. A unit of p.Recompute (a layer, as the
// planner chose it) keeps from forward only what it reads from outside
// itself — its input, the parameters, the masks — and runs its forward
// ops again, layout changes and collectives included, just before the
// first op of its backward; that backward then reads the recomputed
// activations, not the forward's. The forward's own activations are read
// by nothing after forward (outside the unit, its output is the next
// unit's input, read from the forward as before), so the schedule frees
// them there: the memory the unit held across the whole step is held
// only while its own backward runs, and the step pays the unit's forward
// a second time. The rewrite is of each device's training step, after
// autodiff: the recomputed ops are copies of the forward's, with the same
// attributes (a dropout's seed and offset among them), so they compute
// the very values the backward would have read, and the gradients are
// those of the step without recomputation, bit for bit.

// TrainStep is device loc's training step (ir.BuildTrainStep of its local
// forward program) with p's recomputation units rewritten in.
func TrainStep(loc *Local, p *spmd.Program, opt ir.Optimizer) (*ir.Graph, error) {
	step, err := ir.BuildTrainStep(loc.Graph, opt)
	if err != nil {
		return nil, fmt.Errorf("device %d: %w", loc.Rank, err)
	}
	if len(p.Recompute) == 0 {
		return step, nil
	}
	out, err := recompute(step, loc.Origin, p.Recompute)
	if err != nil {
		return nil, fmt.Errorf("device %d: recomputation: %w", loc.Rank, err)
	}
	return out, nil
}

// recompute rewrites training step step, whose forward op i was emitted
// for original op origin[i], so that each unit of units (original forward
// ops) is recomputed before its backward (above).
func recompute(step *ir.Graph, origin []ir.OpID, units [][]ir.OpID) (*ir.Graph, error) {
	nf := step.Train.ForwardOps
	if len(origin) < nf {
		return nil, fmt.Errorf("%d origins for %d forward ops", len(origin), nf)
	}
	unitOf := map[ir.OpID]int{}
	for u, ops := range units {
		for _, op := range ops {
			unitOf[op] = u
		}
	}
	unit := make([]int, nf) // per local forward op, its unit or −1
	for i := range unit {
		unit[i] = -1
		if u, ok := unitOf[origin[i]]; ok && origin[i] != ir.NoOp {
			unit[i] = u
		}
	}
	// The unit's backward: the ops autodiff emitted for its forward ops
	// (GradOf), accumulations of gradients into its inputs among them.
	ofUnit := func(op *ir.Op) int {
		if op.GradOf == ir.NoOp || int(op.GradOf) >= nf {
			return -1
		}
		return unit[op.GradOf]
	}
	first := make([]int, len(units)) // the unit's first backward op, −1 if none
	for u := range first {
		first[u] = -1
	}
	for i := nf; i < len(step.Ops); i++ {
		if u := ofUnit(&step.Ops[i]); u >= 0 && first[u] < 0 {
			first[u] = i
		}
	}
	g := step.Clone()
	before := make([][]ir.OpID, len(step.Ops)) // copies to run just before op i
	for u := range units {
		if first[u] < 0 {
			continue // nothing of it is differentiated: nothing to keep
		}
		copyOf := map[ir.TensorID]ir.TensorID{}
		for i := range nf {
			if unit[i] != u {
				continue
			}
			op := step.Ops[i]
			c := ir.Op{ID: ir.OpID(len(g.Ops)), Name: op.Name + ".recompute", Kind: op.Kind, Attrs: op.Attrs,
				Phase: ir.Backward, GradOf: ir.NoOp}
			for _, t := range op.Inputs {
				if ct, ok := copyOf[t]; ok {
					t = ct
				}
				c.Inputs = append(c.Inputs, t)
			}
			for _, t := range op.Outputs {
				nt := g.Tensors[t]
				nt.ID = ir.TensorID(len(g.Tensors))
				nt.Name += ".recompute"
				nt.Shape = nt.Shape.Clone()
				nt.Producer = c.ID
				g.Tensors = append(g.Tensors, nt)
				copyOf[t] = nt.ID
				c.Outputs = append(c.Outputs, nt.ID)
			}
			g.Ops = append(g.Ops, c)
			before[first[u]] = append(before[first[u]], c.ID)
		}
		for i := nf; i < len(step.Ops); i++ {
			if ofUnit(&g.Ops[i]) != u {
				continue
			}
			for j, t := range g.Ops[i].Inputs {
				if ct, ok := copyOf[t]; ok {
					g.Ops[i].Inputs[j] = ct
				}
			}
		}
	}
	order := make([]ir.OpID, 0, len(g.Ops))
	for i := range step.Ops {
		order = append(order, before[i]...)
		order = append(order, ir.OpID(i))
	}
	out, err := g.Reordered(order)
	if err != nil {
		return nil, err
	}
	if err := out.Check(); err != nil {
		return nil, err
	}
	return out, nil
}
