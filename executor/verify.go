package executor

import (
	"fmt"
	"math"
	"sync"
	"time"

	"hap/cpu"
	"hap/encode"
	"hap/ir"
	"hap/lower"
)

// Options configure a verification run.
type Options struct {
	DType     ir.DType // Float32 or Float64
	Steps     int
	Seed      uint64
	Optimizer ir.Optimizer
}

// Diff is the worst disagreement over a family of values (the loss, the
// gradients, the updated parameters).
type Diff struct {
	MaxAbs float64 `json:"max_abs"`
	// MaxRel is the largest max|distributed − single| / max|single| over a
	// tensor (normwise, so tiny entries do not inflate it). A tensor whose
	// true values are all near zero — the key bias's gradient is exactly
	// zero, since softmax ignores a constant shift — is measured against
	// familyFloor times the family's largest magnitude instead.
	MaxRel float64 `json:"max_rel"`
	Worst  string  `json:"worst,omitempty"` // the tensor with MaxRel

	entries []diffEntry
}

type diffEntry struct {
	name         string
	worst, scale float64
}

// familyFloor: tensors smaller than this fraction of their family's largest
// magnitude are compared on the family's scale.
const familyFloor = 1e-3

func (d *Diff) add(name string, got, want []float64) {
	var scale, worst float64
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		worst = math.Max(worst, math.Abs(got[i]-want[i]))
	}
	d.entries = append(d.entries, diffEntry{name, worst, scale})
}

// finish computes MaxAbs, MaxRel and Worst from the entries.
func (d *Diff) finish() {
	var family float64
	for _, e := range d.entries {
		family = math.Max(family, e.scale)
	}
	for _, e := range d.entries {
		d.MaxAbs = math.Max(d.MaxAbs, e.worst)
		rel := 0.0
		if e.worst > 0 {
			rel = e.worst / math.Max(e.scale, math.Max(familyFloor*family, math.SmallestNonzeroFloat64))
		}
		if rel > d.MaxRel || d.Worst == "" {
			d.MaxRel, d.Worst = math.Max(rel, d.MaxRel), e.name
		}
	}
	d.entries = nil
}

// Report compares K distributed steps with K single-device steps.
type Report struct {
	Devices int       `json:"devices"`
	Steps   int       `json:"steps"`
	DType   string    `json:"dtype"`
	Loss    Diff      `json:"loss"`
	Grads   Diff      `json:"grads"`
	Params  Diff      `json:"params"`
	Losses  []float64 `json:"losses"` // single-device loss per step
}

// Max is the largest relative error of the three families.
func (r *Report) Max() float64 {
	return math.Max(r.Loss.MaxRel, math.Max(r.Grads.MaxRel, r.Params.MaxRel))
}

// Verify trains fwd for opt.Steps steps single-device and distributed under
// p on the CPU backend, from the same initial parameters and the same
// synthetic batches, and reports how far the distributed loss, gradients
// and updated parameters are from the single-device ones.
func Verify(fwd *ir.Graph, p *encode.Program, opt Options) (*Report, error) {
	if opt.Steps < 1 {
		return nil, fmt.Errorf("verify needs at least one step")
	}
	if opt.DType == ir.Float64 {
		return verify[float64](fwd, p, opt)
	}
	return verify[float32](fwd, p, opt)
}

// device is one rank's lowered training step and trainer.
type device[F cpu.Float] struct {
	local *lower.Local
	step  *ir.Graph
	tr    *cpu.Trainer[F]
	// param maps the original parameter to this device's param slot.
	param map[ir.TensorID]ir.ParamSlot
}

// shard cuts an original tensor's value down to device d's piece.
func shard[F cpu.Float](v *cpu.Tensor[F], p *encode.Program, pl encode.Placement, shape ir.Shape, d int) *cpu.Tensor[F] {
	off, local := p.Piece(pl, shape, d)
	out := v
	for dim := range shape {
		if local[dim] != shape[dim] {
			out = cpu.Slice(out, dim, off[dim], local[dim])
		}
	}
	if out == v {
		return v.Clone()
	}
	return out
}

// Devices lowers p for every device and derives each training step.
func devices[F cpu.Float](fwd *ir.Graph, p *encode.Program, opt Options, init func(ir.TensorID) *cpu.Tensor[F]) ([]*device[F], error) {
	devs := make([]*device[F], p.NumDevices())
	for r := range devs {
		loc, err := lower.BuildLocal(fwd, p, r)
		if err != nil {
			return nil, err
		}
		step, err := ir.BuildTrainStep(loc.Graph, opt.Optimizer)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", r, err)
		}
		tr, err := cpu.NewTrainer[F](step, opt.Seed)
		if err != nil {
			return nil, err
		}
		d := &device[F]{local: loc, step: step, tr: tr, param: map[ir.TensorID]ir.ParamSlot{}}
		byLocal := map[ir.TensorID]ir.ParamSlot{}
		for _, ps := range step.Train.Params {
			byLocal[ps.Param] = ps
		}
		for t, lt := range loc.Leaf {
			if lt == ir.NoTensor || fwd.Tensors[t].Kind != ir.Param {
				continue
			}
			ps := byLocal[lt]
			d.param[ir.TensorID(t)] = ps
			tr.SetValue(ps.Param, shard(init(ir.TensorID(t)), p, loc.Placement[t], fwd.Tensors[t].Shape, r))
		}
		devs[r] = d
	}
	return devs, nil
}

// stepAll runs one step on every device concurrently; the first failure
// aborts the group so no device waits forever.
func stepAll[F cpu.Float](fwd *ir.Graph, p *encode.Program, devs []*device[F], batch map[ir.TensorID]*cpu.Tensor[F]) ([]*cpu.StepResult[F], error) {
	res, _, err := stepAllTimed(fwd, p, devs, batch)
	return res, err
}

// stepAllTimed is stepAll that also reports each device's wall time.
func stepAllTimed[F cpu.Float](fwd *ir.Graph, p *encode.Program, devs []*device[F], batch map[ir.TensorID]*cpu.Tensor[F]) ([]*cpu.StepResult[F], []float64, error) {
	group := cpu.NewGroup(len(devs))
	res := make([]*cpu.StepResult[F], len(devs))
	errs := make([]error, len(devs))
	secs := make([]float64, len(devs))
	var wg sync.WaitGroup
	for r, d := range devs {
		local := map[ir.TensorID]*cpu.Tensor[F]{}
		for t, v := range batch {
			local[d.local.Leaf[t]] = shard(v, p, d.local.Placement[t], fwd.Tensors[t].Shape, r)
		}
		wg.Add(1)
		go func(r int, d *device[F]) {
			defer wg.Done()
			t0 := time.Now()
			res[r], errs[r] = d.tr.Step(&cpu.Ctx{Comm: group.Comm(r)}, local)
			secs[r] = time.Since(t0).Seconds()
			if errs[r] != nil {
				group.Abort(fmt.Errorf("device %d: %w", r, errs[r]))
			}
		}(r, d)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("device %d: %w", r, err)
		}
	}
	return res, secs, nil
}

// assemble rebuilds an original parameter-shaped value from every device's
// piece, each written where p places it; where pieces overlap (a
// replicated parameter, or a shard every replica holds) they must agree
// exactly, and together they must cover the whole.
func assemble[F cpu.Float](name string, p *encode.Program, pl encode.Placement, shape ir.Shape, pieces []*cpu.Tensor[F]) (*cpu.Tensor[F], error) {
	whole := cpu.NewTensor[F](shape, ir.Float32)
	owner := make([]int, shape.Numel())
	for i := range owner {
		owner[i] = -1
	}
	strides := make([]int, len(shape))
	for d, st := len(shape)-1, 1; d >= 0; d-- {
		strides[d], st = st, st*shape[d]
	}
	idx := make([]int, len(shape))
	for d, piece := range pieces {
		off, local := p.Piece(pl, shape, d)
		if !piece.Shape.Equal(local) {
			return nil, fmt.Errorf("%q on device %d is %v, its piece is %v", name, d, piece.Shape, local)
		}
		for i, v := range piece.Data {
			// i's index in the piece, then in the whole.
			flat, rest := 0, i
			for dim := len(local) - 1; dim >= 0; dim-- {
				idx[dim] = rest % local[dim]
				rest /= local[dim]
				flat += (idx[dim] + off[dim]) * strides[dim]
			}
			if o := owner[flat]; o >= 0 {
				if whole.Data[flat] != v {
					return nil, fmt.Errorf("replicated %q differs between device %d and device %d at element %d: %v vs %v", name, o, d, flat, whole.Data[flat], v)
				}
				continue
			}
			owner[flat], whole.Data[flat] = d, v
		}
	}
	for i, o := range owner {
		if o < 0 {
			return nil, fmt.Errorf("no device holds element %d of %q", i, name)
		}
	}
	return whole, nil
}

func verify[F cpu.Float](fwd *ir.Graph, p *encode.Program, opt Options) (*Report, error) {
	if err := encode.Check(fwd, p); err != nil {
		return nil, err
	}
	single, err := ir.BuildTrainStep(fwd, opt.Optimizer)
	if err != nil {
		return nil, err
	}
	ref, err := cpu.NewTrainer[F](single, opt.Seed)
	if err != nil {
		return nil, err
	}
	devs, err := devices(fwd, p, opt, func(t ir.TensorID) *cpu.Tensor[F] { return ref.Value(t) })
	if err != nil {
		return nil, err
	}
	rep := &Report{Devices: p.NumDevices(), Steps: opt.Steps, DType: opt.DType.String()}
	for k := 0; k < opt.Steps; k++ {
		batch := cpu.SyntheticBatch[F](fwd, opt.Seed+1000+uint64(k))
		want, err := ref.Step(nil, batch)
		if err != nil {
			return nil, fmt.Errorf("single-device step %d: %w", k+1, err)
		}
		got, err := stepAll(fwd, p, devs, batch)
		if err != nil {
			return nil, fmt.Errorf("distributed step %d: %w", k+1, err)
		}
		var loss float64
		for _, g := range got {
			loss += g.Loss
		}
		rep.Losses = append(rep.Losses, want.Loss)
		rep.Loss.add("loss", []float64{loss}, []float64{want.Loss})
		for _, ps := range single.Train.Params {
			t := ps.Param
			name := fwd.Tensors[t].Name
			grads := make([]*cpu.Tensor[F], len(devs))
			vals := make([]*cpu.Tensor[F], len(devs))
			for r, d := range devs {
				slot := d.param[t]
				grads[r] = got[r].Grads[slot.Param]
				vals[r] = d.tr.Value(slot.Param)
			}
			pl, shape := devs[0].local.Placement[t], fwd.Tensors[t].Shape
			g, err := assemble(name+" gradient", p, pl, shape, grads)
			if err != nil {
				return nil, err
			}
			v, err := assemble(name, p, pl, shape, vals)
			if err != nil {
				return nil, err
			}
			rep.Grads.add(name, g.Float64s(), want.Grads[t].Float64s())
			rep.Params.add(name, v.Float64s(), ref.Value(t).Float64s())
		}
	}
	rep.Loss.finish()
	rep.Grads.finish()
	rep.Params.finish()
	return rep, nil
}
