package cost

import (
	"fmt"
	"hap/ir"
	"math"
	"sort"
	"strings"
)

// Default efficiencies: the fraction of a device's peak FLOP/s an op class achieves when it is compute
// bound. Memory-bound classes rarely reach this limit; their time comes from the Bytes term. The values
// are typical FP32 figures for cuBLAS/cuDNN kernels at training sizes on Pascal to Hopper; a measured
// profile replaces them.
const (
	// EfficiencyMatmul: large SGEMMs reach ~90% of peak; transformer- and MLP-sized ones less.
	EfficiencyMatmul = 0.80
	// EfficiencyConv: cuDNN FP32 convolutions (implicit GEMM / Winograd) on CIFAR/ImageNet-sized layers.
	EfficiencyConv = 0.70
	// EfficiencyAttention: unfused attention — batched small GEMMs plus a softmax.
	EfficiencyAttention = 0.55
	// EfficiencyElementwise: element-wise kernels; almost always bound by Bytes instead.
	EfficiencyElementwise = 0.50
	// EfficiencyReduction: reductions (sum, mean, max) with their tree of partial results.
	EfficiencyReduction = 0.40
	// EfficiencyNormalization: layer/batch normalisation (two passes: statistics, then scale).
	EfficiencyNormalization = 0.40
	// EfficiencyEmbedding: gathers and scatter-adds with irregular access.
	EfficiencyEmbedding = 0.30
	// EfficiencyDataMovement: copies, transposes, concatenations (no FLOPs; bound by Bytes).
	EfficiencyDataMovement = 0.50
	// EfficiencyLoss: softmax/cross-entropy style losses.
	EfficiencyLoss = 0.40
	// EfficiencyOptimizer: fused optimizer updates (SGD, Adam); bound by Bytes in practice.
	EfficiencyOptimizer = 0.50
	// DefaultEfficiency is used for a class not listed above.
	DefaultEfficiency = 0.50
)

// MemoryBandwidthEfficiency is the fraction of the datasheet memory bandwidth that streaming kernels
// achieve (STREAM-like copies reach 75–90% on HBM2 and GDDR6 parts).
const MemoryBandwidthEfficiency = 0.80

// HalfPrecisionEfficiency scales the class efficiency of the matmul and attention classes on the
// tensor-core rate (TF32, FP16, BF16): tensor-core peaks are harder to reach than FP32 peaks (operand
// staging, epilogues). Checked against calibration rows dle-bertl-v100-fp16-x1/x8,
// dle-bertl-a100-tf32-x1 and dle-bertl-a100-fp16-x8.
const HalfPrecisionEfficiency = 0.75

// TensorConvEfficiency replaces HalfPrecisionEfficiency for the conv class at FP16/BF16: cuDNN's
// tensor-core convolutions reach a far smaller share of the tensor peak than GEMMs do (im2col staging,
// the many layers of 64 to 256 channels, the layout transposes around them), while FP32 convolutions
// stay close to EfficiencyConv. Fitted to calibration rows dle-rn50-v100-amp-x1/x8 and
// dle-rn50-a100-amp-x1/x8 (ResNet-50 at batch 256 reaches about 24% and 19% of the FP16 tensor peak
// overall, against 57% of the FP32 peak in dle-rn50-v100-fp32-x1).
const TensorConvEfficiency = 0.45

// TF32ConvEfficiency is TensorConvEfficiency at TF32: with 4-byte operands a TF32 convolution stages
// twice the bytes per tensor-core operation of an FP16 one, and ResNet-50 gains only 2.6× from TF32 to
// FP16 on an A100 where the peaks differ by 2× (rows dle-rn50-a100-tf32-x1/x8 against
// dle-rn50-a100-amp-x1/x8: about 15% of the TF32 peak overall). Fitted to rows dle-rn50-a100-tf32-x1/x8.
const TF32ConvEfficiency = 0.30

// tensorCoreEfficiency is the factor a tensor class's efficiency takes on the tensor-core rate at
// precision p (TF32, FP16 or BF16).
func tensorCoreEfficiency(class string, p Precision) float64 {
	switch {
	case class != ir.ClassConv:
		return HalfPrecisionEfficiency
	case p == TF32:
		return TF32ConvEfficiency
	}
	return TensorConvEfficiency
}

// Sustained-clock factors: the fraction of the boost-clock peak a board holds under sustained dense load
// within its power limit. They are the one device-specific compute calibration of the defaults; every
// other device is taken to hold its boost clock (factor 1). A per-node FP32/FP16 override in the cluster
// file, being a measurement, is used without them.
const (
	// SustainedClockP100PCIe: the 250 W P100 PCIe runs between its 1126 MHz base and 1303 MHz boost
	// clocks under dense FP32 load; 0.93 (≈1212 MHz) makes the default V100-SXM2 : P100-PCIe speed
	// ratio 15.7 / (9.3 × 0.93) ≈ 1.82, matching the ≈1.80 the HAP paper measured on its models
	// (peaks alone give 15.7 / 9.3 ≈ 1.69). It is a calibration to that measurement.
	SustainedClockP100PCIe = 0.93
	// SustainedClockT4: the 70 W T4 drops well below its 1590 MHz boost clock under dense load; an
	// estimate, measure with a profile for real predictions.
	SustainedClockT4 = 0.80
)

// TF32TensorRatio is the dense TF32 tensor-core rate as a fraction of the FP16 one (with FP32
// accumulate) on every architecture that has TF32: A100 156 / 312, H100 SXM 494.7 / 989.4, A10
// 62.5 / 125, L4 60 / 121, RTX 3090 35.6 / 71, RTX 4090 82.6 / 165.2 TFLOP/s (NVIDIA datasheets and
// architecture whitepapers). The catalog states the FP16 rate; TF32 is derived from it. Checked against
// calibration rows dle-rn50-a100-tf32-x1/x8 and dle-bertl-a100-tf32-x1.
const TF32TensorRatio = 0.5

// Precision selects which peak compute throughput applies and how wide activations are.
type Precision string

// Precisions.
const (
	// FP32: every class on the FP32 (CUDA-core) peak; 4-byte activations.
	FP32 Precision = "fp32"
	// TF32: FP32 storage (4-byte activations, FP32 weights and optimizer state), with the matmul, conv
	// and attention classes on the TF32 tensor-core rate (PyTorch's allow_tf32; Ampere and later).
	TF32 Precision = "tf32"
	// FP16: mixed precision: tensor classes on the FP16 tensor rate, 2-byte activations, FP32 master
	// weights and optimizer state.
	FP16 Precision = "fp16"
	// BF16: as FP16, with BF16 arithmetic (Ampere and later).
	BF16 Precision = "bf16"
)

// Precisions lists the precisions, in the order help texts show them.
func Precisions() []Precision { return []Precision{FP32, TF32, FP16, BF16} }

// ParsePrecision parses a precision name (fp32, tf32, fp16, bf16; "" is fp32).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return FP32, nil
	case FP32, TF32, FP16, BF16:
		return p, nil
	}
	return "", fmt.Errorf("unknown precision %q (known: fp32, tf32, fp16, bf16)", s)
}

// ActivationBytes is the bytes of one activation element at precision p: 2 under mixed precision
// (FP16, BF16), 4 otherwise (FP32 and TF32 keep FP32 storage).
func ActivationBytes(p Precision) int {
	if p == FP16 || p == BF16 {
		return 2
	}
	return 4
}

// Classes lists the known op classes, sorted.
func Classes() []string {
	c := []string{ir.ClassMatMul, ir.ClassConv, ir.ClassAttention, ir.ClassElementwise, ir.ClassReduction,
		ir.ClassNormalization, ir.ClassEmbedding, ir.ClassDataMovement, ir.ClassLoss, ir.ClassOptimizer}
	sort.Strings(c)
	return c
}

// ClassEfficiency is the default efficiency of an op class at FP32 (DefaultEfficiency when unknown).
func ClassEfficiency(class string) float64 {
	switch class {
	case ir.ClassMatMul:
		return EfficiencyMatmul
	case ir.ClassConv:
		return EfficiencyConv
	case ir.ClassAttention:
		return EfficiencyAttention
	case ir.ClassElementwise:
		return EfficiencyElementwise
	case ir.ClassReduction:
		return EfficiencyReduction
	case ir.ClassNormalization:
		return EfficiencyNormalization
	case ir.ClassEmbedding:
		return EfficiencyEmbedding
	case ir.ClassDataMovement:
		return EfficiencyDataMovement
	case ir.ClassLoss:
		return EfficiencyLoss
	case ir.ClassOptimizer:
		return EfficiencyOptimizer
	}
	return DefaultEfficiency
}

// usesTensorCores reports whether a class runs on the FP16/BF16 tensor peak at half precision.
func usesTensorCores(class string) bool {
	return class == ir.ClassMatMul || class == ir.ClassConv || class == ir.ClassAttention
}

// sustainedClock returns the sustained-clock factor of a catalog device.
func sustainedClock(device string) float64 {
	switch device {
	case "P100-PCIE-16GB":
		return SustainedClockP100PCIe
	case "T4":
		return SustainedClockT4
	}
	return 1
}

// hasBF16 reports whether an architecture computes in BF16 (Ampere and later).
func hasBF16(arch string) bool {
	return arch == "Ampere" || arch == "Ada" || arch == "Hopper"
}

// hasTF32 reports whether an architecture has TF32 tensor cores (Ampere and later, as BF16).
func hasTF32(arch string) bool { return hasBF16(arch) }

// KernelLaunchOverhead is the fixed time every kernel costs beyond its roofline: the host's launch
// through the framework (PyTorch eager's dispatcher, or hap's runtime) and the device's start and drain
// of a grid. It is what makes a model of many small kernels slower than its FLOPs and bytes say. Fitted
// to calibration rows h200-bertbase-eager-b8 and -b32 (BERT-Base, fp32, on one H200: ≈ 1000 kernels a
// step, where the step's rooflines come to about 21 ms at batch 8 and 67 ms at batch 32 against
// 28.7 ms and 73.8 ms measured); checked against the DeepLearningExamples rows (dle-*).
const KernelLaunchOverhead = 7.5e-6

// AttentionKernels is how many kernels one attention op (or its gradient) launches: hap's IR states
// attention as one op, and PyTorch eager runs it unfused — the scores' batched GEMM, the scale, the mask,
// the softmax, the dropout and the context's batched GEMM (the backward as many again). Used with
// KernelLaunchOverhead; checked against rows h200-bertbase-eager-b8/b32.
const AttentionKernels = 6

// Kernels is how many kernels the work w launches: none for no work (a view: reshape, a zero-byte
// slice), AttentionKernels for attention, one otherwise.
func Kernels(w ir.Work) int {
	if !(w.FLOPs > 0) && !(w.Bytes > 0) {
		return 0
	}
	if w.Class == ir.ClassAttention {
		return AttentionKernels
	}
	return 1
}

// LaunchOverhead is the fixed part of w's time: Kernels(w) × KernelLaunchOverhead.
func LaunchOverhead(w ir.Work) float64 { return float64(Kernels(w)) * KernelLaunchOverhead }

// SmallKernelFillTime sets how large a compute-bound kernel must be to approach its class efficiency:
// a GEMM, convolution or attention of F FLOPs runs at
//
//	efficiency(F) = efficiency[class] × F / (F + F½),   F½ = rate[class] × SmallKernelFillTime
//
// so a kernel of F½ FLOPs (the work the device does in SmallKernelFillTime at its full class rate) runs
// at half its class efficiency; equivalently its time is F / rate + SmallKernelFillTime. It stands for
// the waves that do not fill every SM (a 1024 × 768 × 768 GEMM is 48 output tiles of 128 × 128 on an
// H200's 132 SMs) and the tail of the last wave; a larger device needs a larger kernel to fill it,
// which the proportionality to the rate says. Fitted to calibration row h200-matmul-rate (BERT-Base's
// matmuls at batch 8 on an H200 average 37 TFLOP/s, most of them 1.2 GFLOP) and checked against
// h200-bertbase-eager-b8/b32 and the DeepLearningExamples BERT-Large rows (dle-bertl-*). A profile's
// measured rate is used as measured, without the curve.
const SmallKernelFillTime = 26e-6

// sizeDependent reports whether a class's efficiency follows the small-kernel curve: the tensor
// classes, whose kernels are tiled over the device's SMs.
func sizeDependent(class string) bool { return usesTensorCores(class) }

// ComputeTime is the time in seconds device dev takes for w:
//
//	roofline(FLOPs / achieved FLOP/s, Bytes / achieved memory bandwidth) + LaunchOverhead(w)
//
// where achieved FLOP/s is the profile's measurement for the device type and class if there is one,
// else peak × efficiency × sustained-clock factor (for the tensor classes, at the kernel's size:
// SmallKernelFillTime), and achieved bandwidth is the profile's measurement, else datasheet ×
// MemoryBandwidthEfficiency. Negative FLOPs or Bytes count as zero; no work costs nothing. dev must be
// a valid device index.
func (m *Model) ComputeTime(dev int, w ir.Work) float64 {
	t := m.KernelTime(dev, w)
	if t == 0 {
		return 0
	}
	return t + LaunchOverhead(w)
}

// FixedTime is the part of ComputeTime(dev, w) that does not shrink with the work: the launch
// overhead, and the small-kernel fill time when the FLOPs bound the kernel. A planner that prices a
// device's shard of an op as its share of the whole op's time adds this part once instead of scaling
// it (package encode), as the simulator prices each shard's kernel whole.
func (m *Model) FixedTime(dev int, w ir.Work) float64 {
	if !(w.FLOPs > 0) && !(w.Bytes > 0) {
		return 0
	}
	fixed := LaunchOverhead(w)
	d := &m.devs[dev]
	if _, measured := d.measured[w.Class]; w.FLOPs > 0 && !measured && sizeDependent(w.Class) {
		tf := w.FLOPs/d.flopRate(w.Class) + SmallKernelFillTime
		if tb := math.Max(m.kernelBytes(w), 0) / d.memBW; tf >= tb {
			fixed += SmallKernelFillTime
		}
	}
	return fixed
}

// KernelTime is ComputeTime without the launch overhead: the kernel's time on the device, as a
// profiler's device timer would measure it.
func (m *Model) KernelTime(dev int, w ir.Work) float64 {
	d := &m.devs[dev]
	tf, tb := 0.0, 0.0
	if w.FLOPs > 0 {
		tf = w.FLOPs / d.flopRate(w.Class)
		if _, measured := d.measured[w.Class]; !measured && sizeDependent(w.Class) {
			tf += SmallKernelFillTime
		}
	}
	if w.Bytes > 0 {
		tb = m.kernelBytes(w) / d.memBW
	}
	return math.Max(tf, tb)
}

// kernelBytes is the bytes kernel w moves at the model's precision. The IR
// counts 4-byte elements; under mixed precision (ActivationBytes 2) every
// kernel but the optimizer's moves half of that, since its activations,
// weight copies and activation gradients are 16-bit, while the optimizer
// reads and writes the FP32 master weights, gradients and state.
func (m *Model) kernelBytes(w ir.Work) float64 {
	if ActivationBytes(m.precision) < 4 && w.Class != ir.ClassOptimizer {
		return w.Bytes * float64(ActivationBytes(m.precision)) / 4
	}
	return w.Bytes
}

// FLOPRate is the achieved FLOP/s of device dev on class (what ComputeTime divides FLOPs by).
func (m *Model) FLOPRate(dev int, class string) float64 { return m.devs[dev].flopRate(class) }

// MemBandwidth is the achieved memory bandwidth of device dev in bytes/s.
func (m *Model) MemBandwidth(dev int) float64 { return m.devs[dev].memBW }

// flopRate is the achieved FLOP/s for a class on this device.
func (d *device) flopRate(class string) float64 {
	if r, ok := d.measured[class]; ok {
		return r
	}
	eff, ok := d.eff[class]
	if !ok {
		eff = ClassEfficiency(class)
	}
	peak := d.fp32
	if usesTensorCores(class) {
		switch d.precision {
		case FP16, BF16:
			peak = d.fp16
			eff *= tensorCoreEfficiency(class, d.precision)
		case TF32:
			peak = math.Max(d.fp32, d.fp16*TF32TensorRatio)
			eff *= tensorCoreEfficiency(class, d.precision)
		}
	}
	return peak * eff * d.sustained
}

// checkPrecision validates a precision for a device.
func checkPrecision(p Precision, name, arch string) error {
	switch p {
	case FP32, FP16:
		return nil
	case BF16:
		if !hasBF16(arch) {
			return fmt.Errorf("device %s (%s) has no BF16 arithmetic; use fp16 or fp32", name, arch)
		}
		return nil
	case TF32:
		if !hasTF32(arch) {
			return fmt.Errorf("device %s (%s) has no TF32 tensor cores; use fp32, fp16 or bf16", name, arch)
		}
		return nil
	}
	return fmt.Errorf("unknown precision %q (known: fp32, tf32, fp16, bf16)", p)
}
