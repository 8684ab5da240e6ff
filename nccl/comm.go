package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"hap/cuda"
	"hap/ir"
)

// The failure rule: a dead or silent peer must end the job with an error,
// never a hang. NCCL calls only enqueue work; a collective whose peer never
// arrives leaves its stream busy forever. So:
//   - communicators are created non-blocking (ncclCommInitRankConfig with
//     blocking = 0) and their set-up is polled with ncclCommGetAsyncError;
//   - Wait polls the stream (cuStreamQuery) and ncclCommGetAsyncError,
//     never cuStreamSynchronize, backing off from 50 µs to 2 ms;
//   - when the async error reports a failure (a peer aborted or the network
//     failed) or the timeout passes, the communicator is aborted
//     (ncclCommAbort, which also releases the stream) and the error returned.
// The timeout is per wait and per set-up: CommOptions.Timeout, default
// DefaultTimeout. With an NCCL older than 2.14 (no non-blocking set-up),
// communicator creation cannot time out; collective waits still do.

// DefaultTimeout bounds one wait for collective work, and communicator
// set-up, before a peer is declared dead.
const DefaultTimeout = 5 * time.Minute

// Sentinel errors.
var (
	// ErrTimeout: work did not finish within the communicator's timeout.
	ErrTimeout = errors.New("nccl: timed out")
	// ErrPeerFailed: NCCL reported an asynchronous error (a peer aborted,
	// died, or the network failed).
	ErrPeerFailed = errors.New("nccl: communicator failed")
	// ErrAborted: the communicator was aborted or destroyed.
	ErrAborted = errors.New("nccl: communicator aborted")
)

// CommOptions configure a communicator.
type CommOptions struct {
	// Timeout bounds each Wait and the set-up; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Comm is one rank's communicator, bound to one GPU. Its calls run on the
// GPU's thread: they take the *cuda.Ctx of a Device.Do callback.
type Comm struct {
	a       *api
	dev     *cuda.Device
	rank    int
	size    int
	timeout time.Duration
	// nonblocking is set when the communicator was made with blocking = 0:
	// then any call may answer ncclInProgress and must be settled.
	nonblocking bool

	mu     sync.Mutex // guards h and closed: Abort may come from any goroutine
	h      uintptr
	closed bool
}

// InitRank joins communicator id as rank of size on dev. Every rank must
// call it (with the id rank 0 made) within the timeout.
func (n *NCCL) InitRank(dev *cuda.Device, id UniqueID, size, rank int, opt CommOptions) (*Comm, error) {
	a, err := n.load()
	if err != nil {
		return nil, err
	}
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d outside a group of %d", rank, size)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	c := &Comm{a: a, dev: dev, rank: rank, size: size, timeout: opt.Timeout}
	err = dev.Do(func(cx *cuda.Ctx) error {
		var h uintptr
		if a.commInitConfig == nil {
			// NCCL < 2.14: blocking set-up, which cannot time out.
			if err := a.err("ncclCommInitRank", a.commInitRank(&h, int32(size), uid{id}, int32(rank)), 0); err != nil {
				return err
			}
			c.h = h
			return nil
		}
		cfg := config{Size: configSize, Magic: 0xcafebeef, Version: 21400, Blocking: 0}
		r := a.commInitConfig(&h, int32(size), uid{id}, int32(rank), &cfg)
		runtime.KeepAlive(&cfg)
		if r != resSuccess && r != resInProgress {
			if h != 0 {
				a.commAbort(h)
			}
			return a.err("ncclCommInitRankConfig", r, 0)
		}
		c.h, c.nonblocking = h, true
		return c.settle("communicator set-up", time.Now().Add(c.timeout))
	})
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d of %d on GPU %d: %w", rank, size, dev.Info().Ordinal, err)
	}
	return c, nil
}

// Rank is this communicator's rank; Size the number of ranks.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Device is the GPU the communicator runs on.
func (c *Comm) Device() *cuda.Device { return c.dev }

// Timeout is the bound on each wait.
func (c *Comm) Timeout() time.Duration { return c.timeout }

func (c *Comm) handle() (uintptr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrAborted
	}
	return c.h, nil
}

// asyncState reads ncclCommGetAsyncError.
func (c *Comm) asyncState() (int32, error) {
	h, err := c.handle()
	if err != nil {
		return 0, err
	}
	var st int32
	if err := c.a.err("ncclCommGetAsyncError", c.a.commAsyncError(h, &st), h); err != nil {
		return 0, err
	}
	return st, nil
}

// AsyncError reports a failure NCCL has detected, or nil.
func (c *Comm) AsyncError() error {
	st, err := c.asyncState()
	if err != nil {
		return err
	}
	if st == resSuccess || st == resInProgress {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrPeerFailed, c.a.err("ncclCommGetAsyncError", st, 0))
}

// settle waits while the communicator answers ncclInProgress, up to
// deadline, aborting it on failure or timeout.
func (c *Comm) settle(what string, deadline time.Time) error {
	return c.poll(what, deadline, func() (bool, error) {
		st, err := c.asyncState()
		if err != nil {
			return false, err
		}
		switch st {
		case resSuccess:
			return true, nil
		case resInProgress:
			return false, nil
		}
		return false, fmt.Errorf("%w: %v", ErrPeerFailed, c.a.err("ncclCommGetAsyncError", st, 0))
	})
}

// poll calls done with backoff until it reports true, fails, or the
// deadline passes; failure and timeout abort the communicator.
func (c *Comm) poll(what string, deadline time.Time, done func() (bool, error)) error {
	sleep := 50 * time.Microsecond
	for {
		ok, err := done()
		if err != nil {
			c.Abort()
			return fmt.Errorf("%s: %w; communicator aborted", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			c.Abort()
			return fmt.Errorf("%w: %s did not finish within %v: a peer is dead, stuck or missing; communicator aborted", ErrTimeout, what, c.timeout)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 2*time.Millisecond)
	}
}

// Wait returns once all work on s has finished, or ends it: a peer
// failure NCCL reports, or no completion within the timeout, aborts the
// communicator and returns an error (ErrPeerFailed or ErrTimeout). It
// polls; it never blocks in the driver.
func (c *Comm) Wait(cx *cuda.Ctx, s cuda.Stream, what string) error {
	if err := c.onThread(cx); err != nil {
		return err
	}
	return c.poll(what, time.Now().Add(c.timeout), func() (bool, error) {
		done, err := cx.StreamDone(s)
		if err != nil {
			return false, err
		}
		// A failed operation may also leave the stream idle: the async
		// error decides either way.
		if err := c.AsyncError(); err != nil {
			return false, err
		}
		return done, nil
	})
}

// Abort ends the communicator at once, releasing its pending work; peers
// see an asynchronous error. Safe from any goroutine; later calls fail
// with ErrAborted.
func (c *Comm) Abort() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.a.err("ncclCommAbort", c.a.commAbort(c.h), 0)
}

// Destroy finalises and frees the communicator (on its GPU's thread),
// aborting it instead if finalising does not finish within the timeout.
func (c *Comm) Destroy() error {
	return c.dev.Do(func(cx *cuda.Ctx) error {
		h, err := c.handle()
		if err != nil {
			return nil // already aborted
		}
		if c.nonblocking && c.a.commFinalize != nil {
			r := c.a.commFinalize(h)
			if r != resSuccess && r != resInProgress {
				c.Abort()
				return c.a.err("ncclCommFinalize", r, h)
			}
			if err := c.settle("finalising the communicator", time.Now().Add(c.timeout)); err != nil {
				return err
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return nil
		}
		c.closed = true
		return c.a.err("ncclCommDestroy", c.a.commDestroy(h), 0)
	})
}

func (c *Comm) onThread(cx *cuda.Ctx) error {
	if cx == nil || cx.Device() != c.dev {
		return fmt.Errorf("nccl: rank %d's communicator belongs to GPU %d; call it inside that device's Do", c.rank, c.dev.Info().Ordinal)
	}
	return nil
}

// call checks the thread, runs f with the handle and settles an
// ncclInProgress answer.
func (c *Comm) call(cx *cuda.Ctx, fn string, f func(h uintptr) int32) error {
	if err := c.onThread(cx); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	r := f(h)
	if r == resInProgress && c.nonblocking {
		return c.settle(fn, time.Now().Add(c.timeout))
	}
	return c.a.err(fn, r, h)
}

func dtype(dt ir.DType) int32 {
	d, _ := DataType(dt)
	return d
}

// AllGather enqueues ncclAllGather: count elements from every rank into
// recv, in rank order.
func (c *Comm) AllGather(cx *cuda.Ctx, send, recv cuda.DevicePtr, count int64, dt ir.DType, s cuda.Stream) error {
	return c.call(cx, "ncclAllGather", func(h uintptr) int32 {
		return c.a.allGather(uint64(send), uint64(recv), uint64(count), dtype(dt), h, uintptr(s))
	})
}

// ReduceScatter enqueues ncclReduceScatter (sum): this rank's recvCount
// block of the sum of every rank's send.
func (c *Comm) ReduceScatter(cx *cuda.Ctx, send, recv cuda.DevicePtr, recvCount int64, dt ir.DType, s cuda.Stream) error {
	return c.call(cx, "ncclReduceScatter", func(h uintptr) int32 {
		return c.a.reduceScatter(uint64(send), uint64(recv), uint64(recvCount), dtype(dt), opSum, h, uintptr(s))
	})
}

// AllReduce enqueues ncclAllReduce (sum).
func (c *Comm) AllReduce(cx *cuda.Ctx, send, recv cuda.DevicePtr, count int64, dt ir.DType, s cuda.Stream) error {
	return c.call(cx, "ncclAllReduce", func(h uintptr) int32 {
		return c.a.allReduce(uint64(send), uint64(recv), uint64(count), dtype(dt), opSum, h, uintptr(s))
	})
}

// Broadcast enqueues ncclBroadcast from root.
func (c *Comm) Broadcast(cx *cuda.Ctx, send, recv cuda.DevicePtr, count int64, dt ir.DType, root int, s cuda.Stream) error {
	return c.call(cx, "ncclBroadcast", func(h uintptr) int32 {
		return c.a.broadcast(uint64(send), uint64(recv), uint64(count), dtype(dt), int32(root), h, uintptr(s))
	})
}

// Reduce enqueues ncclReduce (sum) to root.
func (c *Comm) Reduce(cx *cuda.Ctx, send, recv cuda.DevicePtr, count int64, dt ir.DType, root int, s cuda.Stream) error {
	return c.call(cx, "ncclReduce", func(h uintptr) int32 {
		return c.a.reduce(uint64(send), uint64(recv), uint64(count), dtype(dt), opSum, int32(root), h, uintptr(s))
	})
}

// Send enqueues ncclSend of count elements to peer.
func (c *Comm) Send(cx *cuda.Ctx, buf cuda.DevicePtr, count int64, dt ir.DType, peer int, s cuda.Stream) error {
	return c.call(cx, "ncclSend", func(h uintptr) int32 {
		return c.a.send(uint64(buf), uint64(count), dtype(dt), int32(peer), h, uintptr(s))
	})
}

// Recv enqueues ncclRecv of count elements from peer.
func (c *Comm) Recv(cx *cuda.Ctx, buf cuda.DevicePtr, count int64, dt ir.DType, peer int, s cuda.Stream) error {
	return c.call(cx, "ncclRecv", func(h uintptr) int32 {
		return c.a.recv(uint64(buf), uint64(count), dtype(dt), int32(peer), h, uintptr(s))
	})
}

// GroupStart opens a group (ncclGroupStart): calls until GroupEnd are
// launched together. Groups are per thread, hence the Ctx.
func (c *Comm) GroupStart(cx *cuda.Ctx) error {
	return c.call(cx, "ncclGroupStart", func(uintptr) int32 { return c.a.groupStart() })
}

// GroupEnd closes a group and launches its calls.
func (c *Comm) GroupEnd(cx *cuda.Ctx) error {
	return c.call(cx, "ncclGroupEnd", func(uintptr) int32 { return c.a.groupEnd() })
}

// Buffers are the device addresses of a Plan's buffers.
type Buffers struct {
	In, Out    cuda.DevicePtr
	Send, Recv cuda.DevicePtr // staging: Plan.SendElems and Plan.RecvElems elements
}

func (b Buffers) at(r Ref, es int64) (cuda.DevicePtr, error) {
	var p cuda.DevicePtr
	switch r.Buf {
	case BufIn:
		p = b.In
	case BufOut:
		p = b.Out
	case BufSend:
		p = b.Send
	case BufRecv:
		p = b.Recv
	}
	if p == 0 {
		return 0, fmt.Errorf("no %s buffer", r.Buf)
	}
	return p.Add(r.Off * es), nil
}

// Run enqueues plan's calls on s over b, elements of type dt. It does not
// wait: Wait (or the stream's later work) does.
func (c *Comm) Run(cx *cuda.Ctx, p *Plan, dt ir.DType, b Buffers, s cuda.Stream) error {
	if err := c.onThread(cx); err != nil {
		return err
	}
	if p.Rank != c.rank || p.Size != c.size {
		return fmt.Errorf("nccl: plan for rank %d of %d run by rank %d of %d", p.Rank, p.Size, c.rank, c.size)
	}
	if _, err := DataType(dt); err != nil {
		return err
	}
	es := int64(dt.Size())
	inGroup := false
	for i, call := range p.Calls {
		var err error
		src, dst := cuda.DevicePtr(0), cuda.DevicePtr(0)
		if call.Kind != CallGroupStart && call.Kind != CallGroupEnd && call.Kind != CallRecv {
			if src, err = b.at(call.Src, es); err != nil {
				return fmt.Errorf("%s call %d (%v): %w", p.Kind, i, call, err)
			}
		}
		if call.Kind != CallGroupStart && call.Kind != CallGroupEnd && call.Kind != CallSend {
			if dst, err = b.at(call.Dst, es); err != nil {
				return fmt.Errorf("%s call %d (%v): %w", p.Kind, i, call, err)
			}
		}
		switch call.Kind {
		case CallCopy:
			err = cx.CopyRows(int(es), dst, src, call.Rows, call.Width, call.SrcPitch, call.DstPitch, s)
		case CallGroupStart:
			inGroup = true
			err = c.GroupStart(cx)
		case CallGroupEnd:
			inGroup = false
			err = c.GroupEnd(cx)
		case CallAllGather:
			err = c.AllGather(cx, src, dst, call.Count, dt, s)
		case CallReduceScatter:
			err = c.ReduceScatter(cx, src, dst, call.Count, dt, s)
		case CallAllReduce:
			err = c.AllReduce(cx, src, dst, call.Count, dt, s)
		case CallBroadcast:
			err = c.Broadcast(cx, src, dst, call.Count, dt, call.Peer, s)
		case CallReduce:
			err = c.Reduce(cx, src, dst, call.Count, dt, call.Peer, s)
		case CallSend:
			err = c.Send(cx, src, call.Count, dt, call.Peer, s)
		case CallRecv:
			err = c.Recv(cx, dst, call.Count, dt, call.Peer, s)
		}
		if err != nil {
			if inGroup {
				c.a.groupEnd() // leave the thread's group state clean
			}
			return fmt.Errorf("%s call %d (%v): %w", p.Kind, i, call, err)
		}
	}
	return nil
}

// Collective runs one collective op of a per-device program: it plans it,
// allocates the staging the plan needs, enqueues it on s, waits under the
// watchdog and frees the staging. in and out hold the op's input and
// output. A convenience for simple executors and tests; a pipelined
// executor calls PlanOp once and Run/Wait itself.
//
// The op must run over this communicator's whole group: a mesh program's
// sub-group collective (op.Attrs.Group naming some of the devices) needs
// a communicator of its own, which this one is not.
func (c *Comm) Collective(cx *cuda.Ctx, op *ir.Op, x *ir.Tensor, in, out cuda.DevicePtr, s cuda.Stream) error {
	if g := op.Attrs.Group; len(g) > 0 {
		whole := len(g) == c.size
		for r, d := range g {
			whole = whole && d == r
		}
		if !whole {
			return fmt.Errorf("%s %q runs over devices %v, a sub-group; this communicator spans all %d ranks (split one per group first)", op.Kind, op.Name, g, c.size)
		}
	}
	p, err := PlanOp(op, x, c.size)
	if err != nil {
		return err
	}
	if op.Kind == ir.OpAllReduce {
		p.Rank = c.rank
	}
	es := int64(x.DType.Size())
	b := Buffers{In: in, Out: out}
	var staged []cuda.DevicePtr
	defer func() {
		for _, q := range staged {
			cx.Free(q)
		}
	}()
	for _, st := range []struct {
		n   int64
		dst *cuda.DevicePtr
	}{{p.SendElems, &b.Send}, {p.RecvElems, &b.Recv}} {
		if st.n == 0 {
			continue
		}
		q, err := cx.Alloc(int(st.n * es))
		if err != nil {
			return err
		}
		staged = append(staged, q)
		*st.dst = q
	}
	if err := c.Run(cx, p, x.DType, b, s); err != nil {
		return err
	}
	return c.Wait(cx, s, fmt.Sprintf("%s %q", op.Kind, op.Name))
}
