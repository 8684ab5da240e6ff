package order

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/sim"
)

// testModel: one node of four T4s on PCIe (1 GB/s, 1 µs), so collectives take milliseconds to
// seconds against kernels of similar seconds.
func testModel(t *testing.T) *cost.Model {
	t.Helper()
	c := &cluster.Cluster{Name: "order-test", Nodes: []cluster.Node{
		{Name: "a", Device: "T4", Count: 4, Intra: cluster.Link{Class: cluster.LinkPCIe, Bandwidth: 1e9, Latency: 1e-6}},
	}}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomProgram is an SPMD program over the first n of the model's four devices (the rest idle):
// the same instruction structure on every member, with kernel seconds that differ by device (a
// heterogeneous cluster's uneven shards), collectives over all members, and random dependencies.
func randomProgram(rng *rand.Rand, n, kernels, colls int) *devprog.Program {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	group := make([]int, n)
	for d := range group {
		group[d] = d
	}
	type slot struct {
		comm   bool
		id     int
		count  int64
		deps   []int
		second float64
	}
	var slots []slot
	left := []int{kernels, colls}
	for left[0]+left[1] > 0 {
		isComm := rng.Intn(left[0]+left[1]) >= left[0]
		s := slot{comm: isComm, second: 0.1 + rng.Float64()}
		if isComm {
			left[1]--
			s.id = colls - left[1]
			s.count = int64(1 + rng.Intn(2.5e8))
		} else {
			left[0]--
		}
		for j := range slots {
			if rng.Float64() < 0.3 {
				s.deps = append(s.deps, j)
			}
		}
		slots = append(slots, s)
	}
	for d := 0; d < n; d++ {
		scale := 1 + float64(d)*rng.Float64()
		for _, s := range slots {
			if s.comm {
				counts := make([]int64, n)
				for r := range counts {
					counts[r] = s.count
				}
				p.Devices[d].Append(devprog.Instr{Name: fmt.Sprintf("ar%d", s.id), Deps: s.deps,
					Comm: &devprog.Comm{ID: s.id, Kind: cost.AllReduce, Group: group, Counts: counts, ElemBytes: 4}})
				continue
			}
			p.Devices[d].Append(devprog.Instr{Name: "k", Deps: s.deps, Kernel: &devprog.Kernel{Op: "k", Seconds: s.second * scale}})
		}
	}
	return p
}

// permutations calls f with every ordering of xs.
func permutations(xs []int, f func([]int)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(xs) {
			f(xs)
			return
		}
		for i := k; i < len(xs); i++ {
			xs[k], xs[i] = xs[i], xs[k]
			rec(k + 1)
			xs[k], xs[i] = xs[i], xs[k]
		}
	}
	rec(0)
}

// bruteForce is the shortest simulated step over every communication-stream order of p (the
// same on every device, as SPMD programs need), skipping orders that deadlock.
func bruteForce(t *testing.T, p *devprog.Program, m *cost.Model) float64 {
	t.Helper()
	own := p.Devices[0].CommStream()
	best := math.Inf(1)
	permutations(append([]int{}, own...), func(order []int) {
		q := &devprog.Program{Devices: append([]devprog.DeviceProgram{}, p.Devices...)}
		for d := range q.Devices {
			if len(q.Devices[d].Instrs) > 0 {
				q.Devices[d].CommOrder = append([]int{}, order...)
			}
		}
		r, err := sim.Run(q, m)
		if err != nil {
			if strings.Contains(err.Error(), "deadlock") {
				return
			}
			t.Fatal(err)
		}
		best = math.Min(best, r.StepSeconds)
	})
	return best
}

// On random SPMD programs of one to three devices with up to five collectives, a window as wide as
// the stream makes the search exact: it proves its order optimal, and that order's simulated step
// is the least any order reaches (to within minGain, the improvement it does not chase).
func TestSearchMatchesExhaustiveEnumeration(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(1))
	cases, improved := 60, 0
	if testing.Short() {
		cases = 15
	}
	for c := 0; c < cases; c++ {
		p := randomProgram(rng, 1+rng.Intn(3), 2+rng.Intn(5), 2+rng.Intn(4))
		best := bruteForce(t, p, m)
		r, err := Search(context.Background(), p, m, Options{Window: 8})
		if err != nil {
			t.Fatalf("case %d: %v", c, err)
		}
		if r.Status != Optimal {
			t.Fatalf("case %d: status %s after %d checks, want optimal", c, r.Status, r.Checks)
		}
		if r.After < best*(1-1e-9) || r.After > best*(1+minGain) {
			t.Errorf("case %d: search %.9g s (from %.9g), enumeration %.9g s", c, r.After, r.Before, best)
		}
		again, err := sim.Run(r.Program, m)
		if err != nil || again.StepSeconds != r.After {
			t.Errorf("case %d: the returned program simulates to %v (%v), not the %.9g s reported", c, again, err, r.After)
		}
		if r.After < r.Before*(1-minGain) {
			improved++
		}
	}
	t.Logf("a faster order than the program's own in %d of %d cases", improved, cases)
	if improved == 0 {
		t.Errorf("no case had a faster order than its own: the test does not exercise the search")
	}
}

// A small window is a restriction, not a heuristic: the search is exact over the orders that move
// no collective more than the window past another, checked here by enumerating only those.
func TestSearchWithinAWindowIsExactOverIt(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(2))
	for c := 0; c < 20; c++ {
		p := randomProgram(rng, 1+rng.Intn(3), 3+rng.Intn(4), 4+rng.Intn(2))
		own := p.Devices[0].CommStream()
		pos := map[int]int{}
		for k, i := range own {
			pos[i] = k
		}
		const window = 1
		best := math.Inf(1)
		permutations(append([]int{}, own...), func(order []int) {
			for a := range order {
				for b := a + 1; b < len(order); b++ {
					if pos[order[a]]-pos[order[b]] > window {
						return // two collectives further apart than the window swapped
					}
				}
			}
			q := &devprog.Program{Devices: append([]devprog.DeviceProgram{}, p.Devices...)}
			for d := range q.Devices {
				if len(q.Devices[d].Instrs) > 0 {
					q.Devices[d].CommOrder = append([]int{}, order...)
				}
			}
			if r, err := sim.Run(q, m); err == nil {
				best = math.Min(best, r.StepSeconds)
			}
		})
		r, err := Search(context.Background(), p, m, Options{Window: window})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != Optimal || r.After < best*(1-1e-9) || r.After > best*(1+minGain) {
			t.Errorf("case %d: %s %.9g s, enumeration within the window %.9g s", c, r.Status, r.After, best)
		}
	}
}

// improvable is a program whose own order is beaten: two all-reduces listed in the order compute
// does not need them.
func improvable() *devprog.Program {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	group := []int{0, 1}
	for d := 0; d < 2; d++ {
		dp := &p.Devices[d]
		for id := 1; id <= 2; id++ {
			dp.Append(devprog.Instr{Name: fmt.Sprintf("ar%d", id), Comm: &devprog.Comm{ID: id, Kind: cost.AllReduce, Group: group, Counts: []int64{2.5e8, 2.5e8}, ElemBytes: 4}})
		}
		dp.Append(devprog.Instr{Name: "use", Deps: []int{1}, Kernel: &devprog.Kernel{Op: "k", Seconds: 1}})
	}
	return p
}

func TestSearchFindsTheFasterOrder(t *testing.T) {
	m := testModel(t)
	r, err := Search(context.Background(), improvable(), m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != Optimal || r.After >= r.Before*(1-minGain) {
		t.Fatalf("%s: %.6g → %.6g s, want a faster order proven optimal", r.Status, r.Before, r.After)
	}
	for d := 0; d < 2; d++ {
		if got := r.Program.Devices[d].CommOrder; len(got) != 2 || got[0] != 1 || got[1] != 0 {
			t.Errorf("device %d's order %v, want [1 0]", d, got)
		}
	}
	if r.Window != DefaultWindow || r.Pairs != 1 || r.Devices != 1 {
		t.Errorf("window %d, pairs %d, devices %d; want %d, 1, 1 (device 1 is device 0's twin)", r.Window, r.Pairs, r.Devices, DefaultWindow)
	}
}

// A faster order Accept rejects is not returned, and the answer no longer claims optimality.
func TestSearchRejectedOrders(t *testing.T) {
	m := testModel(t)
	seen := 0
	r, err := Search(context.Background(), improvable(), m, Options{Accept: func(*sim.Result) bool { seen++; return false }})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 || r.Status != Excluded || r.After != r.Before || r.Program.Devices[0].CommOrder != nil {
		t.Errorf("%d orders vetted; status %s, %.6g → %.6g s, order %v; want the program's own, excluded", seen, r.Status, r.Before, r.After, r.Program.Devices[0].CommOrder)
	}
}

// Out of budget, the search says so and keeps the best order found.
func TestSearchOutOfBudget(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(3))
	p := randomProgram(rng, 3, 30, 12)
	r, err := Search(context.Background(), p, m, Options{ResourceLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != Stopped || r.After > r.Before {
		t.Errorf("status %s, %.6g → %.6g s; want stopped, no slower", r.Status, r.Before, r.After)
	}
}

// Out of time, the search says so, by its limit, and keeps the best order found: a program
// whose search takes 3.5 s and six checks to its proof (two cores), given 300 ms.
func TestSearchOutOfTime(t *testing.T) {
	m := testModel(t)
	rng := rand.New(rand.NewSource(3))
	p := randomProgram(rng, 4, 300, 100)
	const limit = 300 * time.Millisecond
	began := time.Now()
	r, err := Search(context.Background(), p, m, Options{TimeLimit: limit})
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %s after %d checks, %.6g → %.6g s", took, r.Status, r.Checks, r.Before, r.After)
	if r.Status != TimeLimit || r.After > r.Before {
		t.Errorf("status %s, %.6g → %.6g s; want stopped by the time limit, no slower", r.Status, r.Before, r.After)
	}
	// The slack: the order found tidied and simulated after the stop.
	if took > limit+time.Second {
		t.Errorf("took %v under a time limit of %v", took, limit)
	}
}

func TestSearchErrors(t *testing.T) {
	m := testModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Search(ctx, improvable(), m, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Search(context.Background(), improvable(), m, Options{Window: -1}); err == nil || !strings.Contains(err.Error(), "window -1") {
		t.Errorf("negative window: %v", err)
	}
	if _, err := Search(context.Background(), improvable(), m, Options{TimeLimit: -time.Second}); err == nil || !strings.Contains(err.Error(), "time limit -1s") {
		t.Errorf("negative time limit: %v", err)
	}
	bad := improvable()
	bad.Devices[0].Instrs[2].Deps = []int{7}
	if _, err := Search(context.Background(), bad, m, Options{}); err == nil || !strings.Contains(err.Error(), "device 0, instruction 2") {
		t.Errorf("invalid program: %v", err)
	}
	short := &devprog.Program{Devices: make([]devprog.DeviceProgram, 2)}
	if _, err := Search(context.Background(), short, m, Options{}); err == nil || !strings.Contains(err.Error(), "2 devices") {
		t.Errorf("wrong device count: %v", err)
	}
}

// allReduce is collective id over group as one device's instruction.
func allReduce(id int, group []int, deps ...int) devprog.Instr {
	counts := make([]int64, len(group))
	for r := range counts {
		counts[r] = 2.5e8 // 1 GB: 1 s on the test model's PCIe
	}
	return devprog.Instr{Name: fmt.Sprintf("ar%d", id), Deps: deps, Comm: &devprog.Comm{ID: id, Kind: cost.AllReduce, Group: group, Counts: counts, ElemBytes: 4}}
}

// Three all-reduces listed ar1, ar2, ar3, and a 5 s kernel that needs only ar3: best is ar3 first
// (step 6 s), but a window of one lets ar3 pass only ar2 (ar1, ar3, ar2: 7 s).
func TestSearchKeepsPairsBeyondTheWindowInOrder(t *testing.T) {
	m := testModel(t)
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	for d := 0; d < 2; d++ {
		dp := &p.Devices[d]
		dp.Append(allReduce(1, []int{0, 1}))
		dp.Append(allReduce(2, []int{0, 1}))
		ar3 := dp.Append(allReduce(3, []int{0, 1}))
		dp.Append(devprog.Instr{Name: "use", Deps: []int{ar3}, Kernel: &devprog.Kernel{Op: "k", Seconds: 5}})
	}
	for _, tc := range []struct {
		window int
		order  []int
		step   float64
	}{{1, []int{0, 2, 1}, 7}, {2, []int{2, 0, 1}, 6}} {
		r, err := Search(context.Background(), p, m, Options{Window: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		got := r.Program.Devices[0].CommOrder
		if r.Status != Optimal || fmt.Sprint(got) != fmt.Sprint(tc.order) || math.Abs(r.After-tc.step) > 1e-3 {
			t.Errorf("window %d: %s, order %v, %.6g s; want optimal, %v, %g s", tc.window, r.Status, got, r.After, tc.order, tc.step)
		}
	}
}

// A collective that waits on another through a third device's compute is ordered after it on
// every stream, with no order variable: device 2 runs ar1 then ar2 with no dependency of its own,
// but on device 0, ar2 waits on a kernel that waits on ar1.
func TestDependenciesAcrossDevicesFixOrder(t *testing.T) {
	m := testModel(t)
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 4)}
	all := []int{0, 1, 2}
	d0 := &p.Devices[0]
	a := d0.Append(allReduce(1, all))
	k := d0.Append(devprog.Instr{Name: "k", Deps: []int{a}, Kernel: &devprog.Kernel{Op: "k", Seconds: 1}})
	d0.Append(allReduce(2, []int{0, 2}, k))
	p.Devices[1].Append(allReduce(1, all))
	p.Devices[2].Append(allReduce(1, all))
	p.Devices[2].Append(allReduce(2, []int{0, 2}))
	r, err := Search(context.Background(), p, m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pairs != 0 || r.Status != Optimal || r.After != r.Before {
		t.Errorf("%d free pairs, %s, %.6g → %.6g s; want none, optimal, unchanged", r.Pairs, r.Status, r.Before, r.After)
	}
}
