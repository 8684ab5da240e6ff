package solve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"hap/encode"
	"hap/ir"
	"hap/milp"
	"hap/milp/cbc"
	"hap/models"
	"hap/strategy"
)

// leanLPSlack is how far below the transport MILP's relaxation the lean LP
// (TransportLP) may lie on the exhaustive cases: measured, at most 5.4%
// (case 110, 131.02 µs against 138.52 µs), where the pads' launch
// overheads and the covers it leaves out charge the relaxation's point.
const leanLPSlack = 0.07

// relax makes every column of m continuous: m becomes its LP relaxation.
func relax(m *milp.Model) {
	for i := range m.Cols {
		m.Cols[i].Integer = false
	}
}

// lpSeconds is the optimum of model's LP relaxation, in seconds.
func lpSeconds(t *testing.T, model *milp.Model) float64 {
	t.Helper()
	relax(model)
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{})
	if err != nil || res.Status != milp.Optimal {
		t.Fatalf("LP relaxation: %v (%v)", err, res)
	}
	return res.Objective / encode.MILPTimeUnit
}

// checkTransport checks the transport formulation on a case whose optimum,
// enumerated, costs want seconds and is the choice opt of e: pinned to
// opt, its MILP prices it at want, and started from it, solved exactly, it
// finds a program of that cost (its rows cut no program off and price
// none below its cost); its LP relaxations, with and without the memory
// rows, lie between the plain MILP's relaxation and want. It reports
// whether the transport LP is the tighter one.
//
// Why the start. Solved from nothing, CBC's default search twice proved
// "optimal" a program dearer than opt: of the 200 exhaustive cases, case
// 20 at 152.25 µs against 151.00 µs, case 161 at 196.12 against 196.10,
// both with the primal tolerance at 1e-9 and opt feasible in the model at
// its price (milp.Model.Check). Any other search (cuts, heuristics, strong
// branching, presolve or perturbation off) found opt, so it is CBC's
// branch and bound misjudging a node, not the rows: what the test must
// prove is that opt survives the rows at its price, and that no program
// costs less, which a start does not weaken. The synthesizer always
// solves from a start.
func checkTransport(t *testing.T, i int, e *encode.Encoding, want float64, opt *encode.Choice) (tighter bool) {
	t.Helper()
	model, vars := e.TransportMILP(0, encode.BoundOptions{Memory: true})
	pinned, _ := e.TransportMILP(0, encode.BoundOptions{Memory: true})
	e.Fix(pinned, vars, opt)
	at, err := cbc.Solver{}.Solve(context.Background(), pinned, milp.Options{})
	if err != nil || at.Status != milp.Optimal {
		t.Fatalf("case %d: transport MILP pinned to the optimum: %v (%v)", i, err, at)
	}
	if got := at.Objective / encode.MILPTimeUnit; math.Abs(got-want) > exactTolerance*want {
		t.Errorf("case %d: transport MILP pinned to the optimum prices it %.9g s, enumeration %.9g s", i, got, want)
	}
	start := map[int]float64{}
	for c, x := range at.Values {
		start[c] = x
	}
	res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{Start: start})
	if err != nil || res.Status != milp.Optimal {
		t.Fatalf("case %d: transport MILP: %v (%v)", i, err, res)
	}
	br, err := e.Evaluate(e.ChoiceFrom(vars, res.Values))
	if err != nil {
		t.Fatalf("case %d: the transport MILP's choice: %v", i, err)
	}
	if math.Abs(br.Seconds-want) > exactTolerance*want || math.Abs(res.Objective/encode.MILPTimeUnit-want) > exactTolerance*want {
		t.Errorf("case %d: transport MILP's optimum %.9g s (objective %.9g s), enumeration %.9g s", i, br.Seconds, res.Objective/encode.MILPTimeUnit, want)
	}
	plainModel, _ := e.MILPBelow(0)
	plain := lpSeconds(t, plainModel)
	withMemory := lpSeconds(t, model)
	noMemoryModel, _ := e.TransportMILP(0, encode.BoundOptions{})
	noMemory := lpSeconds(t, noMemoryModel)
	above := func(a, b float64) bool { return a > b*(1+exactTolerance)+1e-12 }
	if above(withMemory, want) || above(noMemory, withMemory) || above(plain, withMemory) {
		t.Errorf("case %d: LP bounds plain %.9g, transport %.9g, transport without memory %.9g s: want plain, without memory ≤ transport ≤ the optimum %.9g", i, plain, withMemory, noMemory, want)
	}
	for _, o := range []encode.BoundOptions{{Memory: true}, {}} {
		full := withMemory
		if !o.Memory {
			full = noMemory
		}
		leanModel, _ := e.TransportLP(0, o)
		lean := lpSeconds(t, leanModel)
		// The lean LP leaves rows out, so it is never above the
		// relaxation; it may be below where what it leaves out costs
		// something at the LP's point: a pad's launch overhead
		// (cost.LaunchOverhead) with the aggregated covers, in 5 of the
		// 200 exhaustive cases, by up to 5.4% (TransportLP's comment).
		if above(lean, full) || lean < full*(1-leanLPSlack) {
			t.Errorf("case %d: TransportLP %.9g s, the transport MILP's relaxation %.9g s (memory rows %v): want it at most the relaxation and within %g of it", i, lean, full, o.Memory, leanLPSlack)
		}
		// Bounded by the optimum's cost (within the enumeration's
		// tolerance), as the synthesizer bounds it by a start's, every
		// column is capped: the optimum stays feasible.
		capped, capVars := e.TransportLP(max(want, br.Seconds)*(1+exactTolerance), o)
		if c := lpSeconds(t, capped); above(c, want) {
			t.Errorf("case %d: TransportLP with its columns capped %.9g s: want at most the optimum %.9g s (memory rows %v)", i, c, want, o.Memory)
		}
		// Branched on the op classes' rules and the leaves' layouts, a
		// little and to its end, the LP still bounds the optimum, and
		// its bound is no lower than the LP's.
		lp := lpSeconds(t, capped)
		for _, lps := range []int{4, 400} {
			r, err := cbc.Solver{}.Solve(context.Background(), capped, milp.Options{Choices: e.BoundChoices(capVars, e.ChoiceFrom(vars, res.Values)), NodeLimit: lps})
			if err != nil {
				t.Fatalf("case %d: the branched LP: %v", i, err)
			}
			if b := r.Bound / encode.MILPTimeUnit; above(b, want) || above(lp, b) || lps == 400 && r.Status != milp.Optimal {
				t.Errorf("case %d: the LP branched with %d LPs: %v, bound %.9g s; want at least the LP's %.9g s and at most the optimum %.9g s (memory rows %v)", i, lps, r.Status, b, lp, want, o.Memory)
			}
		}
		e.Fix(capped, capVars, e.ChoiceFrom(vars, res.Values))
		if c := lpSeconds(t, capped); above(c, br.Seconds) {
			t.Errorf("case %d: TransportLP capped, pinned to the optimum's program: %.9g s, want at most its cost %.9g s (memory rows %v)", i, c, br.Seconds, o.Memory)
		}
	}
	// The work LP bounds the optimum. It is not always below the
	// transport LP: since the launch overheads (issue 69) a step of these
	// cases is mostly fixed compute every device pays, which the work LP
	// charges whole while the transport LP's relaxation charged less of
	// it (the tied-weight cases: 227.5 µs of compute on each device, the
	// transport LP 217.0 µs); the synthesizer reports the higher of the
	// two (liftBound).
	work := workBound(context.Background(), e)
	if above(work, want) || !(work > 0) {
		t.Errorf("case %d: work LP %.9g s: want in (0, the optimum %.9g]", i, work, want)
	}
	return above(withMemory, plain)
}

// The transport LP bounds the plan far more tightly than the joint MILP's
// own root on a model whose step is mostly communication, and the
// synthesizer reports it: mlp-tiny on paper-8 under Adam (measured: the
// plain root LP 0.195 ms, the transport LP 0.526 ms, the plan 2.108 ms).
func TestTransportLPBoundsTheSynthesizedPlan(t *testing.T) {
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	starts := strategyStarts(g, c)
	res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: starts})
	if err != nil {
		t.Fatal(err)
	}
	plainModel, _ := res.Encoding.MILPBelow(res.Objective)
	plain := lpSeconds(t, plainModel)
	transportModel, _ := res.Encoding.TransportMILP(res.Objective, encode.BoundOptions{Memory: true})
	transport := lpSeconds(t, transportModel)
	t.Logf("plan %.4g ms, bound %.4g ms; root LPs: plain %.4g ms, transport %.4g ms", 1e3*res.Objective, 1e3*res.Bound, 1e3*plain, 1e3*transport)
	if res.BoundBy != BoundTransportLP || res.Bound > res.Objective || res.Bound < transport*(1-exactTolerance) {
		t.Errorf("bound %g s (by %v) for a plan of %g s: want the transport LP's %g s", res.Bound, res.BoundBy, res.Objective, transport)
	}
	if transport < 2*plain {
		t.Errorf("transport LP %g s against the plain %g s: want it at least twice as tight here", transport, plain)
	}
}

// lpWithout is the LP relaxation of model with the rows whose names start
// with prefix left out, in seconds.
func lpWithout(t *testing.T, model *milp.Model, prefix string) float64 {
	t.Helper()
	cut := *model
	cut.Rows = nil
	for _, r := range model.Rows {
		if !strings.HasPrefix(r.Name, prefix) {
			cut.Rows = append(cut.Rows, r)
		}
	}
	if len(cut.Rows) == len(model.Rows) {
		t.Fatalf("the model has no %s rows", prefix)
	}
	cut.Cols = slices.Clone(model.Cols)
	return lpSeconds(t, &cut)
}

// The stream row (encode's syncRows: the communication stream runs all its
// collectives before the update) cuts off no choice but lifts the
// transport LP where the step is mostly communication: on mlp-tiny on
// paper-8, at dp-ev's step (2.354 ms), from 0.785 to 1.118 ms (before
// issue 69's launch overheads and latencies, 0.526 to 1.052 ms). The joint
// MILP goes without it (its ten nodes found a worse plan with it).
func TestStreamRowLiftsTheLP(t *testing.T) {
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		t.Fatal(err)
	}
	e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := e.ChoiceOf(p)
	if !ok {
		t.Fatal("dp-ev is not a choice of the encoding")
	}
	br, err := e.Evaluate(ch)
	if err != nil {
		t.Fatal(err)
	}
	transport, _ := e.TransportMILP(br.Seconds, encode.BoundOptions{})
	without := lpWithout(t, transport, "stepstream_")
	with := lpSeconds(t, transport)
	t.Logf("transport LP: %.4g ms without the stream row, %.4g ms with it (dp-ev %.4g ms)", 1e3*without, 1e3*with, 1e3*br.Seconds)
	if with < 1.35*without || with > br.Seconds*(1+exactTolerance) {
		t.Errorf("transport LP: %.4g s with the stream row, %.4g s without, for a program of %.4g s: want it 1.35× above at least (measured 1.43×), and below the program", with, without, br.Seconds)
	}
	joint, _ := e.MILPBelow(br.Seconds)
	for _, r := range joint.Rows {
		if strings.HasPrefix(r.Name, "stepstream_") {
			t.Fatalf("the joint MILP has the stream row %s", r.Name)
		}
	}
}

// With AnyOrderBound the bound is the any-order LP's, over every plan in
// every issue order: never the joint MILP's, which holds over list-ordered
// plans only, so without the LP only the work LP's bound holds (which
// holds in every order too), and the MILP's "optimal" is not claimed.
func TestAnyOrderBoundIsTheLPsAlone(t *testing.T) {
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	starts := strategyStarts(g, c)
	opt := Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: starts}
	list, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.AnyOrderBound = true
	anyOrder, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("list-order bound %.4g ms, any-order %.4g ms, plan %.4g ms", 1e3*list.Bound, 1e3*anyOrder.Bound, 1e3*anyOrder.Objective)
	if !anyOrder.AnyOrder || anyOrder.BoundBy != BoundTransportLP || list.AnyOrder {
		t.Errorf("any-order %v by %v (list-order result: any-order %v)", anyOrder.AnyOrder, anyOrder.BoundBy, list.AnyOrder)
	}
	if !(anyOrder.Bound > 0) || anyOrder.Bound > list.Bound*(1+exactTolerance) || anyOrder.Bound > anyOrder.Objective {
		t.Errorf("any-order bound %g s, list-order %g s, plan %g s: want 0 < any-order ≤ both", anyOrder.Bound, list.Bound, anyOrder.Objective)
	}

	// The LP fails: the joint MILP proves the tiny model optimal over
	// list-ordered plans (no node limit), which is no bound over orders.
	opt.NodeLimit = 0
	opt.BoundSolver = &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
		return nil, fmt.Errorf("%w: signal: killed", cbc.ErrSolverProcess)
	}}
	failed, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	work := workBound(context.Background(), failed.Encoding)
	if failed.Bound != work || !(work > 0) || failed.Status == milp.Optimal.String() || !failed.AnyOrder || failed.BoundBy != BoundWorkLP {
		t.Errorf("the LP failed: bound %g (by %v), status %s, any-order %v: want the work LP's %g, not optimal", failed.Bound, failed.BoundBy, failed.Status, failed.AnyOrder, work)
	}
}

// Under a time limit the joint MILP runs to the deadline, and the
// transport LP beside it still gives the plan its bound: mlp-tiny on
// paper-8, whose proof takes CBC over a thousand nodes, with 4 s. (Both
// solves run in child processes there, and both used to take CBC's
// process-wide lock: the LP waited for the joint MILP, past the deadline,
// and the plan reported the joint MILP's bound alone — on gpt2 modern-24
// with --time-limit 5m, none at all, where ten nodes report 0.262 s.)
func TestTimeLimitedSearchKeepsTheLPBound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs to a 4 s time limit")
	}
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	starts := strategyStarts(g, c)
	res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), TimeLimit: 4 * time.Second, Starts: starts})
	if err != nil {
		t.Fatal(err)
	}
	transportModel, _ := res.Encoding.TransportMILP(res.Objective, encode.BoundOptions{})
	transport := lpSeconds(t, transportModel)
	t.Logf("plan %.4g ms, status %s, stopped by %v, bound %.4g ms (by %v); transport LP %.4g ms", 1e3*res.Objective, res.Status, res.StoppedBy, 1e3*res.Bound, res.BoundBy, 1e3*transport)
	if res.Status == milp.Optimal.String() {
		t.Skip("the joint MILP proved its plan within the limit: nothing here waits on it")
	}
	if res.Bound < transport*(1-exactTolerance) {
		t.Errorf("bound %g s (by %v) for a plan of %g s under a time limit: want at least the transport LP's %g s", res.Bound, res.BoundBy, res.Objective, transport)
	}
}

// slowSolver answers as CBC does, after a delay: a bound LP that takes
// most of a time limit.
type slowSolver struct{ delay time.Duration }

func (s slowSolver) Solve(ctx context.Context, m *milp.Model, opt milp.Options) (*milp.Result, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return cbc.Solver{}.Solve(ctx, m, opt)
}

// The bound LP starts before Polish, so it has the whole time limit, not
// the half Polish leaves: an LP that takes 70% of the limit still bounds
// the plan (bert-base-tiny on paper-8 with --time-limit 6s reported the
// joint MILP's gap of 83% when the LP started after Polish; started
// before, it proves the plan within 0.008%).
func TestBoundLPHasTheWholeTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs to a 4 s time limit")
	}
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	const limit = 4 * time.Second
	res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), TimeLimit: limit, Starts: strategyStarts(g, c),
		BoundSolver: slowSolver{delay: limit * 7 / 10}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != milp.Optimal.String() && res.BoundBy != BoundTransportLP {
		t.Errorf("bound %g s for a plan of %g s, not from the LP: the LP did not finish within the limit", res.Bound, res.Objective)
	}
}

// The work LP bounds every program of the full-size models: each
// hand-written strategy the encoding expresses costs at least its
// optimum, on a mixed cluster and on a homogeneous one; and where the
// devices are alike and their links fast, compute is most of the step and
// the bound is close: GPT-2 on a100-8 at its default batch, 0.2346 s,
// where the best start costs 0.2379 s and hap's plan 0.2348 s (the
// transport LP proves 0.2347 s).
func TestWorkLPBoundsEveryStart(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size models")
	}
	for _, tc := range []struct{ model, cluster string }{
		{"gpt2", "a100-8"}, {"gpt2", "paper-8"}, {"bert-moe", "paper-8"}, {"vgg19", "paper-16"}, {"vit", "modern-24"},
	} {
		g, c, m := zooOn(t, tc.model, models.Options{}, tc.cluster)
		e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
		if err != nil {
			t.Fatal(err)
		}
		work := workBound(context.Background(), e)
		if !(work > 0) {
			t.Fatalf("%s on %s: work LP %g s", tc.model, tc.cluster, work)
		}
		best, priced := math.Inf(1), 0
		for _, name := range strategy.Names() {
			p, err := strategy.Build(name, g, c)
			if err != nil {
				continue
			}
			ch, ok := e.ChoiceOf(p)
			if !ok {
				continue
			}
			br, err := e.Evaluate(ch)
			if err != nil {
				continue
			}
			priced++
			best = min(best, br.Seconds)
			if work > br.Seconds*(1+exactTolerance) {
				t.Errorf("%s on %s: work LP %.6g s above %s's %.6g s", tc.model, tc.cluster, work, name, br.Seconds)
			}
		}
		t.Logf("%s on %s: work LP %.4g s, best of %d starts %.4g s", tc.model, tc.cluster, work, priced, best)
		if priced == 0 {
			t.Errorf("%s on %s: no start priced", tc.model, tc.cluster)
		}
		if tc.model == "gpt2" && tc.cluster == "a100-8" && work < 0.98*best {
			t.Errorf("gpt2 on a100-8: work LP %.6g s, best start %.6g s: want within 2%% (compute is the step; measured 1.2%%)", work, best)
		}
	}
}

// A search the clock stops before the transport LP, and the joint MILP's
// root, have finished still proves the work LP's bound, which holds for
// every plan in every order: not bound 0 and gap 100%, which bert-moe on
// paper-8 with --time-limit 10s reported (its transport LP takes about
// 30 s, the joint MILP's root 12 s).
func TestWorkLPBoundsAPlanWhoseLPsDidNotFinish(t *testing.T) {
	g, c, m := zooOn(t, "gpt2-tiny", models.Options{}, "a100-8")
	const limit = time.Second
	// CBC stopped by its clock with nothing proven, as when the root LP
	// outlasts the limit; and a transport LP still running at the
	// deadline.
	stopped := &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
		return &milp.Result{Status: milp.NoSolution, StoppedBy: milp.LimitTime, Objective: math.NaN(), Bound: math.Inf(-1), Gap: math.Inf(1)}, nil
	}}
	res, err := Synthesize(context.Background(), g, m, Options{Optimizer: ir.Adam(1e-3), TimeLimit: limit, Starts: strategyStarts(g, c),
		JointSolver: stopped, BoundSolver: slowSolver{delay: 100 * limit}})
	if err != nil {
		t.Fatal(err)
	}
	work := workBound(context.Background(), res.Encoding)
	t.Logf("plan %.4g ms, status %s, bound %.4g ms by %v, gap %.1f%%", 1e3*res.Objective, res.Status, 1e3*res.Bound, res.BoundBy, 100*res.Gap)
	if !(work > 0) || res.Bound != work || res.BoundBy != BoundWorkLP || res.Gap != milp.Gap(res.Objective, work) || !res.TimeLimited {
		t.Errorf("bound %g s by %v, gap %g, time-limited %v, for a plan of %g s: want the work LP's %g s and its gap, time-limited", res.Bound, res.BoundBy, res.Gap, res.TimeLimited, res.Objective, work)
	}
}

// TransportLP, the bound's LP, leaves out rows the transport rows make
// redundant in the relaxation (encode's milpForm.lean): its optimum must
// be the transport MILP's relaxation's, not merely below it, on real
// models as on the exhaustive cases (checkTransport), in the list-order
// and any-order forms, with and without the memory rows. Measured on the
// paper, modern and tiny models too (docs/planner.md, "The lean LP"): the
// same bounds to nine digits, up to 20× faster and never slower.
func TestTransportLPKeepsTheBound(t *testing.T) {
	cases := []struct {
		model, cluster string
		o              encode.BoundOptions
	}{
		{"gpt2-tiny", "v100-8", encode.BoundOptions{}},
		{"vgg19-tiny", "paper-8", encode.BoundOptions{Memory: true}},
		{"mlp-tiny", "paper-8", encode.BoundOptions{AnyOrder: true}},
		{"bert-base-tiny", "paper-8", encode.BoundOptions{}},
	}
	if testing.Short() {
		cases = cases[:3]
	}
	for _, tc := range cases {
		e, seeds := encodedWithStarts(t, tc.model, models.Options{}, tc.cluster)
		_, limit := bestStart(e, seeds, timelineCost)
		fullModel, _ := e.TransportMILP(limit, tc.o)
		leanModel, _ := e.TransportLP(limit, tc.o)
		full, lean := lpSeconds(t, fullModel), lpSeconds(t, leanModel)
		t.Logf("%s on %s %+v: transport LP %.6g s in %d rows, lean %.6g s in %d rows (best start %.6g s)", tc.model, tc.cluster, tc.o, full, len(fullModel.Rows), lean, len(leanModel.Rows), limit)
		if math.Abs(full-lean) > exactTolerance*full {
			t.Errorf("%s on %s %+v: TransportLP %.9g s, the transport MILP's relaxation %.9g s: want them equal", tc.model, tc.cluster, tc.o, lean, full)
		}
		if len(leanModel.Rows) >= len(fullModel.Rows) {
			t.Errorf("%s on %s: TransportLP has %d rows, the transport MILP %d: want fewer", tc.model, tc.cluster, len(leanModel.Rows), len(fullModel.Rows))
		}
	}
}

// A bound LP the clock stops still proves what its duals prove
// (startBound, cbc's lp.go): a finite bound, at most the LP's optimum.
// BERT-MoE on paper-8 at batch 256, whose LP takes CBC about 11 s and the
// dual simplex 6 s, stopped after 2.5 and 5 s (half of each for Clp's
// initial solve, the rest for the dual simplex). How far the duals get is
// the machine's business, so it is logged, not asserted: measured 0.499
// and 0.523 s against the work LP's 0.500 s and the optimum's 1.039 s.
// (Not every LP's duals rise early: bert-base-tiny's prove 5e-9 s of its
// 7 ms after 1.5 s of its 6.)
func TestStoppedBoundLPProvesItsDuals(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a 19,000-row LP")
	}
	e, seeds := encodedWithStarts(t, "bert-moe", models.Options{Batch: 256}, "paper-8")
	_, limit := bestStart(e, seeds, timelineCost)
	optimum, ok, stopped := startBound(context.Background(), e, limit, encode.BoundOptions{}, 0, nil, nil, time.Time{}, 0).wait()
	if !ok || stopped {
		t.Fatalf("the LP run to its end: ok %v, stopped %v", ok, stopped)
	}
	work := workBound(context.Background(), e)
	// Stopped early, the LP has a bound once its dual simplex is under
	// way. When that is depends on the machine's load (a CI run beside
	// other solves gave none after 2.5 s), so the stops lengthen until one
	// gives a bound; every bound given must be valid. The last stop runs
	// only when none before it gave one (a CI run with two other planning
	// jobs on its two cores got none from the first three). The kill
	// comes as long after the stop as the stop itself: one second after,
	// a CI run on a machine at a load of 10 killed every stop, 30 s
	// included, before Clp had stopped, and got no bound at all (its clock
	// was then its process's CPU time; it is now the wall clock, which
	// starts once the child has started and read the model).
	proved := 0
	for _, after := range []time.Duration{2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
		if after > 10*time.Second && proved > 0 {
			break
		}
		got, ok, stopped := startBound(context.Background(), e, limit, encode.BoundOptions{}, 0, nil, nil, time.Now().Add(after), after).wait()
		t.Logf("stopped after %v: bound %.6g s (ok %v, stopped %v); work LP %.6g s, LP optimum %.6g s", after, got, ok, stopped, work, optimum)
		if !ok {
			continue // no bound yet
		}
		if !(got > 0) || got > optimum*(1+exactTolerance) {
			t.Errorf("after %v: bound %.9g s, want in (0, the LP's optimum %.9g s]", after, got, optimum)
		}
		if stopped {
			proved++
		}
	}
	if proved == 0 {
		t.Fatal("no stop gave a bound from the stopped LP")
	}
}

// Synthesize reports a stopped LP's bound as such (BoundTransportLPStopped)
// when it is the highest, in list order and over every order, and solves
// the LP as loaded, within the time limit.
func TestSynthesizeRecordsAStoppedLPsBound(t *testing.T) {
	g, c, m := zooOn(t, "gpt2-tiny", models.Options{}, "a100-8")
	failed := &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
		return nil, fmt.Errorf("%w: signal: killed", cbc.ErrSolverProcess)
	}}
	opt := Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: strategyStarts(g, c), BoundSolver: failed}
	for _, anyOrder := range []bool{false, true} {
		opt.AnyOrderBound = anyOrder
		opt.BoundSolver = failed
		without, err := Synthesize(context.Background(), g, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		// Above what the search proved without the LP, below the plan.
		partial := (without.Bound + without.Objective) / 2
		opt.BoundSolver = &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
			return &milp.Result{Status: milp.NoSolution, StoppedBy: milp.LimitTime, Objective: math.NaN(), Bound: partial * encode.MILPTimeUnit, Gap: math.Inf(1)}, nil
		}}
		res, err := Synthesize(context.Background(), g, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("any order %v: plan %.6g ms, bound without the LP %.6g ms by %v, with the stopped LP's %.6g ms by %v", anyOrder, 1e3*res.Objective, 1e3*without.Bound, without.BoundBy, 1e3*res.Bound, res.BoundBy)
		if res.BoundBy != BoundTransportLPStopped || res.AnyOrder != anyOrder || math.Abs(res.Bound-partial) > 1e-12 || res.Gap != milp.Gap(res.Objective, res.Bound) {
			t.Errorf("any order %v: bound %g s by %v (any order %v), gap %g: want the stopped LP's %g s", anyOrder, res.Bound, res.BoundBy, res.AnyOrder, res.Gap, partial)
		}
	}
	// Under a time limit the LP gets the clock, and a stopped one its
	// duals' bound.
	opt = Options{Optimizer: ir.Adam(1e-3), TimeLimit: 2 * time.Second, Starts: strategyStarts(g, c), BoundSolver: failed}
	if _, err := Synthesize(context.Background(), g, m, opt); err != nil {
		t.Fatal(err)
	}
	for i, o := range failed.opts {
		limited := i == len(failed.opts)-1
		if !o.DualBoundOnStop || limited != (o.TimeLimit > 0) || o.TimeLimit > opt.TimeLimit {
			t.Errorf("bound LP %d (time-limited search %v) solved with %+v: want its duals' bound on a stop, within the time limit when there is one", i, limited, o)
		}
	}
}

// TransportLP caps every column so that a stopped solve's duals prove a
// finite bound; the caps must cut off no plan within the step bound. Every
// start of the synthesizer, pinned in the LP bounded by the slowest's
// cost, stays feasible at no more than its cost. With the all-to-all
// columns capped at the step's bound, bert-base's LP on paper-32 at batch
// 1024 was infeasible: an all-to-all a plan does not make can cost more
// than its step.
func TestTransportLPKeepsEveryStart(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size models")
	}
	for _, tc := range []struct {
		model, cluster string
		batch          int
		o              encode.BoundOptions
	}{
		{"bert-base", "paper-32", 1024, encode.BoundOptions{}},
		{"bert-moe", "paper-8", 32, encode.BoundOptions{}},
		{"gpt2", "modern-24", 24, encode.BoundOptions{AnyOrder: true}},
		{"vgg19", "paper-16", 512, encode.BoundOptions{Memory: true}},
	} {
		e, seeds := encodedWithStarts(t, tc.model, models.Options{Batch: tc.batch}, tc.cluster)
		// Bounded by the best start's cost, as the synthesizer bounds it
		// (where the cap bites hardest), and by the slowest's, so that
		// every start is within the bound.
		best, slowest := math.Inf(1), 0.0
		for _, ch := range seeds {
			if br, err := e.Evaluate(ch); err == nil {
				best, slowest = min(best, br.Seconds), max(slowest, br.Seconds)
			}
		}
		pinned := 0
		for _, limit := range []float64{best, slowest} {
			for _, ch := range seeds {
				br, err := e.Evaluate(ch)
				if err != nil || br.Seconds > limit {
					continue // the bound cuts it off, as it should
				}
				model, vars := e.TransportLP(limit, tc.o)
				e.Fix(model, vars, ch)
				relax(model)
				res, err := cbc.Solver{}.Solve(context.Background(), model, milp.Options{})
				if err != nil || res.Status != milp.Optimal || res.Objective/encode.MILPTimeUnit > br.Seconds*(1+exactTolerance) {
					t.Errorf("%s on %s: a start of %.6g s pinned in TransportLP bounded by %.6g s: %v %v, want feasible at most its cost", tc.model, tc.cluster, br.Seconds, limit, res, err)
				}
				pinned++
			}
		}
		t.Logf("%s on %s: %d starts pinned within %.6g and %.6g s", tc.model, tc.cluster, pinned, best, slowest)
	}
}

// encodedWithStarts encodes a zoo model on a cluster as the synthesizer
// does, with the hand-written strategies the encoding expresses as its
// starts.
func encodedWithStarts(t *testing.T, model string, opt models.Options, clusterName string) (*encode.Encoding, []*encode.Choice) {
	t.Helper()
	g, c, m := zooOn(t, model, opt, clusterName)
	e, err := encode.Encode(g, CandidateSegments(g), m, encode.EncodeOptions{Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	var seeds []*encode.Choice
	for _, p := range strategyStarts(g, c) {
		if ch, ok := e.ChoiceOf(p); ok {
			seeds = append(seeds, ch)
		}
	}
	return e, seeds
}

// TransportFor solves the LP Synthesize solves beside its search (the same
// bound), and given it as Options.Bound, Synthesize takes it rather than
// solve the LP again: the same plan and bound, and no bound LP solved.
// Asked for another form (branching; the other order), it solves its own.
func TestTransportForIsSynthesizesBound(t *testing.T) {
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	opt := Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: strategyStarts(g, c)}
	lp, ok, err := TransportFor(context.Background(), g, m, opt, 0, 0)
	if err != nil || !ok || lp.Stopped || lp.AnyOrder {
		t.Fatalf("TransportFor: %+v, %v, %v", lp, ok, err)
	}
	own, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	if own.BoundBy != BoundTransportLP || math.Abs(own.Bound-lp.Seconds) > exactTolerance*own.Bound {
		t.Fatalf("Synthesize's bound %g s by %v, TransportFor's %g s: want the same LP's", own.Bound, own.BoundBy, lp.Seconds)
	}
	counted := &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
		return nil, errors.New("the bound LP was solved again")
	}}
	given := opt
	given.Bound, given.BoundSolver = &lp, counted
	res, err := Synthesize(context.Background(), g, m, given)
	if err != nil {
		t.Fatal(err)
	}
	if counted.calls != 0 || res.Objective != own.Objective || res.Bound != lp.Seconds || res.BoundBy != BoundTransportLP {
		t.Errorf("given the bound: %d LPs solved, plan %g s, bound %g s by %v; want none, %g s, %g s by the transport LP", counted.calls, res.Objective, res.Bound, res.BoundBy, own.Objective, lp.Seconds)
	}
	for _, other := range []func(*Options){
		func(o *Options) { o.BoundLPs = 2 },
		func(o *Options) { o.AnyOrderBound = true },
	} {
		o := given
		other(&o)
		counted.calls = 0
		if _, err := Synthesize(context.Background(), g, m, o); err != nil {
			t.Fatal(err)
		}
		if counted.calls == 0 {
			t.Errorf("BoundLPs %d, any order %v: the given bound was taken for another form of the LP", o.BoundLPs, o.AnyOrderBound)
		}
	}
}

// TransportFor with a cutoff below the LP's optimum stops with what its
// duals prove, between the two (Cut), which Synthesize does not take as
// its own bound, or solves the LP; with the cutoff above it, it solves
// the LP, capped by a start's step (which cuts off no plan as fast, so its
// optimum is at least the uncapped one's, and at most the start's).
func TestTransportForStopsAtTheCutoff(t *testing.T) {
	for _, model := range []string{"mlp-tiny"} {
		g, c, m := zooOn(t, model, models.Options{}, "paper-8")
		opt := Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: strategyStarts(g, c)}
		ideal, err := IdealFor(context.Background(), g, m, opt)
		if err != nil || ideal.StartSeconds <= 0 {
			t.Fatalf("%s: IdealFor: %+v, %v: want a start's step", model, ideal, err)
		}
		full, ok, err := TransportFor(context.Background(), g, m, opt, 0, 0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		capped, ok, err := TransportFor(context.Background(), g, m, opt, ideal.StartSeconds, 2*ideal.StartSeconds)
		if err != nil || !ok || capped.Cut || capped.Seconds < full.Seconds*(1-exactTolerance) || capped.Seconds > ideal.StartSeconds {
			t.Errorf("%s: capped by the start's %g s, cut off above it: %+v, %v, %v; want an optimum from %g s to the start's", model, ideal.StartSeconds, capped, ok, err, full.Seconds)
		}
		cuts := 0
		for _, frac := range []float64{0.2, 0.5, 0.9} {
			cutoff := frac * full.Seconds
			cut, ok, err := TransportFor(context.Background(), g, m, opt, ideal.StartSeconds, cutoff)
			if err != nil || !ok || cut.Seconds < cutoff*(1-exactTolerance) || cut.Seconds > capped.Seconds*(1+exactTolerance) || (!cut.Cut && math.Abs(cut.Seconds-capped.Seconds) > exactTolerance*capped.Seconds) {
				t.Fatalf("%s: cutoff %g s: %+v, %v, %v; want a bound between it and the optimum %g s", model, cutoff, cut, ok, err, capped.Seconds)
			}
			t.Logf("%s: cutoff %.4g ms: %.4g ms proven (cut %v; optimum %.4g ms)", model, 1e3*cutoff, 1e3*cut.Seconds, cut.Cut, 1e3*capped.Seconds)
			if cut.Cut {
				cuts++
				if cut.reuse(opt, false) != nil {
					t.Errorf("%s: cutoff %g s: a bound cut off short of the optimum taken as Synthesize's", model, cutoff)
				}
			}
		}
		if model == "mlp-tiny" && cuts == 0 {
			t.Errorf("%s: no cutoff stopped the LP", model)
		}
	}
}

// Synthesize says where its time went (Result.Phases), and as it goes
// what it waits for (Options.Progress): encoding, Polish and what came
// after it add up to its wall time, and the bound's LP,
// beside them, is counted to its end even where the plan waits for it
// after the search (here a scripted LP that takes lpWait, longer than the
// search on this small model), and not at all where the device search
// solved it before (Options.Bound).
func TestSynthesizeSaysWhereItsTimeWent(t *testing.T) {
	const lpWait = 1500 * time.Millisecond
	// phaseSlack is the clock's noise between the phases' ends and the
	// checks: goroutine wake-ups, not work.
	const phaseSlack = 0.05
	g, c, m := zooOn(t, "mlp-tiny", models.Options{}, "paper-8")
	slowLP := &scriptedSolver{answer: func(*milp.Model) (*milp.Result, error) {
		time.Sleep(lpWait)
		return nil, fmt.Errorf("%w: signal: killed", cbc.ErrSolverProcess)
	}}
	var said []string
	progress := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	opt := Options{Optimizer: ir.Adam(1e-3), NodeLimit: 10, Starts: strategyStarts(g, c), BoundSolver: slowLP, Progress: progress}
	res, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	// What it says as it goes: Polish's end, then what the plan waits for
	// (the slow LP at least).
	if len(said) != 2 || !strings.HasPrefix(said[0], "polished the best start") || !strings.Contains(said[1], "waiting for") || !strings.Contains(said[1], "the bound's LP") {
		t.Errorf("progress %q: want Polish's end, then the wait for the bound's LP", said)
	}
	p := res.Phases
	t.Logf("%.3f s: %+v", res.Seconds, p)
	if sum := p.Encode + p.Polish + p.AfterPolish; math.Abs(sum-res.Seconds) > 1e-6 {
		t.Errorf("encoding %g + Polish %g + after it %g = %g s, want the synthesis's %g s", p.Encode, p.Polish, p.AfterPolish, sum, res.Seconds)
	}
	if p.Polish <= 0 || p.JointSearch <= 0 || p.JointSearch > p.Polish+p.AfterPolish+phaseSlack {
		t.Errorf("Polish %g s, joint search %g s: want both run, the search within Polish and after it (%g s)", p.Polish, p.JointSearch, p.Polish+p.AfterPolish)
	}
	if p.BoundLP < lpWait.Seconds() || p.BoundLP > res.Seconds || res.Seconds < lpWait.Seconds() {
		t.Errorf("bound LP %g s of a synthesis of %g s: want the scripted LP's %v, waited for", p.BoundLP, res.Seconds, lpWait)
	}
	// Solved before (the device search's screen): not solved again, no
	// time of its own.
	opt.Bound = &LPBound{Seconds: res.Objective / 2}
	reused, err := Synthesize(context.Background(), g, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	if reused.Phases.BoundLP != 0 || reused.Seconds >= lpWait.Seconds() {
		t.Errorf("with the bound solved before: bound LP %g s, synthesis %g s; want none, and no wait for it", reused.Phases.BoundLP, reused.Seconds)
	}
}
