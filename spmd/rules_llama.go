package spmd

import "hap/ir"

// attentionRules: q, k, v (and the output) split alike on any batch dim;
// with grouped-query attention the head dim (r−3) is a batch dim too, cut
// on a segment whose units divide the key/value heads, so that every
// device holds whole groups — its q heads are exactly those its k and v
// heads serve (Fits refuses a segment that divides only the query heads).
// A mask [S,T] is the same for every batch slice, so it stays whole under
// those splits and is cut with the queries under split-queries (not with
// a causal flag, whose mask follows absolute positions).
func attentionRules(a *ir.Attrs, nIn, r int, add func(string, []Layout, []Layout), segs []Segment) {
	withMask := func(l []Layout, m Layout) []Layout {
		if nIn == 4 {
			return append(l, m)
		}
		return l
	}
	for d := 0; d < r-2; d++ {
		name := "split-batch"
		if a.KVGroup > 1 && d == r-3 {
			name = "split-kv-heads"
		}
		for s := range segs {
			add(name, withMask(repeat(G(d, s), 3), I), []Layout{G(d, s)})
		}
	}
	if !a.Causal {
		for s := range segs {
			add("split-queries", withMask([]Layout{G(r-2, s), I, I}, G(0, s)), []Layout{G(r-2, s)})
		}
	}
}

// rotaryRules: x splits on any dim before the positions with the tables
// whole (batch, heads), and on the positions with the tables cut alike
// (row i of x reads row i of cos and sin); never on the rotated dim, whose
// halves mix. Rotary is linear in x, so a partial sum passes through.
func rotaryRules(r int, add func(string, []Layout, []Layout), segs []Segment) {
	for s := range segs {
		for d := 0; d < r-2; d++ {
			add("split", []Layout{G(d, s), I, I}, []Layout{G(d, s)})
		}
		add("split-positions", []Layout{G(r-2, s), G(0, s), G(0, s)}, []Layout{G(r-2, s)})
	}
	add("partial", []Layout{R, I, I}, []Layout{R})
}
