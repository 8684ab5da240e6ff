package order

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"hap/cost"
	"hap/devprog"
	"hap/sim"
)

// randomGroupsProgram is a program over the first n of the model's four devices whose collectives
// each run over a random group of them (so devices see different collectives), with kernels of
// random seconds between them and random dependencies on each device. Every device lists its
// collectives by ID, so the list order cannot deadlock.
func randomGroupsProgram(rng *rand.Rand, n, kernels, colls int) *devprog.Program {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	groups := make([][]int, colls)
	for id := range groups {
		for d := 0; d < n; d++ {
			if rng.Intn(3) > 0 {
				groups[id] = append(groups[id], d)
			}
		}
		if len(groups[id]) == 0 {
			groups[id] = []int{rng.Intn(n)}
		}
	}
	for d := 0; d < n; d++ {
		dp := &p.Devices[d]
		left := []int{kernels, colls}
		for id := 0; left[0]+left[1] > 0; {
			var deps []int
			for j := range dp.Instrs {
				if rng.Float64() < 0.15 {
					deps = append(deps, j)
				}
			}
			if rng.Intn(left[0]+left[1]) < left[0] {
				left[0]--
				dp.Append(devprog.Instr{Name: "k", Deps: deps, Kernel: &devprog.Kernel{Op: "k", Seconds: 0.1 + rng.Float64()}})
				continue
			}
			for ; left[1] > 0; left[1]-- {
				g := groups[id]
				id++
				if slices.Contains(g, d) {
					counts := make([]int64, len(g))
					for r := range counts {
						counts[r] = int64(1 + (id*7919)%250_000_000)
					}
					dp.Append(devprog.Instr{Name: fmt.Sprintf("c%d", id-1), Deps: deps, Comm: &devprog.Comm{ID: id - 1, Kind: cost.AllReduce, Group: g, Counts: counts, ElemBytes: 4}})
					left[1]--
					break
				}
			}
		}
	}
	return p
}

// everyOrder is the shortest simulated step over every order of p's collectives (each device
// issuing its own in that order; orders that deadlock through dependencies skipped).
func everyOrder(t *testing.T, p *devprog.Program, m *cost.Model) float64 {
	t.Helper()
	var ids []int
	for _, dp := range p.Devices {
		for _, in := range dp.Instrs {
			if in.Comm != nil && !slices.Contains(ids, in.Comm.ID) {
				ids = append(ids, in.Comm.ID)
			}
		}
	}
	best := math.Inf(1)
	permutations(ids, func(global []int) {
		q := &devprog.Program{Devices: slices.Clone(p.Devices)}
		for d := range q.Devices {
			dp := &q.Devices[d]
			dp.CommOrder = slices.Clone(dp.CommStream())
			slices.SortFunc(dp.CommOrder, func(a, b int) int {
				return slices.Index(global, dp.Instrs[a].Comm.ID) - slices.Index(global, dp.Instrs[b].Comm.ID)
			})
		}
		r, err := sim.Run(q, m)
		if err != nil {
			if strings.Contains(err.Error(), "deadlock") {
				return
			}
			t.Fatal(err)
		}
		best = min(best, r.StepSeconds)
	})
	return best
}

// The bound is below every order's simulated step, on random programs whose collectives run over
// mixed groups (SPMD programs, every device alike, are the second half); and it is often the
// optimum itself, which Search then returns as optimal without asking Z3.
func TestBoundIsBelowEveryOrder(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(5))
	cases, tight, proofs := 200, 0, 0
	if testing.Short() {
		cases = 60
	}
	for c := 0; c < cases; c++ {
		var p *devprog.Program
		if c%2 == 0 {
			p = randomGroupsProgram(rng, 1+rng.Intn(4), 2+rng.Intn(9), 2+rng.Intn(5))
		} else {
			p = randomProgram(rng, 1+rng.Intn(3), 2+rng.Intn(9), 2+rng.Intn(5))
		}
		pr, err := newProblem(p, m)
		if err != nil {
			t.Fatalf("case %d: %v", c, err)
		}
		lb, err := pr.bound()
		if err != nil {
			t.Fatalf("case %d: %v", c, err)
		}
		best := everyOrder(t, p, m)
		if lb > best*(1+1e-9) {
			t.Fatalf("case %d: bound %.9g s above the best order's %.9g s", c, lb, best)
		}
		if lb >= best*(1-minGain) {
			tight++
			if own, err := sim.Run(p, m); err == nil && own.StepSeconds > best*(1+minGain) {
				proofs++
			}
		}
	}
	t.Logf("the bound is the optimum in %d of %d cases, %d of them where the list order is not", tight, cases, proofs)
	if tight < cases/4 {
		t.Errorf("the bound is the optimum in only %d of %d cases", tight, cases)
	}
}

// Hand-made programs and their bounds, in all-reduces of 1 s (allReduce, plus microseconds of
// latency) and kernels of given seconds; each is also the best order's step, so the search proves it with no check.
func TestBoundCases(t *testing.T) {
	m := testModel(t)
	kernel := func(s float64, deps ...int) devprog.Instr {
		return devprog.Instr{Name: "k", Deps: deps, Kernel: &devprog.Kernel{Op: "k", Seconds: s}}
	}
	pair := []int{0, 1}
	for _, tc := range []struct {
		name   string
		instrs []devprog.Instr // device 0's and device 1's
		want   float64
	}{
		// Nothing waits on anything: the stream's total.
		{"independent", []devprog.Instr{allReduce(0, pair), allReduce(1, pair), kernel(0.5)}, 2},
		// The longest chain through compute: ar0, 3 s of compute, ar1.
		{"chain", []devprog.Instr{allReduce(0, pair), kernel(3, 0), allReduce(1, pair, 1)}, 5},
		// ar2 waits, through a kernel, on both ar0 and ar1, which share the stream: the one-stream
		// bound sees the kernel and ar2 in ar0's and ar1's tails.
		{"join", []devprog.Instr{allReduce(0, pair), allReduce(1, pair), kernel(1, 0, 1), allReduce(2, pair, 2)}, 4},
		// Two joins in a row: ar0 and ar1, a kernel, ar2 and ar3, a kernel, ar4. Without raising
		// ar2's and ar3's heads to ar0 and ar1 ending one after the other (serialHeads), the bound
		// was 6: the tails see one of ar2 and ar3, the heads neither ar0 nor ar1 waiting.
		{"two joins", []devprog.Instr{allReduce(0, pair), allReduce(1, pair), kernel(1, 0, 1), allReduce(2, pair, 2), allReduce(3, pair, 2),
			kernel(1, 3, 4), allReduce(4, pair, 5)}, 7},
	} {
		p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
		for d := range 2 {
			p.Devices[d].Instrs = tc.instrs
		}
		pr, err := newProblem(p, m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		lb, err := pr.bound()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if math.Abs(lb-tc.want) > 1e-4 {
			t.Errorf("%s: bound %.9g s, want %g", tc.name, lb, tc.want)
		}
		r, err := Search(context.Background(), p, m, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Status != Optimal || r.Checks != 0 || r.Bound != lb || math.Abs(r.After-tc.want) > 1e-4 {
			t.Errorf("%s: %s after %d checks, %.9g s (bound %.9g); want optimal at the bound with no check", tc.name, r.Status, r.Checks, r.After, r.Bound)
		}
	}
}
