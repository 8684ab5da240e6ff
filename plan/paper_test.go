package plan

import (
	"context"
	"reflect"
	"testing"
	"time"

	"hap/encode"
	"hap/executor"
	"hap/ir"
	"hap/models"
)

// paperSafety is the safety stop the tests give the paper's search: far
// above what it needs (a second or two on a tiny model), so a loaded
// machine cannot stop it.
const paperSafety = 2 * time.Minute

// verifyTol is the largest relative error allowed between a distributed
// float64 run and the single-device one.
const verifyTol = 1e-10

// The paper's algorithm's plan of every tiny zoo model on paper-8 is a
// valid program that trains exactly like one device; the same inputs give
// the same program.
func TestPaperPlansVerify(t *testing.T) {
	for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "vgg19-tiny", "bert-moe-tiny", "gpt2-tiny"} {
		in, err := LoadInputs(name, models.Options{}, "paper-8")
		if err != nil {
			t.Fatal(err)
		}
		p, err := PaperSearch(context.Background(), in, paperSafety)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := encode.Check(in.Graph, p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "bert-moe-tiny" {
			again, err := PaperSearch(context.Background(), in, paperSafety)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(p, again) {
				t.Errorf("%s: two runs gave different programs", name)
			}
		}
		if _, err := Simulate(in, p); err != nil {
			t.Fatalf("%s: simulating: %v", name, err)
		}
		g, err := models.Load(name, models.Options{DType: ir.Float64, Experts: in.ModelOpts.Experts})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := executor.Verify(g, p, executor.Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rep.Max() > verifyTol {
			t.Errorf("%s: relative error %.3g", name, rep.Max())
		}
	}
}
