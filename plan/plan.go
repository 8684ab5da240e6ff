// Package plan owns hap's plan document: a distributed program for one
// model on one cluster, with everything needed to reproduce, explain,
// simulate, verify and run it — input hashes, the integer shard lengths
// (ratios) per segment and device, each fed tensor's layout, the
// instruction sequence by name, the estimated cost per device, and how it
// was found (strategy or solver, status, bound, gap, versions).
//
// Same inputs give the same bytes: the document holds no timestamps, and
// maps are avoided so key order is fixed.
//
// plan imports ir, models, cluster, cost, spmd, strategy, encode, milp
// and milp/cbc, lower, devprog, sim, order, solve, solve/paper and
// solve/z3 — everything below the command but the runtimes (never
// executor, cuda or nccl); only cmd and bench import it.
package plan

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/internal/fileio"
	"hap/ir"
	"hap/lower"
	"hap/models"
	"hap/sim"
	"hap/spmd"
	"hap/strategy"
)

// Schema identifies the document version.
const Schema = "hap.plan/v1"

// Plan is the document.
type Plan struct {
	Schema  string         `json:"schema"`
	Model   ModelRef       `json:"model"`
	Cluster ClusterRef     `json:"cluster"`
	Options Options        `json:"options"`
	Ratios  []spmd.Segment `json:"ratios"`
	// Mesh, for a 2-D program (megatron on multi-GPU machines), lists the
	// replicas' devices and the ratios across replicas; Ratios then cut
	// among the ranks of a replica.
	Mesh    *spmd.Mesh `json:"mesh,omitempty"`
	Leaves  []LeafDoc  `json:"leaves"`
	Program []InstrDoc `json:"program"`
	// Recompute lists the layers whose activations backward recomputes
	// rather than keeps (docs/planner.md, Recomputation); absent, every
	// activation backward reads is kept from forward.
	Recompute []RecomputeDoc `json:"recompute,omitempty"`
	// CommOrder, when set, is the communication streams' issue order Z3
	// searched for the program (hap plan --search-order); absent, the
	// collectives are issued in the order lowering lists them.
	CommOrder *OrderDoc `json:"comm_order,omitempty"`
	Cost      Cost      `json:"cost"`
	Solver    Solver    `json:"solver"`

	// inputs says where the model and cluster are read from (paths.go).
	inputs inputPaths
}

// ModelRef says which model the plan is for and how to rebuild it.
type ModelRef struct {
	Spec    string `json:"spec"` // zoo name or graph file
	Name    string `json:"name"`
	Batch   int    `json:"batch,omitempty"`
	Experts int    `json:"experts,omitempty"`
	Params  int64  `json:"params"`
	Hash    string `json:"sha256"` // of the forward graph's JSON
}

// ClusterRef says which cluster.
type ClusterRef struct {
	Spec    string `json:"spec"`
	Name    string `json:"name"`
	Devices int    `json:"devices"`
	Hash    string `json:"sha256"` // of the cluster's JSON form
	// Use, when set, lists the devices the plan runs on, the others left
	// idle (hap plan's device search, SynthesizeOnDevices): the plan's
	// ratios, program and per-device costs are over these devices, its
	// device i being the cluster's device Use[i]. Increasing, and of each
	// node a prefix of its devices (cluster.Cluster.Subset). Absent, the
	// plan runs on every device.
	Use []int `json:"use,omitempty"`
}

// Used is how many devices the plan runs on.
func (c ClusterRef) Used() int {
	if c.Use != nil {
		return len(c.Use)
	}
	return c.Devices
}

// Options are the planning options that shaped the plan.
type Options struct {
	Strategy  string `json:"strategy"` // "hap" for the synthesizer
	Optimizer string `json:"optimizer"`
	// Precision is the arithmetic the plan was priced in (hap plan
	// --precision); absent, FP32.
	Precision cost.Precision `json:"precision,omitempty"`
}

// check refuses a strategy or optimizer hap does not know: an edited plan
// must not run as something it does not say (an unknown optimizer as Adam).
func (o Options) check() error {
	if o.Strategy != "hap" && !slices.Contains(strategy.Names(), o.Strategy) {
		return fmt.Errorf("plan options.strategy %q: not hap nor a hand-written strategy (%s)", o.Strategy, strings.Join(strategy.Names(), ", "))
	}
	if o.Optimizer != "adam" && o.Optimizer != "sgd" {
		return fmt.Errorf("plan options.optimizer %q: want adam or sgd", o.Optimizer)
	}
	if o.Precision != "" {
		if p, err := cost.ParsePrecision(string(o.Precision)); err != nil || p != o.Precision {
			return fmt.Errorf("plan options.precision %q: want one of fp32, tf32, fp16, bf16", o.Precision)
		}
	}
	return nil
}

// LeafDoc is a fed tensor's layout (among ranks, in a mesh plan) and, in a
// mesh plan, its layout across replicas.
type LeafDoc struct {
	Tensor string       `json:"tensor"`
	Layout spmd.Layout  `json:"layout"`
	Outer  *spmd.Layout `json:"outer,omitempty"`
}

// InstrDoc is one instruction, by name. In a mesh plan a compute also has
// its rule across replicas (outer_rule, outer_in, outer_out), and a comm
// the axis it runs along (ranks or replicas) and the tensor's layout along
// the other one.
type InstrDoc struct {
	Kind       string        `json:"kind"` // compute or comm
	Op         string        `json:"op,omitempty"`
	OpKind     ir.OpKind     `json:"op_kind,omitempty"`
	Rule       string        `json:"rule,omitempty"`
	In         []spmd.Layout `json:"in,omitempty"`
	Out        []spmd.Layout `json:"out,omitempty"`
	Tensor     string        `json:"tensor,omitempty"`
	From       *spmd.Layout  `json:"from,omitempty"`
	To         *spmd.Layout  `json:"to,omitempty"`
	Collective ir.OpKind     `json:"collective,omitempty"`
	Method     string        `json:"method,omitempty"`
	OuterRule  string        `json:"outer_rule,omitempty"`
	OuterIn    []spmd.Layout `json:"outer_in,omitempty"`
	OuterOut   []spmd.Layout `json:"outer_out,omitempty"`
	Axis       string        `json:"axis,omitempty"`
	Other      *spmd.Layout  `json:"other,omitempty"`
}

// Cost is the simulated step.
type Cost struct {
	StepSeconds float64           `json:"step_seconds"`
	PerDevice   []sim.DeviceStats `json:"per_device"`
}

// Solver says how the plan was found.
type Solver struct {
	// Status: "heuristic" for hand-written strategies; "optimal" or
	// "feasible" for the synthesizer. "optimal" with a gap above zero was
	// proven by the transport LP within solve.OptimalGap.
	Status string `json:"status"`
	// Seconds is the solver's wall time, when recorded (hap plan
	// --record-time, or --time-limit): 0 otherwise, since it is the one
	// field that would differ between identical runs.
	Seconds float64 `json:"seconds"`
	// Phases is where the synthesis's wall time went, recorded with
	// Seconds only.
	Phases *Phases `json:"phases,omitempty"`
	// Objective is the planner's cost-model step time of the plan and Bound
	// the solver's proven lower bound on it; Gap = (Objective−Bound)/Objective.
	Objective float64    `json:"objective,omitempty"`
	Bound     float64    `json:"bound,omitempty"`
	Gap       float64    `json:"gap"`
	Model     string     `json:"model,omitempty"` // "milp" and its size
	Versions  []Software `json:"versions,omitempty"`
	// Options are the settings the plan was made under and what its
	// search recorded of itself; none on a hand-written strategy's plan.
	Options SolverOptions `json:"options,omitzero"`
	// StoppedBy names what ended the search short of optimality: "node
	// limit" (deterministic), "time limit" (the plan may differ on a
	// machine of another speed) or "solver failure" (the joint MILP's
	// solver process died; the plan is the polished start and Bound the
	// transport LP's, or 0);
	// empty when the search finished.
	StoppedBy string `json:"stopped_by,omitempty"`
	// Chosen names the hand-written strategy whose program the simulator
	// found faster than the solver's, when that happened; empty when the
	// program is the solver's own.
	Chosen string `json:"chosen,omitempty"`
	// DeviceSets is hap plan's device search (SynthesizeOnDevices) when
	// it weighed more than the whole cluster: each set of devices, what
	// the search found for it, and which one the plan runs on. The fields
	// above are that set's own search's: its bound holds over the plans
	// on its devices.
	DeviceSets []DeviceSet `json:"device_sets,omitempty"`
}

// Phases is where a synthesis's wall time went, in seconds (the solver's
// own account, solve.Phases): the encoding and starts, Polish (the primal
// heuristic), the joint MILP's search and the transport LP's (beside
// Polish by default, so the three overlap), and the time from Polish's
// end to the plan (waiting for those two, or the search itself when it
// runs after Polish). Under a device search they are the chosen set's
// synthesis's; after a retry under a smaller memory fraction, the last
// solve's. The plan is the same without them: they are the one record of
// why it took as long as it did.
type Phases struct {
	Encode      float64 `json:"encode"`
	Polish      float64 `json:"polish"`
	JointSearch float64 `json:"joint_search"`
	BoundLP     float64 `json:"bound_lp"`
	AfterPolish float64 `json:"after_polish"`
}

// String says where the time went, as hap plan's progress and hap explain
// put it.
func (p *Phases) String() string {
	lp := fmt.Sprintf("bound LP %.2fs", p.BoundLP)
	if p.BoundLP == 0 {
		lp = "no bound LP of its own (solved before, or not wanted)"
	}
	return fmt.Sprintf("encoding %.2fs, Polish %.2fs, joint search %.2fs, %s, side by side; %.2fs from Polish's end to the plan",
		p.Encode, p.Polish, p.JointSearch, lp, p.AfterPolish)
}

// HapVersion is the build of hap that is running: the first twelve hex
// digits of its commit, with "+modified" when it was built from a tree with
// changes not committed, and "dev" when the build recorded no commit (go
// test, go run, or -buildvcs=false). Plans record it beside the solvers'
// versions, since the encoding's formulation changes with hap's code:
// "hap-encoding" alone did not say which build made a plan.
func HapVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	rev, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(rev) < 12 {
		return "dev"
	}
	if modified {
		return rev[:12] + "+modified"
	}
	return rev[:12]
}

// Software is one component's version; the document writes each solver
// option (SolverOptions) in the same form, its value as the version.
type Software struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Inputs bundle what a plan is made from.
type Inputs struct {
	ModelSpec   string
	ModelOpts   models.Options
	Graph       *ir.Graph
	ClusterSpec string
	// Cluster is what the plan runs on: the cluster ClusterSpec names, or
	// the subset of its devices Use lists (OnDevices).
	Cluster   *cluster.Cluster
	Optimizer ir.Optimizer
	// Recompute lists the units of activation recomputation
	// (encode.RecomputeUnits of Graph) every program planned on these
	// inputs recomputes: the encoding prices them so, and the hand-written
	// and paper programs recompute them too (withRecompute). Empty: none.
	Recompute []int
	// Precision is the arithmetic the step runs in (cost.Options.Precision;
	// "" is FP32): every cost model built for these inputs prices it
	// (CostModel).
	Precision cost.Precision
	// Whole and Use, when Use is set, are the cluster ClusterSpec names
	// and the devices of it that Cluster keeps (ClusterRef.Use).
	Whole *cluster.Cluster
	Use   []int
	// Warnings are what the cluster file and the profile it names give
	// that is legal but implausible (cluster.ParseWarn,
	// cost.ParseProfileWarn, Profile.Unused); the command shows them.
	Warnings []cluster.Warning
}

// CostModel is the cost model of in's cluster at in's precision: the one
// every plan of these inputs is priced, simulated and explained by.
func (in *Inputs) CostModel() (*cost.Model, error) {
	return cost.New(in.Cluster, cost.Options{Precision: in.Precision})
}

// OnDevices is in with the plan's devices narrowed to use, devices of the
// whole cluster (ClusterRef.Use): the same model, on
// in.Cluster.Subset(use). in must be the whole cluster's inputs.
func (in *Inputs) OnDevices(use []int) (*Inputs, error) {
	if in.Use != nil {
		panic("plan: OnDevices of inputs already narrowed")
	}
	sub, err := in.Cluster.Subset(use)
	if err != nil {
		return nil, err
	}
	out := *in
	out.Cluster, out.Whole, out.Use = sub, in.Cluster, slices.Clone(use)
	return &out, nil
}

// whole is the cluster ClusterSpec names.
func (in *Inputs) whole() *cluster.Cluster {
	if in.Whole != nil {
		return in.Whole
	}
	return in.Cluster
}

// LoadInputs resolves a model spec and a cluster spec. MoE zoo models get
// 2 × devices experts unless opt says otherwise, as in the paper.
//
// Inputs.Warnings lists what the cluster and its profile give that is
// legal but implausible; an unreadable or invalid profile is an error here
// already, not at the first cost model.
func LoadInputs(modelSpec string, opt models.Options, clusterSpec string) (*Inputs, error) {
	c, warnings, err := cluster.LoadWarn(clusterSpec)
	if err != nil {
		return nil, err
	}
	if path := c.ProfilePath(); path != "" {
		prof, more, err := cost.LoadProfileWarn(path)
		if err != nil {
			return nil, fmt.Errorf("cluster %s's profile: %w", c.Name, err)
		}
		warnings = append(append(warnings, more...), prof.Unused(c)...)
	}
	if cfg, err := models.Lookup(modelSpec); err == nil && cfg.Arch == models.ArchBERTMoE && opt.Experts == 0 {
		opt.Experts = 2 * c.NumDevices()
	}
	g, err := models.Load(modelSpec, opt)
	if err != nil {
		return nil, err
	}
	return &Inputs{ModelSpec: modelSpec, ModelOpts: opt, Graph: g, ClusterSpec: clusterSpec, Cluster: c, Optimizer: ir.Adam(1e-3), Warnings: warnings}, nil
}

// GraphHash is the SHA-256 of a forward graph's JSON.
func GraphHash(g *ir.Graph) (string, error) {
	var buf bytes.Buffer
	if err := ir.EncodeJSON(&buf, g); err != nil {
		return "", fmt.Errorf("hashing graph %s: %w", g.Name, err)
	}
	h := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(h[:]), nil
}

// clusterHash is the SHA-256 of a cluster's JSON form.
func clusterHash(c *cluster.Cluster) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("hashing cluster %s: %w", c.Name, err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}

// Build makes the plan document for program p, simulating it for its cost.
func Build(in *Inputs, p *spmd.Program, strategy string, solver Solver) (*Plan, error) {
	return BuildContext(context.Background(), in, p, strategy, solver)
}

// BuildContext is Build, its simulation stopped when ctx ends.
func BuildContext(ctx context.Context, in *Inputs, p *spmd.Program, strategy string, solver Solver) (*Plan, error) {
	pl, err := buildDoc(in, p, strategy, solver)
	if err != nil {
		return nil, err
	}
	res, err := SimulateContext(ctx, in, p)
	if err != nil {
		return nil, err
	}
	pl.Cost = Cost{StepSeconds: res.StepSeconds, PerDevice: res.Devices}
	return pl, nil
}

// buildDoc is the plan document of p without its cost.
func buildDoc(in *Inputs, p *spmd.Program, strategy string, solver Solver) (*Plan, error) {
	g := in.Graph
	if err := spmd.Check(g, p); err != nil {
		return nil, err
	}
	modelSum, err := GraphHash(g)
	if err != nil {
		return nil, err
	}
	clusterSum, err := clusterHash(in.whole())
	if err != nil {
		return nil, err
	}
	pl := &Plan{
		Schema: Schema,
		Model: ModelRef{Spec: in.ModelSpec, Name: g.Name, Batch: in.ModelOpts.Batch, Experts: in.ModelOpts.Experts,
			Params: g.ParamCount(), Hash: modelSum},
		Cluster: ClusterRef{Spec: in.ClusterSpec, Name: in.whole().Name, Devices: in.whole().NumDevices(), Hash: clusterSum, Use: in.Use},
		Options: Options{Strategy: strategy, Optimizer: in.Optimizer.Kind, Precision: recordedPrecision(in.Precision)},
		Ratios:  p.Segments,
		Mesh:    p.Mesh,
		Solver:  solver,
	}
	for _, ops := range p.Recompute {
		d := RecomputeDoc{Unit: g.Ops[ops[0]].Name}
		for _, op := range ops {
			d.Ops = append(d.Ops, g.Ops[op].Name)
		}
		pl.Recompute = append(pl.Recompute, d)
	}
	mesh := p.Mesh != nil
	for _, lf := range p.Leaves {
		d := LeafDoc{Tensor: g.Tensors[lf.Tensor].Name, Layout: lf.Layout}
		if mesh {
			o := lf.Outer
			d.Outer = &o
		}
		pl.Leaves = append(pl.Leaves, d)
	}
	for i := range p.Instrs {
		in := &p.Instrs[i]
		if in.Kind == spmd.Compute {
			op := &g.Ops[in.Op]
			d := InstrDoc{Kind: "compute", Op: op.Name, OpKind: op.Kind, Rule: in.Rule.Name, In: in.Rule.In, Out: in.Rule.Out}
			if mesh {
				d.OuterRule, d.OuterIn, d.OuterOut = in.Outer.Name, in.Outer.In, in.Outer.Out
			}
			pl.Program = append(pl.Program, d)
			continue
		}
		from, to := in.From, in.To
		d := InstrDoc{Kind: "comm", Tensor: g.Tensors[in.Tensor].Name, From: &from, To: &to, Collective: in.Collective, Method: in.Method}
		if mesh {
			other := in.Other
			d.Axis, d.Other = in.Axis.String(), &other
		}
		pl.Program = append(pl.Program, d)
	}
	return pl, nil
}

// withProgram is the plan of program p p whose simulation res is known:
// Build without simulating again.
func withProgram(in *Inputs, p *spmd.Program, strategy string, solver Solver, res *sim.Result) (*Plan, error) {
	pl, err := buildDoc(in, p, strategy, solver)
	if err != nil {
		return nil, err
	}
	pl.Cost = Cost{StepSeconds: res.StepSeconds, PerDevice: res.Devices}
	return pl, nil
}

// Simulate lowers p, schedules it and runs the simulator under the
// cluster's cost model.
func Simulate(in *Inputs, p *spmd.Program) (*sim.Result, error) {
	return SimulateContext(context.Background(), in, p)
}

// SimulateContext is Simulate, stopped with ctx's error when ctx ends.
func SimulateContext(ctx context.Context, in *Inputs, p *spmd.Program) (*sim.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	prog, m, err := LowerContext(ctx, in, p)
	if err != nil {
		return nil, err
	}
	return sim.RunContext(ctx, prog, m)
}

// Recost re-simulates the plan's program (in and p from Resolve) and puts
// the result in pl.Cost, so that what is printed is what the program
// costs, never what a document says it costs. It returns the cost the
// document recorded when that differs (edited, or written by a hap whose
// cost model differs), and nil when it is the same.
func (pl *Plan) Recost(in *Inputs, p *spmd.Program) (recorded *Cost, err error) {
	res, err := Simulate(in, p)
	if err != nil {
		return nil, err
	}
	now := Cost{StepSeconds: res.StepSeconds, PerDevice: res.Devices}
	if reflect.DeepEqual(now, pl.Cost) {
		return nil, nil
	}
	old := pl.Cost
	pl.Cost = now
	return &old, nil
}

// Lower lowers p to the per-device program the simulator runs, with the
// cluster's cost model to run it under.
func Lower(in *Inputs, p *spmd.Program) (*devprog.Program, *cost.Model, error) {
	return LowerContext(context.Background(), in, p)
}

// LowerContext is Lower, stopped with ctx's error when ctx ends.
func LowerContext(ctx context.Context, in *Inputs, p *spmd.Program) (*devprog.Program, *cost.Model, error) {
	steps, err := lower.CostSteps(in.Graph, p, in.Optimizer)
	if err != nil {
		return nil, nil, err
	}
	prog, err := lower.ScheduleContext(ctx, steps)
	if err != nil {
		return nil, nil, err
	}
	if _, err := lower.ApplyPlanOrder(prog, p); err != nil {
		return nil, nil, err
	}
	m, err := in.CostModel()
	if err != nil {
		return nil, nil, err
	}
	return prog, m, nil
}

// Encode writes the plan as indented JSON.
func (pl *Plan) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(pl, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Read loads a plan file.
func Read(path string) (*Plan, error) {
	data, err := fileio.ReadFile(path, fileio.MaxPlan, "plan")
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	pl, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	pl.inputs.base = filepath.Dir(path)
	return pl, nil
}

// Parse decodes a plan document; file names it in errors. Unknown fields
// are errors, so a misspelt field is not silently ignored. The program
// inside is checked only by Resolve, which needs the model.
func Parse(data []byte, file string) (*Plan, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var pl Plan
	if err := dec.Decode(&pl); err != nil {
		return nil, fmt.Errorf("%s: not a plan document (hap plan -o writes one): %s", file, ir.DescribeJSONError(data, err))
	}
	if pl.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", file, pl.Schema, Schema)
	}
	return &pl, nil
}

// Resolve rebuilds the model and cluster a plan names, checks they are
// the ones it was made for, and turns its program back into IDs, checked.
func (pl *Plan) Resolve() (*Inputs, *spmd.Program, error) {
	modelPath, clusterPath := pl.modelPath(), pl.clusterPath()
	in, err := LoadInputs(modelPath, models.Options{Batch: pl.Model.Batch, Experts: pl.Model.Experts}, clusterPath)
	if err != nil {
		return nil, nil, err
	}
	h, err := GraphHash(in.Graph)
	if err != nil {
		return nil, nil, err
	}
	if h != pl.Model.Hash {
		return nil, nil, fmt.Errorf("%s no longer matches the plan (graph hash %.12s, plan has %.12s)", pl.describeModel(modelPath), h, pl.Model.Hash)
	}
	if h, err = clusterHash(in.Cluster); err != nil {
		return nil, nil, err
	}
	if h != pl.Cluster.Hash {
		return nil, nil, fmt.Errorf("%s no longer matches the plan (hash %.12s, plan has %.12s)", pl.describeCluster(clusterPath), h, pl.Cluster.Hash)
	}
	if n := in.Cluster.NumDevices(); pl.Cluster.Devices != n {
		return nil, nil, fmt.Errorf("plan says cluster %s has %d devices; it has %d", pl.Cluster.Spec, pl.Cluster.Devices, n)
	}
	if pl.Cluster.Use != nil {
		if in, err = in.OnDevices(pl.Cluster.Use); err != nil {
			return nil, nil, fmt.Errorf("plan cluster.use: %w", err)
		}
	}
	if err := pl.Options.check(); err != nil {
		return nil, nil, err
	}
	if pl.Options.Optimizer == "sgd" {
		in.Optimizer = ir.SGD(1e-3)
	}
	in.Precision = pl.Options.Precision
	g := in.Graph
	tensor := func(name string) (ir.TensorID, error) {
		if id, ok := g.TensorByName(name); ok {
			return id, nil
		}
		return ir.NoTensor, fmt.Errorf("plan names tensor %q, which %s lacks", name, g.Name)
	}
	opByName := map[string]ir.OpID{}
	for i := range g.Ops {
		opByName[g.Ops[i].Name] = ir.OpID(i)
	}
	used := pl.Cluster.Used()
	p := &spmd.Program{Devices: used, Segments: pl.Ratios, Mesh: pl.Mesh}
	if m := pl.Mesh; m != nil {
		if len(m.Replicas) == 0 || used%len(m.Replicas) != 0 {
			return nil, nil, fmt.Errorf("plan mesh has %d replicas, which do not divide the plan's %d devices", len(m.Replicas), used)
		}
		p.Devices = used / len(m.Replicas)
	}
	for _, lf := range pl.Leaves {
		id, err := tensor(lf.Tensor)
		if err != nil {
			return nil, nil, err
		}
		ll := spmd.LeafLayout{Tensor: id, Layout: lf.Layout}
		if lf.Outer != nil {
			ll.Outer = *lf.Outer
		}
		p.Leaves = append(p.Leaves, ll)
	}
	for i, d := range pl.Program {
		switch d.Kind {
		case "compute":
			id, ok := opByName[d.Op]
			if !ok {
				return nil, nil, fmt.Errorf("program[%d]: no op named %q in %s", i, d.Op, g.Name)
			}
			p.Instrs = append(p.Instrs, spmd.Instr{Kind: spmd.Compute, Op: id, Rule: spmd.Rule{Name: d.Rule, In: d.In, Out: d.Out},
				Outer: spmd.Rule{Name: d.OuterRule, In: d.OuterIn, Out: d.OuterOut}})
		case "comm":
			id, err := tensor(d.Tensor)
			if err != nil {
				return nil, nil, fmt.Errorf("program[%d]: %w", i, err)
			}
			if d.From == nil || d.To == nil {
				return nil, nil, fmt.Errorf("program[%d]: comm needs from and to", i)
			}
			in := spmd.Instr{Kind: spmd.Comm, Tensor: id, From: *d.From, To: *d.To, Collective: d.Collective, Method: d.Method}
			if err := in.Axis.UnmarshalText([]byte(d.Axis)); err != nil {
				return nil, nil, fmt.Errorf("program[%d]: %w", i, err)
			}
			if d.Other != nil {
				in.Other = *d.Other
			}
			p.Instrs = append(p.Instrs, in)
		default:
			return nil, nil, fmt.Errorf("program[%d]: kind %q, want compute or comm", i, d.Kind)
		}
	}
	for i, d := range pl.Recompute {
		var ops []ir.OpID
		for _, name := range d.Ops {
			id, ok := opByName[name]
			if !ok {
				return nil, nil, fmt.Errorf("recompute[%d]: no op named %q in %s", i, name, g.Name)
			}
			ops = append(ops, id)
		}
		p.Recompute = append(p.Recompute, ops)
	}
	if err := spmd.Check(g, p); err != nil {
		return nil, nil, err
	}
	if pl.CommOrder != nil {
		p.CommSwaps, p.CommDigest = pl.CommOrder.Swaps, pl.CommOrder.Collectives
	}
	return in, p, nil
}

// recordedPrecision is p as a plan records it: FP32, the default, not at
// all, so that plans priced in FP32 keep the bytes they had before the
// option existed.
func recordedPrecision(p cost.Precision) cost.Precision {
	if p == cost.FP32 {
		return ""
	}
	return p
}
