package executor

import (
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
	"hap/strategy"
)

// Tolerances of the acceptance: distributed training must match
// single-device training to these relative errors.
const (
	float32Tolerance = 1e-5
	float64Tolerance = 1e-10
)

func verifyCase(t *testing.T, model, strat, clusterName string, dt ir.DType, opt ir.Optimizer) *Report {
	t.Helper()
	c, err := cluster.Load(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load(model, models.Options{DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build(strat, g, c)
	if err != nil {
		t.Fatalf("%s %s: %v", model, strat, err)
	}
	rep, err := Verify(g, p, Options{DType: dt, Steps: 2, Seed: 1, Optimizer: opt})
	if err != nil {
		t.Fatalf("%s %s: %v", model, strat, err)
	}
	return rep
}

func TestVerifyZooTinyUnderStrategies(t *testing.T) {
	cases := []struct{ model, strategy string }{
		{"mlp-tiny", "dp-ev"}, {"mlp-tiny", "dp-cp"},
		{"bert-base-tiny", "dp-ev"}, {"bert-base-tiny", "dp-cp"}, {"bert-base-tiny", "tp"},
		{"vit-tiny", "dp-ev"}, {"vit-tiny", "dp-cp"}, {"vit-tiny", "tp"},
		{"vgg19-tiny", "dp-ev"}, {"vgg19-tiny", "dp-cp"},
		{"bert-moe-tiny", "dp-ev"}, {"bert-moe-tiny", "dp-cp"}, {"bert-moe-tiny", "ep"}, {"bert-moe-tiny", "tp"},
		{"gpt2-tiny", "dp-cp"}, {"gpt2-tiny", "tp"},
		{"mlp-tiny", "zero3"}, {"bert-base-tiny", "zero3"}, {"vit-tiny", "zero3"}, {"vgg19-tiny", "zero3"},
		{"bert-moe-tiny", "zero3"}, {"gpt2-tiny", "zero3"},
	}
	for _, c := range cases {
		for _, dt := range []ir.DType{ir.Float64, ir.Float32} {
			t.Run(c.model+"/"+c.strategy+"/"+dt.String(), func(t *testing.T) {
				rep := verifyCase(t, c.model, c.strategy, "paper-8", dt, ir.SGD(1e-2))
				tol := float32Tolerance
				if dt == ir.Float64 {
					tol = float64Tolerance
				}
				if rep.Max() > tol {
					t.Errorf("max relative error %.3g > %.0g: loss %+v grads %+v params %+v", rep.Max(), tol, rep.Loss, rep.Grads, rep.Params)
				}
			})
		}
	}
}
