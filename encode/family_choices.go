package encode

import (
	"fmt"

	"hap/spmd"
)

// ruleChoices adds a binary per (op class, rule), exactly one per class.
// The loss must end as Reduce: its class's other rules are bounded to 0.
func (b *milpBuilder) ruleChoices() {
	e, v := b.e, b.v
	lc := e.LossClass()
	for ci, c := range e.Classes {
		one := lin{}
		v.x = append(v.x, make([]int, len(c.Rules)))
		for ri, r := range c.Rules {
			hi := 1.0
			if ci == lc && r.Out[0] != spmd.R {
				hi = 0 // the loss must end as Reduce
			}
			v.x[ci][ri] = b.col(fmt.Sprintf("x_%d_%d", ci, ri), 0, hi, true)
			one.add(v.x[ci][ri], 1)
		}
		b.row(fmt.Sprintf("one_rule_%d", ci), 1, 1, one)
	}
}

// leafLayouts adds a binary per (leaf tensor class, layout), exactly one
// per class.
func (b *milpBuilder) leafLayouts() {
	e, v := b.e, b.v
	for ti, t := range e.Tensors {
		if t.Producer >= 0 {
			continue
		}
		one := lin{}
		for li := range t.LeafLayouts {
			c := b.col(fmt.Sprintf("y_%d_%d", ti, li), 0, 1, true)
			v.y[ti] = append(v.y[ti], c)
			one.add(c, 1)
		}
		b.row(fmt.Sprintf("one_layout_%d", ti), 1, 1, one)
	}
}
