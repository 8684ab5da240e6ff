package executor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"hap/cpu"
	"hap/cuda"
	"hap/ir"
	"hap/nccl"
)

// The CUDA backend: each rank runs on a GPU of this process (package
// cuda's Device: one goroutine locked to an OS thread per GPU), tensors
// live in device memory, ops run as the kernel/cuBLAS/copy plans of
// cuda.PlanOp, and collectives as the NCCL plans of nccl.PlanOp on one
// communicator over all ranks.
//
// Each rank has two streams (streams.go): kernels run on its compute
// stream, collectives on its communication stream, each stream in the
// step's op order, so a collective overlaps the kernels that do not need
// its result, as the simulator's timeline assumes. An op that reads what
// the other stream made waits for an event recorded after its maker.
//
// Memory, per rank, is allocated once when the devices start:
//   - every leaf of the training step (parameters, optimizer state,
//     inputs, labels, the step counter) has its own place in one
//     persistent block;
//   - every computed tensor has a place in one arena, a tensor taking
//     another's bytes only once every op using the other has certainly
//     finished, whichever stream it ran on (packArena); the loss,
//     gradients and updated parameters and state live to the end of the
//     step;
//   - one workspace (the largest any op plan asks for) serves every kernel
//     and one pair of staging buffers every collective, in turn, since
//     each stream runs its ops one after another.
//
// A step uploads the feeds, enqueues every op on its stream without
// waiting, makes the compute stream wait for the communication stream,
// then waits once (under the NCCL watchdog when there is a communicator),
// reads the loss (and gradients when asked), and copies the updated
// parameters and state over the old ones.

// CUDAOptions configure the CUDA backend.
type CUDAOptions struct {
	// Runtime is the loaded CUDA libraries; nil opens them with the
	// default discovery (cuda.Open).
	Runtime *cuda.Runtime
	// NCCL is the loaded NCCL library, needed when a plan has more than
	// one device; nil opens it with the default discovery (nccl.Open).
	NCCL *nccl.NCCL
	// Ordinals[i] is the GPU the i-th rank this process drives runs on
	// (rank i, or Ranks[i] when Ranks is set); nil runs the i-th on GPU i
	// and requires as many GPUs as ranks driven here. (Several ranks on one
	// GPU work only where NCCL allows a GPU twice in a communicator: the
	// test stand-in does, real NCCL does not.)
	Ordinals []int
	// Ranks lists the global ranks of the plan this process drives, in
	// increasing order; nil drives every rank. When it leaves some out (one
	// process per GPU: hap run under torchrun, srun or --nproc), the other
	// ranks run in other processes, ID must name the job's communicator,
	// and every step all-reduces the loss so each process reports the
	// job's total (RankStep.LossTotal).
	Ranks []int
	// ID is the NCCL unique id of the communicator over all ranks, made by
	// rank 0 of a multi-process job and handed to the others (package
	// launch's rendezvous). Required when Ranks leaves out some of several
	// ranks; otherwise ignored (the backend makes its own).
	ID *nccl.UniqueID
	// Plan tunes the kernel launches (block size, grid cap, TF32).
	Plan cuda.PlanOptions
	// Timeout bounds each wait for collective work and the communicator
	// set-up (0: nccl.DefaultTimeout).
	Timeout time.Duration
	// OneStream runs every rank's collectives on its compute stream, in
	// the step's op order, instead of on a communication stream of their
	// own that overlaps them with computation: for comparing the two, and
	// for ruling the overlap out when hunting a fault.
	OneStream bool
}

// CUDA is the GPU backend (see CUDAOptions).
type CUDA struct{ opt CUDAOptions }

// NewCUDA returns a CUDA backend; nothing is loaded until devices start.
func NewCUDA(opt CUDAOptions) *CUDA { return &CUDA{opt: opt} }

// Name is "cuda".
func (*CUDA) Name() string { return "cuda" }

// Float32 starts float32 devices.
func (b *CUDA) Float32(steps []*ir.Graph) (Devices[float32], error) {
	return openCUDA[float32](b.opt, steps)
}

// Float64 starts float64 devices.
func (b *CUDA) Float64(steps []*ir.Graph) (Devices[float64], error) {
	return openCUDA[float64](b.opt, steps)
}

// cudaDevices is one cudaRank per rank; ranks driven by other processes
// are nil.
type cudaDevices[F cpu.Float] struct {
	ranks []*cudaRank[F]
	// local lists the ranks driven here; partial says some are not.
	local   []int
	partial bool
	// broken is set once a step failed: communicators may be aborted and
	// device state half-updated, so later steps refuse to run.
	broken error
}

// cudaRank is one rank's GPU, plans and buffers.
type cudaRank[F cpu.Float] struct {
	rank, ordinal int
	dev           *cuda.Device
	comm          *nccl.Comm // nil with a single rank
	g             *ir.Graph
	ops           []cudaOp
	addr          []cuda.DevicePtr // every tensor's address
	allocs        []cuda.DevicePtr
	// streams are the compute and communication streams (sched says
	// which op runs on which); events[i] is recorded after op i when an op
	// on the other stream waits for it, and join after the communication
	// stream's last op, for the compute stream to wait on before the step
	// ends.
	streams    [numStreams]cuda.Stream
	hasStreams bool
	sched      streamSchedule
	events     []cuda.Event
	join       cuda.Event
	// lossWait is the compute-stream op that makes the loss, which a
	// multi-process job's loss all-reduce waits for (noWait: none).
	lossWait int
	steps    int
	// lossTotal: other ranks run in other processes, so each step
	// all-reduces the loss, and every rank reads the job's total.
	lossTotal bool
}

// cudaOp is one op ready to enqueue.
type cudaOp struct {
	op     *ir.Op
	kernel *cuda.OpPlan // compute ops
	coll   *nccl.Plan   // collectives over several ranks
	copyN  int64        // a collective over one rank: a copy of copyN bytes
	bufs   cuda.Buffers
	cbufs  nccl.Buffers
	dt     ir.DType // the collective's element type
}

// ownedRanks checks opt.Ranks against a plan of n devices and returns the
// ranks this process drives (every rank when opt.Ranks is nil).
func ownedRanks(opt CUDAOptions, n int) ([]int, error) {
	if opt.Ranks == nil {
		all := make([]int, n)
		for r := range all {
			all[r] = r
		}
		return all, nil
	}
	if len(opt.Ranks) == 0 {
		return nil, fmt.Errorf("CUDAOptions.Ranks is empty: this process would drive none of the plan's %d devices", n)
	}
	for i, r := range opt.Ranks {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("CUDAOptions.Ranks: rank %d is outside the plan's devices 0..%d", r, n-1)
		}
		if i > 0 && r <= opt.Ranks[i-1] {
			return nil, fmt.Errorf("CUDAOptions.Ranks %v: ranks must be distinct and increasing", opt.Ranks)
		}
	}
	return opt.Ranks, nil
}

func openCUDA[F cpu.Float](opt CUDAOptions, steps []*ir.Graph) (_ *cudaDevices[F], err error) {
	n := len(steps)
	local, err := ownedRanks(opt, n)
	if err != nil {
		return nil, err
	}
	partial := len(local) < n
	if partial && opt.ID == nil {
		return nil, fmt.Errorf("this process drives ranks %v of %d: the job's NCCL unique id (CUDAOptions.ID, from rank 0 through the rendezvous) is required", local, n)
	}
	rt := opt.Runtime
	if rt == nil {
		if rt, err = cuda.Open(cuda.Options{}); err != nil {
			return nil, err
		}
	}
	ordinals := opt.Ordinals
	if ordinals == nil {
		count, err := rt.DeviceCount()
		if err != nil {
			return nil, err
		}
		if len(local) > count {
			if partial {
				return nil, fmt.Errorf("this process drives %d of the plan's %d devices but this machine has %d GPU(s)", len(local), n, count)
			}
			return nil, fmt.Errorf("the plan has %d devices but this machine has %d GPU(s); one process drives its local GPUs (run across machines with one process per GPU)", n, count)
		}
		for i := range local {
			ordinals = append(ordinals, i)
		}
	}
	if len(ordinals) != len(local) {
		return nil, fmt.Errorf("%d GPU ordinals for the %d devices this process drives", len(ordinals), len(local))
	}
	d := &cudaDevices[F]{ranks: make([]*cudaRank[F], n), local: local, partial: partial}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	for i, r := range local {
		rk, err := newCUDARank[F](rt, r, n, ordinals[i], steps[r], opt.Plan, opt.OneStream)
		if err != nil {
			return nil, err
		}
		rk.lossTotal = partial
		d.ranks[r] = rk
	}
	if n == 1 {
		return d, nil
	}
	lib := opt.NCCL
	if lib == nil {
		if lib, err = nccl.Open(nccl.Options{}); err != nil {
			return nil, err
		}
	}
	var id nccl.UniqueID
	if partial {
		id = *opt.ID
	} else if id, err = lib.UniqueID(); err != nil {
		return nil, err
	}
	// Every rank driven here joins at once (each on its own GPU thread);
	// set-up completes only when all ranks of the job have, in this
	// process and in the others.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, r := range local {
		wg.Add(1)
		go func(r int, rk *cudaRank[F]) {
			defer wg.Done()
			if rk.comm, errs[r] = lib.InitRank(rk.dev, id, n, r, nccl.CommOptions{Timeout: opt.Timeout}); errs[r] != nil {
				errs[r] = fmt.Errorf("device %d (GPU %d): NCCL communicator of %d ranks: %w", r, rk.ordinal, n, errs[r])
			}
		}(r, d.ranks[r])
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// newCUDARank plans rank r's ops, opens its GPU, allocates its memory and
// compiles the kernels it uses.
func newCUDARank[F cpu.Float](rt *cuda.Runtime, r, n, ordinal int, g *ir.Graph, po cuda.PlanOptions, oneStream bool) (*cudaRank[F], error) {
	if g.Train == nil {
		return nil, fmt.Errorf("device %d: graph %q is not a training step", r, g.Name)
	}
	rk := &cudaRank[F]{rank: r, ordinal: ordinal, g: g, sched: scheduleStreams(g, oneStream), lossWait: noWait}
	if g.Loss != ir.NoTensor {
		if m := g.Tensors[g.Loss].Producer; m != ir.NoOp && rk.sched.stream[m] != commStream {
			rk.lossWait = int(m)
			rk.sched.record[m] = true
		}
	}
	var workMax, sendMax, recvMax int64
	rk.ops = make([]cudaOp, len(g.Ops))
	for i := range g.Ops {
		op := &g.Ops[i]
		o := &rk.ops[i]
		o.op = op
		ins, outs := operands(g, op)
		var err error
		switch {
		case ir.IsCollective(op.Kind) && n == 1:
			// One rank: every collective is the identity.
			o.copyN = int64(outs[0].Shape.Numel() * outs[0].DType.Size())
		case ir.IsCollective(op.Kind):
			o.dt = ins[0].DType
			if o.coll, err = nccl.PlanOp(op, ins[0], n); err == nil && op.Kind == ir.OpAllReduce {
				o.coll.Rank = r
			}
			if err == nil {
				es := int64(o.dt.Size())
				sendMax, recvMax = max(sendMax, o.coll.SendElems*es), max(recvMax, o.coll.RecvElems*es)
			}
		default:
			if o.kernel, err = cuda.PlanOp(op, ins, outs, po); err == nil {
				workMax = max(workMax, o.kernel.WorkBytes)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("device %d: %w", r, err)
		}
	}
	leafOff, leafBytes, actOff, actBytes := layout(g, &rk.sched)
	dev, err := rt.OpenDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("device %d (GPU %d): %w", r, ordinal, err)
	}
	rk.dev = dev
	err = dev.Do(func(c *cuda.Ctx) error {
		alloc := func(bytes int64) (cuda.DevicePtr, error) {
			if bytes == 0 {
				return 0, nil
			}
			p, err := c.Alloc(int(bytes))
			if err == nil {
				rk.allocs = append(rk.allocs, p)
			}
			return p, err
		}
		leaves, err := alloc(leafBytes)
		if err != nil {
			return fmt.Errorf("%d bytes of parameters, state and inputs: %w", leafBytes, err)
		}
		acts, err := alloc(actBytes)
		if err != nil {
			return fmt.Errorf("%d bytes of activations: %w", actBytes, err)
		}
		work, err := alloc(workMax)
		if err != nil {
			return fmt.Errorf("%d bytes of workspace: %w", workMax, err)
		}
		send, err := alloc(sendMax)
		if err != nil {
			return err
		}
		recv, err := alloc(recvMax)
		if err != nil {
			return err
		}
		rk.addr = make([]cuda.DevicePtr, len(g.Tensors))
		for i := range g.Tensors {
			if g.Tensors[i].Kind.IsLeaf() {
				rk.addr[i] = leaves.Add(leafOff[i])
			} else {
				rk.addr[i] = acts.Add(actOff[i])
			}
		}
		for i := range rk.ops {
			o := &rk.ops[i]
			for _, t := range o.op.Inputs {
				o.bufs.In = append(o.bufs.In, rk.addr[t])
			}
			for _, t := range o.op.Outputs {
				o.bufs.Out = append(o.bufs.Out, rk.addr[t])
			}
			o.bufs.Work = work
			if o.coll != nil {
				o.cbufs = nccl.Buffers{In: o.bufs.In[0], Out: o.bufs.Out[0], Send: send, Recv: recv}
			}
			if o.kernel == nil {
				continue
			}
			// Compile every kernel now, so the first step is not
			// charged with NVRTC.
			for _, st := range o.kernel.Steps {
				if st.Kind == cuda.StepKernel {
					if _, err := c.Kernel(cuda.KernelSource(st.DType), st.Kernel); err != nil {
						return fmt.Errorf("op %q (%s): kernel %s: %w", o.op.Name, o.op.Kind, st.Kernel, err)
					}
				}
			}
		}
		for i := range rk.streams {
			if rk.streams[i], err = c.NewStream(); err != nil {
				for _, st := range rk.streams[:i] {
					c.DestroyStream(st)
				}
				return err
			}
		}
		rk.hasStreams = true
		rk.events = make([]cuda.Event, len(rk.ops))
		for i, rec := range rk.sched.record {
			if !rec {
				continue
			}
			if rk.events[i], err = c.NewEvent(false); err != nil {
				return err
			}
		}
		rk.join, err = c.NewEvent(false)
		return err
	})
	if err != nil {
		rk.close()
		return nil, fmt.Errorf("device %d (GPU %d): %w", r, ordinal, err)
	}
	return rk, nil
}

// operands returns op's input and output tensors.
func operands(g *ir.Graph, op *ir.Op) (ins, outs []*ir.Tensor) {
	for _, t := range op.Inputs {
		ins = append(ins, &g.Tensors[t])
	}
	for _, t := range op.Outputs {
		outs = append(outs, &g.Tensors[t])
	}
	return ins, outs
}

// layout places g's tensors: leaves one after another in their block,
// computed tensors in an arena, a tensor taking another's bytes only once
// every op using the other has certainly finished (sched.known).
func layout(g *ir.Graph, sched *streamSchedule) (leafOff []int64, leafBytes int64, actOff []int64, actBytes int64) {
	nt := len(g.Tensors)
	users := make([][]int, nt)
	maker := make([]int, nt)
	for i := range maker {
		maker[i] = noWait
	}
	for i := range g.Ops {
		for _, t := range g.Ops[i].Outputs {
			users[t] = append(users[t], i)
			maker[t] = i
		}
		for _, t := range g.Ops[i].Inputs {
			users[t] = append(users[t], i)
		}
	}
	kept := make([]bool, nt)
	if g.Loss != ir.NoTensor {
		kept[g.Loss] = true
	}
	for _, ps := range g.Train.Params {
		for _, t := range append([]ir.TensorID{ps.Grad, ps.Updated}, ps.NewState...) {
			if t != ir.NoTensor {
				kept[t] = true
			}
		}
	}
	leaf := make([]arenaSlot, nt)
	act := make([]arenaSlot, nt)
	for i := range g.Tensors {
		t := &g.Tensors[i]
		size := int64(t.Shape.Numel() * t.DType.Size())
		absent := arenaSlot{absent: true}
		if t.Kind.IsLeaf() {
			// Leaves never share: every one is alive throughout.
			leaf[i], act[i] = arenaSlot{size: size, free: neverFree}, absent
			continue
		}
		s := arenaSlot{size: size, free: sched.lastUse(users[i])}
		if m := maker[i]; m != noWait {
			s.stream, s.first, s.made = sched.stream[m], m, sched.known[m]
		}
		if kept[i] {
			// The loss, gradients and updated parameters and state are
			// read after the step.
			s.free = neverFree
		}
		leaf[i], act[i] = absent, s
	}
	leafOff, leafBytes = packArena(leaf)
	actOff, actBytes = packArena(act)
	return leafOff, leafBytes, actOff, actBytes
}

func (d *cudaDevices[F]) Describe() []string {
	out := make([]string, len(d.ranks))
	for r, rk := range d.ranks {
		if rk == nil {
			out[r] = "driven by another process"
			continue
		}
		out[r] = fmt.Sprintf("GPU %d (%s)", rk.ordinal, rk.dev.Info().Name)
	}
	return out
}

// Local lists the ranks this process drives.
func (d *cudaDevices[F]) Local() []int { return append([]int(nil), d.local...) }

// stateTensor checks that id is a parameter or state tensor of rank's step.
func (d *cudaDevices[F]) stateTensor(rank int, id ir.TensorID) (*cudaRank[F], *ir.Tensor, error) {
	if rank < 0 || rank >= len(d.ranks) {
		return nil, nil, fmt.Errorf("no device %d of %d", rank, len(d.ranks))
	}
	rk := d.ranks[rank]
	if rk == nil {
		return nil, nil, fmt.Errorf("device %d is driven by another process (this one drives %v)", rank, d.local)
	}
	if int(id) < 0 || int(id) >= len(rk.g.Tensors) || (rk.g.Tensors[id].Kind != ir.Param && rk.g.Tensors[id].Kind != ir.State) {
		return nil, nil, fmt.Errorf("device %d: tensor %d is not a parameter or state of %s", rank, id, rk.g.Name)
	}
	return rk, &rk.g.Tensors[id], nil
}

func (d *cudaDevices[F]) SetValue(rank int, id ir.TensorID, v *cpu.Tensor[F]) error {
	rk, t, err := d.stateTensor(rank, id)
	if err != nil {
		return err
	}
	b, err := hostBytes(t, v)
	if err != nil {
		return fmt.Errorf("device %d: %w", rank, err)
	}
	if err := rk.dev.Upload(rk.addr[id], b); err != nil {
		return fmt.Errorf("device %d (GPU %d): setting %q: %w", rank, rk.ordinal, t.Name, err)
	}
	return nil
}

func (d *cudaDevices[F]) Value(rank int, id ir.TensorID) (*cpu.Tensor[F], error) {
	rk, t, err := d.stateTensor(rank, id)
	if err != nil {
		return nil, err
	}
	v := cpu.NewTensor[F](t.Shape, t.DType)
	if err := rk.dev.Download(tensorBytes(v), rk.addr[id]); err != nil {
		return nil, fmt.Errorf("device %d (GPU %d): reading %q: %w", rank, rk.ordinal, t.Name, err)
	}
	return v, nil
}

// tensorBytes is v's storage as bytes.
func tensorBytes[F cpu.Float](v *cpu.Tensor[F]) []byte {
	if v.Ints != nil {
		return cuda.Bytes(v.Ints)
	}
	return cuda.Bytes(v.Data)
}

// hostBytes checks that v holds t's shape and element type and returns its
// bytes.
func hostBytes[F cpu.Float](t *ir.Tensor, v *cpu.Tensor[F]) ([]byte, error) {
	if v == nil || !v.Shape.Equal(t.Shape) || (t.DType == ir.Int64) != (v.Ints != nil) || len(v.Data)+len(v.Ints) != t.Shape.Numel() {
		return nil, fmt.Errorf("value for %s %q does not hold %s%v", t.Kind, t.Name, t.DType, t.Shape)
	}
	b := tensorBytes(v)
	if int64(len(b)) != int64(t.Shape.Numel()*t.DType.Size()) {
		return nil, fmt.Errorf("value for %q has %d-byte elements, the graph says %s", t.Name, len(b)/max(1, t.Shape.Numel()), t.DType)
	}
	return b, nil
}

// Step runs every rank's step inside its GPU thread, all at once. If one
// fails, every communicator is aborted so no rank waits for it.
func (d *cudaDevices[F]) Step(feeds []map[ir.TensorID]*cpu.Tensor[F], grads bool) ([]RankStep[F], error) {
	if d.broken != nil {
		return nil, fmt.Errorf("an earlier step failed: %w", d.broken)
	}
	if len(feeds) != len(d.ranks) {
		return nil, fmt.Errorf("%d feeds for %d devices", len(feeds), len(d.ranks))
	}
	res := make([]RankStep[F], len(d.ranks))
	errs := make([]error, len(d.ranks))
	var wg sync.WaitGroup
	var once sync.Once
	cause := -1 // the rank whose failure aborted the others
	for _, r := range d.local {
		wg.Add(1)
		go func(r int, rk *cudaRank[F]) {
			defer wg.Done()
			t0 := time.Now()
			err := rk.dev.Do(func(c *cuda.Ctx) error {
				var err error
				res[r], err = rk.step(c, feeds[r], grads)
				return err
			})
			res[r].Seconds = time.Since(t0).Seconds()
			if err != nil {
				errs[r] = fmt.Errorf("GPU %d: %w", rk.ordinal, err)
				once.Do(func() {
					cause = r
					d.abort()
				})
			}
		}(r, d.ranks[r])
	}
	wg.Wait()
	if cause >= 0 {
		// The other ranks' errors are the abort echoing back.
		d.broken = fmt.Errorf("device %d: %w", cause, errs[cause])
		return nil, d.broken
	}
	return res, nil
}

// abort aborts every communicator (from any goroutine), releasing ranks
// blocked in collectives.
func (d *cudaDevices[F]) abort() {
	for _, rk := range d.ranks {
		if rk != nil && rk.comm != nil {
			rk.comm.Abort()
		}
	}
}

// step is one training step on the rank's GPU thread.
func (rk *cudaRank[F]) step(c *cuda.Ctx, feed map[ir.TensorID]*cpu.Tensor[F], grads bool) (RankStep[F], error) {
	var out RankStep[F]
	g := rk.g
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.Kind != ir.Input && t.Kind != ir.Label {
			continue
		}
		v, ok := feed[t.ID]
		if !ok {
			return out, fmt.Errorf("no value fed for %s %q", t.Kind, t.Name)
		}
		b, err := hostBytes(t, v)
		if err != nil {
			return out, err
		}
		if err := c.CopyHtoD(rk.addr[t.ID], b); err != nil {
			return out, fmt.Errorf("uploading %q: %w", t.Name, err)
		}
	}
	if st := g.Train.Step; st != ir.NoTensor {
		if err := c.CopyHtoD(rk.addr[st], cuda.Bytes([]F{F(rk.steps + 1)})); err != nil {
			return out, fmt.Errorf("uploading the step counter: %w", err)
		}
	}
	// A synchronous copy from pageable memory may return before its DMA
	// has landed, and it is ordered only with the legacy default stream,
	// which the rank's streams do not wait for: wait for it here.
	if err := c.Synchronize(); err != nil {
		return out, fmt.Errorf("uploading the inputs: %w", err)
	}
	for i := range rk.ops {
		if err := rk.enqueue(c, i); err != nil {
			return out, fmt.Errorf("op %q (%s): %w", rk.ops[i].op.Name, rk.ops[i].op.Kind, err)
		}
	}
	compute, comm := rk.streams[computeStream], rk.streams[commStream]
	if rk.lossTotal {
		// Each rank's loss is its part of the job's; the other parts are
		// in other processes. NCCL calls keep to the communication stream,
		// in one order on every rank.
		if err := rk.waitFor(c, commStream, rk.lossWait); err != nil {
			return out, err
		}
		if err := rk.comm.AllReduce(c, rk.addr[g.Loss], rk.addr[g.Loss], 1, g.Tensors[g.Loss].DType, comm); err != nil {
			return out, fmt.Errorf("all-reducing the loss: %w", err)
		}
		out.LossTotal = true
	}
	// The compute stream waits for the communication stream's work, so
	// waiting for it waits for the step, and the parameter copies below
	// follow every collective that reads a parameter.
	if err := c.Record(rk.join, comm); err != nil {
		return out, err
	}
	if err := c.WaitEvent(compute, rk.join); err != nil {
		return out, err
	}
	what := fmt.Sprintf("step %d", rk.steps+1)
	if rk.comm != nil {
		if err := rk.comm.Wait(c, compute, what); err != nil {
			return out, err
		}
	} else if err := c.SyncStream(compute); err != nil {
		return out, fmt.Errorf("%s: %w", what, err)
	}
	loss := make([]F, 1)
	if err := c.CopyDtoH(cuda.Bytes(loss), rk.addr[g.Loss]); err != nil {
		return out, fmt.Errorf("reading the loss: %w", err)
	}
	out.Loss = float64(loss[0])
	if grads {
		out.Grads = map[ir.TensorID]*cpu.Tensor[F]{}
		for _, ps := range g.Train.Params {
			t := &g.Tensors[ps.Grad]
			v := cpu.NewTensor[F](t.Shape, t.DType)
			if err := c.CopyDtoH(tensorBytes(v), rk.addr[ps.Grad]); err != nil {
				return out, fmt.Errorf("reading %q: %w", t.Name, err)
			}
			out.Grads[ps.Param] = v
		}
	}
	// The updated parameters and state replace the old ones.
	for _, ps := range g.Train.Params {
		pairs := [][2]ir.TensorID{{ps.Param, ps.Updated}}
		for j, s := range ps.State {
			pairs = append(pairs, [2]ir.TensorID{s, ps.NewState[j]})
		}
		for _, p := range pairs {
			t := &g.Tensors[p[0]]
			if err := c.CopyDtoD(rk.addr[p[0]], rk.addr[p[1]], int64(t.Shape.Numel()*t.DType.Size()), compute); err != nil {
				return out, fmt.Errorf("updating %q: %w", t.Name, err)
			}
		}
	}
	if err := c.SyncStream(compute); err != nil {
		return out, fmt.Errorf("updating the parameters: %w", err)
	}
	rk.steps++
	return out, nil
}

// enqueue puts op i on its stream, after the event of the op on the other
// stream it waits for, and records its own event when one is waited for.
func (rk *cudaRank[F]) enqueue(c *cuda.Ctx, i int) error {
	o, st := &rk.ops[i], rk.sched.stream[i]
	if err := rk.waitFor(c, st, rk.sched.wait[i]); err != nil {
		return err
	}
	s := rk.streams[st]
	var err error
	switch {
	case o.kernel != nil:
		err = c.Run(o.kernel, o.bufs, s)
	case o.coll != nil:
		err = rk.comm.Run(c, o.coll, o.dt, o.cbufs, s)
	case o.copyN > 0:
		err = c.CopyDtoD(o.bufs.Out[0], o.bufs.In[0], o.copyN, s)
	}
	if err == nil && rk.sched.record[i] {
		err = c.Record(rk.events[i], s)
	}
	return err
}

// waitFor makes stream st wait for op j's event (none when j is noWait).
func (rk *cudaRank[F]) waitFor(c *cuda.Ctx, st streamID, j int) error {
	if j == noWait {
		return nil
	}
	return c.WaitEvent(rk.streams[st], rk.events[j])
}

// Close destroys the communicators, frees device memory and closes the
// GPUs.
func (d *cudaDevices[F]) Close() error {
	var errs []error
	for _, rk := range d.ranks {
		if rk != nil && rk.comm != nil {
			if err := rk.comm.Destroy(); err != nil && !errors.Is(err, nccl.ErrAborted) {
				errs = append(errs, fmt.Errorf("device %d: %w", rk.rank, err))
			}
			rk.comm = nil
		}
	}
	for _, rk := range d.ranks {
		if rk == nil {
			continue
		}
		if err := rk.close(); err != nil {
			errs = append(errs, fmt.Errorf("device %d (GPU %d): %w", rk.rank, rk.ordinal, err))
		}
	}
	d.ranks = nil
	return errors.Join(errs...)
}

// close waits for the rank's stream, then frees its memory and stream and
// closes its device. Work queued before a failure still runs (an aborted
// communicator fails its pending collectives at once), so the wait ends,
// and no kernel writes into freed memory.
func (rk *cudaRank[F]) close() error {
	if rk.dev == nil {
		return nil
	}
	err := rk.dev.Do(func(c *cuda.Ctx) error {
		var errs []error
		if rk.hasStreams {
			for _, st := range rk.streams {
				errs = append(errs, c.SyncStream(st), c.DestroyStream(st))
			}
			rk.hasStreams = false
		}
		for i, e := range rk.events {
			if e != 0 {
				errs = append(errs, c.DestroyEvent(e))
				rk.events[i] = 0
			}
		}
		if rk.join != 0 {
			errs = append(errs, c.DestroyEvent(rk.join))
			rk.join = 0
		}
		for _, p := range rk.allocs {
			errs = append(errs, c.Free(p))
		}
		rk.allocs = nil
		return errors.Join(errs...)
	})
	err = errors.Join(err, rk.dev.Close())
	rk.dev = nil
	return err
}
