package cuda

import (
	"fmt"
	"sort"
	"strings"

	"hap/ir"
)

// The CUDA C kernels. One module per element type: the prelude defines T
// (the element type), A (the accumulation type: float for float32, double
// for float64), B (an unsigned integer of T's size, for copies that must
// move bits untouched, int64 ids included) and K(name), which appends the
// type suffix (hap_relu_f32). The body is the same text for every type.
//
// Conventions that keep the kernels checkable on a host (see the tests,
// which compile this very text with a C++ compiler and run it against the
// cpu package's kernels):
//   - element loops are grid-stride loops over long long indices;
//   - row kernels run one block per row (grid-stride over rows) with a
//     power-of-two block of at most 1024 threads and reduce through a
//     static __shared__ array with __syncthreads (no warp shuffles);
//   - no dynamic shared memory, no headers, no templates;
//   - invalid ids and labels, which the CPU backend reports as errors,
//     poison the result with NaN (a kernel cannot return an error).
//
// kernelSigs lists every kernel's parameters; Launch arguments are checked
// against it and the host harness is generated from it.

// ParamKind is the C type of one kernel parameter.
type ParamKind string

// Parameter kinds, with the Go type Launch wants for each.
const (
	PConstT   ParamKind = "const T*"         // DevicePtr
	PT        ParamKind = "T*"               // DevicePtr
	PConstA   ParamKind = "const A*"         // DevicePtr
	PA        ParamKind = "A*"               // DevicePtr
	PConstB   ParamKind = "const B*"         // DevicePtr
	PB        ParamKind = "B*"               // DevicePtr
	PConstI64 ParamKind = "const long long*" // DevicePtr (int64 ids, labels)
	PI64Buf   ParamKind = "long long*"       // DevicePtr (int64 scratch: MoE routes)
	PConstF64 ParamKind = "const double*"    // DevicePtr (float64 scratch)
	PF64Buf   ParamKind = "double*"          // DevicePtr (float64 scratch: MoE probabilities)
	PValT     ParamKind = "T"                // float32 or float64, as the module
	PI32      ParamKind = "int"              // int32
	PI64      ParamKind = "long long"        // int64
	PU64      ParamKind = "unsigned long long"
	PF64      ParamKind = "double" // float64
	PDims     ParamKind = "Dims"   // Dims
)

// KernelSig is one kernel's name (without the type suffix) and parameters.
type KernelSig struct {
	Name   string
	Params []ParamKind
}

// kernelSigs is the table of every kernel in kernelBody, actKernels, convKernels, bnKernels and
// arithKernels.
var kernelSigs = []KernelSig{
	{"relu", []ParamKind{PConstT, PT, PI64}},
	{"gelu", []ParamKind{PConstT, PT, PI64}},
	{"sigmoid", []ParamKind{PConstT, PT, PI64}},
	{"tanh", []ParamKind{PConstT, PT, PI64}},
	{"relu_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"gelu_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"sigmoid_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"tanh_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"silu", []ParamKind{PConstT, PT, PI64}}, // actKernels
	{"hardswish", []ParamKind{PConstT, PT, PI64}},
	{"hardsigmoid", []ParamKind{PConstT, PT, PI64}},
	{"silu_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"swiglu", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"swiglu_grad", []ParamKind{PConstT, PConstT, PConstT, PT, PT, PI64}},
	{"hardswish_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"hardsigmoid_grad", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"add", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"mul", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"bias_last", []ParamKind{PConstT, PConstT, PT, PI64, PI64}},
	{"bias_axes", []ParamKind{PConstT, PConstT, PT, PI64, PI32, PDims, PDims, PDims}},
	{"dropout", []ParamKind{PConstT, PT, PI64, PU64, PF64, PValT, PI32, PDims, PDims, PDims}},
	{"fill", []ParamKind{PT, PI64, PValT}},
	{"sgd", []ParamKind{PConstT, PConstT, PT, PI64, PValT}},
	{"adam", []ParamKind{PConstT, PConstT, PConstT, PConstT, PConstT, PT, PT, PT, PI64, PF64, PF64, PF64, PF64}},
	{"embedding", []ParamKind{PConstI64, PConstT, PT, PI64, PI64, PI64, PI32, PI64}},
	{"embedding_grad", []ParamKind{PConstI64, PConstT, PT, PI64, PI64, PI64, PI32, PI64}},
	{"gather", []ParamKind{PConstT, PConstI64, PT, PI64, PI64, PI64, PI64}},
	{"gather_grad", []ParamKind{PConstI64, PConstT, PT, PI64, PI64, PI64, PI64}},
	{"softmax", []ParamKind{PConstT, PT, PI64, PI64, PI32}},
	{"softmax_grad", []ParamKind{PConstT, PConstT, PT, PI64, PI64, PI32}},
	{"layer_norm", []ParamKind{PConstT, PConstT, PConstT, PT, PI64, PI64, PF64}},
	{"layer_norm_grad_dx", []ParamKind{PConstT, PConstT, PConstT, PT, PA, PI64, PI64, PF64}},
	{"layer_norm_grad_gb", []ParamKind{PConstT, PConstT, PConstA, PT, PT, PI64, PI64, PI64, PI64}},
	{"ce_rows", []ParamKind{PConstT, PConstI64, PA, PI64, PI64}},
	{"ce_grad", []ParamKind{PConstT, PConstI64, PConstT, PT, PI64, PI64}},
	{"nll_rows", []ParamKind{PConstT, PConstI64, PA, PI64, PI64}},
	{"nll_grad", []ParamKind{PConstI64, PConstT, PT, PI64, PI64}},
	{"sum_to_scalar", []ParamKind{PConstA, PT, PI64}},
	{"reduce_sum", []ParamKind{PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64, PI64, PI64}},
	{"reduce_sum_rows", []ParamKind{PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64}},
	{"permute", []ParamKind{PConstB, PB, PI64, PI32, PDims, PDims}},
	{"axis_copy", []ParamKind{PB, PConstB, PI64, PI64, PI64, PI64, PI64, PI64}},
	{"attn_softmax", []ParamKind{PT, PI64, PI64, PI64, PI32}},
	{"attn_softmax_grad", []ParamKind{PConstT, PT, PI64, PI64}},
	{"attn_mask_softmax", []ParamKind{PT, PConstT, PI64, PI64, PI64, PI32}},
	{"rotary", []ParamKind{PConstT, PConstT, PConstT, PT, PI64, PI64, PI64, PI64, PI32}},
	{"im2col", []ParamKind{PConstT, PT, PI64, PDims, PI64, PI64, PI64}},
	{"col2im", []ParamKind{PConstT, PT, PI64, PDims, PI64}},
	{"gconv", []ParamKind{PConstT, PConstT, PT, PI64, PDims, PDims}}, // convKernels
	{"gconv_grad_input", []ParamKind{PConstT, PConstT, PT, PI64, PDims, PDims}},
	{"gconv_grad_weight", []ParamKind{PConstT, PConstT, PT, PI64, PDims, PDims}},
	{"avg_pool", []ParamKind{PConstT, PT, PI64, PDims}},
	{"avg_pool_grad", []ParamKind{PConstT, PT, PI64, PDims}},
	{"bn_apply", []ParamKind{PConstT, PConstT, PConstT, PConstT, PConstT, PT, PI64, PI64, PI64, PF64, PF64}}, // bnKernels
	{"bn_grad_dx", []ParamKind{PConstT, PConstT, PConstT, PConstT, PConstT, PT, PI64, PI64, PI64, PF64, PF64}},
	{"bn_grad_stats", []ParamKind{PConstT, PConstT, PConstT, PConstT, PConstT, PT, PT, PT, PT, PI64, PI64, PI64, PF64, PF64}},
	{"bn_running", []ParamKind{PConstT, PConstT, PConstT, PConstT, PT, PT, PI64, PF64, PF64}},
	{"max_pool_pad", []ParamKind{PConstT, PT, PI64, PDims}},
	{"max_pool_pad_grad", []ParamKind{PConstT, PConstT, PT, PI64, PDims}},
	{"max_pool", []ParamKind{PConstT, PT, PI64, PDims}},
	{"max_pool_grad", []ParamKind{PConstT, PConstT, PT, PI64, PDims}},
	{"adaptive_avg_pool", []ParamKind{PConstT, PT, PI64, PDims}},
	{"adaptive_avg_pool_grad", []ParamKind{PConstT, PT, PI64, PDims}},
	{"top2_route", []ParamKind{PConstT, PI64Buf, PF64Buf, PI64, PI64}},
	{"top2_slots", []ParamKind{PI64Buf, PI64, PI64, PI64}},
	{"top2_write", []ParamKind{PConstI64, PConstF64, PT, PT, PI64, PI64, PI64}},
	{"top2_grad", []ParamKind{PConstT, PConstI64, PConstF64, PConstT, PT, PI64, PI64, PI64}},
	{"sub", []ParamKind{PConstT, PConstT, PT, PI64}}, // arithKernels
	{"div", []ParamKind{PConstT, PConstT, PT, PI64}},
	{"broadcast", []ParamKind{PConstT, PConstT, PT, PI64, PI32, PValT, PI32, PDims, PDims, PDims}},
	{"neg", []ParamKind{PConstT, PT, PI64}},
	{"exp", []ParamKind{PConstT, PT, PI64}},
	{"log", []ParamKind{PConstT, PT, PI64}},
	{"sqrt", []ParamKind{PConstT, PT, PI64}},
	{"rsqrt", []ParamKind{PConstT, PT, PI64}},
	{"reciprocal", []ParamKind{PConstT, PT, PI64}},
	{"pow_scalar", []ParamKind{PConstT, PT, PI64, PF64}},
	{"add_scalar", []ParamKind{PConstT, PT, PI64, PValT}},
	{"mul_scalar", []ParamKind{PConstT, PT, PI64, PValT}},
	{"mean", []ParamKind{PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64, PF64}},
	{"var", []ParamKind{PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64, PI64}},
	{"amax", []ParamKind{PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64}},
	{"amax_grad", []ParamKind{PConstT, PConstT, PConstT, PT, PI64, PI32, PDims, PDims, PI32, PDims, PDims, PI64}},
	{"rms_norm", []ParamKind{PConstT, PConstT, PT, PI64, PI64, PF64}},
	{"rms_norm_grad_dx", []ParamKind{PConstT, PConstT, PConstT, PT, PA, PI64, PI64, PF64}},
	{"rms_norm_grad_w", []ParamKind{PConstT, PConstT, PConstA, PT, PI64, PI64, PI64, PI64}},
	{"layer_norm_bare", []ParamKind{PConstT, PT, PI64, PI64, PF64}},
	{"layer_norm_bare_grad", []ParamKind{PConstT, PConstT, PT, PI64, PI64, PF64}},
}

// KernelSigs returns the kernel table, sorted by name.
func KernelSigs() []KernelSig {
	out := append([]KernelSig{}, kernelSigs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func sigOf(name string) (KernelSig, bool) {
	for _, s := range kernelSigs {
		if s.Name == name {
			return s, true
		}
	}
	return KernelSig{}, false
}

// Suffix is the kernel-name suffix of a module's element type.
func Suffix(dt ir.DType) string {
	switch dt {
	case ir.Float32:
		return "f32"
	case ir.Float64, ir.Int64:
		return "f64" // int64 tensors only move: the 8-byte copy kernels serve them
	}
	return "unknown"
}

// KernelName is the full C name of kernel base in dt's module.
func KernelName(base string, dt ir.DType) string { return "hap_" + base + "_" + Suffix(dt) }

// KernelSource returns the complete CUDA C source of dt's module. Int64
// shares Float64's module.
func KernelSource(dt ir.DType) string {
	var t, a, b string
	switch dt {
	case ir.Float32:
		t, a, b = "float", "float", "unsigned int"
	default:
		t, a, b = "double", "double", "unsigned long long"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "// hap kernels, element type %s. Generated by package cuda; compiled by NVRTC.\n", t)
	fmt.Fprintf(&sb, "typedef %s T;\ntypedef %s A;\ntypedef %s B;\n", t, a, b)
	fmt.Fprintf(&sb, "#define K(name) hap_##name##_%s\n", Suffix(dt))
	sb.WriteString(kernelPrelude)
	sb.WriteString(kernelBody)
	sb.WriteString(actKernels)
	sb.WriteString(convKernels)
	sb.WriteString(bnKernels)
	sb.WriteString(arithKernels)
	sb.WriteString("#undef K\n")
	return sb.String()
}

// kernelPrelude holds the helpers: overloads that pick the float or double
// math function, NaN and −∞ without headers, and block reductions.
const kernelPrelude = `
struct Dims { long long v[8]; };

__device__ __forceinline__ float  h_exp(float x)  { return expf(x); }
__device__ __forceinline__ double h_exp(double x) { return exp(x); }
__device__ __forceinline__ float  h_log(float x)  { return logf(x); }
__device__ __forceinline__ double h_log(double x) { return log(x); }
__device__ __forceinline__ float  h_erf(float x)  { return erff(x); }
__device__ __forceinline__ double h_erf(double x) { return erf(x); }
__device__ __forceinline__ float  h_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double h_tanh(double x){ return tanh(x); }
__device__ __forceinline__ float  h_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double h_sqrt(double x){ return sqrt(x); }
__device__ __forceinline__ float  h_max(float a, float b)   { return a > b ? a : b; }
__device__ __forceinline__ double h_max(double a, double b) { return a > b ? a : b; }

__device__ __forceinline__ A h_nan() {
	union { unsigned long long u; double d; } v; v.u = 0x7ff8000000000000ULL; return (A)v.d;
}
__device__ __forceinline__ A h_neginf() {
	union { unsigned long long u; double d; } v; v.u = 0xfff0000000000000ULL; return (A)v.d;
}

// block_sum and block_max reduce one value per thread over the block;
// blockDim.x must be a power of two no larger than 1024. Every thread of
// the block must call them; all get the result.
__device__ A block_sum(A v, A* sh) {
	unsigned t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s) sh[t] += sh[t + s];
		__syncthreads();
	}
	A r = sh[0];
	__syncthreads();
	return r;
}

__device__ A block_max(A v, A* sh) {
	unsigned t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s) sh[t] = h_max(sh[t], sh[t + s]);
		__syncthreads();
	}
	A r = sh[0];
	__syncthreads();
	return r;
}

#define GRID_STRIDE(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)
#define ROWS(r, rows) for (long long r = blockIdx.x; r < (rows); r += gridDim.x)
#define COLS(j, n) for (long long j = threadIdx.x; j < (n); j += blockDim.x)

// normcdf of the exact GELU: 0.5·(1 + erf(x/√2)).
__device__ __forceinline__ A h_phi(A x) { return (A)0.5 * ((A)1 + h_erf(x * (A)0.70710678118654752440)); }
`

// kernelBody is every kernel. Semantics follow package cpu exactly (see
// cpu/kernels.go); comments name where a formula comes from.
const kernelBody = `
// ---- elementwise ----
extern "C" __global__ void K(relu)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { T v = x[i]; y[i] = v > (T)0 ? v : (T)0; }
}
extern "C" __global__ void K(gelu)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { A v = (A)x[i]; y[i] = (T)(v * h_phi(v)); }
}
extern "C" __global__ void K(sigmoid)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { A v = (A)x[i]; y[i] = (T)((A)1 / ((A)1 + h_exp(-v))); }
}
extern "C" __global__ void K(tanh)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)h_tanh((A)x[i]); }
}
extern "C" __global__ void K(relu_grad)(const T* x, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) { dx[i] = x[i] > (T)0 ? dy[i] : (T)0; }
}
extern "C" __global__ void K(gelu_grad)(const T* x, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) {
		A v = (A)x[i];
		// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = exp(−x²/2)/√(2π)
		dx[i] = (T)((A)dy[i] * (h_phi(v) + v * h_exp(-v * v / (A)2) * (A)0.39894228040143267794));
	}
}
extern "C" __global__ void K(sigmoid_grad)(const T* y, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) { dx[i] = dy[i] * y[i] * ((T)1 - y[i]); }
}
extern "C" __global__ void K(tanh_grad)(const T* y, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) { dx[i] = dy[i] * ((T)1 - y[i] * y[i]); }
}
extern "C" __global__ void K(add)(const T* a, const T* b, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = a[i] + b[i]; }
}
extern "C" __global__ void K(mul)(const T* a, const T* b, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = a[i] * b[i]; }
}

// bias over the last axis: b has nb elements.
extern "C" __global__ void K(bias_last)(const T* x, const T* b, T* y, long long n, long long nb) {
	GRID_STRIDE(i, n) { y[i] = x[i] + b[i % nb]; }
}
// bias over any axes: element i's bias index is Σ (i / st[k] % sz[k])·bs[k].
extern "C" __global__ void K(bias_axes)(const T* x, const T* b, T* y, long long n, int naxes, Dims st, Dims sz, Dims bs) {
	GRID_STRIDE(i, n) {
		long long j = 0;
		for (int k = 0; k < naxes; k++) j += (i / st.v[k] % sz.v[k]) * bs.v[k];
		y[i] = x[i] + b[j];
	}
}

// dropout keeps element i when a splitmix64 hash of (seed, global index)
// is at least rate; this is cpu.DropoutKeep bit for bit. The global index
// of local element i: its coordinates in the local shape lshape, shifted by
// off, dotted with the global strides gstride (rank 0: i itself).
extern "C" __global__ void K(dropout)(const T* x, T* y, long long n, unsigned long long seed, double rate, T scale,
                                      int rank, Dims lshape, Dims off, Dims gstride) {
	GRID_STRIDE(i, n) {
		long long g = i;
		if (rank > 0) {
			g = 0;
			long long rem = i;
			for (int d = rank - 1; d >= 0; d--) {
				long long c = rem % lshape.v[d];
				rem /= lshape.v[d];
				g += (c + off.v[d]) * gstride.v[d];
			}
		}
		unsigned long long z = seed + (unsigned long long)g * 0x9e3779b97f4a7c15ULL;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		z ^= z >> 31;
		double u = (double)(z >> 11) / 9007199254740992.0;
		y[i] = u >= rate ? x[i] * scale : (T)0;
	}
}

extern "C" __global__ void K(fill)(T* y, long long n, T v) {
	GRID_STRIDE(i, n) { y[i] = v; }
}

// ---- optimisers ----
extern "C" __global__ void K(sgd)(const T* p, const T* g, T* y, long long n, T lr) {
	GRID_STRIDE(i, n) { y[i] = p[i] - lr * g[i]; }
}
// Adam in double, as cpu.adam: step is a one-element tensor holding t.
// The bias corrections are computed once per block, not per thread: two
// double pow calls per thread (on an H200, Adam over bert-base's 136 M
// parameters took 4.4 ms; once per block, 3.9 ms).
extern "C" __global__ void K(adam)(const T* p, const T* g, const T* m, const T* v, const T* step,
                                   T* p2, T* m2, T* v2, long long n, double lr, double b1, double b2, double eps) {
	__shared__ double corr[2];
	if (threadIdx.x == 0) {
		double t = (double)step[0];
		corr[0] = 1.0 - pow(b1, t);
		corr[1] = 1.0 - pow(b2, t);
	}
	__syncthreads();
	double c1 = corr[0], c2 = corr[1];
	GRID_STRIDE(i, n) {
		double gi = (double)g[i];
		double mi = b1 * (double)m[i] + (1.0 - b1) * gi;
		double vi = b2 * (double)v[i] + (1.0 - b2) * gi * gi;
		m2[i] = (T)mi;
		v2[i] = (T)vi;
		p2[i] = (T)((double)p[i] - lr * (mi / c1) / (sqrt(vi / c2) + eps));
	}
}

// ---- embedding ----
// y[i,:] = tab[row(ids[i]),:]; a vocabulary shard (partial) gives zeros for
// ids outside [off0, off0+v); an id outside the whole vocabulary gives NaN.
extern "C" __global__ void K(embedding)(const long long* ids, const T* tab, T* y, long long nids, long long d,
                                        long long v, int partial, long long off0) {
	GRID_STRIDE(e, nids * d) {
		long long i = e / d, j = e % d;
		long long r = ids[i] - (partial ? off0 : 0);
		if (r >= 0 && r < v) y[e] = tab[r * d + j];
		else y[e] = partial ? (T)0 : (T)h_nan();
	}
}
// dtab[row(ids[i]),:] += dy[i,:]; dtab must be zeroed first. Atomic adds:
// the summation order, hence the last bits, varies from run to run.
extern "C" __global__ void K(embedding_grad)(const long long* ids, const T* dy, T* dt, long long nids, long long d,
                                             long long v, int partial, long long off0) {
	GRID_STRIDE(e, nids * d) {
		long long i = e / d, j = e % d;
		long long r = ids[i] - (partial ? off0 : 0);
		if (r >= 0 && r < v) atomicAdd(&dt[r * d + j], dy[e]);
		else if (!partial) atomicAdd(&dt[0], (T)h_nan());
	}
}

// ---- gather along an axis (torch.gather) ----
// x is [outer, n, inner] around the axis, the index and y [outer, k,
// inner]: y[o,j,i] = x[o, idx[o,j,i], i]. A position outside [0, n) gives
// NaN (the CPU returns an error).
extern "C" __global__ void K(gather)(const T* x, const long long* idx, T* y, long long outer, long long k,
                                     long long n, long long inner) {
	GRID_STRIDE(e, outer * k * inner) {
		long long o = e / (k * inner), i = e % inner;
		long long p = idx[e];
		y[e] = (p >= 0 && p < n) ? x[(o * n + p) * inner + i] : (T)h_nan();
	}
}
// The scatter-add as a gather, deterministic and without atomics: one
// thread per dx element sums the dy of its column whose position is its
// own, in the column's order (the CPU's order, so the sums agree to the
// bit). A position outside [0, n) poisons row 0 of its column with NaN.
extern "C" __global__ void K(gather_grad)(const long long* idx, const T* dy, T* dx, long long outer, long long k,
                                          long long n, long long inner) {
	GRID_STRIDE(e, outer * n * inner) {
		long long o = e / (n * inner), r = (e / inner) % n, i = e % inner;
		A s = 0;
		for (long long j = 0; j < k; j++) {
			long long f = (o * k + j) * inner + i;
			long long p = idx[f];
			if (p == r) s += (A)dy[f];
			else if (r == 0 && (p < 0 || p >= n)) s += h_nan();
		}
		dx[e] = (T)s;
	}
}

// ---- softmax and log-softmax over the last dim (one block per row) ----
extern "C" __global__ void K(softmax)(const T* x, T* y, long long rows, long long n, int logspace) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		T* yr = y + r * n;
		A mx = h_neginf();
		COLS(j, n) mx = h_max(mx, (A)xr[j]);
		mx = block_max(mx, sh);
		A s = 0;
		COLS(j, n) s += h_exp((A)xr[j] - mx);
		s = block_sum(s, sh);
		A lse = mx + h_log(s);
		COLS(j, n) yr[j] = logspace ? (T)((A)xr[j] - lse) : (T)h_exp((A)xr[j] - lse);
	}
}
// softmax: dx = y·(dy − Σ dy·y); log-softmax: dx = dy − exp(y)·Σ dy.
extern "C" __global__ void K(softmax_grad)(const T* y, const T* dy, T* dx, long long rows, long long n, int logspace) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* yr = y + r * n;
		const T* dyr = dy + r * n;
		T* dxr = dx + r * n;
		A s = 0;
		COLS(j, n) s += logspace ? (A)dyr[j] : (A)dyr[j] * (A)yr[j];
		s = block_sum(s, sh);
		COLS(j, n) dxr[j] = logspace ? (T)((A)dyr[j] - h_exp((A)yr[j]) * s) : (T)((A)yr[j] * ((A)dyr[j] - s));
	}
}

// ---- layer norm over the last dim ----
extern "C" __global__ void K(layer_norm)(const T* x, const T* g, const T* b, T* y, long long rows, long long n, double eps) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		T* yr = y + r * n;
		A s = 0;
		COLS(j, n) s += (A)xr[j];
		A mean = block_sum(s, sh) / (A)n;
		A q = 0;
		COLS(j, n) { A d = (A)xr[j] - mean; q += d * d; }
		A var = block_sum(q, sh) / (A)n;
		A rstd = (A)1 / h_sqrt(var + (A)eps);
		COLS(j, n) yr[j] = (T)(((A)xr[j] - mean) * rstd * (A)g[j] + (A)b[j]);
	}
}
// dx per row (cpu.layerNormGrad); also stores each row's mean and 1/σ in
// stats[2r], stats[2r+1] for layer_norm_grad_gb.
extern "C" __global__ void K(layer_norm_grad_dx)(const T* x, const T* g, const T* dy, T* dx, A* stats,
                                                 long long rows, long long n, double eps) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		const T* dyr = dy + r * n;
		T* dxr = dx + r * n;
		A s = 0;
		COLS(j, n) s += (A)xr[j];
		A mean = block_sum(s, sh) / (A)n;
		A q = 0;
		COLS(j, n) { A d = (A)xr[j] - mean; q += d * d; }
		A rstd = (A)1 / h_sqrt(block_sum(q, sh) / (A)n + (A)eps);
		A m1 = 0, m2 = 0;
		COLS(j, n) {
			A xh = ((A)xr[j] - mean) * rstd;
			A dxh = (A)dyr[j] * (A)g[j];
			m1 += dxh;
			m2 += dxh * xh;
		}
		m1 = block_sum(m1, sh) / (A)n;
		m2 = block_sum(m2, sh) / (A)n;
		COLS(j, n) {
			A xh = ((A)xr[j] - mean) * rstd;
			A dxh = (A)dyr[j] * (A)g[j];
			dxr[j] = (T)(rstd * (dxh - m1 - xh * m2));
		}
		if (threadIdx.x == 0) { stats[2 * r] = mean; stats[2 * r + 1] = rstd; }
	}
}
// dgamma[j] = Σ_r dy[r,j]·x̂[r,j], dbeta[j] = Σ_r dy[r,j] over the rows
// r ∈ [sp·chunk, min((sp+1)·chunk, rows)), into dg[sp·n + j], db[sp·n + j]:
// one thread per (column, range), rows in order, so the sums are
// deterministic; with nsplit > 1 a reduce_sum adds the ranges.
extern "C" __global__ void K(layer_norm_grad_gb)(const T* x, const T* dy, const A* stats, T* dg, T* db,
                                                 long long rows, long long n, long long chunk, long long nsplit) {
	GRID_STRIDE(e, n * nsplit) {
		long long j = e % n, sp = e / n;
		long long r1 = (sp + 1) * chunk < rows ? (sp + 1) * chunk : rows;
		A ag = 0, ab = 0;
		for (long long r = sp * chunk; r < r1; r++) {
			A d = (A)dy[r * n + j];
			ag += d * ((A)x[r * n + j] - stats[2 * r]) * stats[2 * r + 1];
			ab += d;
		}
		dg[e] = (T)ag;
		db[e] = (T)ab;
	}
}

// ---- losses: per-row values into an A buffer, then sum_to_scalar ----
extern "C" __global__ void K(ce_rows)(const T* x, const long long* lab, A* loss, long long rows, long long n) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		A mx = h_neginf();
		COLS(j, n) mx = h_max(mx, (A)xr[j]);
		mx = block_max(mx, sh);
		A s = 0;
		COLS(j, n) s += h_exp((A)xr[j] - mx);
		s = block_sum(s, sh);
		if (threadIdx.x == 0) {
			long long l = lab[r];
			loss[r] = (l >= 0 && l < n) ? mx + h_log(s) - (A)xr[l] : h_nan();
		}
	}
}
// dx = (softmax(x) − onehot(label))·dloss, computed as cpu.crossEntropyGrad.
extern "C" __global__ void K(ce_grad)(const T* x, const long long* lab, const T* dl, T* dx, long long rows, long long n) {
	__shared__ A sh[1024];
	T s0 = dl[0];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		T* dxr = dx + r * n;
		A mx = h_neginf();
		COLS(j, n) mx = h_max(mx, (A)xr[j]);
		mx = block_max(mx, sh);
		A s = 0;
		COLS(j, n) s += h_exp((A)xr[j] - mx);
		s = block_sum(s, sh);
		A lse = mx + h_log(s);
		long long l = lab[r];
		bool ok = l >= 0 && l < n;
		COLS(j, n) {
			T p = (T)h_exp((A)xr[j] - lse);
			if (j == l) p -= (T)1;
			dxr[j] = ok ? p * s0 : (T)h_nan();
		}
	}
}
extern "C" __global__ void K(nll_rows)(const T* x, const long long* lab, A* loss, long long rows, long long n) {
	GRID_STRIDE(r, rows) {
		long long l = lab[r];
		loss[r] = (l >= 0 && l < n) ? -(A)x[r * n + l] : h_nan();
	}
}
extern "C" __global__ void K(nll_grad)(const long long* lab, const T* dl, T* dx, long long rows, long long n) {
	GRID_STRIDE(e, rows * n) {
		long long r = e / n, j = e % n, l = lab[r];
		if (l < 0 || l >= n) dx[e] = (T)h_nan();
		else dx[e] = j == l ? -dl[0] : (T)0;
	}
}
// y[0] = Σ buf[0..n): one block.
extern "C" __global__ void K(sum_to_scalar)(const A* buf, T* y, long long n) {
	__shared__ A sh[1024];
	A s = 0;
	COLS(i, n) s += buf[i];
	s = block_sum(s, sh);
	if (threadIdx.x == 0 && blockIdx.x == 0) y[0] = (T)s;
}

// ---- reductions ----
// y[sp·nout + o] = Σ over the reduced combinations k ∈ [sp·chunk,
// min((sp+1)·chunk, nred)) of x at o's kept coordinates (kshape, strides in
// x kstride) plus k's reduced ones (rshape, rstride). One thread per
// (output, range), each range in order: deterministic. With nsplit = 1 it
// is the whole sum; otherwise a second launch adds the nsplit ranges of
// each output in order (the planner's split reduction).
extern "C" __global__ void K(reduce_sum)(const T* x, T* y, long long nout, int kr, Dims kshape, Dims kstride,
                                         int rr, Dims rshape, Dims rstride, long long nred,
                                         long long chunk, long long nsplit) {
	GRID_STRIDE(e, nout * nsplit) {
		long long o = e % nout, sp = e / nout;
		long long base = 0, rem = o;
		for (int d = kr - 1; d >= 0; d--) { base += (rem % kshape.v[d]) * kstride.v[d]; rem /= kshape.v[d]; }
		long long k1 = (sp + 1) * chunk < nred ? (sp + 1) * chunk : nred;
		A s = 0;
		for (long long k = sp * chunk; k < k1; k++) {
			long long off = 0, q = k;
			for (int d = rr - 1; d >= 0; d--) { off += (q % rshape.v[d]) * rstride.v[d]; q /= rshape.v[d]; }
			s += (A)x[base + off];
		}
		y[e] = (T)s;
	}
}
// The same sum with one block per output element, its threads striding over
// the reduced combinations, then a fixed tree (block_sum): for reductions
// over x's innermost dimension, where neighbouring threads then read
// neighbouring elements. Deterministic for a given block size.
extern "C" __global__ void K(reduce_sum_rows)(const T* x, T* y, long long nout, int kr, Dims kshape, Dims kstride,
                                              int rr, Dims rshape, Dims rstride, long long nred) {
	__shared__ A sh[1024];
	ROWS(o, nout) {
		long long base = 0, rem = o;
		for (int d = kr - 1; d >= 0; d--) { base += (rem % kshape.v[d]) * kstride.v[d]; rem /= kshape.v[d]; }
		A s = 0;
		COLS(k, nred) {
			long long off = 0, q = k;
			for (int d = rr - 1; d >= 0; d--) { off += (q % rshape.v[d]) * rstride.v[d]; q /= rshape.v[d]; }
			s += (A)x[base + off];
		}
		s = block_sum(s, sh);
		if (threadIdx.x == 0) y[o] = (T)s;
	}
}

// ---- data movement (bits, so int64 ids move through the 8-byte module) ----
// y[o] = x[Σ coord_d(o)·sstride[d]] with coordinates in y's shape.
extern "C" __global__ void K(permute)(const B* x, B* y, long long n, int rank, Dims shape, Dims sstride) {
	GRID_STRIDE(o, n) {
		long long src = 0, rem = o;
		for (int d = rank - 1; d >= 0; d--) { src += (rem % shape.v[d]) * sstride.v[d]; rem /= shape.v[d]; }
		y[o] = x[src];
	}
}
// outer rows of w elements: dst[o·dstRow + dstOff + c] = src[o·srcRow + srcOff + c].
// concat, split, slice, pad and dynamic_slice are all this copy.
extern "C" __global__ void K(axis_copy)(B* dst, const B* src, long long outer, long long w,
                                        long long srcRow, long long srcOff, long long dstRow, long long dstOff) {
	GRID_STRIDE(e, outer * w) {
		long long o = e / w, c = e % w;
		dst[o * dstRow + dstOff + c] = src[o * srcRow + srcOff + c];
	}
}

// ---- attention (the GEMMs are cuBLAS calls; these are the row passes) ----
// Softmax of attention scores in place, as cpu.attnProbs: p holds rows =
// batch·s rows of t scores; row r is query r % s. A causal row i keeps
// keys j ≤ i and writes 0 after them.
extern "C" __global__ void K(attn_softmax)(T* p, long long rows, long long s, long long t, int causal) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		T* pr = p + r * t;
		long long n = t;
		if (causal) { long long i = r % s; n = i + 1 < t ? i + 1 : t; }
		A mx = h_neginf();
		COLS(j, n) mx = h_max(mx, (A)pr[j]);
		mx = block_max(mx, sh);
		A sum = 0;
		COLS(j, n) sum += h_exp((A)pr[j] - mx);
		sum = block_sum(sum, sh);
		A inv = (A)1 / sum;
		COLS(j, t) pr[j] = j < n ? (T)((A)(T)h_exp((A)pr[j] - mx) * inv) : (T)0;
	}
}
// attn_softmax with the additive mask m[S,T] added to each row (row r at
// position r mod s) before the softmax, in T as the CPU adds it.
extern "C" __global__ void K(attn_mask_softmax)(T* p, const T* m, long long rows, long long s, long long t, int causal) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		T* pr = p + r * t;
		long long i = r % s;
		const T* mr = m + i * t;
		long long n = t;
		if (causal) { n = i + 1 < t ? i + 1 : t; }
		COLS(j, n) pr[j] = (T)((A)pr[j] + (A)mr[j]);
		A mx = h_neginf();
		COLS(j, n) mx = h_max(mx, (A)pr[j]);
		mx = block_max(mx, sh);
		A sum = 0;
		COLS(j, n) sum += h_exp((A)pr[j] - mx);
		sum = block_sum(sum, sh);
		A inv = (A)1 / sum;
		COLS(j, t) pr[j] = j < n ? (T)((A)(T)h_exp((A)pr[j] - mx) * inv) : (T)0;
	}
}
// Rotary embeddings, half rotation (cpu/rotary.go): x[rows, d] with row r
// at position r mod s, tables c, sn [s, w] (w = d, or d/2 serving both
// halves: hi = 0); one thread per pair (j, j + d/2). adjoint: rotary_grad.
extern "C" __global__ void K(rotary)(const T* x, const T* c, const T* sn, T* y, long long rows, long long s, long long d, long long w, int adjoint) {
	long long h = d / 2, hi = w == h ? 0 : h;
	GRID_STRIDE(e, rows * h) {
		long long j = e % h, r = e / h, i = r % s;
		const T* xr = x + r * d;
		const T* cr = c + i * w;
		const T* sr = sn + i * w;
		T a = xr[j], b = xr[j + h];
		if (adjoint) {
			y[r * d + j] = a * cr[j] + b * sr[j + hi];
			y[r * d + j + h] = b * cr[j + hi] - a * sr[j];
		} else {
			y[r * d + j] = a * cr[j] - b * sr[j];
			y[r * d + j + h] = b * cr[j + hi] + a * sr[j + hi];
		}
	}
}
// dS = P ⊙ (dP − rowsum(dP ⊙ P)) in place in dp (cpu.attentionGrad);
// masked entries have P = 0, so their dS is 0.
extern "C" __global__ void K(attn_softmax_grad)(const T* p, T* dp, long long rows, long long t) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* pr = p + r * t;
		T* dr = dp + r * t;
		A s = 0;
		COLS(j, t) s += (A)pr[j] * (A)dr[j];
		s = block_sum(s, sh);
		COLS(j, t) dr[j] = (T)((A)pr[j] * ((A)dr[j] - s));
	}
}

// ---- convolution (NCHW; the products are cuBLAS GEMMs) ----
// g = {C, H, W, KH, KW, OH, OW, stride}; K = C·KH·KW rows, P = OH·OW pixels.
// im2col: for nb images of x (x points at the first), element (kk, n, p) of
// the column matrix, kk = (c·KH + i)·KW + j, goes to col[kk·rowStride +
// n·imgStride + p]: x[n, c, oy·S − pad + i, ox·S − pad + j], 0 in the padding.
extern "C" __global__ void K(im2col)(const T* x, T* col, long long nb, Dims g, long long pad, long long rowStride, long long imgStride) {
	long long C = g.v[0], H = g.v[1], W = g.v[2], KH = g.v[3], KW = g.v[4], OW = g.v[6], S = g.v[7];
	long long P = g.v[5] * OW, KK = C * KH * KW;
	GRID_STRIDE(e, nb * KK * P) {
		long long p = e % P, kk = (e / P) % KK, n = e / (P * KK);
		long long j = kk % KW, i = (kk / KW) % KH, c = kk / (KW * KH);
		long long y = (p / OW) * S - pad + i, xx = (p % OW) * S - pad + j;
		T v = (T)0;
		if (y >= 0 && y < H && xx >= 0 && xx < W) v = x[((n * C + c) * H + y) * W + xx];
		col[kk * rowStride + n * imgStride + p] = v;
	}
}
// col2im, im2col's adjoint as a gather (deterministic, no atomics): each
// element of dx (nb images) sums the column entries read from it, in (i, j)
// order as cpu.col2im adds them; col is laid out [n][kk][p].
extern "C" __global__ void K(col2im)(const T* col, T* dx, long long nb, Dims g, long long pad) {
	long long C = g.v[0], H = g.v[1], W = g.v[2], KH = g.v[3], KW = g.v[4], OH = g.v[5], OW = g.v[6], S = g.v[7];
	long long P = OH * OW, KK = C * KH * KW;
	GRID_STRIDE(e, nb * C * H * W) {
		long long xx = e % W, y = (e / W) % H, c = (e / (W * H)) % C, n = e / (W * H * C);
		const T* cn = col + n * KK * P;
		A s = 0;
		for (long long i = 0; i < KH; i++) {
			long long ty = y + pad - i;
			if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
			for (long long j = 0; j < KW; j++) {
				long long tx = xx + pad - j;
				if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
				s += (A)cn[((c * KH + i) * KW + j) * P + (ty / S) * OW + tx / S];
			}
		}
		dx[e] = (T)s;
	}
}

// ---- pooling (g = {H, W, OH, OW, kernel, stride}; planes = N·C) ----
// The first maximum of window (oy, ox) in row-major order; a NaN wins and
// propagates (cpu.poolArgmax).
__device__ long long pool_argmax(const T* xp, long long w, long long k, long long s, long long oy, long long ox) {
	long long y0 = oy * s, x0 = ox * s;
	long long best = y0 * w + x0;
	T bv = xp[best];
	for (long long i = 0; i < k; i++)
		for (long long j = 0; j < k; j++) {
			long long at = (y0 + i) * w + x0 + j;
			T v = xp[at];
			if (v > bv || (v != v && bv == bv)) { best = at; bv = v; }
		}
	return best;
}
extern "C" __global__ void K(max_pool)(const T* x, T* y, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KS = g.v[4], S = g.v[5];
	GRID_STRIDE(e, planes * OH * OW) {
		long long q = e % (OH * OW);
		const T* xp = x + (e / (OH * OW)) * H * W;
		y[e] = xp[pool_argmax(xp, W, KS, S, q / OW, q % OW)];
	}
}
// dx gathers dy from every window whose argmax it is, windows in (oy, ox)
// order as cpu.maxPool2dGrad scatters them.
extern "C" __global__ void K(max_pool_grad)(const T* x, const T* dy, T* dx, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KS = g.v[4], S = g.v[5];
	GRID_STRIDE(e, planes * H * W) {
		long long pl = e / (H * W), at = e % (H * W), yy = at / W, xx = at % W;
		const T* xp = x + pl * H * W;
		const T* dyp = dy + pl * OH * OW;
		long long oy0 = yy - KS + 1 > 0 ? (yy - KS + 1 + S - 1) / S : 0, oy1 = yy / S < OH - 1 ? yy / S : OH - 1;
		long long ox0 = xx - KS + 1 > 0 ? (xx - KS + 1 + S - 1) / S : 0, ox1 = xx / S < OW - 1 ? xx / S : OW - 1;
		T s = (T)0;
		for (long long oy = oy0; oy <= oy1; oy++)
			for (long long ox = ox0; ox <= ox1; ox++)
				if (pool_argmax(xp, W, KS, S, oy, ox) == at) s += dyp[oy * OW + ox];
		dx[e] = s;
	}
}
// Adaptive average pooling over PyTorch's bins: bin i of in → out covers
// [⌊i·in/out⌋, ⌈(i+1)·in/out⌉). Sums in double, as cpu.adaptiveAvgPool2d.
// g = {H, W, OH, OW}.
extern "C" __global__ void K(adaptive_avg_pool)(const T* x, T* y, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3];
	GRID_STRIDE(e, planes * OH * OW) {
		long long q = e % (OH * OW), i = q / OW, j = q % OW;
		const T* xp = x + (e / (OH * OW)) * H * W;
		long long rs = i * H / OH, re = ((i + 1) * H + OH - 1) / OH;
		long long cs = j * W / OW, ce = ((j + 1) * W + OW - 1) / OW;
		double s = 0;
		for (long long r = rs; r < re; r++)
			for (long long c = cs; c < ce; c++) s += (double)xp[r * W + c];
		y[e] = (T)(s / (double)((re - rs) * (ce - cs)));
	}
}
// Each dx element gathers dy[i,j]/|bin| from every bin holding it, in (i, j)
// order as cpu.adaptiveAvgPool2dGrad spreads them.
extern "C" __global__ void K(adaptive_avg_pool_grad)(const T* dy, T* dx, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3];
	GRID_STRIDE(e, planes * H * W) {
		long long at = e % (H * W), r = at / W, c = at % W;
		const T* dyp = dy + (e / (H * W)) * OH * OW;
		T s = (T)0;
		for (long long i = 0; i < OH; i++) {
			long long rs = i * H / OH, re = ((i + 1) * H + OH - 1) / OH;
			if (r < rs || r >= re) continue;
			for (long long j = 0; j < OW; j++) {
				long long cs = j * W / OW, ce = ((j + 1) * W + OW - 1) / OW;
				if (c < cs || c >= ce) continue;
				s += (T)((double)dyp[i * OW + j] / (double)((re - rs) * (ce - cs)));
			}
		}
		dx[e] = s;
	}
}

// ---- GShard top-2 gating (cpu.top2Routing) ----
// route holds 4 values per token: e1, e2, c1, c2 (slot, −1 when dropped);
// prob holds p1, p2. Probabilities are in double for every element type.
__device__ double top2_prob(const T* row, long long k, double m, double sum) { return exp((double)row[k] - m) / sum; }
__device__ void top2_stats(const T* row, long long e, double* m, double* sum) {
	double mx = (double)h_neginf();
	for (long long k = 0; k < e; k++) mx = (double)row[k] > mx ? (double)row[k] : mx;
	double s = 0;
	for (long long k = 0; k < e; k++) s += exp((double)row[k] - mx);
	*m = mx;
	*sum = s;
}
// Per token: the softmax, the first choice (highest probability, lowest
// index on ties) and the second (the same over the other experts).
extern "C" __global__ void K(top2_route)(const T* logits, long long* route, double* prob, long long tokens, long long e) {
	GRID_STRIDE(t, tokens) {
		const T* row = logits + t * e;
		double m, sum;
		top2_stats(row, e, &m, &sum);
		long long e1 = 0;
		double p1 = top2_prob(row, 0, m, sum);
		for (long long k = 1; k < e; k++) {
			double pk = top2_prob(row, k, m, sum);
			if (pk > p1) { e1 = k; p1 = pk; }
		}
		long long e2 = -1;
		double p2 = 0;
		for (long long k = 0; k < e; k++) {
			if (k == e1) continue;
			double pk = top2_prob(row, k, m, sum);
			if (e2 < 0 || pk > p2) { e2 = k; p2 = pk; }
		}
		route[4 * t] = e1;
		route[4 * t + 1] = e2;
		prob[2 * t] = p1;
		prob[2 * t + 1] = p2;
	}
}
// One thread per expert assigns its capacity slots in token order: first
// choices, then second choices after min(first choices, cap); a slot ≥ cap
// is dropped (−1).
extern "C" __global__ void K(top2_slots)(long long* route, long long tokens, long long e, long long cap) {
	GRID_STRIDE(x, e) {
		long long fill = 0;
		for (long long t = 0; t < tokens; t++)
			if (route[4 * t] == x) { route[4 * t + 2] = fill < cap ? fill : -1; fill++; }
		if (fill > cap) fill = cap;
		for (long long t = 0; t < tokens; t++)
			if (route[4 * t + 1] == x) {
				if (fill < cap) { route[4 * t + 3] = fill; fill++; }
				else route[4 * t + 3] = -1;
			}
	}
}
// combine[t,e,c] = p/(p1+p2) and dispatch[t,e,c] = 1 for each kept choice;
// both must be zeroed first.
extern "C" __global__ void K(top2_write)(const long long* route, const double* prob, T* combine, T* dispatch,
                                         long long tokens, long long e, long long cap) {
	GRID_STRIDE(t, tokens) {
		double p1 = prob[2 * t], p2 = prob[2 * t + 1], s = p1 + p2;
		long long e1 = route[4 * t], e2 = route[4 * t + 1], c1 = route[4 * t + 2], c2 = route[4 * t + 3];
		if (c1 >= 0) { long long i = (t * e + e1) * cap + c1; combine[i] = (T)(p1 / s); dispatch[i] = (T)1; }
		if (c2 >= 0) { long long i = (t * e + e2) * cap + c2; combine[i] = (T)(p2 / s); dispatch[i] = (T)1; }
	}
}
// dlogits of combine with the routing fixed (cpu.top2GateGrad).
extern "C" __global__ void K(top2_grad)(const T* logits, const long long* route, const double* prob, const T* dc, T* dl,
                                        long long tokens, long long e, long long cap) {
	GRID_STRIDE(t, tokens) {
		long long e1 = route[4 * t], e2 = route[4 * t + 1], c1 = route[4 * t + 2], c2 = route[4 * t + 3];
		double dg1 = c1 >= 0 ? (double)dc[(t * e + e1) * cap + c1] : 0.0;
		double dg2 = c2 >= 0 ? (double)dc[(t * e + e2) * cap + c2] : 0.0;
		T* dr = dl + t * e;
		if (dg1 == 0 && dg2 == 0) {
			for (long long k = 0; k < e; k++) dr[k] = (T)0;
			continue;
		}
		double p1 = prob[2 * t], p2 = prob[2 * t + 1], s = p1 + p2;
		double dp1 = p2 * (dg1 - dg2) / (s * s), dp2 = p1 * (dg2 - dg1) / (s * s);
		double dot = p1 * dp1 + p2 * dp2;
		const T* row = logits + t * e;
		double m, sum;
		top2_stats(row, e, &m, &sum);
		for (long long k = 0; k < e; k++) {
			double dpk = k == e1 ? dp1 : (k == e2 ? dp2 : 0.0);
			dr[k] = (T)(top2_prob(row, k, m, sum) * (dpk - dot));
		}
	}
}
`
