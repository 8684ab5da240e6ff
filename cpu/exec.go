package cpu

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"hap/ir"
)

// Run evaluates g on the feeds (one value per leaf tensor: inputs, labels,
// params, state) and returns the values of want. Intermediate values are
// released after their last use.
func Run[F Float](ctx *Ctx, g *ir.Graph, feeds map[ir.TensorID]*Tensor[F], want []ir.TensorID) (map[ir.TensorID]*Tensor[F], error) {
	vals := make([]*Tensor[F], len(g.Tensors))
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if !t.Kind.IsLeaf() {
			continue
		}
		v, ok := feeds[t.ID]
		if !ok {
			return nil, fmt.Errorf("no value fed for %s %q %s%v", t.Kind, t.Name, t.DType, t.Shape)
		}
		if !v.Shape.Equal(t.Shape) {
			return nil, fmt.Errorf("value fed for %s %q has shape %v, want %v", t.Kind, t.Name, v.Shape, t.Shape)
		}
		if (t.DType == ir.Int64) != (v.Ints != nil) || len(v.Data)+len(v.Ints) != t.Shape.Numel() {
			return nil, fmt.Errorf("value fed for %s %q does not hold %d %s elements", t.Kind, t.Name, t.Shape.Numel(), t.DType)
		}
		vals[i] = v
	}
	keep := make([]bool, len(g.Tensors))
	for _, id := range want {
		keep[id] = true
	}
	last := make([]int, len(g.Tensors))
	for i := range last {
		last[i] = -1
	}
	for i := range g.Ops {
		for _, in := range g.Ops[i].Inputs {
			last[in] = i
		}
	}
	in := []*Tensor[F]{}
	out := []*Tensor[F]{}
	for i := range g.Ops {
		op := &g.Ops[i]
		in, out = in[:0], out[:0]
		for _, id := range op.Inputs {
			in = append(in, vals[id])
		}
		for _, id := range op.Outputs {
			t := &g.Tensors[id]
			v := NewTensor[F](t.Shape, t.DType)
			vals[id] = v
			out = append(out, v)
		}
		if err := Exec(ctx, op, in, out); err != nil {
			return nil, fmt.Errorf("op %q (%s): %w", op.Name, op.Kind, err)
		}
		for _, id := range op.Inputs {
			if last[id] == i && !keep[id] && !g.Tensors[id].Kind.IsLeaf() {
				vals[id] = nil
			}
		}
	}
	res := make(map[ir.TensorID]*Tensor[F], len(want))
	for _, id := range want {
		if vals[id] == nil {
			return nil, fmt.Errorf("tensor %q was not computed", g.Tensors[id].Name)
		}
		res[id] = vals[id]
	}
	return res, nil
}

// nameSeed mixes a run seed with a tensor's name, so each tensor's random
// values are independent of declaration order.
func nameSeed(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// InitNormalStd is the standard deviation of ir.InitNormal.
const InitNormalStd = 0.02

// InitParam returns a parameter's (or state's) starting value, a pure
// function of (seed, name, shape, init), computed in float64 and rounded to
// F, so every backend and device count starts identically.
func InitParam[F Float](t *ir.Tensor, seed uint64) *Tensor[F] {
	v := NewTensor[F](t.Shape, t.DType)
	r := nameSeed(seed, t.Name)
	switch t.Init {
	case ir.InitZeros:
	case ir.InitOnes:
		for i := range v.Data {
			v.Data[i] = 1
		}
	case ir.InitNormal:
		for i := range v.Data {
			v.Data[i] = F(r.NormFloat64() * InitNormalStd)
		}
	default:
		bound := 1 / math.Sqrt(float64(fanIn(t.Shape)))
		for i := range v.Data {
			v.Data[i] = F((2*r.Float64() - 1) * bound)
		}
	}
	return v
}

// fanIn is the number of inputs feeding one output of a weight laid out as
// hap's layers lay them: [in, out] for linear, [O, C, KH, KW] for conv,
// [E, in, out] for experts, [n] for vectors.
func fanIn(s ir.Shape) int {
	switch len(s) {
	case 0:
		return 1
	case 1:
		return max(s[0], 1)
	case 2:
		return max(s[0], 1)
	case 3:
		return max(s[1], 1)
	default:
		return max(s[1:].Numel(), 1)
	}
}

// IntRange returns the exclusive upper bound of valid values of an int64
// tensor, read from its consumers (an embedding's vocabulary, a loss's
// classes, a gather's axis), or 0 when nothing constrains it.
func IntRange(g *ir.Graph, id ir.TensorID) int {
	bound := 0
	for i := range g.Ops {
		op := &g.Ops[i]
		for j, in := range op.Inputs {
			if in != id {
				continue
			}
			var b int
			switch {
			case op.Kind == ir.OpEmbedding && j == 0:
				b = g.Tensors[op.Inputs[1]].Shape[0]
			case (op.Kind == ir.OpCrossEntropy || op.Kind == ir.OpNLLLoss) && j == 1:
				b = g.Tensors[op.Inputs[0]].Shape[1]
			case op.Kind == ir.OpEmbeddingGrad && j == 0:
				b = op.Attrs.Shape[0]
			case op.Kind == ir.OpGather && j == 1:
				b = g.Tensors[op.Inputs[0]].Shape[op.Attrs.Axis]
			case op.Kind == ir.OpGatherGrad && j == 0:
				b = op.Attrs.Shape[op.Attrs.Axis]
			}
			if b > 0 && (bound == 0 || b < bound) {
				bound = b
			}
		}
	}
	return bound
}

// SyntheticBatch returns deterministic random inputs and labels for g:
// floats from N(0,1), integers uniform over their valid range.
func SyntheticBatch[F Float](g *ir.Graph, seed uint64) map[ir.TensorID]*Tensor[F] {
	feeds := map[ir.TensorID]*Tensor[F]{}
	for i := range g.Tensors {
		t := &g.Tensors[i]
		if t.Kind != ir.Input && t.Kind != ir.Label {
			continue
		}
		v := NewTensor[F](t.Shape, t.DType)
		r := nameSeed(seed, t.Name)
		if t.DType == ir.Int64 {
			n := max(IntRange(g, t.ID), 1)
			for j := range v.Ints {
				v.Ints[j] = int64(r.IntN(n))
			}
		} else {
			for j := range v.Data {
				v.Data[j] = F(r.NormFloat64())
			}
		}
		feeds[t.ID] = v
	}
	return feeds
}
