package cuda

import (
	"fmt"
	"math"
	"strings"

	"hap/ir"
)

// Planning of the operators built from GEMMs and layout kernels:
// attention, convolution, pooling, top-2 gating and einsum. Semantics are
// package cpu's (attention.go, conv.go, moe.go); the kernels they use are
// in kernels.go.

// at is r moved bytes further into its buffer.
func at(r BufRef, bytes int64) BufRef {
	r.Offset += bytes
	return r
}

// rowGemm appends C = alpha·op(A)·op(B) + beta·C for row-major matrices,
// batch entries strides sa, sb, sc elements apart: op(A) is m×k, op(B) is
// k×n, C is m×n with row length ldc; lda and ldb are the row lengths of A
// and B as stored. cuBLAS is column-major, so it computes
// Cᵀ = op(B)ᵀ·op(A)ᵀ with B as its first operand (as MatMulGemm does).
// With k = 0 and beta = 0 the (contiguous) C is zeroed.
func (p *planner) rowGemm(dt ir.DType, ta, tb bool, m, n, k int64, alpha, beta float64,
	a BufRef, lda, sa int64, b BufRef, ldb, sb int64, c BufRef, ldc, sc int64, batch int64) error {
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	if k == 0 {
		if beta == 0 {
			p.memset(c, batch*m*n*int64(dt.Size()))
		}
		return nil
	}
	for _, v := range []int64{m, n, k, lda, ldb, ldc, batch} {
		if v > math.MaxInt32 {
			return fmt.Errorf("GEMM dimension %d exceeds cuBLAS's 32-bit range", v)
		}
	}
	g := Gemm{TransA: tb, TransB: ta, M: int(n), N: int(m), K: int(k),
		LDA: int(ldb), StrideA: sb, LDB: int(lda), StrideB: sa, LDC: int(ldc), StrideC: sc,
		Batch: int(batch), Alpha: alpha, Beta: beta}
	p.plan.Steps = append(p.plan.Steps, Step{Kind: StepGemm, Gemm: g, GemmBuf: [3]BufRef{b, a, c}, F64: dt == ir.Float64})
	return nil
}

// ---- attention ----

// attention plans attention (dy nil; outs = [y]) or its gradient
// (outs = [dq, dk, dv]) as cpu.attention / cpu.attentionGrad do it, with
// the scores P = softmax(scale·q·kᵀ + mask) in the workspace:
//
//	forward:  P = scale·q·kᵀ (GEMM), masked row softmax, y = P·v (GEMM)
//	backward: P again; dV = Pᵀ·dY; dP = dY·Vᵀ; dS = P ⊙ (dP − rowsum(dP ⊙ P));
//	          dQ = scale·dS·K; dK = scale·dSᵀ·Q
//
// Grouped-query attention runs per key/value slice, its g query heads
// being one block of g·S adjacent query rows (cpu/attention.go); the
// softmax kernels take a row's position as its index mod S. An additive
// mask (input mask ≥ 0) goes into the softmax's kernel, attn_mask_softmax.
func (p *planner) attention(a *ir.Attrs, q, k, v, dy *ir.Tensor, mask int, outs []*ir.Tensor) error {
	ts := []*ir.Tensor{q, k, v}
	if mask >= 0 {
		ts = append(ts, &ir.Tensor{Name: "mask", Shape: ir.Shape{q.Shape[len(q.Shape)-2], k.Shape[len(k.Shape)-2]}, DType: q.DType})
	}
	geo, err := ir.AttentionGeometry(a, ts)
	if err != nil {
		return err
	}
	// s is the GEMMs' query rows per key/value slice, pos the sequence
	// length the softmax's positions cycle over.
	batch, s, d := int64(geo.KVBatch), int64(geo.Group*geo.S), int64(geo.D)
	t, dv, pos := int64(geo.T), int64(geo.Dv), int64(geo.S)
	dt := q.DType
	es := int64(dt.Size())
	if t == 0 {
		// No keys: the output (forward) or dq (backward) is zero; dk and
		// dv are empty.
		p.memset(out(0), numel(outs[0])*es)
		return nil
	}
	scores := batch * s * t
	grad := dy != nil
	p.plan.WorkBytes = scores * es
	if grad {
		p.plan.WorkBytes *= 2
	}
	P := work(0)
	if err := p.rowGemm(dt, false, true, s, t, d, a.Scale, 0, in(0), d, s*d, in(1), d, t*d, P, t, s*t, batch); err != nil {
		return err
	}
	if batch*s > 0 {
		var err error
		if mask >= 0 {
			err = p.launch("attn_mask_softmax", dt, p.rowGrid(batch*s), P, in(mask), batch*s, pos, t, b2i(a.Causal))
		} else {
			err = p.launch("attn_softmax", dt, p.rowGrid(batch*s), P, batch*s, pos, t, b2i(a.Causal))
		}
		if err != nil {
			return err
		}
	}
	if !grad {
		return p.rowGemm(dt, false, false, s, dv, t, 1, 0, P, t, s*t, in(2), dv, t*dv, out(0), dv, s*dv, batch)
	}
	dS := work(scores * es)
	steps := []func() error{
		// dV = Pᵀ·dY
		func() error {
			return p.rowGemm(dt, true, false, t, dv, s, 1, 0, P, t, s*t, in(3), dv, s*dv, out(2), dv, t*dv, batch)
		},
		// dP = dY·Vᵀ
		func() error {
			return p.rowGemm(dt, false, true, s, t, dv, 1, 0, in(3), dv, s*dv, in(2), dv, t*dv, dS, t, s*t, batch)
		},
		func() error {
			if batch*s == 0 {
				return nil
			}
			return p.launch("attn_softmax_grad", dt, p.rowGrid(batch*s), P, dS, batch*s, t)
		},
		// dQ = scale·dS·K
		func() error {
			return p.rowGemm(dt, false, false, s, d, t, a.Scale, 0, dS, t, s*t, in(1), d, t*d, out(0), d, s*d, batch)
		},
		// dK = scale·dSᵀ·Q
		func() error {
			return p.rowGemm(dt, true, false, t, d, s, a.Scale, 0, dS, t, s*t, in(0), d, s*d, out(1), d, t*d, batch)
		},
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// ---- convolution ----

// convGeom is x[N,C,H,W] * w[O,C,KH,KW] → y[N,O,OH,OW], stride s, padding
// pad on every side (cpu.convGeom).
type convGeom struct {
	n, c, h, w, o, kh, kw, oh, ow, s, pad int64
}

func newConvGeom(a *ir.Attrs, xs, ws ir.Shape) (convGeom, error) {
	if len(xs) != 4 || len(ws) != 4 || xs[1] != ws[1] {
		return convGeom{}, fmt.Errorf("want x[N,C,H,W] and w[O,C,KH,KW], got %v and %v", xs, ws)
	}
	if a.Stride < 1 || a.Pad < 0 {
		return convGeom{}, fmt.Errorf("stride %d must be ≥ 1 and pad %d ≥ 0", a.Stride, a.Pad)
	}
	g := convGeom{n: int64(xs[0]), c: int64(xs[1]), h: int64(xs[2]), w: int64(xs[3]), o: int64(ws[0]),
		kh: int64(ws[2]), kw: int64(ws[3]), s: int64(a.Stride), pad: int64(a.Pad)}
	if g.h+2*g.pad < g.kh || g.w+2*g.pad < g.kw {
		return convGeom{}, fmt.Errorf("kernel %dx%d larger than padded input %v (pad %d)", g.kh, g.kw, xs, g.pad)
	}
	g.oh = (g.h+2*g.pad-g.kh)/g.s + 1
	g.ow = (g.w+2*g.pad-g.kw)/g.s + 1
	return g, nil
}

func (g convGeom) k() int64    { return g.c * g.kh * g.kw }
func (g convGeom) pix() int64  { return g.oh * g.ow }
func (g convGeom) img() int64  { return g.c * g.h * g.w }
func (g convGeom) dims() Dims  { return Dims{g.c, g.h, g.w, g.kh, g.kw, g.oh, g.ow, g.s} }
func (g convGeom) point() bool { return g.kh == 1 && g.kw == 1 && g.s == 1 && g.pad == 0 }

// band is how many images one pass covers: as many as keep perImage·band
// elements within the column budget, at least one.
func (p *planner) band(g convGeom, perImage int64) int64 {
	return max(1, min(g.n, p.opt.MaxColumnElems/max(1, perImage)))
}

// conv2d: per band of images, im2col into the workspace (skipped for a
// pointwise convolution, whose column matrix is the image), then
// y[n] (O×P) = W (O×K) · col[n] (K×P) as one strided-batched GEMM with W's
// stride 0.
func (p *planner) conv2d(a *ir.Attrs, xs, ws ir.Shape, dt ir.DType) error {
	g, err := newConvGeom(a, xs, ws)
	if err != nil {
		return err
	}
	K, P, es := g.k(), g.pix(), int64(dt.Size())
	if g.n*g.o*P == 0 {
		return nil
	}
	nb := p.band(g, K*P)
	if !g.point() {
		p.plan.WorkBytes = nb * K * P * es
	}
	for n0 := int64(0); n0 < g.n; n0 += nb {
		cnt := min(nb, g.n-n0)
		x := at(in(0), n0*g.img()*es)
		col := x
		if !g.point() {
			col = work(0)
			if err := p.launch("im2col", dt, p.elemGrid(cnt*K*P), x, col, cnt, g.dims(), g.pad, P, K*P); err != nil {
				return err
			}
		}
		if err := p.rowGemm(dt, false, false, g.o, P, K, 1, 0, in(1), K, 0, col, P, K*P, at(out(0), n0*g.o*P*es), P, g.o*P, cnt); err != nil {
			return err
		}
	}
	return nil
}

// conv2dGradInput: per band, dcol[n] (K×P) = Wᵀ (K×O) · dy[n] (O×P) as one
// strided-batched GEMM, then col2im gathers dcol into dx. A pointwise
// convolution's GEMM writes dx directly.
func (p *planner) conv2dGradInput(a *ir.Attrs, ws ir.Shape, dt ir.DType) error {
	g, err := newConvGeom(a, ir.Shape(a.Shape), ws)
	if err != nil {
		return err
	}
	K, P, es := g.k(), g.pix(), int64(dt.Size())
	if g.n*g.img() == 0 {
		return nil
	}
	if g.o == 0 {
		p.memset(out(0), g.n*g.img()*es)
		return nil
	}
	nb := p.band(g, K*P)
	if !g.point() {
		p.plan.WorkBytes = nb * K * P * es
	}
	for n0 := int64(0); n0 < g.n; n0 += nb {
		cnt := min(nb, g.n-n0)
		dy := at(in(0), n0*g.o*P*es)
		dx := at(out(0), n0*g.img()*es)
		dcol := dx
		if !g.point() {
			dcol = work(0)
		}
		if err := p.rowGemm(dt, true, false, K, P, g.o, 1, 0, in(1), K, 0, dy, P, g.o*P, dcol, P, K*P, cnt); err != nil {
			return err
		}
		if !g.point() {
			if err := p.launch("col2im", dt, p.elemGrid(cnt*g.img()), dcol, dx, cnt, g.dims(), g.pad); err != nil {
				return err
			}
		}
	}
	return nil
}

// conv2dGradWeight: dw (O×K) = Σ_n dy[n] (O×P) · col[n]ᵀ (P×K). Per band
// of images, im2col lays the columns out as [K][images·P] and dy is
// permuted to [O][images·P], so the band is one GEMM; bands accumulate
// into dw (β = 1 after the first).
func (p *planner) conv2dGradWeight(a *ir.Attrs, xs ir.Shape, dt ir.DType) error {
	g, err := newConvGeom(a, xs, ir.Shape(a.Shape))
	if err != nil {
		return err
	}
	K, P, es := g.k(), g.pix(), int64(dt.Size())
	if g.o*K == 0 {
		return nil
	}
	if g.n == 0 {
		p.memset(out(0), g.o*K*es)
		return nil
	}
	nb := p.band(g, (K+g.o)*P)
	p.plan.WorkBytes = nb * (K + g.o) * P * es
	col, dyp := work(0), work(nb*K*P*es)
	for n0 := int64(0); n0 < g.n; n0 += nb {
		cnt := min(nb, g.n-n0)
		if err := p.launch("im2col", dt, p.elemGrid(cnt*K*P), at(in(0), n0*g.img()*es), col, cnt, g.dims(), g.pad, cnt*P, P); err != nil {
			return err
		}
		dy := at(in(1), n0*g.o*P*es)
		if cnt > 1 && g.o > 1 {
			// [cnt, O, P] → [O, cnt, P]
			if err := p.launch("permute", dt, p.elemGrid(cnt*g.o*P), dy, dyp, cnt*g.o*P, int32(3),
				Dims{g.o, cnt, P}, Dims{P, g.o * P, 1}); err != nil {
				return err
			}
			dy = dyp
		}
		beta := 1.0
		if n0 == 0 {
			beta = 0
		}
		if err := p.rowGemm(dt, false, true, g.o, K, cnt*P, 1, beta, dy, cnt*P, 0, col, cnt*P, 0, out(0), K, 0, 1); err != nil {
			return err
		}
	}
	return nil
}

// ---- pooling ----

// maxPool plans max_pool2d (in: x; out: y) or its gradient (in: x, dy;
// out: dx); windows are Kernel×Kernel every Stride pixels, unpadded.
func (p *planner) maxPool(a *ir.Attrs, xs ir.Shape, grad bool, dt ir.DType) error {
	if len(xs) != 4 {
		return fmt.Errorf("want x[N,C,H,W], got %v", xs)
	}
	if a.Kernel < 1 || a.Stride < 1 || a.Kernel > xs[2] || a.Kernel > xs[3] {
		return fmt.Errorf("kernel %d stride %d invalid for %v", a.Kernel, a.Stride, xs)
	}
	h, w, k, s := int64(xs[2]), int64(xs[3]), int64(a.Kernel), int64(a.Stride)
	oh, ow := (h-k)/s+1, (w-k)/s+1
	planes := int64(xs[0] * xs[1])
	g := Dims{h, w, oh, ow, k, s}
	if !grad {
		if n := planes * oh * ow; n > 0 {
			return p.launch("max_pool", dt, p.elemGrid(n), in(0), out(0), planes, g)
		}
		return nil
	}
	if n := planes * h * w; n > 0 {
		return p.launch("max_pool_grad", dt, p.elemGrid(n), in(0), in(1), out(0), planes, g)
	}
	return nil
}

// adaptivePool plans adaptive_avg_pool2d (in: x; out: y) or its gradient
// (in: dy; out: dx) for x of shape xs pooled to outHW.
func (p *planner) adaptivePool(xs ir.Shape, outHW []int, grad bool, dt ir.DType) error {
	if len(xs) != 4 || len(outHW) != 2 || outHW[0] < 1 || outHW[1] < 1 || xs[2] < 1 || xs[3] < 1 {
		return fmt.Errorf("want x[N,C,H,W] (H, W ≥ 1) and output [OH,OW], got %v and %v", xs, outHW)
	}
	planes := int64(xs[0] * xs[1])
	g := Dims{int64(xs[2]), int64(xs[3]), int64(outHW[0]), int64(outHW[1])}
	if !grad {
		if n := planes * g[2] * g[3]; n > 0 {
			return p.launch("adaptive_avg_pool", dt, p.elemGrid(n), in(0), out(0), planes, g)
		}
		return nil
	}
	if n := planes * g[0] * g[1]; n > 0 {
		return p.launch("adaptive_avg_pool_grad", dt, p.elemGrid(n), in(0), out(0), planes, g)
	}
	return nil
}

// ---- top-2 gating ----

// top2 plans top2_gate (in: logits; out: combine, dispatch) or its
// gradient (in: logits, dcombine; out: dlogits). Logits are [groups…,
// tokens, experts]; each group is gated on its own (GShard's groups), by
// the same kernels launched once per group on offset buffers, in stream
// order so that the groups share one routing workspace: 4 int64 per token
// (e1, e2, c1, c2), then 2 float64 (p1, p2).
func (p *planner) top2(kind ir.OpKind, a *ir.Attrs, ls ir.Shape, dt ir.DType) error {
	if len(ls) < 2 || ls[len(ls)-1] < 2 {
		return fmt.Errorf("want logits[groups…, tokens, experts ≥ 2], got %v", ls)
	}
	if a.Capacity < 1 {
		return fmt.Errorf("capacity %d must be ≥ 1", a.Capacity)
	}
	groups := int64(ls[:len(ls)-2].Numel())
	t, e, c := int64(ls[len(ls)-2]), int64(ls[len(ls)-1]), int64(a.Capacity)
	if t == 0 || groups == 0 {
		return nil
	}
	es := int64(dt.Size())
	route, prob := work(0), work(32*t)
	p.plan.WorkBytes = 48 * t
	at := func(r BufRef, off int64) BufRef { r.Offset += off; return r }
	for g := int64(0); g < groups; g++ {
		logits, slots := g*t*e*es, g*t*e*c*es
		if err := p.launch("top2_route", dt, p.elemGrid(t), at(in(0), logits), route, prob, t, e); err != nil {
			return err
		}
		if err := p.launch("top2_slots", dt, p.elemGrid(e), route, t, e, c); err != nil {
			return err
		}
		if kind == ir.OpTop2GateGrad {
			if err := p.launch("top2_grad", dt, p.elemGrid(t), at(in(0), logits), route, prob, at(in(1), slots), at(out(0), logits), t, e, c); err != nil {
				return err
			}
			continue
		}
		bytes := t * e * c * es
		p.memset(at(out(0), slots), bytes)
		p.memset(at(out(1), slots), bytes)
		if err := p.launch("top2_write", dt, p.elemGrid(t), route, prob, at(out(0), slots), at(out(1), slots), t, e, c); err != nil {
			return err
		}
	}
	return nil
}

// ---- einsum ----

// einsum plans a two-operand einsum as cpu.einsum defines it: indices in
// x, y and the output are batch (b), in x and the output m, in y and the
// output n, in x and y only k (summed). x is permuted to [b…, m…, k…], y to
// [b…, k…, n…] (each skipped when already so), one strided-batched GEMM
// gives [b…, m…, n…], permuted to the output's order (or written there
// directly when it already is).
func (p *planner) einsum(a *ir.Attrs, x, y, o *ir.Tensor) error {
	e, err := ir.ParseEinsum(a.Equation)
	if err != nil {
		return err
	}
	sz, err := e.Sizes(x.Shape, y.Shape)
	if err != nil {
		return err
	}
	var bi, mi, ni, ki []rune
	for _, r := range e.Out {
		inA, inB := strings.ContainsRune(e.A, r), strings.ContainsRune(e.B, r)
		switch {
		case inA && inB:
			bi = append(bi, r)
		case inA:
			mi = append(mi, r)
		default:
			ni = append(ni, r)
		}
	}
	for _, r := range e.A {
		if !strings.ContainsRune(e.Out, r) {
			ki = append(ki, r)
		}
	}
	prod := func(idx []rune) int64 {
		n := int64(1)
		for _, r := range idx {
			n *= int64(sz[r])
		}
		return n
	}
	B, M, N, K := prod(bi), prod(mi), prod(ni), prod(ki)
	dt := o.DType
	es := int64(dt.Size())
	if B*M*N == 0 {
		return nil
	}
	if K == 0 {
		p.memset(out(0), B*M*N*es)
		return nil
	}
	join := func(gs ...[]rune) string {
		var sb strings.Builder
		for _, g := range gs {
			sb.WriteString(string(g))
		}
		return sb.String()
	}
	var off int64
	operand := func(src BufRef, idx string, shape ir.Shape, want string) (BufRef, error) {
		if idx == want {
			return src, nil
		}
		dst := work(off)
		off += int64(shape.Numel()) * es
		return dst, p.permuteIdx(dt, src, idx, shape, dst, want, sz)
	}
	xs, err := operand(in(0), e.A, x.Shape, join(bi, mi, ki))
	if err != nil {
		return err
	}
	ys, err := operand(in(1), e.B, y.Shape, join(bi, ki, ni))
	if err != nil {
		return err
	}
	prodIdx := join(bi, mi, ni)
	cs := out(0)
	if prodIdx != e.Out {
		cs = work(off)
		off += B * M * N * es
	}
	p.plan.WorkBytes = off
	if err := p.rowGemm(dt, false, false, M, N, K, 1, 0, xs, K, M*K, ys, N, K*N, cs, N, M*N, B); err != nil {
		return err
	}
	if prodIdx == e.Out {
		return nil
	}
	ps := make(ir.Shape, len(prodIdx))
	for i, r := range prodIdx {
		ps[i] = sz[r]
	}
	return p.permuteIdx(dt, cs, prodIdx, ps, out(0), e.Out, sz)
}

// permuteIdx copies src (indices srcIdx, shape srcShape) into dst laid out
// in the index order dstIdx.
func (p *planner) permuteIdx(dt ir.DType, src BufRef, srcIdx string, srcShape ir.Shape, dst BufRef, dstIdx string, sz map[rune]int) error {
	if len(dstIdx) > MaxRank {
		return fmt.Errorf("rank %d exceeds the kernels' limit of %d", len(dstIdx), MaxRank)
	}
	st := srcShape.Strides()
	var shape, sst Dims
	n := int64(1)
	for i, r := range dstIdx {
		j := strings.IndexRune(srcIdx, r)
		if j < 0 {
			return fmt.Errorf("index %q of %q is not in %q", r, dstIdx, srcIdx)
		}
		shape[i], sst[i] = int64(sz[r]), int64(st[j])
		n *= int64(sz[r])
	}
	if n == 0 {
		return nil
	}
	return p.launch("permute", dt, p.elemGrid(n), src, dst, n, int32(len(dstIdx)), shape, sst)
}

// maskInput is the index of attention's optional mask input (at i), or −1
// when the op has none.
func maskInput(ins []*ir.Tensor, i int) int {
	if i < len(ins) {
		return i
	}
	return -1
}

// rotary plans rotary (or its adjoint, rotary_grad: dy in x's place) as
// cpu/rotary.go computes it.
func (p *planner) rotary(adjoint bool, ins []*ir.Tensor) error {
	g, err := ir.RotaryGeometry(ins)
	if err != nil {
		return err
	}
	n := int64(g.Rows) * int64(g.D/2)
	if n == 0 {
		return nil
	}
	return p.launch("rotary", ins[0].DType, p.elemGrid(n), in(0), in(1), in(2), out(0), int64(g.Rows), int64(g.S), int64(g.D), int64(g.W), b2i(adjoint))
}
