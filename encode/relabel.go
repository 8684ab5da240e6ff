package encode

// onSegment is l with a Gather on segment from put on segment to.
func onSegment(l Layout, from, to int) Layout {
	if l.Kind == Gather && l.Seg == from {
		l.Seg = to
	}
	return l
}

// RuleOnSegment is the index of op class ci's rule that is its rule ri
// with every Gather on segment from put on segment to; ok is false when
// the class has no such rule (the dimension is not that segment's size).
func (e *Encoding) RuleOnSegment(ci, ri, from, to int) (int, bool) {
	rules := e.Classes[ci].Rules
	want := rules[ri]
	for i, r := range rules {
		if len(r.In) != len(want.In) || len(r.Out) != len(want.Out) {
			continue
		}
		same := true
		for k := range r.In {
			same = same && r.In[k] == onSegment(want.In[k], from, to)
		}
		for k := range r.Out {
			same = same && r.Out[k] == onSegment(want.Out[k], from, to)
		}
		if same {
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
