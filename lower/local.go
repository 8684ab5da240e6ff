package lower

import (
	"fmt"

	"hap/encode"
	"hap/ir"
)

// Local is one device's forward program: the original ops on local shards,
// with collectives where the distributed program communicates. Autodiff of
// Graph (ir.BuildTrainStep) is that device's share of the distributed
// backward pass and update.
type Local struct {
	Rank  int
	Graph *ir.Graph
	// Leaf maps each original tensor to the local tensor fed for it
	// (ir.NoTensor for computed tensors).
	Leaf []ir.TensorID
	// Layout is each original leaf's layout.
	Layout []encode.Layout
}

// BuildLocal lowers program p of forward graph g for device rank.
func BuildLocal(g *ir.Graph, p *encode.Program, rank int) (*Local, error) {
	if err := encode.Check(g, p); err != nil {
		return nil, err
	}
	segs := p.Segments
	b := ir.NewBuilder(fmt.Sprintf("%s@%d", g.Name, rank), ir.Float32)
	loc := &Local{Rank: rank, Leaf: make([]ir.TensorID, len(g.Tensors)), Layout: make([]encode.Layout, len(g.Tensors))}
	for i := range loc.Leaf {
		loc.Leaf[i] = ir.NoTensor
	}
	// vals[t][layout] is the local tensor holding t in that layout.
	vals := make([]map[encode.Layout]ir.TensorID, len(g.Tensors))
	set := func(t ir.TensorID, l encode.Layout, v ir.TensorID) {
		if vals[t] == nil {
			vals[t] = map[encode.Layout]ir.TensorID{}
		}
		vals[t][l] = v
	}
	replicate := map[ir.TensorID]bool{}
	for _, lf := range p.Leaves {
		t := &g.Tensors[lf.Tensor]
		v := b.Leaf(t.Kind, t.Name, t.DType, encode.LocalShape(lf.Layout, t.Shape, segs, rank), t.Init)
		loc.Leaf[lf.Tensor], loc.Layout[lf.Tensor] = v, lf.Layout
		if t.Kind == ir.Param && lf.Layout.Kind == encode.Identity {
			// Every device holds the whole parameter; its gradient is the
			// sum of every device's contribution: a replicate op whose
			// adjoint is that all-reduce. It is emitted at the
			// parameter's first use (see get), so that in the reversed
			// backward the all-reduce comes right after the parameter's
			// gradient is complete and overlaps the rest of backward, as
			// data-parallel runtimes bucket it.
			replicate[lf.Tensor] = true
		}
		set(lf.Tensor, lf.Layout, v)
	}
	get := func(t ir.TensorID, l encode.Layout) ir.TensorID {
		if replicate[t] {
			replicate[t] = false
			restore := b.Scope(g.Tensors[t].Name)
			vals[t][l] = b.Emit(ir.OpReplicate, ir.Attrs{}, vals[t][l])[0]
			restore()
		}
		return vals[t][l]
	}
	for i := range p.Instrs {
		in := &p.Instrs[i]
		if in.Kind == encode.Comm {
			t := &g.Tensors[in.Tensor]
			a := commAttrs(in, t.Shape, segs, rank)
			restore := b.Scope(t.Name + ".comm")
			v := b.Emit(in.Collective, a, get(in.Tensor, in.From))[0]
			restore()
			set(in.Tensor, in.To, v)
			continue
		}
		op := &g.Ops[in.Op]
		inputs := make([]ir.TensorID, len(op.Inputs))
		for j, t := range op.Inputs {
			inputs[j] = get(t, in.Rule.In[j])
		}
		a := localAttrs(g, op, in.Rule, segs, rank)
		restore := b.Scope(op.Name)
		outs := b.Emit(op.Kind, a, inputs...)
		restore()
		if err := b.Err(); err != nil {
			return nil, fmt.Errorf("lowering %s for device %d: %w", p.Describe(g, i), rank, err)
		}
		for j, t := range op.Outputs {
			want := encode.LocalShape(in.Rule.Out[j], g.Tensors[t].Shape, segs, rank)
			if got := b.Shape(outs[j]); !got.Equal(want) {
				return nil, fmt.Errorf("lowering %s for device %d: local output %q is %v, layout %s wants %v", p.Describe(g, i), rank, g.Tensors[t].Name, got, in.Rule.Out[j], want)
			}
			set(t, in.Rule.Out[j], outs[j])
		}
	}
	lg, err := b.Finish(vals[g.Loss][encode.R])
	if err != nil {
		return nil, fmt.Errorf("lowering %s for device %d: %w", g.Name, rank, err)
	}
	loc.Graph = lg
	return loc, nil
}

// commAttrs sets a collective's group pieces and rank.
func commAttrs(in *encode.Instr, shape ir.Shape, segs []encode.Segment, rank int) ir.Attrs {
	switch in.Collective {
	case ir.OpAllGather:
		return ir.Attrs{Axis: in.From.Dim, Sizes: encode.Pieces(in.From, shape, segs), Rank: rank, Method: in.Method}
	case ir.OpReduceScatter:
		return ir.Attrs{Axis: in.To.Dim, Sizes: encode.Pieces(in.To, shape, segs), Rank: rank, Method: in.Method}
	case ir.OpAllToAll:
		return ir.Attrs{Axes: []int{in.From.Dim, in.To.Dim}, Sizes: encode.Pieces(in.From, shape, segs), Split: encode.Pieces(in.To, shape, segs), Rank: rank}
	case ir.OpDynamicSlice:
		return ir.Attrs{Axis: in.To.Dim, Sizes: encode.Pieces(in.To, shape, segs), Rank: rank}
	case ir.OpPad:
		return ir.Attrs{Axis: in.From.Dim, Start: encode.LocalOffset(in.From, shape, segs, rank)[in.From.Dim], Shape: shape.Clone()}
	}
	return ir.Attrs{}
}

// localAttrs adapts an op's attributes to local shapes: reshape targets
// shrink to the local piece, dropout learns where its piece sits (so its
// mask matches the unsharded op's), and a vocabulary-sharded embedding
// learns its first row.
func localAttrs(g *ir.Graph, op *ir.Op, r encode.Rule, segs []encode.Segment, rank int) ir.Attrs {
	a := op.Attrs
	out := g.Tensors[op.Outputs[0]].Shape
	switch op.Kind {
	case ir.OpReshape:
		a.Shape = encode.LocalShape(r.Out[0], out, segs, rank)
	case ir.OpDropout:
		a.Shape = out.Clone()
		a.Offset = encode.LocalOffset(r.Out[0], out, segs, rank)
	case ir.OpEmbedding:
		if r.In[1].Kind == encode.Gather && r.In[1].Dim == 0 {
			a.Partial = true
			a.Offset = []int{encode.LocalOffset(r.In[1], g.Tensors[op.Inputs[1]].Shape, segs, rank)[0]}
		}
	}
	return a
}
