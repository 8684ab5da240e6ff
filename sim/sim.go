package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"hap/cost"
	"hap/devprog"
)

// Event is one instruction's execution.
type Event struct {
	Device int            `json:"device"`
	Stream devprog.Stream `json:"stream"`
	// Index is the instruction's index in its device's list.
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Start and End are seconds from the start of the step.
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Algorithm is the collective algorithm the cost model assumed ("" for kernels).
	Algorithm cost.Algorithm `json:"algorithm,omitempty"`
}

// DeviceStats is one device's share of the step. Busy times are sums over the stream's instructions;
// Idle is the step time minus the time at least one stream is busy (so it includes waiting for other
// devices, at collectives or at the end of the step).
type DeviceStats struct {
	Device int    `json:"device"`
	Type   string `json:"type"`
	// Compute and Comm are the busy seconds of the compute and communication streams.
	Compute float64 `json:"compute_seconds"`
	Comm    float64 `json:"comm_seconds"`
	// Overlap is the seconds both streams are busy at once.
	Overlap float64 `json:"overlap_seconds"`
	Idle    float64 `json:"idle_seconds"`
	// Finish is when the device's last instruction ends.
	Finish float64 `json:"finish_seconds"`
	// PeakMemory is the highest resident + allocated bytes over the step; Capacity the device memory.
	PeakMemory int64 `json:"peak_memory_bytes"`
	Capacity   int64 `json:"capacity_bytes"`
}

// Fits reports whether the device's peak memory fits its capacity.
func (s DeviceStats) Fits() bool { return s.PeakMemory <= s.Capacity }

// Shortfall says what the device needs against what it has, for messages
// about a device that does not fit: "device 0 (RTX-4090) needs 47.8 GB,
// has 25.8 GB".
func (s DeviceStats) Shortfall() string {
	unit, per := cost.ByteUnit(float64(max(s.PeakMemory, s.Capacity)))
	return fmt.Sprintf("device %d (%s) needs %.3g %s, has %.3g %s", s.Device, s.Type, float64(s.PeakMemory)*per, unit, float64(s.Capacity)*per, unit)
}

// OverMemory says which devices' simulated peak does not fit: the
// most-over one by name and bytes (Shortfall), and how many more — "device
// 2 (P100-PCIE-16GB) needs 17.3 GB, has 17.2 GB, and 5 more devices are
// over" — or "" when every device fits. A capacity of 0 (unknown) is not
// judged.
func OverMemory(devs []DeviceStats) string {
	worst, n := -1, 0
	for d, st := range devs {
		if st.Fits() || st.Capacity <= 0 {
			continue
		}
		n++
		if worst < 0 || st.PeakMemory-st.Capacity > devs[worst].PeakMemory-devs[worst].Capacity {
			worst = d
		}
	}
	if worst < 0 {
		return ""
	}
	msg := devs[worst].Shortfall()
	switch {
	case n == 2:
		msg += ", and 1 more device is over"
	case n > 2:
		msg += fmt.Sprintf(", and %d more devices are over", n-1)
	}
	return msg
}

// Result is a simulated step.
type Result struct {
	// StepSeconds is when the last instruction of any device ends.
	StepSeconds float64       `json:"step_seconds"`
	Devices     []DeviceStats `json:"per_device"`
	// Events lists every instruction's execution, ordered by device, then instruction index.
	Events []Event `json:"-"`

	program *devprog.Program
	model   *cost.Model
	offsets []int // device d's events are Events[offsets[d]:offsets[d+1]]
}

// deviceEvents is device d's slice of Events.
func (r *Result) deviceEvents(d int) []Event { return r.Events[r.offsets[d]:r.offsets[d+1]] }

// Run simulates one step of p on the cluster of m. The program must have one device list per cluster
// device and pass Program.Validate. A program whose devices reach collectives in incompatible orders is
// reported as a deadlock, naming where each stuck device waits.
func Run(p *devprog.Program, m *cost.Model) (*Result, error) {
	return RunContext(context.Background(), p, m)
}

// RunContext is Run, stopped with ctx's error when ctx ends: a simulation
// of a program on tens of thousands of devices takes seconds, and a
// command's time limit must bound it too.
func RunContext(ctx context.Context, p *devprog.Program, m *cost.Model) (*Result, error) {
	if len(p.Devices) != m.NumDevices() {
		return nil, fmt.Errorf("simulate: the program has %d devices, cluster %q has %d", len(p.Devices), m.Cluster().Name, m.NumDevices())
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: invalid program: %w", err)
	}
	s := newState(p)
	if err := s.run(ctx, m); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	r := &Result{program: p, model: m}
	total := 0
	for d := range p.Devices {
		total += len(p.Devices[d].Instrs)
	}
	r.Events = make([]Event, 0, total)
	offsets := make([]int, len(p.Devices)+1)
	for d := range p.Devices {
		for i := range p.Devices[d].Instrs {
			in := &p.Devices[d].Instrs[i]
			r.Events = append(r.Events, Event{Device: d, Stream: in.Stream(), Index: i, Name: in.Name,
				Start: s.start[d][i], End: s.end[d][i], Algorithm: s.algo[d][i]})
			r.StepSeconds = math.Max(r.StepSeconds, s.end[d][i])
		}
		offsets[d+1] = len(r.Events)
	}
	r.offsets = offsets
	for d := range p.Devices {
		r.Devices = append(r.Devices, r.stats(d))
	}
	return r, nil
}

// state is the scheduler's bookkeeping.
type state struct {
	p          *devprog.Program
	queue      [][devprog.NumStreams][]int // per device and stream: instruction indices in order
	head       [][devprog.NumStreams]int   // next position in queue
	free       [][devprog.NumStreams]float64
	start, end [][]float64
	done       [][]bool
	algo       [][]cost.Algorithm
	left       int
}

func newState(p *devprog.Program) *state {
	n := len(p.Devices)
	s := &state{p: p, queue: make([][devprog.NumStreams][]int, n), head: make([][devprog.NumStreams]int, n),
		free: make([][devprog.NumStreams]float64, n), start: make([][]float64, n), end: make([][]float64, n),
		done: make([][]bool, n), algo: make([][]cost.Algorithm, n)}
	for d, dp := range p.Devices {
		k := len(dp.Instrs)
		s.start[d], s.end[d], s.done[d], s.algo[d] = make([]float64, k), make([]float64, k), make([]bool, k), make([]cost.Algorithm, k)
		for i := range dp.Instrs {
			if dp.Instrs[i].Stream() == devprog.StreamCompute {
				s.queue[d][devprog.StreamCompute] = append(s.queue[d][devprog.StreamCompute], i)
			}
		}
		s.queue[d][devprog.StreamComm] = dp.CommStream()
		s.left += k
	}
	return s
}

// ready is when instruction i of device d may start as far as its own device is concerned (stream free
// and dependencies finished), or false if a dependency has not run yet.
func (s *state) ready(d, i int) (float64, bool) {
	in := &s.p.Devices[d].Instrs[i]
	t := s.free[d][in.Stream()]
	for _, dep := range in.Deps {
		if !s.done[d][dep] {
			return 0, false
		}
		t = math.Max(t, s.end[d][dep])
	}
	return t, true
}

func (s *state) finish(d, i int, start, end float64, a cost.Algorithm) {
	st := s.p.Devices[d].Instrs[i].Stream()
	s.start[d][i], s.end[d][i], s.done[d][i], s.algo[d][i] = start, end, true, a
	s.free[d][st] = end
	s.head[d][st]++
	s.left--
}

// run schedules every instruction. Each stream is in order, so an instruction's start is fixed by its
// predecessors' ends: repeatedly advance every stream head that can start until all have run.
func (s *state) run(ctx context.Context, m *cost.Model) error {
	for s.left > 0 {
		if err := ctx.Err(); err != nil { // once a sweep over every device: cheap beside it
			return err
		}
		progress := false
		for d := range s.p.Devices {
			for st := devprog.Stream(0); st < devprog.NumStreams; st++ {
				for s.head[d][st] < len(s.queue[d][st]) {
					ok, err := s.step(m, d, st)
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					progress = true
				}
			}
		}
		if !progress {
			return s.deadlock()
		}
	}
	return nil
}

// step tries to start the head of stream st on device d.
func (s *state) step(m *cost.Model, d int, st devprog.Stream) (bool, error) {
	i := s.queue[d][st][s.head[d][st]]
	in := &s.p.Devices[d].Instrs[i]
	t, ok := s.ready(d, i)
	if !ok {
		return false, nil
	}
	if in.Kernel != nil {
		dur := in.Kernel.Seconds
		if in.Kernel.Work != nil {
			dur = m.ComputeTime(d, *in.Kernel.Work)
		}
		s.finish(d, i, t, t+dur, "")
		return true, nil
	}
	// A collective starts when every member's communication stream has reached it and its
	// dependencies there are done.
	c := in.Comm
	members := make([]int, len(c.Group))
	for r, e := range c.Group {
		q := s.queue[e][devprog.StreamComm]
		h := s.head[e][devprog.StreamComm]
		if h >= len(q) || s.p.Devices[e].Instrs[q[h]].Comm.ID != c.ID {
			return false, nil
		}
		te, ok := s.ready(e, q[h])
		if !ok {
			return false, nil
		}
		t = math.Max(t, te)
		members[r] = q[h]
	}
	est, err := m.Collective(c.Call())
	if err != nil {
		return false, fmt.Errorf("device %d, instruction %d (%q): %w", d, i, in.Name, err)
	}
	for r, e := range c.Group {
		s.finish(e, members[r], t, t+est.Seconds, est.Algorithm)
	}
	return true, nil
}

func (s *state) deadlock() error {
	// Devices stuck at the same place (an SPMD program's usual case) are
	// named together, so the error stays one readable line on 64 GPUs.
	var places []string
	at := map[string][]int{}
	for d := range s.p.Devices {
		for st := devprog.Stream(0); st < devprog.NumStreams; st++ {
			if h := s.head[d][st]; h < len(s.queue[d][st]) {
				i := s.queue[d][st][h]
				in := &s.p.Devices[d].Instrs[i]
				what := fmt.Sprintf("%s stream at instruction %d (%q)", st, i, in.Name)
				if in.Comm != nil {
					what += fmt.Sprintf(", collective %d", in.Comm.ID)
				}
				if at[what] == nil {
					places = append(places, what)
				}
				at[what] = append(at[what], d)
			}
		}
	}
	waits := make([]string, len(places))
	for k, what := range places {
		waits[k] = devicesText(at[what]) + " " + what
	}
	return fmt.Errorf("deadlock: no instruction can start; waiting: %s", strings.Join(waits, "; "))
}

// devicesText names increasing device indices compactly: "device 3",
// "devices 0-7", "devices 0-3, 6".
func devicesText(ds []int) string {
	if len(ds) == 1 {
		return fmt.Sprintf("device %d", ds[0])
	}
	var runs []string
	for i := 0; i < len(ds); {
		j := i
		for j+1 < len(ds) && ds[j+1] == ds[j]+1 {
			j++
		}
		if j > i {
			runs = append(runs, fmt.Sprintf("%d-%d", ds[i], ds[j]))
		} else {
			runs = append(runs, fmt.Sprint(ds[i]))
		}
		i = j + 1
	}
	return "devices " + strings.Join(runs, ", ")
}

// stats computes device d's busy, overlap and idle times and its peak memory from its events.
func (r *Result) stats(d int) DeviceStats {
	st := DeviceStats{Device: d, Type: r.model.Spec(d).Name, Capacity: r.model.Capacity(d)}
	var busy [devprog.NumStreams][][2]float64
	for _, e := range r.deviceEvents(d) {
		busy[e.Stream] = append(busy[e.Stream], [2]float64{e.Start, e.End})
		st.Finish = math.Max(st.Finish, e.End)
	}
	for _, iv := range busy[devprog.StreamCompute] {
		st.Compute += iv[1] - iv[0]
	}
	for _, iv := range busy[devprog.StreamComm] {
		st.Comm += iv[1] - iv[0]
	}
	// Events are in list order; a stream issued in another order
	// (CommOrder) has its intervals out of time order, which the sweep
	// below must not see.
	for _, ivs := range busy {
		slices.SortFunc(ivs, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	}
	st.Overlap = intersection(busy[devprog.StreamCompute], busy[devprog.StreamComm])
	st.Idle = math.Max(0, r.StepSeconds-(st.Compute+st.Comm-st.Overlap))
	cur := r.program.Devices[d].Resident
	st.PeakMemory = cur
	for _, c := range r.memoryChanges(d) {
		cur += c.delta
		st.PeakMemory = max(st.PeakMemory, cur)
	}
	return st
}

// memChange is a change of a device's allocated memory at a time.
type memChange struct {
	t     float64
	delta int64
}

// memoryChanges lists device d's allocations (at instruction starts) and frees (at ends) in time order.
// At equal times frees come before allocations (a finished instruction's memory is available to one
// starting at that instant); otherwise ties keep program order.
func (r *Result) memoryChanges(d int) []memChange {
	events := r.deviceEvents(d)
	ch := make([]memChange, 0, 2*len(events))
	for _, e := range events {
		in := &r.program.Devices[d].Instrs[e.Index]
		if in.Alloc != 0 {
			ch = append(ch, memChange{e.Start, in.Alloc})
		}
		if in.Free != 0 {
			ch = append(ch, memChange{e.End, -in.Free})
		}
	}
	slices.SortStableFunc(ch, func(a, b memChange) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		switch {
		case a.delta < 0 && b.delta > 0:
			return -1
		case a.delta > 0 && b.delta < 0:
			return 1
		}
		return 0
	})
	return ch
}

// intersection is the total length of the overlap of two lists of disjoint intervals, each sorted by
// start (a stream's intervals are, once sorted: it runs one instruction at a time).
func intersection(a, b [][2]float64) float64 {
	total, i, j := 0.0, 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := math.Max(a[i][0], b[j][0]), math.Min(a[i][1], b[j][1])
		if hi > lo {
			total += hi - lo
		}
		if a[i][1] < b[j][1] {
			i++
		} else {
			j++
		}
	}
	return total
}
