package solve

import (
	"slices"

	"hap/encode"
	"hap/spmd"
)

// segmentUsers are the op classes and leaf classes of a choice that
// split something by one segment, joined into components: two are joined
// when a tensor class passes from one to the other in a Gather on that
// segment (made so by one, read so by the other). A component can move to
// another segment as a whole — every Gather of it on the segment put on
// the other — and stay a valid program with the same conversions between
// its members; a single rule or leaf moved alone would instead add an
// all-to-all or gather at each of its edges. That whole move is what
// LocalSearch's single and paired moves cannot make: on bert-base
// paper-16 the embedding, its bias and its two tables, split by heads,
// pay only once all four move to the 768-wide segment together.
type segmentUsers struct {
	ops, leaves []int
}

// segmentComponents are the components of ch's use of segment s, in a
// deterministic order (by their lowest op class, then leaf class).
func segmentComponents(e *encode.Encoding, ch *encode.Choice, s int) []segmentUsers {
	nc := len(e.Classes)
	// Nodes: op classes 0..nc−1, leaf classes nc+ti.
	parent := make([]int, nc+len(e.Tensors))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		if a, b = find(a), find(b); a != b {
			parent[max(a, b)] = min(a, b)
		}
	}
	on := func(l spmd.Layout) bool { return l.Kind == spmd.Gather && l.Seg == s }
	uses := make([]bool, len(parent))
	for ci, c := range e.Classes {
		r := c.Rules[ch.Rule[ci]]
		uses[ci] = slices.ContainsFunc(r.In, on) || slices.ContainsFunc(r.Out, on)
	}
	for ti := range e.Tensors {
		t := &e.Tensors[ti]
		// The node that makes the tensor on s, if any.
		maker := -1
		if t.Producer < 0 {
			if on(t.LeafLayouts[ch.Leaf[ti]]) {
				maker, uses[nc+ti] = nc+ti, true
			}
		} else if on(e.Classes[t.Producer].Rules[ch.Rule[t.Producer]].Out[t.OutIdx]) {
			maker = t.Producer
		}
		if maker < 0 {
			continue
		}
		for _, cs := range t.Consumers {
			if on(e.Classes[cs[0]].Rules[ch.Rule[cs[0]]].In[cs[1]]) {
				union(maker, cs[0])
			}
		}
	}
	index := map[int]int{}
	var out []segmentUsers
	for n, u := range uses {
		if !u {
			continue
		}
		root := find(n)
		k, ok := index[root]
		if !ok {
			k = len(out)
			index[root] = k
			out = append(out, segmentUsers{})
		}
		if n < nc {
			out[k].ops = append(out[k].ops, n)
		} else {
			out[k].leaves = append(out[k].leaves, n-nc)
		}
	}
	return out
}

// moveComponent puts component u of ch's use of segment from on segment
// to, in place, and returns the move's undo; ok is false (and ch
// unchanged) when one of its members has no such rule or layout.
func moveComponent(e *encode.Encoding, ch *encode.Choice, u segmentUsers, from, to int) (undo func(), ok bool) {
	rules := make([]int, len(u.ops))
	leaves := make([]int, len(u.leaves))
	for i, ci := range u.ops {
		r, ok := e.RuleOnSegment(ci, ch.Rule[ci], from, to)
		if !ok {
			return nil, false
		}
		rules[i] = r
	}
	for i, ti := range u.leaves {
		l, ok := e.LeafOnSegment(ti, ch.Leaf[ti], from, to)
		if !ok {
			return nil, false
		}
		leaves[i] = l
	}
	// Swap: rules and leaves then hold the old values, for the undo.
	swap := func() {
		for i, ci := range u.ops {
			ch.Rule[ci], rules[i] = rules[i], ch.Rule[ci]
		}
		for i, ti := range u.leaves {
			ch.Leaf[ti], leaves[i] = leaves[i], ch.Leaf[ti]
		}
	}
	swap()
	return swap, true
}
