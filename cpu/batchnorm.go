package cpu

import (
	"fmt"
	"math"

	"hap/ir"
)

// execBatchNorm runs ir/batchnorm.go's kinds; ok is false for any other.
func execBatchNorm[F Float](op *ir.Op, in, out []*Tensor[F]) (ok bool, err error) {
	a := &op.Attrs
	switch op.Kind {
	case ir.OpBatchNorm:
		return true, batchNorm(a, in[0], in[1], in[2], in[3], in[4], out[0])
	case ir.OpBatchNormGrad:
		return true, batchNormGrad(a, in[0], in[1], in[2], in[3], in[4], out)
	case ir.OpBatchNormRunning:
		batchNormRunning(a, in[0], in[1], in[2], in[3], out[0], out[1])
		return true, nil
	}
	return false, nil
}

// bnStats is channel c's mean, biased variance and inverse standard
// deviation from the sums over its k⁻¹ elements.
func bnStats[F Float](a *ir.Attrs, sum, sumsq *Tensor[F], c int) (mean, vr, rstd float64) {
	mean = float64(sum.Data[c]) * a.Scale
	vr = float64(sumsq.Data[c])*a.Scale - mean*mean
	return mean, vr, 1 / math.Sqrt(vr+a.Eps)
}

// bnLayout is x[N,C,…] as outer (N) × C × inner (the rest).
func bnLayout(s ir.Shape) (outer, c, inner int, err error) {
	if len(s) < 2 {
		return 0, 0, 0, fmt.Errorf("batch norm of %v: want x[N,C,…]", s)
	}
	inner = 1
	for _, d := range s[2:] {
		inner *= d
	}
	return s[0], s[1], inner, nil
}

func batchNorm[F Float](a *ir.Attrs, x, sum, sumsq, g, b, y *Tensor[F]) error {
	outer, C, inner, err := bnLayout(x.Shape)
	if err != nil {
		return err
	}
	for c := 0; c < C; c++ {
		mean, _, rstd := bnStats(a, sum, sumsq, c)
		sc, sh := rstd*float64(g.Data[c]), float64(b.Data[c])
		for n := 0; n < outer; n++ {
			base := (n*C + c) * inner
			for i := base; i < base+inner; i++ {
				y.Data[i] = F((float64(x.Data[i])-mean)*sc + sh)
			}
		}
	}
	return nil
}

// batchNormGrad: with x̂ = (x − mean)·r and dx̂ = dy·γ, the gradients are
// dβ = Σ dy, dγ = Σ dy·x̂, dx = dx̂·r (the statistics held fixed: they are
// inputs), and through var = sumsq·k − mean² and mean = sum·k,
// dsumsq = k·dvar and dsum = k·(−r·Σ dx̂ − 2·mean·dvar), where
// dvar = −½·r³·Σ dx̂·(x − mean). The sums run over this device's elements of
// the channel: on a batch shard they are partial, as the sums were.
func batchNormGrad[F Float](a *ir.Attrs, x, sum, sumsq, g, dy *Tensor[F], out []*Tensor[F]) error {
	outer, C, inner, err := bnLayout(x.Shape)
	if err != nil {
		return err
	}
	dx, dsum, dsumsq, dg, db := out[0], out[1], out[2], out[3], out[4]
	for c := 0; c < C; c++ {
		mean, _, r := bnStats(a, sum, sumsq, c)
		gc := float64(g.Data[c])
		var sdy, sdyxc float64 // Σ dy, Σ dy·(x − mean)
		for n := 0; n < outer; n++ {
			base := (n*C + c) * inner
			for i := base; i < base+inner; i++ {
				d := float64(dy.Data[i])
				sdy += d
				sdyxc += d * (float64(x.Data[i]) - mean)
				dx.Data[i] = F(d * gc * r)
			}
		}
		dvar := -0.5 * r * r * r * gc * sdyxc
		dsum.Data[c] = F(a.Scale * (-r*gc*sdy - 2*mean*dvar))
		dsumsq.Data[c] = F(a.Scale * dvar)
		dg.Data[c] = F(sdyxc * r)
		db.Data[c] = F(sdy)
	}
	return nil
}

// batchNormRunning is PyTorch's update of the running statistics: the
// batch mean, and the batch variance made unbiased (× M/(M − 1) for M
// elements per channel), each blended in with the momentum.
func batchNormRunning[F Float](a *ir.Attrs, rm, rv, sum, sumsq, rm2, rv2 *Tensor[F]) {
	m := a.Momentum
	unbias := 1 / (1 - a.Scale)
	for c := range rm.Data {
		mean := float64(sum.Data[c]) * a.Scale
		vr := float64(sumsq.Data[c])*a.Scale - mean*mean
		rm2.Data[c] = F((1-m)*float64(rm.Data[c]) + m*mean)
		rv2.Data[c] = F((1-m)*float64(rv.Data[c]) + m*vr*unbias)
	}
}
