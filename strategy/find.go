package strategy

import (
	"fmt"
	"slices"

	"hap/ir"
)

// What the hand-written strategies shard, found by structure: by op kinds,
// shapes and how ops connect, never by names, so that a transformer
// exported as "h.3.attn.c_attn" or with no names at all is split as the
// zoo's "layer3.attn.q" is. A strategy that finds nothing it shards says so
// and stops, rather than quietly becoming another strategy.

// attentionParts are the parameters tensor parallelism splits by heads:
// the q, k and v projections' weights (column-parallel, Gather(1)) and
// biases (Gather(0)), and the output projection's weight (row-parallel,
// Gather(0)), for every head count found.
type attentionParts struct {
	heads            []int // distinct head counts, in op order
	headsOf          map[ir.TensorID]int
	qkvW, qkvB, outW []ir.TensorID
}

// feedForwardParts are the parameters tensor parallelism splits by hidden
// unit: x·W1[d,f] (+b1[f]) → elementwise → ·W2[f,d], W1 and b1
// column-parallel, W2 row-parallel, for every width f found.
type feedForwardParts struct {
	widths     []int // distinct widths f, in op order
	widthOf    map[ir.TensorID]int
	w1, b1, w2 []ir.TensorID
}

// producer is the op that computes t, or nil for a leaf.
func producer(g *ir.Graph, t ir.TensorID) *ir.Op {
	if p := g.Tensors[t].Producer; p != ir.NoOp {
		return &g.Ops[p]
	}
	return nil
}

// paramOf is op's input slot when it is a parameter of the given rank,
// else NoTensor.
func paramOf(g *ir.Graph, op *ir.Op, slot, rank int) ir.TensorID {
	if slot >= len(op.Inputs) {
		return ir.NoTensor
	}
	t := op.Inputs[slot]
	if tt := &g.Tensors[t]; tt.Kind == ir.Param && len(tt.Shape) == rank {
		return t
	}
	return ir.NoTensor
}

// projection follows t back through reshapes and permutes (the split into
// heads, and rotary embeddings) and a bias to the matmul by a 2-D parameter that makes it: that
// weight, the bias (NoTensor when none) and ok.
func projection(g *ir.Graph, t ir.TensorID) (w, b ir.TensorID, ok bool) {
	op := producer(g, t)
	// Rotary embeddings (LLaMA's q and k) rotate within a head: they sit
	// between the split into heads and attention like a permute.
	for op != nil && (op.Kind == ir.OpReshape || op.Kind == ir.OpPermute || op.Kind == ir.OpRotary) {
		op = producer(g, op.Inputs[0])
	}
	b = ir.NoTensor
	if op != nil && op.Kind == ir.OpBias {
		if b = paramOf(g, op, 1, 1); b == ir.NoTensor {
			return ir.NoTensor, ir.NoTensor, false
		}
		op = producer(g, op.Inputs[0])
	}
	if op == nil || op.Kind != ir.OpMatMul || op.Attrs.TransA || op.Attrs.TransB {
		return ir.NoTensor, ir.NoTensor, false
	}
	if w = paramOf(g, op, 1, 2); w == ir.NoTensor {
		return ir.NoTensor, ir.NoTensor, false
	}
	return w, b, true
}

// outProjection follows attention's output forward through reshapes and
// permutes (the merge of heads) to the matmul that reads it with a 2-D
// parameter: that weight.
func outProjection(g *ir.Graph, readers [][]ir.OpID, t ir.TensorID) (ir.TensorID, bool) {
	for {
		if len(readers[t]) != 1 {
			return ir.NoTensor, false
		}
		op := &g.Ops[readers[t][0]]
		switch {
		case op.Kind == ir.OpReshape || op.Kind == ir.OpPermute:
			t = op.Outputs[0]
		case op.Kind == ir.OpMatMul && op.Inputs[0] == t && !op.Attrs.TransA && !op.Attrs.TransB:
			w := paramOf(g, op, 1, 2)
			return w, w != ir.NoTensor
		default:
			return ir.NoTensor, false
		}
	}
}

// findAttention finds every forward attention op over 4-D [B,H,S,D]
// queries whose q, k and v are projections of parameters and whose output
// is projected back by one.
func findAttention(g *ir.Graph) attentionParts {
	a := attentionParts{headsOf: map[ir.TensorID]int{}}
	readers := g.Consumers()
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != ir.OpAttention || op.Phase != ir.Forward || len(op.Inputs) < 3 {
			continue
		}
		q := g.Tensors[op.Inputs[0]].Shape
		if len(q) != 4 {
			continue
		}
		var ws, bs []ir.TensorID
		ok := true
		for slot := range 3 {
			w, b, found := projection(g, op.Inputs[slot])
			ok = ok && found
			ws = append(ws, w)
			if b != ir.NoTensor {
				bs = append(bs, b)
			}
		}
		out, found := outProjection(g, readers, op.Outputs[0])
		if !ok || !found {
			continue
		}
		h := q[1]
		if op.Attrs.KVGroup > 1 {
			// Grouped-query attention splits by key/value head, each
			// with its group of query heads (spmd's split-kv-heads).
			h = g.Tensors[op.Inputs[1]].Shape[1]
		}
		if !slices.Contains(a.heads, h) {
			a.heads = append(a.heads, h)
		}
		for _, t := range append(append(append([]ir.TensorID{}, ws...), bs...), out) {
			a.headsOf[t] = h
		}
		a.qkvW = append(a.qkvW, ws...)
		a.qkvB = append(a.qkvB, bs...)
		a.outW = append(a.outW, out)
	}
	return a
}

// elementwise reports the one-input ops that keep a feed-forward's hidden
// units where they are.
func elementwise(k ir.OpKind) bool {
	switch k {
	case ir.OpReLU, ir.OpGELU, ir.OpSigmoid, ir.OpTanh, ir.OpDropout, ir.OpSiLU, ir.OpHardSwish, ir.OpHardSigmoid:
		return true
	}
	return false
}

// findFeedForward finds every x·W1[d,f] (+b1) → elementwise ops → ·W2[f,d]
// among the forward ops, each intermediate read by the next op alone.
func findFeedForward(g *ir.Graph) feedForwardParts {
	f := feedForwardParts{widthOf: map[ir.TensorID]int{}}
	readers := g.Consumers()
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != ir.OpMatMul || op.Phase != ir.Forward || op.Attrs.TransA || op.Attrs.TransB {
			continue
		}
		w2 := paramOf(g, op, 1, 2)
		if w2 == ir.NoTensor {
			continue
		}
		width, d := g.Tensors[w2].Shape[0], g.Tensors[w2].Shape[1]
		t := op.Inputs[0]
		var p *ir.Op
		for p = producer(g, t); p != nil && elementwise(p.Kind) && len(readers[t]) == 1; p = producer(g, t) {
			t = p.Inputs[0]
		}
		b1 := ir.NoTensor
		if p != nil && p.Kind == ir.OpBias && len(readers[t]) == 1 {
			if b1 = paramOf(g, p, 1, 1); b1 == ir.NoTensor {
				continue
			}
			t = p.Inputs[0]
			p = producer(g, t)
		}
		if p == nil || p.Kind != ir.OpMatMul || len(readers[t]) != 1 || p.Attrs.TransA || p.Attrs.TransB {
			continue
		}
		w1 := paramOf(g, p, 1, 2)
		if w1 == ir.NoTensor || !g.Tensors[w1].Shape.Equal(ir.Shape{d, width}) || p.ID == op.ID {
			continue
		}
		if !slices.Contains(f.widths, width) {
			f.widths = append(f.widths, width)
		}
		f.w1 = append(f.w1, w1)
		f.w2 = append(f.w2, w2)
		f.widthOf[w1], f.widthOf[w2] = width, width
		if b1 != ir.NoTensor {
			f.b1 = append(f.b1, b1)
			f.widthOf[b1] = width
		}
	}
	return f
}

// findExperts finds the expert parameters of every top-2 mixture of
// experts: the parameters with one row per expert (dim 0 the gate's
// expert count) that the tokens dispatch sends on meet before the combine
// brings them back — from the einsum reading top2_gate's dispatch output
// up to the op reading its combine output.
func findExperts(g *ir.Graph) (experts []ir.TensorID, count int) {
	readers := g.Consumers()
	seen := map[ir.TensorID]bool{}
	for i := range g.Ops {
		gate := &g.Ops[i]
		if gate.Kind != ir.OpTop2Gate || gate.Phase != ir.Forward || len(gate.Outputs) < 2 {
			continue
		}
		logits := g.Tensors[gate.Inputs[0]].Shape
		e := logits[len(logits)-1]
		combine, dispatch := gate.Outputs[0], gate.Outputs[1]
		var frontier []ir.TensorID
		for _, r := range readers[dispatch] {
			frontier = append(frontier, g.Ops[r].Outputs...)
		}
		visited := map[ir.OpID]bool{}
		var found []ir.TensorID
		closed := false // the combine was reached
		for len(frontier) > 0 {
			t := frontier[0]
			frontier = frontier[1:]
			for _, r := range readers[t] {
				op := &g.Ops[r]
				if slices.Contains(op.Inputs, combine) {
					closed = true
					continue
				}
				if visited[op.ID] {
					continue
				}
				visited[op.ID] = true
				for _, in := range op.Inputs {
					if tt := &g.Tensors[in]; tt.Kind == ir.Param && len(tt.Shape) >= 2 && tt.Shape[0] == e {
						found = append(found, in)
					}
				}
				frontier = append(frontier, op.Outputs...)
			}
		}
		if len(found) == 0 || !closed {
			continue
		}
		if count == 0 {
			count = e
		}
		for _, t := range found {
			if !seen[t] && e == count {
				seen[t] = true
				experts = append(experts, t)
			}
		}
	}
	slices.Sort(experts)
	return experts, count
}

// nothingFound is the error of a strategy that finds nothing to shard.
func nothingFound(strategy, graph, lookedFor string) error {
	return fmt.Errorf("%s: graph %s has %s; %s shards nothing else, and is not run in its place", strategy, graph, lookedFor, strategy)
}
