package encode_test

import (
	"math/rand/v2"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/encode/encodetest"
	"hap/models"
	"hap/spmd"
)

// pruneTolerance: a pruned encoding prices a choice with the same
// coefficients as the full one, only with the dominated method swapped
// for the kept one; the two may differ by float rounding alone.
const pruneTolerance = 1e-12

// bertSegments are the candidate segments of BERT-shaped models (what
// solve.CandidateSegments derives), for a batch of the given size.
func bertSegments(batch, heads, hidden, ffn int) []spmd.Segment {
	return []spmd.Segment{{Name: "batch", Units: batch}, {Name: "heads", Units: heads}, {Name: "hidden", Units: hidden}, {Name: "ffn", Units: ffn}}
}

// Pruning only ever swaps a collective's method for one that costs no
// more: on random programs and uneven lengths (near-even ones, then
// skewed ones, encodetest.Skewed, where padding costs most), a pruned
// encoding prices every choice at most what the full one does, and
// exactly the same once the choice itself picks the kept methods.
func TestPrunedMethodsAreNeverDearer(t *testing.T) {
	cases := []struct {
		model, cluster string
		batch          int
		segs           []spmd.Segment
		wantFixed      bool
	}{
		// 64 GPUs over 2 heads and a 16-wide hidden: the padded pieces of
		// most layouts are mostly padding.
		{"bert-base-tiny", "paper-64", 64, bertSegments(64, 2, 16, 32), true},
		{"bert-base-tiny", "paper-8", 16, bertSegments(16, 2, 16, 32), false},
	}
	// One generator per way of drawing lengths, so that the near-even
	// draws stay what they were before the skewed ones were added.
	rngs := []*rand.Rand{encodetest.NearEven: rand.New(rand.NewPCG(5, 6)), encodetest.Skewed: rand.New(rand.NewPCG(5, 7))}
	for _, c := range cases {
		g, err := models.Load(c.model, models.Options{Batch: c.batch})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := cluster.Load(c.cluster)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cost.New(cl, cost.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opt := encode.EncodeOptions{MemoryFraction: 1e6}
		pruned, err := encode.Encode(g, c.segs, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		opt.NoPrune = true
		full, err := encode.Encode(g, c.segs, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		padded, grouped := 0, 0
		for ti := range pruned.Tensors {
			for qi := range pruned.Layouts(ti) {
				if g, fixed := pruned.MethodFixed(ti, qi); fixed && g {
					grouped++
				} else if fixed {
					padded++
				}
			}
		}
		if p, g := pruned.FixedMethods(); p != padded || g != grouped {
			t.Fatalf("%s on %s: FixedMethods %d padded, %d grouped; MethodFixed %d, %d", c.model, c.cluster, p, g, padded, grouped)
		}
		if p, g := full.FixedMethods(); p+g != 0 {
			t.Fatalf("%s on %s: NoPrune fixed %d methods", c.model, c.cluster, p+g)
		}
		if c.wantFixed && padded+grouped == 0 {
			t.Fatalf("%s on %s: nothing pruned; the case no longer exercises pruning", c.model, c.cluster)
		}
		for _, lengths := range []encodetest.Lengths{encodetest.NearEven, encodetest.Skewed} {
			checkPrunedNeverDearer(t, rngs[lengths], lengths, c.model+" on "+c.cluster, c.wantFixed, full, pruned)
		}
	}
}

// checkPrunedNeverDearer is TestPrunedMethodsAreNeverDearer's check of one
// case's encoding, pruned and not, on 2000 random choices with lengths
// drawn as lengths says; name says which case in its messages.
func checkPrunedNeverDearer(t *testing.T, rng *rand.Rand, lengths encodetest.Lengths, name string, wantFixed bool, full, pruned *encode.Encoding) {
	t.Helper()
	name += ", " + lengths.String() + " lengths"
	checked, cheaper := 0, 0
	for trial := 0; trial < 2000; trial++ {
		ch := encodetest.RandomChoiceWith(rng, full, lengths)
		a, errA := full.Evaluate(ch)
		b, errB := pruned.Evaluate(ch)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("%s: full %v, pruned %v", name, errA, errB)
		}
		if errA != nil {
			continue
		}
		checked++
		if b.Seconds > a.Seconds*(1+pruneTolerance) {
			t.Errorf("%s: pruned %.9g s > full %.9g s", name, b.Seconds, a.Seconds)
		}
		if b.Seconds < a.Seconds*(1-pruneTolerance) {
			cheaper++
		}
		for ti := range ch.Grouped {
			for qi := range ch.Grouped[ti] {
				if g, fixed := pruned.MethodFixed(ti, qi); fixed {
					ch.Grouped[ti][qi] = g
				}
			}
		}
		a, _ = full.Evaluate(ch)
		if d := b.Seconds - a.Seconds; d > a.Seconds*pruneTolerance || -d > a.Seconds*pruneTolerance {
			t.Errorf("%s: with the kept methods, full %.9g s, pruned %.9g s", name, a.Seconds, b.Seconds)
		}
	}
	if checked < 50 {
		t.Fatalf("%s: only %d random programs valid", name, checked)
	}
	if wantFixed && cheaper == 0 {
		t.Errorf("%s: no random program got cheaper by pruning", name)
	}
	padded, grouped := pruned.FixedMethods()
	t.Logf("%s: %d methods fixed padded, %d grouped; %d of %d random programs cheaper pruned", name, padded, grouped, cheaper, checked)
}
