package solve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// encodeOn encodes g, under Adam, on the cluster a YAML document
// describes, and returns the encoding with the cluster.
func encodeOn(t *testing.T, g *ir.Graph, clusterYAML string) (*encode.Encoding, *cluster.Cluster) {
	t.Helper()
	c, err := cluster.ParseCluster([]byte(clusterYAML), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

// strategyChoice is a hand-written strategy's program for g on c, and its
// choice in e.
func strategyChoice(t *testing.T, g *ir.Graph, c *cluster.Cluster, e *encode.Encoding, name string) (*spmd.Program, *encode.Choice) {
	t.Helper()
	p, err := strategy.Build(name, g, c)
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := e.ChoiceOf(p)
	if !ok {
		t.Fatalf("%s is not expressible", name)
	}
	return p, ch
}

// wideOnTwoT4s is one linear layer of in×out weights on two 16 GB T4s,
// encoded, with data parallelism's choice: the weight, its gradient and
// Adam's state replicated.
func wideOnTwoT4s(t *testing.T, in, out int) (*ir.Graph, *encode.Encoding, *encode.Choice) {
	t.Helper()
	b := ir.NewBuilder("wide", ir.Float32)
	x := b.Input("x", ir.Float32, 8, in)
	g, err := b.Finish(b.CrossEntropy(b.MatMul(x, b.Param("w", in, out)), b.Label("y", 8)))
	if err != nil {
		t.Fatal(err)
	}
	e, c := encodeOn(t, g, "name: t4s\nnodes:\n  - {name: a, device: T4, count: 2, intra: {class: pcie, bandwidth: 12GB/s}}\ninter: {class: ethernet, bandwidth: 25Gb/s}\n")
	_, dp := strategyChoice(t, g, c, e, "dp-ev")
	return g, e, dp
}

// A 1.07 B-parameter layer needs ~17 GB replicated with Adam, more than a
// T4 has: FitMemory shards it, and Synthesize, given only that start,
// plans from the repaired choice (no CBC heuristics searching for a first
// plan) and returns a plan that fits.
func TestFitMemoryRepairsAStartThatDoesNotFit(t *testing.T) {
	g, e, dp := wideOnTwoT4s(t, 16384, 65536)
	if _, err := e.Evaluate(dp); err == nil {
		t.Fatal("data parallelism fits; the test needs a start that does not")
	}
	fit, over := FitMemory(context.Background(), e, []*encode.Choice{dp})
	if fit == nil || over > 0 {
		t.Fatal("FitMemory found no choice that fits")
	}
	if _, err := e.Evaluate(fit); err != nil {
		t.Fatalf("FitMemory's choice: %v", err)
	}
	p, err := strategy.Build("dp-ev", g, e.Model().Cluster())
	if err != nil {
		t.Fatal(err)
	}
	res, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: []*spmd.Program{p}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Start == nil {
		t.Error("the joint MILP had no start: the repaired choice was not used")
	}
	if _, err := e.Evaluate(res.Choice); err != nil {
		t.Errorf("the plan: %v", err)
	}
}

// Four times wider, the layer is over a T4 even split in two: no move
// fits it; FitMemory says by how much its closest choice is over.
func TestFitMemoryGivesUpWhenNothingFits(t *testing.T) {
	_, e, dp := wideOnTwoT4s(t, 16384, 4*65536)
	fit, over := FitMemory(context.Background(), e, []*encode.Choice{dp})
	if fit == nil || over <= 0 {
		t.Fatalf("FitMemory returned %v over %g bytes where nothing fits", fit, over)
	}
	// It got closer than data parallelism did.
	_, dpOver, err := e.NewEvaluator().Overflow(dp)
	if err != nil || over >= dpOver {
		t.Errorf("FitMemory ended %g bytes over, data parallelism is %g over (%v)", over, dpOver, err)
	}
}

// strategyStarts are the programs of every hand-written strategy that
// builds for g on c, the starts plan.Synthesize gives the search.
func strategyStarts(g *ir.Graph, c *cluster.Cluster) []*spmd.Program {
	var starts []*spmd.Program
	for _, name := range strategy.Names() {
		if p, err := strategy.Build(name, g, c); err == nil {
			starts = append(starts, p)
		}
	}
	return starts
}

// bertBaseOnPaper16 is bert-base at the batch given, the paper's 16-GPU
// cluster with its cost model, and every hand-written strategy that
// builds for them.
func bertBaseOnPaper16(t *testing.T, batch int) (*ir.Graph, *cluster.Cluster, *cost.Model, []*spmd.Program) {
	t.Helper()
	g, c, m := zooOn(t, "bert-base", models.Options{Batch: batch}, "paper-16")
	starts := strategyStarts(g, c)
	return g, c, m, starts
}

// zooOn loads a zoo model and a built-in cluster, and the cluster's cost
// model.
func zooOn(t testing.TB, model string, opt models.Options, clusterName string) (*ir.Graph, *cluster.Cluster, *cost.Model) {
	t.Helper()
	g, err := models.Load(model, opt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Load(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return g, c, m
}

// tallOnAFastAndABigGPU is one linear layer over batch samples of 4096
// features — activations, not weights, fill the memory — on an RTX 4090
// (24 GB, 4× an A100's FP32) and an A100-80GB, encoded, with dp-cp's and
// dp-ev's choices.
func tallOnAFastAndABigGPU(t *testing.T, batch int) (*ir.Graph, *encode.Encoding, []*spmd.Program, []*encode.Choice) {
	t.Helper()
	b := ir.NewBuilder("tall", ir.Float32)
	x := b.Input("x", ir.Float32, batch, 4096)
	g, err := b.Finish(b.CrossEntropy(b.MatMul(x, b.Param("w", 4096, 1024)), b.Label("y", batch)))
	if err != nil {
		t.Fatal(err)
	}
	e, c := encodeOn(t, g, "name: mix\nnodes:\n  - {name: a, device: RTX-4090, count: 1}\n  - {name: b, device: A100-80GB, count: 1}\ninter: {class: ethernet, bandwidth: 25Gb/s}\n")
	var progs []*spmd.Program
	var chs []*encode.Choice
	for _, name := range []string{"dp-cp", "dp-ev"} {
		p, ch := strategyChoice(t, g, c, e, name)
		progs, chs = append(progs, p), append(chs, ch)
	}
	return g, e, progs, chs
}

// 2.6 M samples of 16 KB: split by speed (dp-cp) or evenly (dp-ev), the
// 4090's share is over its 24 GB, and no rule frees activations — only
// moving samples to the A100 does. FitMemory shifts them (before it moved
// lengths it ended 9 GB over), and Synthesize plans from the repaired
// choice, no slower.
func TestFitMemoryShiftsSamplesToTheDeviceWithRoom(t *testing.T) {
	g, e, progs, starts := tallOnAFastAndABigGPU(t, 5<<19)
	ev := e.NewEvaluator()
	for i, ch := range starts {
		if _, over, err := ev.Overflow(ch); err != nil || over == 0 {
			t.Fatalf("start %d is over by %g bytes (%v); the test needs starts that do not fit", i, over, err)
		}
	}
	fit, over := FitMemory(context.Background(), e, starts)
	if fit == nil || over > 0 {
		t.Fatalf("FitMemory ended %g bytes over", over)
	}
	br, err := e.Evaluate(fit)
	if err != nil {
		t.Fatalf("FitMemory's choice: %v", err)
	}
	batch := fit.Lengths[0]
	if batch[0] >= starts[1].Lengths[0][0] || batch[0] == 0 {
		t.Errorf("the 4090 holds %d samples, dp-ev gave it %d: want fewer, but some", batch[0], starts[1].Lengths[0][0])
	}
	res, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: progs})
	if err != nil {
		t.Fatal(err)
	}
	if res.Start == nil {
		t.Error("the joint MILP had no start: the repaired choice was not used")
	}
	if got, err := e.Evaluate(res.Choice); err != nil || got.Seconds > br.Seconds*(1+1e-9) {
		t.Errorf("the plan: %v; %.4g s against the repaired start's %.4g s", err, got.Seconds, br.Seconds)
	}
}

// When the model cannot fit even held once, Synthesize says how much it
// needs against what the devices have, alike devices in one clause.
func TestNothingFitsNamesTheDevicesOnce(t *testing.T) {
	g, e, _ := wideOnTwoT4s(t, 16384, 4*65536)
	_, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10})
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("got %v, want ErrNoPlan", err)
	}
	for _, want := range []string{"needs at least 6", "devices 0–1 (T4) 15.5 GB each"} {
		if !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "T4") != 1 {
			t.Errorf("explanation %q: want one clause %q", err, want)
		}
	}
}

// A loss whose op has no rule leaving a partial sum under the segments
// given (here: none) cannot end as Reduce, so no program is valid: Encode
// says so, naming the loss and its op, instead of handing the solver an
// infeasible model whose "no plan fits" would blame memory.
func TestEncodeRejectsALossThatCannotEndAsReduce(t *testing.T) {
	g, e, _ := wideOnTwoT4s(t, 64, 32)
	_, err := encode.Encode(g, nil, e.Model(), encode.EncodeOptions{})
	if err == nil {
		t.Fatal("encoding with no segments succeeded; the loss can only be replicated")
	}
	for _, want := range []string{"cannot end as Reduce", "cross_entropy", "segments []"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// The starts worth repairing are those over the memory that are faster
// than the best start that fits: at 1.5 M samples dp-ev fits the 4090 and
// dp-cp, faster, does not; with dp-ev alone nothing is.
func TestFasterStartsOverMemoryAreRepaired(t *testing.T) {
	_, e, _, starts := tallOnAFastAndABigGPU(t, 3<<19)
	cp, ev := starts[0], starts[1]
	best, limit := bestStart(e, starts, timelineCost)
	if best != ev {
		t.Fatalf("the best start that fits is not dp-ev; the test needs dp-ev to fit and dp-cp not")
	}
	if got := fasterOverMemory(e, starts, best, limit); len(got) != 1 || got[0] != cp {
		t.Errorf("starts to repair: %d, want dp-cp alone", len(got))
	}
	if got := fasterOverMemory(e, []*encode.Choice{ev}, best, limit); len(got) != 0 {
		t.Errorf("starts to repair among dp-ev alone: %d, want none", len(got))
	}
	if got := fasterOverMemory(e, starts, nil, 0); len(got) != 1 || got[0] != cp {
		t.Errorf("with no start that fits, starts to repair: %d, want dp-cp alone", len(got))
	}
}

// bert-base on paper-16 at batch 2432 could fit its bytes once but no
// start fits, even repaired. Stopped by the clock before the solver
// decides, Synthesize says that it stopped, how to search longer, and the
// closest program — not that no plan exists. The joint solver is one that
// never answers before its context ends (CBC's root LP, which can run past
// the limit until the grace kills it): how long CBC's own root takes to
// prove this model infeasible depends on the machine (at batch 2560 within
// a second; at 2432 more than the grace on one machine, less on another),
// and the test must not.
func TestNoPlanWithinTheLimitsSaysSo(t *testing.T) {
	g, _, m, starts := bertBaseOnPaper16(t, 2432)
	_, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), TimeLimit: time.Millisecond, Starts: starts, JointSolver: stalledSolver{}})
	if !errors.Is(err, ErrNoPlan) {
		t.Fatalf("got %v, want ErrNoPlan", err)
	}
	for _, want := range []string{"even repaired", "stopped by time", "--time-limit", "the closest program found needs"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// stalledSolver answers nothing until its context ends, like a solver
// process killed inside a long root LP.
type stalledSolver struct{}

func (stalledSolver) Solve(ctx context.Context, _ *milp.Model, _ milp.Options) (*milp.Result, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("%w: killed: %w", cbc.ErrSolverProcess, ctx.Err())
}

// A smaller memory fraction is a tighter capacity for every device: at
// 1.5 M samples the 4090 holds dp-ev's half within 90% of its memory; at
// 50% it must give samples to the A100, and the plan fits the half under
// the encoding's memory model.
func TestMemoryFractionBoundsEveryDevice(t *testing.T) {
	g, e, progs, _ := tallOnAFastAndABigGPU(t, 3<<19)
	share := map[float64]int{}
	for _, f := range []float64{0.9, 0.5} {
		res, err := Synthesize(context.Background(), g, e.Model(), Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: progs, MemoryFraction: f})
		if err != nil {
			t.Fatalf("fraction %g: %v", f, err)
		}
		for d, c := range res.Encoding.Capacity {
			if want := f * float64(e.Model().Capacity(d)); math.Abs(c-want) > 1 {
				t.Errorf("fraction %g: device %d's capacity in the encoding is %g, want %g", f, d, c, want)
			}
			if peak := res.Estimate.Memory[d]; peak > c {
				t.Errorf("fraction %g: device %d peaks at %g bytes, over its %g", f, d, peak, c)
			}
		}
		share[f] = res.Choice.Lengths[0][0]
	}
	if share[0.5] >= share[0.9] {
		t.Errorf("the 4090 holds %d samples at 50%% of its memory and %d at 90%%: want fewer at 50%%", share[0.5], share[0.9])
	}
	if _, err := encode.Encode(g, CandidateSegments(g), e.Model(), encode.EncodeOptions{MemoryFraction: -0.5}); err == nil || !strings.Contains(err.Error(), "memory fraction -0.5") {
		t.Errorf("a fraction of -0.5: %v, want an error naming it", err)
	}
}
