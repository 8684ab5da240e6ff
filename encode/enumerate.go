package encode

import "hap/spmd"

// This file enumerates the choice space exhaustively: the oracle the
// solver's answers are checked against on small cases (solve's and plan's
// exhaustive tests). It is exponential in the op and leaf classes and in
// the devices; use it on encodings of a few ops and up to four devices.

// MethodApplies reports whether Choice.Grouped[ti][qi] changes what ch
// does: layout qi of tensor class ti is made, under ch, by a collective
// that has a method, an all-gather (a Gather into Identity) or a
// reduce-scatter (Reduce into a Gather, where Identity is not made
// anyway, which would make the Gather a free slice), and the encoding
// left its method free (prune.go). Elsewhere the flag is ignored.
func (e *Encoding) MethodApplies(ch *Choice, ti, qi int) bool {
	if e.methodOf(ti, qi) != methodFree {
		return false
	}
	q := e.Layouts(ti)[qi]
	need := e.Needs(ch, ti)
	h := e.have(ch, ti)
	if !need.Has(q) || q == h {
		return false
	}
	return (h.Kind == spmd.Gather && q.Kind == spmd.Identity) || (h.Kind == spmd.Reduce && q.Kind == spmd.Gather && !need.Has(spmd.I))
}

// Enumerate calls f with every distinct choice of e: every rule of every
// op class (the loss's producing Reduce, as every plan must), every layout
// of every leaf class, both settings of each all-to-all flag that applies
// (AllToAllApplies), both methods of each collective the choice makes
// (MethodApplies), and every split of each segment's units over the
// devices, device by device (not by group). Flags and methods that do not
// apply are left false, so no two calls give the same program and lengths.
// f must not keep ch past its call (Clone it); returning false stops the
// enumeration.
func (e *Encoding) Enumerate(f func(ch *Choice) bool) {
	stopped := false
	ch := &Choice{Rule: make([]int, len(e.Classes)), Leaf: make([]int, len(e.Tensors)), Grouped: make([][]bool, len(e.Tensors)),
		AllToAll: make([]bool, len(e.Tensors)), Lengths: make([][]int, len(e.Segs))}
	for ti := range e.Tensors {
		ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
	}
	var lengths func(s int)
	lengths = func(s int) {
		if s == len(e.Segs) {
			stopped = stopped || !f(ch)
			return
		}
		if stopped {
			return
		}
		compositions(e.Segs[s].Units, e.N, func(p []int) {
			ch.Lengths[s] = p
			lengths(s + 1)
		})
	}
	type bit struct{ t, q int }
	var methods func(bits []bit, i int)
	methods = func(bits []bit, i int) {
		if i == len(bits) {
			lengths(0)
			return
		}
		for _, v := range []bool{false, true} {
			if stopped {
				break
			}
			ch.Grouped[bits[i].t][bits[i].q] = v
			methods(bits, i+1)
		}
		ch.Grouped[bits[i].t][bits[i].q] = false
	}
	// The flags are set first: they decide which collectives are made,
	// and so which have a method.
	var flags func(tcs []int, i int)
	flags = func(tcs []int, i int) {
		if i == len(tcs) {
			var bits []bit
			for ti := range e.Tensors {
				for qi := range e.Layouts(ti) {
					if e.MethodApplies(ch, ti, qi) {
						bits = append(bits, bit{ti, qi})
					}
				}
			}
			methods(bits, 0)
			return
		}
		for _, v := range []bool{false, true} {
			if stopped {
				break
			}
			ch.AllToAll[tcs[i]] = v
			flags(tcs, i+1)
		}
		ch.AllToAll[tcs[i]] = false
	}
	var leaves func(ti int)
	leaves = func(ti int) {
		if ti == len(e.Tensors) {
			var tcs []int
			for tc := range e.Tensors {
				if e.AllToAllApplies(ch, tc) {
					tcs = append(tcs, tc)
				}
			}
			flags(tcs, 0)
			return
		}
		if e.Tensors[ti].Producer >= 0 {
			leaves(ti + 1)
			return
		}
		for li := range e.Tensors[ti].LeafLayouts {
			if stopped {
				return
			}
			ch.Leaf[ti] = li
			leaves(ti + 1)
		}
	}
	lc := e.LossClass()
	var rules func(ci int)
	rules = func(ci int) {
		if ci == len(e.Classes) {
			leaves(0)
			return
		}
		for ri, r := range e.Classes[ci].Rules {
			if stopped {
				return
			}
			if ci == lc && r.Out[0] != spmd.R {
				continue
			}
			ch.Rule[ci] = ri
			rules(ci + 1)
		}
	}
	rules(0)
}

// compositions calls f with every split of units into n non-negative
// parts, in lexicographic order. f must not keep parts.
func compositions(units, n int, f func(parts []int)) {
	parts := make([]int, n)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == n-1 {
			parts[i] = left
			f(parts)
			return
		}
		for v := 0; v <= left; v++ {
			parts[i] = v
			rec(i+1, left-v)
		}
	}
	rec(0, units)
}
