package plan

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"hap/cluster/clustertest"
	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/models"
	"hap/solve"
	"hap/spmd"
	"hap/strategy"
)

// oneCostTolerance is how far the planner's step time (the encoding's
// timeline, the MILP's objective) may be from the simulator's time for the
// lowered program, for hand-written and synthesized plans alike: the
// issue's 1% (measured −0.85% to +0.66% on these cases: the synthesized
// plans on two-4090 and on v100-8).
const oneCostTolerance = 0.01

// memoryTolerance is how far the encoding's peak memory per device
// (encode's memory.go) may be from the simulator's: measured within
// −1.7%..+4.8% on these cases, most within 1%.
const memoryTolerance = 0.05

// uncapped is a memory fraction that lets Evaluate price any choice: the
// comparisons here are of estimates, not of fitting.
const uncapped = 1e6

// uncappedEncoding is in's cost model and its encoding with the planner's
// candidate segments, every choice priced whatever its memory.
func uncappedEncoding(t testing.TB, in *Inputs) (*cost.Model, *encode.Encoding) {
	t.Helper()
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m, encode.EncodeOptions{Optimizer: in.Optimizer, MemoryFraction: uncapped})
	if err != nil {
		t.Fatal(err)
	}
	return m, e
}

// TestPlannerCostMatchesSimulator checks "one cost": for every zoo model's
// full size on heterogeneous clusters, every hand-written strategy's
// program and the synthesizer's plan, the encoding's estimate is within
// 1% of the simulated step, and its peak memory per device within
// memoryTolerance of the simulator's.
func TestPlannerCostMatchesSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size models")
	}
	cases := []struct {
		model, cluster string
		batch          int
		synth          bool
	}{
		{"bert-base", "paper-8", 256, true},
		{"vgg19", "paper-8", 256, true},
		{"vit", "paper-16", 512, false},
		{"gpt2", "paper-16", 256, false},
		{"bert-base", "paper-32", 1024, false},
		{"bert-moe", "paper-8", 256, false},
		// Fast links, so compute matters: the gradient sums of the
		// tensors q, k and v read whole (OpClass.Acc) were priced at a
		// twelfth, and the synthesized plan 1.56% under the simulator.
		{"vit", "h100-16", 32, true},
		// GPT-2's decoder reads the token embedding again at the end of
		// forward: its gather, charged at the embedding, priced the
		// synthesized plan 3.6% over the simulator (spread leaves).
		{"gpt2", "v100-8", 8, true},
		// A batch of 256 on 256-channel convolutions: the weight
		// gradient's work once read as an input gradient's (7× the
		// FLOPs), and every VGG19 program here was priced 18.8% over
		// the simulator (ir's TestConvolutionGradientsDoTheForwardsWork).
		{"vgg19", "a100-8", 256, true},
		// The communication stream busy most of the step, and the MoE
		// layers' combine reduce-scatter after the experts' compute, in
		// the middle of its block: the stream was taken to have made it
		// at the block's start, the next gathers to start that much
		// sooner, and the synthesized plan was priced 1.28% under the
		// simulator (R_b in encode's timeline).
		{"bert-moe", "testdata/two-4090.yaml", 32, true},
		// 30 TFLOP/s against 300 GB/s: every device reads a data-parallel
		// fully connected layer's weight whole, whatever its share of the
		// batch; priced at share 1 times the share, every program here
		// was 13.6% under the simulator (encode's roofline.go).
		{"vgg19", "testdata/three-l4.yaml", 128, true},
		// Tensor-parallel layers reading the residual stream whole and
		// data-parallel norms reading it in pieces: its gradients were
		// summed per reader, three whole adds where the program makes
		// two whole and one in pieces, and megatron was priced 2.43%
		// over the simulator on BERT-Base, 1.48% on ViT (encode's
		// gradsum.go).
		{"bert-base", "testdata/three-l4.yaml", 8, false},
		{"vit", "testdata/three-l4.yaml", 8, false},
	}
	for _, c := range cases {
		in, err := LoadInputs(c.model, models.Options{Batch: c.batch}, c.cluster)
		if err != nil {
			t.Fatal(err)
		}
		m, e := uncappedEncoding(t, in)
		check := func(name string, p *spmd.Program) {
			if p.Mesh != nil {
				return // 2-D programs are baselines only, outside the encoding
			}
			ch, ok := e.ChoiceOf(p)
			if !ok {
				// zero3's per-parameter segments are not the encoding's
				// candidates: nothing to compare.
				t.Logf("%s on %s, %s: not a choice of the encoding", c.model, c.cluster, name)
				return
			}
			br, err := e.Evaluate(ch)
			if err != nil {
				t.Logf("%s on %s, %s: %v", c.model, c.cluster, name, err)
				return
			}
			r, err := Simulate(in, p)
			if err != nil {
				t.Fatal(err)
			}
			rel := br.Seconds/r.StepSeconds - 1
			t.Logf("%-9s %-8s %-9s planner %.4f s  simulator %.4f s  (%+.2f%%)", c.model, c.cluster, name, br.Seconds, r.StepSeconds, 100*rel)
			fits := true
			for d, mem := range br.Memory {
				fits = fits && mem <= encode.DefaultMemoryFraction*float64(m.Capacity(d))
			}
			// A program that does not fit is no plan: its time is logged,
			// not held to the tolerance.
			if fits && math.Abs(rel) > oneCostTolerance {
				t.Errorf("%s on %s, %s: planner %.4f s vs simulator %.4f s (%+.2f%%)", c.model, c.cluster, name, br.Seconds, r.StepSeconds, 100*rel)
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for d, st := range r.Devices {
				rel := br.Memory[d]/float64(st.PeakMemory) - 1
				lo, hi = min(lo, rel), max(hi, rel)
				if math.Abs(rel) > memoryTolerance {
					t.Errorf("%s on %s, %s, device %d: planner %.3f GB vs simulator %.3f GB peak (%+.1f%%)", c.model, c.cluster, name, d, br.Memory[d]/1e9, float64(st.PeakMemory)/1e9, 100*rel)
				}
			}
			t.Logf("%-9s %-8s %-9s memory: planner/simulator %+.1f%% .. %+.1f%% over devices", c.model, c.cluster, name, 100*lo, 100*hi)
		}
		var starts []*spmd.Program
		for _, name := range strategy.Names() {
			if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
				check(name, p)
				starts = append(starts, p)
			}
		}
		if c.synth {
			res, err := solve.Synthesize(context.Background(), in.Graph, m, solve.Options{Optimizer: in.Optimizer, NodeLimit: DefaultNodeLimit, Starts: starts})
			if err != nil {
				t.Fatal(err)
			}
			check("hap", res.Program)
		}
	}
}

// The update is priced as the optimizer runs it. With SGD the encoding
// priced Adam's update (12 FLOPs and 7 bytes moved per element, where
// SGD's is 2 and 3), and on one device, where nothing else hides it, the
// planner put mlp-tiny's step 60% above the simulator's (0.1266 µs against
// 0.0793 µs on a P100, batch 2). Every tiny zoo model, on one device and on
// three, under both optimizers, every hand-written strategy the encoding
// can express: the planner's step within oneCostTolerance of the
// simulator's.
func TestPlannerCostFollowsTheOptimizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	for _, n := range []int{1, 3} {
		c, err := clustertest.Small(rng, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "gpt2-tiny", "bert-moe-tiny", "vgg19-tiny"} {
			var mo models.Options
			if slices.Contains(models.WithExperts(), name) {
				mo.Experts = 2 * n
			}
			g, err := models.Load(name, mo)
			if err != nil {
				t.Fatal(err)
			}
			for _, opt := range []ir.Optimizer{ir.Adam(1e-3), ir.SGD(1e-3)} {
				in := &Inputs{ModelSpec: name, Graph: g, Cluster: c, Optimizer: opt}
				_, e := uncappedEncoding(t, in)
				for _, s := range strategy.Names() {
					p, err := strategy.Build(s, g, c)
					if err != nil || p.Mesh != nil {
						continue
					}
					ch, ok := e.ChoiceOf(p)
					if !ok {
						continue
					}
					br, err := e.Evaluate(ch)
					if err != nil {
						t.Fatalf("%s, %s, %d devices, %s: %v", name, opt.Kind, n, s, err)
					}
					r, err := Simulate(in, p)
					if err != nil {
						t.Fatalf("%s, %s, %d devices, %s: %v", name, opt.Kind, n, s, err)
					}
					if rel := br.Seconds/r.StepSeconds - 1; math.Abs(rel) > oneCostTolerance {
						t.Errorf("%s, %s, %d devices, %s: planner %.4g s vs simulator %.4g s (%+.2f%%)", name, opt.Kind, n, s, br.Seconds, r.StepSeconds, 100*rel)
					}
				}
			}
		}
	}
}

// allToAllAddedError is how much further from the simulator the planner
// may be on a program with all-to-alls than on the same program with its
// conversions made through Identity: all-to-all must add no error of its
// own (measured: none on every tiny model but vit-tiny, whose random
// programs are off by up to +2.4% either way, and +0.35% more with them).
const allToAllAddedError = 0.005

// On random programs of the tiny zoo models whose Gathers are converted by
// all-to-all wherever one can (uneven lengths, some zero), the planner's
// step is the simulator's, as it is for the same programs converted
// through Identity.
func TestPlannerCostOnRandomAllToAllPrograms(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "gpt2-tiny", "bert-moe-tiny"} {
		in, err := LoadInputs(name, models.Options{}, "paper-8")
		if err != nil {
			t.Fatal(err)
		}
		_, e := uncappedEncoding(t, in)
		for trial := 0; trial < 6; trial++ {
			ch := randomAllToAllChoice(t, rng, e)
			through := ch.Clone()
			through.AllToAll = nil
			var rel [2]float64
			for k, c := range []*encode.Choice{ch, through} {
				br, err := e.Evaluate(c)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				p, err := e.Decode(c)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if k == 0 && !usesAllToAll(p) {
					t.Fatalf("%s: a choice with all-to-all decoded without one", name)
				}
				r, err := Simulate(in, p)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				rel[k] = br.Seconds/r.StepSeconds - 1
			}
			t.Logf("%-14s planner/simulator %+.3f%% with all-to-all, %+.3f%% through Identity", name, 100*rel[0], 100*rel[1])
			if math.Abs(rel[0])-math.Abs(rel[1]) > allToAllAddedError {
				t.Errorf("%s, random program %d: planner/simulator %+.2f%% with all-to-all, %+.2f%% without", name, trial, 100*rel[0], 100*rel[1])
			}
		}
	}
}

// usesAllToAll reports whether p changes a layout Gather→Gather by an
// all-to-all.
func usesAllToAll(p *spmd.Program) bool {
	for _, in := range p.Instrs {
		if in.Kind == spmd.Comm && in.Collective == ir.OpAllToAll {
			return true
		}
	}
	return false
}
