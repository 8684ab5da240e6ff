package executor

import (
	"fmt"
	"math"

	"hap/cpu"
	"hap/ir"
	"hap/lower"
	"hap/spmd"
)

// Options configure a run or a verification.
type Options struct {
	DType     ir.DType // Float32 or Float64
	Steps     int
	Seed      uint64
	Optimizer ir.Optimizer
	// Backend runs the distributed devices; nil is the CPU backend. The
	// single-device reference of Verify always runs on the CPU.
	Backend Backend
	// OneBatch makes Train feed every step the same synthetic batch, the
	// one hap train fits (seeded Seed+1), so that the loss falls as it
	// does there and a run's losses can be read against hap train's.
	// Otherwise, and always in Verify, step k gets a batch of its own
	// (seeded Seed+1000+k): labels drawn afresh each step, which no model
	// learns, and which exercise more data per verification.
	OneBatch bool
	// MaxMemory bounds the bytes a run on the CPU backend may hold: 0 is
	// what this machine has available, negative no bound. A run that
	// needs more (its steps' tensors at their peak, cpu.PeakBytes) is
	// refused before it allocates, with the figure (ErrMemory).
	MaxMemory int64
	// reserved is memory already held for the run (Verify's
	// single-device reference, Train's whole parameters), counted
	// against MaxMemory with the devices'; reservedFor says what it is.
	reserved    int64
	reservedFor string
}

// batchSeed is the seed of step k's synthetic batch (k from 0).
func (o Options) batchSeed(k int) uint64 {
	if o.OneBatch {
		return o.Seed + 1
	}
	return o.Seed + 1000 + uint64(k)
}

func (o Options) backend() Backend {
	if o.Backend == nil {
		return CPU{}
	}
	return o.Backend
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
		if math.IsNaN(e.worst) {
			// math.Max passes a NaN on, and NaN > 0 is false: without
			// this a NaN anywhere would read as no error at all.
			rel = math.Inf(1)
		} else if e.worst > 0 {
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
	Backend string    `json:"backend"`
	Devices int       `json:"devices"`
	Steps   int       `json:"steps"`
	DType   string    `json:"dtype"`
	Loss    Diff      `json:"loss"`
	Grads   Diff      `json:"grads"`
	Params  Diff      `json:"params"`
	Losses  []float64 `json:"losses"` // single-device loss per step
	// CommSwaps is the number of collective pairs the distributed devices
	// issued against their list order, following the plan's searched
	// comm_order (0: list order).
	CommSwaps int `json:"comm_swaps,omitempty"`
}

// Max is the largest relative error of the three families.
func (r *Report) Max() float64 {
	return math.Max(r.Loss.MaxRel, math.Max(r.Grads.MaxRel, r.Params.MaxRel))
}

// Verify trains fwd for opt.Steps steps single-device on the CPU and
// distributed under p on opt's backend, from the same initial parameters and the same
// synthetic batches, and reports how far the distributed loss, gradients
// and updated parameters are from the single-device ones.
func Verify(fwd *ir.Graph, p *spmd.Program, opt Options) (*Report, error) {
	if opt.Steps < 1 {
		return nil, fmt.Errorf("verify needs at least one step")
	}
	if opt.DType == ir.Float64 {
		return verify[float64](fwd, p, opt)
	}
	return verify[float32](fwd, p, opt)
}

// rank is one device's lowered program and training step.
type rank struct {
	local *lower.Local
	step  *ir.Graph
	// param maps the original parameter to this device's param slot.
	param map[ir.TensorID]ir.ParamSlot
}

// shard cuts an original tensor's value down to device d's piece.
func shard[F cpu.Float](v *cpu.Tensor[F], p *spmd.Program, pl spmd.Placement, shape ir.Shape, d int) *cpu.Tensor[F] {
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

// lowerAll lowers p for every device and derives each training step.
func lowerAll(fwd *ir.Graph, p *spmd.Program, opt Options) ([]*rank, error) {
	ranks := make([]*rank, p.NumDevices())
	for r := range ranks {
		loc, err := lower.BuildLocal(fwd, p, r)
		if err != nil {
			return nil, err
		}
		step, err := lower.TrainStep(loc, p, opt.Optimizer)
		if err != nil {
			return nil, err
		}
		rk := &rank{local: loc, step: step, param: map[ir.TensorID]ir.ParamSlot{}}
		byLocal := map[ir.TensorID]ir.ParamSlot{}
		for _, ps := range step.Train.Params {
			byLocal[ps.Param] = ps
		}
		for t, lt := range loc.Leaf {
			if ps, ok := byLocal[lt]; ok && lt != ir.NoTensor && fwd.Tensors[t].Kind == ir.Param {
				rk.param[ir.TensorID(t)] = ps
			}
		}
		ranks[r] = rk
	}
	if err := followOrder(ranks, p); err != nil {
		return nil, err
	}
	return ranks, nil
}

// followOrder reorders every device's training step so that a backend,
// which runs a step's ops in slice order, issues the collectives in the
// order p records (its searched comm_order) rather than the list order:
// the step is scheduled into the lowered program the order was searched
// on (one instruction per op, at the op's index), the order is applied
// there, and each device's single-queue issue order (lower's IssueOrders)
// becomes its op order. ApplyPlanOrder refuses an order that would
// deadlock, which a backend would otherwise hang on.
func followOrder(ranks []*rank, p *spmd.Program) error {
	if len(p.CommSwaps) == 0 {
		return nil
	}
	steps := make([]*ir.Graph, len(ranks))
	for r, rk := range ranks {
		steps[r] = rk.step
	}
	prog, err := lower.Schedule(steps)
	if err != nil {
		return err
	}
	orders, err := lower.ApplyPlanOrder(prog, p)
	if err != nil {
		return err
	}
	for r, rk := range ranks {
		ops := make([]ir.OpID, len(orders[r]))
		for k, i := range orders[r] {
			ops[k] = ir.OpID(i)
		}
		if rk.step, err = rk.step.Reordered(ops); err != nil {
			return fmt.Errorf("device %d: plan comm_order: %w", r, err)
		}
	}
	return nil
}

// start lowers p, starts opt's backend with one device per rank and sets
// every device's initial state: each parameter is its share of
// init(original parameter); optimizer state starts as cpu.InitParam makes
// it (zeros).
func start[F cpu.Float](fwd *ir.Graph, p *spmd.Program, opt Options, init func(ir.TensorID) *cpu.Tensor[F]) ([]*rank, Devices[F], error) {
	ranks, err := lowerAll(fwd, p, opt)
	if err != nil {
		return nil, nil, err
	}
	steps := make([]*ir.Graph, len(ranks))
	for r, rk := range ranks {
		steps[r] = rk.step
	}
	if _, onCPU := opt.backend().(CPU); onCPU {
		need := satAdd(stepsPeak(steps, opt.DType), opt.reserved)
		what := fmt.Sprintf("the distributed step on %d devices", len(steps))
		if opt.reserved > 0 {
			what += " beside " + opt.reservedFor
		}
		if err := opt.checkMemory(need, what); err != nil {
			return nil, nil, err
		}
	}
	devs, err := open[F](opt.backend(), steps)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range devs.Local() {
		rk := ranks[r]
		fromOrig := map[ir.TensorID]ir.TensorID{}
		for t, ps := range rk.param {
			fromOrig[ps.Param] = t
		}
		for i := range rk.step.Tensors {
			t := &rk.step.Tensors[i]
			if t.Kind != ir.Param && t.Kind != ir.State {
				continue
			}
			v := cpu.InitParam[F](t, opt.Seed)
			if orig, ok := fromOrig[t.ID]; ok {
				v = shard(init(orig), p, rk.local.Placement[orig], fwd.Tensors[orig].Shape, r)
			}
			if err := devs.SetValue(r, t.ID, v); err != nil {
				devs.Close()
				return nil, nil, err
			}
		}
	}
	return ranks, devs, nil
}

// feeds cuts one batch of the original inputs and labels into every
// device's shards.
func feeds[F cpu.Float](fwd *ir.Graph, p *spmd.Program, ranks []*rank, batch map[ir.TensorID]*cpu.Tensor[F]) []map[ir.TensorID]*cpu.Tensor[F] {
	out := make([]map[ir.TensorID]*cpu.Tensor[F], len(ranks))
	for r, rk := range ranks {
		out[r] = map[ir.TensorID]*cpu.Tensor[F]{}
		for t, v := range batch {
			out[r][rk.local.Leaf[t]] = shard(v, p, rk.local.Placement[t], fwd.Tensors[t].Shape, r)
		}
	}
	return out
}

// assemble rebuilds an original parameter-shaped value from every device's
// piece, each written where p places it; where pieces overlap (a
// replicated parameter, or a shard every replica holds) they must agree
// exactly, and together they must cover the whole.
func assemble[F cpu.Float](name string, p *spmd.Program, pl spmd.Placement, shape ir.Shape, pieces []*cpu.Tensor[F]) (*cpu.Tensor[F], error) {
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

func verify[F cpu.Float](fwd *ir.Graph, p *spmd.Program, opt Options) (*Report, error) {
	if err := spmd.Check(fwd, p); err != nil {
		return nil, err
	}
	single, err := ir.BuildTrainStep(fwd, opt.Optimizer)
	if err != nil {
		return nil, err
	}
	opt.reserved, opt.reservedFor = cpu.PeakBytes(single, opt.DType.Size()), "the single-device reference"
	if err := opt.checkMemory(opt.reserved, "the single-device reference step"); err != nil {
		return nil, err
	}
	ref, err := cpu.NewTrainer[F](single, opt.Seed)
	if err != nil {
		return nil, err
	}
	ranks, devs, err := start(fwd, p, opt, func(t ir.TensorID) *cpu.Tensor[F] { return ref.Value(t) })
	if err != nil {
		return nil, err
	}
	defer devs.Close()
	if l := devs.Local(); len(l) != len(ranks) {
		return nil, fmt.Errorf("verify compares every rank's gradients: the %s backend drives only ranks %v of %d here (run it with every rank in one process)", opt.backend().Name(), l, len(ranks))
	}
	rep := &Report{Backend: opt.backend().Name(), Devices: p.NumDevices(), Steps: opt.Steps, DType: opt.DType.String(), CommSwaps: len(p.CommSwaps)}
	for k := 0; k < opt.Steps; k++ {
		batch := cpu.SyntheticBatch[F](fwd, opt.Seed+1000+uint64(k)) // per step, whatever OneBatch says
		want, err := ref.Step(nil, batch)
		if err != nil {
			return nil, fmt.Errorf("single-device step %d: %w", k+1, err)
		}
		got, err := devs.Step(feeds(fwd, p, ranks, batch), true)
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
			grads := make([]*cpu.Tensor[F], len(ranks))
			vals := make([]*cpu.Tensor[F], len(ranks))
			for r, rk := range ranks {
				slot := rk.param[t]
				grads[r] = got[r].Grads[slot.Param]
				if vals[r], err = devs.Value(r, slot.Param); err != nil {
					return nil, err
				}
			}
			pl, shape := ranks[0].local.Placement[t], fwd.Tensors[t].Shape
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
