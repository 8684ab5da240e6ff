package plan

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hap/cost"
	"hap/encode"
	"hap/executor"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/models"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
	"hap/strategy"
)

// wide is one huge linear layer: parameters dominate memory.
func wide(t *testing.T, in, out int) string {
	b := ir.NewBuilder("wide", ir.Float32)
	x := b.Input("x", ir.Float32, 8, in)
	g, err := b.Finish(b.CrossEntropy(b.MatMul(x, b.Param("w", in, out)), b.Label("y", 8)))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "wide.json")
	var buf bytes.Buffer
	if err := ir.EncodeJSON(&buf, g); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, buf.Bytes(), 0o644)
	return f
}

// A 1.07 B-parameter layer with Adam needs ~17 GB replicated: data
// parallelism does not fit the T4, but splitting the weight does — the
// synthesizer's plan or the paper's search's.
func TestMemoryLimitIsPlannedAround(t *testing.T) {
	in, err := LoadInputs(wide(t, 16384, 65536), models.Options{}, "testdata/duo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := cost.New(in.Cluster, cost.Options{})
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m, encode.EncodeOptions{Optimizer: in.Optimizer})
	if err != nil {
		t.Fatal(err)
	}
	dp, err := strategy.Build("dp-ev", in.Graph, in.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := e.ChoiceOf(dp)
	if !ok {
		t.Fatal("dp-ev is not expressible in the encoding")
	}
	if _, err := e.Evaluate(ch); !errors.Is(err, encode.ErrInfeasibleChoice) || !strings.Contains(err.Error(), "device 1") {
		t.Fatalf("dp-ev should run out of memory on device 1 (the T4): %v", err)
	}
	pl, err := Synthesize(context.Background(), in, SynthOptions{TimeLimit: 20 * time.Second})
	if err != nil {
		t.Fatalf("no plan: %v", err)
	}
	for _, d := range pl.Cost.PerDevice {
		if d.PeakMemory > d.Capacity {
			t.Errorf("device %d (%s): peak %d B > capacity %d B", d.Device, d.Type, d.PeakMemory, d.Capacity)
		}
	}
	// The paper's search also splits the weight (it ignores memory, and
	// its plan is picked only when it fits); no hand-written strategy fits.
	if pl.Solver.Chosen != "" && pl.Solver.Chosen != "hap-paper" {
		t.Errorf("a hand-written baseline (%s) was chosen; only a synthesized plan fits", pl.Solver.Chosen)
	}
}

// When nothing fits, the error names a device and the bytes needed vs
// available.
func TestNothingFitsExplainsWhy(t *testing.T) {
	in, err := LoadInputs(wide(t, 65536, 131072), models.Options{}, "testdata/duo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Synthesize(context.Background(), in, SynthOptions{TimeLimit: 10 * time.Second})
	if !errors.Is(err, solve.ErrNoPlan) {
		t.Fatalf("got %v, want ErrNoPlan", err)
	}
	for _, want := range []string{"device", "needs at least", "GB", "has"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("explanation %q lacks %q", err, want)
		}
	}
}

// A time limit returns the best plan found with the proven bound and gap.
func TestTimeLimitReturnsBoundAndGap(t *testing.T) {
	in, err := LoadInputs("bert-base-tiny", models.Options{}, "paper-8")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pl, err := Synthesize(context.Background(), in, SynthOptions{TimeLimit: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("a 2 s limit took %v", el)
	}
	s := pl.Solver
	if s.Status != "feasible" && s.Status != "optimal" {
		t.Fatalf("status %q", s.Status)
	}
	if s.Status == "feasible" && !(s.Bound <= s.Objective && s.Gap > 0) {
		t.Errorf("feasible plan without a bound below it: %+v", s)
	}
	if by := s.Options.Bound; !by.FromLP() && by.By != BoundByMILP && by.By != BoundByWork {
		t.Errorf("the plan does not record where its bound comes from (%s = %q)", BoundOption, by)
	}
}

// When the joint MILP's solver process dies (CBC aborting inside Clp, as
// it has with its heuristics on), a time-limited synthesis still returns
// the polished start as its plan, says so, and claims no bound but the
// work LP's, which the process that died took no part in.
func TestSolverFailureReturnsThePolishedStart(t *testing.T) {
	in, err := LoadInputs("bert-base-tiny", models.Options{}, "paper-8")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HAP_CBC_WORKER_ABORT", "1") // every isolated solve's process aborts
	pl, err := Synthesize(context.Background(), in, SynthOptions{TimeLimit: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := pl.Solver
	if by := s.Options.Bound; s.StoppedBy != "solver failure" || s.Status != "feasible" || by != (BoundSource{By: BoundByWork}) || !(s.Bound > 0 && s.Bound < s.Objective) || s.Gap != milp.Gap(s.Objective, s.Bound) {
		t.Fatalf("solver %+v, want a feasible plan stopped by the solver failure, with the work LP's bound and its gap", s)
	}
	if !fits(pl.Cost.PerDevice) || pl.Cost.StepSeconds <= 0 {
		t.Fatalf("the fallback plan does not fit or has no simulated step: %+v", pl.Cost)
	}
}

// Same inputs, same plan bytes: for a plan solved to optimality, and for
// the default search stopped by its node limit (work, not wall time, so
// a slower or busier machine gets the same plan).
func TestPlansAreDeterministic(t *testing.T) {
	cases := []struct {
		model, cluster string
		opt            SynthOptions
		status         string // the solver status the case exercises
	}{
		// A generous limit: every phase stops as soon as it is done or
		// proven optimal, so a loaded machine only makes this slower.
		{"mlp-tiny", "v100-8", SynthOptions{TimeLimit: 2 * time.Minute}, "optimal"},
		{"bert-base-tiny", "paper-16", SynthOptions{}, "feasible"},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.cluster, func(t *testing.T) {
			in, err := LoadInputs(c.model, models.Options{}, c.cluster)
			if err != nil {
				t.Fatal(err)
			}
			var docs [][]byte
			for i := 0; i < 2; i++ {
				pl, err := Synthesize(context.Background(), in, c.opt)
				if err != nil {
					t.Fatal(err)
				}
				if pl.Solver.Status != c.status {
					t.Fatalf("status %s (stopped by %q), want %s", pl.Solver.Status, pl.Solver.StoppedBy, c.status)
				}
				if c.status == "feasible" && pl.Solver.StoppedBy != "node limit" {
					t.Fatalf("stopped by %q, want the node limit", pl.Solver.StoppedBy)
				}
				if v := pl.Solver.Versions; len(v) == 0 || v[0] != (Software{"hap", HapVersion()}) {
					t.Fatalf("versions %v: want hap's build, %q, first", v, HapVersion())
				}
				b, _ := pl.Encode()
				docs = append(docs, b)
			}
			if !bytes.Equal(docs[0], docs[1]) {
				t.Fatal("two runs gave different plan bytes")
			}
		})
	}
}

// HapVersion reads a commit as twelve hex digits, marked when the tree
// had changes, and "dev" where the build recorded none (go test's).
func TestHapVersion(t *testing.T) {
	if v := HapVersion(); !regexp.MustCompile(`^(dev|[0-9a-f]{12}(\+modified)?)$`).MatchString(v) {
		t.Errorf("HapVersion() = %q, want dev or a commit's first twelve hex digits", v)
	}
}

// A node limit above the default asks for the proof: the joint MILP runs
// root cuts and strong branching, still node-limited and so still the same
// plan bytes on any machine. 1000 bare nodes leave mlp-tiny on v100-8 at a
// gap of 81%; thorough, the search proves its plan optimal.
func TestANodeLimitAboveTheDefaultSearchesThoroughly(t *testing.T) {
	in, err := LoadInputs("mlp-tiny", models.Options{}, "v100-8")
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for i := 0; i < 2; i++ {
		pl, err := Synthesize(context.Background(), in, SynthOptions{NodeLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Solver.Status != "optimal" || pl.Solver.Gap != 0 {
			t.Fatalf("status %s, gap %g, stopped by %q: want proven optimal", pl.Solver.Status, pl.Solver.Gap, pl.Solver.StoppedBy)
		}
		if got, want := pl.Solver.Options.Search, (JointSearch{NoHeuristics: true}); got == nil || *got != want {
			t.Fatalf("joint-milp-search %q, want %q", got, want)
		}
		b, _ := pl.Encode()
		docs = append(docs, b)
	}
	if !bytes.Equal(docs[0], docs[1]) {
		t.Fatal("two runs gave different plan bytes")
	}
	pl, err := Synthesize(context.Background(), in, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Solver.Options.Search, (JointSearch{NoCuts: true, NoHeuristics: true, NoStrongBranching: true, NoPresolve: true}); got == nil || *got != want {
		t.Fatalf("default search %q, want %q", got, want)
	}
}

// The synthesized plan of every tiny zoo model on paper-8 trains exactly
// like one device.
func TestSynthesizedTinyPlansVerify(t *testing.T) {
	for _, name := range []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "vgg19-tiny", "bert-moe-tiny", "gpt2-tiny"} {
		synthesizeAndVerify(t, name, models.Options{}, "paper-8")
	}
}

// On all of h100-16 the tiny ViT, VGG19 and BERT-Base plans train exactly
// like one device and stay within their measured gaps to their proven
// bounds. Before LocalSearch's chains and leaf pairs (solve/chain.go) they
// were 23%, 32% and 17% above their bounds; with them, under the cost
// model before issue 69's calibration, within 0.35%. Under the calibrated
// model a step of a tiny model on H100s is almost all kernel launches
// (2.9 ms at any batch up to 512 for vit-tiny), and the gaps are what
// withinBound lists: VGG19 at batch 64 is proven optimal, the other two
// end 10.05% and 8.16% above their bounds. Whether the rest is the
// bound's (the LP pays a collective's latency in fractions) or the
// search's is not settled; the test holds the measured figures.
func TestTinyPlansOnH100sReachTheirBounds(t *testing.T) {
	withinBound := []struct {
		model string
		batch int
		gap   float64
	}{
		{"vit-tiny", 0, 0.1010},
		{"vgg19-tiny", 64, 0.0005},
		{"bert-base-tiny", 0, 0.0820},
	}
	for _, c := range withinBound {
		pl := synthesizeAndVerify(t, c.model, models.Options{Batch: c.batch}, "h100-16")
		if s := pl.Solver; s.Gap > c.gap {
			t.Errorf("%s (batch %d) on h100-16: step %.4g ms, bound %.4g ms, gap %.2f%%; want within %.2f%%", c.model, c.batch, s.Objective*1e3, s.Bound*1e3, s.Gap*100, c.gap*100)
		}
	}
}

// A batch of one sample has no batch to split, yet the loss must end as
// Reduce: the batch is still a segment (of one unit), so the synthesizer
// plans it itself. It used to find every program infeasible, blame
// memory, and fall back to a hand-written strategy (bert-base on paper-8:
// tp's 0.53 s; the synthesizer's plan is 0.089 s).
func TestABatchOfOneIsSynthesized(t *testing.T) {
	pl := synthesizeAndVerify(t, "mlp-tiny", models.Options{Batch: 1}, "paper-8")
	if pl.Solver.Status != "optimal" && pl.Solver.Status != "feasible" {
		t.Errorf("solver status %q (chosen %q), want the solver's own plan", pl.Solver.Status, pl.Solver.Chosen)
	}
}

// synthesizeAndVerify plans a zoo model on a built-in cluster and checks
// two training steps of the plan against one device, in float64.
func synthesizeAndVerify(t *testing.T, name string, opt models.Options, clusterName string) *Plan {
	t.Helper()
	in, err := LoadInputs(name, opt, clusterName)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Synthesize(context.Background(), in, SynthOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	in2, p, err := pl.Resolve()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	g, _ := models.Load(name, models.Options{DType: ir.Float64, Experts: in2.ModelOpts.Experts, Batch: opt.Batch})
	rep, err := executor.Verify(g, p, executor.Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if rep.Max() > 1e-10 {
		t.Errorf("%s: relative error %.3g", name, rep.Max())
	}
	return pl
}

// When the simulator finds that the solver's plan does not fit (the memory
// model does not follow which transients are alive together, and
// --memory-fraction 1 leaves it no room for error), the plan is solved again under a memory fraction scaled
// by the overshoot, and that plan, not a start, is the answer.
func TestPlanThatDoesNotFitIsSolvedAgain(t *testing.T) {
	// Batch 80: under the calibrated cost model (issue 69) the first plan
	// at batch 32, 48 and 64 fits; at 80 and 96 it does not, and at 128
	// no plan fits at all (measured).
	in, err := LoadInputs("vit-tiny", models.Options{Batch: 80}, "testdata/tight.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	pl, err := Synthesize(context.Background(), in, SynthOptions{MemoryFraction: 1, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(progress.String(), "does not fit in memory when simulated") {
		t.Fatalf("the first plan fitted; the test needs one that does not:\n%s", progress.String())
	}
	if !fits(pl.Cost.PerDevice) {
		t.Fatalf("the plan does not fit: %s", sim.OverMemory(pl.Cost.PerDevice))
	}
	if pl.Solver.Chosen != "" {
		t.Errorf("the plan is the start %s, not the plan solved again", pl.Solver.Chosen)
	}
	asked, retried := pl.Solver.Options.MemoryFraction, pl.Solver.Options.RetriedFraction
	if asked != 1 || retried >= 1 || retried < minRetryFraction {
		t.Errorf("memory fractions asked %g, retried %g; want 1 and one in [%g, 1)", asked, retried, minRetryFraction)
	}
}

// tighterFraction scales the fraction by the worst overflowing device's
// estimate over its simulated peak, less the margin, and gives up on
// estimates too far off to correct.
func TestTighterFraction(t *testing.T) {
	devs := []sim.DeviceStats{
		{Device: 0, PeakMemory: 90, Capacity: 100},  // fits: ignored
		{Device: 1, PeakMemory: 110, Capacity: 100}, // estimated 99: 0.9
		{Device: 2, PeakMemory: 105, Capacity: 100}, // estimated 100: 0.952
	}
	est := &encode.Breakdown{Memory: []float64{50, 99, 100}}
	got, ok := tighterFraction(1, est, devs)
	if want := 0.9 * (1 - fitRetryMargin); !ok || math.Abs(got-want) > 1e-12 {
		t.Errorf("tighterFraction = %g, %v; want %g", got, ok, want)
	}
	est.Memory[1] = 10 // the simulator found 11× the estimate
	if got, ok := tighterFraction(1, est, devs); ok {
		t.Errorf("an estimate 11× off gave fraction %g; want none", got)
	}
	if _, ok := tighterFraction(1, nil, devs); ok {
		t.Error("no estimate gave a fraction")
	}
}

// countingSolver is CBC, counting the solves that branch an LP on choices
// (milp.Options.Choices: the bound's --bound-lps search).
type countingSolver struct {
	cbc.Solver
	branched *atomic.Int32
}

func (s countingSolver) Solve(ctx context.Context, m *milp.Model, opt milp.Options) (*milp.Result, error) {
	if len(opt.Choices) > 0 {
		s.branched.Add(1)
	}
	return s.Solver.Solve(ctx, m, opt)
}

// Untying with --bound-lps branches the bound's LP once, in the untied
// solve, whose bound is the one reported; the tied solve's LP is not
// branched too (it doubled the branching's time).
func TestUntieBranchesTheBoundOnce(t *testing.T) {
	in, err := LoadInputs("mlp-tiny", models.Options{}, "testdata/duo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var starts []*spmd.Program
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, in.Graph, in.Cluster); err == nil {
			starts = append(starts, p)
		}
	}
	var branched atomic.Int32
	so := solve.Options{Optimizer: in.Optimizer, NodeLimit: DefaultNodeLimit, Starts: starts, BoundLPs: 3, BoundSolver: countingSolver{branched: &branched}}
	res, err := untied(context.Background(), in, m, so, Untie{Layers: true}, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if n := branched.Load(); n != 1 {
		t.Errorf("the bound's LP was branched %d times, want once (the untied solve's)", n)
	}
	if !(res.Bound > 0) || res.Bound > res.Objective {
		t.Errorf("bound %g for a plan of %g", res.Bound, res.Objective)
	}
}

// Polish's lengths step must settle the pinned program's lengths: from
// hap-paper's plan of VGG19 on paper-16 (batch 512), a lengths step held to
// the search's ten nodes left Polish at 0.1278 s, 10% slower than the
// 0.1159 s the same alternation reaches when that small MILP gets the
// nodes to finish (solve's lengthsOpt). The default search then returned
// the slower plan.
func TestPolishSettlesTheLengths(t *testing.T) {
	// want is the settled step under the calibrated cost model (issue 69):
	// Polish ends at 0.19280 s from hap-paper's 0.19749 s. (Under the cost
	// model before, 0.1159 s; the ten-node lengths step, 0.1278 s, has not
	// been measured again.)
	if testing.Short() {
		t.Skip("full-size VGG19")
	}
	in, err := LoadInputs("vgg19", models.Options{Batch: 512}, "paper-16")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(in.Cluster, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(in.Graph, solve.CandidateSegments(in.Graph), m, encode.EncodeOptions{Optimizer: in.Optimizer})
	if err != nil {
		t.Fatal(err)
	}
	p, err := PaperSearch(context.Background(), in, PaperSafetyLimit)
	if err != nil {
		t.Fatal(err)
	}
	start, ok := e.ChoiceOf(p)
	if !ok {
		t.Fatal("hap-paper's plan is not a choice of the encoding")
	}
	model, vars := e.MILPBelow(0)
	lo := milp.Options{NodeLimit: DefaultNodeLimit, NoCuts: true, NoHeuristics: true}
	_, got := solve.Polish(context.Background(), e, model, vars, start, time.Time{}, lo, false)
	if want := 0.1929; !(got <= want) {
		t.Errorf("Polish from hap-paper's plan ends at %.5f s, want at most %.4f s", got, want)
	}
}
