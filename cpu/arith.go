package cpu

import (
	"fmt"
	"math"

	"hap/ir"
)

// Kernels of ir/arith.go's operators: broadcasting elementwise arithmetic,
// keep-dims reductions, RMSNorm and layer norm without affine parameters.
// Sums accumulate in float64 for both element types, as reduceSum does.

// execArith runs op when it is one of arith.go's kinds; ok is false for
// any other kind.
func execArith[F Float](op *ir.Op, in, out []*Tensor[F]) (ok bool, err error) {
	a := &op.Attrs
	switch op.Kind {
	case ir.OpSub:
		broadcastZip(in[0], in[1], out[0], func(x, y F) F { return x - y })
	case ir.OpDiv:
		broadcastZip(in[0], in[1], out[0], func(x, y F) F { return x / y })
	case ir.OpNeg:
		mapf(in[0], out[0], func(x F) F { return -x })
	case ir.OpExp:
		mapf(in[0], out[0], func(x F) F { return F(math.Exp(float64(x))) })
	case ir.OpLog:
		mapf(in[0], out[0], func(x F) F { return F(math.Log(float64(x))) })
	case ir.OpSqrt:
		mapf(in[0], out[0], func(x F) F { return F(math.Sqrt(float64(x))) })
	case ir.OpRsqrt:
		mapf(in[0], out[0], func(x F) F { return F(1 / math.Sqrt(float64(x))) })
	case ir.OpReciprocal:
		mapf(in[0], out[0], func(x F) F { return 1 / x })
	case ir.OpPowScalar:
		mapf(in[0], out[0], func(x F) F { return F(ir.PowExact(float64(x), a.Value)) })
	case ir.OpAddScalar:
		mapf(in[0], out[0], func(x F) F { return x + F(a.Value) })
	case ir.OpMulScalar:
		mapf(in[0], out[0], func(x F) F { return x * F(a.Value) })
	case ir.OpMaskedFill:
		v := F(a.Value)
		broadcastZip(in[0], in[1], out[0], func(x, m F) F {
			if m != 0 {
				return v
			}
			return x
		})
	case ir.OpMean:
		keepReduce(a, in[0], out[0], func(vals []float64) float64 {
			s := 0.0
			for _, v := range vals {
				s += v
			}
			return s / float64(ir.ReduceCount(a, in[0].Shape))
		})
	case ir.OpVar:
		keepReduce(a, in[0], out[0], func(vals []float64) float64 { return variance(vals, a.Correction) })
	case ir.OpAmax:
		keepReduce(a, in[0], out[0], maxOf)
	case ir.OpAmaxGrad:
		amaxGrad(a, in[0], in[1], in[2], out[0])
	case ir.OpRMSNorm:
		rmsNorm(a.Eps, in[0], in[1], out[0])
	case ir.OpRMSNormGrad:
		rmsNormGrad(a.Eps, in[0], in[1], in[2], out[0], out[1])
	case ir.OpLayerNormBare:
		layerNormBare(a.Eps, in[0], out[0])
	case ir.OpLayerNormBareGrad:
		layerNormBareGrad(a.Eps, in[0], in[1], out[0])
	default:
		return false, nil
	}
	return true, nil
}

// zipBroadcast is zip for equal shapes (add and mul as they always ran)
// and broadcastZip otherwise.
func zipBroadcast[F Float](x, y, z *Tensor[F], f func(F, F) F) error {
	if x.Shape.Equal(z.Shape) && y.Shape.Equal(z.Shape) {
		return zip(x, y, z, f)
	}
	if s, ok := ir.BroadcastShapes(x.Shape, y.Shape); !ok || !s.Equal(z.Shape) {
		return fmt.Errorf("shapes %v and %v do not broadcast to %v", x.Shape, y.Shape, z.Shape)
	}
	broadcastZip(x, y, z, f)
	return nil
}

// broadcastStrides is, for each dim of out, the stride of an operand of
// shape in along it: 0 where the operand lacks the dim or has size 1.
func broadcastStrides(in, out ir.Shape) []int {
	st := make([]int, len(out))
	ist := in.Strides()
	off := len(out) - len(in)
	for d := range out {
		if j := d - off; j >= 0 && in[j] != 1 {
			st[d] = ist[j]
		}
	}
	return st
}

// broadcastZip computes z = f(x, y) elementwise with x and y broadcast to
// z's shape, walking z's coordinates in row-major order.
func broadcastZip[F Float](x, y, z *Tensor[F], f func(F, F) F) {
	if len(z.Data) == 0 {
		return
	}
	sx, sy := broadcastStrides(x.Shape, z.Shape), broadcastStrides(y.Shape, z.Shape)
	idx := make([]int, len(z.Shape))
	ix, iy := 0, 0
	for o := range z.Data {
		z.Data[o] = f(x.Data[ix], y.Data[iy])
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			ix += sx[d]
			iy += sy[d]
			if idx[d] < z.Shape[d] {
				break
			}
			ix -= sx[d] * idx[d]
			iy -= sy[d] * idx[d]
			idx[d] = 0
		}
	}
}

// keepReduce gathers, for each output element, the input elements it
// combines (in input order) and writes f of them.
func keepReduce[F Float](a *ir.Attrs, x, y *Tensor[F], f func([]float64) float64) {
	groups := reduceGroups(a.Axes, x)
	for o, g := range groups {
		y.Data[o] = F(f(g))
	}
}

// reduceGroups lists each output element's inputs, outputs in the order
// of the kept dims (which is the order with or without keep-dims).
func reduceGroups[F Float](axes []int, x *Tensor[F]) [][]float64 {
	var kept []int
	nOut := 1
	for d, n := range x.Shape {
		if !containsInt(axes, d) {
			kept = append(kept, d)
			nOut *= n
		}
	}
	groups := make([][]float64, nOut)
	idx := biasIndexer(x.Shape, kept)
	for i, v := range x.Data {
		o := idx(i)
		groups[o] = append(groups[o], float64(v))
	}
	return groups
}

func variance(vals []float64, correction int) float64 {
	m := 0.0
	for _, v := range vals {
		m += v
	}
	m /= float64(len(vals))
	s := 0.0
	for _, v := range vals {
		s += (v - m) * (v - m)
	}
	return s / float64(len(vals)-correction)
}

// maxOf is the largest value, NaN when any is NaN (as torch.amax), −∞ for
// none.
func maxOf(vals []float64) float64 {
	m := math.Inf(-1)
	for _, v := range vals {
		if v > m || math.IsNaN(v) {
			m = v
			if math.IsNaN(v) {
				break
			}
		}
	}
	return m
}

// amaxGrad shares each output's gradient equally among the inputs equal
// to its maximum (PyTorch's amax backward).
func amaxGrad[F Float](a *ir.Attrs, x, y, dy, dx *Tensor[F]) {
	var kept []int
	for d := range x.Shape {
		if !containsInt(a.Axes, d) {
			kept = append(kept, d)
		}
	}
	idx := biasIndexer(x.Shape, kept)
	count := make([]int, len(y.Data))
	for i, v := range x.Data {
		if o := idx(i); v == y.Data[o] {
			count[o]++
		}
	}
	for i, v := range x.Data {
		if o := idx(i); v == y.Data[o] {
			dx.Data[i] = F(float64(dy.Data[o]) / float64(count[o]))
		}
	}
}

// rmsRstd is 1/√(mean(x²) + eps) of one row.
func rmsRstd[F Float](xr []F, eps float64) float64 {
	s := 0.0
	for _, v := range xr {
		s += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(s/float64(len(xr))+eps)
}

func rmsNorm[F Float](eps float64, x, w, y *Tensor[F]) {
	r, n := rows(x.Shape)
	for i := 0; i < r; i++ {
		xr, yr := x.Data[i*n:(i+1)*n], y.Data[i*n:(i+1)*n]
		rstd := rmsRstd(xr, eps)
		for j, v := range xr {
			yr[j] = F(float64(v) * rstd * float64(w.Data[j]))
		}
	}
}

// rmsNormGrad: with x̂ = x·r and g = dy·w, dx = r·(g − x̂·mean(g·x̂)) and
// dw = Σ_rows dy·x̂.
func rmsNormGrad[F Float](eps float64, x, w, dy, dx, dw *Tensor[F]) {
	r, n := rows(x.Shape)
	acc := make([]float64, n)
	for i := 0; i < r; i++ {
		xr, dyr, dxr := x.Data[i*n:(i+1)*n], dy.Data[i*n:(i+1)*n], dx.Data[i*n:(i+1)*n]
		rstd := rmsRstd(xr, eps)
		var m float64
		for j, v := range xr {
			xh := float64(v) * rstd
			m += float64(dyr[j]) * float64(w.Data[j]) * xh
			acc[j] += float64(dyr[j]) * xh
		}
		m /= float64(n)
		for j, v := range xr {
			dxr[j] = F(rstd * (float64(dyr[j])*float64(w.Data[j]) - float64(v)*rstd*m))
		}
	}
	for j := range acc {
		dw.Data[j] = F(acc[j])
	}
}

func layerNormBare[F Float](eps float64, x, y *Tensor[F]) {
	r, n := rows(x.Shape)
	for i := 0; i < r; i++ {
		xr, yr := x.Data[i*n:(i+1)*n], y.Data[i*n:(i+1)*n]
		mean, rstd := rowStats(xr, eps)
		for j, v := range xr {
			yr[j] = F((float64(v) - mean) * rstd)
		}
	}
}

// layerNormBareGrad is layerNormGrad with gamma = 1: dx = r·(dy −
// mean(dy) − x̂·mean(dy·x̂)).
func layerNormBareGrad[F Float](eps float64, x, dy, dx *Tensor[F]) {
	r, n := rows(x.Shape)
	xhat := make([]float64, n)
	for i := 0; i < r; i++ {
		xr, dyr, dxr := x.Data[i*n:(i+1)*n], dy.Data[i*n:(i+1)*n], dx.Data[i*n:(i+1)*n]
		mean, rstd := rowStats(xr, eps)
		var m1, m2 float64
		for j, v := range xr {
			xhat[j] = (float64(v) - mean) * rstd
			m1 += float64(dyr[j])
			m2 += float64(dyr[j]) * xhat[j]
		}
		m1 /= float64(n)
		m2 /= float64(n)
		for j := range xr {
			dxr[j] = F(rstd * (float64(dyr[j]) - m1 - xhat[j]*m2))
		}
	}
}
