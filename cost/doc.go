// Package cost is hap's cost model: how long an operator's work takes on a device, how long a
// collective takes over a group of devices, and how much memory a device holds. The planner (encode,
// solve), the lowering pass and the simulator all take their times from here, so a plan's predicted cost
// and its simulated cost agree by construction.
//
// Compute (Model.ComputeTime) is a roofline per op class:
//
//	time = max(FLOPs / (peak × efficiency[class] × sustained[device]) [+ SmallKernelFillTime],
//	           Bytes / (memBW × MemoryBandwidthEfficiency)) + Kernels(w) × KernelLaunchOverhead
//
// with peak the device's FP32 rate (or its TF32 or FP16/BF16 tensor rate for the matmul, conv and
// attention classes at those precisions), the fill time for the tensor classes (small kernels run below
// their class efficiency) and a launch overhead per kernel. Every constant names the calibration rows
// (bench/calibration/calibration.yaml) it is fitted to or checked against. The IR states each op's
// forward and backward work separately as ir.Work
// values; nothing here assumes backward = 2 × forward. A measured profile (Profile, docs/profile-format.md)
// replaces the estimate per device type and op class.
//
// With the defaults, a V100-SXM2 is 15.7 / (9.3 × 0.93) ≈ 1.82 times as fast as a P100-PCIe on
// compute-bound matmul-heavy or conv-heavy work (the HAP paper measured ≈ 1.80 on its models), and
// 900 / 732 ≈ 1.23 times on memory-bound work; TestV100P100Ratio pins these numbers.
//
// Communication (Model.Collective) is alpha-beta per link class with ring and hierarchical algorithms,
// a base latency per call (CollectiveBaseLatency), the achieved fraction of a NIC's line rate by
// transport (EthernetBandwidthEfficiency, InfiniBandBandwidthEfficiency),
// a group that spans nodes being bounded by the inter-node link and the node's NICs; uneven pieces are
// either padded (cost grows with the largest piece × count) or sent as grouped broadcasts/reduces (cost
// grows with the total plus one latency per call). The formulas are written out at Model.Collective and
// in docs/cost-model.md; they are tested against hand-computed values.
//
// Memory is a breakdown (parameters, gradients, optimizer state, live activations, communication
// buffers) with a total. ByteUnit is the one rule for the unit byte counts are written in (GB, MB,
// KB, B), for every package's messages.
//
// cost imports cluster (hardware facts) and ir for ir.Work alone (the work an op states, and its
// classes: one definition, which the cost model prices), and nothing else of hap; it must not import
// spmd, lower, devprog, sim or any planner package. A Model is immutable after New and safe for concurrent use; there is no package-level
// mutable state.
package cost
