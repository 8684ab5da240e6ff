package importer

import (
	"hap/ir"
)

// RMSNorm written out.
//
// LLaMA's and Hugging Face's RMSNorm is x · rsqrt(mean(x², -1, keepdim) +
// ε) · w in plain torch, which translates to pow_scalar, mean, a fill_like
// and add for ε, rsqrt and two muls. Left so, a plan sees six ops of five
// classes where hap has one rms_norm with its own rules (split anywhere
// but the normalised dim) and kernels, and the activations between them
// would all be kept for backward. fuseRMSNorm replaces each such chain
// whose intermediates nothing else reads by one rms_norm op.

// rmsChain is one such chain, named by its ops.
type rmsChain struct {
	x, w ir.TensorID
	eps  float64
	out  ir.OpID   // the mul by w, which becomes the rms_norm
	dead []ir.OpID // pow, mean, fill, add, rsqrt and the mul by the rsqrt
}

// fuseRMSNorm replaces every RMSNorm chain of g by one rms_norm op.
func fuseRMSNorm(g *ir.Graph) *ir.Graph {
	uses := consumers(g)
	var found []rmsChain
	for i := range g.Ops {
		if ch, ok := matchRMSNorm(g, uses, &g.Ops[i]); ok {
			found = append(found, ch)
		}
	}
	if len(found) == 0 {
		return g
	}
	ng := g.Clone()
	deadOps, deadTensors := map[ir.OpID]bool{}, map[ir.TensorID]bool{}
	for _, ch := range found {
		op := &ng.Ops[ch.out]
		op.Kind, op.Inputs, op.Attrs = ir.OpRMSNorm, []ir.TensorID{ch.x, ch.w}, ir.Attrs{Eps: ch.eps}
		for _, d := range ch.dead {
			deadOps[d] = true
			for _, t := range ng.Ops[d].Outputs {
				deadTensors[t] = true
			}
		}
	}
	return compact(ng, deadOps, deadTensors)
}

// matchRMSNorm recognises out = w · (x · rsqrt(mean(x², last, keep) + ε)),
// either order in both products, with w a rank-1 parameter over x's last
// dim and every intermediate read by the next op alone.
func matchRMSNorm(g *ir.Graph, uses [][]ir.OpID, out *ir.Op) (rmsChain, bool) {
	var ch rmsChain
	if out.Kind != ir.OpMul {
		return ch, false
	}
	for j := range 2 {
		w, normed := out.Inputs[j], out.Inputs[1-j]
		if wt := &g.Tensors[w]; wt.Kind != ir.Param || len(wt.Shape) != 1 {
			continue
		}
		scale, ok := producer(g, uses, normed, ir.OpMul)
		if !ok {
			continue
		}
		for k := range 2 {
			x, r := scale.Inputs[k], scale.Inputs[1-k]
			xs := g.Tensors[x].Shape
			if len(xs) == 0 || xs[len(xs)-1] != g.Tensors[w].Shape[0] || !g.Tensors[normed].Shape.Equal(xs) {
				continue
			}
			if dead, eps, ok := rsqrtMeanSquare(g, uses, r, x); ok {
				return rmsChain{x: x, w: w, eps: eps, out: out.ID, dead: append(dead, scale.ID)}, true
			}
		}
	}
	return ch, false
}

// rsqrtMeanSquare recognises r = rsqrt(mean(x², last dim, keep) + ε) and
// returns its ops.
func rsqrtMeanSquare(g *ir.Graph, uses [][]ir.OpID, r, x ir.TensorID) ([]ir.OpID, float64, bool) {
	rs, ok := producer(g, uses, r, ir.OpRsqrt)
	if !ok {
		return nil, 0, false
	}
	add, ok := producer(g, uses, rs.Inputs[0], ir.OpAdd)
	if !ok {
		return nil, 0, false
	}
	m, fill, ok := addedNumber(g, uses, add)
	if !ok || !(fill.Attrs.Scale > 0) {
		return nil, 0, false
	}
	mean := &g.Ops[g.Tensors[m].Producer]
	last := len(g.Tensors[x].Shape) - 1
	if g.Tensors[m].Producer == ir.NoOp || mean.Kind != ir.OpMean || !mean.Attrs.KeepDims || len(mean.Attrs.Axes) != 1 || mean.Attrs.Axes[0] != last {
		return nil, 0, false
	}
	sq, ok := producer(g, uses, mean.Inputs[0], ir.OpPowScalar)
	if !ok || sq.Attrs.Value != 2 || sq.Inputs[0] != x {
		return nil, 0, false
	}
	return []ir.OpID{sq.ID, mean.ID, fill.ID, add.ID, rs.ID}, fill.Attrs.Scale, true
}

// addedNumber recognises add = m + fill_like(m) (a number added, as the
// importer writes it), the fill read by the add alone and m by the two.
func addedNumber(g *ir.Graph, uses [][]ir.OpID, add *ir.Op) (ir.TensorID, *ir.Op, bool) {
	for j := range 2 {
		m, f := add.Inputs[j], add.Inputs[1-j]
		fp := g.Tensors[f].Producer
		if fp == ir.NoOp || g.Ops[fp].Kind != ir.OpFillLike || g.Ops[fp].Inputs[0] != m || len(uses[f]) != 1 || len(uses[m]) != 2 {
			continue
		}
		return m, &g.Ops[fp], true
	}
	return ir.NoTensor, nil, false
}
