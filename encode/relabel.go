package encode

import "hap/spmd"

// onSegment is l with a Gather on segment from put on segment to.
func onSegment(l spmd.Layout, from, to int) spmd.Layout {
	if l.Kind == spmd.Gather && l.Seg == from {
		l.Seg = to
	}
	return l
}

// RuleOnSegment is the index of op class ci's rule that is its rule ri
// with every Gather on segment from put on segment to; ok is false when
// the class has no such rule (the dimension is not that segment's size).
func (e *Encoding) RuleOnSegment(ci, ri, from, to int) (int, bool) {
	rules := e.Classes[ci].Rules
	want := spmd.Rule{In: make([]spmd.Layout, len(rules[ri].In)), Out: make([]spmd.Layout, len(rules[ri].Out))}
	for k, l := range rules[ri].In {
		want.In[k] = onSegment(l, from, to)
	}
	for k, l := range rules[ri].Out {
		want.Out[k] = onSegment(l, from, to)
	}
	for i, r := range rules {
		if r.Equal(want) {
			return i, true
		}
	}
	return 0, false
}

// LeafOnSegment is the index of leaf class ti's layout that is its layout
// li put on segment to if on segment from; ok is false when there is none.
func (e *Encoding) LeafOnSegment(ti, li, from, to int) (int, bool) {
	ls := e.Tensors[ti].LeafLayouts
	want := onSegment(ls[li], from, to)
	for i, l := range ls {
		if l == want {
			return i, true
		}
	}
	return 0, false
}
