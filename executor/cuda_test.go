package executor

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"hap/cluster"
	"hap/cpu"
	"hap/cuda"
	"hap/cuda/cudatest"
	"hap/ir"
	"hap/models"
	"hap/nccl"
	"hap/spmd"
	"hap/strategy"
)

// These tests run the CUDA backend against the CPU stand-in for libcuda,
// libnvrtc, libcublas and libnccl (package cuda/cudatest): the real
// executor, the real kernel text, the real bindings and the real NCCL
// plans, on machines without a GPU. The stand-in has two GPUs; ranks share
// them (rank r on GPU r mod 2), which the stand-in's NCCL allows.

var fake cudatest.Builder

// fakePlan keeps the stand-in fast: it runs each block's threads as OS
// threads, so few and small blocks.
var fakePlan = cuda.PlanOptions{Block: 32, MaxGrid: 2}

func fakeCUDA(t *testing.T, ranks int) *CUDA {
	t.Helper()
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatalf("opening the stand-in driver: %v", err)
	}
	lib, err := nccl.Open(nccl.Options{Getenv: env})
	if err != nil {
		t.Fatalf("opening the stand-in NCCL: %v", err)
	}
	ords := make([]int, ranks)
	for r := range ords {
		ords[r] = r % 2
	}
	return NewCUDA(CUDAOptions{Runtime: rt, NCCL: lib, Ordinals: ords, Plan: fakePlan, Timeout: fakeCollectiveTimeout})
}

// fakeCollectiveTimeout bounds each collective wait of the stand-in CUDA
// and NCCL. The stand-ins run every device's kernels on the CPU, so a peer
// can lag a whole step behind: on a loaded 2-core CI machine one step
// exceeded a minute and the watchdog aborted a healthy run. The test
// binary's own timeout still catches a real hang.
const fakeCollectiveTimeout = 10 * time.Minute

// Small clusters: three heterogeneous devices on two machines (uneven
// dp-cp shares, tp over three), and two devices in one machine (megatron
// is tensor parallel there).
const (
	hetero3YAML = `name: hetero-3
nodes:
  - {name: v100, device: V100, count: 1}
  - {name: p100, device: P100, count: 2, intra: {class: pcie, bandwidth: 10GB/s}}
inter: {class: ethernet, bandwidth: 10Gb/s}
`
	pairYAML = `name: pair
nodes:
  - {name: a100, device: A100, count: 2, intra: {class: nvlink, bandwidth: 200GB/s}}
`
)

func testCluster(t *testing.T, name string) *cluster.Cluster {
	t.Helper()
	src, inline := map[string]string{"hetero-3": hetero3YAML, "pair": pairYAML}[name]
	if !inline {
		c, err := cluster.Load(name) // a built-in cluster
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c, err := cluster.ParseCluster([]byte(src), name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func program(t *testing.T, model, strat, clusterName string, dt ir.DType) (*ir.Graph, *spmd.Program) {
	t.Helper()
	g, err := models.Load(model, models.Options{DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build(strat, g, testCluster(t, clusterName))
	if err != nil {
		t.Fatalf("%s %s: %v", model, strat, err)
	}
	return g, p
}

// TestFakeCUDAMatchesCPU trains zoo models under strategies on the CUDA
// backend (stand-in) and on the CPU backend, from the same parameters and
// batches, and compares every step's loss and the trained parameters.
func TestFakeCUDAMatchesCPU(t *testing.T) {
	// Adam runs on the MLP only. Elsewhere it turns rounding noise into
	// visible parameter differences: the attention key bias's exact
	// gradient is zero (softmax ignores a constant shift), so Adam's
	// normalised update is ±lr with the sign of the noise, and VGG's
	// near-zero conv-bias gradients sit close to Adam's ε (9.8e-6 relative
	// there). Any two summation orders differ so, CPU against CPU included.
	cases := []struct {
		model, strategy, cluster string
		opt                      ir.Optimizer
	}{
		{"mlp-tiny", "dp-ev", "hetero-3", ir.Adam(1e-3)},
		{"mlp-tiny", "zero3", "hetero-3", ir.SGD(1e-2)},
		{"bert-base-tiny", "dp-ev", "hetero-3", ir.SGD(1e-2)},
		{"bert-base-tiny", "dp-cp", "hetero-3", ir.SGD(1e-2)},
		{"bert-base-tiny", "tp", "hetero-3", ir.SGD(1e-2)},
		{"bert-base-tiny", "megatron", "pair", ir.SGD(1e-2)},
		{"vgg19-tiny", "dp-ev", "pair", ir.SGD(1e-2)},
		{"bert-moe-tiny", "ep", "hetero-3", ir.SGD(1e-2)},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.strategy+"/"+c.cluster, func(t *testing.T) {
			g, p := program(t, c.model, c.strategy, c.cluster, ir.Float32)
			opt := Options{DType: ir.Float32, Steps: 2, Seed: 7, Optimizer: c.opt}
			t0 := time.Now()
			want, err := Train(g, p, opt)
			if err != nil {
				t.Fatalf("cpu backend: %v", err)
			}
			cpuTime := time.Since(t0)
			opt.Backend = fakeCUDA(t, p.Devices)
			t0 = time.Now()
			got, err := Train(g, p, opt)
			if err != nil {
				t.Fatalf("cuda backend: %v", err)
			}
			t.Logf("%d devices (%s); cpu backend %v, cuda backend on the stand-in %v", p.Devices, strings.Join(got.Devices, ", "), cpuTime.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
			if got.Backend != "cuda" || len(got.Devices) != p.Devices {
				t.Errorf("backend %q with devices %v", got.Backend, got.Devices)
			}
			var loss, params Diff
			for k := range want.Steps {
				loss.add("loss", []float64{got.Steps[k].Loss}, []float64{want.Steps[k].Loss})
				if len(got.Steps[k].PerDevice) != p.Devices {
					t.Errorf("step %d: %d per-device times for %d devices", k+1, len(got.Steps[k].PerDevice), p.Devices)
				}
			}
			for name, w := range want.Params {
				params.add(name, got.Params[name], w)
			}
			loss.finish()
			params.finish()
			if math.IsNaN(got.Steps[0].Loss) || loss.MaxRel > float32Tolerance || params.MaxRel > float32Tolerance {
				t.Errorf("cuda vs cpu: loss rel %.3g (%v vs %v), params rel %.3g on %s", loss.MaxRel,
					got.Steps[len(got.Steps)-1].Loss, want.Steps[len(want.Steps)-1].Loss, params.MaxRel, params.Worst)
			}
			t.Logf("cuda vs cpu: loss rel %.2g, params rel %.2g (worst %s)", loss.MaxRel, params.MaxRel, params.Worst)
		})
	}
}

// TestFakeCUDAVerify runs Verify with the distributed side on the CUDA
// backend: loss, gradients and updated parameters against single-device
// training on the CPU, in float32 and float64.
//
// It runs once more in float64 with every collective on the compute stream
// (CUDAOptions.OneStream): both placements must train the same.
func TestFakeCUDAVerify(t *testing.T) {
	cases := []struct {
		dt        ir.DType
		oneStream bool
	}{{ir.Float32, false}, {ir.Float64, false}, {ir.Float64, true}}
	for _, tc := range cases {
		dt := tc.dt
		name := dt.String()
		if tc.oneStream {
			name += "/one-stream"
		}
		t.Run(name, func(t *testing.T) {
			g, p := program(t, "bert-base-tiny", "tp", "hetero-3", dt)
			b := fakeCUDA(t, p.Devices)
			b.opt.OneStream = tc.oneStream
			rep, err := Verify(g, p, Options{DType: dt, Steps: 2, Seed: 3, Optimizer: ir.SGD(1e-2), Backend: b})
			if err != nil {
				t.Fatal(err)
			}
			tol := float32Tolerance
			if dt == ir.Float64 {
				tol = float64Tolerance
			}
			if rep.Backend != "cuda" || rep.Max() > tol {
				t.Errorf("%s backend: max relative error %.3g > %.0g: loss %+v grads %+v params %+v", rep.Backend, rep.Max(), tol, rep.Loss, rep.Grads, rep.Params)
			}
		})
	}
}

// TestFakeCUDASingleDevice: a one-device plan needs no NCCL (its
// collectives are copies).
func TestFakeCUDASingleDevice(t *testing.T) {
	c, err := cluster.ParseCluster([]byte("name: one\nnodes:\n  - {name: a, device: A100, count: 1}\n"), "one.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load("mlp-tiny", models.Options{DType: ir.Float64})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		t.Fatal(err)
	}
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	b := NewCUDA(CUDAOptions{Runtime: rt, Plan: fakePlan}) // no NCCL given: none may be loaded
	rep, err := Verify(g, p, Options{DType: ir.Float64, Steps: 2, Seed: 1, Optimizer: ir.Adam(1e-3), Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Max() > float64Tolerance {
		t.Errorf("max relative error %.3g", rep.Max())
	}
}

// TestFakeCUDAErrors: a rank count the machine cannot hold, and a step
// failure, end with errors naming the device; the failure aborts the other
// ranks instead of leaving them in a collective.
func TestFakeCUDAErrors(t *testing.T) {
	env := fake.Env(t)
	rt, err := cuda.Open(cuda.Options{Getenv: env})
	if err != nil {
		t.Fatal(err)
	}
	g, p := program(t, "mlp-tiny", "dp-ev", "hetero-3", ir.Float32)
	_, err = Train(g, p, Options{DType: ir.Float32, Steps: 1, Optimizer: ir.SGD(1e-2), Backend: NewCUDA(CUDAOptions{Runtime: rt, Plan: fakePlan})})
	if err == nil || !strings.Contains(err.Error(), "3 devices but this machine has 2 GPU(s)") {
		t.Errorf("3 ranks on 2 GPUs: %v", err)
	}

	ranks, err := lowerAll(g, p, Options{Optimizer: ir.SGD(1e-2)})
	if err != nil {
		t.Fatal(err)
	}
	steps := []*ir.Graph{ranks[0].step, ranks[1].step, ranks[2].step}
	devs, err := fakeCUDA(t, 3).Float32(steps)
	if err != nil {
		t.Fatal(err)
	}
	defer devs.Close()
	// Rank 1 gets no inputs: it fails before its first collective while
	// ranks 0 and 2 wait in theirs.
	batch := feeds(g, p, ranks, cpu.SyntheticBatch[float32](g, 1))
	fs := []map[ir.TensorID]*cpu.Tensor[float32]{batch[0], {}, batch[2]}
	t0 := time.Now()
	_, err = devs.Step(fs, false)
	if err == nil || !strings.HasPrefix(err.Error(), "device 1 (") && !strings.HasPrefix(err.Error(), "device 1:") || !strings.Contains(err.Error(), "no value fed") {
		t.Errorf("step with rank 1 unfed: %v", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("the failed step took %v: the other ranks were not released", d)
	}
	if _, err := devs.Step(batch, false); err == nil || !strings.Contains(err.Error(), "an earlier step failed") {
		t.Errorf("step after a failure: %v", err)
	}
	if err := devs.Close(); err != nil && !errors.Is(err, nccl.ErrAborted) {
		t.Errorf("close after a failure: %v", err)
	}
}
