package importer

import (
	"slices"

	"hap/ir"
)

// Merged dimensions.
//
// nn.MultiheadAttention works sequence-first and flattens freely: a linear
// layer sees [S·B, E] rows, heads are folded into the batch as [S, B·H, d].
// A merged dimension can be split across devices only by its outer factor,
// so a batch split of [S·B, E] (B inner) or a head split of [B·H, S, d] on
// a sequence-first tensor is not expressible: the planner loses both data
// and head parallelism inside attention, and bench/import.md measured such
// models planning 10–47% slower than the same model written batch-first.
// The two rewrites below keep the dimensions apart instead. Both change
// only the shapes of reshapes, permutes and what lies between them; every
// op keeps its inputs, and the values are the same up to those reshapes
// (row-major order does not change), so the step is the one traced.

// keepLinearDims drops flatten/unflatten pairs around linear layers: a
// reshape to [N, E] whose every consumer is a matmul by a matrix, each
// (after an optional bias over the last dim) reshaped back to [L..., E']
// with ∏L = N, becomes a reshape to [L..., E], and the matmuls and biases
// work on [L..., ·] directly (matmul accepts leading dims). The reshapes
// back become identities.
func keepLinearDims(g *ir.Graph, uses [][]ir.OpID) {
	for i := range g.Ops {
		r := &g.Ops[i]
		if r.Kind != ir.OpReshape || len(r.Attrs.Shape) != 2 || len(uses[r.Outputs[0]]) == 0 {
			continue
		}
		var lead []int
		type link struct{ mm, bias, back *ir.Op }
		var links []link
		ok := true
		for _, c := range uses[r.Outputs[0]] {
			mm := &g.Ops[c]
			if mm.Kind != ir.OpMatMul || mm.Inputs[0] != r.Outputs[0] || mm.Attrs.TransA || len(g.Tensors[mm.Inputs[1]].Shape) != 2 {
				ok = false
				break
			}
			l := link{mm: mm}
			next, single := only(g, uses, mm.Outputs[0])
			if single && next.Kind == ir.OpBias && slices.Equal(next.Attrs.Axes, []int{1}) {
				l.bias = next
				next, single = only(g, uses, next.Outputs[0])
			}
			if !single || next.Kind != ir.OpReshape {
				ok = false
				break
			}
			t := next.Attrs.Shape
			if len(t) < 3 || ir.Shape(t[:len(t)-1]).Numel() != r.Attrs.Shape[0] || (lead != nil && !slices.Equal(lead, t[:len(t)-1])) {
				ok = false
				break
			}
			lead, l.back = t[:len(t)-1], next
			links = append(links, l)
		}
		if !ok || lead == nil {
			continue
		}
		lead = slices.Clone(lead)
		setShape(g, r, append(slices.Clone(lead), r.Attrs.Shape[1]))
		for _, l := range links {
			out := append(slices.Clone(lead), g.Tensors[l.mm.Outputs[0]].Shape[1])
			g.Tensors[l.mm.Outputs[0]].Shape = out
			if l.bias != nil {
				l.bias.Attrs.Axes = []int{len(lead)}
				g.Tensors[l.bias.Outputs[0]].Shape = slices.Clone(out)
			}
		}
	}
}

// keepHeads unfolds heads from the batch around attention: q, k and v each
// a [S, B·H, d] reshape of [S, B, H·d] permuted to [B·H, S, d] become
// [S, B, H, d] permuted to [B, H, S, d]; the output's permute back then
// gives [S, B, H, d], which its reshapes (any target: the order of
// elements is [S, B·H, d]'s) consume as before.
func keepHeads(g *ir.Graph, uses [][]ir.OpID) {
	for i := range g.Ops {
		att := &g.Ops[i]
		if att.Kind != ir.OpAttention || len(g.Tensors[att.Outputs[0]].Shape) != 3 {
			continue
		}
		heads := 0
		var chains [3][2]*ir.Op // reshape, permute per input
		ok := true
		for j, in := range att.Inputs[:3] {
			p, r, h := headFold(g, uses, in)
			if p == nil || (heads != 0 && h != heads) {
				ok = false
				break
			}
			heads, chains[j] = h, [2]*ir.Op{r, p}
		}
		back, single := only(g, uses, att.Outputs[0])
		if !ok || !single || back.Kind != ir.OpPermute || !slices.Equal(back.Attrs.Perm, []int{1, 0, 2}) {
			continue
		}
		for _, c := range uses[back.Outputs[0]] {
			if g.Ops[c].Kind != ir.OpReshape {
				ok = false
			}
		}
		if !ok {
			continue
		}
		for _, ch := range chains {
			r, p := ch[0], ch[1]
			in := g.Tensors[r.Inputs[0]].Shape // [S, B, H·d]
			s, b, d := in[0], in[1], in[2]/heads
			setShape(g, r, []int{s, b, heads, d})
			p.Attrs.Perm = []int{1, 2, 0, 3}
			g.Tensors[p.Outputs[0]].Shape = ir.Shape{b, heads, s, d}
		}
		o := g.Tensors[att.Outputs[0]].Shape // [B·H, S, dv]
		b := o[0] / heads
		g.Tensors[att.Outputs[0]].Shape = ir.Shape{b, heads, o[1], o[2]}
		back.Attrs.Perm = []int{2, 0, 1, 3}
		g.Tensors[back.Outputs[0]].Shape = ir.Shape{o[1], b, heads, o[2]}
	}
}

// headFold recognises t = permute([1,0,2]) of reshape([S, B, H·d] →
// [S, B·H, d]), each used once, and returns the two ops and H.
func headFold(g *ir.Graph, uses [][]ir.OpID, t ir.TensorID) (p, r *ir.Op, heads int) {
	if g.Tensors[t].Producer == ir.NoOp || len(uses[t]) != 1 {
		return nil, nil, 0
	}
	p = &g.Ops[g.Tensors[t].Producer]
	if p.Kind != ir.OpPermute || !slices.Equal(p.Attrs.Perm, []int{1, 0, 2}) {
		return nil, nil, 0
	}
	x := p.Inputs[0]
	if g.Tensors[x].Producer == ir.NoOp || len(uses[x]) != 1 {
		return nil, nil, 0
	}
	r = &g.Ops[g.Tensors[x].Producer]
	in, out := g.Tensors[r.Inputs[0]].Shape, g.Tensors[x].Shape
	if r.Kind != ir.OpReshape || len(in) != 3 || len(out) != 3 || in[0] != out[0] || in[1] == 0 || out[1]%in[1] != 0 {
		return nil, nil, 0
	}
	heads = out[1] / in[1]
	if heads < 2 || in[2] != heads*out[2] {
		return nil, nil, 0
	}
	return p, r, heads
}

// only is the single consumer of t, if it has exactly one.
func only(g *ir.Graph, uses [][]ir.OpID, t ir.TensorID) (*ir.Op, bool) {
	if len(uses[t]) != 1 {
		return nil, false
	}
	return &g.Ops[uses[t][0]], true
}

// setShape retargets a reshape.
func setShape(g *ir.Graph, r *ir.Op, shape []int) {
	r.Attrs.Shape = shape
	g.Tensors[r.Outputs[0]].Shape = ir.Shape(slices.Clone(shape))
}

// consumers lists, per tensor, the ops reading it (once per op).
func consumers(g *ir.Graph) [][]ir.OpID {
	uses := make([][]ir.OpID, len(g.Tensors))
	for i := range g.Ops {
		for j, in := range g.Ops[i].Inputs {
			if !slices.Contains(g.Ops[i].Inputs[:j], in) {
				uses[in] = append(uses[in], ir.OpID(i))
			}
		}
	}
	return uses
}

// keepDims applies both rewrites to a clone of g, drops the reshapes they
// leave as identities, and checks the result.
func keepDims(g *ir.Graph) (*ir.Graph, error) {
	ng := g.Clone()
	keepLinearDims(ng, consumers(ng))
	keepHeads(ng, consumers(ng))
	ng = dropIdentities(fuseAttention(ng))
	if err := ng.Check(); err != nil {
		return nil, err
	}
	return ng, nil
}

// dropIdentities removes reshapes to the shape they read (the loss aside),
// their readers reading the input instead.
func dropIdentities(g *ir.Graph) *ir.Graph {
	alias := map[ir.TensorID]ir.TensorID{}
	for i := range g.Ops {
		op := &g.Ops[i]
		in, out := op.Inputs, op.Outputs
		if op.Kind == ir.OpReshape && out[0] != g.Loss && g.Tensors[in[0]].Shape.Equal(g.Tensors[out[0]].Shape) {
			src := in[0]
			if a, ok := alias[src]; ok {
				src = a
			}
			alias[out[0]] = src
		}
	}
	if len(alias) == 0 {
		return g
	}
	ng := &ir.Graph{Name: g.Name, Loss: ir.NoTensor}
	idmap := make([]ir.TensorID, len(g.Tensors))
	for i, t := range g.Tensors {
		if _, gone := alias[ir.TensorID(i)]; gone {
			continue
		}
		idmap[i] = ir.TensorID(len(ng.Tensors))
		t.ID = idmap[i]
		ng.Tensors = append(ng.Tensors, t)
	}
	remap := func(t ir.TensorID) ir.TensorID {
		if a, ok := alias[t]; ok {
			t = a
		}
		return idmap[t]
	}
	for i := range g.Ops {
		op := g.Ops[i]
		if _, gone := alias[op.Outputs[0]]; gone && op.Kind == ir.OpReshape {
			continue
		}
		op.ID = ir.OpID(len(ng.Ops))
		op.Inputs = append([]ir.TensorID{}, op.Inputs...)
		op.Outputs = append([]ir.TensorID{}, op.Outputs...)
		for j := range op.Inputs {
			op.Inputs[j] = remap(op.Inputs[j])
		}
		for j := range op.Outputs {
			op.Outputs[j] = idmap[op.Outputs[j]]
			ng.Tensors[op.Outputs[j]].Producer = op.ID
		}
		ng.Ops = append(ng.Ops, op)
	}
	ng.Loss = remap(g.Loss)
	return ng
}

// compact returns g without the dead ops and tensors (g's own arrays are
// reused: callers pass a clone). Producers and every reference renumber.
func compact(g *ir.Graph, deadOps map[ir.OpID]bool, deadTensors map[ir.TensorID]bool) *ir.Graph {
	ng := &ir.Graph{Name: g.Name, Loss: ir.NoTensor}
	idmap := make([]ir.TensorID, len(g.Tensors))
	for i, t := range g.Tensors {
		idmap[i] = ir.NoTensor
		if deadTensors[ir.TensorID(i)] {
			continue
		}
		idmap[i] = ir.TensorID(len(ng.Tensors))
		t.ID = idmap[i]
		ng.Tensors = append(ng.Tensors, t)
	}
	for i := range g.Ops {
		if deadOps[ir.OpID(i)] {
			continue
		}
		op := g.Ops[i]
		op.ID = ir.OpID(len(ng.Ops))
		for j := range op.Inputs {
			op.Inputs[j] = idmap[op.Inputs[j]]
		}
		for j := range op.Outputs {
			op.Outputs[j] = idmap[op.Outputs[j]]
			ng.Tensors[op.Outputs[j]].Producer = op.ID
		}
		ng.Ops = append(ng.Ops, op)
	}
	if g.Loss != ir.NoTensor {
		ng.Loss = idmap[g.Loss]
	}
	return ng
}
