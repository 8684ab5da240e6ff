package solve

import (
	"slices"

	"hap/encode"
	"hap/spmd"
)

// A chain is a run of op classes moved from one split to another
// together. It starts with one op class's rule changed; then, across each
// tensor class whose layouts no longer agree (made in one, read in
// another), the op class on the other side takes the first of its rules
// that agrees, and so on, breadth first, until every edge agrees or the
// next op class has no such rule. A chain does not cross into op classes
// repeated a different number of times (the embedding's ops and the
// layers' ops tied twelve times): a run inside the layers is one pattern,
// and a run from the embedding into them changed every layer's rule with
// it (on ViT, to a plan 4.7× slower).
//
// LocalSearch prices the prefixes of a chain in order, each rule with the
// leaves it reads set to the layout it reads them in where they may be
// made so, until one is chainSlack dearer, and keeps the cheapest if it
// improves: the run is then converted once, where the prefix ends, rather
// than at every op. Single and paired moves cannot make it, since each
// rule changed alone adds a conversion on each side. ViT on a100-8 (batch
// 32): the patch embedding's nine op classes (convolution, bias, reshape,
// permute, slice, class token, concatenation, position bias) split by
// samples; each changed alone costs 0.6–2% more, and its first k changed
// together for k < 9 cost 0.07–0.8% more, but all nine split by
// channels, with the weights they read, make the step 0.66% shorter.

// chainGraph is which tensor classes each op class reads and makes: the
// edges a chain follows.
type chainGraph struct {
	// reads[ci][slot] are the tensor classes op class ci reads at slot
	// (a tied op may read different ones in different layers).
	reads [][][]int
	// makes[ci] are the tensor classes op class ci makes.
	makes [][]int
}

// chainStep is one op class of a chain and the rule it takes.
type chainStep struct{ class, rule int }

func newChainGraph(e *encode.Encoding) *chainGraph {
	g := &chainGraph{reads: make([][][]int, len(e.Classes)), makes: make([][]int, len(e.Classes))}
	for ci, c := range e.Classes {
		n := 0
		for _, r := range c.Rules {
			n = max(n, len(r.In))
		}
		g.reads[ci] = make([][]int, n)
	}
	for ti, t := range e.Tensors {
		if t.Producer >= 0 {
			g.makes[t.Producer] = append(g.makes[t.Producer], ti)
		}
		for _, cs := range t.Consumers {
			if s := g.reads[cs[0]]; cs[1] < len(s) && !slices.Contains(s[cs[1]], ti) {
				s[cs[1]] = append(s[cs[1]], ti)
			}
		}
	}
	return g
}

// chain is the chain that starts with op class ci taking rule r in ch, in
// the order it reaches the op classes (ci first). ch is left as it was.
func (g *chainGraph) chain(e *encode.Encoding, ch *encode.Choice, ci, r int) []chainStep {
	steps := []chainStep{{ci, r}}
	taken := map[int]int{ci: r} // op class → the rule the chain gives it
	// ruleOf is op class c's rule: the chain's where it gave one, else ch's.
	ruleOf := func(c int) spmd.Rule {
		if k, ok := taken[c]; ok {
			return e.Classes[c].Rules[k]
		}
		return e.Classes[c].Rules[ch.Rule[c]]
	}
	times := len(e.Classes[ci].Ops)
	// follow gives op class cj its first rule for which agrees holds, if
	// it has one and the chain has not reached it yet.
	follow := func(cj int, agrees func(spmd.Rule) bool) {
		if _, done := taken[cj]; done || len(e.Classes[cj].Ops) != times {
			return
		}
		for k, o := range e.Classes[cj].Rules {
			if agrees(o) {
				taken[cj] = k
				steps = append(steps, chainStep{cj, k})
				return
			}
		}
	}
	for i := 0; i < len(steps); i++ {
		c := steps[i].class
		cr := ruleOf(c)
		for _, ti := range g.makes[c] { // downstream: who reads what c makes
			t := &e.Tensors[ti]
			made := cr.Out[t.OutIdx]
			for _, cs := range t.Consumers {
				cj, slot := cs[0], cs[1]
				if ruleOf(cj).In[slot] != made {
					follow(cj, func(o spmd.Rule) bool { return o.In[slot] == made })
				}
			}
		}
		for slot, tcs := range g.reads[c] { // upstream: who makes what c reads
			want := cr.In[slot]
			for _, ti := range tcs {
				t := &e.Tensors[ti]
				if p, out := t.Producer, t.OutIdx; p >= 0 && ruleOf(p).Out[out] != want {
					follow(p, func(o spmd.Rule) bool { return o.Out[out] == want })
				}
			}
		}
	}
	return steps
}

// apply makes step s in ch: its rule, and each leaf class the rule reads
// set to the layout it reads it in where that is one of the leaf's
// layouts. It records what it changed in undo.
func (g *chainGraph) apply(e *encode.Encoding, ch *encode.Choice, s chainStep, undo *chainUndo) {
	undo.rules = append(undo.rules, chainStep{s.class, ch.Rule[s.class]})
	ch.Rule[s.class] = s.rule
	in := e.Classes[s.class].Rules[s.rule].In
	for slot, tcs := range g.reads[s.class] {
		for _, ti := range tcs {
			t := &e.Tensors[ti]
			if t.Producer >= 0 {
				continue
			}
			if l := slices.Index(t.LeafLayouts, in[slot]); l >= 0 && l != ch.Leaf[ti] {
				undo.leaves = append(undo.leaves, [2]int{ti, ch.Leaf[ti]})
				ch.Leaf[ti] = l
			}
		}
	}
}

// chainUndo is what a chain's prefix changed, in order.
type chainUndo struct {
	rules  []chainStep // op class, its rule before
	leaves [][2]int    // leaf class, its layout before
}

// chainMark is how much a chainUndo had recorded at some point.
type chainMark struct{ rules, leaves int }

// mark is what u has recorded so far, for restoreTo.
func (u *chainUndo) mark() chainMark { return chainMark{len(u.rules), len(u.leaves)} }

// restoreTo undoes what was recorded after m, latest first, and forgets it.
func (u *chainUndo) restoreTo(ch *encode.Choice, m chainMark) {
	for i := len(u.leaves) - 1; i >= m.leaves; i-- {
		ch.Leaf[u.leaves[i][0]] = u.leaves[i][1]
	}
	for i := len(u.rules) - 1; i >= m.rules; i-- {
		ch.Rule[u.rules[i].class] = u.rules[i].rule
	}
	u.rules, u.leaves = u.rules[:m.rules], u.leaves[:m.leaves]
}

// restore undoes everything recorded, latest first, and clears it.
func (u *chainUndo) restore(ch *encode.Choice) { u.restoreTo(ch, chainMark{}) }
