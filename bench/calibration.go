package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"hap/cluster"
	"hap/cost"
	"hap/devprog"
	"hap/ir"
	"hap/lower"
	"hap/models"
	"hap/sim"
	"hap/strategy"
)

// SuiteCalibration is the calibration suite: every row of the calibration
// data set (bench/calibration/calibration.yaml), priced by the cost model.
// It plans nothing, so it is not among SuiteNames' planning suites.
const SuiteCalibration = "calibration"

// AllSuiteNames lists the planning suites and the calibration suite.
func AllSuiteNames() []string { return append(SuiteNames(), SuiteCalibration) }

// DefaultTolerance is a calibration row's tolerance when it states none:
// the relative error |predicted − measured| / measured it is held within.
const DefaultTolerance = 0.25

// MedianTolerance bounds the median relative error over every row.
const MedianTolerance = 0.15

//go:embed calibration/calibration.yaml
var calibrationYAML []byte

//go:embed results/paper.json
var paperResultsJSON []byte

// CalRow is one measured figure of the calibration data set: where it was
// published, the setup it was measured on, and its value. Fields a kind
// does not use stay zero (see bench/calibration/README.md).
type CalRow struct {
	ID     string `yaml:"id" json:"id"`
	Source string `yaml:"source" json:"source"`
	// Kind: train, collective, rate, ratio or speedup.
	Kind string `yaml:"kind" json:"kind"`
	// Setup.
	Model       string    `yaml:"model" json:"model,omitempty"`
	Device      string    `yaml:"device" json:"device,omitempty"`
	Over        string    `yaml:"over" json:"over,omitempty"`
	GPUs        int       `yaml:"gpus" json:"gpus,omitempty"`
	Nodes       int       `yaml:"nodes" json:"nodes,omitempty"`
	Intra       string    `yaml:"intra" json:"intra,omitempty"`
	Inter       *CalInter `yaml:"inter" json:"inter,omitempty"`
	Cluster     string    `yaml:"cluster" json:"cluster,omitempty"`
	Precision   string    `yaml:"precision" json:"precision,omitempty"`
	Framework   string    `yaml:"framework" json:"framework,omitempty"`
	BatchPerGPU int       `yaml:"batch_per_gpu" json:"batch_per_gpu,omitempty"`
	Seq         int       `yaml:"seq" json:"seq,omitempty"`
	Optimizer   string    `yaml:"optimizer" json:"optimizer,omitempty"`
	Class       string    `yaml:"class" json:"class,omitempty"`
	Collective  string    `yaml:"collective" json:"collective,omitempty"`
	Method      string    `yaml:"method" json:"method,omitempty"`
	Algorithm   string    `yaml:"algorithm" json:"algorithm,omitempty"`
	Bytes       float64   `yaml:"bytes" json:"bytes,omitempty"`
	Suite       string    `yaml:"suite" json:"suite,omitempty"`
	Quantity    string    `yaml:"quantity" json:"quantity"`
	Value       float64   `yaml:"value" json:"value"`
	Unit        string    `yaml:"unit" json:"unit"`
	Tolerance   float64   `yaml:"tolerance" json:"tolerance,omitempty"`
	TolReason   string    `yaml:"tolerance_reason" json:"tolerance_reason,omitempty"`
}

// CalInter is a calibration row's network between nodes.
type CalInter struct {
	Class string  `yaml:"class" json:"class"`
	Gbps  float64 `yaml:"gbps" json:"gbps"`
	NICs  int     `yaml:"nics" json:"nics,omitempty"`
}

// Tol is the row's tolerance (DefaultTolerance when unstated).
func (r CalRow) Tol() float64 {
	if r.Tolerance > 0 {
		return r.Tolerance
	}
	return DefaultTolerance
}

// CalResult is one row priced: the cost model's prediction in the row's
// unit beside the measurement, and the signed relative error
// (predicted − measured) / measured.
type CalResult struct {
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Setup     string  `json:"setup"`
	Quantity  string  `json:"quantity"`
	Unit      string  `json:"unit"`
	Measured  float64 `json:"measured"`
	Predicted float64 `json:"predicted"`
	Error     float64 `json:"error"`
	Tolerance float64 `json:"tolerance"`
	Within    bool    `json:"within"`
	// Note says how the prediction was made where it departs from the
	// setup (a precision the model does not have).
	Note   string `json:"note,omitempty"`
	Source string `json:"source"`
}

// CalibrationRows parses the embedded calibration data set.
func CalibrationRows() ([]CalRow, error) { return ParseCalibration(calibrationYAML) }

// ParseCalibration parses a calibration data set, rejecting unknown fields,
// duplicate ids and rows without an id, source, quantity, unit or value.
func ParseCalibration(data []byte) ([]CalRow, error) {
	var doc struct {
		Rows []CalRow `yaml:"rows"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("calibration data set: %w", err)
	}
	seen := map[string]bool{}
	for i, r := range doc.Rows {
		switch {
		case r.ID == "":
			return nil, fmt.Errorf("calibration row %d: no id", i)
		case seen[r.ID]:
			return nil, fmt.Errorf("calibration row %s: duplicate id", r.ID)
		case r.Source == "" || r.Quantity == "" || r.Unit == "" || r.Value <= 0:
			return nil, fmt.Errorf("calibration row %s: needs source, quantity, unit and a positive value", r.ID)
		case r.Tolerance > DefaultTolerance && r.TolReason == "":
			return nil, fmt.Errorf("calibration row %s: tolerance %g above the default %g needs a tolerance_reason", r.ID, r.Tolerance, DefaultTolerance)
		}
		seen[r.ID] = true
	}
	return doc.Rows, nil
}

// Calibrate prices every calibration row with the cost model.
func Calibrate(ctx context.Context) ([]CalResult, error) {
	rows, err := CalibrationRows()
	if err != nil {
		return nil, err
	}
	out := make([]CalResult, 0, len(rows))
	for _, r := range rows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pred, note, err := predict(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("calibration row %s: %w", r.ID, err)
		}
		e := (pred - r.Value) / r.Value
		out = append(out, CalResult{ID: r.ID, Kind: r.Kind, Setup: setupSummary(r), Quantity: r.Quantity, Unit: r.Unit,
			Measured: r.Value, Predicted: pred, Error: e, Tolerance: r.Tol(), Within: math.Abs(e) <= r.Tol(), Note: note, Source: r.Source})
	}
	return out, nil
}

// CalSummary is the calibration's headline: rows, how many are within
// their tolerance, the median and worst relative error.
type CalSummary struct {
	Rows, Within int
	Median       float64
	Worst        float64
	WorstID      string
}

// Summarize computes a calibration's summary.
func Summarize(res []CalResult) CalSummary {
	s := CalSummary{Rows: len(res)}
	abs := make([]float64, 0, len(res))
	for _, r := range res {
		a := math.Abs(r.Error)
		abs = append(abs, a)
		if r.Within {
			s.Within++
		}
		if a > s.Worst {
			s.Worst, s.WorstID = a, r.ID
		}
	}
	sort.Float64s(abs)
	if n := len(abs); n > 0 {
		s.Median = abs[n/2]
		if n%2 == 0 {
			s.Median = (abs[n/2-1] + abs[n/2]) / 2
		}
	}
	return s
}

func setupSummary(r CalRow) string {
	var parts []string
	add := func(format string, args ...any) { parts = append(parts, fmt.Sprintf(format, args...)) }
	switch r.Kind {
	case "train", "ratio":
		add("%s", r.Model)
		if r.Over != "" {
			add("%s over %s", r.Device, r.Over)
		} else {
			add("%d × %s", max(1, r.Nodes)*max(1, r.GPUs), r.Device)
		}
		add("%s", r.Precision)
		add("batch %d/GPU", r.BatchPerGPU)
	case "collective":
		c := r.Collective
		if r.Method != "" {
			c += " (" + r.Method + ")"
		}
		if r.Algorithm != "" {
			c += " " + r.Algorithm
		}
		add("%s", c)
		if r.Cluster != "" {
			add("%s", r.Cluster)
		} else {
			add("%d × %d %s, %s", max(1, r.Nodes), max(1, r.GPUs), r.Device, r.Intra)
		}
		if r.Inter != nil {
			nics := max(1, r.Inter.NICs)
			add("%d × %g Gb/s %s", nics, r.Inter.Gbps, r.Inter.Class)
		}
		add("%s", byteSize(r.Bytes))
	case "rate":
		add("%s", r.Device)
		add("%s", r.Class)
		if r.Model != "" {
			add("over a %s step, batch %d", r.Model, r.BatchPerGPU)
		}
	case "speedup":
		add("%s suite", r.Suite)
	}
	return strings.Join(parts, ", ")
}

func byteSize(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.4g GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.4g MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.4g KiB", b/(1<<10))
	}
	return fmt.Sprintf("%g B", b)
}

// intraLink is a calibration row's link inside a node, named as the
// built-in clusters price them (cluster's constants: a ring's bus
// bandwidth per GPU, as a cluster file states it).
func intraLink(name string) (cluster.Link, error) {
	switch name {
	case "nvlink-v100":
		return cluster.Link{Class: cluster.LinkNVLink, Bandwidth: cluster.PaperV100NVLinkBandwidth, Latency: cluster.DefaultNVLinkLatency}, nil
	case "nvlink-a100":
		return cluster.Link{Class: cluster.LinkNVLink, Bandwidth: cluster.A100NVLinkBandwidth, Latency: cluster.DefaultNVLinkLatency}, nil
	case "nvlink-h100":
		return cluster.Link{Class: cluster.LinkNVLink, Bandwidth: cluster.H100NVLinkBandwidth, Latency: cluster.DefaultNVLinkLatency}, nil
	case "pcie3":
		// As the built-in P100 and T4 machines: an 8-GPU ring on PCIe 3.0 x16 across the host bridge.
		return cluster.Link{Class: cluster.LinkPCIe, Bandwidth: cluster.PaperP100PCIeBandwidth, Latency: cluster.DefaultPCIeLatency}, nil
	}
	return cluster.Link{}, fmt.Errorf("unknown intra link %q (nvlink-v100, nvlink-a100, nvlink-h100, pcie3)", name)
}

// rowCluster is the cluster a row describes: a built-in by name, or nodes
// of one device type with the row's links.
func rowCluster(r CalRow, device string) (*cluster.Cluster, error) {
	if r.Cluster != "" {
		return cluster.Load(r.Cluster)
	}
	intra, err := intraLink(r.Intra)
	if err != nil {
		return nil, err
	}
	nodes := max(1, r.Nodes)
	c := &cluster.Cluster{Name: "calibration-" + r.ID}
	for i := 0; i < nodes; i++ {
		c.Nodes = append(c.Nodes, cluster.Node{Name: fmt.Sprintf("n%d", i), Device: device, Count: max(1, r.GPUs), Intra: intra})
	}
	if nodes > 1 {
		if r.Inter == nil {
			return nil, errors.New("several nodes need an inter link")
		}
		c.Inter = cluster.InterLink{Link: cluster.Link{Class: r.Inter.Class, Bandwidth: r.Inter.Gbps * 1e9 / 8, Latency: cluster.DefaultLatency(r.Inter.Class)}, NICsPerNode: max(1, r.Inter.NICs)}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// precisionOf maps a row's precision to the cost model's.
func precisionOf(p string) (cost.Precision, string, error) {
	prec, err := cost.ParsePrecision(p)
	return prec, "", err
}

func predict(ctx context.Context, r CalRow) (float64, string, error) {
	switch r.Kind {
	case "train":
		step, note, err := trainStep(ctx, r, r.Device)
		if err != nil {
			return 0, "", err
		}
		samples := float64(r.BatchPerGPU * max(1, r.GPUs) * max(1, r.Nodes))
		switch r.Quantity {
		case "throughput":
			return samples / step, note, nil
		case "step_time":
			return step * 1e3, note, unitIs(r, "ms")
		}
	case "ratio":
		fast, note, err := trainStep(ctx, r, r.Device)
		if err != nil {
			return 0, "", err
		}
		slow, _, err := trainStep(ctx, r, r.Over)
		if err != nil {
			return 0, "", err
		}
		return slow / fast, note, nil
	case "rate":
		switch r.Quantity {
		case "flop_rate":
			rate, err := classRate(ctx, r)
			if err != nil {
				return 0, "", err
			}
			return rate / 1e12, "", unitIs(r, "TFLOP/s")
		case "mem_bandwidth":
			m, err := rowModel(CalRow{ID: r.ID, Intra: "nvlink-h100", Precision: r.Precision}, r.Device)
			if err != nil {
				return 0, "", err
			}
			return m.MemBandwidth(0) / 1e12, "", unitIs(r, "TB/s")
		}
	case "collective":
		return collective(r)
	case "speedup":
		return suiteSpeedup(r)
	}
	return 0, "", fmt.Errorf("kind %q with quantity %q is not priced", r.Kind, r.Quantity)
}

func unitIs(r CalRow, unit string) error {
	if r.Unit != unit {
		return fmt.Errorf("quantity %s is priced in %s, not %s", r.Quantity, unit, r.Unit)
	}
	return nil
}

// trainStep is one data-parallel (dp-ev) training step of the row's model
// on the row's cluster of device, simulated, in seconds.
func trainStep(ctx context.Context, r CalRow, device string) (float64, string, error) {
	m, err := rowModel(r, device)
	if err != nil {
		return 0, "", err
	}
	if r.Model == "resnet50" {
		return resnet50Step(m, m.NumDevices(), r.BatchPerGPU), "", nil
	}
	prog, err := trainProgram(ctx, r, m)
	if err != nil {
		return 0, "", err
	}
	res, err := sim.RunContext(ctx, prog, m)
	if err != nil {
		return 0, "", err
	}
	return res.StepSeconds, "", nil
}

// rowModel is the cost model of the row's cluster of device at the row's
// precision, without a profile.
func rowModel(r CalRow, device string) (*cost.Model, error) {
	c, err := rowCluster(r, device)
	if err != nil {
		return nil, err
	}
	prec, _, err := precisionOf(r.Precision)
	if err != nil {
		return nil, err
	}
	return cost.New(c, cost.Options{Precision: prec, NoProfile: true})
}

// trainProgram is the per-device program of one data-parallel (dp-ev)
// training step of the row's (zoo or bert-large) model on m's cluster.
func trainProgram(ctx context.Context, r CalRow, m *cost.Model) (*devprog.Program, error) {
	c := m.Cluster()
	opt := ir.Adam(1e-3)
	if r.Optimizer == "sgd" {
		opt = ir.SGD(1e-3)
	}
	cfg, err := calModel(r.Model)
	if err != nil {
		return nil, err
	}
	cfg.Batch = r.BatchPerGPU * c.NumDevices()
	if r.Seq > 0 {
		cfg.Seq = r.Seq
	}
	g, err := models.Build(cfg)
	if err != nil {
		return nil, err
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		return nil, err
	}
	steps, err := lower.CostSteps(g, p, opt)
	if err != nil {
		return nil, err
	}
	prog, err := lower.ScheduleContext(ctx, steps)
	if err != nil {
		return nil, err
	}
	if _, err := lower.ApplyPlanOrder(prog, p); err != nil {
		return nil, err
	}
	return prog, nil
}

// classRate is the FLOP rate device 0 achieves on a class over one
// training step of the row's model: the class's FLOPs over its kernels'
// device time (cost.Model.KernelTime, without launch overheads, as a
// profiler's device timer measures it).
func classRate(ctx context.Context, r CalRow) (float64, error) {
	m, err := rowModel(CalRow{ID: r.ID, Intra: "nvlink-h100", Precision: r.Precision}, r.Device)
	if err != nil {
		return 0, err
	}
	if r.Model == "" {
		return m.FLOPRate(0, r.Class), nil
	}
	prog, err := trainProgram(ctx, r, m)
	if err != nil {
		return 0, err
	}
	flops, secs := 0.0, 0.0
	for _, in := range prog.Devices[0].Instrs {
		if k := in.Kernel; k != nil && k.Work != nil && k.Work.Class == r.Class {
			flops += k.Work.FLOPs
			secs += m.KernelTime(0, *k.Work)
		}
	}
	if secs == 0 {
		return 0, fmt.Errorf("model %s has no %s work", r.Model, r.Class)
	}
	return flops / secs, nil
}

// calModel is a zoo model, or bert-large: the zoo's bert-base resized to
// BERT-Large (24 layers, hidden 1024, 16 heads, FFN 4096, vocabulary 30522).
func calModel(name string) (models.Config, error) {
	if name == "bert-large" {
		cfg, err := models.Lookup("bert-base")
		if err != nil {
			return cfg, err
		}
		cfg.Name, cfg.Layers, cfg.Hidden, cfg.Heads, cfg.FFN, cfg.Vocab = "bert-large", 24, 1024, 16, 4096, 30522
		return cfg, nil
	}
	return models.Lookup(name)
}

// resnet50Conv is one convolution of ResNet-50 v1.5 at 224 × 224: output
// side, input and output channels, kernel side.
type resnet50Conv struct{ out, cin, cout, k int }

// resnet50Convs lists ResNet-50 v1.5's convolutions (the stride-2 3 × 3 in
// each downsampling bottleneck, as v1.5 has it) and its classifier as a 1 × 1
// convolution on a 1 × 1 map.
func resnet50Convs() []resnet50Conv {
	convs := []resnet50Conv{{112, 3, 64, 7}}
	side, in := 56, 64
	for stage, blocks := range []int{3, 4, 6, 3} {
		width := 64 << stage
		for b := 0; b < blocks; b++ {
			inSide := side
			if stage > 0 && b == 0 {
				side /= 2
			}
			convs = append(convs, resnet50Conv{inSide, in, width, 1}, resnet50Conv{side, width, width, 3}, resnet50Conv{side, width, 4 * width, 1})
			if b == 0 {
				convs = append(convs, resnet50Conv{side, in, 4 * width, 1})
			}
			in = 4 * width
		}
	}
	return append(convs, resnet50Conv{1, 2048, 1000, 1})
}

// resnet50Step prices one data-parallel ResNet-50 step of batch samples per
// GPU on n GPUs (device 0's speed; every device is of one type): each
// convolution's forward (2 FLOPs a MAC) and backward (4), a batch norm and
// ReLU after each (elementwise, its output read and written twice forward,
// three times backward), SGD with momentum over the parameters, and the
// gradients' all-reduce over the n GPUs after the backward pass (DDP's
// overlap with the backward pass is not modelled here).
//
// Bytes are counted in the IR's 4-byte elements, as every Work is: the
// cost model moves 2-byte ones under mixed precision itself.
func resnet50Step(m *cost.Model, n, batch int) float64 {
	const elem = 4.0
	b := float64(batch)
	t, params := 0.0, 0.0
	for _, c := range resnet50Convs() {
		macs := b * float64(c.out*c.out) * float64(c.cin*c.cout*c.k*c.k)
		w := float64(c.cin * c.cout * c.k * c.k)
		params += w
		outElems := b * float64(c.out*c.out*c.cout)
		inSide := c.out // the input side differs only by the stride; its bytes are close enough
		inElems := b * float64(inSide*inSide*c.cin)
		io := (inElems + outElems + w) * elem
		t += m.ComputeTime(0, ir.Work{Class: ir.ClassConv, FLOPs: 2 * macs, Bytes: io})
		t += m.ComputeTime(0, ir.Work{Class: ir.ClassConv, FLOPs: 4 * macs, Bytes: 2 * io})
		t += m.ComputeTime(0, ir.Work{Class: ir.ClassNormalization, FLOPs: 6 * outElems, Bytes: 4 * outElems * elem})
		t += m.ComputeTime(0, ir.Work{Class: ir.ClassNormalization, FLOPs: 10 * outElems, Bytes: 6 * outElems * elem})
	}
	// SGD with momentum: read parameter, gradient, momentum; write two (fp32 state).
	t += m.ComputeTime(0, ir.Work{Class: ir.ClassOptimizer, FLOPs: 4 * params, Bytes: 5 * 4 * params})
	if n > 1 {
		group := make([]int, n)
		for i := range group {
			group[i] = i
		}
		bs := make([]float64, n)
		for i := range bs {
			bs[i] = params * 4 // FP32 gradients, under mixed precision too (AMP keeps FP32 parameters)
		}
		ar, err := m.CollectiveTime(cost.Call{Kind: cost.AllReduce, Group: group, Bytes: bs})
		if err == nil {
			t += ar
		}
	}
	return t
}

// collective prices a row's collective over every device of its cluster.
func collective(r CalRow) (float64, string, error) {
	c, err := rowCluster(r, r.Device)
	if err != nil {
		return 0, "", err
	}
	m, err := cost.New(c, cost.Options{NoProfile: true})
	if err != nil {
		return 0, "", err
	}
	p := c.NumDevices()
	group := make([]int, p)
	for i := range group {
		group[i] = i
	}
	call := cost.Call{Kind: cost.Collective(r.Collective), Group: group, Method: cost.Method(r.Method), Algorithm: cost.Algorithm(r.Algorithm)}
	// nccl-tests' size is the message for all-reduce and broadcast, the
	// whole (gathered or reduced) tensor for all-gather and reduce-scatter.
	var busFactor float64
	pf := float64(p)
	switch call.Kind {
	case cost.AllReduce:
		busFactor = 2 * (pf - 1) / pf
		call.Bytes = repeat(r.Bytes, p)
	case cost.AllGather, cost.ReduceScatter:
		busFactor = (pf - 1) / pf
		call.Bytes = repeat(r.Bytes/pf, p)
	case cost.Broadcast, cost.Reduce:
		busFactor = 1
		call.Bytes = repeat(r.Bytes, p)
	default:
		return 0, "", fmt.Errorf("collective %q is not priced", r.Collective)
	}
	t, err := m.CollectiveTime(call)
	if err != nil {
		return 0, "", err
	}
	switch r.Quantity {
	case "bus_bandwidth":
		return r.Bytes / t * busFactor / 1e9, "", unitIs(r, "GB/s")
	case "tensor_bandwidth":
		return r.Bytes / t / 1e9, "", unitIs(r, "GB/s")
	case "time":
		return t * 1e6, "", unitIs(r, "us")
	}
	return 0, "", fmt.Errorf("collective quantity %q is not priced", r.Quantity)
}

func repeat(x float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

// suiteSpeedup is the best hap-paper speedup over dp-ev in a suite's
// committed results (only the paper suite's are embedded).
func suiteSpeedup(r CalRow) (float64, string, error) {
	if r.Suite != SuitePaper {
		return 0, "", fmt.Errorf("speedup of suite %q: only the paper suite's results are embedded", r.Suite)
	}
	var rows []Row
	if err := json.Unmarshal(paperResultsJSON, &rows); err != nil {
		return 0, "", fmt.Errorf("bench/results/paper.json: %w", err)
	}
	best, where := 0.0, ""
	for _, x := range rows {
		if x.System == SystemPaper && x.SpeedupVsDPEV > best {
			best, where = x.SpeedupVsDPEV, x.Model+" on "+x.Cluster
		}
	}
	if best == 0 {
		return 0, "", errors.New("bench/results/paper.json has no hap-paper row with a speedup")
	}
	return best, "hap-paper's best in bench/results/paper.json: " + where, nil
}
