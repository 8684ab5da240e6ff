package spmd

import (
	"fmt"

	"hap/ir"
)

// Compose makes a mesh program from two 1-D programs of the same graph:
// outer, over one device per replica, says how each tensor is split across
// replicas, and inner, over the ranks of one replica, how each replica's
// share is split among its ranks — megatron's data parallelism across
// machines around tensor parallelism inside each. replicas[r][k] is the
// global device of rank k of replica r (len(replicas) = outer.Devices,
// every replica inner.Devices long).
//
// nest maps inner segments to the outer segment they refine (the samples,
// when both programs split them): in the result such a segment is nested
// (Segment.Within), each replica's share cut among its ranks in proportion
// to the inner program's lengths. The other inner segments must cut
// dimensions the outer program leaves whole wherever both split a tensor.
//
// Every op runs under the pair of rules the two programs chose for it.
// Before it, Compose establishes each input's pair of layouts from what is
// available, one axis at a time (local conversions first, and among the
// rest the ranks axis first: it is a machine's fast links under megatron);
// method picks each uneven all-gather's or reduce-scatter's method. The
// result is checked.
func Compose(g *ir.Graph, outer, inner *Program, replicas [][]int, nest map[int]int, method func(t ir.TensorID, from, to Layout) string) (*Program, error) {
	if outer.Mesh != nil || inner.Mesh != nil {
		return nil, fmt.Errorf("compose: the outer and inner programs must be 1-D")
	}
	if len(replicas) != outer.Devices {
		return nil, fmt.Errorf("compose: %d replicas for an outer program over %d", len(replicas), outer.Devices)
	}
	p := &Program{Devices: inner.Devices, Mesh: &Mesh{Replicas: replicas, Segments: cloneSegments(outer.Segments)}}
	p.Segments = cloneSegments(inner.Segments)
	for s, w := range nest {
		if s < 0 || s >= len(p.Segments) || w < 0 || w >= len(p.Mesh.Segments) {
			return nil, fmt.Errorf("compose: nesting inner segment %d in outer segment %d: no such segment", s, w)
		}
		seg := &p.Segments[s]
		if seg.Units != p.Mesh.Segments[w].Units {
			return nil, fmt.Errorf("compose: inner segment %q (%d units) cannot nest in outer segment %q (%d units)", seg.Name, seg.Units, p.Mesh.Segments[w].Name, p.Mesh.Segments[w].Units)
		}
		shares := make([]float64, len(seg.Lengths))
		for k, l := range seg.Lengths {
			shares[k] = float64(l)
		}
		w := w
		seg.Within = &w
		seg.Lengths = NestedLengths(p.Mesh.Segments[w].Lengths, shares)
	}
	if err := p.checkMesh(); err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}

	outerLeaf := map[ir.TensorID]Layout{}
	for _, lf := range outer.Leaves {
		outerLeaf[lf.Tensor] = lf.Layout
	}
	avail := make([][]Placement, len(g.Tensors))
	for _, lf := range inner.Leaves {
		o, ok := outerLeaf[lf.Tensor]
		if !ok {
			return nil, fmt.Errorf("compose: the outer program has no layout for %q", g.Tensors[lf.Tensor].Name)
		}
		pl := Placement{Outer: o, Inner: lf.Layout}
		if err := p.checkPlacement(pl, g.Tensors[lf.Tensor].Shape); err != nil {
			return nil, fmt.Errorf("compose: %s %q: %w", g.Tensors[lf.Tensor].Kind, g.Tensors[lf.Tensor].Name, err)
		}
		p.Leaves = append(p.Leaves, LeafLayout{Tensor: lf.Tensor, Layout: lf.Layout, Outer: o})
		avail[lf.Tensor] = []Placement{pl}
	}

	rules := func(q *Program) map[ir.OpID]Rule {
		m := map[ir.OpID]Rule{}
		for _, in := range q.Instrs {
			if in.Kind == Compute {
				m[in.Op] = in.Rule
			}
		}
		return m
	}
	outerRule, innerRule := rules(outer), rules(inner)

	emit := func(t ir.TensorID, axis Axis, from, to, other Layout) {
		kind := Conversion(from, to)
		m := ""
		if kind == ir.OpAllGather || kind == ir.OpReduceScatter {
			m = method(t, from, to)
		}
		p.Instrs = append(p.Instrs, Instr{Kind: Comm, Tensor: t, From: from, To: to, Collective: kind, Method: m, Axis: axis, Other: other})
		avail[t] = append(avail[t], along(axis, to, other))
	}
	establish := func(t ir.TensorID, want Placement) error {
		if hasPlacement(avail[t], want) {
			return nil
		}
		shape := g.Tensors[t].Shape
		if err := p.checkPlacement(want, shape); err != nil {
			return err
		}
		// One step along either axis: the cheapest source wins, the ranks
		// axis on a tie.
		best, bestRank := -1, 0
		var bestAxis Axis
		for i, a := range avail[t] {
			for _, axis := range []Axis{AxisRanks, AxisReplicas} {
				from, to, same := a.Inner, want.Inner, a.Outer == want.Outer
				if axis == AxisReplicas {
					from, to, same = a.Outer, want.Outer, a.Inner == want.Inner
				}
				k := Conversion(from, to)
				if !same || k == "" {
					continue
				}
				if r := conversionRank[k]; best < 0 || r < bestRank {
					best, bestRank, bestAxis = i, r, axis
				}
			}
		}
		if best >= 0 {
			a := avail[t][best]
			if bestAxis == AxisRanks {
				emit(t, AxisRanks, a.Inner, want.Inner, a.Outer)
			} else {
				emit(t, AxisReplicas, a.Outer, want.Outer, a.Inner)
			}
			return nil
		}
		// Two steps, through a placement both axes can hold.
		type path struct {
			a     Placement
			first Axis
			cost  int
		}
		var bestPath *path
		for _, a := range avail[t] {
			ko, ki := Conversion(a.Outer, want.Outer), Conversion(a.Inner, want.Inner)
			if ko == "" || ki == "" {
				continue
			}
			for _, first := range []Axis{AxisRanks, AxisReplicas} {
				mid := Placement{Outer: a.Outer, Inner: want.Inner}
				c := 2*conversionRank[ki] + conversionRank[ko]
				if first == AxisReplicas {
					mid = Placement{Outer: want.Outer, Inner: a.Inner}
					c = 2*conversionRank[ko] + conversionRank[ki]
				}
				if p.checkPlacement(mid, shape) != nil {
					continue
				}
				if bestPath == nil || c < bestPath.cost {
					bestPath = &path{a, first, c}
				}
			}
		}
		if bestPath == nil {
			return fmt.Errorf("no instructions turn %q from %s into %s", g.Tensors[t].Name, p.placementSet(avail[t]), want)
		}
		a := bestPath.a
		if bestPath.first == AxisRanks {
			emit(t, AxisRanks, a.Inner, want.Inner, a.Outer)
			emit(t, AxisReplicas, a.Outer, want.Outer, want.Inner)
		} else {
			emit(t, AxisReplicas, a.Outer, want.Outer, a.Inner)
			emit(t, AxisRanks, a.Inner, want.Inner, want.Outer)
		}
		return nil
	}

	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Phase != ir.Forward {
			continue
		}
		ro, okO := outerRule[op.ID]
		ri, okI := innerRule[op.ID]
		if !okO || !okI {
			return nil, fmt.Errorf("compose: op %q does not run in both programs", op.Name)
		}
		for j, t := range op.Inputs {
			if err := establish(t, Placement{Outer: ro.In[j], Inner: ri.In[j]}); err != nil {
				return nil, fmt.Errorf("compose: op %q (%s) under %s across replicas × %s among ranks: input %q: %w", op.Name, op.Kind, ro.Name, ri.Name, g.Tensors[t].Name, err)
			}
		}
		p.Instrs = append(p.Instrs, Instr{Kind: Compute, Op: op.ID, Rule: ri, Outer: ro})
		for j, t := range op.Outputs {
			pl := Placement{Outer: ro.Out[j], Inner: ri.Out[j]}
			if err := p.checkPlacement(pl, g.Tensors[t].Shape); err != nil {
				return nil, fmt.Errorf("compose: op %q (%s) under %s across replicas × %s among ranks: output %q: %w", op.Name, op.Kind, ro.Name, ri.Name, g.Tensors[t].Name, err)
			}
			avail[t] = []Placement{pl}
		}
	}
	if g.Loss != ir.NoTensor {
		if err := establish(g.Loss, p.LossPlacement()); err != nil {
			return nil, fmt.Errorf("compose: the loss: %w", err)
		}
	}
	return p, Check(g, p)
}

func cloneSegments(segs []Segment) []Segment {
	out := make([]Segment, len(segs))
	for i, s := range segs {
		out[i] = s
		out[i].Lengths = append([]int{}, s.Lengths...)
	}
	return out
}
