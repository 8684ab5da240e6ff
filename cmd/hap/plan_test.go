package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"hap/order"
	"hap/plan"
	"hap/sim"
	"hap/solve"
)

// The acceptance matrix: hap verify passes for every tiny zoo
// model under dp-ev, dp-cp, megatron and zero3 (and ep for MoE) on paper-8,
// in float32 (1e-5) and float64 (1e-10) — megatron and tp on the models
// with attention or feed-forward layers to split: on the MLP and VGG they
// refuse (TestEveryStrategyOnOneDevice).
func TestVerifyTinyZooOnPaper8(t *testing.T) {
	models := []string{"mlp-tiny", "bert-base-tiny", "vit-tiny", "vgg19-tiny", "bert-moe-tiny"}
	for _, m := range models {
		strategies := []string{"dp-ev", "dp-cp", "megatron", "tp", "zero3"}
		if m == "mlp-tiny" || m == "vgg19-tiny" {
			strategies = []string{"dp-ev", "dp-cp", "zero3"}
		}
		if m == "bert-moe-tiny" {
			strategies = append(strategies, "ep")
		}
		for _, s := range strategies {
			for _, dt := range []string{"float32", "float64"} {
				code, out, errs := runCLI("verify", "--model", m, "--cluster", "paper-8", "--strategy", s, "--dtype", dt, "--json")
				if code != 0 {
					t.Errorf("%s %s %s: exit %d: %s %s", m, s, dt, code, errs, out)
					continue
				}
				var rep struct{ Pass bool }
				if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Pass {
					t.Errorf("%s %s %s: %s", m, s, dt, out)
				}
			}
		}
	}
}

func TestPlanFileThenVerifySimulateExplain(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.json")
	code, out, errs := runCLI("plan", "--model", "bert-moe-tiny", "--cluster", "paper-8", "--strategy", "ep", "-o", f, "--json")
	if code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "model", "cluster", "ratios", "program", "cost", "solver"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("plan lacks %q", k)
		}
	}
	var c struct {
		StepSeconds float64           `json:"step_seconds"`
		PerDevice   []json.RawMessage `json:"per_device"`
	}
	json.Unmarshal(doc["cost"], &c)
	if c.StepSeconds <= 0 || len(c.PerDevice) != 8 {
		t.Errorf("cost %+v", c)
	}
	// Same inputs, same bytes.
	_, again, _ := runCLI("plan", "--model", "bert-moe-tiny", "--cluster", "paper-8", "--strategy", "ep", "--json")
	if again != out {
		t.Error("planning twice gave different bytes")
	}
	if code, _, errs := runCLI("verify", f); code != 0 {
		t.Errorf("verify: %d %s", code, errs)
	}
	trace := filepath.Join(dir, "trace.json")
	if code, _, errs := runCLI("simulate", f, "--trace", trace); code != 0 {
		t.Errorf("simulate: %d %s", code, errs)
	}
	if b, err := os.ReadFile(trace); err != nil || !bytes.Contains(b, []byte("traceEvents")) {
		t.Errorf("trace: %v", err)
	}
	code, out, errs = runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "Ratios") || !strings.Contains(out, "dp-ev") {
		t.Errorf("explain: %d %s %s", code, errs, out)
	}
}

func TestPlanCommandsRejectBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema":"hap.plan/v9"}`), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plan", "--model", "mlp-tiny"}, 2, "need --model and --cluster"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--time-limit", "-3s"}, 2, "--time-limit"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "zero9"}, 2, `--strategy "zero9": unknown`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "nowhere", "--strategy", "dp-ev"}, 1, "nowhere"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "ep"}, 1, "no mixture-of-experts"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "modern-24", "--strategy", "tp"}, 1, "tp: graph mlp-tiny has no attention op"},
		{[]string{"plan", "--model", "vgg19-tiny", "--cluster", "paper-16", "--strategy", "megatron"}, 1, "tp: graph vgg19-tiny has no attention op"},
		{[]string{"verify", bad}, 1, "schema"},
		{[]string{"verify", filepath.Join(dir, "missing.json")}, 1, "no such file"},
		{[]string{"simulate"}, 2, "want one plan file"},
		{[]string{"simulate", bad, "--order-window", "3"}, 2, "need --search-order"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--order-rounds", "3"}, 2, "--order-rounds continues the synthesizer's --search-order"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--search-order", "--order-rounds", "3"}, 2, "--order-rounds continues"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--search-order", "--order-rounds", "-1"}, 2, "--order-rounds -1: must be positive"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--search-order", "--order-rounds", "3", "--time-limit", "5s"}, 2, "--order-rounds is bounded by its rounds and nodes, not by the clock"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--devices", "all"}, 2, "--devices shape the synthesizer's search"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "some"}, 2, `--devices "some": want all, machines, types or kinds, or a list of devices`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-16", "--devices", "0-x"}, 2, `--devices "0-x": "0-x" is not a range of device indices (like 0-3)`},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-16", "--devices", "1"}, 2, "--devices 1: device 1 is GPU 1 of node"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-16", "--devices", "0-16"}, 2, "--devices 0-16: device 16: the cluster has devices 0–15"},
		{[]string{"simulate", bad, "--search-order", "--order-window", "0"}, 2, "at least 1"},
		{[]string{"explain", bad}, 1, "schema"},
		{[]string{"verify", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--dtype", "int64"}, 2, "--dtype"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--memory-fraction", "1.5"}, 2, "--memory-fraction 1.5"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--memory-fraction", "-0.1"}, 2, "--memory-fraction -0.1"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--node-limit", "5"}, 2, "built by hand"},
		{[]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-ev", "--memory-fraction", "0.5"}, 2, "built by hand"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != c.code || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d stderr %q; want exit %d mentioning %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// simulate --search-order simulates the best communication order Z3 finds and says how the search
// ended, in text and in JSON: mlp-tiny's own order meets the order bound, so Z3 is not asked; a
// budget of one unit of work stops the search on mlp at once, at the plan's own order.
func TestSimulateSearchesTheOrder(t *testing.T) {
	dir := t.TempDir()
	tiny, f := filepath.Join(dir, "tiny.json"), filepath.Join(dir, "plan.json")
	// mlp-tiny is hap's own plan (one V100: no collective to reorder); its
	// dp-ev plan's all-reduces now gain by a reorder, their base latencies
	// and 25 µs network steps being most of its step (issue 69's costs).
	for model, file := range map[string]string{"mlp-tiny": tiny, "mlp": f} {
		args := []string{"plan", "--model", model, "--cluster", "paper-8", "-o", file}
		if model == "mlp" {
			args = append(args, "--strategy", "dp-ev")
		}
		if code, _, errs := runCLI(args...); code != 0 {
			t.Fatalf("plan %s: %d %s", model, code, errs)
		}
	}
	code, out, errs := runCLI("simulate", tiny, "--search-order")
	if code != 0 || !strings.Contains(out, "meets the order bound") || !strings.Contains(out, "Z3 was not asked") {
		t.Fatalf("simulate --search-order: %d %s %s", code, errs, out)
	}
	// explain says so too, and for mlp, how much an order could gain.
	for file, want := range map[string]string{tiny: "the list order; it meets the order bound", f: "the list order, not searched; no order of the collectives makes the step shorter than"} {
		if code, out, errs := runCLI("explain", file); code != 0 || !strings.Contains(out, "Communication order: "+want) {
			t.Errorf("explain %s: %d %s; want %q in\n%s", filepath.Base(file), code, errs, want, out)
		}
	}
	code, out, errs = runCLI("simulate", f, "--search-order", "--order-budget", "1", "--json")
	var doc struct {
		Step  float64 `json:"step_seconds"`
		Order struct {
			Status string  `json:"status"`
			Before float64 `json:"before_seconds"`
			After  float64 `json:"after_seconds"`
			Bound  float64 `json:"bound_seconds"`
		} `json:"order_search"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("simulate --json: %d %s %s", code, errs, out)
	}
	if doc.Order.Status != "stopped" || doc.Order.After != doc.Order.Before || doc.Step != doc.Order.After || !(doc.Order.Bound > 0 && doc.Order.Bound < doc.Step) {
		t.Errorf("out of budget: %+v", doc)
	}
}

// plan --search-order --order-rounds searches programs, lengths and orders
// together and records how it ended: on mlp-tiny, two V100s of paper-8, its
// rounds end by the node limit, and the plan says so. Under the cost model
// before issue 69's calibration, the same search on all of paper-8 proved
// its plan optimal over every plan in every order; under the calibrated
// one no tiny case tried ends proven (mlp-tiny on paper-8, all devices,
// two or three of them, v100-8, at batch 8 and 1024, a node limit of
// 2000: the transport LP stays 1.7–22% below the plan), so the test holds
// what the search records, the bound below the step and explain's account.
func TestPlanSearchesOrdersJointly(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	code, out, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "0,1", "--search-order", "--order-rounds", "20", "-o", f)
	if code != 0 {
		t.Fatalf("plan --order-rounds: %d %s %s", code, errs, out)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	ended := pl.Solver.Options.JointOrder
	if ended.Ended != solve.OrderNoProposal || ended.Rounds < 1 || !(pl.Solver.Bound > 0 && pl.Solver.Bound <= pl.Solver.Objective) {
		t.Errorf("the joint search over orders: %+v, status %s, bound %g, objective %g; want it ended by the node limit after a round at least, the bound below the plan", ended, pl.Solver.Status, pl.Solver.Bound, pl.Solver.Objective)
	}
	code, out, errs = runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "programs, lengths and orders searched together") || !strings.Contains(out, string(solve.OrderNoProposal)) {
		t.Errorf("explain does not say what the joint search proved: %d %s %s", code, errs, out)
	}
}

// plan --search-order --time-limit D ends by D: the order search gets what the synthesis leaves
// (a quarter of D at least), Z3's checks the time left, and the plan records the search's limit.
// ViT on paper-16 at 512 plans on four V100s, whose order search ran 37 s past a 10 s limit.
func TestPlanSearchesTheOrderWithinTheTimeLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a full-size model's search for seconds")
	}
	f := filepath.Join(t.TempDir(), "plan.json")
	const limit = 4 * time.Second
	began := time.Now()
	code, out, errs := runCLI("plan", "--model", "vit", "--cluster", "paper-16", "--batch", "512", "--search-order", "--time-limit", limit.String(), "-o", f)
	took := time.Since(began)
	if code != 0 {
		t.Fatalf("plan --search-order --time-limit: %d %s %s", code, errs, out)
	}
	t.Logf("%v under a limit of %v: %s", took, limit, strings.TrimSpace(out))
	// The slack: the model built before the clock starts, the plan simulated and written after
	// (0.1 s on an idle machine; without a limit of its own the order search ran 35 s more).
	if took > limit+limit/2 {
		t.Errorf("plan --search-order --time-limit %v took %v", limit, took)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	o := pl.CommOrder
	if o == nil {
		t.Fatal("the plan has no searched order")
	}
	d, err := time.ParseDuration(o.TimeLimit)
	if err != nil || d <= 0 || d > limit {
		t.Errorf("comm_order.time_limit %q: want the order search's share of %v", o.TimeLimit, limit)
	}
	if o.Status == order.TimeLimit && !strings.Contains(out, "the time limit stopped Z3") {
		t.Errorf("stopped by the time limit, but the summary says: %s", out)
	}
}

// TestPlanRecordsTheSearchedOrder: plan --search-order writes the order into the plan, simulate
// replays it, and explain names the collectives it moves.
func TestPlanRecordsTheSearchedOrder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	code, out, errs := runCLI("plan", "--model", "mlp", "--cluster", "paper-8", "--strategy", "dp-ev", "--search-order", "--order-window", "2", "-o", f)
	if code != 0 || !strings.Contains(out, "(proven by Z3)") {
		t.Fatalf("plan --search-order: %d %s %s", code, errs, out)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if pl.CommOrder == nil || len(pl.CommOrder.Swaps) == 0 {
		t.Fatalf("the plan has no searched order: %+v", pl.CommOrder)
	}
	code, out, errs = runCLI("simulate", f, "--json")
	var sim struct {
		Step float64 `json:"step_seconds"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sim) != nil || sim.Step != pl.Cost.StepSeconds {
		t.Fatalf("simulate: %d %s: step %g, the plan says %g", code, errs, sim.Step, pl.Cost.StepSeconds)
	}
	code, out, errs = runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "Communication order (searched by Z3") || !strings.Contains(out, "all_reduce") ||
		!strings.Contains(out, "no order of the collectives makes the step shorter than") {
		t.Fatalf("explain: %d %s %s", code, errs, out)
	}
	if code, _, errs := runCLI("simulate", f, "-o", f); code != 2 || !strings.Contains(errs, "needs --search-order") {
		t.Errorf("simulate -o without --search-order: %d %s", code, errs)
	}
	// A swap naming no collective: one error, and explain prints nothing before it.
	pl.CommOrder.Swaps[0][1] = 1 << 20
	data, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"explain", "simulate"} {
		code, out, errs := runCLI(cmd, f)
		if code != 1 || out != "" || !strings.Contains(errs, "comm_order: swaps[0]") {
			t.Errorf("%s with a bad swap: exit %d, stdout %q, stderr %q", cmd, code, out, errs)
		}
	}
}

func TestCatalogAndClustersJSON(t *testing.T) {
	code, out, _ := runCLI("devices", "--json")
	if code != 0 {
		t.Fatal("devices failed")
	}
	for _, d := range []string{"P100", "V100", "T4", "A10", "L4", "A100", "H100", "H200", "3090", "4090"} {
		if !strings.Contains(out, d) {
			t.Errorf("catalog lacks %s", d)
		}
	}
	code, out, _ = runCLI("clusters", "--json")
	if code != 0 {
		t.Fatal("clusters failed")
	}
	for _, c := range []string{"paper-8", "paper-16", "paper-32", "paper-64", "paper-29", "v100-8", "a100-8"} {
		if !strings.Contains(out, `"`+c+`"`) {
			t.Errorf("clusters lack %s", c)
		}
	}
}

func TestRunCPU(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.json")
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--strategy", "dp-cp", "-o", f); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := runCLI("run", f, "--steps", "2", "--json")
	if code != 0 {
		t.Fatalf("run cpu: %d %s", code, errs)
	}
	var reps []struct {
		Loss      float64
		PerDevice []float64 `json:"per_device_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 2 || len(reps[0].PerDevice) != 8 {
		t.Fatalf("run output %q: %v", out, err)
	}
	// (TestCUDACommandsWithoutDriver checks --backend cuda without a
	// driver; TestRunCUDAOnStandIn with one.)
}

// A synthesized plan's explanation gives the solver's account: objective,
// proven bound, gap and what stopped the search; the plan records the
// node limit it ran under.
func TestSynthesizedPlanExplainsTheSolve(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	if code, out, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "all", "--node-limit", "5", "-o", f); code != 0 {
		t.Fatalf("plan: exit %d: %s %s", code, errs, out)
	}
	b, err := os.ReadFile(f)
	if err != nil || !bytes.Contains(b, []byte(`"node-limit"`)) {
		t.Fatalf("plan file lacks its node limit: %v", err)
	}
	code, out, errs := runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "proven bound") || !strings.Contains(out, "gap") {
		t.Errorf("explain: %d %s %s", code, errs, out)
	}
	// The bound is over tied plans, and says so: paper-8's two V100s and
	// six P100s are two groups of identical devices.
	if !strings.Contains(out, "the bound and gap are over tied plans (") || !strings.Contains(out, "2 device groups for 8 devices") ||
		!strings.Contains(out, "the bound holds over plans on all 8 devices; one on fewer may be faster") {
		t.Errorf("explain does not say what the bound is over:\n%s", out)
	}
	// It names the bottleneck device and what on it takes the time.
	for _, want := range []string{"bottleneck: device ", "bottleneck op: ", "costliest on device "} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	// Every all-gather and reduce-scatter shows its rejected method.
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == "all_gather" || f[1] == "reduce_scatter") && !strings.Contains(line, "grouped ") && !strings.Contains(line, "padded ") {
			t.Errorf("no rejected method in %q", line)
		}
	}
}

// The memory fraction the planner was given is recorded with the solver's
// options, so that a plan says what headroom it was made for.
func TestPlanRecordsTheMemoryFraction(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "0.9"}, {[]string{"--memory-fraction", "0.75"}, "0.75"}} {
		args := append([]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--node-limit", "5", "--json"}, tc.args...)
		code, out, errs := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var doc struct {
			Solver struct {
				Options []struct{ Name, Version string } `json:"options"`
			} `json:"solver"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, o := range doc.Solver.Options {
			if o.Name == "memory-fraction" {
				got = o.Version
			}
		}
		if got != tc.want {
			t.Errorf("%v: memory-fraction recorded as %q, want %q (options %v)", tc.args, got, tc.want, doc.Solver.Options)
		}
	}
}

// The plan's solver.seconds is 0 unless asked for, so that the same
// inputs give the same bytes; --record-time records it, with where it
// went (solver.phases), which hap explain then says; the summary line
// gives the time either way.
func TestPlanRecordsTheSolverTimeOnRequest(t *testing.T) {
	dir := t.TempDir()
	for _, record := range []bool{false, true} {
		file := filepath.Join(dir, fmt.Sprintf("record-%v.json", record))
		args := []string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--node-limit", "5", "-o", file}
		if record {
			args = append(args, "--record-time")
		}
		code, _, errs := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Solver struct {
				Seconds float64
				Phases  *plan.Phases
			} `json:"solver"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if got := doc.Solver.Seconds > 0; got != record {
			t.Errorf("--record-time %v: solver.seconds %g", record, doc.Solver.Seconds)
		}
		p := doc.Solver.Phases
		if (p != nil) != record || strings.Contains(string(raw), `"phases"`) != record {
			t.Errorf("--record-time %v: solver.phases %+v", record, p)
		}
		if !record || p == nil {
			continue
		}
		// The chosen set's synthesis, within the device search's time.
		if p.Polish <= 0 || p.JointSearch <= 0 || p.Encode+p.Polish+p.AfterPolish > doc.Solver.Seconds*(1+1e-6) {
			t.Errorf("solver.phases %+v of %g s: want Polish and the joint search, within the time recorded", p, doc.Solver.Seconds)
		}
		code, out, errs := runCLI("explain", file)
		if code != 0 || !strings.Contains(out, "planned in ") || !strings.Contains(out, p.String()) {
			t.Errorf("explain: exit %d, want the phases (%s) in:\n%s%s", code, p, out, errs)
		}
	}
	code, out, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--node-limit", "5")
	if code != 0 || !strings.Contains(out, "planned in ") || strings.Contains(out, " in 0 s") {
		t.Errorf("summary line: %d %q %s", code, out, errs)
	}
}

// demoStepCeiling is the step time above which the demo's plan (bert-base
// on paper-16, batch 512) counts as a regression: 1% above the 1.1617 s
// measured with the calibrated cost model of issue 69 (0.8342 s before it,
// when the segment moves landed, docs/planner.md: the model now charges
// every kernel's launch, small kernels' fill time, a base latency per
// collective, and Ethernet at 55% of its line rate, so every plan on
// paper-16 is slower; dp-ev went from 1.24 s to 1.69 s). The search is
// node-limited, so the plan, and its time, are the same on any machine;
// a change to the cost model moves it and must update this with a reason.
const demoStepCeiling = 1.1617 * 1.01

// The issue's acceptance: `hap plan --model bert-base --cluster paper-16
// --json` is at least as fast as dp-ev, dp-cp and megatron under the same
// simulator — and no slower than the demo's plan has been.
func TestDemoPlanBeatsTheBaselines(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size synthesis")
	}
	step := func(args ...string) float64 {
		t.Helper()
		code, out, errs := runCLI(append([]string{"plan", "--model", "bert-base", "--cluster", "paper-16", "--batch", "512", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("plan %v: exit %d: %s", args, code, errs)
		}
		var doc struct {
			Cost struct {
				StepSeconds float64 `json:"step_seconds"`
			} `json:"cost"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Cost.StepSeconds
	}
	hap := step()
	for _, s := range []string{"dp-ev", "dp-cp", "megatron"} {
		if base := step("--strategy", s); hap > base {
			t.Errorf("hap %.4f s is slower than %s %.4f s", hap, s, base)
		} else {
			t.Logf("hap %.4f s, %s %.4f s (%.2f×)", hap, s, base, base/hap)
		}
	}
	if hap > demoStepCeiling {
		t.Errorf("hap's demo plan takes %.4f s, above the %.4f s ceiling", hap, demoStepCeiling)
	}
}

// A hand-written strategy is planned whatever its memory, so that it can be
// compared; its summary line then says it cannot run, naming the most-over
// device. dp-cp gives two RTX 4090s (fast, 24 GB) four times an A100's
// samples of bert-base: both 4090s are over, the A100s are not.
func TestPlanSaysWhenAStrategyDoesNotFit(t *testing.T) {
	const mix = "../../examples/clusters/fast-small-slow-big.yaml"
	code, out, errs := runCLI("plan", "--model", "bert-base", "--cluster", mix, "--batch", "1024", "--strategy", "dp-cp")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "OUT OF MEMORY: device 0 (RTX-4090) needs "; !strings.Contains(out, want) || !strings.Contains(out, "and 1 more device is over") {
		t.Errorf("summary %q: want %q and one more device", out, want)
	}
	if code, out, _ := runCLI("plan", "--model", "bert-base", "--cluster", mix, "--batch", "512", "--strategy", "dp-ev"); code != 0 || strings.Contains(out, "MEMORY") {
		t.Errorf("a plan that fits: exit %d, %q", code, out)
	}
}

// explain names the devices that idle at their memory limit — a fast GPU
// with little memory beside slow ones with much — and only those, and
// says nothing of a hand-written strategy, whose shares no planner chose.
func TestExplainNamesMemoryBoundDevices(t *testing.T) {
	const gb = 1e9
	pl := &plan.Plan{
		Solver: plan.Solver{Status: "feasible", Options: plan.SolverOptions{MemoryFraction: 0.9}},
		Cost: plan.Cost{StepSeconds: 2, PerDevice: []sim.DeviceStats{
			{Device: 0, Type: "RTX-4090", Idle: 1.3, PeakMemory: 23.1 * gb, Capacity: 25.8 * gb},   // idle, at its limit
			{Device: 1, Type: "RTX-4090", Idle: 1.3, PeakMemory: 12 * gb, Capacity: 25.8 * gb},     // idle with room: not memory-bound
			{Device: 2, Type: "A100-SXM4-80GB", Idle: 0, PeakMemory: 77 * gb, Capacity: 85.9 * gb}, // full but busy
		}},
	}
	var b strings.Builder
	explainMemoryBound(&b, pl)
	if got := b.String(); !strings.Contains(got, "memory-bound: device 0 (RTX-4090) idle up to 1.300 s (65% of the step)") || strings.Contains(got, "1,") || strings.Contains(got, "A100") {
		t.Errorf("got %q, want device 0 alone named", got)
	}
	b.Reset()
	pl.Solver = plan.Solver{Status: "heuristic"}
	if explainMemoryBound(&b, pl); b.Len() != 0 {
		t.Errorf("a hand-written strategy: %q, want nothing", b.String())
	}
}

// A plan solved again under a lower memory fraction says so, and its
// memory-bound devices are judged against that fraction with no advice to
// raise it.
func TestExplainSaysThePlanWasSolvedAgain(t *testing.T) {
	const gb = 1e9
	pl := &plan.Plan{
		Solver: plan.Solver{Status: "feasible", Options: plan.SolverOptions{MemoryFraction: 1, RetriedFraction: 0.95}},
		Cost: plan.Cost{StepSeconds: 2, PerDevice: []sim.DeviceStats{
			{Device: 0, Type: "V100", Idle: 0.6, PeakMemory: 16.9 * gb, Capacity: 17.2 * gb}, // 98% of the 0.95 asked again
		}},
	}
	var b strings.Builder
	explainMemoryBound(&b, pl)
	if got := b.String(); !strings.Contains(got, "memory-bound: device 0 (V100)") || !strings.Contains(got, "already lowered --memory-fraction 1 to 0.95") {
		t.Errorf("got %q, want device 0 named and the lowered fraction", got)
	}
	if got := retryNote(pl); !strings.Contains(got, "solved again under memory fraction 0.95 after the plan made under 1 did not fit") {
		t.Errorf("retryNote = %q", got)
	}
	pl.Solver.Options.RetriedFraction = 0
	if got := retryNote(pl); got != "" {
		t.Errorf("a plan not solved again: retryNote = %q", got)
	}
}

// A step below the proven bound is explained: a start that fills more than
// the memory fraction, or the simulator undercutting the estimate.
func TestBoundCaveat(t *testing.T) {
	const gb = 1e9
	pl := &plan.Plan{
		Solver: plan.Solver{Status: "feasible", Bound: 2.333, Chosen: "zero3", Options: plan.SolverOptions{MemoryFraction: 0.9}},
		Cost: plan.Cost{StepSeconds: 2.013, PerDevice: []sim.DeviceStats{
			{Device: 0, PeakMemory: 14 * gb, Capacity: 17.2 * gb},
			{Device: 1, PeakMemory: 15.7 * gb, Capacity: 17.2 * gb}, // 91%
		}},
	}
	if got := boundCaveat(pl); !strings.Contains(got, "within 0.9 of each device's memory; this one fills more of device 1") {
		t.Errorf("boundCaveat = %q, want device 1 over the fraction", got)
	}
	pl.Cost.PerDevice[1].PeakMemory = 15 * gb
	if got := boundCaveat(pl); !strings.Contains(got, "the simulator undercuts") {
		t.Errorf("boundCaveat = %q, want the estimate's reason", got)
	}
	pl.Cost.StepSeconds = 2.5
	if got := boundCaveat(pl); got != "" {
		t.Errorf("a step above the bound: boundCaveat = %q", got)
	}
}

// Explain points a search whose stop left it the joint MILP's own bound
// at what would tighten it: the default ten bare nodes at a node limit
// that runs cuts, a time limit that stopped the transport LP at a longer
// one; and only those searches.
func TestStoppedNote(t *testing.T) {
	opts := func(search plan.JointSearch, bound plan.BoundSource) plan.SolverOptions {
		return plan.SolverOptions{Search: &search, Bound: bound}
	}
	bare := plan.JointSearch{NoCuts: true, NoHeuristics: true, NoStrongBranching: true, NoPresolve: true}
	thorough := plan.JointSearch{}
	milp, lp, anyOrder, work := plan.BoundSource{By: plan.BoundByMILP}, plan.BoundSource{By: plan.BoundByLP}, plan.BoundSource{By: plan.BoundByLPAnyOrder}, plan.BoundSource{By: plan.BoundByWork}
	for _, c := range []struct {
		sol  plan.Solver
		want string
	}{
		{plan.Solver{StoppedBy: "node limit", Options: opts(bare, milp)}, "--node-limit above 10"},
		{plan.Solver{StoppedBy: "node limit", Options: opts(bare, lp)}, ""},
		{plan.Solver{StoppedBy: "node limit", Options: opts(plan.JointSearch{NoHeuristics: true}, milp)}, ""},
		{plan.Solver{StoppedBy: "time limit", Options: opts(thorough, milp)}, "a longer --time-limit"},
		{plan.Solver{StoppedBy: "time limit", Options: opts(thorough, lp)}, ""},
		{plan.Solver{StoppedBy: "time limit", Options: opts(thorough, anyOrder)}, ""},
		{plan.Solver{StoppedBy: "time limit", Options: opts(thorough, plan.BoundSource{By: plan.BoundByLP, Stopped: true})}, ""},
		{plan.Solver{StoppedBy: "time limit", Options: opts(thorough, work)}, "a longer --time-limit"},
		{plan.Solver{StoppedBy: "node limit"}, ""}, // a plan from before the record
		{plan.Solver{StoppedBy: "solver failure", Options: opts(thorough, milp)}, ""},
	} {
		got := stoppedNote(c.sol)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s, %v: stoppedNote = %q, want %q", c.sol.StoppedBy, c.sol.Options.Pairs(), got, c.want)
		}
	}
}

// The solver line names the relaxation behind the bound, and says over
// what it holds: the work LP's over every plan, tied or not, in every
// order, so no ties note follows it.
func TestBoundBy(t *testing.T) {
	for _, c := range []struct {
		by   plan.BoundSource
		want string
	}{
		{plan.BoundSource{By: plan.BoundByMILP}, ""},
		{plan.BoundSource{}, ""}, // a plan from before the record
		{plan.BoundSource{By: plan.BoundByLP}, " by the transport LP"},
		{plan.BoundSource{By: plan.BoundByLPAnyOrder}, " by the transport LP, over every plan in every issue order"},
		{plan.BoundSource{By: plan.BoundByLP, Stopped: true}, " by the transport LP (what its duals proved when the time limit stopped it;"},
		{plan.BoundSource{By: plan.BoundByLPAnyOrder, Stopped: true}, " by the transport LP (what its duals proved when the time limit stopped it;"},
		{plan.BoundSource{By: plan.BoundByLP, Branched: true}, " by the transport LP branched on the op classes' rules"},
		{plan.BoundSource{By: plan.BoundByWork}, " by the work LP (the ideal compute time"},
	} {
		s := plan.Solver{Options: plan.SolverOptions{Bound: c.by}}
		got := boundBy(s)
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("bound %q: boundBy = %q, want %q", c.by, got, c.want)
		}
		if over := c.by.OverAnyOrder(); over != (c.by.By == plan.BoundByLPAnyOrder || c.by.By == plan.BoundByWork) {
			t.Errorf("bound %q: over any order %v", c.by, over)
		}
	}
}

// mixed3 is a three-device cluster (one V100, two P100s on another node)
// on which bert-moe-tiny's tied MILP cannot express its best plan: its
// dense and MoE layers' attention are one op class.
const mixed3 = `name: mixed-3
nodes:
  - {name: a, device: V100, count: 1}
  - {name: b, device: P100, count: 2, intra: {class: pcie, bandwidth: 12GB/s}}
inter: {class: ethernet, bandwidth: 10Gb/s}
`

// --untie layers solves over plans whose layers run their own rules,
// starting from the tied plan: on bert-moe-tiny, whose dense and MoE
// layers are tied by name, the untied plan is no slower than the tied one,
// records what it lifted, and explain's caveat names only the ties left
// (the two P100s' even shares). Bad values are refused. Under the cost
// model before issue 69's calibration untying gained 5% here; under the
// calibrated one the step is bound by its kernels' launch overheads and
// untying gains 0.1% (3.085 against 3.086 ms), as on bert-moe-tiny at
// batch 16 to 1024, resized to width 192 and bert-moe at two layers of
// width 384 (measured): no case tried shows a gain, so the test holds
// what --untie must keep, not what it once found.
func TestPlanUntie(t *testing.T) {
	dir := t.TempDir()
	cl := filepath.Join(dir, "mixed3.yaml")
	if err := os.WriteFile(cl, []byte(mixed3), 0o644); err != nil {
		t.Fatal(err)
	}
	planned := func(extra ...string) *plan.Plan {
		t.Helper()
		f := filepath.Join(dir, fmt.Sprintf("plan%d.json", len(extra)))
		args := append([]string{"plan", "--model", "bert-moe-tiny", "--cluster", cl, "--devices", "all", "-o", f}, extra...)
		if code, out, errs := runCLI(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s %s", args, code, errs, out)
		}
		pl, err := plan.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	tied, untied := planned(), planned("--untie", "layers")
	// The untied solve starts from the tied plan: its estimate is never
	// dearer (the simulator may differ from either by its own margin).
	if untied.Solver.Objective > tied.Solver.Objective*(1+1e-9) {
		t.Errorf("untied objective %.6g ms, tied %.6g ms: want untying layers no slower", untied.Solver.Objective*1e3, tied.Solver.Objective*1e3)
	}
	if ties := tied.Solver.Options.Ties; !ties.LayersTied() || !ties.DevicesTied() {
		t.Errorf("tied plan records ties %+v", ties)
	}
	if ties := untied.Solver.Options.Ties; ties.LayersTied() || !ties.DevicesTied() {
		t.Errorf("untied plan records ties %+v: want only the devices'", ties)
	}
	if got, want := untied.Solver.Options.Untie, (plan.Untie{Layers: true}); tied.Solver.Options.Untie.Any() || got != want {
		t.Errorf("untie options recorded: tied %q, untied %q; want none and %q", tied.Solver.Options.Untie, got, want)
	}
	code, out, errs := runCLI("explain", filepath.Join(dir, "plan2.json"))
	if code != 0 || !strings.Contains(out, "a group's identical devices hold even shares (hap plan --untie devices lifts this)") || strings.Contains(out, "every layer of an op class") {
		t.Errorf("explain of the untied plan: exit %d: %s\n%s", code, errs, out)
	}
	for _, bad := range [][]string{
		{"--untie", "heads"},
		{"--untie", "layers", "--strategy", "dp-ev"},
	} {
		args := append([]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8"}, bad...)
		if code, _, errs := runCLI(args...); code != 2 || !strings.Contains(errs, "--untie") {
			t.Errorf("%v: exit %d, %q; want a usage error naming --untie", bad, code, errs)
		}
	}
}

// plan --search-order bounds the pair, plan and order: the bound is the
// any-order LP's, recorded and explained as such; without the flag it is
// over list-ordered plans. A plan ordered later (simulate --search-order)
// whose step beats its list-order bound says why.
func TestPlanSearchOrderBoundsEveryOrder(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		anyOrder bool
	}{{[]string{"--search-order"}, true}, {nil, false}} {
		f := filepath.Join(dir, "plan.json")
		args := append([]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "all", "-o", f}, tc.args...)
		if code, out, errs := runCLI(args...); code != 0 {
			t.Fatalf("%v: %d %s %s", args, code, out, errs)
		}
		pl, err := plan.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		by := pl.Solver.Options.Bound
		if got := by.OverAnyOrder(); got != tc.anyOrder || !by.FromLP() || !(pl.Solver.Bound > 0) {
			t.Errorf("%v: bound %g over any order %v, from the LP %v: want over any order %v", args, pl.Solver.Bound, got, by.FromLP(), tc.anyOrder)
		}
		code, out, errs := runCLI("explain", f)
		if said := strings.Contains(out, "over every plan in every issue order"); code != 0 || said != tc.anyOrder {
			t.Errorf("%v: explain: %d %s %s", args, code, out, errs)
		}
	}

	pl := &plan.Plan{Solver: plan.Solver{Bound: 2, Options: plan.SolverOptions{Bound: plan.BoundSource{By: plan.BoundByLP}}},
		Cost: plan.Cost{StepSeconds: 1.9}, CommOrder: &plan.OrderDoc{}}
	if got := boundCaveat(pl); !strings.Contains(got, "list order, which this plan's searched order beats") {
		t.Errorf("a searched order under a list-order bound: caveat %q", got)
	}
	pl.Solver.Options.Bound.By = plan.BoundByLPAnyOrder
	if got := boundCaveat(pl); strings.Contains(got, "list order") {
		t.Errorf("an any-order bound: caveat %q", got)
	}
}

// TestVerifyRunsTheSearchedOrder: hap verify runs a plan's searched
// collective order (Z3 issues dp-ev's first gradient all-reduce of mlp
// last) and proves that program equal to single-device training; JSON
// says how many pairs it issued against the list order.
func TestVerifyRunsTheSearchedOrder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	args := []string{"plan", "--model", "mlp", "--cluster", "paper-8", "--strategy", "dp-ev", "--search-order", "-o", f}
	if code, out, errs := runCLI(args...); code != 0 {
		t.Fatalf("%v: %d %s %s", args, code, out, errs)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if pl.CommOrder == nil || len(pl.CommOrder.Swaps) == 0 {
		t.Fatalf("the search kept the list order: %+v", pl.CommOrder)
	}
	code, out, errs := runCLI("verify", f, "--steps", "1")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("searched order (%d pairs against the list order)", len(pl.CommOrder.Swaps))) || !strings.Contains(out, "PASS") {
		t.Errorf("verify: %d %s %s", code, out, errs)
	}
	code, out, errs = runCLI("verify", f, "--steps", "1", "--json")
	if code != 0 || !strings.Contains(out, fmt.Sprintf(`"comm_swaps": %d`, len(pl.CommOrder.Swaps))) {
		t.Errorf("verify --json: %d %s %s", code, out, errs)
	}
}

// explain credits the work LP with a bound it proved, which holds over
// every plan: no note that the bound is over tied plans follows it.
func TestExplainCreditsTheWorkLP(t *testing.T) {
	f := t.TempDir() + "/plan.json"
	if code, _, errs := runCLI("plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "all", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	solverLine := func() (line, rest string) {
		code, out, errs := runCLI("explain", f)
		if code != 0 {
			t.Fatalf("explain: %d %s", code, errs)
		}
		_, after, _ := strings.Cut(out, "\nsolver: ")
		line, rest, _ = strings.Cut(after, "\n")
		return line, rest
	}
	line, rest := solverLine()
	if !strings.Contains(line, "by the transport LP") || !strings.HasPrefix(rest, "  the bound and gap are over tied plans") {
		t.Fatalf("the synthesized plan's solver line %q, then %q: want the transport LP's bound over tied plans", line, rest)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	pl.Solver.Options.Bound = plan.BoundSource{By: plan.BoundByWork}
	data, err := pl.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	line, rest = solverLine()
	if !strings.Contains(line, "by the work LP (the ideal compute time") || strings.Contains(rest, "over tied plans") {
		t.Errorf("solver line %q, then %q: want the work LP credited, and no ties note", line, rest)
	}
}

// TestPlanBoundLPs: hap plan --bound-lps branches the bound's LP: the plan
// is the same, the bound no lower, the option and the bound's source
// recorded, and explain says what proved it.
func TestPlanBoundLPs(t *testing.T) {
	dir := t.TempDir()
	read := func(args ...string) *plan.Plan {
		f := filepath.Join(dir, "plan.json")
		if code, _, errs := runCLI(append([]string{"plan", "--model", "mlp-tiny", "--cluster", "paper-8", "--devices", "all", "-o", f}, args...)...); code != 0 {
			t.Fatalf("plan %v: %d %s", args, code, errs)
		}
		pl, err := plan.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	plain := read()
	branched := read("--bound-lps", "6")
	plainBy, plainLPs := plain.Solver.Options.Bound, plain.Solver.Options.BoundLPs
	branchedBy, branchedLPs := branched.Solver.Options.Bound, branched.Solver.Options.BoundLPs
	t.Logf("bound %.6g ms by %s; branched: %.6g ms by %s (%d LPs)", 1e3*plain.Solver.Bound, plainBy, 1e3*branched.Solver.Bound, branchedBy, branchedLPs)
	if want := (plan.BoundSource{By: plan.BoundByLP}); plainBy != want || plainLPs != 0 {
		t.Errorf("without --bound-lps: bound by %q, bound-lps %d: want %q and nothing recorded", plainBy, plainLPs, want)
	}
	if want := (plan.BoundSource{By: plan.BoundByLP, Branched: true}); branchedBy != want || branchedLPs != 6 {
		t.Errorf("--bound-lps 6: bound by %q, bound-lps %d: want %q and 6", branchedBy, branchedLPs, want)
	}
	// Branching never lowers the bound, beyond the LPs' roundoff (here the
	// LP meets the plan within 6e-6, and a branch's optimum can end an ulp
	// under the root's).
	if branched.Solver.Objective != plain.Solver.Objective || branched.Solver.Bound < plain.Solver.Bound*(1-branchRoundoff) || branched.Solver.Bound > branched.Solver.Objective {
		t.Errorf("--bound-lps 6: objective %g, bound %g; without: %g, %g: want the same plan and a bound between", branched.Solver.Objective, branched.Solver.Bound, plain.Solver.Objective, plain.Solver.Bound)
	}
	code, out, errs := runCLI("explain", filepath.Join(dir, "plan.json"))
	if code != 0 || !strings.Contains(out, "by the transport LP branched on the op classes' rules (up to 6 more LPs") {
		t.Errorf("explain: %d %s; output:\n%s\nwant the branched LP credited", code, errs, out)
	}
}

// branchRoundoff is how far, relative, a branched LP's bound may end under
// the root LP's: a few ulps of the LPs' arithmetic.
const branchRoundoff = 1e-12

// hap plan searches the devices too: mlp at its batch of 32 on paper-8
// runs on one V100 (nothing crosses the 10 Gb/s network), the plan says
// so, explain reports every set weighed (the multi-machine ones ruled out
// by their transport LP bounds, unsearched) and names the idle devices, and
// simulate and verify run it on its device; --devices all plans on all
// eight.
func TestPlanSearchesDevices(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.json")
	code, out, errs := runCLI("plan", "--model", "mlp", "--cluster", "paper-8", "-o", f)
	if code != 0 || !strings.Contains(out, "mlp on paper-8 (1 of 8 devices), hap: ") {
		t.Fatalf("plan: %d %s %s", code, errs, out)
	}
	searched, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	pl := searched
	if len(pl.Cluster.Use) != 1 || pl.Cluster.Use[0] != 0 || len(pl.Cost.PerDevice) != 1 {
		t.Fatalf("plan runs on %v with %d devices' costs, want device 0 alone", pl.Cluster.Use, len(pl.Cost.PerDevice))
	}
	code, out, errs = runCLI("explain", f)
	for _, want := range []string{
		"mlp (2.91M params) on paper-8: runs on 1 of its 8 devices, 1 × V100-SXM2-16GB on 1 node (devices 0), the other 7 left idle",
		"Devices searched (--devices types; hap plan --devices all plans on every device alone):",
		// Every device: the transport LP, counting the 10 Gb/s network,
		// proves 2.5 times the plan on one V100 before it is stopped.
		"0–7      2 × V100-SXM2-16GB + 6 × P100-PCIE-16GB on 8 nodes  not searched: no plan on it beats 1.758 ms, its transport LP bound (communication counted; the LP stopped there, past the plan)",
		"  ← the plan",
		"2        1 × P100-PCIE-16GB on 1 node                        not searched: no plan on it beats 0.7740 ms, its ideal compute time",
		"(in the order searched, the likeliest first,",
		"dp-ev on all 8 devices ",
		"Communication in the forward program (backward adds each one's adjoint): none",
		// The V100s together, a set of one GPU type (--devices types).
		"0–1      2 × V100-SXM2-16GB on 2 nodes                       not searched: no plan on it beats 0.8301 ms, its transport LP bound (communication counted; the LP stopped there, past the plan)",
		"No plan on any set weighed is faster: the least of their bounds, 0.7141 ms, is this plan's estimate.",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("explain lacks %q: %d %s\n%s", want, code, errs, out)
		}
	}
	// After --search-order the chosen set's plan has another step than the
	// one the sets were compared by: the table says which is which.
	reordered := *searched
	reordered.CommOrder = &plan.OrderDoc{Status: "improved"}
	reordered.Cost.StepSeconds *= 0.5
	var table strings.Builder
	if err := explainDeviceSets(&table, &reordered); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), " in list order; 0.35") || !strings.Contains(table.String(), "the order search ran on the chosen set alone") {
		t.Errorf("the devices table after an order search does not give the chosen set's two steps:\n%s", table.String())
	}
	// A set whose bound is below the plan: the table says how far any
	// set weighed could still beat it.
	loose := *searched
	loose.Solver.DeviceSets = slices.Clone(searched.Solver.DeviceSets)
	loose.Solver.DeviceSets[0].Bound = loose.Solver.Objective / 2
	var gapped strings.Builder
	if err := explainDeviceSets(&gapped, &loose); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gapped.String(), "Over every set weighed, no plan steps in less than 0.35") || !strings.Contains(gapped.String(), "this plan is within 50% of all of them") {
		t.Errorf("the devices table does not bound the sets weighed:\n%s", gapped.String())
	}
	if testing.Verbose() {
		t.Log(table.String())
	}
	if code, out, errs := runCLI("simulate", f); code != 0 || !strings.Contains(out, "0.7141 ms") || !strings.Contains(out, "the plan runs on 1 of paper-8's 8 devices: 0, numbered 0 below") {
		t.Errorf("simulate: %d %s %s", code, errs, out)
	}
	if code, out, errs := runCLI("verify", f, "--steps", "1"); code != 0 || !strings.Contains(out, "PASS") || !strings.Contains(out, "the plan runs on 1 of paper-8's 8 devices") {
		t.Errorf("verify: %d %s %s", code, errs, out)
	}
	// A list plans on exactly those devices: here the search's own choice.
	list := filepath.Join(dir, "list.json")
	if code, out, errs := runCLI("plan", "--model", "mlp", "--cluster", "paper-8", "--devices", "0", "-o", list); code != 0 || !strings.Contains(out, "(1 of 8 devices)") {
		t.Fatalf("plan --devices 0: %d %s %s", code, errs, out)
	}
	if pl, err := plan.Read(list); err != nil || len(pl.Cluster.Use) != 1 || pl.Solver.DeviceSets != nil || pl.Cost.StepSeconds != searched.Cost.StepSeconds {
		t.Errorf("plan --devices 0: %v: use %v, sets %v, step %g: want device 0 alone, no search, the search's step %g", err, pl.Cluster.Use, pl.Solver.DeviceSets, pl.Cost.StepSeconds, searched.Cost.StepSeconds)
	}
	// Every device, listed, is the plan on every device.
	if code, out, errs := runCLI("plan", "--model", "mlp", "--cluster", "paper-8", "--devices", "0-7", "-o", list); code != 0 || !strings.Contains(out, "(8 devices)") {
		t.Fatalf("plan --devices 0-7: %d %s %s", code, errs, out)
	}
	if pl, err := plan.Read(list); err != nil || pl.Cluster.Use != nil {
		t.Errorf("plan --devices 0-7: %v, use %v: want none", err, pl.Cluster.Use)
	}
	code, out, errs = runCLI("plan", "--model", "mlp", "--cluster", "paper-8", "--devices", "all", "-o", f)
	if code != 0 || !strings.Contains(out, "mlp on paper-8 (8 devices), hap: ") {
		t.Fatalf("plan --devices all: %d %s %s", code, errs, out)
	}
	if pl, err := plan.Read(f); err != nil || pl.Cluster.Use != nil || pl.Solver.DeviceSets != nil {
		t.Errorf("plan --devices all: %v, use %v, device sets %v: want every device and no search", err, pl.Cluster.Use, pl.Solver.DeviceSets)
	}
}

// One device group reads in the singular, though the plan records the
// plural form for every count; two, in the plural.
func TestTiesNoteSaysOneGroup(t *testing.T) {
	note := tiesNote(plan.Ties{OpClasses: 41, ForwardOps: 327, DeviceGroups: 1, Devices: 4})
	if !strings.Contains(note, "(41 op classes for 327 forward ops, 1 device group for 4 devices)") {
		t.Errorf("ties note %q", note)
	}
	note = tiesNote(plan.Ties{OpClasses: 41, ForwardOps: 327, DeviceGroups: 2, Devices: 4})
	if !strings.Contains(note, "(41 op classes for 327 forward ops, 2 device groups for 4 devices)") {
		t.Errorf("ties note %q", note)
	}
}

// Where the transport LP proves the plan within solve.OptimalGap, the plan
// is optimal at a gap above zero, and explain says within what: vgg19-tiny
// at batch 64 on h100-16 (1.1e-7%). (The case was bert-base-tiny on
// paper-8, 0.0074%, until issue 69's calibrated costs: its gap is now
// 19.6%, and mlp-tiny's, vit-tiny's on paper-8 and bert-base-tiny's on
// v100-8 or a100-8 2-16%; the LP pays a collective's latency in
// fractions.)
func TestExplainSaysWithinWhatGapAPlanIsOptimal(t *testing.T) {
	f := filepath.Join(t.TempDir(), "plan.json")
	if code, _, errs := runCLI("plan", "--model", "vgg19-tiny", "--batch", "64", "--cluster", "h100-16", "--devices", "all", "-o", f); code != 0 {
		t.Fatalf("plan: %d %s", code, errs)
	}
	pl, err := plan.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if s := pl.Solver; s.Status != "optimal" || !(s.Gap > 0 && s.Gap <= solve.OptimalGap) || !s.Options.Bound.FromLP() {
		t.Fatalf("status %s, gap %g, bound from the LP %v: want optimal within %g by the transport LP", s.Status, s.Gap, s.Options.Bound.FromLP(), solve.OptimalGap)
	}
	code, out, errs := runCLI("explain", f)
	if code != 0 || !strings.Contains(out, "by the transport LP") || !strings.Contains(out, ": optimal within the 0.01% the planner takes as optimal") {
		t.Errorf("explain: %d %s\n%s", code, errs, out)
	}
}
