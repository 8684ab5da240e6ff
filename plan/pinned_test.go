package plan

import (
	"math/rand/v2"
	"slices"
	"testing"

	"hap/encode/encodetest"
	"hap/milp"
)

// The pinned MILP's tolerances against Evaluate (encodetest).
const (
	pinnedTolerance    = encodetest.PinnedTolerance
	allToAllGroupOver  = encodetest.AllToAllGroupOver
	pinnedMemoryMargin = encodetest.PinnedMemoryMargin
)

// TestMILPPricesAPinnedChoiceAsEvaluate pins random choices (rules, leaf
// layouts, methods, all-to-alls and lengths, spread evenly within each
// device group as the MILP's decoding spreads them) in the joint MILP and
// checks its objective is Evaluate's step time. The exhaustive test
// compares optima on up to four devices; this one reaches the device
// groups of real clusters: paper-29's nodes of 7, 1, 3, 8, 1, 6, 1 and 2
// GPUs and segments with fewer units than a group has devices, where a
// big M bounded by U instead of the group's ⌈U/size⌉ per device charged
// all-to-alls the program does not make (bert-base-tiny's tp +53%), and
// a grouped collective was charged a call per device of the group rather
// than per non-empty piece. Each case is drawn with near-even lengths and
// again with skewed ones (encodetest.Skewed: one group with every unit or
// most, empty groups beside full ones), which reach the big Ms' and the
// ⌈L/size⌉ columns' extremes that near-even lengths never do.
func TestMILPPricesAPinnedChoiceAsEvaluate(t *testing.T) {
	cases := []struct {
		model, cluster string
		batch          int
	}{
		{"mlp-tiny", "paper-29", 8},
		{"bert-base-tiny", "paper-29", 3},
		{"bert-moe-tiny", "paper-29", 8},
		{"vgg19-tiny", "modern-24", 4},
		{"gpt2-tiny", "paper-16", 6},
	}
	modes := []struct {
		lengths encodetest.Lengths
		rng     *rand.Rand
		choices int // per case: the skewed draws add to the near-even ones, in a few seconds more
	}{
		{encodetest.NearEven, rand.New(rand.NewPCG(11, 29)), 4},
		{encodetest.Skewed, rand.New(rand.NewPCG(11, 30)), 2},
	}
	for _, mode := range modes {
		rng := mode.rng
		for _, a2a := range []bool{false, true} {
			for _, c := range cases {
				_, e := zooEncoding(t, c.model, c.cluster, c.batch)
				for trial, found := 0, 0; trial < 200 && found < mode.choices; trial++ {
					ch := encodetest.RandomChoiceWith(rng, e, mode.lengths)
					if a2a {
						ch.AllToAll = make([]bool, len(e.Tensors))
						for ti := range ch.AllToAll {
							ch.AllToAll[ti] = rng.IntN(2) == 0
						}
					}
					e.SpreadInGroups(ch)
					br, err := e.Evaluate(ch)
					if err != nil {
						continue
					}
					found++
					res, got := encodetest.SolvePinned(t, e, ch)
					if res.Status != milp.Optimal {
						t.Fatalf("%v lengths, %s on %s, trial %d: the pinned MILP ended %s", mode.lengths, c.model, c.cluster, trial, res.Status)
					}
					lo, hi := br.Seconds*(1-pinnedTolerance), br.Seconds*(1+pinnedTolerance)
					if a2a {
						hi = br.Seconds * (1 + allToAllGroupOver)
					}
					if got < lo || got > hi {
						t.Errorf("%v lengths %v, a2a %v %s on %s (batch %d), trial %d: MILP %.7g s, Evaluate %.7g s (%+.3f%%)", mode.lengths, ch.Lengths, a2a, c.model, c.cluster, c.batch, trial, got, br.Seconds, 100*(got/br.Seconds-1))
					}
				}
			}
		}
	}
}

// TestMILPStatesThePeakMemory pins random choices in the joint MILP with
// every device's capacity just above the highest peak Evaluate gives the
// choice, then just below it: the MILP must take the first and refuse the
// second, so its memory rows (the sweep, the held tensors and the whole
// transients of transientTerms) state the peak exactly — not above it,
// which would cut off plans that fit, nor below it, which would let the
// solver pick plans that do not. Random choices of the tiny models make
// every case of wholeTransient (gathers, partial sums, parameters read
// whole) and device groups whose first device holds the most units. The
// skewed draws (encodetest.Skewed) put a whole segment on one group, where
// a device's peak is furthest from the even share's.
func TestMILPStatesThePeakMemory(t *testing.T) {
	cases := []struct {
		model, cluster string
		batch          int
	}{
		{"mlp-tiny", "paper-8", 8},
		{"bert-base-tiny", "paper-29", 3},
		{"vgg19-tiny", "paper-8", 4},
		{"gpt2-tiny", "paper-16", 6},
	}
	modes := []struct {
		lengths encodetest.Lengths
		rng     *rand.Rand
		choices int // per case
	}{
		{encodetest.NearEven, rand.New(rand.NewPCG(7, 31)), 3},
		{encodetest.Skewed, rand.New(rand.NewPCG(7, 32)), 2},
	}
	for _, mode := range modes {
		rng := mode.rng
		for _, c := range cases {
			_, e := zooEncoding(t, c.model, c.cluster, c.batch)
			for trial, found := 0, 0; trial < 200 && found < mode.choices; trial++ {
				ch := encodetest.RandomChoiceWith(rng, e, mode.lengths)
				e.SpreadInGroups(ch)
				br, err := e.Evaluate(ch)
				if err != nil {
					continue
				}
				found++
				peak := slices.Max(br.Memory)
				for _, over := range []bool{true, false} {
					capacity := peak * (1 - pinnedMemoryMargin)
					if over {
						capacity = peak * (1 + pinnedMemoryMargin)
					}
					for d := range e.Capacity {
						e.Capacity[d] = capacity
					}
					if !e.MemoryMayBind() {
						t.Fatalf("%s on %s: capacity %g leaves out the memory rows", c.model, c.cluster, capacity)
					}
					res, _ := encodetest.SolvePinned(t, e, ch)
					if fits := res.Status == milp.Optimal; fits != over {
						t.Errorf("%v lengths %v, %s on %s (batch %d), trial %d: capacity %.6g B against Evaluate's peak %.6g B: the pinned MILP ended %s", mode.lengths, ch.Lengths, c.model, c.cluster, c.batch, trial, capacity, peak, res.Status)
					}
				}
			}
		}
	}
}
