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
	return eachGathered("gather", axis, x.Shape, index, func(e, src int) { y.Data[e] = x.Data[src] })
}

// gatherGrad scatter-adds dy into dx (zeroed) at the index's positions,
// in element order.
func gatherGrad[F Float](axis int, index, dy, dx *Tensor[F]) error {
	return eachGathered("gather_grad", axis, dx.Shape, index, func(e, src int) { dx.Data[src] += dy.Data[e] })
}

// eachGathered calls f(e, src) for every element e of index, in order,
// with src the element of a tensor shaped shape (x, or dx) it points at
// along axis; a position outside the axis is an error naming op.
func eachGathered[F Float](op string, axis int, shape ir.Shape, index *Tensor[F], f func(e, src int)) error {
	outer, inner := outerInner(shape, axis)
	n, k := shape[axis], index.Shape[axis]
	for o := 0; o < outer; o++ {
		for j := 0; j < k; j++ {
			for i := 0; i < inner; i++ {
				e := (o*k+j)*inner + i
				p := index.Ints[e]
				if p < 0 || p >= int64(n) {
					return fmt.Errorf("%s index %d at element %d outside [0,%d) along axis %d", op, p, e, n, axis)
				}
				f(e, (o*n+int(p))*inner+i)
			}
		}
	}
	return nil
}
