// Package encodetest holds what the tests of several packages (encode,
// solve, plan) do with an Encoding: draw a random choice, and price one
// with the joint MILP pinned to it. It owns no state and imports encode,
// milp and milp/cbc only; no non-test code may import it.
package encodetest

import (
	"context"
	"math/rand/v2"
	"testing"

	"hap/encode"
	"hap/milp"
	"hap/milp/cbc"
)

// Lengths says how a random choice's segment lengths are drawn.
type Lengths int

const (
	// NearEven gives each unit to a device drawn uniformly: a multinomial
	// split, whose lengths lie within a few units of U/N (zeros only
	// where a segment has few units for its devices). It is
	// RandomChoice's draw.
	NearEven Lengths = iota
	// Skewed draws each segment's lengths by SkewedLengths: one device
	// with every unit or most of them, zeros, random compositions. Near-
	// even lengths pad every piece of an uneven collective by a unit or
	// two, so the padded and grouped methods cost about the same there;
	// skewed ones are where the two differ most (a padded all-gather of
	// one long piece and N−1 empty ones moves N long pieces).
	Skewed
)

func (l Lengths) String() string {
	if l == Skewed {
		return "skewed"
	}
	return "near-even"
}

// RandomChoice draws every op class's rule, every leaf's layout, every
// layout's method and every segment's lengths (uneven, some zero; near
// even, NearEven) at random. The draws from rng are part of the contract:
// seeded tests depend on them.
func RandomChoice(rng *rand.Rand, e *encode.Encoding) *encode.Choice {
	return RandomChoiceWith(rng, e, NearEven)
}

// RandomChoiceWith is RandomChoice with the segments' lengths drawn as
// lengths says. With NearEven it makes RandomChoice's draws; with Skewed
// the same draws up to the lengths, then SkewedLengths' for each segment.
func RandomChoiceWith(rng *rand.Rand, e *encode.Encoding, lengths Lengths) *encode.Choice {
	ch := &encode.Choice{Rule: make([]int, len(e.Classes)), Leaf: make([]int, len(e.Tensors)), Grouped: make([][]bool, len(e.Tensors))}
	for ci := range e.Classes {
		ch.Rule[ci] = rng.IntN(len(e.Classes[ci].Rules))
	}
	for ti := range e.Tensors {
		if n := len(e.Tensors[ti].LeafLayouts); n > 0 {
			ch.Leaf[ti] = rng.IntN(n)
		}
		ch.Grouped[ti] = make([]bool, len(e.Layouts(ti)))
		for q := range ch.Grouped[ti] {
			ch.Grouped[ti][q] = rng.IntN(2) == 0
		}
	}
	for _, seg := range e.Segs {
		if lengths == Skewed {
			ch.Lengths = append(ch.Lengths, SkewedLengths(rng, seg.Units, e.N))
			continue
		}
		ls := make([]int, e.N)
		for u := 0; u < seg.Units; u++ {
			ls[rng.IntN(e.N)]++
		}
		ch.Lengths = append(ch.Lengths, ls)
	}
	return ch
}

// SkewedLengths splits units over n devices in one of four shapes, drawn
// evenly: every unit on one device; most of them (at least three
// quarters) on one device and the rest each on a device drawn uniformly;
// a composition drawn uniformly among all splits into n non-negative
// parts (stars and bars: long and empty pieces side by side); or a
// uniform composition over two devices drawn uniformly (one, when the
// draw repeats), the others empty. The device that holds the most is drawn uniformly, so it is not
// always the first of its group. The draws from rng are part of the
// contract: seeded tests depend on them.
func SkewedLengths(rng *rand.Rand, units, n int) []int {
	ls := make([]int, n)
	switch rng.IntN(4) {
	case 0: // one device holds everything
		ls[rng.IntN(n)] = units
	case 1: // one device holds most
		big := rng.IntN(n)
		rest := rng.IntN(units/4 + 1)
		ls[big] = units - rest
		for u := 0; u < rest; u++ {
			ls[rng.IntN(n)]++
		}
	case 2: // a uniform composition of units into n parts
		composeInto(rng, units, ls)
	case 3: // a uniform composition over two devices (one when n is 1)
		a, b := rng.IntN(n), rng.IntN(n)
		pair := make([]int, 2)
		composeInto(rng, units, pair)
		ls[a] += pair[0]
		ls[b] += pair[1]
	}
	return ls
}

// composeInto fills parts with a composition of units drawn uniformly
// among the C(units+k−1, k−1) splits into k = len(parts) non-negative
// parts: k−1 bars placed among units+k−1 slots without repetition, each
// part the stars between two bars.
func composeInto(rng *rand.Rand, units int, parts []int) {
	k := len(parts)
	slots := units + k - 1
	// bars, increasing: a uniform (k−1)-subset of the slots, by
	// selection sampling (each slot kept with probability need/left).
	bars := make([]int, 0, k-1)
	for s, need := 0, k-1; s < slots && need > 0; s++ {
		if rng.IntN(slots-s) < need {
			bars = append(bars, s)
			need--
		}
	}
	prev := -1
	for i, b := range bars {
		parts[i] = b - prev - 1
		prev = b
	}
	parts[k-1] = slots - prev - 1
}

// PinnedTolerance is how far the MILP's objective with a whole choice
// pinned may be from Evaluate's price of it, relative: the two state one
// cost, so only CBC's tolerances (1e-9 primal, in tenths of a
// microsecond) separate them.
const PinnedTolerance = 1e-6

// AllToAllGroupOver is how far above Evaluate the MILP may price a choice
// with all-to-alls: a device group's per-machine sums count each of its
// devices on the machine at ⌈L/size⌉ units (docs/planner.md, known
// limits), above the truth where the remainder leaves some with fewer.
// Measured up to +0.49% (bert-moe-tiny on paper-29); never below.
const AllToAllGroupOver = 0.01

// PinnedMemoryMargin is how far from Evaluate's peak a capacity is put to
// tell the pinned MILP's memory rows apart from it, relative: well above
// CBC's primal tolerance (1e-9 in memory units of a megabyte, where the
// tiny models' peaks are tens of kilobytes) and below any one tensor.
const PinnedMemoryMargin = 1e-4

// SolvePinned solves e's joint MILP with every decision pinned to ch (one
// thread, no heuristics): its objective, in seconds, is the MILP's price
// of ch, which tests hold against Evaluate's.
func SolvePinned(t testing.TB, e *encode.Encoding, ch *encode.Choice) (*milp.Result, float64) {
	t.Helper()
	model, vars := e.MILP()
	return SolvePinnedModel(t, e, model, vars, ch)
}

// SolvePinnedModel is SolvePinned for another of e's models (the
// transport MILP, say).
func SolvePinnedModel(t testing.TB, e *encode.Encoding, model *milp.Model, vars *encode.MILPVars, ch *encode.Choice) (*milp.Result, float64) {
	t.Helper()
	e.Fix(model, vars, ch)
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{Threads: 1, NoHeuristics: true})
	if err != nil {
		t.Fatalf("the pinned MILP: %v", err)
	}
	return res, res.Objective / encode.MILPTimeUnit
}
