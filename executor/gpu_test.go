package executor

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/cuda"
	"hap/ir"
	"hap/models"
	"hap/spmd"
	"hap/strategy"
)

// Tests named TestGPU* need a real NVIDIA GPU and driver (and NCCL for
// more than one GPU); elsewhere they skip with the reason.

func realRuntime(t testing.TB) (*cuda.Runtime, int) {
	t.Helper()
	rt, err := cuda.Open(cuda.Options{})
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		t.Skip("no CUDA driver: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rt.NVRTCVersion(); errors.Is(err, cuda.ErrNoNVRTC) {
		t.Skip("no NVRTC: " + err.Error())
	}
	n, err := rt.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	return rt, n
}

// TestGPUTrainMatchesCPU trains every tiny model, under a strategy that
// uses its layers, on the real GPUs (two ranks when there are two GPUs,
// else one) and compares losses and trained parameters with the CPU
// backend, as TestFakeCUDAMatchesCPU does on the stand-in; then Verify in
// float64 against single-device training.
func TestGPUTrainMatchesCPU(t *testing.T) {
	rt, n := realRuntime(t)
	n = min(n, 2)
	c, err := cluster.ParseCluster([]byte(fmt.Sprintf("name: local\nnodes:\n  - {name: gpu, device: H100, count: %d, intra: {class: nvlink, bandwidth: 300GB/s}}\n", n)), "local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ model, strategy string }{
		{"bert-base-tiny", "dp-ev"}, {"bert-base-tiny", "tp"}, {"vgg19-tiny", "dp-ev"}, {"vgg19-tiny", "zero3"},
		{"mlp-tiny", "dp-ev"}, {"gpt2-tiny", "megatron"}, {"vit-tiny", "dp-ev"}, {"bert-moe-tiny", "ep"},
	}
	for _, tc := range cases {
		model, strat := tc.model, tc.strategy
		t.Run(model+"/"+strat, func(t *testing.T) {
			// build loads the model in dt (Verify in float64 needs a
			// float64 graph) and plans it.
			build := func(dt ir.DType) (*ir.Graph, *spmd.Program) {
				g, err := models.Load(model, models.Options{DType: dt})
				if err != nil {
					t.Fatal(err)
				}
				p, err := strategy.Build(strat, g, c)
				if err != nil {
					t.Fatal(err)
				}
				return g, p
			}
			g, p := build(ir.Float32)
			opt := Options{DType: ir.Float32, Steps: 3, Seed: 7, Optimizer: ir.SGD(1e-2)}
			want, err := Train(g, p, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.Backend = NewCUDA(CUDAOptions{Runtime: rt})
			got, err := Train(g, p, opt)
			if err != nil {
				t.Fatal(err)
			}
			var loss, params Diff
			for k := range want.Steps {
				loss.add("loss", []float64{got.Steps[k].Loss}, []float64{want.Steps[k].Loss})
				t.Logf("step %d: loss %v (cpu %v), per-device seconds %v", k+1, got.Steps[k].Loss, want.Steps[k].Loss, got.Steps[k].PerDevice)
			}
			for name, w := range want.Params {
				params.add(name, got.Params[name], w)
			}
			loss.finish()
			params.finish()
			if loss.MaxRel > float32Tolerance || params.MaxRel > float32Tolerance {
				t.Errorf("on %v: loss rel %.3g, params rel %.3g on %s", got.Devices, loss.MaxRel, params.MaxRel, params.Worst)
			}
			g64, p64 := build(ir.Float64)
			rep, err := Verify(g64, p64, Options{DType: ir.Float64, Steps: 2, Seed: 3, Optimizer: ir.SGD(1e-2), Backend: opt.Backend})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Max() > float64Tolerance {
				t.Errorf("float64 verify: max relative error %.3g: loss %+v grads %+v params %+v", rep.Max(), rep.Loss, rep.Grads, rep.Params)
			}
		})
	}
}

// TestGPUProfile profiles bert-base (batch 8) on the real GPUs and checks
// the figures are physically plausible for the catalog entry the GPU is
// recognised as: matmul above 5% of the FP32 peak and below twice the
// FP16 tensor peak, memory bandwidth between 20% and 110% of the
// datasheet's; and that the file parses.
func TestGPUProfile(t *testing.T) {
	rt, _ := realRuntime(t)
	g, err := models.Load("bert-base", models.Options{Batch: 8, DType: ir.Float32})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ProfileCUDA(ProfileOptions{Runtime: rt, Model: g, Optimizer: ir.Adam(1e-3)})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := cluster.LookupDevice(res.DeviceType)
	for _, c := range res.Classes {
		t.Logf("%-14s %4d ops %10.4g GFLOP %9.3f ms %10.4g TFLOP/s", c.Class, c.Ops, c.FLOPs/1e9, c.Seconds*1e3, c.Rate/1e12)
	}
	t.Logf("%s (%s): memory %.4g GB/s; all-reduce %+v %s", res.GPU, res.DeviceType, res.MemBandwidth/1e9, res.AllReduce, res.NoCollective)
	var mm float64
	for _, c := range res.Classes {
		if c.Class == ir.ClassMatMul {
			mm = c.Rate
		}
	}
	if mm < 0.05*spec.FP32 || mm > 2*spec.FP16 {
		t.Errorf("matmul at %.4g TFLOP/s on a %s (FP32 peak %.4g TFLOP/s)", mm/1e12, spec.Name, spec.FP32/1e12)
	}
	if bw := res.MemBandwidth; bw < 0.2*spec.MemBandwidth || bw > 1.1*spec.MemBandwidth {
		t.Errorf("memory bandwidth %.4g GB/s on a %s (datasheet %.4g GB/s)", bw/1e9, spec.Name, spec.MemBandwidth/1e9)
	}
	if _, err := cost.ParseProfile(cost.FormatProfile(res.Profile, ""), "gpu.yaml"); err != nil {
		t.Error(err)
	}
}

// TestGPUOneRankPerProcess drives each of two GPUs through its own CUDA
// backend (CUDAOptions.Ranks, one NCCL id, real NCCL) as one process per
// GPU does, in goroutines of this process, and compares the all-reduced
// loss with the CPU backend's.
func TestGPUOneRankPerProcess(t *testing.T) {
	_, n := realRuntime(t)
	if n < 2 {
		t.Skipf("needs two GPUs; this machine has %d", n)
	}
	c, err := cluster.ParseCluster([]byte("name: local\nnodes:\n  - {name: gpu, device: H100, count: 2}\n"), "local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := models.Load("bert-base-tiny", models.Options{DType: ir.Float32})
	if err != nil {
		t.Fatal(err)
	}
	p, err := strategy.Build("tp", g, c)
	if err != nil {
		t.Fatal(err)
	}
	oneRankEach(t, g, p, nil, func(r int) int { return r }, cuda.PlanOptions{})
}

// BenchmarkGPUStreams trains bert-base (batch 16) under dp-ev on one real
// GPU, its collectives (copies, on one GPU) on a stream of their own or on
// the compute stream (CUDAOptions.OneStream), and reports the median of
// steps 2–11: what the events between the streams cost, and what the copies
// gain by overlapping the backward pass. (Overlapping NCCL needs two GPUs.)
func BenchmarkGPUStreams(b *testing.B) {
	rt, _ := realRuntime(b)
	c, err := cluster.ParseCluster([]byte("name: local\nnodes:\n  - {name: gpu, device: H100, count: 1}\n"), "local.yaml")
	if err != nil {
		b.Fatal(err)
	}
	g, err := models.Load("bert-base", models.Options{Batch: 16, DType: ir.Float32})
	if err != nil {
		b.Fatal(err)
	}
	p, err := strategy.Build("dp-ev", g, c)
	if err != nil {
		b.Fatal(err)
	}
	for _, one := range []bool{false, true} {
		b.Run(fmt.Sprintf("one-stream=%v", one), func(b *testing.B) {
			var med float64
			for b.Loop() {
				tr, err := Train(g, p, Options{DType: ir.Float32, Steps: 11, Seed: 1, OneBatch: true, Optimizer: ir.Adam(1e-3),
					Backend: NewCUDA(CUDAOptions{Runtime: rt, OneStream: one})})
				if err != nil {
					b.Fatal(err)
				}
				var secs []float64
				for _, st := range tr.Steps[1:] {
					secs = append(secs, st.PerDevice[0])
				}
				slices.Sort(secs)
				med = secs[len(secs)/2]
			}
			b.ReportMetric(med*1e3, "ms/step")
		})
	}
}
