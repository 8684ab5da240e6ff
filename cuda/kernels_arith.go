package cuda

import (
	"fmt"

	"hap/ir"
)

// arithKernels follow cpu/arith.go: broadcasting binary arithmetic (one
// kernel for add, mul, sub, div and masked_fill, operands indexed through
// strides that are 0 along stretched dims), unary maps, tensor-by-number
// forms, keep-dims reductions (one thread per output, the reduced
// elements in input order, sums in double as the CPU's) and RMSNorm and
// layer norm without affine parameters (one block per row).
const arithKernels = `
// ---- arithmetic (cpu/arith.go) ----
__device__ __forceinline__ float  h_pow(float x, float p)    { return powf(x, p); }
__device__ __forceinline__ double h_pow(double x, double p) { return pow(x, p); }
// ir.PowExact: integer exponents up to 64 by repeated multiplication.
__device__ __forceinline__ A h_pow_exact(A x, double p) {
	double ap = p < 0 ? -p : p;
	if (ap <= 64 && (double)(long long)p == p) {
		long long n = (long long)ap;
		A r = (A)1;
		for (long long i = 0; i < n; i++) r *= x;
		return p < 0 ? (A)1 / r : r;
	}
	return h_pow(x, (A)p);
}
extern "C" __global__ void K(sub)(const T* a, const T* b, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = a[i] - b[i]; }
}
extern "C" __global__ void K(div)(const T* a, const T* b, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = a[i] / b[i]; }
}
// y = a op b with both broadcast to y's shape (rank dims, outermost first):
// element i's coordinates dotted with sa and sb (0 along a dim the operand
// lacks or stretches from 1). op: 0 add, 1 mul, 2 sub, 3 div, 4 masked_fill
// (b the mask: v where b ≠ 0, else a).
extern "C" __global__ void K(broadcast)(const T* a, const T* b, T* y, long long n, int op, T v,
                                        int rank, Dims shape, Dims sa, Dims sb) {
	GRID_STRIDE(i, n) {
		long long ia = 0, ib = 0, rem = i;
		for (int d = rank - 1; d >= 0; d--) {
			long long c = rem % shape.v[d];
			rem /= shape.v[d];
			ia += c * sa.v[d];
			ib += c * sb.v[d];
		}
		T x = a[ia], z = b[ib];
		T r;
		switch (op) {
		case 0: r = x + z; break;
		case 1: r = x * z; break;
		case 2: r = x - z; break;
		case 3: r = x / z; break;
		default: r = z != (T)0 ? v : x; break;
		}
		y[i] = r;
	}
}
extern "C" __global__ void K(neg)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = -x[i]; }
}
extern "C" __global__ void K(exp)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)h_exp((A)x[i]); }
}
extern "C" __global__ void K(log)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)h_log((A)x[i]); }
}
extern "C" __global__ void K(sqrt)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)h_sqrt((A)x[i]); }
}
extern "C" __global__ void K(rsqrt)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)((A)1 / h_sqrt((A)x[i])); }
}
extern "C" __global__ void K(reciprocal)(const T* x, T* y, long long n) {
	GRID_STRIDE(i, n) { y[i] = (T)1 / x[i]; }
}
extern "C" __global__ void K(pow_scalar)(const T* x, T* y, long long n, double p) {
	GRID_STRIDE(i, n) { y[i] = (T)h_pow_exact((A)x[i], p); }
}
extern "C" __global__ void K(add_scalar)(const T* x, T* y, long long n, T v) {
	GRID_STRIDE(i, n) { y[i] = x[i] + v; }
}
extern "C" __global__ void K(mul_scalar)(const T* x, T* y, long long n, T v) {
	GRID_STRIDE(i, n) { y[i] = x[i] * v; }
}

// ---- keep-dims reductions: kept and reduced dims as reduce_sum's ----
__device__ __forceinline__ long long red_base(long long o, int kr, const Dims& ks, const Dims& kst) {
	long long base = 0;
	for (int d = kr - 1; d >= 0; d--) { base += (o % ks.v[d]) * kst.v[d]; o /= ks.v[d]; }
	return base;
}
__device__ __forceinline__ long long red_off(long long k, int rr, const Dims& rs, const Dims& rst) {
	long long off = 0;
	for (int d = rr - 1; d >= 0; d--) { off += (k % rs.v[d]) * rst.v[d]; k /= rs.v[d]; }
	return off;
}
// y[o] = Σ x / count (count: the unsharded number of reduced elements).
extern "C" __global__ void K(mean)(const T* x, T* y, long long nout, int kr, Dims ks, Dims kst,
                                   int rr, Dims rs, Dims rst, long long nred, double count) {
	GRID_STRIDE(o, nout) {
		long long base = red_base(o, kr, ks, kst);
		double s = 0;
		for (long long k = 0; k < nred; k++) s += (double)x[base + red_off(k, rr, rs, rst)];
		y[o] = (T)(s / count);
	}
}
// Two passes in double: Σ (x − mean)² / (nred − correction).
extern "C" __global__ void K(var)(const T* x, T* y, long long nout, int kr, Dims ks, Dims kst,
                                  int rr, Dims rs, Dims rst, long long nred, long long correction) {
	GRID_STRIDE(o, nout) {
		long long base = red_base(o, kr, ks, kst);
		double m = 0;
		for (long long k = 0; k < nred; k++) m += (double)x[base + red_off(k, rr, rs, rst)];
		m /= (double)nred;
		double s = 0;
		for (long long k = 0; k < nred; k++) {
			double d = (double)x[base + red_off(k, rr, rs, rst)] - m;
			s += d * d;
		}
		y[o] = (T)(s / (double)(nred - correction));
	}
}
// The maximum; a NaN wins (torch.amax); −∞ over no elements.
extern "C" __global__ void K(amax)(const T* x, T* y, long long nout, int kr, Dims ks, Dims kst,
                                   int rr, Dims rs, Dims rst, long long nred) {
	GRID_STRIDE(o, nout) {
		long long base = red_base(o, kr, ks, kst);
		A m = h_neginf();
		for (long long k = 0; k < nred; k++) {
			A v = (A)x[base + red_off(k, rr, rs, rst)];
			if (v != v) { m = v; break; }
			if (v > m) m = v;
		}
		y[o] = (T)m;
	}
}
// dx: dy[o] shared equally among the elements of o's group equal to y[o],
// 0 elsewhere; one thread per output writes its whole group.
extern "C" __global__ void K(amax_grad)(const T* x, const T* y, const T* dy, T* dx, long long nout, int kr, Dims ks, Dims kst,
                                        int rr, Dims rs, Dims rst, long long nred) {
	GRID_STRIDE(o, nout) {
		long long base = red_base(o, kr, ks, kst);
		T yo = y[o];
		long long cnt = 0;
		for (long long k = 0; k < nred; k++) cnt += x[base + red_off(k, rr, rs, rst)] == yo;
		T g = (T)((double)dy[o] / (double)cnt);
		for (long long k = 0; k < nred; k++) {
			long long i = base + red_off(k, rr, rs, rst);
			dx[i] = x[i] == yo ? g : (T)0;
		}
	}
}

// ---- RMSNorm and bare layer norm over the last dim (one block per row) ----
extern "C" __global__ void K(rms_norm)(const T* x, const T* w, T* y, long long rows, long long n, double eps) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		T* yr = y + r * n;
		A q = 0;
		COLS(j, n) { A v = (A)xr[j]; q += v * v; }
		A rstd = (A)1 / h_sqrt(block_sum(q, sh) / (A)n + (A)eps);
		COLS(j, n) yr[j] = (T)((A)xr[j] * rstd * (A)w[j]);
	}
}
// dx = r·(g − x̂·mean(g·x̂)) with x̂ = x·r, g = dy·w (cpu.rmsNormGrad); each
// row's r goes to stats[r] for rms_norm_grad_w.
extern "C" __global__ void K(rms_norm_grad_dx)(const T* x, const T* w, const T* dy, T* dx, A* stats,
                                               long long rows, long long n, double eps) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		const T* dyr = dy + r * n;
		T* dxr = dx + r * n;
		A q = 0;
		COLS(j, n) { A v = (A)xr[j]; q += v * v; }
		A rstd = (A)1 / h_sqrt(block_sum(q, sh) / (A)n + (A)eps);
		A m = 0;
		COLS(j, n) m += (A)dyr[j] * (A)w[j] * ((A)xr[j] * rstd);
		m = block_sum(m, sh) / (A)n;
		COLS(j, n) dxr[j] = (T)(rstd * ((A)dyr[j] * (A)w[j] - (A)xr[j] * rstd * m));
		if (threadIdx.x == 0) stats[r] = rstd;
	}
}
// dw[j] = Σ_r dy[r,j]·x[r,j]·stats[r] over the rows of range sp, into
// dw[sp·n + j], as layer_norm_grad_gb.
extern "C" __global__ void K(rms_norm_grad_w)(const T* x, const T* dy, const A* stats, T* dw,
                                              long long rows, long long n, long long chunk, long long nsplit) {
	GRID_STRIDE(e, n * nsplit) {
		long long j = e % n, sp = e / n;
		long long r1 = (sp + 1) * chunk < rows ? (sp + 1) * chunk : rows;
		A s = 0;
		for (long long r = sp * chunk; r < r1; r++) s += (A)dy[r * n + j] * ((A)x[r * n + j] * stats[r]);
		dw[e] = (T)s;
	}
}
extern "C" __global__ void K(layer_norm_bare)(const T* x, T* y, long long rows, long long n, double eps) {
	__shared__ A sh[1024];
	ROWS(r, rows) {
		const T* xr = x + r * n;
		T* yr = y + r * n;
		A s = 0;
		COLS(j, n) s += (A)xr[j];
		A mean = block_sum(s, sh) / (A)n;
		A q = 0;
		COLS(j, n) { A d = (A)xr[j] - mean; q += d * d; }
		A rstd = (A)1 / h_sqrt(block_sum(q, sh) / (A)n + (A)eps);
		COLS(j, n) yr[j] = (T)(((A)xr[j] - mean) * rstd);
	}
}
// dx = r·(dy − mean(dy) − x̂·mean(dy·x̂)) (cpu.layerNormBareGrad).
extern "C" __global__ void K(layer_norm_bare_grad)(const T* x, const T* dy, T* dx, long long rows, long long n, double eps) {
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
			A d = (A)dyr[j];
			m1 += d;
			m2 += d * ((A)xr[j] - mean) * rstd;
		}
		m1 = block_sum(m1, sh) / (A)n;
		m2 = block_sum(m2, sh) / (A)n;
		COLS(j, n) dxr[j] = (T)(rstd * ((A)dyr[j] - m1 - ((A)xr[j] - mean) * rstd * m2));
	}
}
`

// broadcastOp is the broadcast kernel's op code for kind.
func broadcastOp(kind ir.OpKind) (int32, bool) {
	switch kind {
	case ir.OpAdd:
		return 0, true
	case ir.OpMul:
		return 1, true
	case ir.OpSub:
		return 2, true
	case ir.OpDiv:
		return 3, true
	case ir.OpMaskedFill:
		return 4, true
	}
	return 0, false
}

// broadcastStrides is, for each dim of out, the stride of an operand of
// shape in along it: 0 where the operand lacks the dim or has size 1
// (cpu.broadcastStrides).
func broadcastStrides(in, out ir.Shape) []int64 {
	st := make([]int64, len(out))
	ist := in.Strides()
	off := len(out) - len(in)
	for d := range out {
		if j := d - off; j >= 0 && in[j] != 1 {
			st[d] = int64(ist[j])
		}
	}
	return st
}

// broadcastDims is y's shape with a's and b's broadcast strides, size-1
// dims dropped and neighbours merged where both operands run through them
// contiguously (or both stay put), so equal shapes are one dim.
func broadcastDims(a, b, y ir.Shape) (shape, sa, sb Dims, rank int32, err error) {
	as, bs := broadcastStrides(a, y), broadcastStrides(b, y)
	var sh, xa, xb []int64
	for d, n := range y {
		if n == 1 {
			continue
		}
		if k := len(sh) - 1; k >= 0 && xa[k] == as[d]*int64(n) && xb[k] == bs[d]*int64(n) {
			sh[k] *= int64(n)
			xa[k], xb[k] = as[d], bs[d]
			continue
		}
		sh, xa, xb = append(sh, int64(n)), append(xa, as[d]), append(xb, bs[d])
	}
	if len(sh) > MaxRank {
		return shape, sa, sb, 0, fmt.Errorf("broadcast over %d dims exceeds the kernels' limit of %d", len(sh), MaxRank)
	}
	for i := range sh {
		shape[i], sa[i], sb[i] = sh[i], xa[i], xb[i]
	}
	return shape, sa, sb, int32(len(sh)), nil
}

// arith plans cpu/arith.go's kinds and add and mul (which broadcast).
func (p *planner) arith(op *ir.Op, ins, outs []*ir.Tensor) error {
	a := &op.Attrs
	y := outs[0]
	dt := y.DType
	n := numel(y)
	switch op.Kind {
	case ir.OpAdd, ir.OpMul, ir.OpSub, ir.OpDiv, ir.OpMaskedFill:
		if n == 0 {
			return nil
		}
		if op.Kind != ir.OpMaskedFill && ins[0].Shape.Equal(y.Shape) && ins[1].Shape.Equal(y.Shape) {
			return p.launch(string(op.Kind), dt, p.elemGrid(n), in(0), in(1), out(0), n)
		}
		if s, ok := ir.BroadcastShapes(ins[0].Shape, ins[1].Shape); !ok || !s.Equal(y.Shape) {
			return fmt.Errorf("shapes %v and %v do not broadcast to %v", ins[0].Shape, ins[1].Shape, y.Shape)
		}
		shape, sa, sb, rank, err := broadcastDims(ins[0].Shape, ins[1].Shape, y.Shape)
		if err != nil {
			return err
		}
		code, _ := broadcastOp(op.Kind)
		return p.launch("broadcast", dt, p.elemGrid(n), in(0), in(1), out(0), n, code, valT(dt, a.Value), rank, shape, sa, sb)
	case ir.OpNeg, ir.OpExp, ir.OpLog, ir.OpSqrt, ir.OpRsqrt, ir.OpReciprocal:
		if n == 0 {
			return nil
		}
		return p.launch(string(op.Kind), dt, p.elemGrid(n), in(0), out(0), n)
	case ir.OpPowScalar:
		if n == 0 {
			return nil
		}
		return p.launch("pow_scalar", dt, p.elemGrid(n), in(0), out(0), n, a.Value)
	case ir.OpAddScalar, ir.OpMulScalar:
		if n == 0 {
			return nil
		}
		return p.launch(string(op.Kind), dt, p.elemGrid(n), in(0), out(0), n, valT(dt, a.Value))
	case ir.OpMean, ir.OpVar, ir.OpAmax, ir.OpAmaxGrad:
		return p.keepReduce(op, ins[0], dt)
	case ir.OpRMSNorm:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("rms_norm", dt, p.rowGrid(rows), in(0), in(1), out(0), rows, cols, a.Eps)
	case ir.OpRMSNormGrad:
		rows, cols := rowsOf(ins[0].Shape)
		if cols == 0 {
			return nil
		}
		if rows == 0 {
			p.memset(out(1), numel(outs[1])*int64(dt.Size()))
			return nil
		}
		stats := rows * accSize(dt)
		p.plan.WorkBytes = stats
		if err := p.launch("rms_norm_grad_dx", dt, p.rowGrid(rows), in(0), in(1), in(2), out(0), work(0), rows, cols, a.Eps); err != nil {
			return err
		}
		// dw is a column sum over the rows: split as layer_norm_grad's.
		chunk, nsplit := splitReduction(cols, rows)
		if nsplit == 1 {
			return p.launch("rms_norm_grad_w", dt, p.elemGrid(cols), in(0), in(2), work(0), out(1), rows, cols, rows, int64(1))
		}
		part := nsplit * cols * int64(dt.Size())
		p.plan.WorkBytes = stats + part
		if err := p.launch("rms_norm_grad_w", dt, p.elemGrid(cols*nsplit), in(0), in(2), work(0), work(stats), rows, cols, chunk, nsplit); err != nil {
			return err
		}
		return p.sumRanges(work(stats), out(1), dt, cols, nsplit)
	case ir.OpLayerNormBare:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("layer_norm_bare", dt, p.rowGrid(rows), in(0), out(0), rows, cols, a.Eps)
	case ir.OpLayerNormBareGrad:
		rows, cols := rowsOf(y.Shape)
		if rows == 0 {
			return nil
		}
		return p.launch("layer_norm_bare_grad", dt, p.rowGrid(rows), in(0), in(1), out(0), rows, cols, a.Eps)
	}
	return fmt.Errorf("no arithmetic plan for %s", op.Kind)
}

// keepReduce plans mean, var, amax and amax_grad over x: one thread per
// output element (of the kept dims, with or without keep-dims).
func (p *planner) keepReduce(op *ir.Op, x *ir.Tensor, dt ir.DType) error {
	a := &op.Attrs
	if len(x.Shape) > MaxRank {
		return fmt.Errorf("rank %d exceeds the kernels' limit of %d", len(x.Shape), MaxRank)
	}
	for _, ax := range a.Axes {
		if ax < 0 || ax >= len(x.Shape) {
			return fmt.Errorf("reduction axis %d outside rank %d", ax, len(x.Shape))
		}
	}
	nout := int64(1)
	for d, sz := range x.Shape {
		if !containsAxis(a.Axes, d) {
			nout *= int64(sz)
		}
	}
	if nout == 0 {
		return nil
	}
	ks, kst, rs, rst, kr, rr := reductionDims(x.Shape, a.Axes)
	nred := int64(1)
	for d := range rr {
		nred *= rs[d]
	}
	g := p.elemGrid(nout)
	switch op.Kind {
	case ir.OpMean:
		return p.launch("mean", dt, g, in(0), out(0), nout, kr, ks, kst, rr, rs, rst, nred, float64(ir.ReduceCount(a, x.Shape)))
	case ir.OpVar:
		return p.launch("var", dt, g, in(0), out(0), nout, kr, ks, kst, rr, rs, rst, nred, int64(a.Correction))
	case ir.OpAmax:
		return p.launch("amax", dt, g, in(0), out(0), nout, kr, ks, kst, rr, rs, rst, nred)
	}
	return p.launch("amax_grad", dt, g, in(0), in(1), in(2), out(0), nout, kr, ks, kst, rr, rs, rst, nred)
}

func containsAxis(axes []int, d int) bool {
	for _, a := range axes {
		if a == d {
			return true
		}
	}
	return false
}
