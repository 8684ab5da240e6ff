package plan

import (
	"testing"

	"hap/encode"
	"hap/models"
	"hap/sim"
	"hap/spmd"
	"hap/strategy"
)

// strategyPlan is hand-written strategy s's plan of model on cluster (default options), with its
// inputs and program.
func strategyPlan(t testing.TB, model, cluster, s string) (*Inputs, *spmd.Program, *Plan) {
	t.Helper()
	in, err := LoadInputs(model, models.Options{}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build(s, in.Graph, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Build(in, p, s, Solver{Status: "heuristic"})
	if err != nil {
		t.Fatal(err)
	}
	return in, p, pl
}

// reread is pl written as its document and parsed back.
func reread(t *testing.T, pl *Plan) *Plan {
	t.Helper()
	data, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data, "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// pricedAndRun is choice ch's price in e and the simulator's run of its
// program p, both of in.
func pricedAndRun(t testing.TB, in *Inputs, e *encode.Encoding, ch *encode.Choice, p *spmd.Program) (*encode.Breakdown, *sim.Result) {
	t.Helper()
	br, err := e.Evaluate(ch)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Simulate(in, p)
	if err != nil {
		t.Fatal(err)
	}
	return br, r
}

// zooEncoding loads model at batch on cluster and encodes it as
// uncappedEncoding does: every choice priced whatever its memory.
func zooEncoding(t testing.TB, model, cluster string, batch int) (*Inputs, *encode.Encoding) {
	t.Helper()
	in, err := LoadInputs(model, models.Options{Batch: batch}, cluster)
	if err != nil {
		t.Fatal(err)
	}
	_, e := uncappedEncoding(t, in)
	return in, e
}
