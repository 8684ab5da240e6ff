package strategy_test

import (
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// ep is GShard's and DeepSpeed-MoE's expert parallelism: per MoE layer one
// all-to-all takes dispatched tokens to their experts' devices and one
// brings the experts' outputs back; no activation is left as partial sums
// (only the loss is).
func TestEPMovesTokensByAllToAll(t *testing.T) {
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load("bert-moe-tiny", models.Options{Experts: 2 * c.NumDevices()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("ep", g, c)
	if err != nil {
		t.Fatal(err)
	}
	gates, toAll := 0, 0
	for i, in := range p.Instrs {
		if in.Kind == spmd.Comm {
			if in.Collective == ir.OpAllToAll {
				toAll++
			}
			continue
		}
		op := &g.Ops[in.Op]
		if op.Kind == ir.OpTop2Gate {
			gates++
		}
		for j, l := range in.Rule.Out {
			if l.Kind == spmd.Reduce && op.Outputs[j] != g.Loss {
				t.Errorf("%s leaves partial sums", p.Describe(g, i))
			}
		}
	}
	if gates == 0 || toAll != 2*gates {
		t.Errorf("%d all-to-alls for %d MoE layers, want 2 per layer", toAll, gates)
	}
}
