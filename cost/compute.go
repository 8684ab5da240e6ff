package cost

import (
	"fmt"
	"hap/ir"
	"math"
	"sort"
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

// HalfPrecisionEfficiency scales the class efficiency of tensor-core classes (matmul, conv, attention)
// at FP16/BF16: tensor-core peaks are harder to reach than FP32 peaks (operand staging, epilogues).
const HalfPrecisionEfficiency = 0.75

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

// Precision selects which peak compute throughput applies.
type Precision string

// Precisions.
const (
	FP32 Precision = "fp32"
	FP16 Precision = "fp16"
	BF16 Precision = "bf16"
)

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

// ComputeTime is the time in seconds device dev takes for w: the roofline
// max(FLOPs / achieved FLOP/s, Bytes / achieved memory bandwidth), where achieved FLOP/s is the
// profile's measurement for the device type and class if there is one, else peak × efficiency ×
// sustained-clock factor, and achieved bandwidth is the profile's measurement, else datasheet ×
// MemoryBandwidthEfficiency. Negative FLOPs or Bytes count as zero. dev must be a valid device index.
func (m *Model) ComputeTime(dev int, w ir.Work) float64 {
	d := &m.devs[dev]
	t := 0.0
	if w.FLOPs > 0 {
		t = w.FLOPs / d.flopRate(w.Class)
	}
	if w.Bytes > 0 {
		t = math.Max(t, w.Bytes/d.memBW)
	}
	return t
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
	if d.half && usesTensorCores(class) {
		peak = d.fp16
		eff *= HalfPrecisionEfficiency
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
	}
	return fmt.Errorf("unknown precision %q (known: fp32, fp16, bf16)", p)
}
