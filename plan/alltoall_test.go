package plan

import (
	"math/rand/v2"
	"slices"
	"testing"

	"hap/encode"
	"hap/encode/encodetest"
	"hap/executor"
	"hap/ir"
	"hap/models"
)

// allToAllTrainTolerance is the float64 verify tolerance of the executor's
// acceptance tests: a distributed step must match one device to it.
const allToAllTrainTolerance = 1e-10

// randomAllToAllChoice draws random choices until one decodes to a valid
// program whose Gathers are converted by all-to-all wherever one can be.
func randomAllToAllChoice(t *testing.T, rng *rand.Rand, e *encode.Encoding) *encode.Choice {
	t.Helper()
	for trial := 0; trial < 3000; trial++ {
		ch := encodetest.RandomChoice(rng, e)
		ch.AllToAll = make([]bool, len(e.Tensors))
		for ti := range e.Tensors {
			ch.AllToAll[ti] = e.AllToAllApplies(ch, ti)
		}
		if !slices.Contains(ch.AllToAll, true) {
			continue
		}
		if _, err := e.Evaluate(ch); err == nil {
			return ch
		}
	}
	t.Fatal("no random program could use all-to-all")
	return nil
}

// Programs the encoding decodes with all-to-alls — between Gathers of
// different segments, with uneven and zero lengths on paper-8's eight
// devices — train exactly as one device does (two SGD steps on the CPU
// backend, float64): the instruction the planner now chooses computes what
// the single-device program does.
func TestRandomAllToAllProgramsTrainExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, name := range []string{"mlp-tiny", "bert-moe-tiny", "gpt2-tiny"} {
		in, err := LoadInputs(name, models.Options{DType: ir.Float64}, "paper-8")
		if err != nil {
			t.Fatal(err)
		}
		g := in.Graph
		_, e := uncappedEncoding(t, in)
		for k := 0; k < 2; k++ {
			ch := randomAllToAllChoice(t, rng, e)
			p, err := e.Decode(ch)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, in := range p.Instrs {
				if in.Collective == ir.OpAllToAll {
					n++
				}
			}
			rep, err := executor.Verify(g, p, executor.Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			t.Logf("%s: %d all-to-alls, max relative error %.3g", name, n, rep.Max())
			if rep.Max() > allToAllTrainTolerance {
				t.Errorf("%s, program %d (%d all-to-alls): max relative error %.3g > %g: loss %+v grads %+v params %+v", name, k, n, rep.Max(), allToAllTrainTolerance, rep.Loss, rep.Grads, rep.Params)
			}
		}
	}
}
