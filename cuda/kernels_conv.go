package cuda

import (
	"fmt"

	"hap/ir"
)

// convKernels are the grouped convolution (groups > 1) and average pooling
// kernels, following cpu/gconv.go and cpu/pool.go: one thread per output
// element, each a gather summing in a fixed order (deterministic, no
// atomics), accumulated in A.
//
// Grouped geometry: a = {C, H, W, O, OH, OW, S, pad} (C and O all
// channels), b = {Cg, KH, KW, Og} (channels per group in and out).
// Pooling geometry: g = {H, W, OH, OW, K, S, pad}.
const convKernels = `
// ---- grouped convolution (cpu/gconv.go) ----
extern "C" __global__ void K(gconv)(const T* x, const T* w, T* y, long long nImg, Dims a, Dims b) {
	long long C = a.v[0], H = a.v[1], W = a.v[2], O = a.v[3], OH = a.v[4], OW = a.v[5], S = a.v[6], pad = a.v[7];
	long long Cg = b.v[0], KH = b.v[1], KW = b.v[2], Og = b.v[3];
	GRID_STRIDE(e, nImg * O * OH * OW) {
		long long ox = e % OW, oy = (e / OW) % OH, o = (e / (OW * OH)) % O, n = e / (OW * OH * O);
		long long c0 = o / Og * Cg;
		A s = 0;
		for (long long c = 0; c < Cg; c++) {
			const T* xp = x + (n * C + c0 + c) * H * W;
			const T* wp = w + (o * Cg + c) * KH * KW;
			for (long long i = 0; i < KH; i++) {
				long long iy = oy * S - pad + i;
				if (iy < 0 || iy >= H) continue;
				for (long long j = 0; j < KW; j++) {
					long long ix = ox * S - pad + j;
					if (ix < 0 || ix >= W) continue;
					s += (A)xp[iy * W + ix] * (A)wp[i * KW + j];
				}
			}
		}
		y[e] = (T)s;
	}
}
extern "C" __global__ void K(gconv_grad_input)(const T* dy, const T* w, T* dx, long long nImg, Dims a, Dims b) {
	long long C = a.v[0], H = a.v[1], W = a.v[2], O = a.v[3], OH = a.v[4], OW = a.v[5], S = a.v[6], pad = a.v[7];
	long long Cg = b.v[0], KH = b.v[1], KW = b.v[2], Og = b.v[3];
	GRID_STRIDE(e, nImg * C * H * W) {
		long long ix = e % W, iy = (e / W) % H, ch = (e / (W * H)) % C, n = e / (W * H * C);
		long long o0 = ch / Cg * Og, c = ch % Cg;
		A s = 0;
		for (long long o = o0; o < o0 + Og; o++) {
			const T* dyp = dy + (n * O + o) * OH * OW;
			const T* wp = w + (o * Cg + c) * KH * KW;
			for (long long i = 0; i < KH; i++) {
				long long ty = iy + pad - i;
				if (ty < 0 || ty % S != 0 || ty / S >= OH) continue;
				for (long long j = 0; j < KW; j++) {
					long long tx = ix + pad - j;
					if (tx < 0 || tx % S != 0 || tx / S >= OW) continue;
					s += (A)dyp[(ty / S) * OW + tx / S] * (A)wp[i * KW + j];
				}
			}
		}
		dx[e] = (T)s;
	}
}
extern "C" __global__ void K(gconv_grad_weight)(const T* x, const T* dy, T* dw, long long nImg, Dims a, Dims b) {
	long long C = a.v[0], H = a.v[1], W = a.v[2], O = a.v[3], OH = a.v[4], OW = a.v[5], S = a.v[6], pad = a.v[7];
	long long Cg = b.v[0], KH = b.v[1], KW = b.v[2], Og = b.v[3];
	GRID_STRIDE(e, O * Cg * KH * KW) {
		long long j = e % KW, i = (e / KW) % KH, c = (e / (KW * KH)) % Cg, o = e / (KW * KH * Cg);
		long long c0 = o / Og * Cg;
		A s = 0;
		for (long long n = 0; n < nImg; n++) {
			const T* xp = x + (n * C + c0 + c) * H * W;
			const T* dyp = dy + (n * O + o) * OH * OW;
			for (long long oy = 0; oy < OH; oy++) {
				long long iy = oy * S - pad + i;
				if (iy < 0 || iy >= H) continue;
				for (long long ox = 0; ox < OW; ox++) {
					long long ix = ox * S - pad + j;
					if (ix < 0 || ix >= W) continue;
					s += (A)dyp[oy * OW + ox] * (A)xp[iy * W + ix];
				}
			}
		}
		dw[e] = (T)s;
	}
}

// ---- padded max pooling (cpu/pool.go: maxPool2dPadded) ----
__device__ long long pool_argmax_pad(const T* xp, long long H, long long W, long long k, long long s, long long pad,
                                     long long oy, long long ox) {
	long long i0 = oy * s - pad, j0 = ox * s - pad;
	long long i1 = i0 + k < H ? i0 + k : H, j1 = j0 + k < W ? j0 + k : W;
	i0 = i0 < 0 ? 0 : i0;
	j0 = j0 < 0 ? 0 : j0;
	long long best = i0 * W + j0;
	T bv = xp[best];
	for (long long i = i0; i < i1; i++)
		for (long long j = j0; j < j1; j++) {
			T v = xp[i * W + j];
			if (v > bv || (v != v && bv == bv)) { best = i * W + j; bv = v; }
		}
	return best;
}
extern "C" __global__ void K(max_pool_pad)(const T* x, T* y, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KK = g.v[4], S = g.v[5], pad = g.v[6];
	GRID_STRIDE(e, planes * OH * OW) {
		long long q = e % (OH * OW);
		const T* xp = x + (e / (OH * OW)) * H * W;
		y[e] = xp[pool_argmax_pad(xp, H, W, KK, S, pad, q / OW, q % OW)];
	}
}
// dx gathers dy from every window whose argmax it is, in (oy, ox) order.
extern "C" __global__ void K(max_pool_pad_grad)(const T* x, const T* dy, T* dx, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KK = g.v[4], S = g.v[5], pad = g.v[6];
	GRID_STRIDE(e, planes * H * W) {
		long long pl = e / (H * W), at = e % (H * W), iy = at / W, ix = at % W;
		const T* xp = x + pl * H * W;
		const T* dyp = dy + pl * OH * OW;
		T s = (T)0;
		for (long long oy = 0; oy < OH; oy++) {
			if (iy < oy * S - pad || iy >= oy * S - pad + KK) continue;
			for (long long ox = 0; ox < OW; ox++) {
				if (ix < ox * S - pad || ix >= ox * S - pad + KK) continue;
				if (pool_argmax_pad(xp, H, W, KK, S, pad, oy, ox) == at) s += dyp[oy * OW + ox];
			}
		}
		dx[e] = s;
	}
}

// ---- average pooling (cpu/pool.go) ----
extern "C" __global__ void K(avg_pool)(const T* x, T* y, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KK = g.v[4], S = g.v[5], pad = g.v[6];
	GRID_STRIDE(e, planes * OH * OW) {
		long long ox = e % OW, oy = (e / OW) % OH, pl = e / (OW * OH);
		const T* xp = x + pl * H * W;
		long long i0 = oy * S - pad, j0 = ox * S - pad;
		A s = 0;
		for (long long i = i0 < 0 ? 0 : i0; i < i0 + KK && i < H; i++)
			for (long long j = j0 < 0 ? 0 : j0; j < j0 + KK && j < W; j++) s += (A)xp[i * W + j];
		y[e] = (T)(s / (A)(KK * KK));
	}
}
extern "C" __global__ void K(avg_pool_grad)(const T* dy, T* dx, long long planes, Dims g) {
	long long H = g.v[0], W = g.v[1], OH = g.v[2], OW = g.v[3], KK = g.v[4], S = g.v[5], pad = g.v[6];
	GRID_STRIDE(e, planes * H * W) {
		long long ix = e % W, iy = (e / W) % H, pl = e / (W * H);
		const T* dyp = dy + pl * OH * OW;
		A s = 0;
		for (long long oy = 0; oy < OH; oy++) {
			long long i0 = oy * S - pad;
			if (iy < i0 || iy >= i0 + KK) continue;
			for (long long ox = 0; ox < OW; ox++) {
				long long j0 = ox * S - pad;
				if (ix < j0 || ix >= j0 + KK) continue;
				s += (A)dyp[oy * OW + ox];
			}
		}
		dx[e] = (T)(s / (A)(KK * KK));
	}
}
`

// gconvDims packs a grouped convolution's geometry for the kernels.
func gconvDims(a *ir.Attrs, xs, ws ir.Shape) (nImg int64, da, db Dims, err error) {
	groups := ir.ConvGroups(a)
	if len(xs) != 4 || len(ws) != 4 || ws[0]%groups != 0 || (xs[1] != ws[1]*groups && !(xs[1] == 0 && ws[0] == 0)) {
		return 0, da, db, fmt.Errorf("want x[N,C,H,W] and w[O,C/%d,KH,KW], got %v and %v", groups, xs, ws)
	}
	if a.Stride < 1 || a.Pad < 0 || xs[2]+2*a.Pad < ws[2] || xs[3]+2*a.Pad < ws[3] {
		return 0, da, db, fmt.Errorf("stride %d, pad %d and kernel %v do not fit x %v", a.Stride, a.Pad, ws[2:], xs)
	}
	oh, ow := (xs[2]+2*a.Pad-ws[2])/a.Stride+1, (xs[3]+2*a.Pad-ws[3])/a.Stride+1
	da = Dims{int64(xs[1]), int64(xs[2]), int64(xs[3]), int64(ws[0]), int64(oh), int64(ow), int64(a.Stride), int64(a.Pad)}
	db = Dims{int64(ws[1]), int64(ws[2]), int64(ws[3]), int64(ws[0] / groups)}
	return int64(xs[0]), da, db, nil
}

// gconv plans a grouped convolution kind (groups > 1): ins are the op's
// input shapes in graph order.
func (p *planner) gconv(kind ir.OpKind, a *ir.Attrs, ins []*ir.Tensor, dt ir.DType) error {
	var xs, ws ir.Shape
	switch kind {
	case ir.OpConv2D:
		xs, ws = ins[0].Shape, ins[1].Shape
	case ir.OpConv2DGradInput:
		xs, ws = ir.Shape(a.Shape), ins[1].Shape
	default:
		xs, ws = ins[0].Shape, ir.Shape(a.Shape)
	}
	n, da, db, err := gconvDims(a, xs, ws)
	if err != nil {
		return err
	}
	var count int64
	base := map[ir.OpKind]string{ir.OpConv2D: "gconv", ir.OpConv2DGradInput: "gconv_grad_input", ir.OpConv2DGradWeight: "gconv_grad_weight"}[kind]
	switch kind {
	case ir.OpConv2D:
		count = n * da[3] * da[4] * da[5]
	case ir.OpConv2DGradInput:
		count = n * da[0] * da[1] * da[2]
	default:
		count = int64(ws.Numel())
	}
	if count == 0 {
		return nil
	}
	return p.launch(base, dt, p.elemGrid(count), in(0), in(1), out(0), n, da, db)
}

// maxPoolPadded plans a padded max_pool2d (in: x; out: y) or its gradient
// (in: x, dy; out: dx).
func (p *planner) maxPoolPadded(a *ir.Attrs, xs ir.Shape, grad bool, dt ir.DType) error {
	if len(xs) != 4 || a.Kernel < 1 || a.Stride < 1 || a.Pad < 0 || 2*a.Pad > a.Kernel || xs[2]+2*a.Pad < a.Kernel || xs[3]+2*a.Pad < a.Kernel {
		return fmt.Errorf("max_pool2d kernel %d, stride %d, pad %d do not fit x %v", a.Kernel, a.Stride, a.Pad, xs)
	}
	h, w, k, s, pad := int64(xs[2]), int64(xs[3]), int64(a.Kernel), int64(a.Stride), int64(a.Pad)
	oh, ow := (h+2*pad-k)/s+1, (w+2*pad-k)/s+1
	planes := int64(xs[0] * xs[1])
	g := Dims{h, w, oh, ow, k, s, pad}
	if !grad {
		if n := planes * oh * ow; n > 0 {
			return p.launch("max_pool_pad", dt, p.elemGrid(n), in(0), out(0), planes, g)
		}
		return nil
	}
	if n := planes * h * w; n > 0 {
		return p.launch("max_pool_pad_grad", dt, p.elemGrid(n), in(0), in(1), out(0), planes, g)
	}
	return nil
}

// avgPool plans avg_pool2d (in: x; out: y) or its gradient (in: dy; out:
// dx), x of shape xs.
func (p *planner) avgPool(a *ir.Attrs, xs ir.Shape, grad bool, dt ir.DType) error {
	if len(xs) != 4 || a.Kernel < 1 || a.Stride < 1 || a.Pad < 0 || xs[2]+2*a.Pad < a.Kernel || xs[3]+2*a.Pad < a.Kernel {
		return fmt.Errorf("avg_pool2d kernel %d, stride %d, pad %d do not fit x %v", a.Kernel, a.Stride, a.Pad, xs)
	}
	h, w, k, s, pad := int64(xs[2]), int64(xs[3]), int64(a.Kernel), int64(a.Stride), int64(a.Pad)
	oh, ow := (h+2*pad-k)/s+1, (w+2*pad-k)/s+1
	planes := int64(xs[0] * xs[1])
	g := Dims{h, w, oh, ow, k, s, pad}
	if !grad {
		if n := planes * oh * ow; n > 0 {
			return p.launch("avg_pool", dt, p.elemGrid(n), in(0), out(0), planes, g)
		}
		return nil
	}
	if n := planes * h * w; n > 0 {
		return p.launch("avg_pool_grad", dt, p.elemGrid(n), in(0), out(0), planes, g)
	}
	return nil
}
