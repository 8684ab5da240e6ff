package executor

import (
	"fmt"
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
	return verifyBatch(t, model, 0, strat, clusterName, dt, opt)
}

// verifyBatch is verifyCase with the model's batch (0: its default).
func verifyBatch(t *testing.T, model string, batch int, strat, clusterName string, dt ir.DType, opt ir.Optimizer) *Report {
	t.Helper()
	c, err := cluster.Load(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load(model, models.Options{DType: dt, Batch: batch})
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
		{"llama-tiny", "dp-ev"}, {"llama-tiny", "dp-cp"}, {"llama-tiny", "zero3"}, {"llama-tiny", "tp"},
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

func checkTolerance(t *testing.T, rep *Report, dt ir.DType) {
	t.Helper()
	tol := float32Tolerance
	if dt == ir.Float64 {
		tol = float64Tolerance
	}
	if rep.Max() > tol {
		t.Errorf("max relative error %.3g > %.0g: loss %+v grads %+v params %+v", rep.Max(), tol, rep.Loss, rep.Grads, rep.Params)
	}
}

// Megatron on the paper's multi-GPU machines is a 2-D mesh (tensor
// parallel inside each machine, data parallel across the 8): its
// sub-group collectives on the CPU backend train exactly like one device.
// The models' default batches leave some replicas without samples; batch
// 12 gives every replica some, unevenly (2 or 1, or under megatron-cp in
// proportion to throughput), cut again among ranks. The transformers
// only: megatron's tensor parallelism refuses the MLP and VGG, which have
// no attention to split.
func TestVerifyMegatronMesh(t *testing.T) {
	for _, model := range []string{"bert-base-tiny", "vit-tiny", "bert-moe-tiny"} {
		for _, cl := range []string{"paper-16", "paper-32"} {
			for _, run := range []struct {
				strategy string
				batch    int
			}{{"megatron", 0}, {"megatron", 12}, {"megatron-cp", 12}} {
				strat, batch := run.strategy, run.batch
				for _, dt := range []ir.DType{ir.Float64, ir.Float32} {
					t.Run(fmt.Sprintf("%s/%s/%s/batch%d/%s", model, cl, strat, batch, dt), func(t *testing.T) {
						rep := verifyBatch(t, model, batch, strat, cl, dt, ir.SGD(1e-2))
						if rep.Devices != map[string]int{"paper-16": 16, "paper-32": 32}[cl] {
							t.Errorf("%d devices", rep.Devices)
						}
						checkTolerance(t, rep, dt)
					})
				}
			}
		}
	}
}
