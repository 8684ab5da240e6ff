package executor

import (
	"fmt"

	"hap/cpu"
	"hap/encode"
	"hap/ir"
)

// StepReport is one distributed training step on the CPU backend.
type StepReport struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
	// PerDevice is each virtual device's wall seconds for the step
	// (including time blocked in collectives).
	PerDevice []float64 `json:"per_device_seconds"`
}

// Run trains fwd for opt.Steps steps under p on N virtual CPU devices,
// from the shared initial parameters, on synthetic batches.
func Run(fwd *ir.Graph, p *encode.Program, opt Options) ([]StepReport, error) {
	if opt.DType == ir.Float64 {
		return run[float64](fwd, p, opt)
	}
	return run[float32](fwd, p, opt)
}

func run[F cpu.Float](fwd *ir.Graph, p *encode.Program, opt Options) ([]StepReport, error) {
	if err := encode.Check(fwd, p); err != nil {
		return nil, err
	}
	init := map[ir.TensorID]*cpu.Tensor[F]{}
	for i := range fwd.Tensors {
		if t := &fwd.Tensors[i]; t.Kind == ir.Param {
			init[t.ID] = cpu.InitParam[F](t, opt.Seed)
		}
	}
	devs, err := devices(fwd, p, opt, func(t ir.TensorID) *cpu.Tensor[F] { return init[t] })
	if err != nil {
		return nil, err
	}
	var out []StepReport
	for k := 0; k < opt.Steps; k++ {
		batch := cpu.SyntheticBatch[F](fwd, opt.Seed+1000+uint64(k))
		res, secs, err := stepAllTimed(fwd, p, devs, batch)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", k+1, err)
		}
		rep := StepReport{Step: k + 1, PerDevice: secs}
		for _, r := range res {
			rep.Loss += r.Loss
		}
		out = append(out, rep)
	}
	return out, nil
}
