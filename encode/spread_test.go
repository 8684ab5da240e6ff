package encode

import (
	"context"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/models"
	"hap/spmd"
)

// spreadLiftAtLeast is the least relative lift the spread leaves' charge
// rows must give the transport LP of gpt2-tiny (measured 5.0–5.3% on
// paper-8, paper-16, v100-8 and modern-24 at batches 4 and 24): the
// embedding's change was charged at no reader.
const spreadLiftAtLeast = 0.03

// The charge rows of a leaf read in several blocks (spreadRows, charged)
// lift the transport LP where the leaf's layout change costs: gpt2-tiny's
// decoder reads the token embedding again at the end of forward. That
// they cut off no program is solve's business (the exhaustive tied-weight
// test checks the LP against the enumerated optimum, and
// TestTransportLPKeepsEveryStart pins every start in it).
func TestSpreadChargeLiftsTheTransportLP(t *testing.T) {
	g, err := models.Load("gpt2-tiny", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	batch := g.Tensors[g.TensorsOfKind(ir.Input)[0]].Shape[0]
	segs := []spmd.Segment{{Name: "batch", Units: batch}, {Name: "heads", Units: 2}, {Name: "w16", Units: 16}, {Name: "w32", Units: 32}}
	e, err := Encode(g, segs, m, EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.spread) != 1 {
		t.Fatalf("gpt2-tiny: %d spread leaves, want 1 (the token embedding)", len(e.spread))
	}
	lp := func(charged bool) float64 {
		model, _ := e.milpBelow(0, milpForm{transport: true, streamRow: true, spreadRow: charged, lean: true})
		for j := range model.Cols {
			model.Cols[j].Integer = false
		}
		res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{})
		if err != nil || res.Status != milp.Optimal {
			t.Fatalf("charged %v: %v %v", charged, res, err)
		}
		return res.Objective / MILPTimeUnit
	}
	without, with := lp(false), lp(true)
	t.Logf("gpt2-tiny on paper-8: transport LP %.6g s without the charge rows, %.6g s with", without, with)
	if with < without*(1+spreadLiftAtLeast) {
		t.Errorf("transport LP %.6g s with the charge rows, %.6g s without: want at least %.0f%% higher", with, without, 100*spreadLiftAtLeast)
	}
}
