package executor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"hap/cpu"
	"hap/ir"
)

// Backend runs the per-device training steps of a distributed program. The
// executor does everything else once, for every backend: it lowers the
// program for each device, derives each device's training step, sets the
// initial parameters and optimizer state, cuts every batch into each
// device's shards, and assembles and compares results. A backend holds the
// devices' state and runs steps.
type Backend interface {
	// Name identifies the backend in reports: "cpu" or "cuda".
	Name() string
	// Float32 and Float64 start one device per training-step graph (rank r
	// runs steps[r]) computing in that element type.
	Float32(steps []*ir.Graph) (Devices[float32], error)
	Float64(steps []*ir.Graph) (Devices[float64], error)
}

// Devices is a started group of devices, one per rank. Parameters and
// optimizer state start undefined: the executor sets every one with
// SetValue before the first step.
type Devices[F cpu.Float] interface {
	// Describe names each rank's device, for reports.
	Describe() []string
	// Local lists the ranks this process drives, in increasing order:
	// every rank, unless the backend runs one process per GPU (the CUDA
	// backend with CUDAOptions.Ranks). SetValue, Value and the results of
	// Step exist only for these ranks.
	Local() []int
	// SetValue sets rank's value of parameter or state tensor id of its
	// training step.
	SetValue(rank int, id ir.TensorID, v *cpu.Tensor[F]) error
	// Value returns a copy of rank's current value of parameter or state
	// tensor id.
	Value(rank int, id ir.TensorID) (*cpu.Tensor[F], error)
	// Step runs one training step on every device at once; feeds[r] holds
	// rank r's inputs and labels (by its step graph's tensor IDs). With
	// grads, each result carries the parameter gradients. A failure on one
	// device ends the step on all of them; the error names the device.
	Step(feeds []map[ir.TensorID]*cpu.Tensor[F], grads bool) ([]RankStep[F], error)
	// Close releases the devices.
	Close() error
}

// RankStep is what one device's training step produced.
type RankStep[F cpu.Float] struct {
	Loss float64
	// Grads are the parameter gradients by the step graph's parameter ID,
	// when asked for.
	Grads map[ir.TensorID]*cpu.Tensor[F]
	// Seconds is the device's wall time for the step, time blocked in
	// collectives included.
	Seconds float64
	// LossTotal says Loss is already the job's total (all-reduced over
	// every rank, when other processes drive some of them), not this
	// rank's part.
	LossTotal bool
}

// open starts b's devices in element type F.
func open[F cpu.Float](b Backend, steps []*ir.Graph) (Devices[F], error) {
	var zero F
	var d any
	var err error
	switch any(zero).(type) {
	case float32:
		d, err = b.Float32(steps)
	default:
		d, err = b.Float64(steps)
	}
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", b.Name(), err)
	}
	return d.(Devices[F]), nil
}

// CPU is the reference backend: N virtual devices as goroutines of this
// process computing with package cpu, exchanging data in memory with the
// same semantics as NCCL's collectives (cpu.Group), uneven ones included.
type CPU struct{}

// Name is "cpu".
func (CPU) Name() string { return "cpu" }

// Float32 starts float32 virtual devices.
func (CPU) Float32(steps []*ir.Graph) (Devices[float32], error) { return newCPUDevices[float32](steps) }

// Float64 starts float64 virtual devices.
func (CPU) Float64(steps []*ir.Graph) (Devices[float64], error) { return newCPUDevices[float64](steps) }

// cpuDevices is one cpu.Trainer per rank.
type cpuDevices[F cpu.Float] struct {
	tr []*cpu.Trainer[F]
}

func newCPUDevices[F cpu.Float](steps []*ir.Graph) (*cpuDevices[F], error) {
	d := &cpuDevices[F]{}
	for r, g := range steps {
		// The trainer's own initial values are replaced by SetValue.
		tr, err := cpu.NewTrainer[F](g, 0)
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", r, err)
		}
		d.tr = append(d.tr, tr)
	}
	return d, nil
}

func (d *cpuDevices[F]) Describe() []string {
	out := make([]string, len(d.tr))
	for r := range out {
		out[r] = fmt.Sprintf("virtual CPU device %d", r)
	}
	return out
}

// Local is every rank: the virtual devices all live in this process.
func (d *cpuDevices[F]) Local() []int {
	out := make([]int, len(d.tr))
	for r := range out {
		out[r] = r
	}
	return out
}

func (d *cpuDevices[F]) check(rank int, id ir.TensorID) error {
	if rank < 0 || rank >= len(d.tr) {
		return fmt.Errorf("no device %d of %d", rank, len(d.tr))
	}
	g := d.tr[rank].Graph()
	if int(id) < 0 || int(id) >= len(g.Tensors) || (g.Tensors[id].Kind != ir.Param && g.Tensors[id].Kind != ir.State) {
		return fmt.Errorf("device %d: tensor %d is not a parameter or state of %s", rank, id, g.Name)
	}
	return nil
}

func (d *cpuDevices[F]) SetValue(rank int, id ir.TensorID, v *cpu.Tensor[F]) error {
	if err := d.check(rank, id); err != nil {
		return err
	}
	d.tr[rank].SetValue(id, v.Clone())
	return nil
}

func (d *cpuDevices[F]) Value(rank int, id ir.TensorID) (*cpu.Tensor[F], error) {
	if err := d.check(rank, id); err != nil {
		return nil, err
	}
	return d.tr[rank].Value(id).Clone(), nil
}

// Step runs every trainer on its own goroutine over one cpu.Group; the
// first failure aborts the group so no device waits forever.
func (d *cpuDevices[F]) Step(feeds []map[ir.TensorID]*cpu.Tensor[F], grads bool) ([]RankStep[F], error) {
	if len(feeds) != len(d.tr) {
		return nil, fmt.Errorf("%d feeds for %d devices", len(feeds), len(d.tr))
	}
	group := cpu.NewGroup(len(d.tr))
	res := make([]RankStep[F], len(d.tr))
	errs := make([]error, len(d.tr))
	var wg sync.WaitGroup
	for r, tr := range d.tr {
		wg.Add(1)
		go func(r int, tr *cpu.Trainer[F]) {
			defer wg.Done()
			t0 := time.Now()
			out, err := tr.Step(&cpu.Ctx{Comm: group.Comm(r)}, feeds[r])
			res[r].Seconds = time.Since(t0).Seconds()
			if err != nil {
				errs[r] = err
				group.Abort(fmt.Errorf("device %d: %w", r, err))
				return
			}
			res[r].Loss = out.Loss
			if grads {
				res[r].Grads = out.Grads
			}
		}(r, tr)
	}
	wg.Wait()
	if err := firstCause(errs); err != nil {
		return nil, err
	}
	return res, nil
}

// firstCause returns the first device error that is not merely another
// device's failure echoed back (cpu.ErrAborted), named by its device; nil
// when there is none.
func firstCause(errs []error) error {
	var first error
	for r, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("device %d: %w", r, err)
		if !errors.Is(err, cpu.ErrAborted) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (d *cpuDevices[F]) Close() error { return nil }
