package importer

import (
	"fmt"
	"slices"

	"hap/ir"
)

// Attention written with four-dimensional matmuls.
//
// `softmax(q @ k.transpose(-2, -1) * s) @ v` on [B, H, S, d] tensors — how
// Hugging Face's and nanoGPT's models write attention — traces through
// expand and view into batched matmuls over heads folded into the batch:
// reshape to [B·H, S, d], bmm, reshape back to [B, H, S, T], scale,
// softmax, reshape, bmm, reshape. Left so, plans see two matmuls, a scale
// and a softmax where hap has one attention op with its own rules and
// kernel. fuseAttention finds that chain after translation and replaces
// it with one attention op on the four-dimensional q, k and v.

// attentionChain is one such chain, named by its ops.
type attentionChain struct {
	qr, kr, vr ir.OpID // the reshapes folding q, kᵀ and v into [N, ·, ·]
	kt         ir.OpID // the permute making kᵀ from k
	scores     ir.OpID // matmul q·kᵀ
	unfold     ir.OpID // reshape of the scores to [L…, S, T]
	scale      float64
	scaleOps   []ir.OpID // fill_like and mul, if scaled
	softmax    ir.OpID
	fold       ir.OpID // reshape of the probabilities to [N, S, T]
	out        ir.OpID // matmul probs·v
	back       ir.OpID // reshape of the output to [L…, S, dv]
	// mask is the additive [S, T] mask a bias adds to the scaled scores
	// (NoTensor: none), maskOp that bias.
	mask   ir.TensorID
	maskOp ir.OpID
	// group > 1: k and v are kvK and kvV [B, Hkv, T, ·] with each head
	// repeated group times by repOps (gqa.go), which die.
	group    int
	kvK, kvV ir.TensorID
	repOps   []ir.OpID
}

// fuseAttention replaces every attention chain of g by one attention op.
func fuseAttention(g *ir.Graph) *ir.Graph {
	uses := consumers(g)
	var found []attentionChain
	for i := range g.Ops {
		if ch, ok := matchAttention(g, uses, ir.OpID(i)); ok {
			found = append(found, ch)
		}
	}
	if len(found) == 0 {
		return g
	}
	ng := g.Clone()
	deadOps, deadTensors := map[ir.OpID]bool{}, map[ir.TensorID]bool{}
	for _, ch := range found {
		q4 := ng.Ops[ch.qr].Inputs[0]
		k4 := ng.Ops[ch.kt].Outputs[0]
		v4 := ng.Ops[ch.vr].Inputs[0]
		// kᵀ's permute now makes k: its last two entries swap back.
		kt := &ng.Ops[ch.kt]
		n := len(kt.Attrs.Perm)
		kt.Attrs.Perm[n-2], kt.Attrs.Perm[n-1] = kt.Attrs.Perm[n-1], kt.Attrs.Perm[n-2]
		ks := ng.Tensors[k4].Shape
		ks[n-2], ks[n-1] = ks[n-1], ks[n-2]
		// The second matmul becomes the attention op writing what the
		// final reshape wrote; everything between dies.
		att := &ng.Ops[ch.out]
		deadTensors[att.Outputs[0]] = true
		attrs := ir.Attrs{Scale: ch.scale}
		if ch.group > 1 {
			// Attention reads the key/value heads themselves: k's
			// permute reads the unrepeated k, v is the unrepeated v.
			attrs.KVGroup = ch.group
			kt.Inputs[0] = ch.kvK
			ng.Tensors[k4].Shape = permuted(ng.Tensors[ch.kvK].Shape, kt.Attrs.Perm)
			v4 = ch.kvV
			for _, op := range ch.repOps {
				deadOps[op] = true
				for _, t := range ng.Ops[op].Outputs {
					deadTensors[t] = true
				}
			}
		}
		if isIdentityPerm(kt.Attrs.Perm) {
			// kᵀ's permute was the transpose alone (k came whole
			// from an op, a rotary say): attention reads k itself.
			k4 = kt.Inputs[0]
			deadOps[kt.ID] = true
			deadTensors[kt.Outputs[0]] = true
		}
		ins := []ir.TensorID{q4, k4, v4}
		if ch.mask != ir.NoTensor {
			ins = append(ins, ch.mask)
			deadOps[ch.maskOp] = true
			deadTensors[ng.Ops[ch.maskOp].Outputs[0]] = true
		}
		att.Kind, att.Inputs, att.Attrs = ir.OpAttention, ins, attrs
		att.Name = attentionName(ng, att.Name)
		att.Outputs = []ir.TensorID{ng.Ops[ch.back].Outputs[0]}
		ng.Tensors[att.Outputs[0]].Producer = att.ID
		for _, op := range append([]ir.OpID{ch.qr, ch.kr, ch.vr, ch.scores, ch.unfold, ch.softmax, ch.fold, ch.back}, ch.scaleOps...) {
			deadOps[op] = true
			if op != ch.back {
				for _, t := range ng.Ops[op].Outputs {
					deadTensors[t] = true
				}
			}
		}
	}
	return compact(ng, deadOps, deadTensors)
}

// matchAttention recognises the chain ending in matmul m2 (probs·v).
func matchAttention(g *ir.Graph, uses [][]ir.OpID, m2 ir.OpID) (attentionChain, bool) {
	ch := attentionChain{out: m2, scale: 1, mask: ir.NoTensor, maskOp: ir.NoOp, kvK: ir.NoTensor, kvV: ir.NoTensor}
	op := &g.Ops[m2]
	if op.Kind != ir.OpMatMul || op.Attrs.TransA || op.Attrs.TransB || len(g.Tensors[op.Outputs[0]].Shape) != 3 {
		return ch, false
	}
	var ok bool
	var lead []int
	// probs·v: both folded from [L…, ·, ·].
	if ch.fold, lead, ok = folded(g, uses, op.Inputs[0], nil); !ok {
		return ch, false
	}
	if ch.vr, _, ok = folded(g, uses, op.Inputs[1], lead); !ok {
		return ch, false
	}
	back, single := only(g, uses, op.Outputs[0])
	if !single || back.Kind != ir.OpReshape || !slices.Equal(back.Attrs.Shape[:len(back.Attrs.Shape)-2], lead) || len(back.Attrs.Shape) != len(lead)+2 {
		return ch, false
	}
	ch.back = back.ID
	// softmax over scaled scores.
	sm, ok := producer(g, uses, g.Ops[ch.fold].Inputs[0], ir.OpSoftmax)
	if !ok {
		return ch, false
	}
	ch.softmax = sm.ID
	scores := sm.Inputs[0]
	// An additive mask: bias(scaled scores, m[S, T]) over the last two dims.
	if bias, ok := producer(g, uses, scores, ir.OpBias); ok {
		r := len(g.Tensors[scores].Shape)
		m := bias.Inputs[1]
		if !slices.Equal(bias.Attrs.Axes, []int{r - 2, r - 1}) || !g.Tensors[m].Shape.Equal(g.Tensors[scores].Shape[r-2:]) {
			return ch, false
		}
		ch.mask, ch.maskOp, scores = m, bias.ID, bias.Inputs[0]
	}
	if mul, ok := producer(g, uses, scores, ir.OpMul); ok {
		s, fill, ok := scaledBy(g, uses, mul)
		if !ok {
			return ch, false
		}
		ch.scale, ch.scaleOps, scores = fill.Attrs.Scale, []ir.OpID{fill.ID, mul.ID}, s
	}
	// A scaled score is read by the scale's fill_like too (scaledBy checks).
	if ch.scaleOps == nil && len(uses[scores]) != 1 {
		return ch, false
	}
	unfold := g.Tensors[scores].Producer
	if unfold == ir.NoOp || g.Ops[unfold].Kind != ir.OpReshape {
		return ch, false
	}
	ch.unfold = unfold
	if !slices.Equal(g.Tensors[scores].Shape[:len(lead)], lead) {
		return ch, false
	}
	m1, ok := producer(g, uses, g.Ops[unfold].Inputs[0], ir.OpMatMul)
	if !ok || m1.Attrs.TransA || m1.Attrs.TransB {
		return ch, false
	}
	ch.scores = m1.ID
	if ch.qr, _, ok = folded(g, uses, m1.Inputs[0], lead); !ok {
		return ch, false
	}
	if ch.kr, _, ok = folded(g, uses, m1.Inputs[1], lead); !ok {
		return ch, false
	}
	kt, ok := producer(g, uses, g.Ops[ch.kr].Inputs[0], ir.OpPermute)
	if !ok {
		return ch, false
	}
	ch.kt = kt.ID
	// Grouped-query: k and v both repeated per query head, by one group.
	if k, gk, kops, ok := repeated(g, uses, kt.Inputs[0]); ok {
		if v, gv, vops, ok := repeated(g, uses, g.Ops[ch.vr].Inputs[0]); ok && gk == gv && len(g.Tensors[k].Shape) == 4 {
			ch.group, ch.kvK, ch.kvV, ch.repOps = gk, k, v, append(kops, vops...)
		}
	}
	return ch, g.Ops[ch.scores].Outputs[0] != g.Loss
}

func isIdentityPerm(p []int) bool {
	for i, d := range p {
		if d != i {
			return false
		}
	}
	return true
}

// permuted is s with its dims reordered by perm (out dim i = s[perm[i]]).
func permuted(s ir.Shape, perm []int) ir.Shape {
	out := make(ir.Shape, len(perm))
	for i, p := range perm {
		out[i] = s[p]
	}
	return out
}

// folded recognises t = reshape of x [L…, a, b] to [∏L, a, b], used once;
// with lead given, L must equal it. It returns the reshape and L.
func folded(g *ir.Graph, uses [][]ir.OpID, t ir.TensorID, lead []int) (ir.OpID, []int, bool) {
	r, ok := producer(g, uses, t, ir.OpReshape)
	if !ok {
		return ir.NoOp, nil, false
	}
	in, out := g.Tensors[r.Inputs[0]].Shape, g.Tensors[t].Shape
	if len(in) < 3 || len(out) != 3 || !in[len(in)-2:].Equal(out[1:]) || ir.Shape(in[:len(in)-2]).Numel() != out[0] {
		return ir.NoOp, nil, false
	}
	l := []int(in[:len(in)-2])
	if lead != nil && !slices.Equal(l, lead) {
		return ir.NoOp, nil, false
	}
	return r.ID, slices.Clone(l), true
}

// producer is t's producer if it is of kind k and t has no other reader.
func producer(g *ir.Graph, uses [][]ir.OpID, t ir.TensorID, k ir.OpKind) (*ir.Op, bool) {
	p := g.Tensors[t].Producer
	if p == ir.NoOp || len(uses[t]) != 1 || g.Ops[p].Kind != k {
		return nil, false
	}
	return &g.Ops[p], true
}

// scaledBy recognises mul = s · fill_like(s) (either order), the fill
// read by the mul alone and s by the two of them; it returns s and the fill.
func scaledBy(g *ir.Graph, uses [][]ir.OpID, mul *ir.Op) (ir.TensorID, *ir.Op, bool) {
	for j := range 2 {
		s, f := mul.Inputs[j], mul.Inputs[1-j]
		fp := g.Tensors[f].Producer
		if fp == ir.NoOp || g.Ops[fp].Kind != ir.OpFillLike || g.Ops[fp].Inputs[0] != s || len(uses[f]) != 1 || len(uses[s]) != 2 {
			continue
		}
		if fill := &g.Ops[fp]; fill.Attrs.Scale > 0 {
			return s, fill, true
		}
	}
	return ir.NoTensor, nil, false
}

// attentionName renames a fused matmul "m.matmul_1" to "m.attention", or
// the first free "m.attention_N".
func attentionName(g *ir.Graph, old string) string {
	module, _ := cutLast(old)
	base := "attention"
	if module != "" {
		base = module + ".attention"
	}
	taken := map[string]bool{}
	for i := range g.Ops {
		taken[g.Ops[i].Name] = true
	}
	name := base
	for k := 1; taken[name]; k++ {
		name = fmt.Sprintf("%s_%d", base, k)
	}
	return name
}
