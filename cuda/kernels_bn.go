package cuda

import (
	"fmt"

	"hap/ir"
)

// bnKernels are batch norm's kernels, following cpu/batchnorm.go: x is
// [outer, C, inner]; the statistics come as sums (k = 1 / elements per
// channel). The per-channel gradient sums take one block per channel
// (block_sum; deterministic for a given launch shape).
const bnKernels = `
// ---- batch norm (cpu/batchnorm.go) ----
__device__ __forceinline__ void bn_stats(const T* s1, const T* s2, long long c, double k, double eps, A* mean, A* rstd) {
	A m = (A)s1[c] * (A)k;
	A v = (A)s2[c] * (A)k - m * m;
	*mean = m;
	*rstd = (A)1 / h_sqrt(v + (A)eps);
}
extern "C" __global__ void K(bn_apply)(const T* x, const T* s1, const T* s2, const T* g, const T* b, T* y,
                                       long long n, long long C, long long inner, double eps, double k) {
	GRID_STRIDE(i, n) {
		long long c = (i / inner) % C;
		A mean, rstd;
		bn_stats(s1, s2, c, k, eps, &mean, &rstd);
		y[i] = (T)(((A)x[i] - mean) * rstd * (A)g[c] + (A)b[c]);
	}
}
extern "C" __global__ void K(bn_grad_dx)(const T* x, const T* s1, const T* s2, const T* g, const T* dy, T* dx,
                                         long long n, long long C, long long inner, double eps, double k) {
	GRID_STRIDE(i, n) {
		long long c = (i / inner) % C;
		A mean, rstd;
		bn_stats(s1, s2, c, k, eps, &mean, &rstd);
		dx[i] = (T)((A)dy[i] * (A)g[c] * rstd);
	}
}
// One block per channel: Σ dy and Σ dy·(x − mean) over its outer·inner
// elements, then dsum, dsumsq, dgamma and dbeta.
extern "C" __global__ void K(bn_grad_stats)(const T* x, const T* s1, const T* s2, const T* g, const T* dy,
                                            T* dsum, T* dsumsq, T* dg, T* db,
                                            long long outer, long long C, long long inner, double eps, double k) {
	__shared__ A sh[1024];
	ROWS(c, C) {
		A mean, r;
		bn_stats(s1, s2, c, k, eps, &mean, &r);
		A sdy = 0, sdx = 0;
		for (long long e = threadIdx.x; e < outer * inner; e += blockDim.x) {
			long long i = (e / inner * C + c) * inner + e % inner;
			A d = (A)dy[i];
			sdy += d;
			sdx += d * ((A)x[i] - mean);
		}
		sdy = block_sum(sdy, sh);
		sdx = block_sum(sdx, sh);
		if (threadIdx.x == 0) {
			A gc = (A)g[c];
			A dvar = (A)-0.5 * r * r * r * gc * sdx;
			dsum[c] = (T)((A)k * (-r * gc * sdy - (A)2 * mean * dvar));
			dsumsq[c] = (T)((A)k * dvar);
			dg[c] = (T)(sdx * r);
			db[c] = (T)sdy;
		}
	}
}
extern "C" __global__ void K(bn_running)(const T* rm, const T* rv, const T* s1, const T* s2, T* rm2, T* rv2,
                                         long long C, double k, double m) {
	GRID_STRIDE(c, C) {
		A mean = (A)s1[c] * (A)k;
		A v = (A)s2[c] * (A)k - mean * mean;
		rm2[c] = (T)(((A)1 - (A)m) * (A)rm[c] + (A)m * mean);
		rv2[c] = (T)(((A)1 - (A)m) * (A)rv[c] + (A)m * v / ((A)1 - (A)k));
	}
}
`

// batchNorm plans batch_norm, batch_norm_grad and batch_norm_running.
func (p *planner) batchNorm(op *ir.Op, ins, outs []*ir.Tensor, dt ir.DType) error {
	a := &op.Attrs
	if op.Kind == ir.OpBatchNormRunning {
		c := numel(outs[0])
		if c == 0 {
			return nil
		}
		return p.launch("bn_running", dt, p.elemGrid(c), in(0), in(1), in(2), in(3), out(0), out(1), c, a.Scale, a.Momentum)
	}
	xs := ins[0].Shape
	if len(xs) < 2 {
		return fmt.Errorf("batch norm of %v: want x[N,C,…]", xs)
	}
	outer, c, inner := int64(xs[0]), int64(xs[1]), int64(xs[2:].Numel())
	n := outer * c * inner
	if op.Kind == ir.OpBatchNorm {
		if n == 0 {
			return nil
		}
		return p.launch("bn_apply", dt, p.elemGrid(n), in(0), in(1), in(2), in(3), in(4), out(0), n, c, inner, a.Eps, a.Scale)
	}
	if n > 0 {
		if err := p.launch("bn_grad_dx", dt, p.elemGrid(n), in(0), in(1), in(2), in(3), in(4), out(0), n, c, inner, a.Eps, a.Scale); err != nil {
			return err
		}
	}
	if c == 0 {
		return nil
	}
	return p.launch("bn_grad_stats", dt, p.rowGrid(c), in(0), in(1), in(2), in(3), in(4), out(1), out(2), out(3), out(4),
		outer, c, inner, a.Eps, a.Scale)
}
