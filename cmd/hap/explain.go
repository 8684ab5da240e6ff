package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/ir"
	"hap/order"
	"hap/plan"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
	"hap/strategy"
)

func runExplain(e *env, args []string) error {
	fs := flags(e, "explain")
	ops := fs.Bool("ops", false, "list every op's rule and layouts")
	eachLayer := fs.Bool("each-layer", false, "list every collective on its own row, not one row for identical layers'")
	eachDevice := fs.Bool("each-device", false, "list every device on its own row, not one row for consecutive devices whose figures are the same")
	var inputs inputFlags
	inputs.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want one plan file")
	}
	pl, err := readPlan(fs.Arg(0), inputs)
	if err != nil {
		return err
	}
	in, p, err := pl.Resolve()
	if err != nil {
		return err
	}
	recorded, err := pl.Recost(in, p)
	if err != nil {
		return err
	}
	if recorded != nil {
		fmt.Fprintf(e.stderr, "hap explain: warning: %s records a step of %s and %d devices' figures; its program simulates to %s: the figures below are the simulation's (the plan was edited, or written by a hap whose cost model differs)\n",
			fs.Arg(0), duration(recorded.StepSeconds), len(recorded.PerDevice), duration(pl.Cost.StepSeconds))
	}
	printWarnings(e.stderr, in.Warnings)
	return explain(e.stdout, pl, in, p, *ops, *eachLayer, *eachDevice)
}

func explain(w io.Writer, pl *plan.Plan, in *plan.Inputs, p *spmd.Program, listOps, eachLayer, eachDevice bool) error {
	g := in.Graph
	// The program is lowered (and a searched order checked) before
	// anything is printed: a bad order is one error, not half a report.
	ordered, m, err := plan.Lower(in, p)
	if err != nil {
		return err
	}
	orderBound, err := order.Bound(ordered, m)
	if err != nil {
		return err
	}
	// So are the collectives priced, for their table below; their rows
	// know where their tensors sit in the repeated layers, to fold them.
	layers := ir.FindLayers(g)
	var rows []tableRow
	var commSeconds, commLatency float64 // over the forward program's collectives
	for i := range p.Instrs {
		ins := &p.Instrs[i]
		if ins.Kind != spmd.Comm || !ir.IsCollective(ins.Collective) {
			continue
		}
		t := &g.Tensors[ins.Tensor]
		mb := float64(t.Shape.Numel()*t.DType.Size()) / 1e6
		est, err := plan.EstimateCollective(m, g, p, i)
		if err != nil {
			return fmt.Errorf("pricing the plan's collectives: %w", err)
		}
		layouts := []string{ins.From.String() + "→" + ins.To.String()}
		if p.Mesh != nil {
			layouts = []string{ins.Axis.String(), layouts[0], ins.Other.String()}
		}
		cells := append(append([]string{string(ins.Collective)}, layouts...), figure(mb), orDash(ins.Method), figure(est.Seconds*1e3)+" ms", latencyShare(est), altText(est.Alternative, est.AltSeconds))
		commSeconds += est.Seconds
		commLatency += est.Latency
		rows = append(rows, tableRow{name: t.Name, cells: cells, layer: layers.Tensors[ins.Tensor]})
	}
	// clusterDevice numbers the plan's device d as the cluster does.
	clusterDevice := func(d int) int { return d }
	if use := pl.Cluster.Use; use != nil {
		clusterDevice = func(d int) int { return use[d] }
		fmt.Fprintf(w, "%s (%s params) on %s: runs on %d of its %s, %s (devices %s), the other %d left idle\n", pl.Model.Name, humanCount(pl.Model.Params), pl.Cluster.Name,
			len(use), plural(pl.Cluster.Devices, "device"), in.Cluster.Summary(), plan.DeviceList(use), pl.Cluster.Devices-len(use))
	} else {
		fmt.Fprintf(w, "%s (%s params) on %s: %s, %s\n", pl.Model.Name, humanCount(pl.Model.Params), pl.Cluster.Name, plural(pl.Cluster.Devices, "device"), in.Cluster.Summary())
	}
	prec := ""
	if p := pl.Options.Precision; p != "" {
		// Said only where it is not FP32, as the plan records it.
		prec = fmt.Sprintf(", priced in %s", p)
	}
	fmt.Fprintf(w, "strategy %s, solver status %s; estimated step %s%s\n", pl.Options.Strategy, pl.Solver.Status, duration(pl.Cost.StepSeconds), prec)
	if s := pl.Solver; s.Objective > 0 {
		// The solver's own account: its plan's estimate, the proven lower
		// bound, and what stopped the search short of proving it optimal.
		fmt.Fprintf(w, "solver: objective %s, proven bound %s%s%s, gap %s", durationIn(s.Objective, pl.Cost.StepSeconds), durationIn(s.Bound, pl.Cost.StepSeconds), boundBy(s), boundCaveat(pl), gapPercent(s.Gap))
		if s.StoppedBy != "" {
			fmt.Fprintf(w, ", stopped by the %s%s", s.StoppedBy, stoppedNote(s))
		}
		if s.Status == "optimal" && s.Gap >= provenGap {
			// Proven by the transport LP, within solve.OptimalGap.
			fmt.Fprintf(w, ": optimal within the %s the planner takes as optimal (a MIP solver's usual relative gap)", gapPercent(solve.OptimalGap))
		}
		fmt.Fprint(w, retryNote(pl))
		if s.Chosen != "" {
			fmt.Fprintf(w, "; the simulator found the start %s faster than the solver's plan", s.Chosen)
		}
		fmt.Fprintln(w)
		if how := s.Options.JointOrder; how.Ended != "" {
			// The bound was raised, and the status set, by the search over
			// programs, lengths and orders together (--order-rounds).
			fmt.Fprintf(w, "  programs, lengths and orders searched together (hap plan --order-rounds): %s%s\n", how, jointOrderNote(how.Ended))
		}
		if ties := s.Options.Ties; ties.Shrink() && !s.Options.Bound.FromWork() {
			// The bound is over the MILP's space, not every plan: a plan
			// that runs tied layers differently could be faster. Not the
			// work LP's: tied layers' ops, and identical devices, are
			// alike in it, so averaging any plan's shares over them is a
			// tied point of the same cost.
			fmt.Fprintf(w, "  %s\n", tiesNote(ties))
		}
		if pl.Cluster.Use == nil && len(s.DeviceSets) == 0 && pl.Cluster.Devices > 1 {
			// Planned with --devices all (or before the device search):
			// the bound says nothing of plans that leave devices idle.
			fmt.Fprintf(w, "  the bound holds over plans on all %d devices; one on fewer may be faster (hap plan without --devices all weighs single machines and devices)\n", pl.Cluster.Devices)
		}
		if s.Seconds > 0 && s.Phases != nil {
			// Recorded (--record-time, --time-limit): where planning's
			// time went, the first question a slow plan asks.
			of := ""
			if len(s.DeviceSets) > 0 {
				of = " over the sets of devices weighed; the chosen set's synthesis"
			}
			fmt.Fprintf(w, "  planned in %.2fs%s: %s\n", s.Seconds, of, s.Phases)
		}
	}
	if err := explainDeviceSets(w, pl); err != nil {
		return err
	}

	devs := in.Cluster.Devices()
	if m := p.Mesh; m != nil {
		explainMesh(w, p, devs)
	} else {
		fmt.Fprintf(w, "\nRatios (units per device):\n")
		used := p.SegmentsUsed()
		for i, s := range pl.Ratios {
			if i < len(used) && !used[i] {
				fmt.Fprintf(w, "  s%-2d %-8s %6d units: not cut (no layout of this plan is a Gather on it)\n", i, s.Name, s.Units)
				continue
			}
			fmt.Fprintf(w, "  s%-2d %-8s %6d units: %s\n", i, s.Name, s.Units, runs(s.Lengths, func(r int) string { return devs[r].Spec.Name }))
		}
		fmt.Fprintln(w, segmentLegend)
	}

	// Rules used, by name.
	byRule := map[string]int{}
	for _, d := range pl.Program {
		if d.Kind == "compute" {
			if p.Mesh != nil {
				byRule[string(d.OpKind)+" "+d.OuterRule+" × "+d.Rule]++
				continue
			}
			byRule[string(d.OpKind)+" "+d.Rule]++
		}
	}
	var keys []string
	for k := range byRule {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if p.Mesh != nil {
		fmt.Fprintf(w, "\nSharding rules used (op kind, rule across replicas × rule among ranks: count):\n")
	} else {
		fmt.Fprintf(w, "\nSharding rules used (op kind, rule: count):\n")
	}
	for _, k := range keys {
		fmt.Fprintf(w, "  %-40s %d\n", k, byRule[k])
	}
	if listOps {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nop\tkind\trule\tinputs\toutputs")
		for _, d := range pl.Program {
			if d.Kind == "compute" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\n", d.Op, d.OpKind, d.Rule, d.In, d.Out)
			}
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing the explanation: %w", err)
		}
	}

	merged := rows
	if !eachLayer {
		merged = mergeLayerRows(rows)
	}
	fmt.Fprintf(w, "\nCommunication in the forward program (backward adds each one's adjoint)")
	if len(merged) < len(rows) {
		fmt.Fprintf(w, "; %d collectives, identical layers' on one row (--each-layer lists them one by one)", len(rows))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	switch {
	case len(rows) == 0:
		fmt.Fprintln(w, ": none, every tensor is made where and as its readers read it")
	case p.Mesh != nil:
		fmt.Fprintln(w, ":")
		fmt.Fprintln(tw, "  tensor\tinstruction\taxis\tlayouts\tother axis\tMB\tmethod\test. time (slowest group)\tlatency\talternative")
	default:
		fmt.Fprintln(w, ":")
		fmt.Fprintln(tw, "  tensor\tinstruction\tlayouts\tMB\tmethod\test. time\tlatency\talternative")
	}
	for _, r := range merged {
		fmt.Fprintf(tw, "  %s\t%s\n", r.name, strings.Join(r.cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the explanation: %w", err)
	}
	if len(rows) > 0 {
		// The share of the collectives' time that is per-call latency:
		// what sending small collectives together would save.
		fmt.Fprintf(w, "  (latency: the share of a call's time that does not grow with its bytes; over these %d calls, %s of %s, %.0f%%)\n",
			len(rows), duration(commLatency), duration(commSeconds), 100*commLatency/commSeconds)
	}
	if len(rows) > 0 || listOps {
		fmt.Fprintln(w, layoutLegend)
	}
	explainOrder(w, pl, ordered, orderBound)

	fmt.Fprintf(w, "\nPer device")
	if !eachDevice && len(pl.Cost.PerDevice) > 1 {
		fmt.Fprintf(w, " (consecutive devices with the same figures on one row; --each-device lists them one by one)")
	}
	fmt.Fprintf(w, ":\n")
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	unit, scale := sim.TimeUnit(pl.Cost.StepSeconds)
	mem, perByte := "MB", 1e-6 // a tiny model's 4.62e-05 GB reads 0.0462 MB
	for _, d := range pl.Cost.PerDevice {
		if d.PeakMemory >= 1e9 {
			mem, perByte = "GB", 1e-9
		}
	}
	fmt.Fprintf(tw, "device\ttype\tcompute %[1]s\tcomm %[1]s\toverlap %[1]s\tidle %[1]s\tpeak %[2]s\tcapacity %[2]s\t\n", unit, mem)
	var devRows []sim.DeviceRow
	for _, d := range pl.Cost.PerDevice {
		devRows = append(devRows, sim.DeviceRow{First: clusterDevice(d.Device), Cells: fmt.Sprintf("%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.3f\t%.1f", d.Type, d.Compute*scale, d.Comm*scale,
			d.Overlap*scale, d.Idle*scale, float64(d.PeakMemory)*perByte, float64(d.Capacity)*perByte)})
	}
	if !eachDevice {
		devRows = sim.MergeDeviceRows(devRows)
	}
	for _, r := range devRows {
		fmt.Fprintf(tw, "%s\t%s\t\n", r.Label(), r.Cells)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the explanation: %w", err)
	}
	res, err := plan.Simulate(in, p)
	if err != nil {
		return fmt.Errorf("simulating the plan: %w", err)
	}
	b := plan.FindBottleneck(g, res)
	b.Device = clusterDevice(b.Device)
	if err := explainBottleneck(w, b, graphLayers(g)); err != nil {
		return err
	}
	explainMemoryBound(w, pl)
	for _, d := range pl.Cost.PerDevice {
		if d.PeakMemory > d.Capacity && d.Capacity > 0 {
			d.Device = clusterDevice(d.Device)
			fmt.Fprintf(w, "OUT OF MEMORY: %s\n", d.Shortfall())
		}
	}

	fmt.Fprintf(w, "\nAgainst the data-parallel baselines (same simulator):\n")
	explainBaselines(w, pl, in, "", clusterDevice)
	if in.Whole != nil {
		// The baselines the user would otherwise run: on every device.
		whole := *in
		whole.Cluster, whole.Whole, whole.Use = in.Whole, nil, nil
		explainBaselines(w, pl, &whole, fmt.Sprintf(" on all %d devices", in.Whole.NumDevices()), func(d int) int { return d })
	}
	return nil
}

// explainBaselines compares the plan with dp-ev and dp-cp on in's devices
// (where, when not the plan's own, says which; clusterDevice numbers in's
// devices as the cluster does).
func explainBaselines(w io.Writer, pl *plan.Plan, in *plan.Inputs, where string, clusterDevice func(int) int) {
	for _, base := range []string{"dp-ev", "dp-cp"} {
		name := base + where
		bp, err := strategy.Build(base, in.Graph, in.Cluster)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", name, err)
			continue
		}
		res, err := plan.Simulate(in, bp)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", name, err)
			continue
		}
		// A baseline that does not fit is no alternative: say so, and by
		// how much, rather than quote a speed nobody can have.
		fits := ""
		for _, d := range res.Devices {
			if !d.Fits() {
				d.Device = clusterDevice(d.Device)
				fits = ", but it does not fit: " + d.Shortfall()
				break
			}
		}
		fmt.Fprintf(w, "  %-6s %s → this plan is %.2f× faster%s\n", name, durationIn(res.StepSeconds, pl.Cost.StepSeconds), res.StepSeconds/pl.Cost.StepSeconds, fits)
	}
}

// explainDeviceSets reports hap plan's device search: each set of the
// cluster's devices weighed, and what became of it.
func explainDeviceSets(w io.Writer, pl *plan.Plan) error {
	sets := pl.Solver.DeviceSets
	if len(sets) == 0 {
		return nil
	}
	search := ""
	if d := pl.Solver.Options.Devices; d != "" {
		search = "--devices " + string(d) + "; "
	}
	fmt.Fprintf(w, "\nDevices searched (%shap plan --devices all plans on every device alone):\n", search)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  devices\twhat\toutcome")
	for _, s := range sets {
		mark := ""
		if s.Chosen {
			mark = "  ← the plan"
		}
		outcome := deviceSetOutcome(s, pl.Cost.StepSeconds)
		if s.Chosen && pl.CommOrder != nil && s.StepSeconds != pl.Cost.StepSeconds {
			// The sets were compared in list order; --search-order then
			// reordered (or --order-rounds replaced) the chosen set's plan.
			outcome += fmt.Sprintf(" in list order; %s in the order searched", durationIn(pl.Cost.StepSeconds, pl.Cost.StepSeconds))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", plan.DeviceList(s.Use), s.Summary, outcome, mark)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the device sets: %w", err)
	}
	fmt.Fprintf(w, "  (in the order searched, the likeliest first, by its best hand-written plan's step; a set is not searched once a plan found is no slower than one of its bounds)\n")
	if slices.ContainsFunc(sets, func(s plan.DeviceSet) bool { return s.ComputeSeconds > 0 }) {
		fmt.Fprintf(w, "  (compute: the busiest device's compute in that set's plan; the rest of its step is communication not hidden behind it, and waiting)\n")
	}
	if pl.CommOrder != nil {
		fmt.Fprintf(w, "  (the sets were compared by their steps in list order; the order search ran on the chosen set alone)\n")
	}
	// The plan's own bound holds over its devices; the sets' bounds
	// together say how far any set weighed could still beat it.
	if bound, ok := plan.DevicesBound(sets); ok {
		obj := pl.Solver.Objective
		if obj <= 0 {
			obj = pl.Cost.StepSeconds
		}
		if gap := max(0, (obj-bound)/obj); gap < provenGap {
			fmt.Fprintf(w, "  No plan on any set weighed is faster: the least of their bounds, %s, is this plan's estimate.\n", durationIn(bound, pl.Cost.StepSeconds))
		} else {
			fmt.Fprintf(w, "  Over every set weighed, no plan steps in less than %s (the least of their bounds): this plan is within %s of all of them.\n", durationIn(bound, pl.Cost.StepSeconds), gapPercent(gap))
		}
	}
	return nil
}

// deviceSetOutcome says what the device search found for set s.
func deviceSetOutcome(s plan.DeviceSet, step float64) string {
	switch s.Outcome {
	case plan.DeviceSetPlanned:
		compute := ""
		if s.ComputeSeconds > 0 {
			compute = fmt.Sprintf(" (compute %s)", durationIn(s.ComputeSeconds, step))
		}
		return fmt.Sprintf("planned: step %s%s, proven bound %s", durationIn(s.StepSeconds, step), compute, durationIn(s.Bound, step))
	case plan.DeviceSetWorkBound:
		return fmt.Sprintf("not searched: no plan on it beats %s, its ideal compute time", durationIn(s.Bound, step))
	case plan.DeviceSetTransportBound:
		if s.CutOff {
			return fmt.Sprintf("not searched: no plan on it beats %s, its transport LP bound (communication counted; the LP stopped there, past the plan)", durationIn(s.Bound, step))
		}
		return fmt.Sprintf("not searched: no plan on it beats %s, its transport LP bound (communication counted)", durationIn(s.Bound, step))
	case plan.DeviceSetMemory:
		unit, per := cost.ByteUnit(max(s.NeedBytes, s.UsableBytes))
		return fmt.Sprintf("not searched: the model needs %.4g %s, the devices can use %.4g %s", s.NeedBytes*per, unit, s.UsableBytes*per, unit)
	case plan.DeviceSetNoPlan:
		return "no plan fits: " + s.Why
	case plan.DeviceSetTimeLimit:
		return fmt.Sprintf("not searched: the time limit was spent (its ideal compute time: %s)", durationIn(s.Bound, step))
	}
	return s.Outcome
}

// bottleneckSources is how many of the bottleneck device's costliest ops
// and tensors explain lists.
const bottleneckSources = 5

// explainBottleneck names the busiest device, the stream that keeps it
// busy, and the ops and tensors that take its time.
func explainBottleneck(w io.Writer, b plan.Bottleneck, where func(name string, op bool) ir.LayerPos) error {
	stream := "compute"
	if b.Comm > b.Compute {
		stream = "communication"
	}
	fmt.Fprintf(w, "bottleneck: device %d (%s), busy %s of %s; %s-bound (compute %s, communication %s)\n",
		b.Device, b.Type, durationIn(b.Busy, b.Step), duration(b.Step), stream, durationIn(b.Compute, b.Step), durationIn(b.Comm, b.Step))
	if len(b.Sources) == 0 {
		return nil
	}
	top := b.Sources[0]
	what := sourceText(top)
	if !top.Op {
		what = "the layout changes and update of " + what
	}
	fmt.Fprintf(w, "bottleneck op: %s, %s on device %d (%.1f%% of the step)\n", what, durationIn(top.Seconds(), b.Step), b.Device, 100*top.Seconds()/b.Step)
	fmt.Fprintf(w, "  costliest on device %d (forward and backward; a tensor's time is its layout changes and update; identical layers summed):\n", b.Device)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	unit, perSecond := sim.TimeUnit(b.Step)
	fmt.Fprintf(tw, "    source\tcompute %[1]s\tcomm %[1]s\tinstructions\tof the step\n", unit)
	merged := mergeLayerSources(b.Sources, where)
	for _, s := range merged[:min(bottleneckSources, len(merged))] {
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%d\t%.1f%%\n", s.text, figure(s.compute*perSecond), figure(s.comm*perSecond), s.instrs, 100*s.seconds()/b.Step)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the bottleneck: %w", err)
	}
	return nil
}

func sourceText(s plan.Source) string {
	if s.Op {
		return fmt.Sprintf("op %s (%s)", s.Name, s.OpKind)
	}
	return "tensor " + s.Name
}

// explainMesh describes a mesh program's replicas and ratios.
func explainMesh(w io.Writer, p *spmd.Program, devs []cluster.Device) {
	m := p.Mesh
	fmt.Fprintf(w, "\nMesh: %d replicas × %d ranks (tensor parallel among a replica's ranks, data parallel across replicas)\n", len(m.Replicas), p.Devices)
	for r, rep := range m.Replicas {
		fmt.Fprintf(w, "  replica %d: devices %v (%s, machine %d)\n", r, rep, devs[rep[0]].Spec.Name, devs[rep[0]].Node)
	}
	replica := func(r int) string { return devs[m.Replicas[r][0]].Spec.Name }
	fmt.Fprintf(w, "\nRatios across replicas (units per replica; the segments of the axis column below):\n")
	for i, s := range m.Segments {
		fmt.Fprintf(w, "  s%-2d %-8s %6d units: %s\n", i, s.Name, s.Units, runs(s.Lengths, replica))
	}
	fmt.Fprintf(w, "\nRatios among ranks (units per rank; the segments of the layouts column below):\n")
	for i, s := range p.Segments {
		if s.Within == nil {
			fmt.Fprintf(w, "  s%-2d %-8s %6d units: %v in every replica\n", i, s.Name, s.Units, s.Lengths)
			continue
		}
		fmt.Fprintf(w, "  s%-2d %-8s %6d units, each replica's share of %q cut among its ranks:\n", i, s.Name, s.Units, m.Segments[*s.Within].Name)
		for r := range m.Replicas {
			fmt.Fprintf(w, "    replica %d: %v\n", r, s.Lengths[r*p.Devices:(r+1)*p.Devices])
		}
	}
}

// The legends of explain's notation, printed under what uses it.
const (
	// segmentLegend follows a table of ratios.
	segmentLegend = "  (sK: segment K, a way to cut tensors across devices in these proportions: batch the samples, heads the attention heads, experts the experts, wN a weight dimension N wide)"
	// layoutLegend follows the table of collectives (and the --ops list).
	layoutLegend = "  (layouts: Identity, every device holds the whole tensor; Reduce, each holds a partial sum; Gather(d,sK), dimension d is cut across devices in segment sK's proportions; A→B, the collective turns layout A into B)"
)

func altText(name string, t float64) string {
	if name == "" {
		return "-"
	}
	return fmt.Sprintf("%s %s ms", name, figure(t*1e3))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runs prints per-device values compressed into runs: "3×V100:4 5×P100:3".
func runs(vals []int, label func(int) string) string {
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		for j < len(vals) && vals[j] == vals[i] && label(j) == label(i) {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d×%s:%d", j-i, label(i), vals[i]))
		i = j
	}
	return strings.Join(parts, " ")
}

// Thresholds of explainMemoryBound.
const (
	// memoryBoundIdle: a device idle this share of the step could take
	// more work, were it not for its memory.
	memoryBoundIdle = 0.2
	// memoryBoundFull: a device whose simulated peak is this share of
	// what the planner may fill is at its limit (the planner's memory
	// model and the simulator's differ by a few percent).
	memoryBoundFull = 0.97
)

// explainMemoryBound names the devices of a synthesized plan that wait
// much of the step at the planner's memory limit: their memory, not their
// speed, sets their share (RTX 4090s beside A100-80GBs), which the
// per-device table shows only to a reader who compares idle time with
// peak against capacity × the memory fraction.
func explainMemoryBound(w io.Writer, pl *plan.Plan) {
	fraction := pl.Solver.Options.MemoryFraction
	if fraction <= 0 || pl.Cost.StepSeconds <= 0 {
		return // a hand-written strategy: no planner chose its shares
	}
	// What would let the planner give them more: a higher fraction, unless
	// it already had to lower the one asked for (the plan made under it
	// did not fit when simulated).
	advice := fmt.Sprintf("a higher --memory-fraction (%g here) lets the planner give them more", fraction)
	if retried := pl.Solver.Options.RetriedFraction; retried > 0 {
		advice = fmt.Sprintf("the planner already lowered --memory-fraction %g to %g, since the plan made under it did not fit when simulated", fraction, retried)
		fraction = retried
	}
	var devs, types []string
	idle, peak, capacity := 0.0, 0.0, 0.0
	for _, d := range pl.Cost.PerDevice {
		limit := fraction * float64(d.Capacity)
		if d.Idle < memoryBoundIdle*pl.Cost.StepSeconds || float64(d.PeakMemory) < memoryBoundFull*limit {
			continue
		}
		devs = append(devs, strconv.Itoa(d.Device))
		if !slices.Contains(types, d.Type) {
			types = append(types, d.Type)
		}
		idle, peak, capacity = max(idle, d.Idle), max(peak, float64(d.PeakMemory)), max(capacity, float64(d.Capacity))
	}
	if len(devs) == 0 {
		return
	}
	noun := "device"
	if len(devs) > 1 {
		noun = "devices"
	}
	unit, perByte := cost.ByteUnit(capacity)
	fmt.Fprintf(w, "memory-bound: %s %s (%s) idle up to %s (%.0f%% of the step) at %.3g of %.3g %s: their memory, not their speed, limits their share; %s\n",
		noun, strings.Join(devs, ", "), strings.Join(types, ", "), duration(idle), 100*idle/pl.Cost.StepSeconds, peak*perByte, capacity*perByte, unit, advice)
}

// tiesNote says which ties the solver's bound and gap hold under, and how
// to lift them (hap plan --untie).
func tiesNote(t plan.Ties) string {
	var what, untie []string
	if t.LayersTied() {
		what = append(what, "every layer of an op class runs the same rules")
		untie = append(untie, "layers")
	}
	if t.DevicesTied() {
		what = append(what, "a group's identical devices hold even shares")
		untie = append(untie, "devices")
	}
	// The plan records "1 device groups" (one form for every count); read
	// out, one group is singular.
	groups := "device groups"
	if t.DeviceGroups == 1 {
		groups = "device group"
	}
	counts := fmt.Sprintf("%d op classes for %d forward ops, %d %s for %d devices", t.OpClasses, t.ForwardOps, t.DeviceGroups, groups, t.Devices)
	return fmt.Sprintf("the bound and gap are over tied plans (%s): %s (hap plan --untie %s lifts this)", counts, strings.Join(what, ", and "), strings.Join(untie, ","))
}

// boundBy names the relaxation that proved a plan's bound, and over what
// it holds when that is more than list-ordered tied plans; empty for the
// joint MILP's own.
func boundBy(s plan.Solver) string {
	switch b := s.Options.Bound; {
	case b.FromWork():
		return " by the work LP (the ideal compute time: every op split in the best proportions for these GPUs, communication free: it holds for every plan, tied or not, in every issue order)"
	case b.OverAnyOrder():
		return " by the transport LP" + lpStoppedNote(s) + lpBranchedNote(s) + ", over every plan in every issue order of its collectives"
	case b.FromLP():
		return " by the transport LP" + lpStoppedNote(s) + lpBranchedNote(s)
	}
	return ""
}

// lpBranchedNote says, of a bound the transport LP proved branched on the
// op classes' rules, so, and with how many LPs.
func lpBranchedNote(s plan.Solver) string {
	if !s.Options.Bound.FromBranchedLP() {
		return ""
	}
	return fmt.Sprintf(" branched on the op classes' rules (up to %d more LPs, --bound-lps: the least open branch's value)", s.Options.BoundLPs)
}

// lpStoppedNote says, of a bound the transport LP's duals proved when the
// time limit stopped it, that the finished LP would prove more.
func lpStoppedNote(s plan.Solver) string {
	if !s.Options.Bound.FromStoppedLP() {
		return ""
	}
	return " (what its duals proved when the time limit stopped it; finished, the LP proves more: a longer --time-limit, or a node limit, gives it time)"
}

// boundCaveat says why a plan's simulated step can lie below the solver's
// proven bound, when it does: the bound holds for the programs the
// planner's memory model fits in its memory fraction of every device, and
// a start chosen over the solver's plan may use more (it only has to fit
// the whole device when simulated); otherwise the bound is on the
// planner's estimate, which the simulator can undercut by its ~1%.
// Empty when the step is at or above the bound.
func boundCaveat(pl *plan.Plan) string {
	s := pl.Solver
	if s.Bound <= 0 || pl.Cost.StepSeconds >= s.Bound*(1-boundRoundoff) {
		return ""
	}
	if pl.CommOrder != nil && !s.Options.Bound.OverAnyOrder() {
		// hap simulate --search-order on a plan made without it.
		return " (a bound on plans that issue their collectives in list order, which this plan's searched order beats; hap plan --search-order bounds every order)"
	}
	fraction := s.Options.RetriedFraction
	if fraction <= 0 {
		fraction = s.Options.MemoryFraction
	}
	if fraction > 0 {
		for _, d := range pl.Cost.PerDevice {
			if float64(d.PeakMemory) > fraction*float64(d.Capacity) {
				return fmt.Sprintf(" (a bound on plans within %g of each device's memory; this one fills more of device %d)", fraction, d.Device)
			}
		}
	}
	return " (a bound on the planner's estimate, which the simulator undercuts here)"
}

// boundRoundoff is how far below the bound, relatively, a simulated step
// may be and still be at it: the simulator and the solver sum the same
// terms in different orders (a one-device plan: 1.2666666666666664e-7 s
// simulated, 1.2666666666666666e-7 s bound), a difference of a few ulps
// that no caveat should explain.
const boundRoundoff = 1e-9

// stoppedNote says how to ask for a tighter bound when the joint MILP's
// own bound is the plan's, weak as it is, because of how the search was
// stopped; empty otherwise, and when the transport LP gave the bound (what
// more nodes or cuts would tighten towards; lpStoppedNote speaks for an LP
// the clock stopped).
//
//   - The node limit stopped a search with CBC's cuts and strong
//     branching off (the default ten nodes): nodes without them barely
//     move the bound (mlp-tiny on paper-8 keeps its gap of 81% over 1000
//     of them), so a node limit above the default runs them.
//   - The time limit stopped it and the transport LP, which runs beside
//     the search from its start, gave no bound by then (its duals proved
//     no more than the work LP, or its solver failed; the plan does not
//     say which).
func stoppedNote(s plan.Solver) string {
	if s.Options.Bound.FromLP() {
		return ""
	}
	switch {
	case s.StoppedBy == "node limit" && s.Options.Search != nil && s.Options.Search.NoCuts:
		return fmt.Sprintf(" (without cuts or strong branching; --node-limit above %d runs them for a tighter bound)", plan.DefaultNodeLimit)
	case s.StoppedBy == "time limit":
		return " (the transport LP, which bounds most plans far more tightly, gave no bound within the time limit: a longer --time-limit, or a node limit, gives it time)"
	}
	return ""
}

// retryNote says, for a plan solved again under a smaller memory fraction
// because the simulator found the first plan did not fit, what happened;
// empty otherwise.
func retryNote(pl *plan.Plan) string {
	asked, retried := pl.Solver.Options.MemoryFraction, pl.Solver.Options.RetriedFraction
	if asked <= 0 || retried <= 0 {
		return ""
	}
	return fmt.Sprintf("; solved again under memory fraction %g after the plan made under %g did not fit when simulated", retried, asked)
}

// maxSwapsShown is how many of a searched order's swaps explain lists; the
// plan document has them all.
const maxSwapsShown = 12

// explainOrder describes the plan's communication order: the order bound
// (how much shorter any order could make the step), and, when the order
// was searched, how the search ended, what it gained, and the collectives
// it issues against the list order, by name (prog is the plan lowered).
func explainOrder(w io.Writer, pl *plan.Plan, prog *devprog.Program, bound float64) {
	step := pl.Cost.StepSeconds
	meets := order.MeetsBound(step, bound)
	limit := fmt.Sprintf("no order of the collectives makes the step shorter than %s (%.2f%% below this one)", durationIn(bound, step), 100*(1-bound/step))
	if meets {
		limit = fmt.Sprintf("it meets the order bound (%s): no order of the collectives is faster", durationIn(bound, step))
	}
	o := pl.CommOrder
	switch {
	case o == nil && meets:
		fmt.Fprintf(w, "\nCommunication order: the list order; %s\n", limit)
		return
	case o == nil:
		fmt.Fprintf(w, "\nCommunication order: the list order, not searched; %s: hap simulate PLAN --search-order looks for a faster one\n", limit)
		return
	}
	fmt.Fprintf(w, "\nCommunication order (searched by Z3 %s, window %d, %d free pairs, %d checks, %s): list order %s → %s; %s",
		o.Z3, o.Window, o.Pairs, o.Checks, o.Status, durationIn(o.ListSeconds, step), duration(step), limit)
	if len(o.Swaps) == 0 {
		fmt.Fprintln(w, "; the list order was the best found")
		return
	}
	fmt.Fprintf(w, "; %s issued against the list order:\n", plural(len(o.Swaps), "pair"))
	name := map[int]string{}
	for _, d := range prog.Devices {
		for _, ins := range d.Instrs {
			if ins.Comm != nil {
				name[ins.Comm.ID] = ins.Name
			}
		}
	}
	for k, s := range o.Swaps {
		if k == maxSwapsShown {
			fmt.Fprintf(w, "  … and %d more (the plan's comm_order has them all)\n", len(o.Swaps)-k)
			break
		}
		fmt.Fprintf(w, "  %s (#%d) before %s (#%d)\n", name[s[1]], s[1], name[s[0]], s[0])
	}
}

// jointOrderNote says what the joint search over orders proved, from how
// it ended (plan.SearchJointly's record).
func jointOrderNote(ended solve.OrderEnd) string {
	switch ended {
	case solve.OrderProven:
		return ": no plan in any issue order of its collectives is faster (within the order search's 1e-4)"
	case solve.OrderNoProposal:
		return ": the any-order MILP's nodes found no other plan to try; a higher --node-limit searches further"
	}
	return ": the bound did not meet the plan; more --order-rounds search on"
}

// latencyShare is the part of a collective's estimate that is latency, as
// a percentage.
func latencyShare(e plan.CollectiveEstimate) string {
	if e.Seconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*e.Latency/e.Seconds)
}
