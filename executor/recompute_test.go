package executor

import (
	"slices"
	"testing"

	"hap/cluster"
	"hap/encode"
	"hap/ir"
	"hap/models"
	"hap/strategy"
)

// A program that recomputes every layer (spmd.Program.Recompute, every
// unit encode.RecomputeUnits finds but the loss's) trains exactly as one
// device does: the recomputed forward, collectives included, makes the
// very activations backward would have read. The tiny zoo models under
// data, tensor, expert and ZeRO-3 parallelism on paper-8, in float64 and
// float32, at today's tolerances.
func TestVerifyRecomputedPrograms(t *testing.T) {
	cases := []struct{ model, strategy string }{
		{"bert-base-tiny", "dp-cp"}, {"bert-base-tiny", "tp"}, {"bert-base-tiny", "zero3"},
		{"vgg19-tiny", "dp-cp"}, {"vgg19-tiny", "zero3"},
		{"gpt2-tiny", "tp"}, {"bert-moe-tiny", "ep"}, {"vit-tiny", "megatron"},
	}
	c, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range cases {
		for _, dt := range []ir.DType{ir.Float64, ir.Float32} {
			t.Run(cs.model+"/"+cs.strategy+"/"+dt.String(), func(t *testing.T) {
				g, err := models.Load(cs.model, models.Options{DType: dt, Batch: 12})
				if err != nil {
					t.Fatal(err)
				}
				p, err := strategy.Build(cs.strategy, g, c)
				if err != nil {
					t.Fatal(err)
				}
				units := encode.RecomputeUnits(g)
				for _, u := range encode.RecomputeSelect(units, encode.RecomputeGroups(units)) {
					p.Recompute = append(p.Recompute, slices.Clone(units[u].Ops))
				}
				if len(p.Recompute) < 2 {
					t.Fatalf("%d units recompute", len(p.Recompute))
				}
				rep, err := Verify(g, p, Options{DType: dt, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)})
				if err != nil {
					t.Fatal(err)
				}
				checkTolerance(t, rep, dt)
			})
		}
	}
}
