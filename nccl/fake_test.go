package nccl_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"hap/cpu"
	"hap/cuda"
	"hap/cuda/cudatest"
	"hap/ir"
	"hap/nccl"
)

// These tests run the real bindings, the real Plan execution and the
// watchdog against the CPU stand-in for libcuda and libnccl
// (package cuda/cudatest): ranks are goroutines, each with its own device
// thread, and the fake NCCL keeps NCCL's semantics and ABI (the 128-byte
// unique id passed by value, non-blocking set-up, streams that stay busy
// while a peer is missing).

var fake cudatest.Builder

type rankEnv struct {
	dev  *cuda.Device
	comm *nccl.Comm
}

// group starts n ranks on fake devices, joined in one communicator.
func group(t *testing.T, n int, timeout time.Duration) (*nccl.NCCL, []*rankEnv) {
	t.Helper()
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	ranks := make([]*rankEnv, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		dev, err := rt.OpenDevice(r % 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dev.Close() })
		ranks[r] = &rankEnv{dev: dev}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ranks[r].comm, errs[r] = lib.InitRank(ranks[r].dev, id, n, r, nccl.CommOptions{Timeout: timeout})
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, re := range ranks {
			re.comm.Destroy()
		}
	})
	return lib, ranks
}

func TestFakeVersionAndID(t *testing.T) {
	lib, err := nccl.Open(nccl.Options{Getenv: fake.Env(t)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := lib.Version()
	if err != nil || v != 22703 {
		t.Errorf("Version = %d, %v", v, err)
	}
	a, _ := lib.UniqueID()
	b, _ := lib.UniqueID()
	if a == b || a[127] != 0x5a {
		t.Errorf("unique ids %x… and %x…", a[:16], b[:16])
	}
	if !strings.HasSuffix(lib.Path(), "libnccl.so.2") {
		t.Errorf("Path = %s", lib.Path())
	}
}

// collective is one case: the op each rank runs and its shapes.
type collective struct {
	name          string
	kind          ir.OpKind
	attrs         ir.Attrs
	inShape       func(r int) ir.Shape
	outShape      func(r int) ir.Shape
	expectedCalls int // NCCL calls per rank, for the cost model's reading
}

func collectives() []collective {
	sizes := []int{3, 1, 2}
	var cs []collective
	for _, m := range []string{"padded", "grouped"} {
		calls := 1
		if m == "grouped" {
			calls = 3
		}
		cs = append(cs,
			collective{"all_gather/axis1/" + m, ir.OpAllGather, ir.Attrs{Axis: 1, Sizes: sizes, Method: m},
				func(r int) ir.Shape { return ir.Shape{2, sizes[r], 3} }, func(int) ir.Shape { return ir.Shape{2, 6, 3} }, calls},
			collective{"all_gather/axis0/" + m, ir.OpAllGather, ir.Attrs{Axis: 0, Sizes: sizes, Method: m},
				func(r int) ir.Shape { return ir.Shape{sizes[r], 4} }, func(int) ir.Shape { return ir.Shape{6, 4} }, calls},
			collective{"reduce_scatter/axis1/" + m, ir.OpReduceScatter, ir.Attrs{Axis: 1, Sizes: sizes, Method: m},
				func(int) ir.Shape { return ir.Shape{2, 6, 3} }, func(r int) ir.Shape { return ir.Shape{2, sizes[r], 3} }, calls},
			collective{"reduce_scatter/axis0/" + m, ir.OpReduceScatter, ir.Attrs{Axis: 0, Sizes: sizes, Method: m},
				func(int) ir.Shape { return ir.Shape{6, 4} }, func(r int) ir.Shape { return ir.Shape{sizes[r], 4} }, calls},
		)
	}
	split := []int{2, 0, 3}
	cs = append(cs,
		collective{"all_reduce", ir.OpAllReduce, ir.Attrs{}, func(int) ir.Shape { return ir.Shape{5, 3} }, func(int) ir.Shape { return ir.Shape{5, 3} }, 1},
		collective{"all_to_all", ir.OpAllToAll, ir.Attrs{Axes: []int{0, 1}, Sizes: sizes, Split: split},
			func(r int) ir.Shape { return ir.Shape{sizes[r], 5, 2} }, func(r int) ir.Shape { return ir.Shape{6, split[r], 2} }, -1},
	)
	return cs
}

func TestFakeCollectivesMatchCPU(t *testing.T) {
	const n = 3
	_, ranks := group(t, n, 10*time.Second)
	for _, c := range collectives() {
		t.Run(c.name+"/f32", func(t *testing.T) { runCollective[float32](t, ranks, c, ir.Float32) })
		t.Run(c.name+"/f64", func(t *testing.T) { runCollective[float64](t, ranks, c, ir.Float64) })
	}
}

func runCollective[F cpu.Float](t *testing.T, ranks []*rankEnv, c collective, dt ir.DType) {
	n := len(ranks)
	rng := rand.New(rand.NewPCG(3, 4))
	ins := make([]*cpu.Tensor[F], n)
	for r := range ins {
		ins[r] = cpu.NewTensor[F](c.inShape(r), dt)
		for i := range ins[r].Data {
			ins[r].Data[i] = F(rng.IntN(100)) // exact sums in float32 too
		}
	}
	op := func(r int) *ir.Op {
		a := c.attrs
		a.Rank = r
		return &ir.Op{Kind: c.kind, Name: c.name, Attrs: a}
	}
	// The CPU backend's collective is the reference.
	g := cpu.NewGroup(n)
	want := make([]*cpu.Tensor[F], n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		want[r] = cpu.NewTensor[F](c.outShape(r), dt)
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := cpu.Exec(&cpu.Ctx{Comm: g.Comm(r)}, op(r), []*cpu.Tensor[F]{ins[r]}, []*cpu.Tensor[F]{want[r]}); err != nil {
				t.Errorf("cpu rank %d: %v", r, err)
				g.Abort(err)
			}
		}(r)
	}
	wg.Wait()
	got := make([]*cpu.Tensor[F], n)
	errs := make([]error, n)
	for r := 0; r < n; r++ {
		got[r] = cpu.NewTensor[F](c.outShape(r), dt)
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			re := ranks[r]
			errs[r] = re.dev.Do(func(cx *cuda.Ctx) error {
				inB, outB := cuda.Bytes(ins[r].Data), cuda.Bytes(got[r].Data)
				in, err := cx.Alloc(len(inB))
				if err != nil {
					return err
				}
				defer cx.Free(in)
				out, err := cx.Alloc(len(outB))
				if err != nil {
					return err
				}
				defer cx.Free(out)
				if err := cx.CopyHtoD(in, inB); err != nil {
					return err
				}
				s, err := cx.NewStream()
				if err != nil {
					return err
				}
				defer cx.DestroyStream(s)
				x := &ir.Tensor{Name: "x", Shape: c.inShape(r), DType: dt}
				if p, err := nccl.PlanOp(op(r), x, n); err == nil && c.expectedCalls > 0 && p.NCCLCalls() != c.expectedCalls {
					return fmt.Errorf("%d NCCL calls, want %d: %v", p.NCCLCalls(), c.expectedCalls, p.Calls)
				}
				if err := re.comm.Collective(cx, op(r), x, in, out, s); err != nil {
					return err
				}
				return cx.CopyDtoH(outB, out)
			})
		}(r)
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		for i := range want[r].Data {
			if got[r].Data[i] != want[r].Data[i] {
				t.Fatalf("rank %d element %d: got %v, want %v", r, i, got[r].Data[i], want[r].Data[i])
			}
		}
	}
}

// allReduceAndWait enqueues an all-reduce of 4 floats on rank re and waits.
func allReduceAndWait(re *rankEnv) error {
	return re.dev.Do(func(cx *cuda.Ctx) error {
		p, err := cx.Alloc(16)
		if err != nil {
			return err
		}
		defer cx.Free(p)
		s, err := cx.NewStream()
		if err != nil {
			return err
		}
		defer cx.DestroyStream(s)
		if err := re.comm.AllReduce(cx, p, p, 4, ir.Float32, s); err != nil {
			return err
		}
		return re.comm.Wait(cx, s, "all_reduce")
	})
}

// TestFakeSilentPeer: rank 1 never joins the all-reduce. Rank 0 must not
// hang: after its timeout it aborts and names the cause.
func TestFakeSilentPeer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	_, ranks := group(t, 2, timeout)
	start := time.Now()
	err := allReduceAndWait(ranks[0])
	took := time.Since(start)
	if !errors.Is(err, nccl.ErrTimeout) || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Fatalf("err = %v; want ErrTimeout after 300ms", err)
	}
	if took < timeout || took > timeout+3*time.Second {
		t.Errorf("gave up after %v; timeout %v", took, timeout)
	}
	// The aborted communicator refuses more work, and the silent peer now
	// sees the failure instead of waiting for ever.
	if err := allReduceAndWait(ranks[0]); !errors.Is(err, nccl.ErrAborted) {
		t.Errorf("after abort: %v", err)
	}
	if err := allReduceAndWait(ranks[1]); !errors.Is(err, nccl.ErrPeerFailed) {
		t.Errorf("rank 1 after rank 0 aborted: %v; want ErrPeerFailed", err)
	}
}

// TestFakePeerFails: rank 1 dies (aborts) while rank 0 waits; rank 0 ends
// with ErrPeerFailed long before its timeout.
func TestFakePeerFails(t *testing.T) {
	_, ranks := group(t, 2, time.Minute)
	go func() {
		time.Sleep(100 * time.Millisecond)
		ranks[1].comm.Abort()
	}()
	start := time.Now()
	err := allReduceAndWait(ranks[0])
	if !errors.Is(err, nccl.ErrPeerFailed) {
		t.Fatalf("err = %v; want ErrPeerFailed", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to notice", took)
	}
}

// TestFakeInitTimeout: only one of two ranks joins; set-up times out.
func TestFakeInitTimeout(t *testing.T) {
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := rt.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	id, _ := lib.UniqueID()
	_, err = lib.InitRank(dev, id, 2, 0, nccl.CommOptions{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, nccl.ErrTimeout) || !strings.Contains(err.Error(), "communicator set-up") {
		t.Fatalf("err = %v; want a set-up timeout", err)
	}
	if _, err := lib.InitRank(dev, id, 2, 2, nccl.CommOptions{}); err == nil {
		t.Errorf("rank 2 of 2 accepted")
	}
}

func TestFakeWrongThread(t *testing.T) {
	_, ranks := group(t, 2, time.Second)
	err := ranks[1].dev.Do(func(cx *cuda.Ctx) error {
		return ranks[0].comm.AllReduce(cx, 0, 0, 1, ir.Float32, 0)
	})
	if err == nil || !strings.Contains(err.Error(), "inside that device's Do") {
		t.Errorf("using rank 0's communicator from rank 1's device: %v", err)
	}
}
