package executor

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"hap/cluster"
	"hap/cost"
	"hap/cpu"
	"hap/cuda"
	"hap/ir"
	"hap/nccl"
)

// Profiling measures what the cost model estimates, on this machine's
// GPUs, through the same CUDA backend that runs plans:
//
//   - op throughput: one model's single-device training step is set up as
//     the backend runs it (same plans, same memory layout), run once to
//     warm up, then every op is timed alone with CUDA events over Repeat
//     launches; each op class's achieved rate is its ops' FLOPs (as ir
//     states them) over their time;
//   - memory bandwidth: a device-to-device copy of MemBytes, read plus
//     written bytes over time;
//   - collectives, with two or more GPUs of the same model: all-reduce over
//     all of them through NCCL, small (latency) and CollBytes (bandwidth),
//     fitted to the cost model's ring all-reduce,
//     t = 2(p−1)·α + 2(p−1)/p · bytes / bandwidth.
//
// The result is a cost.Profile (docs/profile-format.md) for the GPU's
// catalog type and the intra-node link class.

// ProfileOptions configure ProfileCUDA.
type ProfileOptions struct {
	// Runtime is the loaded CUDA libraries; nil opens them (cuda.Open).
	Runtime *cuda.Runtime
	// NCCL is the collective library; nil opens it (nccl.Open) when there
	// are GPUs to measure collectives on.
	NCCL *nccl.NCCL
	// Model is the forward graph whose training step's ops are timed.
	Model     *ir.Graph
	Optimizer ir.Optimizer
	// DeviceType is the catalog type of the GPUs; "" detects it from the
	// first GPU's name and memory (cluster.MatchDevice).
	DeviceType string
	// Link is the link class the collective measurement describes
	// (nvlink or pcie); "" picks nvlink for SXM boards, pcie otherwise.
	Link string
	// Ordinals are the GPUs to use; nil uses every GPU. The first one
	// times the ops and the memory bandwidth.
	Ordinals []int
	// Repeat is how many timed launches each measurement averages
	// (default 5).
	Repeat int
	// MemBytes is the size of the bandwidth copy (default 128 MiB);
	// CollBytes the size of the bandwidth all-reduce (default 32 MiB).
	MemBytes, CollBytes int64
	// Plan tunes kernel launches; Timeout bounds each collective wait.
	Plan    cuda.PlanOptions
	Timeout time.Duration
}

// ClassTiming is one op class's measurement.
type ClassTiming struct {
	Class   string  `json:"class"`
	Ops     int     `json:"ops"`
	FLOPs   float64 `json:"flops"`
	Bytes   float64 `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Rate is the achieved FLOP/s (FLOPs / Seconds); 0 for a class whose
	// ops do no arithmetic.
	Rate float64 `json:"flops_per_second"`
}

// CollectiveTiming is the all-reduce measurement.
type CollectiveTiming struct {
	Link         string  `json:"link"`
	Ranks        int     `json:"ranks"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`       // one all-reduce of Bytes
	SmallSeconds float64 `json:"small_seconds"` // one all-reduce of 8 bytes
	Bandwidth    float64 `json:"bandwidth"`     // fitted link bandwidth, bytes/s
	Latency      float64 `json:"latency"`       // fitted per-step latency α, seconds
}

// ProfileResult is what ProfileCUDA measured, and the profile made of it.
type ProfileResult struct {
	GPU        string        `json:"gpu"`
	DeviceType string        `json:"device_type"`
	GPUs       int           `json:"gpus"`
	Model      string        `json:"model"`
	Classes    []ClassTiming `json:"classes"`
	// MemBandwidth is the achieved device-memory bandwidth, bytes/s.
	MemBandwidth float64           `json:"mem_bandwidth"`
	AllReduce    *CollectiveTiming `json:"all_reduce,omitempty"`
	// NoCollective says why collectives were not measured.
	NoCollective string        `json:"no_collective,omitempty"`
	Profile      *cost.Profile `json:"profile"`
}

// ProfileCUDA measures op throughput, memory bandwidth and collective
// bandwidth on this machine's GPUs (see the comment above ProfileOptions).
func ProfileCUDA(opt ProfileOptions) (*ProfileResult, error) {
	if opt.Model == nil {
		return nil, fmt.Errorf("profile: no model to time")
	}
	for i := range opt.Model.Tensors {
		if t := &opt.Model.Tensors[i]; t.DType.IsFloat() && t.DType != ir.Float32 {
			return nil, fmt.Errorf("profile: model %s has %s tensor %q; profiles are measured in float32", opt.Model.Name, t.DType, t.Name)
		}
	}
	if opt.Repeat <= 0 {
		opt.Repeat = 5
	}
	if opt.MemBytes <= 0 {
		opt.MemBytes = 128 << 20
	}
	if opt.CollBytes <= 0 {
		opt.CollBytes = 32 << 20
	}
	rt := opt.Runtime
	if rt == nil {
		var err error
		if rt, err = cuda.Open(cuda.Options{}); err != nil {
			return nil, err
		}
	}
	ords := opt.Ordinals
	if ords == nil {
		n, err := rt.DeviceCount()
		if err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			ords = append(ords, i)
		}
	}
	if len(ords) == 0 {
		return nil, cuda.ErrNoDevice
	}
	info, err := rt.DeviceInfo(ords[0])
	if err != nil {
		return nil, err
	}
	spec, err := deviceType(opt.DeviceType, info)
	if err != nil {
		return nil, err
	}
	link := opt.Link
	if link == "" {
		link = cluster.LinkPCIe
		if strings.HasPrefix(spec.FormFactor, "SXM") {
			link = cluster.LinkNVLink
		}
	}
	if link != cluster.LinkNVLink && link != cluster.LinkPCIe {
		return nil, fmt.Errorf("profile: link class %q is not an intra-node class (nvlink, pcie)", link)
	}
	res := &ProfileResult{GPU: info.Name, DeviceType: spec.Name, Model: opt.Model.Name}
	if res.Classes, res.MemBandwidth, err = profileOps(rt, ords[0], opt); err != nil {
		return nil, fmt.Errorf("profile on GPU %d (%s): %w", ords[0], info.Name, err)
	}
	// Collectives run over the GPUs of the first one's model: the same
	// compute capability, multiprocessor count and memory size.
	same := []int{ords[0]}
	for _, o := range ords[1:] {
		i, err := rt.DeviceInfo(o)
		if err != nil {
			return nil, err
		}
		if i.ComputeCapability() == info.ComputeCapability() && i.SMs == info.SMs && i.TotalMem == info.TotalMem {
			same = append(same, o)
		}
	}
	res.GPUs = len(same)
	if len(same) < 2 {
		res.NoCollective = fmt.Sprintf("one GPU of this model (%s): no collective to measure", info.Name)
	} else {
		lib := opt.NCCL
		if lib == nil {
			lib, err = nccl.Open(nccl.Options{})
		}
		if err != nil {
			res.NoCollective = err.Error()
		} else if res.AllReduce, err = profileAllReduce(rt, lib, same, opt); err != nil {
			return nil, fmt.Errorf("profile all-reduce over GPUs %v: %w", same, err)
		} else {
			res.AllReduce.Link = link
		}
	}
	dp := cost.DeviceProfile{MemBandwidth: res.MemBandwidth, Classes: map[string]cost.ClassProfile{}}
	known := map[string]bool{}
	for _, c := range cost.Classes() {
		known[c] = true
	}
	for _, c := range res.Classes {
		if known[c.Class] && c.Rate > 0 {
			dp.Classes[c.Class] = cost.ClassProfile{FLOPS: c.Rate}
		}
	}
	res.Profile = &cost.Profile{Precision: cost.FP32, Devices: map[string]cost.DeviceProfile{spec.Name: dp}, Links: map[string]cost.LinkProfile{}}
	if a := res.AllReduce; a != nil && a.Bandwidth > 0 {
		lat := a.Latency
		res.Profile.Links[link] = cost.LinkProfile{Bandwidth: a.Bandwidth, Latency: &lat}
	}
	return res, nil
}

// deviceType resolves the catalog entry of the GPU described by info.
func deviceType(name string, info cuda.DeviceInfo) (cluster.DeviceSpec, error) {
	if name != "" {
		spec, ok := cluster.LookupDevice(name)
		if !ok {
			return spec, fmt.Errorf("profile: unknown device type %q (known: %s)", name, strings.Join(cluster.DeviceNames(), ", "))
		}
		return spec, nil
	}
	spec, ok := cluster.MatchDevice(info.Name, int64(info.TotalMem))
	if !ok {
		return spec, fmt.Errorf("profile: cannot tell which catalog device GPU %d (%q, %d GiB) is; give its type (one of %s)",
			info.Ordinal, info.Name, info.TotalMem>>30, strings.Join(cluster.DeviceNames(), ", "))
	}
	return spec, nil
}

// profileOps times every op of opt.Model's training step on GPU ordinal,
// and a device-to-device copy.
func profileOps(rt *cuda.Runtime, ordinal int, opt ProfileOptions) ([]ClassTiming, float64, error) {
	step, err := ir.BuildTrainStep(opt.Model, opt.Optimizer)
	if err != nil {
		return nil, 0, err
	}
	rk, err := newCUDARank[float32](rt, 0, 1, ordinal, step, opt.Plan, false)
	if err != nil {
		return nil, 0, err
	}
	defer rk.close()
	for i := range step.Tensors {
		t := &step.Tensors[i]
		if t.Kind == ir.Param || t.Kind == ir.State {
			if err := rk.dev.Upload(rk.addr[t.ID], cuda.Bytes(cpu.InitParam[float32](t, 1).Data)); err != nil {
				return nil, 0, err
			}
		}
	}
	feed := cpu.SyntheticBatch[float32](step, 2)
	byClass := map[string]*ClassTiming{}
	var bw float64
	err = rk.dev.Do(func(c *cuda.Ctx) error {
		// One whole step: every kernel loaded, every buffer touched.
		if _, err := rk.step(c, feed, false); err != nil {
			return fmt.Errorf("warm-up step: %w", err)
		}
		ev, err := newEvents(c)
		if err != nil {
			return err
		}
		defer ev.destroy(c)
		for i := range rk.ops {
			o := &rk.ops[i]
			if o.kernel == nil || len(o.kernel.Steps) == 0 {
				continue
			}
			secs, err := ev.time(c, rk.streams[computeStream], opt.Repeat, func() error { return rk.enqueue(c, i) })
			if err != nil {
				return fmt.Errorf("op %q (%s): %w", o.op.Name, o.op.Kind, err)
			}
			w, _ := step.Work(o.op.ID)
			ct := byClass[w.Class]
			if ct == nil {
				ct = &ClassTiming{Class: w.Class}
				byClass[w.Class] = ct
			}
			ct.Ops++
			ct.FLOPs += w.FLOPs
			ct.Bytes += w.Bytes
			ct.Seconds += secs
		}
		src, err := c.Alloc(int(opt.MemBytes))
		if err != nil {
			return fmt.Errorf("%d bytes for the bandwidth copy: %w", opt.MemBytes, err)
		}
		defer c.Free(src)
		dst, err := c.Alloc(int(opt.MemBytes))
		if err != nil {
			return fmt.Errorf("%d bytes for the bandwidth copy: %w", opt.MemBytes, err)
		}
		defer c.Free(dst)
		if err := c.Memset(src, 0, opt.MemBytes, rk.streams[computeStream]); err != nil {
			return err
		}
		copyOnce := func() error { return c.CopyDtoD(dst, src, opt.MemBytes, rk.streams[computeStream]) }
		if err := copyOnce(); err != nil {
			return err
		}
		secs, err := ev.time(c, rk.streams[computeStream], opt.Repeat, copyOnce)
		if err != nil {
			return fmt.Errorf("bandwidth copy: %w", err)
		}
		if secs > 0 {
			bw = 2 * float64(opt.MemBytes) / secs
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var out []ClassTiming
	for _, ct := range byClass {
		if ct.FLOPs > 0 && ct.Seconds > 0 {
			ct.Rate = ct.FLOPs / ct.Seconds
		}
		out = append(out, *ct)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out, bw, nil
}

// events is a pair of timing events.
type events struct{ a, b cuda.Event }

func newEvents(c *cuda.Ctx) (*events, error) {
	a, err := c.NewEvent(true)
	if err != nil {
		return nil, err
	}
	b, err := c.NewEvent(true)
	if err != nil {
		c.DestroyEvent(a)
		return nil, err
	}
	return &events{a, b}, nil
}

func (e *events) destroy(c *cuda.Ctx) {
	c.DestroyEvent(e.a)
	c.DestroyEvent(e.b)
}

// time runs f n times on stream s between the two events and returns the
// mean seconds per run.
func (e *events) time(c *cuda.Ctx, s cuda.Stream, n int, f func() error) (float64, error) {
	if err := c.Record(e.a, s); err != nil {
		return 0, err
	}
	for k := 0; k < n; k++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := c.Record(e.b, s); err != nil {
		return 0, err
	}
	if err := c.SyncEvent(e.b); err != nil {
		return 0, err
	}
	d, err := c.Elapsed(e.a, e.b)
	return d.Seconds() / float64(n), err
}

// profileAllReduce times float32 all-reduces over the GPUs ords (one
// communicator, one thread per GPU): 8 bytes for the latency, CollBytes
// for the bandwidth; a rank's time is the slowest rank's.
func profileAllReduce(rt *cuda.Runtime, lib *nccl.NCCL, ords []int, opt ProfileOptions) (*CollectiveTiming, error) {
	p := len(ords)
	devs := make([]*cuda.Device, p)
	defer func() {
		for _, d := range devs {
			if d != nil {
				d.Close()
			}
		}
	}()
	for r, o := range ords {
		d, err := rt.OpenDevice(o)
		if err != nil {
			return nil, err
		}
		devs[r] = d
	}
	id, err := lib.UniqueID()
	if err != nil {
		return nil, err
	}
	comms := make([]*nccl.Comm, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range devs {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = lib.InitRank(devs[r], id, p, r, nccl.CommOptions{Timeout: opt.Timeout})
		}(r)
	}
	wg.Wait()
	defer func() {
		for _, c := range comms {
			if c != nil {
				c.Destroy()
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	count := opt.CollBytes / 4
	small, large := make([]float64, p), make([]float64, p)
	for r := range devs {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = devs[r].Do(func(c *cuda.Ctx) error {
				s, err := c.NewStream()
				if err != nil {
					return err
				}
				defer c.DestroyStream(s)
				buf, err := c.Alloc(int(count * 4))
				if err != nil {
					return err
				}
				defer c.Free(buf)
				if err := c.Memset(buf, 0, count*4, s); err != nil {
					return err
				}
				ev, err := newEvents(c)
				if err != nil {
					return err
				}
				defer ev.destroy(c)
				cm := comms[r]
				for _, m := range []struct {
					n   int64
					out *float64
				}{{2, &small[r]}, {count, &large[r]}} {
					once := func() error { return cm.AllReduce(c, buf, buf, m.n, ir.Float32, s) }
					if err := once(); err != nil {
						return err
					}
					if err := cm.Wait(c, s, "warm-up all-reduce"); err != nil {
						return err
					}
					// The events wait on the stream; the watchdog waits on
					// the collectives first.
					if err := c.Record(ev.a, s); err != nil {
						return err
					}
					for k := 0; k < opt.Repeat; k++ {
						if err := once(); err != nil {
							return err
						}
					}
					if err := c.Record(ev.b, s); err != nil {
						return err
					}
					if err := cm.Wait(c, s, "timed all-reduce"); err != nil {
						return err
					}
					d, err := c.Elapsed(ev.a, ev.b)
					if err != nil {
						return err
					}
					*m.out = d.Seconds() / float64(opt.Repeat)
				}
				return nil
			})
			if errs[r] != nil {
				for _, c := range comms {
					c.Abort()
				}
			}
		}(r)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ct := &CollectiveTiming{Ranks: p, Bytes: count * 4}
	for r := range devs {
		ct.SmallSeconds = max(ct.SmallSeconds, small[r])
		ct.Seconds = max(ct.Seconds, large[r])
	}
	// t = 2(p−1)·α + 2(p−1)/p · bytes / bandwidth
	steps := 2 * float64(p-1)
	ct.Latency = ct.SmallSeconds / steps
	if rest := ct.Seconds - ct.SmallSeconds; rest > 0 {
		ct.Bandwidth = steps / float64(p) * float64(ct.Bytes) / rest
	}
	return ct, nil
}
