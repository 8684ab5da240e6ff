// Package bench owns hap's benchmark suites: it plans zoo models on
// built-in clusters with the synthesizer ("hap") and with the baselines
// (dp-ev, dp-cp, megatron, a DeepSpeed-like DP+EP, ZeRO stage 3, and
// hap-paper, the HAP paper's own algorithm in solve/paper), prices every
// program with the same simulator, and writes Markdown tables and plots.
//
// bench imports plan, models, cluster, cost, ir, spmd, sim, solve and strategy,
// and gonum.org/v1/plot for figures. Nothing imports bench except cmd/hap:
// it must not be imported by the planner's packages, so that measuring
// can never change what is measured.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"hap/ir"
	"hap/models"
	"hap/plan"
	"hap/sim"
	"hap/solve"
	"hap/spmd"
	"hap/strategy"
)

// System names in rows.
const (
	SystemHAP = "hap"
	// SystemHAPDevices is hap plan's default: the synthesizer over the
	// whole cluster and the machines and devices its device search weighs
	// (plan.SynthesizeOnDevices); not in AllSystems, whose comparisons
	// are between programs on every device, as the paper's are.
	SystemHAPDevices = "hap-devices"
	SystemPaper      = "hap-paper"
	SystemDeepSpeed  = "deepspeed"
	SystemDPEV       = "dp-ev"
	SystemDPCP       = "dp-cp"
	SystemMegatron   = "megatron"
	SystemZero3      = "zero3"
)

// Row statuses other than the solver's.
const (
	StatusHeuristic = "heuristic"
	StatusNA        = "n/a"
)

// PaperBatchPerGPU is the paper's weak-scaling batch: 32 samples per GPU.
const PaperBatchPerGPU = 32

// AllSystems is the default set of systems per case, baselines first.
var AllSystems = []string{SystemDPEV, SystemDPCP, SystemMegatron, SystemDeepSpeed, SystemZero3, SystemPaper, SystemHAP}

// Case is one model on one cluster.
type Case struct {
	Model   string `json:"model"`
	Cluster string `json:"cluster"`
	Batch   int    `json:"batch"`
	// Layers overrides the zoo model's layer count when non-zero.
	Layers int `json:"layers,omitempty"`
	// Systems to run; nil means AllSystems.
	Systems []string `json:"systems,omitempty"`
}

// Row is one system's result on one case.
type Row struct {
	Model   string `json:"model"`
	Cluster string `json:"cluster"`
	Devices int    `json:"devices"`
	Batch   int    `json:"batch"`
	Layers  int    `json:"layers,omitempty"`
	System  string `json:"system"`
	// StepSeconds is the simulated step time; 0 when Status is n/a.
	StepSeconds float64 `json:"step_seconds"`
	// SpeedupVsDPEV is dp-ev's step time over this one's.
	SpeedupVsDPEV float64 `json:"speedup_vs_dpev"`
	// Efficiency is the ideal bound over the step time.
	Efficiency float64 `json:"efficiency"`
	// PeakMemory is the largest peak/capacity over devices.
	PeakMemory float64 `json:"peak_memory_frac"`
	// SynthSeconds is the wall time of planning (hap and hap-paper).
	SynthSeconds float64 `json:"synth_seconds"`
	// SynthPhases is where a hap row's planning time went (plan.Phases;
	// under the device search, the chosen set's synthesis).
	SynthPhases *plan.Phases `json:"synth_phases,omitempty"`
	// Status: the solver's (optimal, feasible), heuristic, or "n/a: why".
	Status string `json:"status"`
	// Gap is hap's proven gap, (objective − bound)/objective (plan.Solver).
	Gap float64 `json:"gap,omitempty"`
	// Chosen names the baseline hap's synthesizer fell back to, if any.
	Chosen string `json:"chosen,omitempty"`
	// Uses says which devices a hap-devices plan runs on when not every
	// one ("1 × V100-SXM2-16GB on 1 node (devices 0)"), and
	// AllDevicesStep is then the step of the plan on every device: the
	// search's, or where the search ruled every device out unsearched,
	// the case's hap row's (0 when neither planned it).
	Uses           string  `json:"uses,omitempty"`
	AllDevicesStep float64 `json:"all_devices_step_seconds,omitempty"`
}

// Options configure a run.
type Options struct {
	// NodeLimit and TimeLimit bound each synthesis (plan.SynthOptions):
	// both zero, the plans are node-limited (plan.DefaultNodeLimit) and
	// the same on any machine; a time limit makes them depend on its speed.
	NodeLimit int
	TimeLimit time.Duration
	// Progress receives one line per system run; nil for none.
	Progress io.Writer
}

func (o Options) paperLimit() time.Duration {
	if o.TimeLimit > 0 {
		return o.TimeLimit
	}
	return plan.PaperSafetyLimit
}

func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "hap bench: "+format+"\n", args...)
	}
}

// LoadCase resolves a case's inputs, applying its layer override.
func LoadCase(c Case) (*plan.Inputs, error) {
	in, err := plan.LoadInputs(c.Model, models.Options{Batch: c.Batch}, c.Cluster)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", c.Model, c.Cluster, err)
	}
	if c.Layers > 0 {
		cfg, err := models.Lookup(c.Model)
		if err != nil {
			return nil, fmt.Errorf("%s: layer override needs a zoo model: %w", c.Model, err)
		}
		cfg.Layers = c.Layers
		if c.Batch > 0 {
			cfg.Batch = c.Batch
		}
		if in.ModelOpts.Experts > 0 {
			cfg.Experts = in.ModelOpts.Experts
		}
		if in.Graph, err = models.Build(cfg); err != nil {
			return nil, fmt.Errorf("%s with %d layers: %w", c.Model, c.Layers, err)
		}
	}
	return in, nil
}

// IdealSeconds is the step time with free communication and perfect
// balance: the forward and backward FLOPs of every op over the sum of the
// devices' achieved matmul FLOP rates.
func IdealSeconds(in *plan.Inputs) (float64, error) {
	m, err := in.CostModel()
	if err != nil {
		return 0, fmt.Errorf("ideal bound: %w", err)
	}
	work := 0.0
	for i := range in.Graph.Ops {
		fwd, bwd := in.Graph.Work(ir.OpID(i))
		work += fwd.FLOPs + bwd.FLOPs
	}
	rate := 0.0
	for d := 0; d < in.Cluster.NumDevices(); d++ {
		rate += m.FLOPRate(d, ir.ClassMatMul)
	}
	if rate <= 0 {
		return 0, fmt.Errorf("ideal bound: cluster %s has no throughput", in.Cluster.Name)
	}
	return work / rate, nil
}

// RunCase plans and simulates c under every system it names.
func RunCase(ctx context.Context, c Case, opt Options) ([]Row, error) {
	in, err := LoadCase(c)
	if err != nil {
		return nil, err
	}
	ideal, err := IdealSeconds(in)
	if err != nil {
		return nil, err
	}
	systems := c.Systems
	if systems == nil {
		systems = AllSystems
	}
	base := Row{Model: c.Model, Cluster: c.Cluster, Devices: in.Cluster.NumDevices(), Batch: c.Batch, Layers: c.Layers}
	var rows []Row
	// What earlier rows of this case found, for the hap row to reuse.
	earlier := &earlierRows{simulated: map[string]*sim.Result{}}
	for _, sys := range systems {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := runSystem(ctx, in, sys, opt, earlier)
		if err != nil {
			return nil, fmt.Errorf("%s on %s, %s: %w", c.Model, c.Cluster, sys, err)
		}
		r.Model, r.Cluster, r.Devices, r.Batch, r.Layers = base.Model, base.Cluster, base.Devices, base.Batch, base.Layers
		if r.StepSeconds > 0 {
			r.Efficiency = ideal / r.StepSeconds
		}
		opt.say("%s on %s: %-9s %s", c.Model, c.Cluster, sys, describe(r))
		rows = append(rows, r)
	}
	var dpev, hap float64
	for _, r := range rows {
		switch r.System {
		case SystemDPEV:
			dpev = r.StepSeconds
		case SystemHAP:
			hap = r.StepSeconds
		}
	}
	for i := range rows {
		if r := &rows[i]; r.Uses != "" && r.AllDevicesStep == 0 {
			// The device search ruled out every device unsearched (by
			// its transport bound): the hap row planned them.
			r.AllDevicesStep = hap
		}
	}
	for i := range rows {
		if dpev > 0 && rows[i].StepSeconds > 0 {
			rows[i].SpeedupVsDPEV = dpev / rows[i].StepSeconds
		}
	}
	return rows, nil
}

func describe(r Row) string {
	if r.StepSeconds == 0 {
		return r.Status
	}
	s := fmt.Sprintf("step %.4g s", r.StepSeconds)
	if r.SynthSeconds > 0 {
		s += fmt.Sprintf(", planned in %.2f s", r.SynthSeconds)
	}
	return s + " (" + r.Status + ")"
}

// strategyOf maps a baseline system to the hand-written strategy that
// implements it on in's model.
func strategyOf(in *plan.Inputs, sys string) string {
	if sys != SystemDeepSpeed {
		return sys
	}
	if isMoE(in) {
		return "ep" // data parallel + expert parallel, ZeRO off
	}
	return "dp-ev" // without experts DeepSpeed (ZeRO off) is data parallel
}

func isMoE(in *plan.Inputs) bool {
	for _, t := range in.Graph.TensorsOfKind(ir.Param) {
		if len(in.Graph.Tensors[t].Shape) == 3 {
			return true
		}
	}
	return false
}

// earlierRows is what a case's earlier rows found that the hap row reuses:
// the hap-paper row's program and planning time, and the baselines'
// simulations.
type earlierRows struct {
	paper        *spmd.Program
	paperSeconds float64
	// simulated collects the baseline rows' simulations by strategy name,
	// which hap's final pick reuses.
	simulated map[string]*sim.Result
}

// runSystem plans in with one system and simulates the program. earlier
// carries earlier rows' results to the hap row.
func runSystem(ctx context.Context, in *plan.Inputs, sys string, opt Options, earlier *earlierRows) (Row, error) {
	r := Row{System: sys}
	switch sys {
	case SystemHAP, SystemHAPDevices:
		// hap's synthesizer runs the paper's search as one of its
		// candidates; when this case has already run it (the hap-paper
		// row), its program is reused and its time counted in hap's.
		start := time.Now()
		// WallTime only records the time in the plan (and SynthPhases):
		// the search is the same.
		so := plan.SynthOptions{TimeLimit: opt.TimeLimit, NodeLimit: opt.NodeLimit, Simulated: earlier.simulated, Paper: earlier.paper, WallTime: true}
		var pl *plan.Plan
		var err error
		if sys == SystemHAP {
			pl, err = plan.Synthesize(ctx, in, so)
		} else {
			pl, err = plan.SynthesizeOnDevices(ctx, in, so, plan.DevicesTypes)
		}
		r.SynthSeconds = time.Since(start).Seconds()
		r.SynthSeconds += earlier.paperSeconds
		if errors.Is(err, solve.ErrNoPlan) {
			// Reported in the row (and its reason), not a failed run.
			r.Status = StatusNA + ": " + err.Error()
			return r, nil
		}
		if err != nil {
			return r, err
		}
		r.StepSeconds = pl.Cost.StepSeconds
		r.PeakMemory = peakFrac(pl.Cost.PerDevice)
		r.Status, r.Chosen, r.Gap, r.SynthPhases = pl.Solver.Status, pl.Solver.Chosen, pl.Solver.Gap, pl.Solver.Phases
		if pl.Cluster.Use != nil {
			for _, set := range pl.Solver.DeviceSets {
				switch {
				case set.Chosen:
					r.Uses = set.Summary
				case len(set.Use) == in.Cluster.NumDevices() && set.Outcome == plan.DeviceSetPlanned:
					r.AllDevicesStep = set.StepSeconds
				}
			}
		}
		return r, nil
	case SystemPaper:
		start := time.Now()
		p, err := plan.PaperSearch(ctx, in, opt.paperLimit())
		r.SynthSeconds = time.Since(start).Seconds()
		if err != nil {
			r.Status = StatusNA + ": " + err.Error()
			return r, nil
		}
		earlier.paper, earlier.paperSeconds = p, r.SynthSeconds
		res, err := plan.Simulate(in, p)
		if err != nil {
			return r, fmt.Errorf("simulating: %w", err)
		}
		earlier.simulated[SystemPaper] = res
		r.StepSeconds, r.PeakMemory, r.Status = res.StepSeconds, peakFrac(res.Devices), "heuristic"
		return outOfMemory(r, res.Devices), nil
	}
	p, err := strategy.Build(strategyOf(in, sys), in.Graph, in.Cluster)
	if err != nil {
		// A strategy that cannot express this cluster (ep on a model
		// without experts) is reported, not fatal.
		r.Status = StatusNA + ": " + err.Error()
		return r, nil
	}
	res, err := plan.Simulate(in, p)
	if err != nil {
		return r, fmt.Errorf("simulating: %w", err)
	}
	earlier.simulated[strategyOf(in, sys)] = res
	r.StepSeconds, r.PeakMemory, r.Status = res.StepSeconds, peakFrac(res.Devices), StatusHeuristic
	return outOfMemory(r, res.Devices), nil
}

// outOfMemory turns the row of a plan that does not fit some device into
// an n/a row naming the device: it could not run, whatever its simulated
// time (which the status keeps).
func outOfMemory(r Row, devs []sim.DeviceStats) Row {
	for _, d := range devs {
		if !d.Fits() {
			r.Status = fmt.Sprintf("%s: out of memory on device %d (%s): %.1f of %.1f GB (simulated step %.4g s)",
				StatusNA, d.Device, d.Type, float64(d.PeakMemory)/1e9, float64(d.Capacity)/1e9, r.StepSeconds)
			r.StepSeconds = 0
			return r
		}
	}
	return r
}

func peakFrac(devs []sim.DeviceStats) float64 {
	m := 0.0
	for _, d := range devs {
		if d.Capacity > 0 {
			m = math.Max(m, float64(d.PeakMemory)/float64(d.Capacity))
		}
	}
	return m
}

// ErrUnknownSuite is returned for a suite name Suite does not know.
var ErrUnknownSuite = errors.New("unknown suite")

// Run runs every case, in order.
func Run(ctx context.Context, cases []Case, opt Options) ([]Row, error) {
	var rows []Row
	for _, c := range cases {
		rs, err := RunCase(ctx, c, opt)
		if err != nil {
			return rows, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}
