package plan

import (
	"fmt"

	"hap/cost"
	"hap/ir"
	"hap/spmd"
)

// CollectiveEstimate is the cost model's time for one collective of a
// program, and for the method the plan did not take, where it had a
// choice: what hap explain lists beside each collective.
type CollectiveEstimate struct {
	// Seconds is the instruction's time under its method. In a mesh
	// program the instruction runs on every group along its axis at once
	// (as siblings sharing the network); the estimate is the slowest
	// group's.
	Seconds float64
	// Alternative names the rejected method — "grouped" or "padded" for
	// an all-gather or reduce-scatter, "all-gather+slice" for an
	// all-to-all — and AltSeconds is its time on the slowest group's
	// pieces; "" and 0 for an all-reduce, which has no alternative.
	Alternative string
	AltSeconds  float64
	// Latency is the part of Seconds that does not grow with the bytes:
	// the same call with one byte in each rank's nonempty piece. At real
	// collective latencies (tens of µs a call) small collectives are all
	// latency, which is what coalescing them into one call would save.
	Latency float64
}

// EstimateCollective prices communication instruction i of p, a program
// of g, under m: the instruction's collective, on each group along its
// axis, with the pieces the tensor's layouts give each rank. An
// instruction that is not a collective costs nothing; an error is a call
// the cost model refuses, named with the tensor and the group.
func EstimateCollective(m *cost.Model, g *ir.Graph, p *spmd.Program, i int) (CollectiveEstimate, error) {
	in := &p.Instrs[i]
	if in.Kind != spmd.Comm || !ir.IsCollective(in.Collective) {
		return CollectiveEstimate{}, nil
	}
	t := &g.Tensors[in.Tensor]
	from, _ := p.FromTo(i)
	groups := p.Groups(in.Axis)
	sharing := 0
	if len(groups) > 1 {
		sharing = len(groups)
	}
	var out CollectiveEstimate
	for _, group := range groups {
		e, err := estimateOnGroup(m, p, in, from, t, group, sharing)
		if err != nil {
			return CollectiveEstimate{}, fmt.Errorf("%s of tensor %s (instruction %d) over devices %v: %w", in.Collective, t.Name, i, group, err)
		}
		if e.Seconds > out.Seconds {
			out = e
		}
	}
	return out, nil
}

// estimateOnGroup prices one group's call of a collective.
func estimateOnGroup(m *cost.Model, p *spmd.Program, in *spmd.Instr, from spmd.Placement, t *ir.Tensor, group []int, sharing int) (CollectiveEstimate, error) {
	_, local := p.Piece(from, t.Shape, group[0])
	elem := float64(t.DType.Size())
	// per is the bytes of one element of dim along the rest of the local piece.
	per := func(dim int) float64 {
		n := 1.0
		for d, v := range local {
			if d != dim {
				n *= float64(v)
			}
		}
		return n * elem
	}
	// call prices one call, keeping the first error: the estimate is
	// then refused whole.
	var callErr error
	call := func(kind cost.Collective, bytes []float64, method cost.Method) float64 {
		c, err := m.CollectiveTime(cost.Call{Kind: kind, Group: group, Bytes: bytes, Method: method, Sharing: sharing})
		if err != nil && callErr == nil {
			callErr = fmt.Errorf("%s method %q: %w", kind, method, err)
		}
		return c
	}
	bytes := make([]float64, len(group))
	// done completes e, taken by a call of kind and method on bytes, with
	// its latency.
	done := func(e CollectiveEstimate, kind cost.Collective, method cost.Method) (CollectiveEstimate, error) {
		ones := make([]float64, len(bytes))
		for r, b := range bytes {
			ones[r] = min(b, 1)
		}
		e.Latency = min(call(kind, ones, method), e.Seconds)
		if callErr != nil {
			return CollectiveEstimate{}, callErr
		}
		return e, nil
	}
	switch in.Collective {
	case ir.OpAllGather, ir.OpReduceScatter:
		l := in.From
		kind := cost.AllGather
		if in.Collective == ir.OpReduceScatter {
			l, kind = in.To, cost.ReduceScatter
		}
		pieces, _ := p.AxisPieces(in.Axis, l, t.Shape, group[0])
		even := true
		for r, n := range pieces {
			bytes[r] = float64(n) * per(l.Dim)
			even = even && n == pieces[0]
		}
		if even && in.Method != spmd.MethodGrouped {
			// Equal pieces run the even ring; grouping them was the
			// rejected alternative.
			return done(CollectiveEstimate{Seconds: call(kind, bytes, cost.MethodEven), Alternative: "grouped", AltSeconds: call(kind, bytes, cost.MethodGrouped)}, kind, cost.MethodEven)
		}
		pad, grp := call(kind, bytes, cost.MethodPadded), call(kind, bytes, cost.MethodGrouped)
		if in.Method == spmd.MethodGrouped {
			return done(CollectiveEstimate{Seconds: grp, Alternative: "padded", AltSeconds: pad}, kind, cost.MethodGrouped)
		}
		return done(CollectiveEstimate{Seconds: pad, Alternative: "grouped", AltSeconds: grp}, kind, cost.MethodPadded)
	case ir.OpAllReduce:
		for r := range bytes {
			bytes[r] = float64(local.Numel()) * elem
		}
		return done(CollectiveEstimate{Seconds: call(cost.AllReduce, bytes, "")}, cost.AllReduce, "")
	case ir.OpAllToAll:
		pieces, _ := p.AxisPieces(in.Axis, in.From, t.Shape, group[0])
		even := true
		for r, n := range pieces {
			bytes[r] = float64(n) * per(in.From.Dim)
			even = even && n == pieces[0]
		}
		// The rejected alternative: through Identity, an all-gather (the
		// cheaper method when uneven; the even ring refuses uneven
		// pieces) and a free slice.
		var ag float64
		if even {
			ag = call(cost.AllGather, bytes, cost.MethodEven)
		} else {
			ag = min(call(cost.AllGather, bytes, cost.MethodPadded), call(cost.AllGather, bytes, cost.MethodGrouped))
		}
		return done(CollectiveEstimate{Seconds: call(cost.AllToAll, bytes, cost.MethodGrouped), Alternative: "all-gather+slice", AltSeconds: ag}, cost.AllToAll, cost.MethodGrouped)
	}
	return CollectiveEstimate{}, nil
}
