package solve

import "hap/encode"

// tidyMethodRounds caps tidyMethods' sweeps; one flip can make another
// pay (two collectives queued on one stream), so it sweeps again while a
// sweep flips something.
const tidyMethodRounds = 3

// tidyMethods breaks the ties the step time leaves among collective
// methods: it flips a layout change between padded and grouped when the
// flip lowers the communication the step carries (Breakdown.Comm) and
// does not lengthen the step. The solver sees only the step time, so a
// collective the communication stream hides behind compute keeps whatever
// method the search happened to leave it with — GPT-2 on an A100, three
// T4s and a V100 kept 24 padded weight all-gathers (4.23 ms each) where
// grouped costs 3.42 ms, at the same step. Explain then shows the slower
// method chosen with a cheaper alternative beside it, and the plan holds
// less slack than it could for a slower link or a busier network.
//
// ch is not changed. The result prices no worse than ch under Evaluate
// and fits wherever ch fits (Evaluate checks the capacities); it is ch
// itself when nothing flips or ch does not evaluate. Deterministic:
// tensor classes and layouts are tried in index order.
func tidyMethods(e *encode.Encoding, ch *encode.Choice) *encode.Choice {
	br, err := e.Evaluate(ch)
	if err != nil {
		return ch
	}
	seconds, comm := br.Seconds, br.Comm
	ev := e.NewEvaluator()
	c := ch.Clone()
	changed := false
	for round := 0; round < tidyMethodRounds; round++ {
		flipped := false
		for ti := range e.Tensors {
			for qi := range e.Layouts(ti) {
				if !e.MethodApplies(c, ti, qi) {
					continue // a flag no collective reads: no flip changes anything
				}
				e.FlipMethod(c, ti, qi)
				// Less communication by more than improveTolerance: a flip
				// that only reorders equal sums is no improvement.
				if s, err := ev.Seconds(c); err == nil && s <= seconds && ev.Comm() < comm*(1-improveTolerance) {
					seconds, comm, flipped = s, ev.Comm(), true
					continue
				}
				e.FlipMethod(c, ti, qi) // undo
			}
		}
		if !flipped {
			break
		}
		changed = true
	}
	if !changed {
		return ch
	}
	return c
}
