package solve

import (
	"context"
	"errors"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/strategy"
)

// wideOnTwoT4s is one linear layer of in×out weights on two 16 GB T4s,
// encoded, with data parallelism's choice: the weight, its gradient and
// Adam's state replicated.
func wideOnTwoT4s(t *testing.T, in, out int) (*ir.Graph, *encode.Encoding, *encode.Choice) {
	t.Helper()
	b := ir.NewBuilder("wide", ir.Float32)
	x := b.Input("x", ir.Float32, 8, in)
	g, err := b.Finish(b.CrossEntropy(b.MatMul(x, b.Param("w", in, out)), b.Label("y", 8)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.ParseCluster([]byte("name: t4s\nnodes:\n  - {name: a, device: T4, count: 2, intra: {class: pcie, bandwidth: 12GB/s}}\ninter: {class: ethernet, bandwidth: 25Gb/s}\n"), "t4s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		t.Fatal(err)
	}
	dp, ok := e.ChoiceOf(p)
	if !ok {
		t.Fatal("dp-ev is not expressible")
	}
	return g, e, dp
}

// A 1.07 B-parameter layer needs ~17 GB replicated with Adam, more than a
// T4 has: FitMemory shards it, and Synthesize, given only that start,
// plans from the repaired choice (no CBC heuristics searching for a first
// plan) and returns a plan that fits.
func TestFitMemoryRepairsAStartThatDoesNotFit(t *testing.T) {
	g, e, dp := wideOnTwoT4s(t, 16384, 65536)
	if _, err := e.Evaluate(dp); err == nil {
		t.Fatal("data parallelism fits; the test needs a start that does not")
	}
	fit, over := FitMemory(context.Background(), e, []*encode.Choice{dp})
	if fit == nil || over > 0 {
		t.Fatal("FitMemory found no choice that fits")
	}
	if _, err := e.Evaluate(fit); err != nil {
		t.Fatalf("FitMemory's choice: %v", err)
	}
	p, err := strategy.Build("dp-ev", g, e.Model().Cluster())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: []*encode.Program{p}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Start == nil {
		t.Error("the joint MILP had no start: the repaired choice was not used")
	}
	if _, err := e.Evaluate(res.Choice); err != nil {
		t.Errorf("the plan: %v", err)
	}
}

// Four times wider, the layer is over a T4 even split in two: no move
// fits it; FitMemory says by how much its closest choice is over.
func TestFitMemoryGivesUpWhenNothingFits(t *testing.T) {
	_, e, dp := wideOnTwoT4s(t, 16384, 4*65536)
	fit, over := FitMemory(context.Background(), e, []*encode.Choice{dp})
	if fit == nil || over <= 0 {
		t.Fatalf("FitMemory returned %v over %g bytes where nothing fits", fit, over)
	}
	// It got closer than data parallelism did.
	_, dpOver, err := e.NewEvaluator().Overflow(dp)
	if err != nil || over >= dpOver {
		t.Errorf("FitMemory ended %g bytes over, data parallelism is %g over (%v)", over, dpOver, err)
	}
}

// When the model cannot fit even held once, Synthesize says how much it
// needs against what the devices have, alike devices in one clause.
func TestNothingFitsNamesTheDevicesOnce(t *testing.T) {
	g, e, _ := wideOnTwoT4s(t, 16384, 4*65536)
	_, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10})
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("got %v, want ErrNoPlan", err)
	}
	for _, want := range []string{"needs at least 6", "devices 0–1 (T4) 15.5 GB each"} {
		if !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "T4") != 1 {
			t.Errorf("explanation %q: want one clause %q", err, want)
		}
	}
}

// A loss whose op has no rule leaving a partial sum under the segments
// given (here: none) cannot end as Reduce, so no program is valid: Encode
// says so, naming the loss and its op, instead of handing the solver an
// infeasible model whose "no plan fits" would blame memory.
func TestEncodeRejectsALossThatCannotEndAsReduce(t *testing.T) {
	g, e, _ := wideOnTwoT4s(t, 64, 32)
	_, err := encode.Encode(g, nil, e.Model(), encode.EncodeOptions{})
	if err == nil {
		t.Fatal("encoding with no segments succeeded; the loss can only be replicated")
	}
	for _, want := range []string{"cannot end as Reduce", "cross_entropy", "segments []"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
