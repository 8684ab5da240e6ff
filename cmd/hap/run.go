package main

import (
	"errors"
	"fmt"

	"hap/cuda"
	"hap/executor"
	"hap/ir"
	"hap/models"
	"hap/plan"
)

func runRun(e *env, args []string) error {
	fs := flags(e, "run", "PLAN --backend cpu|cuda [--steps K] [--dtype float32|float64] [--json]")
	backend := fs.String("backend", "cpu", "cpu (virtual devices in this process) or cuda")
	steps := fs.Int("steps", 3, "training steps")
	dtype := fs.String("dtype", "float32", "float32 or float64")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("want one plan file")
	}
	dt, err := ir.ParseDType(*dtype)
	if err != nil || !dt.IsFloat() {
		return usageErr("--dtype must be float32 or float64")
	}
	if *steps < 1 {
		return usageErr("--steps must be ≥ 1")
	}
	pl, err := plan.Read(fs.Arg(0))
	if err != nil {
		return err
	}
	in, p, err := pl.Resolve()
	if err != nil {
		return err
	}
	switch *backend {
	case "cpu":
	case "cuda":
		return cudaUnavailable()
	default:
		return usageErr("--backend must be cpu or cuda")
	}
	g, err := models.Load(in.ModelSpec, models.Options{Batch: in.ModelOpts.Batch, Experts: in.ModelOpts.Experts, DType: dt})
	if err != nil {
		return err
	}
	opt := ir.Adam(1e-3)
	if pl.Options.Optimizer == "sgd" {
		opt = ir.SGD(1e-3)
	}
	reps, err := executor.Run(g, p, executor.Options{DType: dt, Steps: *steps, Seed: 1, Optimizer: opt})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e, reps)
	}
	fmt.Fprintf(e.stdout, "%s on %d virtual CPU devices (%s), %s\n", pl.Model.Name, p.NumDevices(), pl.Cluster.Name, dt)
	for _, r := range reps {
		slowest := 0.0
		for _, s := range r.PerDevice {
			slowest = max(slowest, s)
		}
		fmt.Fprintf(e.stdout, "step %d  loss %-12.6g  %.1f ms (slowest device)\n", r.Step, r.Loss, slowest*1e3)
	}
	return nil
}

// cudaUnavailable reports what the CUDA backend can do on this machine.
func cudaUnavailable() error {
	rt, err := cuda.Open(cuda.Options{})
	if err != nil {
		if errors.Is(err, cuda.ErrNoDriver) {
			return err
		}
		return fmt.Errorf("cuda backend: %w", err)
	}
	n, err := rt.DeviceCount()
	if err != nil {
		return fmt.Errorf("cuda backend: %w", err)
	}
	return fmt.Errorf("found %d CUDA device(s), but executing plans on the CUDA backend is not wired into hap run yet (the kernels and NCCL bindings exist and are tested against a CPU stand-in; see docs/gpu-runtime.md)", n)
}

func runProfile(e *env, args []string) error {
	fs := flags(e, "profile", "--backend cuda -o FILE")
	backend := fs.String("backend", "cuda", "cuda")
	out := fs.StringP("output", "o", "", "profile file to write")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *backend != "cuda" {
		return usageErr("--backend must be cuda (the CPU backend is not a profiling target)")
	}
	if *out == "" {
		return usageErr("missing -o FILE")
	}
	return cudaUnavailable()
}
