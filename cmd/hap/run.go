package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"hap/cluster"
	"hap/cost"
	"hap/cuda"
	"hap/executor"
	"hap/internal/fileio"
	"hap/ir"
	"hap/models"
	"hap/nccl"
)

func runRun(e *env, args []string) error {
	fs := flags(e, "run")
	backend := fs.String("backend", "cpu", "cpu (virtual devices in this process) or cuda (one local GPU per plan device; one process per GPU under torchrun-style or SLURM launcher variables)")
	nproc := fs.Int("nproc", 0, "cuda: start N processes on this machine, one per plan device and GPU (like torchrun --nproc_per_node)")
	steps := fs.Int("steps", 3, "training steps, each on hap train's synthetic batch (the losses match hap train's)")
	dtype := fs.String("dtype", "float32", "float32 or float64")
	block := fs.Int("block", 0, "cuda: threads per block of hap's kernels, a power of two in [32, 1024] (default 256)")
	tf32 := fs.Bool("tf32", false, "cuda: let float32 GEMMs use TF32 tensor cores (faster, ~10-bit mantissa)")
	oneStream := fs.Bool("one-stream", false, "cuda: run each GPU's collectives on its compute stream instead of overlapping them with computation on a stream of their own")
	asJSON := fs.Bool("json", false, "print JSON")
	var inputs inputFlags
	inputs.register(fs)
	var mem maxMemory
	mem.register(fs)
	if err := parse(fs, args, "nproc", "block"); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want one plan file")
	}
	if *oneStream && *backend != "cuda" {
		return usageErr("--one-stream needs --backend cuda (the CPU backend runs each device's ops one after another)")
	}
	if (*tf32 || *block != 0) && *backend != "cuda" {
		return usageErr("--tf32 and --block tune the cuda backend's kernels: they need --backend cuda")
	}
	dt, err := ir.ParseDType(*dtype)
	if err != nil || !dt.IsFloat() {
		return usageErr("--dtype must be float32 or float64")
	}
	if *steps < 1 {
		return usageErr("--steps must be ≥ 1")
	}
	if *block != 0 && (*block < 32 || *block > 1024 || *block&(*block-1) != 0) {
		return usageErr("--block must be a power of two in [32, 1024]")
	}
	if *backend != "cpu" && *backend != "cuda" {
		return usageErr("--backend must be cpu or cuda")
	}
	if *nproc != 0 && *backend != "cuda" {
		return usageErr("--nproc needs --backend cuda")
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
	if *nproc != 0 {
		if *backend != "cuda" {
			return usageErr("--nproc needs --backend cuda")
		}
		return runLocal(e, args, *nproc, p.NumDevices())
	}
	opt := ir.Adam(1e-3)
	if pl.Options.Optimizer == "sgd" {
		opt = ir.SGD(1e-3)
	}
	// One synthetic batch, hap train's with its default seed: the loss
	// falls, and the losses match hap train --model M --lr 0.001's.
	maxMem, err := mem.bytes()
	if err != nil {
		return err
	}
	run := executor.Options{DType: dt, Steps: *steps, Seed: 1, Optimizer: opt, OneBatch: true, MaxMemory: maxMem}
	var job *launchedJob
	switch *backend {
	case "cpu":
	case "cuda":
		// The launcher variables are checked against the plan before
		// anything is loaded.
		if job, err = jobFromEnv(e.env(), p.NumDevices()); err != nil {
			return err
		}
		rt, err := openCUDA(e)
		if err != nil {
			return err
		}
		co := executor.CUDAOptions{
			Runtime:   rt,
			NCCL:      nccl.New(nccl.Options{Getenv: e.getenv}),
			Plan:      cuda.PlanOptions{Block: *block, TF32: *tf32},
			OneStream: *oneStream,
		}
		if job != nil {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			err := job.join(ctx, rt, co.NCCL, &co)
			stop()
			if err != nil {
				return err
			}
		}
		run.Backend = executor.NewCUDA(co)
	default:
		return usageErr("--backend must be cpu or cuda")
	}
	g, err := models.Load(in.ModelSpec, models.Options{Batch: in.ModelOpts.Batch, Experts: in.ModelOpts.Experts, DType: dt})
	if err != nil {
		return err
	}
	tr, err := executor.Train(g, p, run)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e, tr.Steps)
	}
	if *backend == "cpu" {
		fmt.Fprintf(e.stdout, "%s on %d virtual CPU devices (%s), %s, hap train's synthetic batch\n", pl.Model.Name, p.NumDevices(), pl.Cluster.Name, dt)
		orderNote(e, len(p.CommSwaps))
		for _, r := range tr.Steps {
			fmt.Fprintf(e.stdout, "step %d  loss %-12.6g  %.1f ms (slowest device)\n", r.Step, r.Loss, slowest(r)*1e3)
		}
		return nil
	}
	if job != nil {
		job.report(e, tr, fmt.Sprintf("%s on %d GPUs, one process each, for cluster %s, %s", pl.Model.Name, p.NumDevices(), pl.Cluster.Name, dt))
		return nil
	}
	fmt.Fprintf(e.stdout, "%s on %d GPUs for cluster %s, %s\n", pl.Model.Name, p.NumDevices(), pl.Cluster.Name, dt)
	orderNote(e, len(p.CommSwaps))
	for r, d := range tr.Devices {
		fmt.Fprintf(e.stdout, "  device %d: %s\n", r, d)
	}
	for _, r := range tr.Steps {
		per := make([]string, len(r.PerDevice))
		for i, s := range r.PerDevice {
			per[i] = fmt.Sprintf("%.1f", s*1e3)
		}
		fmt.Fprintf(e.stdout, "step %d  loss %-12.6g  %.1f ms (slowest device)  per device: %s ms\n", r.Step, r.Loss, slowest(r)*1e3, strings.Join(per, " "))
	}
	return nil
}

func slowest(r executor.StepReport) float64 {
	s := 0.0
	for _, x := range r.PerDevice {
		s = max(s, x)
	}
	return s
}

// openCUDA loads the CUDA driver the way every cuda command does; without
// one the error is cuda.ErrNoDriver's message, which lists where it
// looked.
func openCUDA(e *env) (*cuda.Runtime, error) {
	rt, err := cuda.Open(cuda.Options{Getenv: e.getenv})
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			return nil, err
		}
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	return rt, nil
}

func runProfile(e *env, args []string) error {
	fs := flags(e, "profile")
	backend := fs.String("backend", "cuda", "cuda")
	out := fs.StringP("output", "o", "", "profile file to write")
	model := fs.String("model", "bert-base", "zoo model or graph file whose training-step ops are timed")
	batch := fs.Int("batch", 0, "global batch of the model (default: the model's)")
	devType := fs.String("device-type", "", "catalog type of the GPUs (default: recognised from the driver's name)")
	link := fs.String("link", "", "link class the all-reduce measures: nvlink or pcie (default: nvlink for SXM boards, else pcie)")
	repeat := fs.Int("repeat", 5, "timed launches averaged per measurement")
	block := fs.Int("block", 0, "threads per block of hap's kernels, a power of two in [32, 1024] (default 256)")
	asJSON := fs.Bool("json", false, "print the measurements as JSON")
	if err := parse(fs, args, "batch", "block"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *backend != "cuda" {
		return usageErr("--backend must be cuda (the CPU backend is not a profiling target)")
	}
	if *out == "" {
		return usageErr("missing -o FILE")
	}
	if *repeat < 1 {
		return usageErr("--repeat must be ≥ 1")
	}
	if err := fileio.CheckOutput("-o", *out, fileio.Input{Flag: "--model", Path: *model}); err != nil {
		return usageErr("%v", err)
	}
	if *link != "" && *link != "nvlink" && *link != "pcie" {
		return usageErr("--link must be nvlink or pcie")
	}
	if *block != 0 && (*block < 32 || *block > 1024 || *block&(*block-1) != 0) {
		return usageErr("--block must be a power of two in [32, 1024]")
	}
	if *devType != "" {
		if _, ok := cluster.LookupDevice(*devType); !ok {
			return usageErr("--device-type %q: not in the catalog (hap devices lists it)", *devType)
		}
	}
	if err := checkModelOptions(*model, *batch, 0); err != nil {
		return err
	}
	rt, err := openCUDA(e)
	if err != nil {
		return err
	}
	g, err := models.Load(*model, models.Options{Batch: *batch, DType: ir.Float32})
	if err != nil {
		return err
	}
	res, err := executor.ProfileCUDA(executor.ProfileOptions{
		Runtime: rt, NCCL: nccl.New(nccl.Options{Getenv: e.getenv}), Model: g, Optimizer: ir.Adam(1e-3),
		DeviceType: *devType, Link: *link, Repeat: *repeat, Plan: cuda.PlanOptions{Block: *block},
	})
	if err != nil {
		return err
	}
	comment := fmt.Sprintf("hap profile: %d × %s (catalog %s), float32\nops of %s's training step (%d ops timed, %d launches each)",
		res.GPUs, res.GPU, res.DeviceType, res.Model, countOps(res), *repeat)
	if res.NoCollective != "" {
		comment += "\nno link measured: " + res.NoCollective
	}
	if err := fileio.WriteFile(*out, cost.FormatProfile(res.Profile, comment)); err != nil {
		return err
	}
	// What the cost model will read back.
	if _, err := cost.LoadProfile(*out); err != nil {
		return fmt.Errorf("the profile written does not parse: %w", err)
	}
	if *asJSON {
		return writeJSON(e, res)
	}
	spec, _ := cluster.LookupDevice(res.DeviceType)
	fmt.Fprintf(e.stdout, "%d × %s (catalog %s); ops of %s's training step\n", res.GPUs, res.GPU, res.DeviceType, res.Model)
	fmt.Fprintf(e.stdout, "%-14s %5s %12s %10s %14s %8s\n", "class", "ops", "GFLOP", "ms", "achieved", "of peak")
	for _, c := range res.Classes {
		rate, frac := "-", "-"
		if c.Rate > 0 {
			rate = fmt.Sprintf("%.3g TFLOP/s", c.Rate/1e12)
			if spec.FP32 > 0 {
				frac = fmt.Sprintf("%.1f%%", 100*c.Rate/spec.FP32)
			}
		}
		fmt.Fprintf(e.stdout, "%-14s %5d %12.4g %10.3f %14s %8s\n", c.Class, c.Ops, c.FLOPs/1e9, c.Seconds*1e3, rate, frac)
	}
	fmt.Fprintf(e.stdout, "memory bandwidth %.4g GB/s (datasheet %.4g GB/s)\n", res.MemBandwidth/1e9, spec.MemBandwidth/1e9)
	if a := res.AllReduce; a != nil {
		fmt.Fprintf(e.stdout, "all-reduce over %d GPUs (%s): %.4g GB/s link bandwidth, %.3g us latency (%d MiB in %.3f ms; 8 B in %.3f ms)\n",
			a.Ranks, a.Link, a.Bandwidth/1e9, a.Latency*1e6, a.Bytes>>20, a.Seconds*1e3, a.SmallSeconds*1e3)
	} else {
		fmt.Fprintf(e.stdout, "no collective measured: %s\n", res.NoCollective)
	}
	fmt.Fprintf(e.stdout, "wrote %s\n", *out)
	return nil
}

func countOps(r *executor.ProfileResult) int {
	n := 0
	for _, c := range r.Classes {
		n += c.Ops
	}
	return n
}
