package solve

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"hap/cluster/clustertest"
	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/spmd"
)

// exactTolerance: the MILP and the enumerator price choices with the same
// coefficients; they may differ only by the solver's tolerances. CBC
// proves optimality up to its LP feasibility and pruning tolerances: with
// the timeline's definition rows, one case in 200 (a 60 µs step) stopped
// 2.5e-4 µs (4e-6 relative) above the enumerated optimum.
const exactTolerance = 1e-5

// evaluatorCheckEvery: the enumerator checks one price in this many of its
// reused Evaluator against Evaluate (a prime, so that the checks fall on
// every kind of choice).
const evaluatorCheckEvery = 61

// smallCluster is n devices of random types on one or two nodes.
func smallCluster(t testing.TB, rng *rand.Rand, n int) *cost.Model {
	c, err := clustertest.Small(rng, n)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// smallGraph is a random chain of two ops on parameters ending in a loss.
func smallGraph(rng *rand.Rand) *ir.Graph { return smallGraphOf(rng, 3) }

// smallGraphOf is smallGraph with the input's features and the weight's
// rows k wide: a large k makes the weight's collectives move bytes rather
// than wait on latency, while the segments stay small enough to enumerate.
func smallGraphOf(rng *rand.Rand, k int) *ir.Graph {
	b := ir.NewBuilder("small", ir.Float32)
	batch := 2 + rng.IntN(2)
	width := 2 + rng.IntN(2)
	x := b.Input("x", ir.Float32, batch, k)
	h := x
	switch rng.IntN(3) {
	case 0:
		h = b.MatMul(x, b.Param("w", k, width))
	case 1:
		h = b.ReLU(b.MatMul(x, b.Param("w", k, width)))
	case 2:
		h = b.Bias(b.MatMul(x, b.Param("w", k, width)), b.Param("b", width))
	}
	if rng.IntN(2) == 0 {
		h = b.GELU(h)
	}
	loss := b.CrossEntropy(h, b.Label("y", batch))
	g, err := b.Finish(loss)
	if err != nil {
		panic(err)
	}
	return g
}

// enumerate finds the cheapest choice of e (encode.Enumerate: every rule,
// leaf layout, all-to-all flag, integer length and, for each collective
// the choice actually makes, both methods).
//
// It prices with one reused Evaluator, and checks every evaluatorCheckEvery-th
// price against a fresh Evaluate (which shares no memory between calls).
func enumerate(t testing.TB, e *encode.Encoding) (float64, *encode.Choice) {
	ev := e.NewEvaluator()
	priced := 0
	best := math.Inf(1)
	var bestCh *encode.Choice
	e.Enumerate(func(ch *encode.Choice) bool {
		sec, err := ev.Seconds(ch)
		if priced++; priced%evaluatorCheckEvery == 0 {
			br, err2 := e.Evaluate(ch)
			if (err == nil) != (err2 == nil) || (err == nil && br.Seconds != sec) {
				t.Fatalf("Evaluator.Seconds = %v, %v; Evaluate = %+v, %v on %+v", sec, err, br, err2, ch)
			}
		}
		if err == nil && sec < best-1e-15 {
			best = sec
			bestCh = ch.Clone()
		}
		return true
	})
	return best, bestCh
}

// The solver's plan is optimal: on random small cases (a few ops, up to 4
// devices of mixed types on one or two nodes, small dims) its cost equals
// the minimum over every rule, layout, method and integer length. So does
// the transport MILP's, whose LP stays below it (checkTransport).
func TestSynthesisMatchesExhaustiveEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// Coverage: optima that pick each method for some collective, and optima
	// whose two segments are cut with different lengths.
	var usedGrouped, usedPadded, usedAllToAll, distinctRatios int
	tighter := 0 // cases whose transport LP is tighter than the plain one
	pruned := 0  // cases where pruning fixed some collective's method
	cases := 200
	if testing.Short() {
		cases = 20
	}
	for i := 0; i < cases; i++ {
		g := smallGraph(rng)
		n := 1 + rng.IntN(4)
		if n == 4 && rng.IntN(2) == 0 {
			n = 3
		}
		m := smallCluster(t, rng, n)
		batch := g.Tensors[0].Shape[0]
		segs := []spmd.Segment{{Name: "batch", Units: batch}}
		if w := g.Tensors[g.TensorsOfKind(ir.Param)[0]].Shape[1]; w != batch && n <= 3 {
			segs = append(segs, spmd.Segment{Name: "width", Units: w})
		}
		// Every other case leaves all-to-all out, so that the optima
		// still pick grouped and padded all-gathers, which all-to-all
		// would otherwise replace in most of these small cases.
		res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.SGD(0.1), Segments: segs, NoGroup: true, NoAllToAll: i%2 == 0})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// The oracle enumerates the encoding without pruning
		// (encode/prune.go): the equality below also proves that pruning
		// kept the optimum.
		full, err := encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: ir.SGD(0.1), NoGroup: true, NoAllToAll: i%2 == 0, NoPrune: true})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if p, g := res.Encoding.FixedMethods(); p+g > 0 {
			pruned++
		}
		want, wantCh := enumerate(t, full)
		got := res.Estimate.Seconds
		if math.Abs(got-want) > exactTolerance*math.Max(want, 1e-9) {
			t.Errorf("case %d (%d devices, %d ops, segs %v): solver %.9g (MILP objective %.9g), enumeration %.9g (solver %+v, best %+v)", i, n, len(g.Ops), segs, got, res.Objective, want, res.Choice, wantCh)
		}
		if res.Status != "optimal" {
			t.Errorf("case %d: status %s", i, res.Status)
		}
		if checkTransport(t, i, res.Encoding, want, res.Choice) {
			tighter++
		}
		for _, in := range res.Program.Instrs {
			if in.Collective == ir.OpAllToAll {
				usedAllToAll++
			}
			switch in.Method {
			case spmd.MethodGrouped:
				usedGrouped++
			case spmd.MethodPadded:
				usedPadded++
			}
		}
		if ls := res.Choice.Lengths; len(ls) == 2 && !proportional(ls[0], ls[1]) {
			distinctRatios++
		}
	}
	t.Logf("optima: %d grouped and %d padded collectives, %d all-to-alls; %d with two segments cut differently; %d with a tighter transport LP; %d with methods fixed by pruning", usedGrouped, usedPadded, usedAllToAll, distinctRatios, tighter, pruned)
	// No optimum here picks the grouped method: at three quarters of a
	// ring's bandwidth per root (cost.GroupedBandwidthEfficiency) and a
	// latency per root, it beats padding only where the pieces sum to
	// under 0.75·(p−1) times the largest ([0, 0, 1, 2] on four devices),
	// a split these optima never make. Its pricing is checked where it
	// must be, on pinned choices that use it
	// (encode.TestEveryMILPFamilyPricesAsEvaluate), and TestTidyMethods
	// has optima that pick it.
	if !testing.Short() && (usedPadded == 0 || usedAllToAll == 0 || distinctRatios == 0 || tighter == 0 || pruned == 0) {
		t.Errorf("the cases no longer exercise per-collective methods and per-segment ratios")
	}
}

// The solver's plan is optimal over the plans it can express when
// identical devices are grouped (encode's default: a group's units spread
// evenly over its devices, the remainder one each to its first devices),
// as TestSynthesisMatchesExhaustiveEnumeration, which ungroups them, checks
// without groups: on random small cases of two to four devices with at
// least one group of two or more (devices of one type on a node, or on
// both nodes), its cost equals the minimum the enumeration finds over the
// choices whose lengths are so spread (Encoding.SpreadInGroups leaves them
// as they are), and so does the transport MILP's (checkTransport). The
// grouped optimum is never below the ungrouped one, the minimum over every
// split.
func TestSynthesisWithDeviceGroupsMatchesExhaustiveEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	cases := 40
	if testing.Short() {
		cases = 8
	}
	// Coverage: cases with a group of several devices, optima that give
	// such a group units (spread, and with a remainder), and cases where
	// grouping costs something (the best split spreads a group unevenly).
	var grouped, holding, remainder, dearer int
	for i := 0; i < cases; i++ {
		g := smallGraph(rng)
		n := 2 + rng.IntN(3)
		m := smallCluster(t, rng, n)
		batch := g.Tensors[0].Shape[0]
		segs := []spmd.Segment{{Name: "batch", Units: batch}}
		if w := g.Tensors[g.TensorsOfKind(ir.Param)[0]].Shape[1]; w != batch && n <= 3 {
			segs = append(segs, spmd.Segment{Name: "width", Units: w})
		}
		noA2A := i%2 == 0 // as the ungrouped test, so that both methods still win
		full, err := encode.Encode(g, segs, m, encode.EncodeOptions{Optimizer: ir.SGD(0.1), NoAllToAll: noA2A, NoPrune: true})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(full.Groups) == n {
			continue // every device its own group: the ungrouped test's case
		}
		grouped++
		res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.SGD(0.1), Segments: segs, NoAllToAll: noA2A})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if len(res.Encoding.Groups) != len(full.Groups) {
			t.Fatalf("case %d: the solver's encoding has %d device groups, the oracle's %d", i, len(res.Encoding.Groups), len(full.Groups))
		}
		want, wantCh, every := enumerateSpread(t, full)
		got := res.Estimate.Seconds
		if math.Abs(got-want) > exactTolerance*math.Max(want, 1e-9) {
			t.Errorf("case %d (%d devices in groups %v, %d ops, segs %v): solver %.9g (MILP objective %.9g), enumeration over spread lengths %.9g (solver %+v, best %+v)", i, n, full.Groups, len(g.Ops), segs, got, res.Objective, want, res.Choice, wantCh)
		}
		if res.Status != "optimal" {
			t.Errorf("case %d: status %s", i, res.Status)
		}
		if want < every*(1-exactTolerance) {
			t.Errorf("case %d: the best spread split costs %.9g s, below the best of every split, %.9g s", i, want, every)
		}
		if want > every*(1+exactTolerance) {
			dearer++
		}
		checkTransport(t, i, res.Encoding, want, res.Choice)
		for s := range segs {
			for gi, devs := range full.Groups {
				if len(devs) < 2 {
					continue
				}
				total := full.GroupTotal(res.Choice.Lengths[s], gi)
				if total > 0 {
					holding++
				}
				if total%len(devs) != 0 {
					remainder++
				}
			}
		}
	}
	t.Logf("%d of %d cases with a group of several devices; optima: %d segment cuts giving such a group units, %d with a remainder; cases where grouping costs time: %d", grouped, cases, holding, remainder, dearer)
	// Cases where grouping costs time are counted, not required: under
	// the calibrated cost model (issue 69) none of these cases has one
	// (nor any of 106 in 120 drawn to look for one), since each device
	// pays its kernels' launches whole and an uneven split of identical
	// devices saves none of it; before, some had.
	if !testing.Short() && (grouped < cases/2 || holding == 0 || remainder == 0) {
		t.Errorf("the cases no longer exercise device groups")
	}
}

// enumerateSpread is enumerate over the choices of e whose lengths each
// device group holds evenly, the remainder on its first devices (the
// choices the MILP can express: SpreadInGroups leaves their lengths
// unchanged), with the minimum over every choice beside it.
func enumerateSpread(t testing.TB, e *encode.Encoding) (best float64, bestCh *encode.Choice, every float64) {
	ev := e.NewEvaluator()
	best, every = math.Inf(1), math.Inf(1)
	spread := &encode.Choice{}
	e.Enumerate(func(ch *encode.Choice) bool {
		sec, err := ev.Seconds(ch)
		if err != nil {
			return true
		}
		every = math.Min(every, sec)
		spread.Lengths = spread.Lengths[:0]
		for _, ls := range ch.Lengths {
			spread.Lengths = append(spread.Lengths, slices.Clone(ls))
		}
		e.SpreadInGroups(spread)
		for s := range ch.Lengths {
			if !slices.Equal(spread.Lengths[s], ch.Lengths[s]) {
				return true
			}
		}
		if sec < best-1e-15 {
			best = sec
			bestCh = ch.Clone()
		}
		return true
	})
	return best, bestCh, every
}

// proportional reports whether two length vectors split their totals in
// the same ratios.
func proportional(a, b []int) bool {
	ta, tb := 0, 0
	for i := range a {
		ta, tb = ta+a[i], tb+b[i]
	}
	for i := range a {
		if a[i]*tb != b[i]*ta {
			return false
		}
	}
	return true
}

// tiedGraph reads one weight in two blocks, as GPT-2's decoder reads its
// token embedding: h = (x·w + b)·w, so w's second reader comes after b's
// first.
func tiedGraph(batch int) *ir.Graph {
	b := ir.NewBuilder("tied", ir.Float32)
	x := b.Input("x", ir.Float32, batch, 3)
	w := b.Param("w", 3, 3)
	h := b.MatMul(b.Bias(b.MatMul(x, w), b.Param("b", 3)), w)
	g, err := b.Finish(b.CrossEntropy(h, b.Label("y", batch)))
	if err != nil {
		panic(err)
	}
	return g
}

// A leaf read in two blocks has its layout change placed at the first
// reader that needs it, in Evaluate and in the MILP alike (the timeline's
// spread leaves): on random clusters of two and three devices the MILP's
// optimum is the enumerated one, and the transport LP, whose charge rows
// make some reader pay the leaf's change, stays at or below it
// (checkTransport).
func TestTiedWeightMatchesExhaustiveEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for i := 0; i < 8; i++ {
		g := tiedGraph(2 + rng.IntN(2))
		m := smallCluster(t, rng, 2+rng.IntN(2))
		res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.SGD(0.1), NoGroup: true, NoAllToAll: true})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		want, wantCh := enumerate(t, res.Encoding)
		if got := res.Estimate.Seconds; math.Abs(got-want) > exactTolerance*want {
			t.Errorf("case %d: solver %.9g (MILP objective %.9g), enumeration %.9g (solver %+v, best %+v)", i, got, res.Objective, want, res.Choice, wantCh)
		}
		if res.Status != "optimal" {
			t.Errorf("case %d: status %s", i, res.Status)
		}
		checkTransport(t, i, res.Encoding, want, res.Choice)
	}
}
