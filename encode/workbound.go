package encode

import (
	"fmt"
	"math"

	"hap/milp"
)

// WorkLP is the work relaxation: a small LP whose optimum bounds the step
// of every plan, in every issue order, from compute alone. Each device's
// compute stream runs every op's forward and backward at its rule's share
// of the work, the adds that accumulate gradients at the share of the
// layout they are read in, and every parameter's update at its layout's
// share (timeline.go: T ≥ x_d + U_d, and x_d sums them all). Whatever the
// rules, layouts and lengths, each of those items is split with shares
// that add up to at least 1 over the devices: a segment's lengths add up
// to its units, and a replicated item is whole everywhere. So, with a
// share s_{i,g} ∈ [0, 1] per item i and device group g (a group's
// identical devices take equal shares without loss: averaging an optimum
// over them keeps it one),
//
//	minimise T  subject to  Σ_g |g|·s_{i,g} ≥ 1          for every item i
//	                        Σ_i time(i, g)·s_{i,g} ≤ T    for every group g
//
// (time(i, g) less its fixed part, which each group pays whole on its
// row: OpClass.Fixed) is below every plan's Evaluate cost: the ideal
// compute time, with every item split in the best proportions for the cluster's mix of GPUs and
// communication free. It is far looser than the transport LP (which has
// these rows and the communication too), but it has a few hundred columns
// and solves in milliseconds, so a search stopped by the clock before the
// transport LP finished still proves a bound (solve/bound.go). Its
// objective is in MILP time units (MILPTimeUnit per second).
func (e *Encoding) WorkLP() *milp.Model {
	m := &milp.Model{Sense: milp.Minimize}
	T := m.AddCol(milp.Col{Name: "T", Lower: 0, Upper: math.Inf(1), Obj: 1})
	// stream[g] is group g's compute stream row, filled as items come.
	stream := make([]milp.Row, len(e.Groups))
	for g := range stream {
		stream[g] = milp.Row{Name: fmt.Sprintf("stream_%d", g), Lower: math.Inf(-1), Upper: 0, Coefs: []milp.Coef{{Col: T, Val: -1}}}
	}
	// item adds a work item whose time at share 1 on device d is
	// seconds(d), of which fixed(d) is paid whole whatever the share
	// (OpClass.Fixed: launch overheads and small-kernel fill, which every
	// device pays for its shard's kernels, as Evaluate prices them): the
	// fixed part goes to every group's row as a constant, the rest with
	// its share columns and covering row.
	item := func(name string, seconds, fixed func(d int) float64) {
		for g, devs := range e.Groups {
			stream[g].Upper -= fixed(devs[0]) * milpTime
		}
		for _, devs := range e.Groups {
			if seconds(devs[0])-fixed(devs[0]) == 0 {
				// Free on this group, which could take it whole: the
				// item bounds nothing more.
				return
			}
		}
		cover := milp.Row{Name: "cover_" + name, Lower: 1, Upper: math.Inf(1)}
		for g, devs := range e.Groups {
			s := m.AddCol(milp.Col{Name: fmt.Sprintf("s_%s_%d", name, g), Lower: 0, Upper: 1})
			cover.Coefs = append(cover.Coefs, milp.Coef{Col: s, Val: float64(len(devs))})
			stream[g].Coefs = append(stream[g].Coefs, milp.Coef{Col: s, Val: (seconds(devs[0]) - fixed(devs[0])) * milpTime})
		}
		m.AddRow(cover)
	}
	for ci := range e.Classes {
		c := &e.Classes[ci]
		item(fmt.Sprintf("op%d", ci), func(d int) float64 { return c.Time[d] }, func(d int) float64 { return c.Fixed[d] })
		for ai := range c.Acc {
			a := &c.Acc[ai]
			item(fmt.Sprintf("op%d_acc%d", ci, a.Slot), func(d int) float64 { return a.TimeB[d] }, func(d int) float64 { return a.FixedB[d] })
		}
	}
	for ti := range e.Tensors {
		if t := &e.Tensors[ti]; t.Update != nil {
			item(fmt.Sprintf("update%d", ti), func(d int) float64 { return t.Update[d] }, func(d int) float64 { return t.UpdateFixed[d] })
		}
	}
	for g := range stream {
		m.AddRow(stream[g])
	}
	return m
}
