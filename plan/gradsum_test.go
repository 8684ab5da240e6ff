package plan

import (
	"math/rand/v2"
	"testing"

	"hap/encode/encodetest"
	"hap/milp"
)

// TestMILPPricesTheSumTreesAsEvaluate pins random choices of full-size
// models, whose gradient sums are priced over the conversion tree
// (encode/gradsum.go: the tiny models' adds are below sumNegligible), in
// the joint MILP and checks its objective is Evaluate's step time: the
// tree's indicators, bounded from above where they save an add and from
// below where they cost one, are exact at every integer point — with
// all-to-alls set at random (the flag held to where it applies), and on
// a cluster whose identical devices form one group.
func TestMILPPricesTheSumTreesAsEvaluate(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size models")
	}
	rng := rand.New(rand.NewPCG(7, 11))
	cases := []struct {
		model, cluster string
		batch          int
	}{
		{"bert-base", "testdata/three-l4.yaml", 8},
		{"bert-moe", "testdata/three-l4.yaml", 8},
		{"gpt2", "testdata/three-l4.yaml", 8},
	}
	for _, c := range cases {
		_, e := zooEncoding(t, c.model, c.cluster, c.batch)
		sums := 0
		for ti := range e.Tensors {
			if e.Tensors[ti].SumAdd != nil {
				sums++
			}
		}
		if sums == 0 {
			t.Fatalf("%s on %s: no tensor class has its sum tree priced", c.model, c.cluster)
		}
		for trial, found := 0, 0; trial < 200 && found < 6; trial++ {
			ch := encodetest.RandomChoice(rng, e)
			if found%2 == 1 {
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
			t.Logf("%s on %s, trial %d (%d summed classes): MILP %.7g s, Evaluate %.7g s", c.model, c.cluster, trial, sums, got, br.Seconds)
			hi := br.Seconds * (1 + pinnedTolerance)
			if ch.AllToAll != nil {
				hi = br.Seconds * (1 + allToAllGroupOver)
			}
			if res.Status != milp.Optimal || got < br.Seconds*(1-pinnedTolerance) || got > hi {
				t.Errorf("%s on %s, trial %d: pinned MILP %s, %.7g s; Evaluate %.7g s (%+.4f%%)", c.model, c.cluster, trial, res.Status, got, br.Seconds, 100*(got/br.Seconds-1))
			}
		}
	}
}
