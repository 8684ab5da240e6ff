package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hap/devprog"
	"io"
	"math"
	"strconv"
	"text/tabwriter"
)

// traceEvent is one Chrome trace event (the "JSON Object Format" of the Trace Event Format).
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts,omitempty"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// micros converts seconds to trace microseconds, rounded to the nanosecond so that output is tidy and
// stable.
func micros(seconds float64) *float64 {
	v := math.Round(seconds*1e9) / 1e3
	return &v
}

// WriteTrace writes the step as Chrome trace event JSON ({"traceEvents": [...]}): one process per
// device (pid = device index) named with its type and node, a thread per stream (tid 0 compute, 1
// communication), a complete ("X") event per instruction with ts and dur in microseconds, and a
// "memory" counter per device. Events are in a fixed order (device, stream, instruction), one per line.
func (r *Result) WriteTrace(w io.Writer) error {
	var events []traceEvent
	cl := r.model.Cluster()
	for d := range r.program.Devices {
		node := cl.Nodes[r.model.Node(d)].Name
		events = append(events,
			traceEvent{Name: "process_name", Ph: "M", Pid: d, Args: map[string]any{"name": fmt.Sprintf("device %d: %s (node %s)", d, r.model.Spec(d).Name, node)}},
			traceEvent{Name: "process_sort_index", Ph: "M", Pid: d, Args: map[string]any{"sort_index": d}})
		for st := devprog.Stream(0); st < devprog.NumStreams; st++ {
			events = append(events,
				traceEvent{Name: "thread_name", Ph: "M", Pid: d, Tid: int(st), Args: map[string]any{"name": st.String()}},
				traceEvent{Name: "thread_sort_index", Ph: "M", Pid: d, Tid: int(st), Args: map[string]any{"sort_index": int(st)}})
		}
	}
	for d := range r.program.Devices {
		for st := devprog.Stream(0); st < devprog.NumStreams; st++ {
			for _, e := range r.deviceEvents(d) {
				if e.Stream != st {
					continue
				}
				in := &r.program.Devices[e.Device].Instrs[e.Index]
				ev := traceEvent{Name: e.Name, Ph: "X", Ts: micros(e.Start), Dur: micros(e.End - e.Start), Pid: e.Device, Tid: int(st),
					Args: map[string]any{"index": e.Index}}
				if ev.Name == "" {
					ev.Name = fmt.Sprintf("#%d", e.Index)
				}
				if k := in.Kernel; k != nil {
					ev.Cat = "kernel"
					ev.Args["op"] = k.Op
					if k.Work != nil {
						ev.Args["class"], ev.Args["flops"], ev.Args["bytes"] = k.Work.Class, k.Work.FLOPs, k.Work.Bytes
					}
				} else {
					c := in.Comm
					ev.Cat = string(c.Kind)
					ev.Args["collective"], ev.Args["group"], ev.Args["counts"] = c.ID, c.Group, c.Counts
					ev.Args["elem_bytes"], ev.Args["algorithm"] = c.ElemBytes, e.Algorithm
					if c.Method != "" {
						ev.Args["method"] = c.Method
					}
				}
				if len(in.Deps) > 0 {
					ev.Args["deps"] = in.Deps
				}
				if in.Alloc != 0 {
					ev.Args["alloc"] = in.Alloc
				}
				if in.Free != 0 {
					ev.Args["free"] = in.Free
				}
				events = append(events, ev)
			}
		}
	}
	events = append(events, r.memoryCounters()...)

	bw := bufio.NewWriter(w)
	bw.WriteString("{\"traceEvents\":[\n")
	for i, ev := range events {
		data, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
		bw.Write(data)
		if i < len(events)-1 {
			bw.WriteByte(',')
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("],\"displayTimeUnit\":\"ms\"}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing trace: %w", err)
	}
	return nil
}

// memoryCounters renders each device's memory over time as "C" events, one per instant it changes.
func (r *Result) memoryCounters() []traceEvent {
	var out []traceEvent
	for d := range r.program.Devices {
		ch := r.memoryChanges(d)
		cur := r.program.Devices[d].Resident
		if len(ch) == 0 && cur == 0 {
			continue
		}
		if len(ch) == 0 || ch[0].t > 0 {
			out = append(out, traceEvent{Name: "memory", Ph: "C", Ts: micros(0), Pid: d, Args: map[string]any{"bytes": cur}})
		}
		for i, c := range ch {
			cur += c.delta
			if i+1 < len(ch) && ch[i+1].t == c.t {
				continue
			}
			out = append(out, traceEvent{Name: "memory", Ph: "C", Ts: micros(c.t), Pid: d, Args: map[string]any{"bytes": cur}})
		}
	}
	return out
}

// TimeUnit is the unit times within a step of step seconds read best in,
// and how many of it make a second: seconds, or ms, µs or ns when the
// step is under 10 ms, 10 µs or 10 ns.
func TimeUnit(step float64) (unit string, perSecond float64) {
	step = math.Abs(step)
	switch {
	case step > 0 && step < 1e-8:
		return "ns", 1e9
	case step > 0 && step < 1e-5:
		return "µs", 1e6
	case step > 0 && step < 1e-2:
		return "ms", 1e3
	}
	return "s", 1
}

// fixed writes v with the given decimals, and a value that is not zero but
// rounds to it as "<0.0001" (so many decimals): a tiny model's compute
// beside its communication is small, not absent.
func fixed(v float64, decimals int) string {
	if v != 0 && math.Abs(v) < 0.5*math.Pow10(-decimals) {
		return "<" + strconv.FormatFloat(math.Pow10(-decimals), 'f', decimals, 64)
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// WriteSummary writes the step time and a per-device table. Times are in
// TimeUnit's unit for the step (a tiny model's step in seconds reads
// 0.000001), a nonzero time too small for the table as "<0.0001" (fixed);
// memory is in GiB, or MiB when no device's peak reaches a GiB.
// Consecutive devices whose figures print the same share one row
// (MergeDeviceRows) unless eachDevice.
func (r *Result) WriteSummary(w io.Writer, eachDevice bool) error {
	unit, scale := TimeUnit(r.StepSeconds)
	digits := 6
	if unit != "s" {
		digits = 4
	}
	mem, memScale := "GiB", float64(1<<30)
	peak := int64(0)
	for _, s := range r.Devices {
		peak = max(peak, s.PeakMemory)
	}
	if peak < 1<<30 {
		mem, memScale = "MiB", 1<<20
	}
	if _, err := fmt.Fprintf(w, "step time %.*f %s\n", digits, r.StepSeconds*scale, unit); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "device\ttype\tcompute %[1]s\tcomm %[1]s\toverlap %[1]s\tidle %[1]s\tpeak %[2]s\tcapacity %[2]s\t\n", unit, mem)
	rows := make([]DeviceRow, 0, len(r.Devices))
	for _, s := range r.Devices {
		flag := ""
		if !s.Fits() {
			flag = " over"
		}
		rows = append(rows, DeviceRow{First: s.Device, Cells: fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s%s\t%.1f", s.Type, fixed(s.Compute*scale, digits), fixed(s.Comm*scale, digits),
			fixed(s.Overlap*scale, digits), fixed(s.Idle*scale, digits), fixed(float64(s.PeakMemory)/memScale, 3), flag, float64(s.Capacity)/memScale)})
	}
	if !eachDevice {
		rows = MergeDeviceRows(rows)
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t\n", row.Label(), row.Cells)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing summary: %w", err)
	}
	return nil
}

// DeviceRow is a row of a per-device table: devices First to
// First+Count−1, numbered one after another, with the same Cells (a
// Count of 0 or 1 is one device).
type DeviceRow struct {
	First, Count int
	Cells        string
}

// Label names the row's devices: "5", or "16–47 ×32".
func (r DeviceRow) Label() string {
	if r.Count <= 1 {
		return strconv.Itoa(r.First)
	}
	return fmt.Sprintf("%d–%d ×%d", r.First, r.First+r.Count-1, r.Count)
}

// MergeDeviceRows puts consecutive devices (by number) whose cells are the
// same on one row: on 64 GPUs of two types a plan's devices are mostly a
// few groups holding the same shares, and 64 rows hide the one that
// differs. Devices not numbered one after another stay apart, so every
// row still names its devices exactly.
func MergeDeviceRows(rows []DeviceRow) []DeviceRow {
	var out []DeviceRow
	for _, r := range rows {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.Cells == r.Cells && r.First == last.First+last.Count {
				last.Count++
				continue
			}
		}
		r.Count = 1
		out = append(out, r)
	}
	return out
}
