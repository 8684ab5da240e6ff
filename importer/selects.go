package importer

import (
	"slices"

	"hap/ir"
)

// Packed projections picked apart by select.
//
// torch 2.x's nn.MultiheadAttention no longer chunks its packed projection
// (torch 1.13's proj.chunk(3, -1), which reaches hap as a split over the
// last dim). It unflattens the last dim into (3, E), moves the 3 to the
// front with unsqueeze, transpose and squeeze, and picks q, k and v with
// proj[0], proj[1] and proj[2]. The values are the same three pieces, but
// traced as they are they are a permute of the whole projection followed by
// three slices, which neither splitPacked nor the planner recognises.
//
// selectsToSplit turns that chain back into the split it computes, so that
// both torch versions import to one graph. It proves the chain is a split
// by following labelled dims rather than by matching a fixed op sequence:
// the first reshape must cut the last dim of X [L..., n·E] into (n, E);
// every later reshape may only add or drop dims of size 1, every permute
// may reorder; at the end the dims larger than 1 must read (n, L..., E),
// each consumer must be a unit slice of n followed by a reshape to
// [L..., E], and together the slices must take every index of n once.
// Then piece i is exactly X[..., i·E:(i+1)·E].

// dim labels of the chain: X's leading dims are 0, 1, …; the cut dim's two
// halves and the inserted 1s get labels of their own.
const (
	labelOne = -1 // a dim of size 1 that the chain inserted
	labelN   = -2 // the pieces' index
	labelE   = -3 // the pieces' own last dim
)

// selectsToSplit returns g with every such chain replaced by one split of
// X over its last dim (g itself when there is none).
func selectsToSplit(g *ir.Graph) *ir.Graph {
	uses := consumers(g)
	ng := g.Clone()
	deadOps := map[ir.OpID]bool{}
	deadTensors := map[ir.TensorID]bool{}
	for i := range g.Ops {
		first := &g.Ops[i]
		if first.Kind != ir.OpReshape || deadOps[first.ID] {
			continue
		}
		chain, pieces, ok := matchSelects(g, uses, first)
		if !ok {
			continue
		}
		// The first reshape becomes the split; the rest of the chain, the
		// slices and the reshapes after them go.
		x := first.Inputs[0]
		xs := g.Tensors[x].Shape
		n := len(pieces)
		e := xs[len(xs)-1] / n
		sizes := make([]int, n)
		outs := make([]ir.TensorID, n)
		for k, p := range pieces {
			sizes[k] = e
			outs[k] = p.reshape.Outputs[0]
			deadOps[p.slice.ID], deadOps[p.reshape.ID] = true, true
			deadTensors[p.slice.Outputs[0]] = true
		}
		for _, op := range chain {
			deadOps[op.ID] = true
			deadTensors[op.Outputs[0]] = true
		}
		split := &ng.Ops[first.ID]
		split.Kind = ir.OpSplit
		split.Outputs = outs
		split.Attrs = ir.Attrs{Axis: len(xs) - 1, Sizes: sizes}
		delete(deadOps, first.ID)
	}
	if len(deadOps) == 0 {
		return g
	}
	return compact(ng, deadOps, deadTensors)
}

// piece is one consumer of the chain's end: a unit slice and its reshape.
type piece struct{ slice, reshape *ir.Op }

// matchSelects checks the chain starting at first (see the comment above)
// and returns its ops (first included) and the pieces in index order.
func matchSelects(g *ir.Graph, uses [][]ir.OpID, first *ir.Op) ([]*ir.Op, []piece, bool) {
	x := g.Tensors[first.Inputs[0]].Shape
	cut := g.Tensors[first.Outputs[0]].Shape
	r := len(x)
	if r < 1 || len(cut) != r+1 || !cut[:r-1].Equal(x[:r-1]) || cut[r-1] < 2 || cut[r-1]*cut[r] != x[r-1] {
		return nil, nil, false
	}
	labels := make([]int, 0, r+1)
	for d := 0; d < r-1; d++ {
		labels = append(labels, d)
	}
	labels = append(labels, labelN, labelE)
	chain := []*ir.Op{first}
	t := first.Outputs[0]
	for len(uses[t]) == 1 {
		op := &g.Ops[uses[t][0]]
		var next []int
		switch op.Kind {
		case ir.OpReshape:
			next = relabelOnes(labels, g.Tensors[t].Shape, g.Tensors[op.Outputs[0]].Shape)
		case ir.OpPermute:
			next = make([]int, len(labels))
			for k, p := range op.Attrs.Perm {
				next[k] = labels[p]
			}
		}
		if next == nil {
			break
		}
		labels, t = next, op.Outputs[0]
		chain = append(chain, op)
	}
	// Row-major order is the order of the dims larger than 1: the end must
	// hold them as (n, L..., E) does.
	var core, want []int
	end := g.Tensors[t].Shape
	axis := -1
	for k, l := range labels {
		if l == labelN {
			axis = k
		}
		if end[k] > 1 {
			core = append(core, l)
		}
	}
	want = append(want, labelN)
	for d := 0; d < r-1; d++ {
		if x[d] > 1 {
			want = append(want, d)
		}
	}
	if cut[r] > 1 {
		want = append(want, labelE)
	}
	if !slices.Equal(core, want) || len(chain) < 2 {
		return nil, nil, false
	}
	n := cut[r-1]
	pieces := make([]piece, n)
	for _, c := range uses[t] {
		s := &g.Ops[c]
		if s.Kind != ir.OpSlice || s.Attrs.Axis != axis || s.Attrs.End != s.Attrs.Start+1 || len(uses[s.Outputs[0]]) != 1 {
			return nil, nil, false
		}
		rs := &g.Ops[uses[s.Outputs[0]][0]]
		if rs.Kind != ir.OpReshape || pieces[s.Attrs.Start].slice != nil {
			return nil, nil, false
		}
		ps := g.Tensors[rs.Outputs[0]].Shape
		if len(ps) != r || !ps[:r-1].Equal(x[:r-1]) || ps[r-1] != cut[r] {
			return nil, nil, false
		}
		pieces[s.Attrs.Start] = piece{s, rs}
	}
	for _, p := range pieces {
		if p.slice == nil {
			return nil, nil, false
		}
	}
	return chain, pieces, true
}

// relabelOnes carries labels through a reshape from shape a to shape b that
// only inserts or drops dims of size 1, or returns nil for any other.
func relabelOnes(labels []int, a, b ir.Shape) []int {
	var out []int
	i := 0
	for _, sz := range b {
		for i < len(a) && a[i] == 1 && sz != 1 {
			i++ // a 1 of a's dropped
		}
		switch {
		case i < len(a) && a[i] == sz:
			out = append(out, labels[i])
			i++
		case sz == 1:
			out = append(out, labelOne)
		default:
			return nil
		}
	}
	for ; i < len(a); i++ {
		if a[i] != 1 {
			return nil
		}
	}
	return out
}
