package encode

import (
	"hap/spmd"
	"math"
)

// Pruning: choices that can never be cheaper than another are fixed when
// the encoding is built, before any search sees it, so that no search
// flips them and the exhaustive enumeration skips them. Each prune must
// keep the optimum: the pruned alternative costs at least the kept one for
// every program and every integer length, and the step time and the
// memory rows are monotone in each collective's time (memory does not
// depend on the method at all). solve's TestPruningKeepsEveryProgramsBestPrice
// checks it program by program against an unpruned encoding.
//
// The collective method. Every uneven all-gather or reduce-scatter that
// makes layout q of a tensor class is padded or grouped (one binary per
// (class, q), whichever layout it is made from). Under the cost model
//
//	padded  = PadA + PadB·maxLen,               maxLen ∈ [⌈U/N⌉, U]
//	grouped = GrpA·(non-empty pieces) + GrpB·U, pieces ∈ [1, min(N, U)]
//
// so when padded's cheapest case (the most even split) costs at least
// grouped's dearest (every device a piece), grouped is never worse, and
// the reverse. Grouped wins so where a segment has fewer units than the
// cluster has devices, or barely more, and the tensor is large enough for
// its bytes to outweigh the latency of a call per piece: 12 heads over 64
// GPUs pad every piece to the largest, 5.3× the data. Padded wins so on
// the small tests' two-device clusters (one ring call against a call per
// piece). On the zoo it fixes 19 of bert-base's method choices on
// paper-16 and on paper-64, 42 of gpt2's on modern-24, 23 of bert-moe's on
// paper-32 and paper-64, none of vgg19's on paper-8 (the plan document's
// solver.model counts them).
//
// Where the fix holds: Evaluate and Decode read it whatever the choice
// says; MethodApplies is false for it, so every search that flips methods
// (local search, tidyMethods), ExcludeChoice's cuts and the enumeration
// skip it; the MILP's starts (StartValues) and pins (Fix) set its binary
// to the kept method. The MILP keeps that binary and both methods' rows:
// an optimum never needs the dominated method, and removing them (two
// columns and a row per fixed collective, the relaxation then charging
// the kept method's cost) gave the same plans on every bench row but
// moved CBC's node-limited searches onto slower paths — bert-moe
// paper-32's joint search 8.7 → 24.9 s, gpt2 paper-16's 3.2 → 10.5 s
// (docs/planner.md, "Pruning").

// methodFix is the collective method of making one layout: free for the
// search, or fixed because the other is dominated.
type methodFix int8

const (
	methodFree methodFix = iota
	methodPadded
	methodGrouped
)

// pruneMethods fills e.methods: for every tensor class and layout, the
// method fixed by dominance (methodFree where neither dominates). It
// needs e.layouts and e.coll.
func (e *Encoding) pruneMethods() {
	e.methods = make([][]methodFix, len(e.Tensors))
	for ti := range e.Tensors {
		layouts := e.Layouts(ti)
		e.methods[ti] = make([]methodFix, len(layouts))
		produced, read := e.producible(ti), e.readable(ti)
		for qi, q := range layouts {
			// A layout no reader takes is never made: nothing to fix.
			if read[q] {
				e.methods[ti][qi] = e.dominantMethod(ti, q, produced)
			}
		}
	}
}

// producible lists the layouts tensor class ti can be made in: a leaf's
// candidate layouts, or its producer's rules' outputs.
func (e *Encoding) producible(ti int) map[spmd.Layout]bool {
	t := &e.Tensors[ti]
	out := map[spmd.Layout]bool{}
	if t.Producer < 0 {
		for _, l := range t.LeafLayouts {
			out[l] = true
		}
		return out
	}
	for _, r := range e.Classes[t.Producer].Rules {
		out[r.Out[t.OutIdx]] = true
	}
	return out
}

// readable lists the layouts tensor class ti's readers may take it in:
// each consumer's rules' inputs.
func (e *Encoding) readable(ti int) map[spmd.Layout]bool {
	out := map[spmd.Layout]bool{}
	for _, cs := range e.Tensors[ti].Consumers {
		for _, r := range e.Classes[cs[0]].Rules {
			out[r.In[cs[1]]] = true
		}
	}
	return out
}

// methodConv is one collective whose method the binary of a layout
// decides: kind k (0 all-gather, 1 reduce-scatter) of a Gather layout on
// segment seg, priced by coll.
type methodConv struct {
	coll Coll
	k    int
	seg  int
}

// methodConvs lists the collectives that make layout q of class ti under
// the canonical instructions (tensorCommFor): Identity by all-gather from
// any Gather it can be made in, a Gather by reduce-scatter from Reduce.
// Their adjoints are priced as they are.
func (e *Encoding) methodConvs(ti int, q spmd.Layout, produced map[spmd.Layout]bool) []methodConv {
	t := &e.Tensors[ti]
	var out []methodConv
	switch q.Kind {
	case spmd.Identity:
		for _, h := range e.Layouts(ti) {
			if h.Kind == spmd.Gather && produced[h] {
				out = append(out, methodConv{e.collCoeffs(t, h), 0, h.Seg})
			}
		}
	case spmd.Gather:
		if produced[spmd.R] {
			out = append(out, methodConv{e.collCoeffs(t, q), 1, q.Seg})
		}
	}
	return out
}

// dominantMethod is the method that is never dearer than the other for
// every collective making layout q of class ti, whatever the lengths.
func (e *Encoding) dominantMethod(ti int, q spmd.Layout, produced map[spmd.Layout]bool) methodFix {
	convs := e.methodConvs(ti, q, produced)
	if len(convs) == 0 {
		return methodFree
	}
	paddedWins, groupedWins := true, true
	for _, c := range convs {
		U := float64(e.Segs[c.seg].Units)
		k := c.k
		padLeast := c.coll.PadA[k] + c.coll.PadB[k]*math.Ceil(U/float64(e.N))
		padMost := c.coll.PadA[k] + c.coll.PadB[k]*U
		grpLeast := c.coll.GrpA[k] + c.coll.GrpB[k]*U
		grpMost := c.coll.GrpA[k]*math.Min(float64(e.N), U) + c.coll.GrpB[k]*U
		paddedWins = paddedWins && padMost <= grpLeast
		groupedWins = groupedWins && grpMost <= padLeast
	}
	switch {
	case paddedWins:
		return methodPadded
	case groupedWins:
		return methodGrouped
	}
	return methodFree
}

// methodOf is the method fixed for making layout index qi of class ti.
func (e *Encoding) methodOf(ti, qi int) methodFix {
	if e.methods == nil {
		return methodFree
	}
	return e.methods[ti][qi]
}

// FixedMethods counts the (tensor class, layout) pairs whose collective
// method pruning fixed, by the method kept (the plan document reports
// their sum).
func (e *Encoding) FixedMethods() (padded, grouped int) {
	for _, ms := range e.methods {
		for _, m := range ms {
			switch m {
			case methodPadded:
				padded++
			case methodGrouped:
				grouped++
			}
		}
	}
	return padded, grouped
}

// MethodFixed reports whether pruning fixed the collective method of
// making layout index qi of tensor class tc, and to which (grouped or
// padded).
func (e *Encoding) MethodFixed(tc, qi int) (grouped, fixed bool) {
	switch e.methodOf(tc, qi) {
	case methodPadded:
		return false, true
	case methodGrouped:
		return true, true
	}
	return false, false
}
