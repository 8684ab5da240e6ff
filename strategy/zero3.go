package strategy

import (
	"fmt"

	"hap/ir"
	"hap/spmd"
)

// zero3 is ZeRO stage 3 (Rajbhandari et al., SC'20) in hap's layouts: data
// parallel with the batch split evenly, and every parameter stored sharded —
// Gather on its first dim over all devices, cut as evenly as its length
// allows by a segment of that length — and all-gathered to Identity just
// before its first use. Lowering needs nothing special: each device's
// forward program reads its shard through an all-gather, whose adjoint is a
// reduce-scatter, so autodiff hands each device only its shard of the summed
// gradient, and the update (with its optimizer state) touches only that
// shard. Resident memory per parameter element drops from value + gradient
// + optimizer state (16 bytes with Adam in float32) to a 1/n share of it.
//
// One difference from DeepSpeed's ZeRO-3: a gathered parameter stays live
// from its all-gather until its last backward use (lowering does not
// rematerialise), where DeepSpeed frees it after the forward use and
// gathers it again for backward. So the gathered copies count as activations
// (4 bytes per element at the peak, against DeepSpeed's one layer at a
// time), and the communication is one all-gather plus one reduce-scatter per
// parameter — the volume of data parallelism's all-reduce — instead of
// DeepSpeed's 1.5×. That is PyTorch FSDP with reshard_after_forward=False;
// half its traffic (the forward all-gathers) can overlap forward compute.
func zero3(g *ir.Graph, n int) (*spmd.Program, error) {
	b, err := batchSize(g)
	if err != nil {
		return nil, err
	}
	segs := []spmd.Segment{{Name: "batch", Units: b, Lengths: spmd.EvenLengths(b, n)}}
	segOf := map[int]int{} // a parameter's first-dim length → its segment
	params := map[ir.TensorID]spmd.Layout{}
	for _, t := range g.TensorsOfKind(ir.Param) {
		s := g.Tensors[t].Shape
		if len(s) == 0 {
			continue // a scalar has no dim to split; it stays replicated
		}
		k, ok := segOf[s[0]]
		if !ok {
			segs = append(segs, spmd.Segment{Name: fmt.Sprintf("param%d", s[0]), Units: s[0], Lengths: spmd.EvenLengths(s[0], n)})
			k = len(segs) - 1
			segOf[s[0]] = k
		}
		params[t] = spmd.G(0, k)
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("zero3: %s has no parameter with a dimension to shard", g.Name)
	}
	leaves := batchLeaves(g, segs, params)
	p, err := complete(g, n, segs, leaves, both(gatheredParams(g), noPartials(g)))
	if err != nil {
		return nil, fmt.Errorf("zero3 on %s: %w", g.Name, err)
	}
	return p, nil
}

// gatheredParams allows the data-parallel rules of a ZeRO-3 program: every
// parameter is read whole (Identity: its all-gather is inserted before the
// op), and activations split only along the batch (segment 0), never along
// a parameter's segment.
func gatheredParams(g *ir.Graph) func(op *ir.Op, r spmd.Rule) bool {
	return func(op *ir.Op, r spmd.Rule) bool {
		for j, t := range op.Inputs {
			l := r.In[j]
			if g.Tensors[t].Kind == ir.Param {
				if l != spmd.I {
					return false
				}
			} else if l.Kind == spmd.Gather && l.Seg != 0 {
				return false
			}
		}
		for _, l := range r.Out {
			if l.Kind == spmd.Gather && l.Seg != 0 {
				return false
			}
		}
		return true
	}
}
