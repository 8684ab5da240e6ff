package cpu

import (
	"math"

	"hap/ir"
)

// PeakBytes is the most memory Run holds at once for g's tensors, at
// elemSize bytes a float element (int64 elements are 8): every leaf for
// the whole run, and each computed tensor from its op until the op that
// last reads it (a tensor nothing reads is held to the end, as Run keeps
// it). It is what a caller checks against the machine before allocating,
// so that a model too large for it is one error with the figure, not an
// out-of-memory abort. It saturates at math.MaxInt64 rather than wrap.
func PeakBytes(g *ir.Graph, elemSize int) int64 {
	size := func(t *ir.Tensor) int64 {
		es := int64(elemSize)
		if t.DType == ir.Int64 {
			es = 8
		}
		return mulSat(int64(t.Shape.Numel()), es)
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
	var live int64
	for i := range g.Tensors {
		if t := &g.Tensors[i]; t.Kind.IsLeaf() {
			live = addSat(live, size(t))
		}
	}
	peak := live
	for i := range g.Ops {
		op := &g.Ops[i]
		for _, id := range op.Outputs {
			live = addSat(live, size(&g.Tensors[id]))
		}
		peak = max(peak, live)
		for _, id := range op.Inputs {
			if t := &g.Tensors[id]; last[id] == i && !t.Kind.IsLeaf() && live < math.MaxInt64 {
				live -= size(t)
			}
		}
	}
	return peak
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mulSat(a, b int64) int64 {
	if a < 0 || b < 0 {
		return math.MaxInt64 // an overflowed count upstream
	}
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
