package cuda

// actKernels follow cpu/act.go: the arithmetic in A (double for float64,
// float for float32) and PyTorch's slopes at the kinks of the hard ones.
const actKernels = `
// ---- activations (cpu/act.go) ----
__device__ __forceinline__ A h_hardsigmoid(A v) {
	A r = v + (A)3;
	r = r < (A)0 ? (A)0 : r;
	r = r > (A)6 ? (A)6 : r;
	return r / (A)6;
}
extern "C" __global__ void K(silu)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { A v = (A)x[i]; y[i] = (T)(v / ((A)1 + h_exp(-v))); }
}
extern "C" __global__ void K(swiglu)(const T* g, const T* u, T* y, long long n) {
	GRID_STRIDE(i, n) { A v = (A)g[i]; y[i] = (T)(v / ((A)1 + h_exp(-v)) * (A)u[i]); }
}
extern "C" __global__ void K(hardswish)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { A v = (A)x[i]; y[i] = (T)(v * h_hardsigmoid(v)); }
}
extern "C" __global__ void K(hardsigmoid)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)h_hardsigmoid((A)x[i]); }
}
extern "C" __global__ void K(silu_grad)(const T* x, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) {
		A v = (A)x[i];
		A s = (A)1 / ((A)1 + h_exp(-v));
		dx[i] = (T)((A)dy[i] * s * ((A)1 + v * ((A)1 - s)));
	}
}
// swiglu_grad: both gradients from one read of gate, up and dy, σ
// recomputed (cpu/act.go's swigluGrad).
extern "C" __global__ void K(swiglu_grad)(const T* g, const T* u, const T* dy, T* dg, T* du, long long n) {
	GRID_STRIDE(i, n) {
		A v = (A)g[i];
		A s = (A)1 / ((A)1 + h_exp(-v));
		A d = (A)dy[i];
		dg[i] = (T)(d * (A)u[i] * s * ((A)1 + v * ((A)1 - s)));
		du[i] = (T)(d * v * s);
	}
}
extern "C" __global__ void K(hardswish_grad)(const T* x, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) {
		A v = (A)x[i];
		A slope = v < (A)-3 ? (A)0 : (v <= (A)3 ? v / (A)3 + (A)0.5 : (A)1);
		dx[i] = (T)((A)dy[i] * slope);
	}
}
extern "C" __global__ void K(hardsigmoid_grad)(const T* x, const T* dy, T* dx, long long n) {
	GRID_STRIDE(i, n) {
		A v = (A)x[i];
		// (A)(1.0f / 6.0f): PyTorch's float constant, as cpu/act.go.
		dx[i] = (v > (A)-3 && v < (A)3) ? (T)((A)dy[i] * (A)(1.0f / 6.0f)) : (T)0;
	}
}
`
