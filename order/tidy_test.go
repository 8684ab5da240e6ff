package order

import (
	"context"
	"math/rand"
	"slices"
	"testing"

	"hap/cost"
	"hap/devprog"
	"hap/sim"
)

// reversals is the set of collective pairs p's order issues against its list order.
func reversals(p *devprog.Program) map[devprog.Swap]bool {
	set := map[devprog.Swap]bool{}
	for _, s := range p.Swaps() {
		set[s] = true
	}
	return set
}

// From random orders of random programs, tidy never lengthens the step, only undoes reversals,
// and stops where undoing any collective's remaining reversals (the move it tries) would lengthen
// the step or deadlock.
func TestTidyOnlyUndoesReversalsThatDoNotPay(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(3))
	undone := 0
	for c := 0; c < 80; c++ {
		p := randomProgram(rng, 1+rng.Intn(3), 2+rng.Intn(5), 2+rng.Intn(5))
		order := p.Devices[0].CommStream()
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for d := range p.Devices {
			if len(p.Devices[d].Instrs) > 0 {
				p.Devices[d].CommOrder = slices.Clone(order)
			}
		}
		start, err := sim.Run(p, m)
		if err != nil {
			continue // the shuffle deadlocks
		}
		q, r := tidy(context.Background(), p, m, start, nil)
		if r.StepSeconds > start.StepSeconds {
			t.Fatalf("case %d: tidy lengthened the step %g → %g", c, start.StepSeconds, r.StepSeconds)
		}
		if again, err := sim.Run(q, m); err != nil || again.StepSeconds != r.StepSeconds {
			t.Fatalf("case %d: the tidied program simulates to %v (%v), not %g", c, again, err, r.StepSeconds)
		}
		before, after := reversals(p), reversals(q)
		for s := range after {
			if !before[s] {
				t.Fatalf("case %d: tidy made a new reversal %v", c, s)
			}
		}
		undone += len(before) - len(after)
		// A fixpoint: a second tidy keeps nothing more.
		if q2, _ := tidy(context.Background(), q, m, r, nil); len(reversals(q2)) != len(after) {
			t.Fatalf("case %d: a second tidy undid %d more reversals", c, len(after)-len(reversals(q2)))
		}
	}
	if undone == 0 {
		t.Fatal("no reversal undone: the test does not exercise tidy")
	}
}

// Two independent all-reduces issued against their list order, with nothing to overlap: the
// reversal gains nothing, and tidy issues them in list order again.
func TestTidyRestoresAUselessReversal(t *testing.T) {
	m := testModel(t)
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	for d := range 2 {
		for id := range 2 {
			p.Devices[d].Append(devprog.Instr{Name: "ar", Comm: &devprog.Comm{ID: id, Kind: cost.AllReduce, Group: []int{0, 1}, Counts: []int64{1e6, 1e6}, ElemBytes: 4}})
		}
		p.Devices[d].CommOrder = []int{1, 0}
	}
	start, err := sim.Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	q, r := tidy(context.Background(), p, m, start, nil)
	if q.Devices[0].CommOrder != nil || q.Devices[1].CommOrder != nil || r.StepSeconds != start.StepSeconds {
		t.Fatalf("orders %v %v, step %g → %g; want the list order at the same step", q.Devices[0].CommOrder, q.Devices[1].CommOrder, start.StepSeconds, r.StepSeconds)
	}
}
