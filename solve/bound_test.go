package solve

import (
	"context"
	"math"
	"testing"

	"hap/encode"
	"hap/ir"
	"hap/models"
	"hap/solve/milp"
	"hap/solve/milp/cbc"
	"hap/strategy"
)

// lpSeconds is the optimum of model's LP relaxation, in seconds.
func lpSeconds(t *testing.T, model *milp.Model) float64 {
	t.Helper()
	relax(model)
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{})
	if err != nil || res.Status != milp.Optimal {
		t.Fatalf("LP relaxation: %v (%v)", err, res)
	}
	return res.Objective / encode.MILPTimeUnit
}

// checkTransport checks the transport formulation on a case whose optimum,
// enumerated, costs want seconds: solved exactly, its MILP finds a program
// of that cost (its rows cut no program off), and its LP relaxations, with
// and without the memory rows, lie between the plain MILP's relaxation
// and want. It reports whether the transport LP is the tighter one.
func checkTransport(t *testing.T, i int, e *encode.Encoding, want float64) (tighter bool) {
	t.Helper()
	model, vars := e.TransportMILP(0, true)
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{})
	if err != nil || res.Status != milp.Optimal {
		t.Fatalf("case %d: transport MILP: %v (%v)", i, err, res)
	}
	br, err := e.Evaluate(e.ChoiceFrom(vars, res.Values))
	if err != nil {
		t.Fatalf("case %d: the transport MILP's choice: %v", i, err)
	}
	if math.Abs(br.Seconds-want) > exactTolerance*want {
		t.Errorf("case %d: transport MILP's optimum costs %.9g s, enumeration %.9g s", i, br.Seconds, want)
	}
	plainModel, _ := e.MILPBelow(0)
	plain := lpSeconds(t, plainModel)
	withMemory := lpSeconds(t, model)
	noMemoryModel, _ := e.TransportMILP(0, false)
	noMemory := lpSeconds(t, noMemoryModel)
	above := func(a, b float64) bool { return a > b*(1+exactTolerance)+1e-12 }
	if above(withMemory, want) || above(noMemory, withMemory) || above(plain, withMemory) {
		t.Errorf("case %d: LP bounds plain %.9g, transport %.9g, transport without memory %.9g s: want plain, without memory ≤ transport ≤ the optimum %.9g", i, plain, withMemory, noMemory, want)
	}
	return above(withMemory, plain)
}

// The transport LP bounds the plan far more tightly than the joint MILP's
// own root on a model whose step is mostly communication, and the
// synthesizer reports it: mlp-tiny on paper-8 under Adam (measured: the
// plain root LP 0.195 ms, the transport LP 0.526 ms, the plan 2.108 ms).
func TestTransportLPBoundsTheSynthesizedPlan(t *testing.T) {
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	var starts []*encode.Program
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, g, c); err == nil {
			starts = append(starts, p)
		}
	}
	res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: starts})
	if err != nil {
		t.Fatal(err)
	}
	plainModel, _ := res.Encoding.MILPBelow(res.Objective)
	plain := lpSeconds(t, plainModel)
	transportModel, _ := res.Encoding.TransportMILP(res.Objective, true)
	transport := lpSeconds(t, transportModel)
	t.Logf("plan %.4g ms, bound %.4g ms; root LPs: plain %.4g ms, transport %.4g ms", 1e3*res.Objective, 1e3*res.Bound, 1e3*plain, 1e3*transport)
	if !res.BoundFromLP || res.Bound > res.Objective || res.Bound < transport*(1-exactTolerance) {
		t.Errorf("bound %g s (from the LP: %v) for a plan of %g s: want the transport LP's %g s", res.Bound, res.BoundFromLP, res.Objective, transport)
	}
	if transport < 2*plain {
		t.Errorf("transport LP %g s against the plain %g s: want it at least twice as tight here", transport, plain)
	}
}
