package executor

import (
	"slices"
	"strings"
	"testing"

	"hap/devprog"
	"hap/ir"
	"hap/lower"
	"hap/spmd"
)

// orderCase is a zoo model's program under a strategy on paper-8 and its
// lowering (SGD's training step), whose collectives swaps name.
func orderCase(t *testing.T, model, strat string) (*ir.Graph, *spmd.Program, *devprog.Program) {
	t.Helper()
	g, p := program(t, model, strat, "paper-8", ir.Float64)
	steps, err := lower.TrainSteps(g, p, ir.SGD(1e-2))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := lower.Schedule(steps)
	if err != nil {
		t.Fatal(err)
	}
	return g, p, prog
}

// commIDs is device d's collectives' IDs in its list order.
func commIDs(prog *devprog.Program, d int) []int {
	var ids []int
	for _, in := range prog.Devices[d].Instrs {
		if in.Comm != nil {
			ids = append(ids, in.Comm.ID)
		}
	}
	return ids
}

// TestVerifyFollowsTheSearchedOrder: a plan's searched collective order
// (here: the first gradient all-reduce issued last, as Z3 orders dp-ev's
// mlp) is the order every device's step runs its collectives in, and the
// distributed training it runs, on the CPU backend and on the CUDA backend
// over the stand-in driver, equals single-device training.
func TestVerifyFollowsTheSearchedOrder(t *testing.T) {
	g, p, prog := orderCase(t, "mlp-tiny", "dp-ev")
	ids := commIDs(prog, 0)
	if len(ids) < 3 {
		t.Fatalf("collectives %v: too few to reorder", ids)
	}
	for _, y := range ids[1:] {
		p.CommSwaps = append(p.CommSwaps, [2]int{ids[0], y})
	}
	p.CommDigest = prog.CollectiveDigest()
	opt := Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.SGD(1e-2)}
	for _, b := range []Backend{CPU{}, fakeCUDA(t, p.NumDevices())} {
		rep, err := Verify(g, p, Options{DType: opt.DType, Steps: opt.Steps, Seed: opt.Seed, Optimizer: opt.Optimizer, Backend: b})
		if err != nil {
			t.Fatalf("%s backend: %v", b.Name(), err)
		}
		checkTolerance(t, rep, ir.Float64)
		if rep.CommSwaps != len(ids)-1 {
			t.Errorf("%s backend: report: %d swaps, want %d", b.Name(), rep.CommSwaps, len(ids)-1)
		}
	}
	ranks, err := lowerAll(g, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(ids[1:]), ids[0])
	for r, rk := range ranks {
		byName := map[string]int{}
		for _, in := range prog.Devices[r].Instrs {
			if in.Comm != nil {
				byName[in.Name] = in.Comm.ID
			}
		}
		var got []int
		for _, op := range rk.step.Ops {
			if id, ok := byName[op.Name]; ok {
				got = append(got, id)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("device %d runs collectives %v, the plan's order is %v", r, got, want)
		}
		if err := rk.step.Check(); err != nil {
			t.Errorf("device %d: %v", r, err)
		}
	}
}

// TestVerifyRefusesAnOrderItCannotRun: an order that moves a collective
// before the one its input needs, or one searched for other collectives,
// is an error naming why — never a run that hangs or reads the swaps as
// other collectives.
func TestVerifyRefusesAnOrderItCannotRun(t *testing.T) {
	g, p, prog := orderCase(t, "bert-base-tiny", "tp")
	ids := commIDs(prog, 0)
	opt := Options{DType: ir.Float64, Steps: 1, Seed: 1, Optimizer: ir.SGD(1e-2)}
	// Two collectives in a row on device 0, the second reading what the
	// first made (through the kernels between them), swapped.
	dp := &prog.Devices[0]
	needs := make([]map[int]bool, len(dp.Instrs)) // instruction → collective IDs it depends on
	pair := [2]int{-1, -1}
	for i, in := range dp.Instrs {
		needs[i] = map[int]bool{}
		for _, dep := range in.Deps {
			for id := range needs[dep] {
				needs[i][id] = true
			}
			if c := dp.Instrs[dep].Comm; c != nil {
				needs[i][c.ID] = true
			}
		}
		if in.Comm != nil && pair[0] < 0 {
			if k := slices.Index(ids, in.Comm.ID); k > 0 && needs[i][ids[k-1]] {
				pair = [2]int{ids[k-1], ids[k]}
			}
		}
	}
	if pair[0] < 0 {
		t.Fatalf("no collective of %v reads the one before it", ids)
	}
	p.CommSwaps, p.CommDigest = [][2]int{pair}, prog.CollectiveDigest()
	if _, err := Verify(g, p, opt); err == nil || !strings.Contains(err.Error(), "cannot be issued") {
		t.Errorf("a collective before its input: %v", err)
	}
	p.CommDigest = strings.Repeat("0", 64)
	if _, err := Verify(g, p, opt); err == nil || !strings.Contains(err.Error(), "searched for other collectives") {
		t.Errorf("another lowering's order: %v", err)
	}
}
