package executor

import (
	"fmt"

	"hap/cpu"
	"hap/ir"
	"hap/spmd"
)

// StepReport is one distributed training step.
type StepReport struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
	// PerDevice is each device's wall seconds for the step (including time
	// blocked in collectives), by rank; with one process per GPU only the
	// ranks in Ranks are measured here, the others read 0.
	PerDevice []float64 `json:"per_device_seconds"`
	// Ranks lists the ranks this process drove, when not all of them.
	Ranks []int `json:"ranks,omitempty"`
}

// Training is the outcome of Train.
type Training struct {
	Backend string `json:"backend"`
	// Devices names each rank's device.
	Devices []string     `json:"devices"`
	Steps   []StepReport `json:"steps"`
	// Params are the trained parameters, each assembled from the devices'
	// pieces to its original shape, by name (float64 values). Empty when
	// other processes drive some ranks (their pieces are not here).
	Params map[string][]float64 `json:"-"`
	// Ranks lists the ranks this process drove, when not all of them (one
	// process per GPU).
	Ranks []int `json:"ranks,omitempty"`
}

// Run trains fwd for opt.Steps steps under p on opt's backend (the CPU
// backend's virtual devices by default), from the shared initial
// parameters, on synthetic batches, and reports each step.
func Run(fwd *ir.Graph, p *spmd.Program, opt Options) ([]StepReport, error) {
	t, err := Train(fwd, p, opt)
	if err != nil {
		return nil, err
	}
	return t.Steps, nil
}

// Train is Run that also returns the device names and the trained
// parameters.
func Train(fwd *ir.Graph, p *spmd.Program, opt Options) (*Training, error) {
	if opt.DType == ir.Float64 {
		return train[float64](fwd, p, opt)
	}
	return train[float32](fwd, p, opt)
}

func train[F cpu.Float](fwd *ir.Graph, p *spmd.Program, opt Options) (*Training, error) {
	if err := spmd.Check(fwd, p); err != nil {
		return nil, err
	}
	// The full parameters are held while the devices take their shares.
	opt.reservedFor = "the whole parameters"
	for i := range fwd.Tensors {
		if t := &fwd.Tensors[i]; t.Kind == ir.Param {
			opt.reserved = satAdd(opt.reserved, int64(t.Shape.Numel())*int64(opt.DType.Size()))
		}
	}
	init := map[ir.TensorID]*cpu.Tensor[F]{}
	for i := range fwd.Tensors {
		if t := &fwd.Tensors[i]; t.Kind == ir.Param {
			init[t.ID] = cpu.InitParam[F](t, opt.Seed)
		}
	}
	ranks, devs, err := start(fwd, p, opt, func(t ir.TensorID) *cpu.Tensor[F] { return init[t] })
	if err != nil {
		return nil, err
	}
	defer devs.Close()
	out := &Training{Backend: opt.backend().Name(), Devices: devs.Describe(), Params: map[string][]float64{}}
	local := devs.Local()
	partial := len(local) < len(ranks)
	if partial {
		out.Ranks = local
	}
	for k := 0; k < opt.Steps; k++ {
		batch := cpu.SyntheticBatch[F](fwd, opt.batchSeed(k))
		res, err := devs.Step(feeds(fwd, p, ranks, batch), false)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", k+1, err)
		}
		rep := StepReport{Step: k + 1, PerDevice: make([]float64, len(res))}
		if partial {
			rep.Ranks = local
		}
		for _, r := range local {
			x := res[r]
			switch {
			case x.LossTotal:
				rep.Loss = x.Loss // every local rank holds the same total
			case partial:
				return nil, fmt.Errorf("step %d: the %s backend drives ranks %v of %d here but did not reduce the loss over the others", k+1, opt.backend().Name(), local, len(ranks))
			default:
				rep.Loss += x.Loss
			}
			rep.PerDevice[r] = x.Seconds
		}
		out.Steps = append(out.Steps, rep)
	}
	if partial {
		return out, nil
	}
	for i := range fwd.Tensors {
		t := &fwd.Tensors[i]
		if t.Kind != ir.Param {
			continue
		}
		pieces := make([]*cpu.Tensor[F], len(ranks))
		for r, rk := range ranks {
			// The training step extends the local graph, so the local
			// leaf's ID is its ID in the step too.
			lt := rk.local.Leaf[t.ID]
			if lt == ir.NoTensor {
				return nil, fmt.Errorf("device %d holds no piece of parameter %q", r, t.Name)
			}
			if pieces[r], err = devs.Value(r, lt); err != nil {
				return nil, err
			}
		}
		v, err := assemble(t.Name, p, ranks[0].local.Placement[t.ID], t.Shape, pieces)
		if err != nil {
			return nil, err
		}
		out.Params[t.Name] = v.Float64s()
	}
	return out, nil
}
