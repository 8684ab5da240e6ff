package devprog_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/sim"
)

// threeDevices is a cost model of three identical GPUs on one node, for
// simulating the hand-built programs below.
func threeDevices(t *testing.T) *cost.Model {
	t.Helper()
	c := &cluster.Cluster{Name: "three", Nodes: []cluster.Node{{Name: "n", Device: "T4", Count: 3,
		Intra: cluster.Link{Class: cluster.LinkPCIe, Bandwidth: 1e9, Latency: 1e-6}}}}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func kernelOn(name string, deps ...int) devprog.Instr {
	return devprog.Instr{Name: name, Kernel: &devprog.Kernel{Op: "test", Seconds: 1e-4}, Deps: deps}
}

func collective(id int, group []int, deps ...int) devprog.Instr {
	counts := make([]int64, len(group))
	for i := range counts {
		counts[i] = 1000
	}
	return devprog.Instr{Name: "c" + string(rune('0'+id)), Comm: &devprog.Comm{ID: id, Kind: cost.AllReduce, Group: group, Counts: counts, ElemBytes: 4}, Deps: deps}
}

// checkIssueOrder checks that order issues every instruction of dp once,
// each after its dependencies, kernels in list order and collectives in
// the communication stream's order.
func checkIssueOrder(t *testing.T, dp *devprog.DeviceProgram, order []int) {
	t.Helper()
	if len(order) != len(dp.Instrs) {
		t.Fatalf("order %v has %d instructions, want %d", order, len(order), len(dp.Instrs))
	}
	at := make([]int, len(dp.Instrs))
	for i := range at {
		at[i] = -1
	}
	var kernels, comms []int
	for k, i := range order {
		if at[i] >= 0 {
			t.Fatalf("order %v issues %d twice", order, i)
		}
		at[i] = k
		for _, dep := range dp.Instrs[i].Deps {
			if at[dep] < 0 {
				t.Fatalf("order %v issues %d before its dependency %d", order, i, dep)
			}
		}
		if dp.Instrs[i].Comm != nil {
			comms = append(comms, i)
		} else {
			kernels = append(kernels, i)
		}
	}
	if !slices.IsSorted(kernels) {
		t.Fatalf("order %v moves kernels: %v", order, kernels)
	}
	if !slices.Equal(comms, dp.CommStream()) {
		t.Fatalf("order %v issues collectives %v, the stream's order is %v", order, comms, dp.CommStream())
	}
}

// TestIssueOrdersKeepListOrder: without a searched order, a one-queue
// runtime issues the instruction list as it is.
func TestIssueOrdersKeepListOrder(t *testing.T) {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 2)}
	for d := range p.Devices {
		dp := &p.Devices[d]
		k0 := dp.Append(kernelOn("k0"))
		c0 := dp.Append(collective(0, []int{0, 1}, k0))
		dp.Append(kernelOn("k1", k0))
		c1 := dp.Append(collective(1, []int{0, 1}, c0))
		dp.Append(kernelOn("k2", c1))
	}
	orders, err := p.IssueOrders()
	if err != nil {
		t.Fatal(err)
	}
	for d, q := range orders {
		if want := []int{0, 1, 2, 3, 4}; !slices.Equal(q, want) {
			t.Errorf("device %d: issue order %v, want the list %v", d, q, want)
		}
	}
}

// TestIssueOrdersFollowSwaps: a swapped pair of independent collectives
// is issued swapped, the kernels between them staying where the
// dependencies allow.
func TestIssueOrdersFollowSwaps(t *testing.T) {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 2)}
	for d := range p.Devices {
		dp := &p.Devices[d]
		k0 := dp.Append(kernelOn("k0"))
		dp.Append(collective(0, []int{0, 1}, k0)) // 1
		k1 := dp.Append(kernelOn("k1"))           // 2
		dp.Append(collective(1, []int{0, 1}, k1)) // 3
		dp.Append(kernelOn("k2"))                 // 4
	}
	if err := p.ApplySwaps([]devprog.Swap{{0, 1}}); err != nil {
		t.Fatal(err)
	}
	orders, err := p.IssueOrders()
	if err != nil {
		t.Fatal(err)
	}
	for d, q := range orders {
		checkIssueOrder(t, &p.Devices[d], q)
		if want := []int{0, 2, 3, 1, 4}; !slices.Equal(q, want) {
			t.Errorf("device %d: issue order %v, want %v", d, q, want)
		}
	}
}

// TestIssueOrdersRefuseWhatHangs: an order a one-queue runtime could not
// finish is an error naming where it stops — and the simulator, the
// reference of the two-stream model, deadlocks on the same programs.
func TestIssueOrdersRefuseWhatHangs(t *testing.T) {
	m := threeDevices(t)
	// Across devices: every pair of the three shares a collective, and
	// device 0 issues its two in the other order, so each device waits
	// in a collective for one that waits in another.
	cycle := &devprog.Program{Devices: make([]devprog.DeviceProgram, 3)}
	for _, c := range []struct {
		id    int
		group []int
	}{{0, []int{0, 1}}, {1, []int{1, 2}}, {2, []int{0, 2}}} {
		for _, d := range c.group {
			cycle.Devices[d].Append(collective(c.id, c.group))
		}
	}
	if err := cycle.ApplySwaps([]devprog.Swap{{0, 2}}); err != nil {
		t.Fatal(err) // each device's own order is consistent
	}
	// On one device: collective 1 is moved before collective 0, but needs
	// kernel k2, which runs after k1, which needs collective 0.
	local := &devprog.Program{Devices: make([]devprog.DeviceProgram, 3)}
	for d := range local.Devices {
		dp := &local.Devices[d]
		c0 := dp.Append(collective(0, []int{0, 1, 2}))
		k1 := dp.Append(kernelOn("k1", c0))
		k2 := dp.Append(kernelOn("k2", k1))
		dp.Append(collective(1, []int{0, 1, 2}, k2))
	}
	if err := local.ApplySwaps([]devprog.Swap{{0, 1}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *devprog.Program
		want string
	}{
		{"across devices", cycle, "deadlocks: device 0 in collective 2"},
		{"on one device", local, `cannot be issued: instruction 1 ("k1") waits for instruction 0`},
	} {
		if _, err := c.p.IssueOrders(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: IssueOrders: %v, want an error containing %q", c.name, err, c.want)
		}
		if _, err := sim.Run(c.p, m); err == nil || !strings.Contains(err.Error(), "deadlock") {
			t.Errorf("%s: the simulator ran it: %v", c.name, err)
		}
	}
}

// TestIssueOrdersAgreeWithTheSimulator: on random programs — kernels and
// collectives over random groups with random dependencies, each device's
// collectives in a random order — a one-queue runtime can issue the orders
// exactly when the simulator's two streams finish them, and when it can,
// each device's issue order keeps its kernels' list order, its stream's
// order and its dependencies.
func TestIssueOrdersAgreeWithTheSimulator(t *testing.T) {
	m := threeDevices(t)
	rng := rand.New(rand.NewPCG(6, 25))
	groups := [][]int{{0, 1, 2}, {0, 1}, {1, 2}, {0, 2}, {1}}
	var issued, refused int
	for trial := range 400 {
		p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 3)}
		for c := range 2 + rng.IntN(6) {
			g := groups[rng.IntN(len(groups))]
			for _, d := range g {
				dp := &p.Devices[d]
				var deps []int
				if n := len(dp.Instrs); n > 0 && rng.IntN(2) == 0 {
					deps = append(deps, rng.IntN(n))
				}
				k := dp.Append(kernelOn("k", deps...))
				deps = nil
				if rng.IntN(2) == 0 {
					deps = append(deps, k)
				}
				dp.Append(collective(c, g, deps...))
			}
		}
		for d := range p.Devices {
			dp := &p.Devices[d]
			for range rng.IntN(3) { // kernels after the last collective, some reading it
				var deps []int
				if n := len(dp.Instrs); n > 0 {
					deps = append(deps, rng.IntN(n))
				}
				dp.Append(kernelOn("tail", deps...))
			}
			if q := slices.Clone(dp.CommStream()); len(q) > 1 && rng.IntN(2) == 0 {
				rng.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
				dp.CommOrder = q
			}
		}
		orders, err := p.IssueOrders()
		_, simErr := sim.Run(p, m)
		if (err == nil) != (simErr == nil) {
			t.Fatalf("trial %d: IssueOrders: %v; simulator: %v", trial, err, simErr)
		}
		if err != nil {
			refused++
			continue
		}
		issued++
		for d := range p.Devices {
			checkIssueOrder(t, &p.Devices[d], orders[d])
		}
	}
	t.Logf("issued %d refused %d", issued, refused)
	if issued < 50 || refused < 50 {
		t.Fatalf("%d programs issued, %d refused: the generator should give many of both", issued, refused)
	}
}

// TestApplyCommOrderNamesTheSwapThatHangs: a plan whose recorded order
// cannot run is refused when it is applied, naming the swap that does it
// (here a collective put before the one whose result it reads), and a
// harmless swap beside it is not blamed.
func TestApplyCommOrderNamesTheSwapThatHangs(t *testing.T) {
	p := &devprog.Program{Devices: make([]devprog.DeviceProgram, 2)}
	for d := range p.Devices {
		// c1; k reads it; c2 reads k; c3 reads nothing.
		p.Devices[d].Instrs = []devprog.Instr{collective(1, []int{0, 1}), kernelOn("k", 0), collective(2, []int{0, 1}, 1), collective(3, []int{0, 1})}
	}
	digest := p.CollectiveDigest()
	cases := []struct {
		swaps [][2]int
		blame string // "" when the order runs
	}{
		{[][2]int{{2, 3}}, ""},
		{[][2]int{{1, 2}}, "swap [1, 2] (all-reduce \"c1\" issued after all-reduce \"c2\") makes the order hang: device 0: "},
		{[][2]int{{1, 2}, {1, 3}, {2, 3}}, "swap [1, 2] (all-reduce \"c1\" issued after all-reduce \"c2\") makes the order hang: device 0: "},
	}
	for _, tc := range cases {
		_, err := p.ApplyCommOrder(tc.swaps, digest)
		switch {
		case tc.blame == "" && err != nil:
			t.Errorf("swaps %v: %v", tc.swaps, err)
		case tc.blame != "" && (err == nil || !strings.Contains(err.Error(), tc.blame) || !strings.Contains(err.Error(), "cannot be issued")):
			t.Errorf("swaps %v: got %v, want it to say %q", tc.swaps, err, tc.blame)
		}
	}
}
