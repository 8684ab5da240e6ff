package ir

import "fmt"

// Attention as LLaMA-style decoders use it, and rotary position embeddings.
//
// Attention takes an optional fourth input, an additive mask m[S,T] added
// to the scaled scores of every batch slice (broadcast over the batch and
// head dims): P = softmax(scale·q·kᵀ + m [causally masked]). It is a
// constant: it gets no gradient, and a mask that depends on a parameter is
// refused when the step is built rather than silently left undifferentiated.
//
// Grouped-query attention (Attrs.KVGroup = g > 1) keeps k and v at fewer
// heads: q is [..., H, S, D], k [..., H/g, T, D], v [..., H/g, T, Dv], and
// query head h reads key/value head h/g — PyTorch's repeat_interleave (or
// LLaMA's expand + reshape) of k and v, without materialising the copies.
// The attribute is the group size rather than the key/value head count
// because the group size is the same in every device's shard when heads are
// split (a split on key/value heads gives each device whole groups), so a
// local program needs no per-device attribute. Because the g query heads of
// one key/value head are adjacent, they read as one [g·S, D] block against
// that head's k and v: the kernels run GQA as attention over the key/value
// heads with g·S query rows, the row's position being its index mod S.
//
// Rotary (x[..., S, d], cos[S, w], sin[S, w]) → y[..., S, d], d even, w = d
// or d/2, is the half-rotation layout of LLaMA in Hugging Face transformers
// (rotate_half): with x1 = x[..., :d/2], x2 = x[..., d/2:],
//
//	y = x ⊙ cos + rotate_half(x) ⊙ sin,   rotate_half(x) = cat(−x2, x1)
//
// over the last dim, the tables broadcast over every dim before S. A table
// of width d/2 serves both halves (HF's cos is cat(freqs, freqs).cos(), so
// its halves are equal; the importer keeps the full table it finds). The
// tables are constants and get no gradient. Meta's interleaved-pairs
// layout (complex multiplication of adjacent pairs) is not this op; it
// differs from this one by a fixed permutation of the head dim.
//
// rotary_grad (dy, cos, sin) → dx is rotary's adjoint:
//
//	dx = dy ⊙ cos + rotate_halfᵀ(dy ⊙ sin),   rotate_halfᵀ(g) = cat(g2, −g1)

const (
	OpRotary     OpKind = "rotary"      // (x[...,S,d], cos[S,d or d/2], sin) → y; half rotation (rotate_half)
	OpRotaryGrad OpKind = "rotary_grad" // (dy, cos, sin) → dx
)

// llamaKinds are this file's operator kinds, for Kinds.
func llamaKinds() []OpKind { return []OpKind{OpRotary, OpRotaryGrad} }

// lookupLlama is the operator table's entries for this file's kinds.
func lookupLlama(k OpKind) (opDef, bool) {
	switch k {
	case OpRotary:
		return opDef{3, inferRotary, gradRotary, workRotary}, true
	case OpRotaryGrad:
		return opDef{3, inferRotary, nil, workRotary}, true
	}
	return opDef{}, false
}

// AttentionGeom is what shape inference derives of an attention op: the
// batch slices of q (every dim before the last two), the query and key
// lengths, the head dims, and the grouping of query heads onto key/value
// heads. Kernels and the cost model read it rather than re-deriving it.
type AttentionGeom struct {
	// Batch counts q's slices, KVBatch k's and v's (Batch/Group).
	Batch, KVBatch int
	S, T, D, Dv    int
	// Group is the number of query heads per key/value head (1 without
	// GQA).
	Group int
	// Mask reports whether the op has an additive mask input.
	Mask bool
}

// AttentionGeometry checks attention's (q, k, v[, mask]) shapes under a and
// returns their geometry; every error names the tensors at fault.
func AttentionGeometry(a *Attrs, in []*Tensor) (AttentionGeom, error) {
	if len(in) < 3 || len(in) > 4 {
		return AttentionGeom{}, fmt.Errorf("attention takes q, k, v and an optional mask, got %d inputs", len(in))
	}
	q, k, v := in[0], in[1], in[2]
	if err := sameDType(q, k, v); err != nil {
		return AttentionGeom{}, err
	}
	r := len(q.Shape)
	if r < 2 || len(k.Shape) != r || len(v.Shape) != r {
		return AttentionGeom{}, errShapes("attention q, k, v need equal rank ≥ 2", q, k)
	}
	g := AttentionGeom{S: q.Shape[r-2], T: k.Shape[r-2], D: q.Shape[r-1], Dv: v.Shape[r-1], Group: 1}
	if a.KVGroup < 0 {
		return AttentionGeom{}, fmt.Errorf("attention kv_group %d must be positive (query heads per key/value head)", a.KVGroup)
	}
	if a.KVGroup > 1 {
		g.Group = a.KVGroup
		if r < 3 {
			return AttentionGeom{}, errShapes("grouped-query attention (kv_group > 1) needs a head dim before [S, D]", q, k)
		}
		if !q.Shape[:r-3].Equal(k.Shape[:r-3]) || !q.Shape[:r-3].Equal(v.Shape[:r-3]) {
			return AttentionGeom{}, errShapes("attention batch dims differ", q, k)
		}
		if k.Shape[r-3] != v.Shape[r-3] {
			return AttentionGeom{}, errShapes("attention k and v head counts differ", k, v)
		}
		if q.Shape[r-3] != g.Group*k.Shape[r-3] {
			return AttentionGeom{}, fmt.Errorf("shape mismatch: grouped-query attention with kv_group %d: q %q has %d heads (%v), want %d × the %d key/value heads of %q (%v)",
				g.Group, q.Name, q.Shape[r-3], q.Shape, g.Group, k.Shape[r-3], k.Name, k.Shape)
		}
	} else if !q.Shape[:r-2].Equal(k.Shape[:r-2]) || !q.Shape[:r-2].Equal(v.Shape[:r-2]) {
		return AttentionGeom{}, errShapes("attention batch dims differ", q, k)
	}
	g.Batch = Shape(q.Shape[:r-2]).Numel()
	g.KVBatch = Shape(k.Shape[:r-2]).Numel()
	if q.Shape[r-1] != k.Shape[r-1] {
		return AttentionGeom{}, errShapes("attention q and k head dims differ", q, k)
	}
	if k.Shape[r-2] != v.Shape[r-2] {
		return AttentionGeom{}, errShapes("attention k and v lengths differ", k, v)
	}
	if a.Causal && q.Shape[r-2] != k.Shape[r-2] {
		return AttentionGeom{}, errShapes("causal attention needs equal query and key lengths", q, k)
	}
	if !(a.Scale > 0) {
		return AttentionGeom{}, fmt.Errorf("attention scale %v must be positive", a.Scale)
	}
	if len(in) == 4 {
		m := in[3]
		if m.DType != q.DType {
			return AttentionGeom{}, fmt.Errorf("dtype mismatch: attention mask %q is %s, q %q is %s", m.Name, m.DType, q.Name, q.DType)
		}
		if !m.Shape.Equal(Shape{g.S, g.T}) {
			return AttentionGeom{}, fmt.Errorf("shape mismatch: attention mask %q is %v; want [S, T] = [%d, %d] (q %q is %v, k %q is %v), one mask for every batch slice and head",
				m.Name, m.Shape, g.S, g.T, q.Name, q.Shape, k.Name, k.Shape)
		}
		g.Mask = true
	}
	return g, nil
}

func inferAttention(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	g, err := AttentionGeometry(a, in)
	if err != nil {
		return nil, err
	}
	out := in[0].Shape.Clone()
	out[len(out)-1] = g.Dv
	return one(out, in[0].DType), nil
}

// inferAttentionGrad: (q, k, v, dy[, mask]) → dq, dk, dv. The mask comes
// last so that the first four inputs mean what they always have.
func inferAttentionGrad(a *Attrs, in []*Tensor) ([]OutSpec, error) {
	if len(in) > 5 {
		return nil, fmt.Errorf("attention_grad takes q, k, v, dy and an optional mask, got %d inputs", len(in))
	}
	fwdIn := append(append([]*Tensor{}, in[:3]...), in[4:]...)
	fwd, err := inferAttention(a, fwdIn)
	if err != nil {
		return nil, err
	}
	if !in[3].Shape.Equal(fwd[0].Shape) {
		return nil, errShapes("attention_grad dy must match the output", in[0], in[3])
	}
	return []OutSpec{{Shape: in[0].Shape.Clone(), DType: in[0].DType}, {Shape: in[1].Shape.Clone(), DType: in[0].DType}, {Shape: in[2].Shape.Clone(), DType: in[0].DType}}, nil
}

func gradAttention(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	in := op.Inputs
	a := Attrs{Scale: op.Attrs.Scale, Causal: op.Attrs.Causal, KVGroup: op.Attrs.KVGroup}
	gin := []TensorID{in[0], in[1], in[2], dy[0]}
	if len(in) == 4 {
		if c.need(in[3]) {
			c.b.fail(fmt.Errorf("attention mask %q depends on a parameter; hap's attention takes the mask as a constant and gives it no gradient", c.t(in[3]).Name))
		}
		gin = append(gin, in[3])
	}
	d := c.emit(OpAttentionGrad, a, gin...)[:3]
	if len(in) == 4 {
		d = append(d, NoTensor)
	}
	return d
}

// workAttention prices attention from its geometry: QKᵀ, the softmax
// (≈5 flops a score, one more with a mask) and P·V; grouped-query
// attention does the FLOPs of its query heads but reads only its
// key/value heads.
func workAttention(a *Attrs, in, out []*Tensor) (Work, Work) {
	g, err := AttentionGeometry(a, in)
	if err != nil {
		return Work{Class: ClassAttention}, Work{Class: ClassAttention}
	}
	batch := float64(g.Batch)
	s, t, d, dv := float64(g.S), float64(g.T), float64(g.D), float64(g.Dv)
	soft := 5.0
	if g.Mask {
		soft = 6
	}
	f := batch * (2*s*t*d + soft*s*t + 2*s*t*dv)
	b := bytesOf(in...) + bytesOf(out[0]) + batch*s*t*float64(in[0].DType.Size())
	// Backward recomputes the scores, then dV, dP, dS, dQ, dK.
	return Work{ClassAttention, f, b}, Work{ClassAttention, batch * (2*s*t*d + soft*s*t + 2*s*t*dv + 2*s*t*dv + 2*s*t*dv + 5*s*t + 2*s*t*d + 2*s*t*d), 3 * b}
}

// workAttentionGrad is attention_grad's work, (q, k, v, dy[, mask]) → dq,
// dk, dv: the forward's backward estimate (the scores recomputed, then
// dV, dP, dS, dQ and dK: about three times the forward's FLOPs). It used
// to be priced by workAttention's first result, the forward's own work,
// which left every attention's backward at a third of its FLOPs.
func workAttentionGrad(a *Attrs, in, _ []*Tensor) (Work, Work) {
	fwdIn := append(append([]*Tensor{}, in[:3]...), in[4:]...)
	_, bwd := workAttention(a, fwdIn, in[3:4])
	return bwd, bwd
}

// RotaryGeom is a rotary op's geometry: the rows of x (the product of
// every dim but the last; row i sits at position i mod S), the sequence
// length S, the head dim D and the table width W (D or D/2).
type RotaryGeom struct {
	Rows, S, D, W int
}

// RotaryGeometry checks rotary's (x, cos, sin) shapes (or rotary_grad's,
// dy in x's place).
func RotaryGeometry(in []*Tensor) (RotaryGeom, error) {
	x, c, s := in[0], in[1], in[2]
	if err := sameDType(x, c, s); err != nil {
		return RotaryGeom{}, err
	}
	r := len(x.Shape)
	if r < 2 {
		return RotaryGeom{}, fmt.Errorf("rotary input %q is %v; want [..., S, d]", x.Name, x.Shape)
	}
	g := RotaryGeom{S: x.Shape[r-2], D: x.Shape[r-1]}
	if g.D%2 != 0 {
		return RotaryGeom{}, fmt.Errorf("rotary input %q is %v; its last dim %d must be even (it rotates halves)", x.Name, x.Shape, g.D)
	}
	if len(c.Shape) != 2 || c.Shape[0] != g.S || (c.Shape[1] != g.D && 2*c.Shape[1] != g.D) {
		return RotaryGeom{}, fmt.Errorf("shape mismatch: rotary cos %q is %v; want [S, d] = [%d, %d] or [S, d/2] = [%d, %d] for x %q %v",
			c.Name, c.Shape, g.S, g.D, g.S, g.D/2, x.Name, x.Shape)
	}
	if !s.Shape.Equal(c.Shape) {
		return RotaryGeom{}, errShapes("rotary cos and sin must have equal shapes", c, s)
	}
	g.W = c.Shape[1]
	g.Rows = Shape(x.Shape[:r-1]).Numel()
	return g, nil
}

func inferRotary(_ *Attrs, in []*Tensor) ([]OutSpec, error) {
	if _, err := RotaryGeometry(in); err != nil {
		return nil, err
	}
	return one(in[0].Shape, in[0].DType), nil
}

func gradRotary(c *gradCtx, op *Op, dy []TensorID) []TensorID {
	for _, t := range op.Inputs[1:] {
		if c.need(t) {
			c.b.fail(fmt.Errorf("rotary table %q depends on a parameter; hap's rotary takes cos and sin as constants and gives them no gradient", c.t(t).Name))
		}
	}
	return []TensorID{c.emit1(OpRotaryGrad, Attrs{}, dy[0], op.Inputs[1], op.Inputs[2]), NoTensor, NoTensor}
}

// workRotary: 3 flops an element (two products and a sum), x and y moved
// once and the tables once; its adjoint is the same work.
func workRotary(_ *Attrs, in, out []*Tensor) (Work, Work) {
	n := numel(in[0])
	w := Work{ClassElementwise, 3 * n, bytesOf(in...) + bytesOf(out...)}
	return w, w
}

// Rotary applies rotary position embeddings (half rotation, see OpRotary)
// to x[..., S, d] with constant tables cos and sin [S, d] or [S, d/2].
func (b *Builder) Rotary(x, cos, sin TensorID) TensorID {
	return b.emit1(OpRotary, Attrs{}, x, cos, sin)
}

// AttentionWith is attention with an optional additive mask [S, T]
// (NoTensor: none) and kvGroup query heads per key/value head (1: plain
// multi-head attention; > 1: grouped-query attention, k and v with
// heads/kvGroup heads in the dim before [T, D]).
func (b *Builder) AttentionWith(q, k, v, mask TensorID, causal bool, kvGroup int) TensorID {
	s := b.Shape(q)
	if len(s) == 0 {
		b.fail(fmt.Errorf("attention under %q: q has no shape", b.scope))
		return NoTensor
	}
	a := Attrs{Causal: causal, Scale: DefaultAttentionScale(s[len(s)-1])}
	if kvGroup > 1 {
		a.KVGroup = kvGroup
	}
	if mask == NoTensor {
		return b.emit1(OpAttention, a, q, k, v)
	}
	return b.emit1(OpAttention, a, q, k, v, mask)
}
