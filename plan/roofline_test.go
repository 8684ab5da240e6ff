package plan

import (
	"context"
	"math"
	"testing"

	"hap/encode"
	"hap/models"
	"hap/solve/milp"
	"hap/solve/milp/cbc"
	"hap/strategy"
)

// TestMILPPricesTheKernelsRooflinesAsEvaluate pins the joint MILP to
// every hand-written program of full-size models whose kernels read
// operands whole (the roofline extras, encode/roofline.go), on clusters
// whose identical devices form groups (the share of a group's first
// device rounds up, a ceiling term the rows share with the compute's),
// and checks that it prices each as Evaluate does. The tiny models' of
// TestMILPPricesAPinnedChoiceAsEvaluate have no such kernels.
func TestMILPPricesTheKernelsRooflinesAsEvaluate(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size models")
	}
	cases := []struct {
		model, cluster string
		batch          int
	}{
		{"vgg19", "testdata/three-l4.yaml", 128},
		{"bert-base", "paper-16", 128},
	}
	for _, c := range cases {
		in, err := LoadInputs(c.model, models.Options{Batch: c.batch}, c.cluster)
		if err != nil {
			t.Fatal(err)
		}
		_, e := uncappedEncoding(t, in)
		for _, name := range strategy.Names() {
			p, err := strategy.Build(name, in.Graph, in.Cluster)
			if err != nil {
				continue // not for this model (ep without experts)
			}
			ch, ok := e.ChoiceOf(p)
			if !ok {
				continue
			}
			br, err := e.Evaluate(ch)
			if err != nil {
				t.Fatal(err)
			}
			model, vars := e.MILP()
			e.Fix(model, vars, ch)
			res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{Threads: 1, NoHeuristics: true})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Objective / encode.MILPTimeUnit
			t.Logf("%s %s@%d %s: MILP %.7g s, Evaluate %.7g s", c.model, c.cluster, c.batch, name, got, br.Seconds)
			if res.Status != milp.Optimal || math.Abs(got/br.Seconds-1) > pinnedTolerance {
				t.Errorf("%s on %s at %d, %s pinned: %s, %.7g s; Evaluate %.7g s", c.model, c.cluster, c.batch, name, res.Status, got, br.Seconds)
			}
		}
	}
}
