package cpu

import (
	"fmt"

	"hap/ir"
)

// execGather runs gather and gather_grad; ok is false for any other kind.
func execGather[F Float](op *ir.Op, in, out []*Tensor[F]) (ok bool, err error) {
	switch op.Kind {
	case ir.OpGather:
		return true, gather(op.Attrs.Axis, in[0], in[1], out[0])
	case ir.OpGatherGrad:
		return true, gatherGrad(op.Attrs.Axis, in[0], in[1], out[0])
	}
	return false, nil
}

// gather: y[o, j, i] = x[o, index[o, j, i], i], with x viewed as [outer,
// n, inner] around axis and the index and y as [outer, k, inner].
func gather[F Float](axis int, x, index, y *Tensor[F]) error {
	outer, inner := outerInner(x.Shape, axis)
	n, k := x.Shape[axis], index.Shape[axis]
	for o := 0; o < outer; o++ {
		for j := 0; j < k; j++ {
			for i := 0; i < inner; i++ {
				e := (o*k+j)*inner + i
				p := index.Ints[e]
				if p < 0 || p >= int64(n) {
					return fmt.Errorf("gather index %d at element %d outside [0,%d) along axis %d", p, e, n, axis)
				}
				y.Data[e] = x.Data[(o*n+int(p))*inner+i]
			}
		}
	}
	return nil
}

// gatherGrad scatter-adds dy into dx (zeroed) at the index's positions,
// in element order.
func gatherGrad[F Float](axis int, index, dy, dx *Tensor[F]) error {
	outer, inner := outerInner(dx.Shape, axis)
	n, k := dx.Shape[axis], index.Shape[axis]
	for o := 0; o < outer; o++ {
		for j := 0; j < k; j++ {
			for i := 0; i < inner; i++ {
				e := (o*k+j)*inner + i
				p := index.Ints[e]
				if p < 0 || p >= int64(n) {
					return fmt.Errorf("gather_grad index %d at element %d outside [0,%d) along axis %d", p, e, n, axis)
				}
				dx.Data[(o*n+int(p))*inner+i] += dy.Data[e]
			}
		}
	}
	return nil
}
