package plan

import (
	"math"
	"slices"
	"testing"

	"hap/encode"
	"hap/encode/encodetest"
	"hap/ir"
	"hap/milp"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// TestPlannerPricesTheSlicesPads checks that the planner counts the pads
// a program's layout changes run on the devices: a Gather cut from an
// Identity copy is a free view, but its adjoint in backward writes the
// whole gradient. Data-parallel VGG19 with its two large fully connected
// layers column-parallel slices their replicated weights (67 and 411 MB
// gradients padded whole) and their inputs, gathered. Priced without the
// pads, the planner was 4.4% under the simulator; the MILP, pinned to the
// program, prices it as Evaluate does.
func TestPlannerPricesTheSlicesPads(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size model")
	}
	in, err := LoadInputs("vgg19", models.Options{Batch: 128}, "testdata/three-v100.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, e := uncappedEncoding(t, in)
	dp, err := strategy.Build("dp-ev", in.Graph, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := e.ChoiceOf(dp)
	if !ok {
		t.Fatal("dp-ev is not a choice of the encoding")
	}
	for _, op := range []string{"fc1.matmul", "fc2.matmul"} {
		ci := slices.IndexFunc(e.Classes, func(c encode.OpClass) bool {
			return slices.ContainsFunc(c.Ops, func(id ir.OpID) bool { return in.Graph.Ops[id].Name == op })
		})
		if ci < 0 {
			t.Fatalf("vgg19 has no op %s", op)
		}
		r := slices.IndexFunc(e.Classes[ci].Rules, func(r spmd.Rule) bool { return r.Name == "column-parallel" })
		if r < 0 {
			t.Fatalf("%s has no column-parallel rule", op)
		}
		ch.Rule[ci] = r
	}
	p, err := e.Decode(ch)
	if err != nil {
		t.Fatal(err)
	}
	sliced := 0
	for _, ins := range p.Instrs {
		if ins.Kind == spmd.Comm && ins.Collective == ir.OpDynamicSlice && in.Graph.Tensors[ins.Tensor].Kind != ir.Input {
			sliced++
		}
	}
	if sliced < 3 {
		t.Fatalf("the program slices %d tensors with a gradient, want the two weights and an activation", sliced)
	}
	br, r := pricedAndRun(t, in, e, ch, p)
	rel := br.Seconds/r.StepSeconds - 1
	t.Logf("planner %.5f s, simulator %.5f s (%+.2f%%), %d slices", br.Seconds, r.StepSeconds, 100*rel, sliced)
	if math.Abs(rel) > oneCostTolerance {
		t.Errorf("planner %.5f s vs simulator %.5f s (%+.2f%%)", br.Seconds, r.StepSeconds, 100*rel)
	}
	if res, got := encodetest.SolvePinned(t, e, ch); res.Status != milp.Optimal || math.Abs(got/br.Seconds-1) > pinnedTolerance {
		t.Errorf("the MILP pinned to the program: %s, %.7g s; Evaluate %.7g s", res.Status, got, br.Seconds)
	}
}
