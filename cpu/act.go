package cpu

import (
	"fmt"
	"math"

	"hap/ir"
)

// execAct runs the activations of ir/act.go; ok is false for any other
// kind. The formulas and the derivative at the kinks are PyTorch's
// (aten's hardswish_backward and hardsigmoid_backward), so gradients agree
// with torch's even on the boundaries.
func execAct[F Float](op *ir.Op, in, out []*Tensor[F]) (ok bool, err error) {
	switch op.Kind {
	case ir.OpSiLU:
		mapf(in[0], out[0], func(x F) F { return F(float64(x) * sigmoid(float64(x))) })
	case ir.OpSwiGLU:
		return true, zip(in[0], in[1], out[0], func(g, u F) F {
			v := float64(g)
			return F(v * sigmoid(v) * float64(u))
		})
	case ir.OpSwiGLUGrad:
		return true, swigluGrad(in[0], in[1], in[2], out[0], out[1])
	case ir.OpHardSwish:
		mapf(in[0], out[0], func(x F) F { return F(float64(x) * hardSigmoid(float64(x))) })
	case ir.OpHardSigmoid:
		mapf(in[0], out[0], func(x F) F { return F(hardSigmoid(float64(x))) })
	case ir.OpSiLUGrad:
		return true, zip(in[0], in[1], out[0], func(x, dy F) F {
			v := float64(x)
			s := sigmoid(v)
			return F(float64(dy) * s * (1 + v*(1-s)))
		})
	case ir.OpHardSwishGrad:
		return true, zip(in[0], in[1], out[0], func(x, dy F) F { return F(float64(dy) * hardSwishSlope(float64(x))) })
	case ir.OpHardSigmoidGrad:
		return true, zip(in[0], in[1], out[0], func(x, dy F) F {
			if x > -3 && x < 3 {
				return F(float64(dy) * hardSigmoidSlope)
			}
			return 0
		})
	default:
		return false, nil
	}
	return true, nil
}

// swigluGrad is swiglu's backward in one pass: with s = σ(gate), dgate =
// dy·up·s·(1 + gate·(1 − s)) (silu's slope times up) and dup =
// dy·gate·s (silu(gate)), in float64 whatever F is.
func swigluGrad[F Float](gate, up, dy, dgate, dup *Tensor[F]) error {
	n := len(gate.Data)
	for _, t := range []*Tensor[F]{up, dy, dgate, dup} {
		if len(t.Data) != n {
			return fmt.Errorf("swiglu_grad: element counts differ: gate has %d, another operand %d", n, len(t.Data))
		}
	}
	for i := range gate.Data {
		v, u, d := float64(gate.Data[i]), float64(up.Data[i]), float64(dy.Data[i])
		s := sigmoid(v)
		dgate.Data[i] = F(d * u * s * (1 + v*(1-s)))
		dup.Data[i] = F(d * v * s)
	}
	return nil
}

// hardSigmoidSlope is PyTorch's slope of hardsigmoid, 1.0f/6.0f: aten's
// hardsigmoid_backward multiplies by this float constant whatever the
// tensor's type, so its float64 gradients are 3e-8 from 1/6 relative. hap
// uses the same constant, and its gradients match PyTorch's to the
// reference check's 1e-9.
const hardSigmoidSlope = 0x1.555556p-03 // float32(1) / float32(6)

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// hardSigmoid is relu6(x+3)/6.
func hardSigmoid(x float64) float64 { return math.Min(math.Max(x+3, 0), 6) / 6 }

// hardSwishSlope is d/dx x·relu6(x+3)/6 as aten's hardswish_backward takes
// it: 0 below −3, x/3 + ½ on [−3, 3], 1 above.
func hardSwishSlope(x float64) float64 {
	switch {
	case x < -3:
		return 0
	case x <= 3:
		return x/3 + 0.5
	}
	return 1
}
