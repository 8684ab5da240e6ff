package cpu

import (
	"fmt"
	"math"

	"hap/ir"
)

// Float is the element type of a float tensor on this backend.
type Float interface{ float32 | float64 }

// Tensor is a dense row-major host tensor. Float tensors use Data; int64
// tensors (ids, labels) use Ints.
type Tensor[F Float] struct {
	Shape ir.Shape
	Data  []F
	Ints  []int64
}

// NewTensor allocates a zeroed tensor of the given shape and dtype.
func NewTensor[F Float](shape ir.Shape, dt ir.DType) *Tensor[F] {
	t := &Tensor[F]{Shape: shape.Clone()}
	if dt == ir.Int64 {
		t.Ints = make([]int64, shape.Numel())
	} else {
		t.Data = make([]F, shape.Numel())
	}
	return t
}

// FromFloat64 builds a float tensor from float64 values.
func FromFloat64[F Float](shape ir.Shape, v []float64) *Tensor[F] {
	t := &Tensor[F]{Shape: shape.Clone(), Data: make([]F, len(v))}
	for i, x := range v {
		t.Data[i] = F(x)
	}
	return t
}

// Float64s returns the values as float64.
func (t *Tensor[F]) Float64s() []float64 {
	out := make([]float64, len(t.Data))
	for i, x := range t.Data {
		out[i] = float64(x)
	}
	return out
}

// Clone deep-copies t.
func (t *Tensor[F]) Clone() *Tensor[F] {
	c := &Tensor[F]{Shape: t.Shape.Clone()}
	if t.Data != nil {
		c.Data = append([]F{}, t.Data...)
	}
	if t.Ints != nil {
		c.Ints = append([]int64{}, t.Ints...)
	}
	return c
}

// Ctx carries what kernels need beyond their operands.
type Ctx struct {
	// Comm connects this device to its group for collective ops; nil in a
	// single-device run.
	Comm *Comm
}

// checkFinite reports the first NaN or Inf in t, for debugging runs.
func checkFinite[F Float](name string, t *Tensor[F]) error {
	for i, x := range t.Data {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("tensor %q has non-finite value %v at flat index %d", name, x, i)
		}
	}
	return nil
}

// Slice returns [start, start+n) of t along axis, for float and int tensors.
func Slice[F Float](t *Tensor[F], axis, start, n int) *Tensor[F] {
	out := &Tensor[F]{Shape: withDim(t.Shape, axis, n)}
	outer, inner := outerInner(t.Shape, axis)
	row, w := t.Shape[axis]*inner, n*inner
	if t.Ints != nil {
		out.Ints = make([]int64, outer*w)
		for o := 0; o < outer; o++ {
			copy(out.Ints[o*w:(o+1)*w], t.Ints[o*row+start*inner:o*row+start*inner+w])
		}
		return out
	}
	out.Data = make([]F, outer*w)
	for o := 0; o < outer; o++ {
		copy(out.Data[o*w:(o+1)*w], t.Data[o*row+start*inner:o*row+start*inner+w])
	}
	return out
}

// Concat joins float tensors along axis.
func Concat[F Float](axis int, ts []*Tensor[F]) *Tensor[F] {
	s := ts[0].Shape.Clone()
	s[axis] = 0
	for _, t := range ts {
		s[axis] += t.Shape[axis]
	}
	out := NewTensor[F](s, ir.Float32)
	concat(axis, ts, out)
	return out
}
