// Package cuda is hap's binding to the NVIDIA driver API (libcuda), the
// runtime compiler NVRTC (libnvrtc) and cuBLAS (libcublas), loaded at run
// time with purego: no CUDA toolkit, no cgo, and no GPU are needed to build
// it (CGO_ENABLED=0 works), and a machine without a driver gets ErrNoDriver
// from Open, never a panic.
//
// It owns:
//   - library discovery (lib.go): HAP_CUDA_LIB_DIR, then the folders pip
//     wheels use (site-packages/nvidia/{cu13,cu12,cublas,cuda_nvrtc,...}/lib),
//     then the sonames through the dynamic loader's own search;
//   - Runtime, the loaded libraries: no package-level mutable state; each
//     library is loaded lazily, once, through a sync.Once held by the Runtime;
//   - Device, one GPU's primary context bound to one OS thread: a goroutine
//     locked with runtime.LockOSThread runs every call for that device, fed
//     through a channel (device.go documents the rule);
//   - kernel launches whose parameters live in C memory (malloc from libc),
//     never in movable Go memory (launch.go documents the rule);
//   - the CUDA C sources of hap's kernels (kernels.go): elementwise,
//     normalisation, loss, optimiser, data movement, and the row passes,
//     layout changes and gathers around cuBLAS for attention, convolution,
//     pooling, top-2 gating and einsum; compiled by NVRTC at run time and
//     cached per device by source hash;
//   - the mapping from every ir operator kind to kernels, cuBLAS, a copy or
//     NCCL (ops.go), and per-op launch plans in pure Go (plan.go,
//     plan_nn.go), run on a stream by Ctx.Run.
//
// cuda imports ir (for the operator mapping) and nothing else of hap. It
// must not import cpu, executor or anything above them (its tests use cpu
// as the reference); package nccl builds on it. Package cudatest, for tests
// only, builds a CPU stand-in for the NVIDIA libraries that runs this
// package's real kernel text. docs/gpu-runtime.md describes the whole layer.
package cuda
