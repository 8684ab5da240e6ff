package main

import (
	"fmt"
	"math"
	"time"

	"hap/cpu"
	"hap/executor"
	"hap/ir"
	"hap/models"
)

type trainRow struct {
	Step    int     `json:"step"`
	Loss    float64 `json:"loss"`
	Seconds float64 `json:"seconds"`
}

func runTrain(e *env, args []string) error {
	fs := flags(e, "train")
	model := fs.String("model", "", "zoo model name (sizes after a colon: llama:layers=48,hidden=5120) or graph JSON file")
	steps := fs.Int("steps", 10, "training steps")
	batch := fs.Int("batch", 0, "global batch (default: the model's)")
	dtype := fs.String("dtype", "float32", "float32 or float64")
	optName := fs.String("optimizer", "adam", "adam or sgd")
	lr := fs.Float64("lr", 1e-3, "learning rate")
	seed := fs.Uint64("seed", 1, "seed for parameters and synthetic data")
	asJSON := fs.Bool("json", false, "print JSON rows")
	var mem maxMemory
	mem.register(fs)
	if err := parse(fs, args, "batch", "lr"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	maxMem, err := mem.bytes()
	if err != nil {
		return err
	}
	if *model == "" {
		return usageErr("missing --model (a zoo name from 'hap models' or a graph JSON file)")
	}
	if *steps < 1 {
		return usageErr("--steps must be ≥ 1")
	}
	dt, err := ir.ParseDType(*dtype)
	if err != nil || !dt.IsFloat() {
		return usageErr("--dtype must be float32 or float64")
	}
	var opt ir.Optimizer
	switch *optName {
	case "adam":
		opt = ir.Adam(*lr)
	case "sgd":
		opt = ir.SGD(*lr)
	default:
		return usageErr("--optimizer must be adam or sgd")
	}
	if err := checkModelOptions(*model, *batch, 0); err != nil {
		return err
	}
	fwd, err := models.Load(*model, models.Options{Batch: *batch, DType: dt})
	if err != nil {
		return err
	}
	step, err := ir.BuildTrainStep(fwd, opt)
	if err != nil {
		return err
	}
	if err := executor.CheckStepMemory(step, executor.Options{DType: dt, MaxMemory: maxMem}); err != nil {
		return err
	}
	var rows []trainRow
	if dt == ir.Float64 {
		rows, err = train[float64](step, *steps, *seed)
	} else {
		rows, err = train[float32](step, *steps, *seed)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e, rows)
	}
	fmt.Fprintf(e.stdout, "%s: %s params, %d ops per step, %s, %s lr=%g, synthetic batch\n", fwd.Name, humanCount(fwd.ParamCount()), len(step.Ops), dt, opt.Kind, opt.LR)
	for _, r := range rows {
		fmt.Fprintf(e.stdout, "step %3d  loss %-12.6g %6.1f ms\n", r.Step, r.Loss, r.Seconds*1e3)
	}
	return nil
}

// train runs steps on one fixed synthetic batch, so the loss falls as the
// model fits it.
func train[F cpu.Float](step *ir.Graph, steps int, seed uint64) ([]trainRow, error) {
	tr, err := cpu.NewTrainer[F](step, seed)
	if err != nil {
		return nil, err
	}
	batch := cpu.SyntheticBatch[F](step, seed+1)
	var rows []trainRow
	for i := 1; i <= steps; i++ {
		t0 := time.Now()
		res, err := tr.Step(nil, batch)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			return nil, fmt.Errorf("step %d: loss became %v", i, res.Loss)
		}
		rows = append(rows, trainRow{Step: i, Loss: res.Loss, Seconds: time.Since(t0).Seconds()})
	}
	return rows, nil
}
