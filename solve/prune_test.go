package solve

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"hap/encode"
	"hap/encode/encodetest"
	"hap/ir"
	"hap/spmd"
)

// Pruning keeps every program's best price, not only the optimum's: on
// random small cases of two, six and eight devices, whose segments of two
// and three units are shorter than the larger clusters (where padding
// costs most) and whose weights are wide enough on half of them for the
// collectives to move bytes rather than wait on latency, the cheapest methods for each program — its rules,
// leaf layouts, all-to-all flags and lengths — price the same with the
// dominated methods fixed (encode/prune.go) as with both methods free.
// The exhaustive optimum test (TestSynthesisMatchesExhaustiveEnumeration)
// checks the solver; this checks pruning itself on every program, so a
// wrong fix shows even where no optimum makes the collective it fixed.
func TestPruningKeepsEveryProgramsBestPrice(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	cases := 40
	if testing.Short() {
		cases = 8
	}
	var fixed, fixedGrouped, fixedPadded, programs, methodMattered, usedFixed, pinned int
	for i := 0; i < cases; i++ {
		g := smallGraphOf(rng, []int{3, 1 << 16}[rng.IntN(2)])
		n := []int{2, 6, 8}[rng.IntN(3)]
		m := smallCluster(t, rng, n)
		segs := []spmd.Segment{{Name: "batch", Units: g.Tensors[0].Shape[0]}}
		if w := g.Tensors[g.TensorsOfKind(ir.Param)[0]].Shape[1]; w != segs[0].Units && n == 2 {
			segs = append(segs, spmd.Segment{Name: "width", Units: w})
		}
		opt := encode.EncodeOptions{Optimizer: ir.SGD(0.1), NoGroup: true, NoAllToAll: i%2 == 0}
		pruned, err := encode.Encode(g, segs, m, opt)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		opt.NoPrune = true
		full, err := encode.Encode(g, segs, m, opt)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		padded, grouped := pruned.FixedMethods()
		if padded+grouped == 0 {
			continue
		}
		fixed++
		fixedPadded += padded
		fixedGrouped += grouped
		best := func(e *encode.Encoding) (lo, hi map[string]float64) {
			lo, hi = map[string]float64{}, map[string]float64{}
			ev := e.NewEvaluator()
			e.Enumerate(func(ch *encode.Choice) bool {
				sec, err := ev.Seconds(ch)
				if err != nil {
					return true
				}
				k := fmt.Sprint(ch.Rule, ch.Leaf, ch.AllToAll, ch.Lengths)
				if v, ok := lo[k]; !ok || sec < v {
					lo[k] = sec
				}
				if v, ok := hi[k]; !ok || sec > v {
					hi[k] = sec
				}
				return true
			})
			return lo, hi
		}
		want, dearest := best(full)
		got, _ := best(pruned)
		// The MILP prices programs that make a collective whose method
		// was fixed as Evaluate does (the rows pruning leaves: the kept
		// method's alone, no binary), checked on a sample of them.
		var sample []*encode.Choice
		seen := 0
		pruned.Enumerate(func(ch *encode.Choice) bool {
			if _, err := pruned.Evaluate(ch); err != nil || fixedCollectives(pruned, full, ch) == 0 {
				return true
			}
			if seen++; len(sample) < pinnedSample {
				sample = append(sample, ch.Clone())
			} else if j := rng.IntN(seen); j < pinnedSample {
				sample[j] = ch.Clone()
			}
			return true
		})
		for _, ch := range sample {
			br, _ := pruned.Evaluate(ch)
			if _, p := encodetest.SolvePinned(t, pruned, ch); math.Abs(p-br.Seconds) > exactTolerance*br.Seconds {
				t.Errorf("case %d (%d devices, segs %v): the MILP prices %+v at %.9g s, Evaluate at %.9g s", i, n, segs, ch, p, br.Seconds)
			}
			pinned++
		}
		if len(got) != len(want) {
			t.Fatalf("case %d: %d programs priced pruned, %d unpruned", i, len(got), len(want))
		}
		// The solver, which sees the pruned encoding only, finds the
		// unpruned optimum.
		optimum := math.Inf(1)
		for _, w := range want {
			optimum = math.Min(optimum, w)
		}
		res, err := Synthesize(context.Background(), g, m, Options{Optimizer: opt.Optimizer, Segments: segs, NoGroup: true, NoAllToAll: opt.NoAllToAll})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got := res.Estimate.Seconds; math.Abs(got-optimum) > exactTolerance*optimum || math.Abs(res.Objective-optimum) > exactTolerance*optimum || res.Status != "optimal" {
			t.Errorf("case %d (%d devices, segs %v): solver %s at %.9g s (MILP objective %.9g), enumeration %.9g s", i, n, segs, res.Status, got, res.Objective, optimum)
		}
		usedFixed += fixedCollectives(res.Encoding, full, res.Choice)
		for k, w := range want {
			programs++
			if dearest[k] > w*(1+exactTolerance) {
				methodMattered++
			}
			if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-12*w {
				t.Fatalf("case %d (%d devices, segs %v): program %s costs %.12g s at best unpruned, %.12g s pruned", i, n, segs, k, w, g)
			}
		}
	}
	t.Logf("%d of %d cases pruned (%d methods fixed grouped, %d padded); %d programs, %d of them with a method that changes their price; the optima make %d collectives whose method was fixed; %d programs making such collectives priced by the pinned MILP", fixed, cases, fixedGrouped, fixedPadded, programs, methodMattered, usedFixed, pinned)
	if fixedGrouped == 0 || fixedPadded == 0 || methodMattered == 0 || usedFixed == 0 || pinned == 0 {
		t.Errorf("the cases no longer exercise pruning")
	}
}

// pinnedSample is how many choices making a fixed-method collective each
// case prices with the pinned MILP.
const pinnedSample = 6

// fixedCollectives counts the collectives ch makes with a method pruning
// fixed in e; full is the same encoding unpruned, whose MethodApplies
// says which collectives a choice makes with a method.
func fixedCollectives(e, full *encode.Encoding, ch *encode.Choice) int {
	n := 0
	for ti := range e.Tensors {
		for qi := range e.Layouts(ti) {
			if _, ok := e.MethodFixed(ti, qi); ok && full.MethodApplies(ch, ti, qi) {
				n++
			}
		}
	}
	return n
}
