package executor

import (
	"strings"
	"sync"
	"testing"

	"hap/cuda"
	"hap/ir"
	"hap/nccl"
	"hap/spmd"
)

// TestFakeCUDAOneRankPerProcess drives each rank of a plan through its own
// CUDA backend (CUDAOptions.Ranks, one rank each, sharing one NCCL id), as
// one process per GPU does. The stand-in's NCCL joins ranks within one
// process only, so the "processes" are goroutines here; the executor and
// the backends see exactly what separate processes would. Every one must
// report the job's total loss (all-reduced), equal to the CPU backend's,
// and its own rank's time only.
func TestFakeCUDAOneRankPerProcess(t *testing.T) {
	g, p := program(t, "mlp-tiny", "zero3", "hetero-3", ir.Float32)
	oneRankEach(t, g, p, fake.Env(t), func(r int) int { return r % 2 }, fakePlan)
}

// oneRankEach trains p with one CUDA backend per rank, each in its own
// goroutine, on GPU ordinal(r), and checks them against the CPU backend.
func oneRankEach(t *testing.T, g *ir.Graph, p *spmd.Program, env func(string) string, ordinal func(int) int, po cuda.PlanOptions) {
	t.Helper()
	opt := Options{DType: ir.Float32, Steps: 2, Seed: 7, Optimizer: ir.SGD(1e-2)}
	want, err := Train(g, p, opt)
	if err != nil {
		t.Fatalf("cpu backend: %v", err)
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err != nil {
		t.Fatalf("opening NCCL: %v", err)
	}
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	n := p.Devices
	got := make([]*Training, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// Each "process" loads its own handles, as a process would.
			rt, err := cuda.Open(cuda.Options{Getenv: env})
			if err != nil {
				errs[r] = err
				return
			}
			o := opt
			o.Backend = NewCUDA(CUDAOptions{
				Runtime: rt, NCCL: nccl.New(nccl.Options{Getenv: env}), Ranks: []int{r}, Ordinals: []int{ordinal(r)},
				ID: &id, Plan: po, Timeout: fakeCollectiveTimeout,
			})
			got[r], errs[r] = Train(g, p, o)
		}(r)
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		tr := got[r]
		if len(tr.Ranks) != 1 || tr.Ranks[0] != r || len(tr.Params) != 0 {
			t.Errorf("rank %d: ranks %v, %d assembled parameters (want [%d], none)", r, tr.Ranks, len(tr.Params), r)
		}
		if !strings.HasPrefix(tr.Devices[r], "GPU ") || tr.Devices[(r+1)%n] != "driven by another process" {
			t.Errorf("rank %d: devices %q", r, tr.Devices)
		}
		for k, s := range tr.Steps {
			var d Diff
			d.add("loss", []float64{s.Loss}, []float64{want.Steps[k].Loss})
			d.finish()
			if d.MaxRel > float32Tolerance {
				t.Errorf("rank %d step %d: loss %v, cpu backend %v (rel %.3g)", r, k+1, s.Loss, want.Steps[k].Loss, d.MaxRel)
			}
			for q, sec := range s.PerDevice {
				if (q == r) != (sec > 0) {
					t.Errorf("rank %d step %d: per-device times %v: only rank %d's is measured here", r, k+1, s.PerDevice, r)
					break
				}
			}
		}
	}
}

// TestCUDARanksChecked: a bad rank list or a missing id fails before any
// library is loaded, naming what is wrong.
func TestCUDARanksChecked(t *testing.T) {
	steps := []*ir.Graph{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	id := nccl.UniqueID{}
	cases := []struct {
		opt  CUDAOptions
		want string
	}{
		{CUDAOptions{Ranks: []int{}}, "drive none of the plan's 3 devices"},
		{CUDAOptions{Ranks: []int{3}, ID: &id}, "rank 3 is outside the plan's devices 0..2"},
		{CUDAOptions{Ranks: []int{1, 1}, ID: &id}, "distinct and increasing"},
		{CUDAOptions{Ranks: []int{1}}, "drives ranks [1] of 3: the job's NCCL unique id"},
	}
	for _, c := range cases {
		_, err := openCUDA[float32](c.opt, steps)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Ranks %v: error %v, want %q", c.opt.Ranks, err, c.want)
		}
	}
}
