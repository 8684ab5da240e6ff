package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"hap/cluster"
	"hap/cost"
	"hap/encode"
	"hap/executor"
	"hap/internal/fileio"
	"hap/ir"
	"hap/models"
	"hap/order"
	"hap/plan"
	"hap/sim"
	"hap/spmd"
	"hap/strategy"

	"github.com/spf13/pflag"
)

// modelFlags are the flags every command that builds a model takes.
type modelFlags struct {
	model, cluster      string
	batch, experts      int
	strategy, optimizer string
	timeLimit           time.Duration
	progress            io.Writer
	nodeLimit           int
	memoryFraction      float64
	// recordTime records the solver's wall time in a synthesized plan
	// (plan --record-time; always under --time-limit, whose plans
	// depend on the machine's speed anyway).
	recordTime bool
	// untie lifts the joint MILP's ties (plan.SynthOptions.Untie):
	// "layers", "devices" or "all"; "" keeps them.
	untie string
	// recompute says which layers recompute their activations in
	// backward (plan.SynthOptions.Recompute): auto, none or all.
	recompute string
	// precision is the arithmetic the plan is priced in (plan.Inputs.Precision).
	precision string
	// anyOrderBound asks for a bound over every issue order
	// (plan.SynthOptions.AnyOrderBound): plan --search-order.
	anyOrderBound bool
	// boundLPs branches the bound's LP (plan.SynthOptions.BoundLPs):
	// plan --bound-lps.
	boundLPs int
	// devices says which sets of devices the synthesizer weighs
	// (plan.SynthesizeOnDevices): all, machines, types or kinds; or lists the
	// devices to plan on (plan.ParseDeviceList).
	devices string
	// warn is where build writes the inputs' warnings (plan.Inputs.Warnings).
	warn io.Writer
}

// modelPositive names modelFlags' flags whose 0 means "the default", so
// that set explicitly they must be positive (parse).
func modelPositive() []string { return []string{"batch", "experts", "time-limit", "node-limit"} }

func (m *modelFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	DurationVar(*time.Duration, string, time.Duration, string)
	Float64Var(*float64, string, float64, string)
}) {
	fs.StringVar(&m.model, "model", "", "zoo model name (sizes after a colon: llama:layers=48,hidden=5120) or graph JSON file")
	fs.StringVar(&m.cluster, "cluster", "", "built-in cluster name or cluster file")
	fs.IntVar(&m.batch, "batch", 0, "global batch (default: the model's)")
	fs.IntVar(&m.experts, "experts", 0, "MoE experts (default: 2 × devices)")
	fs.StringVar(&m.strategy, "strategy", "", "a hand-written strategy instead of the synthesizer: "+strings.Join(strategy.Names(), ", "))
	fs.DurationVar(&m.timeLimit, "time-limit", 0, "end the search by this long with the best plan found and its proven bound (e.g. 30s; every set of devices weighed, and the order search of --search-order, within it); the plan then depends on the machine's speed")
	fs.IntVar(&m.nodeLimit, "node-limit", 0, fmt.Sprintf("branch-and-bound nodes per MILP solve (default %d without --time-limit): a reproducible bound on the search; above %d, the joint MILP also runs root cuts and strong branching for a tighter proven bound", plan.DefaultNodeLimit, plan.DefaultNodeLimit))
	fs.StringVar(&m.optimizer, "optimizer", "adam", "optimizer the plan's memory and update assume: adam or sgd")
	fs.StringVar(&m.untie, "untie", "", "lift the solver's ties, starting from the tied plan: layers (each layer its own rules, not one per class of repeated layers), devices (each device its own shares, not even ones within a group of identical devices) or all; never slower, and the bound then holds over those plans too, but the MILP is larger (minutes on full-size models; with --time-limit, the best found)")
	fs.StringVar(&m.recompute, "recompute", string(plan.RecomputeAuto), "activation recomputation: auto (plan without it; only where no plan fits memory so, plan with the repeated layers, the other layers, or both recomputing, and keep the fastest that fits), none (keep every activation for backward), or all (every layer but the loss's keeps only its input and runs its forward again before its backward)")
	fs.StringVar(&m.precision, "precision", string(cost.FP32), "arithmetic the step is priced in: fp32; tf32 (FP32 storage, matmuls, convolutions and attention on TF32 tensor cores; Ampere and later); fp16 or bf16 (mixed precision: those classes on the 16-bit tensor rate, every kernel but the optimizer's moving 2-byte activations; FP32 master weights, gradients and optimizer state). The memory model and the collectives still count 4-byte activations")
	fs.StringVar(&m.devices, "devices", "", "which devices the synthesizer may plan on, keeping the fastest plan: all (every device, as the HAP paper does); machines (also each kind of machine's first machine and one device of it: on a slow network a small batch can run faster on one GPU than on all); types (the default: also every machine of one GPU type, and the machines of the fastest types together, each a search at most as large as the whole cluster's); kinds (also every machine of one kind of machine, and the cluster less one kind). Each set is searched, the most promising first, only where its bounds (the ideal compute time, and the transport LP's, which counts communication) are below the best plan found; or a list of devices such as 0-3,8 to plan on exactly those (of each machine a prefix of its GPUs)")
	fs.Float64Var(&m.memoryFraction, "memory-fraction", encode.DefaultMemoryFraction, "share of each device's memory the planner's memory model may fill; the rest is left for what it does not count (CUDA context, workspace, fragmentation). The simulated plan must still fit the whole device (one that does not is solved again under a smaller share); for a hard limit, set memory in the cluster file's overrides")
}

// build resolves the flags into a plan.
func (m *modelFlags) build() (*plan.Plan, error) {
	if m.model == "" || m.cluster == "" {
		return nil, usageErr("need --model and --cluster")
	}
	if !(m.memoryFraction > 0 && m.memoryFraction <= 1) {
		return nil, usageErr("--memory-fraction %g: want a share of each device's memory, in (0, 1]", m.memoryFraction)
	}
	if err := checkStrategy(m.strategy); err != nil {
		return nil, err
	}
	if err := checkModelOptions(m.model, m.batch, m.experts); err != nil {
		return nil, err
	}
	in, err := plan.LoadInputs(m.model, models.Options{Batch: m.batch, Experts: m.experts}, m.cluster)
	if err != nil {
		return nil, err
	}
	if m.warn != nil {
		printWarnings(m.warn, in.Warnings)
	}
	switch m.optimizer {
	case "adam":
	case "sgd":
		in.Optimizer = ir.SGD(1e-3)
	default:
		return nil, usageErr("--optimizer must be adam or sgd")
	}
	if in.Precision, err = cost.ParsePrecision(m.precision); err != nil {
		return nil, usageErr("--precision: %v", err)
	}
	if _, err := in.CostModel(); err != nil {
		return nil, fmt.Errorf("--precision %s on %s: %w", in.Precision, m.cluster, err)
	}
	var untie plan.Untie
	if m.untie != "" {
		if untie, err = plan.ParseUntie(m.untie); err != nil {
			return nil, usageErr("--%v", err)
		}
	}
	if m.recompute == "" {
		m.recompute = string(plan.RecomputeAuto)
	}
	recompute, err := plan.ParseRecompute(m.recompute)
	if err != nil {
		return nil, usageErr("--%v", err)
	}
	if m.strategy == "" {
		ctx := context.Background()
		if m.timeLimit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, m.timeLimit+hardStopAfter(m.timeLimit))
			defer cancel()
		}
		pl, err := m.synthesize(ctx, in, untie)
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("--time-limit %v ran out before a plan was finished (it bounds the whole command, the simulations of the plan and its baselines included; on %d devices they take longer): %w",
				m.timeLimit, in.Cluster.NumDevices(), err)
		}
		return pl, err
	}
	// The search's flags would be ignored by a hand-written strategy: say
	// so rather than let the user believe they shaped the plan.
	if m.timeLimit > 0 || m.nodeLimit > 0 || m.memoryFraction != encode.DefaultMemoryFraction || untie.Any() || m.devices != "" {
		return nil, usageErr("--time-limit, --node-limit, --memory-fraction, --untie and --devices shape the synthesizer's search; --strategy %s is built by hand", m.strategy)
	}
	p, err := strategy.Build(m.strategy, in.Graph, in.Cluster)
	if err != nil {
		return nil, err
	}
	return plan.Build(in, plan.RecomputeStrategy(in, recompute, p), m.strategy, plan.Solver{Status: "heuristic"})
}

// hardStopAfter is how long past --time-limit the command is stopped at
// the latest: the synthesizer aims to end by the limit (its solvers stop a
// grace before it), and what follows its search — simulating the plan,
// writing it — gets a twentieth of the limit, at least a second and at
// most ten.
func hardStopAfter(limit time.Duration) time.Duration {
	return min(max(limit/20, time.Second), 10*time.Second)
}

// synthesize runs the synthesizer under ctx on the devices --devices asks.
func (m *modelFlags) synthesize(ctx context.Context, in *plan.Inputs, untie plan.Untie) (*plan.Plan, error) {
	opt := plan.SynthOptions{TimeLimit: m.timeLimit, NodeLimit: m.nodeLimit, Progress: m.progress,
		WallTime: m.recordTime || m.timeLimit > 0, MemoryFraction: m.memoryFraction, Untie: untie, AnyOrderBound: m.anyOrderBound, BoundLPs: m.boundLPs,
		Recompute: plan.RecomputeMode(m.recompute)}
	search := plan.DevicesTypes
	if d := m.devices; d != "" && d[0] >= '0' && d[0] <= '9' {
		// A list: plan on exactly those devices.
		use, err := plan.ParseDeviceList(d)
		if err != nil {
			return nil, usageErr("--%v", err)
		}
		narrowed, err := in.OnDevices(use)
		if err != nil {
			return nil, usageErr("--devices %s: %v", d, err)
		}
		if len(use) == in.Cluster.NumDevices() {
			narrowed = in // every device, listed: the plan names none
		}
		return plan.Synthesize(ctx, narrowed, opt)
	}
	if m.devices != "" {
		var err error
		if search, err = plan.ParseDeviceSearch(m.devices); err != nil {
			return nil, usageErr("--%v", err)
		}
	}
	if search == plan.DevicesAll {
		return plan.Synthesize(ctx, in, opt)
	}
	return plan.SynthesizeOnDevices(ctx, in, opt, search)
}

func runPlan(e *env, args []string) error {
	fs := flags(e, "plan")
	m := modelFlags{progress: e.progressWriter(), warn: e.stderr}
	m.register(fs)
	var o orderFlags
	o.register(fs, "and record the best order found in the plan (comm_order) with the step simulated under it; the plan's proven bound then holds over every plan in every issue order")
	fs.IntVar(&m.boundLPs, "bound-lps", 0, "prove a tighter bound: branch the bound's LP on the op classes' rules for up to N more LP solves, each taking about as long as the LP (seconds to a minute on full-size models); it counts LPs, not time, so the plan stays reproducible")
	fs.BoolVar(&m.recordTime, "record-time", false, "record the solver's wall time in the plan (solver.seconds; otherwise 0, so that the same inputs give the same plan bytes); implied by --time-limit")
	rounds := fs.Int("order-rounds", 0, "with --search-order: then search programs, lengths and orders together for up to N rounds, each a node-limited any-order MILP less the plans already priced, and an order search for its answer (exact when it ends before N; for small models: on full-size ones a round costs a joint MILP and an order search, over ten minutes on bert-moe paper-8, and has found no other plan)")
	out := fs.StringP("output", "o", "", "write the plan to FILE")
	asJSON := fs.Bool("json", false, "print the plan document on stdout")
	if err := parse(fs, args, append(modelPositive(), "bound-lps", "order-rounds")...); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if m.boundLPs > 0 && m.strategy != "" {
		return usageErr("--bound-lps proves the synthesizer's bound; --strategy %s is built by hand", m.strategy)
	}
	if err := o.check(); err != nil {
		return err
	}
	if *rounds != 0 && (!o.search || m.strategy != "") {
		return usageErr("--order-rounds continues the synthesizer's --search-order")
	}
	if *rounds < 0 {
		return usageErr("--order-rounds must be at least 1")
	}
	if *rounds != 0 && m.timeLimit > 0 {
		return usageErr("--order-rounds is bounded by its rounds and nodes, not by the clock: use it without --time-limit")
	}
	if err := fileio.CheckOutput("-o", *out, fileio.Input{Flag: "--model", Path: m.model}, fileio.Input{Flag: "--cluster", Path: m.cluster}); err != nil {
		return usageErr("%v", err)
	}
	// The order searched, the bound must hold for the pair: every plan
	// under every order.
	m.anyOrderBound = o.search
	// Under --time-limit D the order search shares D, so that the command
	// ends by D: the synthesis gets all but 1/orderTimeShare of it, the
	// order search what is left.
	limit := m.timeLimit
	if o.search && limit > 0 {
		m.timeLimit = limit - limit/orderTimeShare
	}
	began := time.Now()
	pl, err := m.build()
	if err != nil {
		return err
	}
	took := time.Since(began)
	var searched *order.Result
	if o.search {
		var orderLimit time.Duration
		if limit > 0 {
			orderLimit = max(limit-took, time.Millisecond)
		}
		if m.progress != nil {
			within := ""
			if orderLimit > 0 {
				within = fmt.Sprintf(", for up to %.1fs", orderLimit.Seconds())
			}
			fmt.Fprintf(m.progress, "hap plan: searching the collectives' issue order with Z3 (window %d, budget %d per check%s)\n", o.window, o.budget, within)
		}
		in, p, err := pl.Resolve()
		if err != nil {
			return err
		}
		if searched, err = o.run(pl, in, p, orderLimit); err != nil {
			return err
		}
		if *rounds > 0 {
			if m.progress != nil {
				fmt.Fprintf(m.progress, "hap plan: searching programs, lengths and orders together (up to %d rounds)\n", *rounds)
			}
			nodes := m.nodeLimit
			if nodes == 0 {
				nodes = plan.DefaultNodeLimit
			}
			var untie plan.Untie // the synthesis' own, so that its plan is a choice of the encoding searched
			if m.untie != "" {
				if untie, err = plan.ParseUntie(m.untie); err != nil { // checked by m.build already
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			npl, _, res, err := plan.SearchJointly(ctx, pl, in, p, plan.JointOrderOptions{Order: order.Options{Window: o.window, ResourceLimit: o.budget},
				Rounds: *rounds, NodeLimit: nodes, MemoryFraction: m.memoryFraction, Untie: untie})
			stop()
			if err != nil {
				return err
			}
			if npl != pl {
				// The order described would be the replaced plan's.
				pl, searched = npl, nil
			}
			if m.progress != nil {
				fmt.Fprintf(m.progress, "hap plan: joint search over orders: %d rounds, %d plans priced, best %.6g s, bound %.6g s (optimal: %v)\n", res.Rounds, res.Priced, res.Seconds, res.Bound, res.Optimal)
			}
		}
	}
	data, err := pl.Encode()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := pl.WriteFile(*out); err != nil {
			return err
		}
	}
	if *asJSON {
		_, err := e.stdout.Write(data)
		return err
	}
	fmt.Fprintf(e.stdout, "%s on %s (%s), %s: simulated step %s", pl.Model.Name, pl.Cluster.Name, devicesUsed(pl.Cluster), pl.Options.Strategy, duration(pl.Cost.StepSeconds))
	if pl.Solver.Chosen != "" {
		// A start the simulator found faster than the solver's plan (or
		// the fastest fitting one, when the solver found none).
		fmt.Fprintf(e.stdout, " (%s's program)", pl.Solver.Chosen)
	}
	if pl.Solver.Status != "heuristic" {
		fmt.Fprintf(e.stdout, "; solver %s, objective %s, bound %s%s, gap %s", pl.Solver.Status, durationIn(pl.Solver.Objective, pl.Cost.StepSeconds), durationIn(pl.Solver.Bound, pl.Cost.StepSeconds), boundCaveat(pl), gapPercent(pl.Solver.Gap))
	}
	if m.strategy == "" {
		fmt.Fprintf(e.stdout, "; planned in %.3g s", took.Seconds())
	}
	// A hand-written strategy is planned whatever its memory (to compare
	// against), so the summary must say when it could not run.
	if over := sim.OverMemory(pl.Cost.PerDevice); over != "" {
		fmt.Fprintf(e.stdout, "; OUT OF MEMORY: %s", over)
	}
	fmt.Fprintln(e.stdout)
	if searched != nil {
		fmt.Fprintln(e.stdout, describeOrder(searched, "the plan's step above is the searched order's"))
	}
	if *out != "" {
		fmt.Fprintf(e.stdout, "wrote %s\n", *out)
	}
	return nil
}

// loadPlanOrBuild reads PLAN from the first argument, or builds one from
// the model flags.
// With a plan file, --model and --cluster stand in for the inputs it
// records (plan.Plan.UseInputs).
func loadPlanOrBuild(fsArgs []string, m *modelFlags) (*plan.Plan, error) {
	switch {
	case len(fsArgs) == 1 && m.strategy == "":
		return readPlan(fsArgs[0], inputFlags{model: m.model, cluster: m.cluster})
	case len(fsArgs) == 0:
		return m.build()
	}
	return nil, usageErr("give either a plan file (with --model/--cluster to read its inputs from elsewhere) or --model/--cluster/--strategy")
}

// inputFlags are the --model and --cluster of a command that reads a
// plan: where to read its inputs from, in place of the specs it records.
type inputFlags struct{ model, cluster string }

func (f *inputFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "read the plan's model from this zoo name or graph file instead of the one it records (its hash must match)")
	fs.StringVar(&f.cluster, "cluster", "", "read the plan's cluster from this built-in name or file instead of the one it records (its hash must match)")
}

// readPlan reads the plan file at path, its inputs from f where given.
func readPlan(path string, f inputFlags) (*plan.Plan, error) {
	pl, err := plan.Read(path)
	if err != nil {
		return nil, err
	}
	pl.UseInputs(f.model, f.cluster)
	return pl, nil
}

func runVerify(e *env, args []string) error {
	fs := flags(e, "verify")
	m := modelFlags{warn: e.stderr}
	m.register(fs)
	steps := fs.Int("steps", 2, "training steps to compare")
	dtype := fs.String("dtype", "float64", "float64 (tolerance 1e-10) or float32 (1e-5)")
	tol := fs.Float64("tolerance", 0, "maximum relative error (default by dtype; with --against-torch, torchref.Tolerance)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	against := fs.String("against-torch", "", "check the single-device step of --model (a graph hap import wrote) against the PyTorch reference DIR that hap import --reference wrote: loss and every gradient")
	var mem maxMemory
	mem.register(fs)
	if err := parse(fs, args, append(modelPositive(), "tolerance")...); err != nil {
		return err
	}
	if *tol >= 1 {
		return usageErr("--tolerance %g: a relative error of 1 or more passes any result (the defaults are 1e-10 for float64, 1e-5 for float32)", *tol)
	}
	if *against != "" {
		for _, f := range []string{"cluster", "strategy", "steps", "dtype", "batch", "experts", "max-memory"} {
			if fs.Changed(f) {
				return usageErr("--against-torch checks one float64 step of the model on the CPU: --%s does not apply", f)
			}
		}
		if fs.NArg() > 0 || m.model == "" {
			return usageErr("--against-torch DIR takes --model (the graph hap import wrote), not a plan")
		}
		return verifyAgainstTorch(e, m.model, *against, *tol, *asJSON)
	}
	if fs.NArg() == 1 {
		// A plan file is made already: the flags that would make one
		// would be ignored, so say so.
		for _, name := range []string{"batch", "experts", "time-limit", "node-limit", "optimizer", "untie", "devices", "memory-fraction", "recompute", "precision"} {
			if fs.Changed(name) {
				return usageErr("--%s shapes the plan built from --model and --cluster; %s is made already", name, fs.Arg(0))
			}
		}
	}
	dt, err := ir.ParseDType(*dtype)
	if err != nil || !dt.IsFloat() {
		return usageErr("--dtype must be float32 or float64")
	}
	if *steps < 1 {
		return usageErr("--steps must be ≥ 1")
	}
	if *tol == 0 {
		*tol = 1e-10
		if dt == ir.Float32 {
			*tol = 1e-5
		}
	}
	pl, err := loadPlanOrBuild(fs.Args(), &m)
	if err != nil {
		return err
	}
	in, p, err := pl.Resolve()
	if err != nil {
		return err
	}
	if fs.NArg() == 1 {
		printWarnings(e.stderr, in.Warnings) // a plan built above has printed its own
	}
	g, err := models.Load(in.ModelSpec, models.Options{Batch: in.ModelOpts.Batch, Experts: in.ModelOpts.Experts, DType: dt})
	if err != nil {
		return err
	}
	// SGD: Adam divides by √v, which turns ~1e-16 rounding noise on
	// exactly-zero gradients into lr-sized steps and hides real agreement.
	maxMem, err := mem.bytes()
	if err != nil {
		return err
	}
	rep, err := executor.Verify(g, p, executor.Options{DType: dt, Steps: *steps, Seed: 1, Optimizer: ir.SGD(1e-2), MaxMemory: maxMem})
	if err != nil {
		return err
	}
	ok := rep.Max() <= *tol
	if *asJSON {
		if err := writeJSON(e, struct {
			*executor.Report
			Tolerance float64 `json:"tolerance"`
			Pass      bool    `json:"pass"`
		}{rep, *tol, ok}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%s on %d CPU devices vs single device, %d steps, %s\n", pl.Model.Name, rep.Devices, rep.Steps, rep.DType)
		if u := pl.Cluster.Use; u != nil {
			// The device search left devices idle: say so, lest a
			// one-device check pass for a distributed one.
			fmt.Fprintf(e.stdout, "  the plan runs on %d of %s's %d devices (--devices all plans on all of them)\n", len(u), pl.Cluster.Name, pl.Cluster.Devices)
		}
		orderNote(e, rep.CommSwaps)
		for _, r := range []struct {
			name string
			d    executor.Diff
		}{{"loss", rep.Loss}, {"gradients", rep.Grads}, {"parameters", rep.Params}} {
			fmt.Fprintf(e.stdout, "  %-10s max abs %-10.3g max rel %-10.3g (%s)\n", r.name, r.d.MaxAbs, r.d.MaxRel, r.d.Worst)
		}
		verdict := "PASS"
		if !ok {
			verdict = "FAIL"
		}
		fmt.Fprintf(e.stdout, "%s: max relative error %.3g, tolerance %.0g\n", verdict, rep.Max(), *tol)
	}
	if !ok {
		return fmt.Errorf("max relative error %.3g exceeds tolerance %.0g (worst: %s)", rep.Max(), *tol, rep.Grads.Worst)
	}
	return nil
}

// orderNote says, for a plan with a searched collective order (swaps
// pairs against the list order), that the devices issued their
// collectives in it.
func orderNote(e *env, swaps int) {
	if swaps > 0 {
		fmt.Fprintf(e.stdout, "  collectives issued in the plan's searched order (%d pairs against the list order)\n", swaps)
	}
}

// orderFlags are the flags of a Z3 search of the collectives' issue order
// (plan and simulate --search-order).
type orderFlags struct {
	search bool
	window int
	budget uint32
	fs     *pflag.FlagSet
}

func (o *orderFlags) register(fs *pflag.FlagSet, what string) {
	o.fs = fs
	fs.BoolVar(&o.search, "search-order", false, "search the collectives' issue order on the communication streams with Z3 for a shorter step, "+what)
	fs.IntVar(&o.window, "order-window", order.DefaultWindow, "with --search-order: how many places a collective may move past others")
	fs.Uint32Var(&o.budget, "order-budget", order.DefaultResourceLimit, "with --search-order: Z3's work budget (rlimit) per check; the same budget gives the same answer on any machine")
}

func (o *orderFlags) check() error {
	if !o.search && (o.fs.Changed("order-window") || o.fs.Changed("order-budget")) {
		return usageErr("--order-window and --order-budget need --search-order")
	}
	if o.window < 1 || o.budget < 1 {
		return usageErr("--order-window and --order-budget must be at least 1")
	}
	return nil
}

// run searches pl's order (see plan.SearchOrder) within limit (0: none),
// recording it in pl; Ctrl-C stops it with an error.
func (o *orderFlags) run(pl *plan.Plan, in *plan.Inputs, p *spmd.Program, limit time.Duration) (*order.Result, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return plan.SearchOrder(ctx, pl, in, p, order.Options{Window: o.window, ResourceLimit: o.budget, TimeLimit: limit})
}

// orderTimeShare: under --time-limit D, hap plan --search-order leaves
// D/orderTimeShare, and whatever the synthesis did not use, to the order
// search. With no limit of its own, Z3 on ViT's plan on four V100s
// (paper-16 at 512, window 8) ran 37 s past a 10 s --time-limit; given
// 2.4 s it keeps the plan's own order, "time limit".
const orderTimeShare = 4

func runSimulate(e *env, args []string) error {
	fs := flags(e, "simulate")
	trace := fs.String("trace", "", "write a Chrome trace (open in Perfetto)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	eachDevice := fs.Bool("each-device", false, "list every device on its own row (by default consecutive devices with the same figures share one)")
	var o orderFlags
	o.register(fs, "and simulate (and trace) the best order found")
	var inputs inputFlags
	inputs.register(fs)
	out := fs.StringP("output", "o", "", "with --search-order: write the plan with the order found to FILE")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want one plan file")
	}
	if err := o.check(); err != nil {
		return err
	}
	if *out != "" && !o.search {
		return usageErr("-o writes the plan with a searched order: it needs --search-order")
	}
	for _, o := range []struct{ flag, path string }{{"-o", *out}, {"--trace", *trace}} {
		if err := fileio.CheckOutput(o.flag, o.path, fileio.Input{Flag: "plan", Path: fs.Arg(0)}); err != nil {
			return usageErr("%v", err)
		}
	}
	pl, err := readPlan(fs.Arg(0), inputs)
	if err != nil {
		return err
	}
	in, p, err := pl.Resolve()
	if err != nil {
		return err
	}
	printWarnings(e.stderr, in.Warnings)
	var searched *order.Result
	var res *sim.Result
	if o.search {
		if searched, err = o.run(pl, in, p, 0); err != nil {
			return err
		}
		res = searched.Simulated
		if *out != "" {
			if err := writePlan(pl, *out); err != nil {
				return err
			}
		}
	} else if res, err = plan.Simulate(in, p); err != nil {
		return err
	}
	if *trace != "" {
		if err := fileio.Write(*trace, res.WriteTrace); err != nil {
			return err
		}
	}
	if *asJSON {
		if searched != nil {
			return writeJSON(e, struct {
				*sim.Result
				Order orderReport `json:"order_search"`
			}{res, reportOrder(searched)})
		}
		return writeJSON(e, res)
	}
	if u := pl.Cluster.Use; u != nil {
		// The simulator numbers the plan's devices; say which they are.
		numbered := fmt.Sprintf("0–%d", len(u)-1)
		if len(u) == 1 {
			numbered = "0"
		}
		fmt.Fprintf(e.stdout, "the plan runs on %d of %s's %d devices: %s, numbered %s below and in the trace\n", len(u), pl.Cluster.Name, pl.Cluster.Devices, plan.DeviceList(u), numbered)
	}
	if err := res.WriteSummary(e.stdout, *eachDevice); err != nil {
		return err
	}
	if !*eachDevice && len(res.Devices) > 1 {
		fmt.Fprintln(e.stdout, "(consecutive devices with the same figures share a row; --each-device lists them one by one)")
	}
	if searched != nil {
		fmt.Fprintln(e.stdout, describeOrder(searched, "the summary and trace above are of the searched order"))
	}
	if *out != "" {
		fmt.Fprintf(e.stdout, "wrote %s\n", *out)
	}
	return nil
}

// writePlan writes pl's document to path.
func writePlan(pl *plan.Plan, path string) error { return pl.WriteFile(path) }

// orderReport is an order search's outcome in simulate --json.
type orderReport struct {
	Status  order.Status `json:"status"`
	Before  float64      `json:"before_seconds"`
	After   float64      `json:"after_seconds"`
	Bound   float64      `json:"bound_seconds"`
	Window  int          `json:"window"`
	Pairs   int          `json:"free_pairs"`
	Checks  int          `json:"checks"`
	Reorder int          `json:"devices_reordered"`
}

func reportOrder(r *order.Result) orderReport {
	n := 0
	for _, d := range r.Program.Devices {
		if len(d.CommOrder) > 0 {
			n++
		}
	}
	return orderReport{Status: r.Status, Before: r.Before, After: r.After, Bound: r.Bound, Window: r.Window, Pairs: r.Pairs, Checks: r.Checks, Reorder: n}
}

// describeOrder says what an order search found, in one line; searched
// says what above it the searched order applies to.
func describeOrder(r *order.Result, searched string) string {
	if r.Checks == 0 && r.AtBound() {
		return fmt.Sprintf("order search: the plan's own order meets the order bound (%s): no order of the collectives is faster, so Z3 was not asked", duration(r.Bound))
	}
	what := "the plan's own order is the best found"
	if r.After < r.Before {
		what = fmt.Sprintf("%s → %s (%.2f%% shorter); %s",
			duration(r.Before), duration(r.After), 100*(1-r.After/r.Before), searched)
	}
	why := map[order.Status]string{
		order.Optimal:   "no order within the window is faster (proven by Z3)",
		order.Stopped:   "Z3's work budget ran out before proving no faster order exists",
		order.TimeLimit: "the time limit stopped Z3 before it proved no faster order exists",
		order.Excluded:  "faster orders did not fit in memory; others were not all ruled out",
	}[r.Status]
	limit := fmt.Sprintf("order bound %s (%.2f%% below)", duration(r.Bound), 100*(1-r.Bound/r.After))
	if r.AtBound() {
		why, limit = "it meets the order bound", "no order of the collectives is faster"
	}
	return fmt.Sprintf("order search (Z3, window %d, %d free pairs, %d checks): %s; %s; %s", r.Window, r.Pairs, r.Checks, what, why, limit)
}

func runDevices(e *env, args []string) error {
	fs := flags(e, "devices")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *asJSON {
		return writeJSON(e, cluster.Catalog())
	}
	return cluster.FormatCatalog(e.stdout, cluster.Catalog())
}

func runClusters(e *env, args []string) error {
	fs := flags(e, "clusters")
	asJSON := fs.Bool("json", false, "print JSON: a list of cluster files, or with one NAME that cluster's file (hap clusters --json NAME > my.json, then edit it)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cs := cluster.Builtins()
	if fs.NArg() > 0 {
		cs = nil
		for _, name := range fs.Args() {
			c, ok := cluster.Builtin(name)
			if !ok {
				return usageErr("%q is not a built-in cluster (built-ins: %s)", name, strings.Join(cluster.BuiltinNames(), ", "))
			}
			cs = append(cs, c)
		}
	}
	if *asJSON {
		// Each a cluster file as it is (docs/cluster-format.md, "JSON
		// form"): nothing but the cluster's own fields, so that it loads
		// back as the same cluster, hash and all.
		if fs.NArg() == 1 {
			return writeJSON(e, cs[0])
		}
		return writeJSON(e, cs)
	}
	return cluster.FormatClusters(e.stdout, cs)
}

// devicesUsed says how many devices a plan runs on: "8 devices", or "1 of
// 8 devices" when the device search left some idle.
func devicesUsed(c plan.ClusterRef) string {
	if c.Use != nil {
		return fmt.Sprintf("%d of %s", len(c.Use), plural(c.Devices, "device"))
	}
	return plural(c.Devices, "device")
}
