package importer

import (
	"fmt"
	"slices"

	"hap/ir"
)

// Grouped-query attention as LLaMA's Hugging Face code writes it
// (repeat_kv): k[:, :, None].expand(B, Hkv, g, S, d).reshape(B, Hkv·g, S, d)
// — each key/value head repeated for its g query heads — then plain
// attention. The expand alone is a broadcast (lzBroadcast); the reshape
// merging the repeated dim into the heads before it materialises it as
// what it computes, a concat of g copies (repeatHeads). fuseAttention
// then finds those copies feeding k and v of an attention op and drops
// them for the op's kv_group (fuseGrouped), so the plan holds one
// attention op over the key/value heads and no copies.

// repeatHeads is v (an expand that repeats a size-1 dim j g times)
// reshaped to shape, which merges dim j into dim j−1: the repeat of dim
// j−1's entries, g times each, as a concat of g copies along j and a
// reshape. ok is false for any other reshape.
func (c *conv) repeatHeads(v *val, shape []int) (*val, bool, error) {
	if v.kind != lzBroadcast {
		return nil, false, nil
	}
	src, out := v.src.spec.Shape, v.spec.Shape
	if len(src) != len(out) || len(shape) != len(out)-1 {
		return nil, false, nil
	}
	j := -1
	for i := range src {
		if src[i] != out[i] {
			if j >= 0 || src[i] != 1 || i == 0 {
				return nil, false, nil
			}
			j = i
		}
	}
	if j < 0 {
		return nil, false, nil
	}
	merged := slices.Concat(out[:j-1], []int{out[j-1] * out[j]}, out[j+1:])
	if !slices.Equal(merged, shape) {
		return nil, false, nil
	}
	x, err := c.mat(v.src)
	if err != nil {
		return nil, true, err
	}
	return plain(c.repeatEach(x, j, out[j], shape)), true, nil
}

// repeatEach is x (with a size-1 dim j) repeated g times along j, as a
// concat of g copies, reshaped to shape (dim j merged into j−1): each
// entry of dim j−1 repeated g times in place, what repeat_interleave
// computes. Feeding attention's k and v, the attention pass reads it as
// grouped-query heads (repeated).
func (c *conv) repeatEach(x ir.TensorID, j, g int, shape []int) ir.TensorID {
	rep := x
	if g > 1 {
		copies := make([]ir.TensorID, g)
		for i := range copies {
			copies[i] = x
		}
		rep = c.b.Concat(j, copies...)
	}
	return c.b.Reshape(rep, shape...)
}

// repeatInterleave imports repeat_interleave(x, g, dim) with a number of
// repeats (torch 2.x traces it; 1.13 cannot on fake tensors): x with a
// size-1 dim inserted after dim, repeated g times there, merged back.
// Without a dim, torch repeats the flattened x.
func repeatInterleave(c *conv, n *Node) ([]*val, error) {
	x, v, err := c.inMat(n, 0, "")
	if err != nil {
		return nil, err
	}
	g, err := intArg(n, 1, "repeats", 0)
	if err != nil || g < 1 {
		return nil, fmt.Errorf("repeats %s; hap imports a positive number of repeats (not a tensor of them)", show(arg(n, 1, "repeats")))
	}
	shape := slices.Clone(v.spec.Shape)
	d := 0
	if a := arg(n, 2, "dim"); a == nil {
		x, shape = c.b.Reshape(x, ir.Shape(shape).Numel()), []int{ir.Shape(shape).Numel()}
	} else if d, err = intArg(n, 2, "dim", 0); err != nil {
		return nil, err
	} else if d, err = normDim(d, len(shape)); err != nil {
		return nil, err
	}
	unsq := slices.Insert(slices.Clone(shape), d+1, 1)
	out := slices.Clone(shape)
	out[d] *= g
	return one(plain(c.repeatEach(c.b.Reshape(x, unsq...), d+1, g, out))), nil
}

// repeated recognises t = reshape(concat(u, u, …, u; axis 2)) with u =
// reshape(k) inserting a size-1 dim 2 into k [B, Hkv, S, d]: k with each
// head repeated g times (repeatHeads' output). It returns k, g and the
// ops computing the copies that die once attention reads k directly
// (those whose results nothing else reads).
func repeated(g *ir.Graph, uses [][]ir.OpID, t ir.TensorID) (k ir.TensorID, group int, ops []ir.OpID, ok bool) {
	back, ok := producer(g, uses, t, ir.OpReshape)
	if !ok {
		return ir.NoTensor, 0, nil, false
	}
	cat, ok := producer(g, uses, back.Inputs[0], ir.OpConcat)
	if !ok || cat.Attrs.Axis != 2 || len(cat.Inputs) < 2 {
		return ir.NoTensor, 0, nil, false
	}
	u := cat.Inputs[0]
	for _, in := range cat.Inputs {
		if in != u {
			return ir.NoTensor, 0, nil, false
		}
	}
	us := g.Tensors[u].Shape
	p := g.Tensors[u].Producer
	if len(us) != 5 || us[2] != 1 || p == ir.NoOp || g.Ops[p].Kind != ir.OpReshape {
		return ir.NoTensor, 0, nil, false
	}
	k = g.Ops[p].Inputs[0]
	ks := g.Tensors[k].Shape
	if !ks.Equal(ir.Shape{us[0], us[1], us[3], us[4]}) {
		return ir.NoTensor, 0, nil, false
	}
	ops = []ir.OpID{back.ID, cat.ID}
	if len(uses[u]) == 1 {
		ops = append(ops, p)
	}
	return k, len(cat.Inputs), ops, true
}
