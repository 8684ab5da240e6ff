package cost

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
)

func paperModel(t *testing.T, opt Options) *Model {
	t.Helper()
	c, ok := cluster.Builtin("paper-16")
	if !ok {
		t.Fatal("no paper-16")
	}
	m, err := New(c, opt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The default V100-SXM2 : P100-PCIe speed ratio (the HAP paper measured ≈ 1.80 on its models):
// compute-bound matmul-heavy and conv-heavy work 15.7 / (9.3 × 0.93) ≈ 1.815, memory-bound work
// 900 / 732 ≈ 1.23, and a BERT-like mix (matmuls plus element-wise/normalisation traffic) ≈ 1.75.
func TestV100P100Ratio(t *testing.T) {
	m := paperModel(t, Options{})
	const v100, p100 = 0, 4 // paper-16: devices 0–3 are V100, 4–15 P100
	if m.Spec(v100).Name != "V100-SXM2-16GB" || m.Spec(p100).Name != "P100-PCIE-16GB" {
		t.Fatalf("unexpected devices %s, %s", m.Spec(v100).Name, m.Spec(p100).Name)
	}
	ratio := func(ws ...ir.Work) float64 {
		tv, tp := 0.0, 0.0
		for _, w := range ws {
			tv += m.ComputeTime(v100, w)
			tp += m.ComputeTime(p100, w)
		}
		return tp / tv
	}
	peakRatio := 15.7 / (9.3 * SustainedClockP100PCIe)
	// A 4096×4096×4096 SGEMM: 2·4096³ FLOPs, 3·4096²·4 bytes.
	matmul := ir.Work{Class: ir.ClassMatMul, FLOPs: 2 * math.Pow(4096, 3), Bytes: 3 * 4096 * 4096 * 4}
	// A VGG-style 3×3 conv, 256→256 channels on 256 images of 8×8: FLOPs 2·256·64·256·256·9.
	conv := ir.Work{Class: ir.ClassConv, FLOPs: 2 * 256 * 64 * 256 * 256 * 9, Bytes: 4 * (2*256*64*256 + 256*256*9)}
	elementwise := ir.Work{Class: ir.ClassElementwise, FLOPs: 1e8, Bytes: 1.2e9}
	for _, tc := range []struct {
		name string
		work []ir.Work
		want float64
		tol  float64
	}{
		// The fixed terms (launch overhead, small-kernel fill time) pull the ratios of finite kernels
		// a little below the rates'.
		{"matmul-heavy", []ir.Work{matmul}, peakRatio, 0.005},
		{"conv-heavy", []ir.Work{conv}, peakRatio, 0.02},
		{"memory-bound", []ir.Work{elementwise}, 900.0 / 732, 0.005},
		{"BERT-like mix", []ir.Work{matmul, matmul, matmul, matmul, matmul, matmul, matmul, matmul,
			{Class: ir.ClassNormalization, FLOPs: 1e8, Bytes: 4e9}, {Class: ir.ClassElementwise, FLOPs: 1e8, Bytes: 4e9}}, 1.75, 0.01},
	} {
		got := ratio(tc.work...)
		t.Logf("%s: V100/P100 = %.3f", tc.name, got)
		if math.Abs(got-tc.want) > tc.tol {
			t.Errorf("%s: ratio %.4f, want %.4f", tc.name, got, tc.want)
		}
	}
	if math.Abs(peakRatio-1.8152) > 1e-4 {
		t.Errorf("compute-bound ratio %.4f, want ≈ 1.815", peakRatio)
	}
}

func TestComputeRoofline(t *testing.T) {
	m := paperModel(t, Options{})
	// V100: matmul rate 15.7e12 × 0.8 = 12.56e12; memory 900e9 × 0.8 = 720e9.
	for _, tc := range []struct {
		name string
		w    ir.Work
		want float64
	}{
		// A matmul pays the small-kernel fill time (a constant in time) and every kernel its launch.
		{"compute bound", ir.Work{Class: ir.ClassMatMul, FLOPs: 12.56e12, Bytes: 1e9}, 1 + SmallKernelFillTime + KernelLaunchOverhead},
		{"memory bound", ir.Work{Class: ir.ClassElementwise, FLOPs: 1e9, Bytes: 720e9}, 1 + KernelLaunchOverhead},
		{"unknown class uses default", ir.Work{Class: "fft", FLOPs: 15.7e12 * DefaultEfficiency, Bytes: 0}, 1 + KernelLaunchOverhead},
		{"attention launches its kernels", ir.Work{Class: ir.ClassAttention, Bytes: 720e9}, 1 + AttentionKernels*KernelLaunchOverhead},
		// A matmul of F½ = rate × SmallKernelFillTime FLOPs runs at half its class efficiency.
		{"small matmul at half efficiency", ir.Work{Class: ir.ClassMatMul, FLOPs: 12.56e12 * SmallKernelFillTime}, 2*SmallKernelFillTime + KernelLaunchOverhead},
		{"negative counts as zero", ir.Work{Class: ir.ClassMatMul, FLOPs: -5, Bytes: -5}, 0},
		{"no work", ir.Work{}, 0},
	} {
		if got := m.ComputeTime(0, tc.w); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %g s, want %g s", tc.name, got, tc.want)
		}
	}
}

func TestHalfPrecision(t *testing.T) {
	m := paperModel(t, Options{Precision: FP16})
	// V100 tensor peak 125e12 × 0.8 × HalfPrecisionEfficiency.
	want := 125e12 * EfficiencyMatmul * HalfPrecisionEfficiency
	if got := m.FLOPRate(0, ir.ClassMatMul); math.Abs(got-want) > 1 {
		t.Errorf("FP16 matmul rate %g, want %g", got, want)
	}
	// Non-tensor classes stay on the FP32 peak.
	if got := m.FLOPRate(0, ir.ClassElementwise); got != 15.7e12*EfficiencyElementwise {
		t.Errorf("FP16 elementwise rate %g", got)
	}
	c, _ := cluster.Builtin("paper-8")
	if _, err := New(c, Options{Precision: BF16}); err == nil || !strings.Contains(err.Error(), "has no BF16") {
		t.Errorf("BF16 on Volta/Pascal: error %v", err)
	}
	c, _ = cluster.Builtin("a100-8")
	if _, err := New(c, Options{Precision: BF16}); err != nil {
		t.Errorf("BF16 on A100: %v", err)
	}
	if _, err := New(c, Options{Precision: "fp8"}); err == nil {
		t.Error("fp8 accepted")
	}
}

// Scaling every device's peak throughput and memory bandwidth by c scales every compute time by 1/c,
// beside its fixed terms (KernelLaunchOverhead, and SmallKernelFillTime where the FLOPs bound it).
func TestComputeScalesWithSpeed(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	classes := append(Classes(), "unknown-class")
	build := func(scale float64) *Model {
		var nodes []cluster.Node
		for i, d := range cluster.Catalog() {
			nodes = append(nodes, cluster.Node{Name: d.Name, Device: d.Name, Count: 1, Overrides: cluster.Overrides{
				FP32: d.FP32 * scale, FP16: d.FP16 * scale, MemBandwidth: d.MemBandwidth * scale}})
			_ = i
		}
		c := &cluster.Cluster{Name: "all", Nodes: nodes,
			Inter: cluster.InterLink{Link: cluster.Link{Class: cluster.LinkEthernet, Bandwidth: 1e9}, NICsPerNode: 1}}
		m, err := New(c, Options{Precision: FP16})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := build(1)
	for trial := 0; trial < 200; trial++ {
		c := math.Exp(rng.Float64()*6 - 3) // 0.05 … 20
		scaled := build(c)
		for i := 0; i < 20; i++ {
			w := ir.Work{Class: classes[rng.Intn(len(classes))], FLOPs: math.Exp(rng.Float64() * 30), Bytes: math.Exp(rng.Float64() * 25)}
			dev := rng.Intn(base.NumDevices())
			// The fixed terms (launch overhead, small-kernel fill time) do not scale; a work whose
			// bound (FLOPs or bytes) differs between the two models is not compared.
			fixed := func(m *Model) (float64, bool) {
				fill := 0.0
				if sizeDependent(w.Class) && w.FLOPs > 0 {
					fill = SmallKernelFillTime
				}
				// The bytes the model moves: half the work's under FP16's 2-byte activations.
				flopBound := w.FLOPs/m.FLOPRate(dev, w.Class)+fill > m.kernelBytes(w)/m.MemBandwidth(dev)
				if flopBound {
					return LaunchOverhead(w) + fill, true
				}
				return LaunchOverhead(w), false
			}
			f0, b0 := fixed(base)
			f1, b1 := fixed(scaled)
			if b0 != b1 {
				continue
			}
			t0, t1 := base.ComputeTime(dev, w)-f0, scaled.ComputeTime(dev, w)-f1
			if math.Abs(t1*c-t0) > 1e-9*(t0+f0+f1) {
				t.Fatalf("c = %g, %+v on %s: %g s scaled to %g s, want %g s", c, w, base.Spec(dev).Name, t0, t1, t0/c)
			}
		}
	}
}

func TestOverrideDropsSustainedFactor(t *testing.T) {
	c := &cluster.Cluster{Name: "x", Nodes: []cluster.Node{
		{Name: "a", Device: "P100-PCIE-16GB", Count: 1},
		{Name: "b", Device: "P100-PCIE-16GB", Count: 1, Overrides: cluster.Overrides{FP32: 9e12}},
	}, Inter: cluster.InterLink{Link: cluster.Link{Class: cluster.LinkEthernet, Bandwidth: 1e9}, NICsPerNode: 1}}
	m, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.FLOPRate(0, ir.ClassMatMul), 9.3e12*0.8*SustainedClockP100PCIe; math.Abs(got-want) > 1 {
		t.Errorf("catalog P100: %g, want %g", got, want)
	}
	if got, want := m.FLOPRate(1, ir.ClassMatMul), 9e12*0.8; math.Abs(got-want) > 1 {
		t.Errorf("measured P100: %g, want %g", got, want)
	}
}

func TestClassEfficiencyTable(t *testing.T) {
	for _, c := range Classes() {
		if e := ClassEfficiency(c); !(e > 0 && e <= 1) {
			t.Errorf("%s: efficiency %g", c, e)
		}
	}
	if ClassEfficiency("nope") != DefaultEfficiency {
		t.Error("unknown class does not use DefaultEfficiency")
	}
	if len(Classes()) != 10 {
		t.Errorf("%d classes", len(Classes()))
	}
}

func TestMemory(t *testing.T) {
	a := Memory{Parameters: 1 << 30, Gradients: 1 << 30, Activations: 2 << 30}
	st, err := OptimizerState("Adam", a.Parameters)
	if err != nil || st != 2<<30 {
		t.Fatalf("adam state %d, %v", st, err)
	}
	a.OptimizerState = st
	b := a.Add(Memory{CommBuffers: 1 << 29})
	if b.Total() != 6<<30+1<<29 || !b.Fits(7<<30) || b.Fits(6<<30) {
		t.Errorf("total %d", b.Total())
	}
	if got := b.String(); got != "params 1.00 + grads 1.00 + optimizer 2.00 + activations 2.00 + comm 0.50 = 6.50 GiB" {
		t.Errorf("String() = %q", got)
	}
	if _, err := OptimizerState("lion", 1); err == nil {
		t.Error("unknown optimizer accepted")
	}
}

func TestEfficiencyOption(t *testing.T) {
	m := paperModel(t, Options{Efficiency: map[string]float64{ir.ClassMatMul: 0.5}})
	if got := m.FLOPRate(0, ir.ClassMatMul); got != 15.7e12*0.5 {
		t.Errorf("matmul rate %g", got)
	}
	c, _ := cluster.Builtin("paper-8")
	if _, err := New(c, Options{Efficiency: map[string]float64{"b": 2, "a": 0}}); err == nil || !strings.Contains(err.Error(), `class "a"`) {
		t.Errorf("error %v", err)
	}
}

// TF32 puts the tensor classes of Ampere and later on half the FP16 tensor rate, with the same
// efficiencies (TF32ConvEfficiency for conv), and keeps 4-byte activations; Volta has none.
func TestTF32(t *testing.T) {
	c, _ := cluster.Builtin("a100-8")
	m, err := New(c, Options{Precision: TF32})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.FLOPRate(0, ir.ClassMatMul), 312e12*TF32TensorRatio*EfficiencyMatmul*HalfPrecisionEfficiency; math.Abs(got-want) > 1 {
		t.Errorf("TF32 matmul rate %g, want %g", got, want)
	}
	if got, want := m.FLOPRate(0, ir.ClassConv), 312e12*TF32TensorRatio*EfficiencyConv*TF32ConvEfficiency; math.Abs(got-want) > 1 {
		t.Errorf("TF32 conv rate %g, want %g", got, want)
	}
	if got := m.FLOPRate(0, ir.ClassElementwise); got != 19.5e12*EfficiencyElementwise {
		t.Errorf("TF32 elementwise rate %g", got)
	}
	if ActivationBytes(TF32) != 4 || ActivationBytes(FP32) != 4 || ActivationBytes(FP16) != 2 || ActivationBytes(BF16) != 2 {
		t.Error("activation bytes: want 4 for fp32 and tf32, 2 for fp16 and bf16")
	}
	p, _ := cluster.Builtin("paper-8")
	if _, err := New(p, Options{Precision: TF32}); err == nil || !strings.Contains(err.Error(), "no TF32") {
		t.Errorf("TF32 on Volta/Pascal: error %v", err)
	}
	for in, want := range map[string]Precision{"": FP32, "tf32": TF32, " FP16 ": FP16, "bf16": BF16} {
		if got, err := ParsePrecision(in); err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParsePrecision("fp8"); err == nil {
		t.Error("fp8 parsed")
	}
}
