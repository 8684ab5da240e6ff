package cpu

// Mixture-of-experts kernels: GShard top-2 gating and two-operand einsum.

import (
	"fmt"
	"math"
	"strings"

	"hap/ir"
)

// ---- top-2 gating ----

// top2Route is one token's routing: its two experts, their capacity slots
// (−1 when the assignment was dropped for lack of capacity) and their
// softmax probabilities.
type top2Route struct {
	e1, e2 int
	c1, c2 int
	p1, p2 float64
}

// top2Routing computes the GShard top-2 routing of logits[T,E] under
// capacity C. It returns each token's route and the softmax probabilities
// p[T·E] (float64).
//
// Rule: p = softmax(logits[t]); e1 = argmax p (lowest index on ties),
// e2 = argmax over e ≠ e1 (lowest index on ties). Slots are assigned first
// to every token's first choice in token order (slot = number of earlier
// first choices of the same expert), then to every second choice in token
// order (slot = min(first choices of that expert, C) + number of earlier
// kept second choices of it). An assignment whose slot is ≥ C is dropped.
func top2Routing[F Float](logits []F, T, E, C int) ([]top2Route, []float64) {
	p := make([]float64, T*E)
	routes := make([]top2Route, T)
	for t := 0; t < T; t++ {
		row, pr := logits[t*E:(t+1)*E], p[t*E:(t+1)*E]
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		var sum float64
		for e, x := range row {
			pr[e] = math.Exp(float64(x) - m)
			sum += pr[e]
		}
		for e := range pr {
			pr[e] /= sum
		}
		e1 := 0
		for e := 1; e < E; e++ {
			if pr[e] > pr[e1] {
				e1 = e
			}
		}
		e2 := -1
		for e := 0; e < E; e++ {
			if e != e1 && (e2 < 0 || pr[e] > pr[e2]) {
				e2 = e
			}
		}
		routes[t] = top2Route{e1: e1, e2: e2, p1: pr[e1], p2: pr[e2]}
	}
	fill := make([]int, E)
	for t := range routes {
		r := &routes[t]
		r.c1 = fill[r.e1]
		fill[r.e1]++
		if r.c1 >= C {
			r.c1 = -1
		}
	}
	for e := range fill {
		fill[e] = min(fill[e], C)
	}
	for t := range routes {
		r := &routes[t]
		r.c2 = -1
		if fill[r.e2] < C {
			r.c2 = fill[r.e2]
			fill[r.e2]++
		}
	}
	return routes, p
}

// top2Check validates logits[groups..., T, E] and returns the number of
// groups (the product of the leading dims; 1 for rank 2), T, E and C.
func top2Check[F Float](op string, a *ir.Attrs, logits *Tensor[F]) (groups, T, E, C int, err error) {
	r := len(logits.Shape)
	if r < 2 || logits.Shape[r-1] < 2 {
		return 0, 0, 0, 0, fmt.Errorf("%s: want logits[groups..., tokens, experts ≥ 2], got %v", op, logits.Shape)
	}
	if a.Capacity < 1 {
		return 0, 0, 0, 0, fmt.Errorf("%s: capacity %d must be ≥ 1", op, a.Capacity)
	}
	if err := checkTensor(op, "logits", logits, logits.Shape); err != nil {
		return 0, 0, 0, 0, err
	}
	return logits.Shape[:r-2].Numel(), logits.Shape[r-2], logits.Shape[r-1], a.Capacity, nil
}

// gateShape is combine's and dispatch's shape: logits' with C appended.
func gateShape(logits ir.Shape, C int) ir.Shape { return append(logits.Clone(), C) }

// top2Gate writes GShard top-2 gating, each group routed on its own (see
// top2Routing for the routing rule): for each kept assignment (t, e, c),
// combine[t,e,c] is the gate renormalised over the token's two choices —
// g1 = p1/(p1+p2) for the first expert, g2 = p2/(p1+p2) for the second —
// and dispatch[t,e,c] = 1. Every other entry is 0.
func top2Gate[F Float](a *ir.Attrs, logits, combine, dispatch *Tensor[F]) error {
	const op = "top2_gate"
	G, T, E, C, err := top2Check(op, a, logits)
	if err != nil {
		return err
	}
	out := gateShape(logits.Shape, C)
	if err := checkTensor(op, "combine", combine, out); err != nil {
		return err
	}
	if err := checkTensor(op, "dispatch", dispatch, out); err != nil {
		return err
	}
	clear(combine.Data)
	clear(dispatch.Data)
	for g := 0; g < G; g++ {
		routes, _ := top2Routing(logits.Data[g*T*E:(g+1)*T*E], T, E, C)
		cg, dg := combine.Data[g*T*E*C:(g+1)*T*E*C], dispatch.Data[g*T*E*C:(g+1)*T*E*C]
		for t, r := range routes {
			s := r.p1 + r.p2
			if r.c1 >= 0 {
				i := (t*E+r.e1)*C + r.c1
				cg[i], dg[i] = F(r.p1/s), 1
			}
			if r.c2 >= 0 {
				i := (t*E+r.e2)*C + r.c2
				cg[i], dg[i] = F(r.p2/s), 1
			}
		}
	}
	return nil
}

// top2GateGrad is the exact derivative of combine with respect to logits,
// the routing (e1, e2 and the slots) held fixed — it is piecewise constant,
// so this is the derivative almost everywhere. Groups are independent;
// within one:
//
//   - Only kept assignments carry gradient: dg1 = dcombine[t,e1,c1] if the
//     first choice was kept (else 0), dg2 = dcombine[t,e2,c2] likewise.
//     Dropped assignments and all other entries of dcombine contribute 0.
//   - With s = p1+p2, g1 = p1/s and g2 = p2/s:
//     dp1 = dg1·p2/s² − dg2·p2/s² = p2·(dg1−dg2)/s²,
//     dp2 = −dg1·p1/s² + dg2·p1/s² = p1·(dg2−dg1)/s²,
//     and dp_j = 0 for every other expert.
//   - Through the softmax: dlogit_j = p_j·(dp_j − Σ_k p_k·dp_k).
func top2GateGrad[F Float](a *ir.Attrs, logits, dcombine, dlogits *Tensor[F]) error {
	const op = "top2_gate_grad"
	G, T, E, C, err := top2Check(op, a, logits)
	if err != nil {
		return err
	}
	if err := checkTensor(op, "dcombine", dcombine, gateShape(logits.Shape, C)); err != nil {
		return err
	}
	if err := checkTensor(op, "dlogits", dlogits, logits.Shape); err != nil {
		return err
	}
	clear(dlogits.Data)
	for g := 0; g < G; g++ {
		routes, p := top2Routing(logits.Data[g*T*E:(g+1)*T*E], T, E, C)
		dc, dlg := dcombine.Data[g*T*E*C:(g+1)*T*E*C], dlogits.Data[g*T*E:(g+1)*T*E]
		for t, r := range routes {
			var dg1, dg2 float64
			if r.c1 >= 0 {
				dg1 = float64(dc[(t*E+r.e1)*C+r.c1])
			}
			if r.c2 >= 0 {
				dg2 = float64(dc[(t*E+r.e2)*C+r.c2])
			}
			if dg1 == 0 && dg2 == 0 {
				continue
			}
			s := r.p1 + r.p2
			dp1 := r.p2 * (dg1 - dg2) / (s * s)
			dp2 := r.p1 * (dg2 - dg1) / (s * s)
			dot := r.p1*dp1 + r.p2*dp2
			pr, dl := p[t*E:(t+1)*E], dlg[t*E:(t+1)*E]
			for j, pj := range pr {
				dpj := 0.0
				switch j {
				case r.e1:
					dpj = dp1
				case r.e2:
					dpj = dp2
				}
				dl[j] = F(pj * (dpj - dot))
			}
		}
	}
	return nil
}

// ---- einsum ----

// einsum evaluates a two-operand equation (ir.ParseEinsum) as a batched
// matrix product. Its indices fall into four groups:
//
//	batch: in x, y and out      m: in x and out only
//	n:     in y and out only    k: in x and y, not out (summed)
//
// x is packed into [batch, m, k], y into [batch, k, n] (both as float64, so
// every sum accumulates in float64 whatever F is), each batch slice is one
// GEMM, and the [m, n] result is scattered into out's layout.
func einsum[F Float](a *ir.Attrs, x, y, out *Tensor[F]) error {
	return einsumWith(a, x, y, out, einsumDirectMax)
}

// einsumWith is einsum multiplying products of at most directMax by direct
// loops.
func einsumWith[F Float](a *ir.Attrs, x, y, out *Tensor[F], directMax int) error {
	const op = "einsum"
	e, err := ir.ParseEinsum(a.Equation)
	if err != nil {
		return err
	}
	sz, err := e.Sizes(x.Shape, y.Shape)
	if err != nil {
		return err
	}
	want := make(ir.Shape, len(e.Out))
	for i, r := range e.Out {
		want[i] = sz[r]
	}
	if err := checkTensor(op, "x", x, x.Shape); err != nil {
		return err
	}
	if err := checkTensor(op, "y", y, y.Shape); err != nil {
		return err
	}
	if err := checkTensor(op, "out", out, want); err != nil {
		return err
	}
	var bIdx, mIdx, nIdx, kIdx []rune
	for _, r := range e.Out {
		inA, inB := strings.ContainsRune(e.A, r), strings.ContainsRune(e.B, r)
		switch {
		case inA && inB:
			bIdx = append(bIdx, r)
		case inA:
			mIdx = append(mIdx, r)
		default:
			nIdx = append(nIdx, r)
		}
	}
	for _, r := range e.A + e.B {
		if strings.ContainsRune(e.Out, r) {
			continue
		}
		if !strings.ContainsRune(e.A, r) || !strings.ContainsRune(e.B, r) {
			return fmt.Errorf("%s %q: index %q is summed within one operand (unsupported)", op, a.Equation, r)
		}
		if !strings.ContainsRune(string(kIdx), r) {
			kIdx = append(kIdx, r)
		}
	}
	xb, xm, xk := einsumOffsets(e.A, x.Shape, sz, bIdx), einsumOffsets(e.A, x.Shape, sz, mIdx), einsumOffsets(e.A, x.Shape, sz, kIdx)
	yb, yk, yn := einsumOffsets(e.B, y.Shape, sz, bIdx), einsumOffsets(e.B, y.Shape, sz, kIdx), einsumOffsets(e.B, y.Shape, sz, nIdx)
	ob, om, on := einsumOffsets(e.Out, want, sz, bIdx), einsumOffsets(e.Out, want, sz, mIdx), einsumOffsets(e.Out, want, sz, nIdx)
	B, M, N, K := len(xb), len(xm), len(yn), len(xk)
	if B == 0 || M == 0 || N == 0 {
		return nil // out is empty
	}
	if K == 0 {
		clear(out.Data)
		return nil
	}
	kernParallel(B, kernWorkers(B), func(_, lo, hi int) {
		ap, bp, cp := make([]float64, M*K), make([]float64, K*N), make([]float64, M*N)
		for b := lo; b < hi; b++ {
			xs := x.Data[xb[b]:]
			for i, xo := range xm {
				row := ap[i*K : (i+1)*K]
				for l, ko := range xk {
					row[l] = float64(xs[xo+ko])
				}
			}
			ys := y.Data[yb[b]:]
			for l, ko := range yk {
				row := bp[l*N : (l+1)*N]
				for j, no := range yn {
					row[j] = float64(ys[ko+no])
				}
			}
			if M*N*K <= directMax {
				einsumDirect(M, N, K, ap, bp, cp)
			} else {
				gemmScaled(false, false, M, N, K, 1, ap, bp, 0, cp)
			}
			dst := out.Data[ob[b]:]
			for i, mo := range om {
				row := cp[i*N : (i+1)*N]
				for j, no := range on {
					dst[mo+no] = F(row[j])
				}
			}
		}
	})
	return nil
}

// einsumDirectMax is the largest M·N·K product einsum multiplies by direct
// loops rather than a BLAS call (whose fixed cost dominates tiny products,
// e.g. elementwise equations, where M = N = K = 1 per batch slice). Tests
// cover both paths through einsumWith.
const einsumDirectMax = 512

// einsumDirect is c = a·b for small row-major float64 matrices.
func einsumDirect(m, n, k int, a, b, c []float64) {
	for i := 0; i < m; i++ {
		ci := c[i*n : (i+1)*n]
		clear(ci)
		for l, av := range a[i*k : (i+1)*k] {
			for j, bv := range b[l*n : (l+1)*n] {
				ci[j] += av * bv
			}
		}
	}
}

// einsumOffsets enumerates every assignment of the indices idx (row-major,
// first index slowest) and returns, for each, its flat offset in a tensor
// with index string sub and shape s (indices absent from sub contribute 0).
// An empty idx gives the single offset 0.
func einsumOffsets(sub string, s ir.Shape, sz map[rune]int, idx []rune) []int {
	strides := s.Strides()
	offs := []int{0}
	for _, r := range idx {
		stride := 0
		if p := strings.IndexRune(sub, r); p >= 0 {
			stride = strides[p]
		}
		n := sz[r]
		next := make([]int, 0, len(offs)*n)
		for _, o := range offs {
			for i := 0; i < n; i++ {
				next = append(next, o+i*stride)
			}
		}
		offs = next
	}
	return offs
}
