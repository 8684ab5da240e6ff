package importer

import (
	"fmt"

	"hap/ir"
)

// Rotary position embeddings as LLaMA's Hugging Face code writes them:
//
//	def rotate_half(x): return cat((-x[..., d/2:], x[..., :d/2]), dim=-1)
//	q = q * cos + rotate_half(q) * sin
//
// with cos and sin [S, d] tables (buffers, or constants the exporter folds)
// broadcast over q's [B, H, S, d]. The trace has two slices, a neg, a cat,
// two broadcasting muls and an add; hap's mul takes equal shapes only, so
// the pieces stay lazy values as they come (a half of x's last dim,
// rotate_half(x), a product with a table) and the add that completes the
// pattern becomes one rotary op (ir.OpRotary: the same half-rotation
// layout). A piece used otherwise is materialised as what it is — a
// slice, slices and a concat — and a broadcasting product that is no part
// of the pattern is refused as before.

// halfOf is v when it is x[..., a:b] for the first or second half of x's
// last dim (a lazy lzHalf value), with x and which half.
func halfOf(v *val) (x *val, second, ok bool) {
	if v.kind != lzHalf {
		return nil, false, false
	}
	return v.src, v.scale == 1, true
}

// lazyHalf keeps a slice of x's last dim lazy when it is one half of it
// (rotate_half's pieces); ok is false for any other slice.
func lazyHalf(x *val, dim, start, end int) (*val, bool) {
	s := x.spec.Shape
	r := len(s)
	if r < 2 || dim != r-1 || s[r-1]%2 != 0 || s[r-1] == 0 {
		return nil, false
	}
	h := s[r-1] / 2
	var second float64
	switch {
	case start == 0 && end == h:
	case start == h && end == 2*h:
		second = 1
	default:
		return nil, false
	}
	out := ir.Shape(s).Clone()
	out[r-1] = h
	return &val{spec: Spec{DType: x.spec.DType, Shape: out}, id: ir.NoTensor, kind: lzHalf, src: x, scale: second}, true
}

// rotateHalf recognises cat((−x2, x1), last dim) of x's halves.
func rotateHalf(parts []*val, dim int) (*val, bool) {
	if len(parts) != 2 {
		return nil, false
	}
	neg, s := unscale(parts[0])
	if s != -1 {
		return nil, false
	}
	x2, second, ok := halfOf(neg)
	if !ok || !second {
		return nil, false
	}
	x1, second, ok := halfOf(parts[1])
	if !ok || second || x1 != x2 || dim != len(x1.spec.Shape)-1 {
		return nil, false
	}
	return &val{spec: x1.spec, id: ir.NoTensor, kind: lzRotHalf, src: x1}, true
}

// tableProduct recognises x · t where t [S, d] (or with leading size-1
// dims) broadcasts over x [..., S, d]: one term of a rotary embedding.
func tableProduct(a, b *val) (*val, bool) {
	for range 2 {
		xs, ts := a.spec.Shape, b.spec.Shape
		if len(xs) >= 3 && len(ts) >= 2 && len(ts) <= len(xs) && ir.Shape(ts[len(ts)-2:]).Equal(xs[len(xs)-2:]) {
			lead := true
			for _, d := range ts[:len(ts)-2] {
				lead = lead && d == 1
			}
			if lead && a.kind != lzBroadcast && b.kind != lzBroadcast {
				return &val{spec: a.spec, id: ir.NoTensor, kind: lzTableMul, q: a, k: b}, true
			}
		}
		a, b = b, a
	}
	return nil, false
}

// rotaryOf recognises x·cos + rotate_half(x)·sin (either order) and emits
// the rotary op; ok is false when a and b are not those two terms.
func (c *conv) rotaryOf(a, b *val) (*val, bool, error) {
	if a.kind != lzTableMul || b.kind != lzTableMul || a.id != ir.NoTensor || b.id != ir.NoTensor {
		return nil, false, nil
	}
	if a.q.kind == lzRotHalf {
		a, b = b, a
	}
	if b.q.kind != lzRotHalf || b.q.src != a.q || b.q.id != ir.NoTensor {
		return nil, false, nil
	}
	x, err := c.mat(a.q)
	if err != nil {
		return nil, true, err
	}
	table := func(t *val) (ir.TensorID, error) {
		id, err := c.mat(t)
		if err != nil {
			return ir.NoTensor, err
		}
		s := t.spec.Shape
		if len(s) > 2 {
			id = c.b.Reshape(id, s[len(s)-2:]...)
		}
		return id, nil
	}
	cos, err := table(a.k)
	if err != nil {
		return nil, true, err
	}
	sin, err := table(b.k)
	if err != nil {
		return nil, true, err
	}
	return plain(c.b.Rotary(x, cos, sin)), true, nil
}

// matRotary materialises the lazy rotary pieces used outside the pattern.
func (c *conv) matRotary(v *val) (ir.TensorID, error) {
	switch v.kind {
	case lzHalf:
		x, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		r := len(v.src.spec.Shape)
		h := v.src.spec.Shape[r-1] / 2
		start := int(v.scale) * h
		return c.b.Slice(x, r-1, start, start+h), nil
	case lzRotHalf:
		x, err := c.mat(v.src)
		if err != nil {
			return ir.NoTensor, err
		}
		r := len(v.spec.Shape)
		h := v.spec.Shape[r-1] / 2
		x1, x2 := c.b.Slice(x, r-1, 0, h), c.b.Slice(x, r-1, h, 2*h)
		return c.b.Concat(r-1, c.scaleTensor(x2, -1), x1), nil
	case lzTableMul:
		return ir.NoTensor, fmt.Errorf("multiplies %v by %v; hap's mul needs equal shapes (a product broadcasting a [S, d] table is imported as part of a rotary embedding, x·cos + rotate_half(x)·sin)", v.q.spec.Shape, v.k.spec.Shape)
	}
	return ir.NoTensor, fmt.Errorf("internal: value kind %d", v.kind)
}

func neg(c *conv, n *Node) ([]*val, error) {
	v, err := c.in(n, 0, "")
	if err != nil {
		return nil, err
	}
	return one(c.scaled(v, -1)), nil
}
