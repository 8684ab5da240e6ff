package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/internal/golden"
	"hap/ir"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// model: two nodes of 4 T4 each; intra α = 1 µs, β = 1 GB/s; network α = 100 µs, β = 100 MB/s
// achieved (a line rate of 100 MB/s ÷ cost.EthernetBandwidthEfficiency). Every collective also pays
// cost.CollectiveBaseLatency, every kernel with Work cost.KernelLaunchOverhead.
func model(t *testing.T) *cost.Model {
	t.Helper()
	intra := cluster.Link{Class: cluster.LinkPCIe, Bandwidth: 1e9, Latency: 1e-6}
	c := &cluster.Cluster{Name: "sim-test", Nodes: []cluster.Node{
		{Name: "a", Device: "T4", Count: 4, Intra: intra},
		{Name: "b", Device: "T4", Count: 4, Intra: intra},
	}, Inter: cluster.InterLink{Link: cluster.Link{Class: cluster.LinkEthernet, Bandwidth: 1e8 / cost.EthernetBandwidthEfficiency, Latency: 1e-4}, NICsPerNode: 1}}
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func program(n int) *devprog.Program {
	return &devprog.Program{Devices: make([]devprog.DeviceProgram, n)}
}

func kernel(name string, secs float64, deps ...int) devprog.Instr {
	return devprog.Instr{Name: name, Kernel: &devprog.Kernel{Op: "k", Seconds: secs}, Deps: deps}
}

func comm(id int, kind cost.Collective, group []int, count int64, deps ...int) devprog.Instr {
	counts := make([]int64, len(group))
	for i := range counts {
		counts[i] = count
	}
	return devprog.Instr{Name: string(kind), Comm: &devprog.Comm{ID: id, Kind: kind, Group: group, Counts: counts, ElemBytes: 4}, Deps: deps}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// An all-reduce of 1e9 bytes between devices 0 and 1 (one node) takes 2e-6 + 1 s. Each device: fwd
// (1 s), then the all-reduce overlapping an independent 3 s kernel, then an update after both.
func TestOverlapOfCommunicationWithCompute(t *testing.T) {
	m := model(t)
	p := program(8)
	for d := 0; d < 2; d++ {
		dp := &p.Devices[d]
		f := dp.Append(kernel("fwd", 1))
		ar := dp.Append(comm(1, cost.AllReduce, []int{0, 1}, 2.5e8, f))
		k := dp.Append(kernel("other", 3, f))
		dp.Append(kernel("update", 1, ar, k))
	}
	r, err := Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	const ar = cost.CollectiveBaseLatency + 2e-6 + 1
	// fwd [0,1]; all-reduce [1, 2.000006]; other [1, 4]; update [4, 5].
	if !near(r.StepSeconds, 5) {
		t.Errorf("step %g, want 5", r.StepSeconds)
	}
	for d := 0; d < 2; d++ {
		s := r.Devices[d]
		if !near(s.Compute, 5) || !near(s.Comm, ar) || !near(s.Overlap, ar) || !near(s.Idle, 0) || !near(s.Finish, 5) {
			t.Errorf("device %d: %+v; want compute 5, comm %g, overlap %g, idle 0", d, s, ar, ar)
		}
	}
	// Devices without instructions idle the whole step.
	if s := r.Devices[5]; !near(s.Idle, 5) || s.Compute != 0 {
		t.Errorf("device 5: %+v", s)
	}
	e := r.Events[1]
	if e.Device != 0 || e.Index != 1 || !near(e.Start, 1) || !near(e.End, 1+ar) || e.Algorithm != cost.AlgoRing {
		t.Errorf("all-reduce event %+v", e)
	}
}

// A collective starts when its slowest member reaches it; the others wait (idle).
func TestCollectiveWaitsForSlowestMember(t *testing.T) {
	m := model(t)
	p := program(8)
	group := []int{0, 1, 4}    // {0,1 | 4}: spans both nodes
	work := []float64{1, 3, 2} // seconds before the all-gather
	for r, d := range group {
		dp := &p.Devices[d]
		k := dp.Append(kernel("fwd", work[r]))
		dp.Append(comm(9, cost.AllGather, group, 2.5e7, k)) // 1e8-byte pieces
	}
	res, err := Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	// Ring over {0,1 | 4}: base + 2·(1e-4 + 1e8/1e8) = 2.0002 s + base (cheaper than hierarchical,
	// see package cost).
	const ag = cost.CollectiveBaseLatency + 2.0002
	if !near(res.StepSeconds, 3+ag) {
		t.Errorf("step %g, want %g", res.StepSeconds, 3+ag)
	}
	for r, d := range group {
		s := res.Devices[d]
		if !near(s.Idle, 3-work[r]) || !near(s.Comm, ag) {
			t.Errorf("device %d: idle %g (want %g), comm %g (want %g)", d, s.Idle, 3-work[r], s.Comm, ag)
		}
		if ev := res.Events[res.offsets[d]+1]; !near(ev.Start, 3) {
			t.Errorf("device %d: all-gather starts at %g, want 3", d, ev.Start)
		}
	}
}

// Instructions on one stream run in order even without dependencies; explicit dependencies delay
// across streams; kernels with Work take the cost model's time.
func TestStreamOrderAndWork(t *testing.T) {
	m := model(t)
	p := program(8)
	dp := &p.Devices[0]
	dp.Append(kernel("a", 1))
	dp.Append(kernel("b", 2)) // waits for a: same stream
	// 1e9 bytes at 320e9 × 0.8 B/s (T4, memory bound).
	w := &ir.Work{Class: ir.ClassElementwise, FLOPs: 0, Bytes: 256e9}
	dp.Append(devprog.Instr{Name: "c", Kernel: &devprog.Kernel{Op: "add", Work: w}})
	dp.Append(comm(3, cost.SendRecv, []int{0, 1}, 2.5e8, 1)) // after b: base + 1e-6 + 1 s
	p.Devices[1].Append(comm(3, cost.SendRecv, []int{0, 1}, 2.5e8))
	r, err := Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	c := 1 + cost.KernelLaunchOverhead          // kernel c: its roofline plus its launch
	sr := 1 + 1e-6 + cost.CollectiveBaseLatency // the send-recv
	want := []struct{ start, end float64 }{{0, 1}, {1, 3}, {3, 3 + c}, {3, 3 + sr}}
	for i, w := range want {
		if e := r.Events[i]; !near(e.Start, w.start) || !near(e.End, w.end) {
			t.Errorf("instruction %d: [%g, %g], want [%g, %g]", i, e.Start, e.End, w.start, w.end)
		}
	}
	// Device 1 receives as soon as device 0 sends.
	if e := r.Events[4]; e.Device != 1 || !near(e.Start, 3) {
		t.Errorf("receiver event %+v", e)
	}
	if s := r.Devices[0]; !near(s.Overlap, math.Min(c, sr)) {
		t.Errorf("overlap %g, want %g", s.Overlap, math.Min(c, sr))
	}
}

func TestPeakMemory(t *testing.T) {
	m := model(t)
	p := program(8)
	dp := &p.Devices[0]
	dp.Resident = 100
	a := dp.Append(devprog.Instr{Name: "a", Kernel: &devprog.Kernel{Seconds: 1}, Alloc: 50})
	b := dp.Append(devprog.Instr{Name: "b", Kernel: &devprog.Kernel{Seconds: 1}, Alloc: 30, Free: 80, Deps: []int{a}})
	// The communication buffer is taken at t = 2 while c's allocation is live.
	dp.Append(devprog.Instr{Name: "c", Kernel: &devprog.Kernel{Seconds: 2}, Alloc: 40, Deps: []int{b}})
	c := comm(4, cost.AllReduce, []int{0}, 10, b)
	c.Alloc, c.Free = 25, 25
	dp.Append(c)
	r, err := Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	// t=0: 150; t=1: 180; t=2: b frees 80 → 100, then c +40 and the buffer +25 → 165.
	if got := r.Devices[0].PeakMemory; got != 180 {
		t.Errorf("peak %d, want 180", got)
	}
	if !r.Devices[0].Fits() || r.Devices[0].Capacity != 16<<30 {
		t.Errorf("capacity %d", r.Devices[0].Capacity)
	}
}

func TestDeadlockAndErrors(t *testing.T) {
	m := model(t)
	p := program(8)
	p.Devices[0].Append(comm(1, cost.AllReduce, []int{0, 1}, 1))
	p.Devices[0].Append(comm(2, cost.AllReduce, []int{0, 1}, 1))
	p.Devices[1].Append(comm(2, cost.AllReduce, []int{0, 1}, 1))
	p.Devices[1].Append(comm(1, cost.AllReduce, []int{0, 1}, 1))
	_, err := Run(p, m)
	if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "device 1 communication stream at instruction 0") {
		t.Errorf("error %v", err)
	}
	// Devices stuck at the same place are named together.
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	spmd := program(8)
	for d := range spmd.Devices {
		spmd.Devices[d].Append(comm(1, cost.AllReduce, all, 1))
		spmd.Devices[d].Append(comm(2, cost.AllReduce, all, 1))
	}
	spmd.Devices[5].CommOrder = []int{1, 0}
	_, err = Run(spmd, m)
	if want := `waiting: devices 0-4, 6-7 communication stream at instruction 0 ("all-reduce"), collective 1; device 5 communication stream at instruction 1`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want it to contain %q", err, want)
	}
	if _, err := Run(program(3), m); err == nil || !strings.Contains(err.Error(), "the program has 3 devices") {
		t.Errorf("error %v", err)
	}
	bad := program(8)
	bad.Devices[2].Append(kernel("x", 1, 4))
	if _, err := Run(bad, m); err == nil || !strings.Contains(err.Error(), "device 2, instruction 0") {
		t.Errorf("error %v", err)
	}
	// A collective the cost model rejects (uneven pieces, even method) names the instruction.
	uneven := program(8)
	for _, d := range []int{0, 1} {
		uneven.Devices[d].Append(devprog.Instr{Name: "ag", Comm: &devprog.Comm{ID: 1, Kind: cost.AllGather, Group: []int{0, 1}, Counts: []int64{1, 2}, ElemBytes: 4}})
	}
	if _, err := Run(uneven, m); err == nil || !strings.Contains(err.Error(), "need method padded or grouped") {
		t.Errorf("error %v", err)
	}
}

// tracedProgram: data parallelism on devices 0–2 with a grouped uneven all-gather, a broadcast and
// memory, enough to exercise every trace field.
func tracedProgram() *devprog.Program {
	p := program(8)
	group := []int{0, 1, 4}
	for r, d := range group {
		dp := &p.Devices[d]
		dp.Resident = 1 << 20
		f := dp.Append(devprog.Instr{Name: "fwd", Kernel: &devprog.Kernel{Op: "matmul", Work: &ir.Work{Class: ir.ClassMatMul, FLOPs: 1e12 * float64(r+1), Bytes: 1e8}}, Alloc: 1 << 20})
		ag := dp.Append(devprog.Instr{Name: "gather", Comm: &devprog.Comm{ID: 1, Kind: cost.AllGather, Group: group, Counts: []int64{1e6, 2e6, 3e6}, ElemBytes: 4, Method: cost.MethodGrouped}, Deps: []int{f}, Alloc: 24e6})
		dp.Append(devprog.Instr{Name: "bwd", Kernel: &devprog.Kernel{Op: "matmul-backward", Seconds: 0.01}, Deps: []int{f}})
		dp.Append(devprog.Instr{Name: "bcast", Comm: &devprog.Comm{ID: 2, Kind: cost.Broadcast, Group: group, Counts: []int64{5e5, 5e5, 5e5}, ElemBytes: 4, Root: 2}, Deps: []int{ag}, Free: 24e6 + 1<<20})
	}
	return p
}

func TestTraceGoldenAndDeterministic(t *testing.T) {
	m := model(t)
	var outs [2][]byte
	for i := range outs {
		r, err := Run(tracedProgram(), m)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := r.WriteTrace(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteSummary(&b, false); err != nil {
			t.Fatal(err)
		}
		outs[i] = b.Bytes()
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("two runs differ")
	}
	const end = "\"displayTimeUnit\":\"ms\"}\n"
	trace, summary, _ := bytes.Cut(outs[0], []byte(end))
	trace = append(trace, end...)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(trace, &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	complete, meta := 0, 0
	for _, ev := range doc.TraceEvents {
		switch ev["ph"] {
		case "X":
			complete++
			for _, k := range []string{"ts", "dur", "pid", "tid", "name"} {
				if _, ok := ev[k]; !ok {
					t.Errorf("X event without %s: %v", k, ev)
				}
			}
		case "M":
			meta++
		}
	}
	if complete != 12 || meta != 8*6 {
		t.Errorf("%d complete and %d metadata events, want 12 and 48", complete, meta)
	}
	golden.Compare(t, "trace.golden.json", trace, *update)
	golden.Compare(t, "summary.golden.txt", summary, *update)
}

// MergeDeviceRows joins only devices numbered one after another whose
// cells are the same.
func TestMergeDeviceRows(t *testing.T) {
	in := []DeviceRow{{First: 0, Cells: "a"}, {First: 1, Cells: "a"}, {First: 2, Cells: "b"},
		{First: 3, Cells: "a"}, {First: 5, Cells: "a"}, {First: 6, Cells: "a"}, {First: 7, Cells: "a"}}
	var got []string
	for _, r := range MergeDeviceRows(in) {
		got = append(got, r.Label()+"|"+r.Cells)
	}
	want := []string{"0–1 ×2|a", "2|b", "3|a", "5–7 ×3|a"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// WriteSummary with eachDevice lists every device, numbered, with the
// figures the merged table gives its row.
func TestWriteSummaryEachDevice(t *testing.T) {
	r, err := Run(tracedProgram(), model(t))
	if err != nil {
		t.Fatal(err)
	}
	var merged, each bytes.Buffer
	if err := r.WriteSummary(&merged, false); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteSummary(&each, true); err != nil {
		t.Fatal(err)
	}
	rows := func(b *bytes.Buffer) []string { return strings.Split(strings.TrimSpace(b.String()), "\n")[2:] }
	eachRows, mergedRows := rows(&each), rows(&merged)
	if len(eachRows) != len(r.Devices) {
		t.Fatalf("each device: %d rows for %d devices:\n%s", len(eachRows), len(r.Devices), each.String())
	}
	own := map[string]string{}
	for i, row := range eachRows {
		f := strings.Fields(row)
		if f[0] != strconv.Itoa(i) {
			t.Errorf("row %d names device %s", i, f[0])
		}
		own[f[0]] = strings.Join(f[1:], " ")
	}
	devices := 0
	for _, row := range mergedRows {
		f := strings.Fields(row)
		first, last, figures := f[0], f[0], f[1:]
		if lo, hi, ok := strings.Cut(f[0], "–"); ok {
			first, last, figures = lo, hi, f[2:]
		}
		a, _ := strconv.Atoi(first)
		b, _ := strconv.Atoi(last)
		for d := a; d <= b; d++ {
			if got := own[strconv.Itoa(d)]; got != strings.Join(figures, " ") {
				t.Errorf("device %d: merged row %q, its own %q", d, strings.Join(figures, " "), got)
			}
			devices++
		}
	}
	if devices != len(r.Devices) || len(mergedRows) >= len(eachRows) {
		t.Errorf("%d merged rows stand for %d devices (of %d):\n%s", len(mergedRows), devices, len(r.Devices), merged.String())
	}
}

// BenchmarkRunDataParallel: 64 devices (paper-64), 4000 instructions each, an all-reduce after every
// 10 kernels overlapping the next kernels.
func BenchmarkRunDataParallel(b *testing.B) {
	c, _ := cluster.Builtin("paper-64")
	m, err := cost.New(c, cost.Options{})
	if err != nil {
		b.Fatal(err)
	}
	group := make([]int, 64)
	for i := range group {
		group[i] = i
	}
	p := program(64)
	for d := range p.Devices {
		dp := &p.Devices[d]
		last := -1
		for i := 0; i < 4000; i++ {
			if i%10 == 9 {
				dp.Append(comm(i, cost.AllReduce, group, 1e6, last))
				continue
			}
			in := devprog.Instr{Name: "k", Kernel: &devprog.Kernel{Op: "matmul", Work: &ir.Work{Class: ir.ClassMatMul, FLOPs: 1e10, Bytes: 1e7}}}
			if last >= 0 {
				in.Deps = []int{last}
			}
			last = dp.Append(in)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Run(p, m); err != nil {
			b.Fatal(err)
		}
	}
}

// A shortfall reads in the unit of its figures: GB on a GPU, MB for a
// tiny model on a cluster with overridden memory.
func TestShortfallUnits(t *testing.T) {
	for _, c := range []struct {
		s    DeviceStats
		want string
	}{
		{DeviceStats{Device: 0, Type: "V100", PeakMemory: 17349143396, Capacity: 17179869184}, "device 0 (V100) needs 17.3 GB, has 17.2 GB"},
		{DeviceStats{Device: 2, Type: "P100", PeakMemory: 421000, Capacity: 400000}, "device 2 (P100) needs 0.421 MB, has 0.4 MB"},
	} {
		if got := c.s.Shortfall(); got != c.want {
			t.Errorf("Shortfall() = %q, want %q", got, c.want)
		}
	}
}

// OverMemory names the most-over device and counts the rest.
func TestOverMemory(t *testing.T) {
	devs := []DeviceStats{
		{Device: 0, Type: "V100", PeakMemory: 18e9, Capacity: 17e9},
		{Device: 1, Type: "P100", PeakMemory: 20e9, Capacity: 17e9}, // the most over
		{Device: 2, Type: "P100", PeakMemory: 10e9, Capacity: 17e9},
		{Device: 3, Type: "P100", PeakMemory: 17.5e9, Capacity: 17e9},
	}
	if got, want := OverMemory(devs), "device 1 (P100) needs 20 GB, has 17 GB, and 2 more devices are over"; got != want {
		t.Errorf("OverMemory = %q, want %q", got, want)
	}
	if got := OverMemory(devs[2:3]); got != "" {
		t.Errorf("every device fits: %q", got)
	}
}

// A communication stream runs in CommOrder when it is set: an all-reduce the program lists first,
// issued second, lets a later-listed one that compute waits on go first. Each all-reduce of 1e9
// bytes between devices 0 and 1 takes 1 s + 2 µs + the base latency; the kernel "use" waits on the
// second one only.
func TestCommOrderReordersTheStream(t *testing.T) {
	m := model(t)
	build := func(order []int) *devprog.Program {
		p := program(8)
		for d := 0; d < 2; d++ {
			dp := &p.Devices[d]
			dp.Append(comm(1, cost.AllReduce, []int{0, 1}, 2.5e8))
			b := dp.Append(comm(2, cost.AllReduce, []int{0, 1}, 2.5e8))
			dp.Append(kernel("use", 1, b))
			dp.CommOrder = order
		}
		return p
	}
	listed, err := Run(build(nil), m)
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := Run(build([]int{1, 0}), m)
	if err != nil {
		t.Fatal(err)
	}
	// Listed: ar1 [0, 1], ar2 [1, 2], use [2, 3]. Swapped: ar2 [0, 1], ar1 and use [1, 2].
	const ar = 1 + 2e-6 + cost.CollectiveBaseLatency
	if !near(listed.StepSeconds, 2*ar+1) || !near(swapped.StepSeconds, 2*ar) {
		t.Errorf("steps %g listed, %g swapped; want %g and %g", listed.StepSeconds, swapped.StepSeconds, 2*ar+1, 2*ar)
	}
	// Events stay in list order, whatever the issue order.
	if e := swapped.Events[0]; e.Index != 0 || !near(e.Start, ar) {
		t.Errorf("swapped program's first event %+v, want instruction 0 starting at %g", e, ar)
	}
	// Orders that disagree across members deadlock.
	mixed := build(nil)
	mixed.Devices[1].CommOrder = []int{1, 0}
	if _, err := Run(mixed, m); err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("members issuing in different orders: error %v, want a deadlock", err)
	}
}

// A stream issued in another order than its list (CommOrder) has the
// same busy, overlap and idle accounting as one listed in that order:
// events stay in list order, so the communication stream's intervals
// arrive out of time order. Here the all-reduce listed second runs first,
// [0, 1], beside the kernel "early", and the one listed first runs [1, 2]
// beside "use": every second of communication overlaps compute. (Swept in
// list order, the overlap came out 1 s, and the device busier than the
// step: bert-moe's searched order on paper-8, busy 0.576 s of 0.566 s.)
func TestStatsOfAReorderedStream(t *testing.T) {
	m := model(t)
	p := program(8)
	for d := 0; d < 2; d++ {
		dp := &p.Devices[d]
		dp.Append(kernel("early", 1))
		dp.Append(comm(1, cost.AllReduce, []int{0, 1}, 2.5e8))
		b := dp.Append(comm(2, cost.AllReduce, []int{0, 1}, 2.5e8))
		dp.Append(kernel("use", 1, b))
		dp.CommOrder = []int{2, 1}
	}
	r, err := Run(p, m)
	if err != nil {
		t.Fatal(err)
	}
	const ar = 1 + 2e-6 + cost.CollectiveBaseLatency // one all-reduce
	for d, s := range r.Devices[:2] {
		// early [0, 1], use [ar, ar + 1]; all-reduce 2 [0, ar], 1 [ar, 2ar].
		if !near(s.Compute, 2) || !near(s.Comm, 2*ar) || !near(s.Overlap, 1+1) {
			t.Errorf("device %d: %+v; want compute 2, comm %g, overlap 2", d, s, 2*ar)
		}
		if busy := s.Compute + s.Comm - s.Overlap; busy > r.StepSeconds*(1+1e-12) || !near(busy+s.Idle, r.StepSeconds) {
			t.Errorf("device %d: busy %g + idle %g, step %g", d, busy, s.Idle, r.StepSeconds)
		}
	}
}
