package solve

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/spmd"
)

// ExcludeChoice cuts off exactly the choice it is given: pinned to that
// choice the any-order MILP is infeasible, and pinned to any other choice
// of the space (another rule, layout, method or length of a used segment)
// it is not, on random small cases.
func TestExcludeChoiceCutsOffOnlyThatChoice(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for i := 0; i < 6; i++ {
		g := smallGraph(rng)
		m := smallCluster(t, rng, 1+rng.IntN(3))
		e, err := encode.Encode(g, []spmd.Segment{{Name: "batch", Units: g.Tensors[0].Shape[0]}}, m,
			encode.EncodeOptions{Optimizer: ir.SGD(0.1), NoGroup: true, NoAllToAll: true, MemoryFraction: 1e6})
		if err != nil {
			t.Fatal(err)
		}
		var valid []*encode.Choice
		e.Enumerate(func(ch *encode.Choice) bool {
			if _, err := e.Evaluate(ch); err == nil {
				valid = append(valid, ch.Clone())
			}
			return true
		})
		cut := valid[rng.IntN(len(valid))]
		feasible := func(ch *encode.Choice) bool {
			model, vars := e.TransportMILP(0, encode.BoundOptions{Memory: true, AnyOrder: true})
			e.ExcludeChoice(model, vars, cut)
			e.Fix(model, vars, ch)
			res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{NoCuts: true, NoHeuristics: true})
			if err != nil {
				t.Fatal(err)
			}
			return res.Status.HasSolution()
		}
		if feasible(cut) {
			t.Errorf("case %d: the excluded choice is still feasible: %+v", i, cut)
		}
		// The others: every choice with the cut's program (differing in
		// lengths or methods alone, which a careless cut would take too),
		// and a sample of the rest.
		var others []*encode.Choice
		for _, ch := range valid {
			if ch != cut && slices.Equal(ch.Rule, cut.Rule) && slices.Equal(ch.Leaf, cut.Leaf) {
				others = append(others, ch)
			}
		}
		for k := 0; k < 4; k++ {
			if ch := valid[rng.IntN(len(valid))]; ch != cut {
				others = append(others, ch)
			}
		}
		for _, other := range others {
			if !feasible(other) {
				t.Errorf("case %d: cutting off %+v also cuts off %+v", i, cut, other)
			}
		}
	}
}
