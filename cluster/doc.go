// Package cluster describes the hardware hap plans for: the device catalog (peak throughput, memory and
// memory bandwidth of common NVIDIA GPUs, from vendor datasheets), the cluster description (nodes of
// devices, the links inside a node and between nodes), its YAML/JSON file format with line-numbered
// errors, and the built-in clusters (the HAP paper's setups and a few references).
//
// Devices are numbered densely, node by node in file order: node 0's devices first, then node 1's, and
// so on. Every other package refers to a device by this global index.
//
// Units: bandwidths are bytes per second, latencies seconds, memory bytes, throughput FLOP/s, all float64
// or int64 in SI base units. The file format accepts unit-suffixed strings ("10.4Gb/s", "5us", "16GiB",
// "15.7TFLOPS") or bare numbers in those base units; see docs/cluster-format.md.
//
// cluster owns hardware facts only. It imports nothing of hap; the cost model (package cost) turns these
// facts into times. It keeps no package-level mutable state: the catalog and the built-ins are built fresh
// by functions on each call.
package cluster
