package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"hap/ir"
)

// Packed projections.
//
// nn.MultiheadAttention keeps the query, key and value weights in one
// in_proj_weight [3d, d] and computes one matmul whose output it chunks in
// three. Imported as traced, the planner sees one matmul feeding a split:
// sharding that matmul by output features (the head-parallel choice) puts
// pieces of q, k and v on devices that the split then has to re-lay out,
// and the shape the strategies look for (three projections feeding one
// attention) is not there. bench/import.md measured such imports planning
// 5–47% slower than the same model written with separate q, k and v layers.
//
// splitPacked therefore cuts a packed projection into one matmul (and bias)
// per piece, each on its own parameter. The parameters record where they
// came from (ir.Tensor.Part), so the reference check and anything that
// loads a state_dict map them back to the module's one tensor. The step
// computes the same values: row i of W·x only ever reads row i of W.

// packed is one packed projection: a split over the last dim of a matmul
// by a parameter, through an optional bias over the last dim and reshapes
// that keep the last dim, in any order.
type packed struct {
	split ir.OpID
	steps []ir.OpID // matmul first, then the reshapes and bias in order
	x, w  ir.TensorID
	b     ir.TensorID // ir.NoTensor without a bias
	wAxis int         // W's axis of output features: 0 with TransB, else 1
}

// findPacked lists the packed projections of g: a split over the last dim
// whose input is, through single-use tensors only, a matmul by a
// parameter used nowhere else (and at most one bias by such a parameter).
func findPacked(g *ir.Graph) []packed {
	uses := consumers(g)
	loneParam := func(t ir.TensorID) bool {
		tt := &g.Tensors[t]
		return tt.Kind == ir.Param && len(uses[t]) == 1 && tt.Part.IsZero()
	}
	var out []packed
	for i := range g.Ops {
		s := &g.Ops[i]
		if s.Kind != ir.OpSplit || s.Attrs.Axis != len(g.Tensors[s.Inputs[0]].Shape)-1 {
			continue
		}
		p := packed{split: s.ID, b: ir.NoTensor}
		t := s.Inputs[0]
		for {
			tt := &g.Tensors[t]
			if len(uses[t]) != 1 || tt.Producer == ir.NoOp {
				break
			}
			op := &g.Ops[tt.Producer]
			last := len(tt.Shape) - 1
			switch {
			case op.Kind == ir.OpBias && p.b == ir.NoTensor && slices.Equal(op.Attrs.Axes, []int{last}) && loneParam(op.Inputs[1]):
				p.b = op.Inputs[1]
			case op.Kind == ir.OpReshape && len(g.Tensors[op.Inputs[0]].Shape) > 0 && last >= 0 &&
				g.Tensors[op.Inputs[0]].Shape[len(g.Tensors[op.Inputs[0]].Shape)-1] == tt.Shape[last]:
			case op.Kind == ir.OpMatMul && !op.Attrs.TransA && loneParam(op.Inputs[1]) && len(g.Tensors[op.Inputs[1]].Shape) == 2:
				p.x, p.w, p.wAxis = op.Inputs[0], op.Inputs[1], 1
				if op.Attrs.TransB {
					p.wAxis = 0
				}
			default:
				t = ir.NoTensor
			}
			if t == ir.NoTensor {
				break
			}
			p.steps = append([]ir.OpID{op.ID}, p.steps...)
			if op.Kind == ir.OpMatMul {
				out = append(out, p)
				break
			}
			t = op.Inputs[0]
		}
	}
	return out
}

// splitPacked returns g with every packed projection cut apart, and a note
// per projection's module; g itself is not changed.
func (c *conv) splitPacked(g *ir.Graph) (*ir.Graph, error) {
	found := findPacked(g)
	if len(found) == 0 {
		return g, nil
	}
	for _, p := range found {
		module, _ := cutLast(g.Tensors[p.w].Name)
		c.node = &Node{Module: module}
		c.note("packed projection split into %d parameters, one per piece", len(g.Ops[p.split].Outputs))
		c.node = nil
	}
	ng, err := rebuildSplit(g, found)
	if err != nil {
		return nil, fmt.Errorf("splitting the packed projections of %s: %w", g.Name, err)
	}
	return ng, nil
}

// cutLast splits a dotted name before its last part.
func cutLast(name string) (head, last string) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

// splitter builds the graph splitPacked returns.
type splitter struct {
	g, ng  *ir.Graph
	idmap  []ir.TensorID // old tensor → new; NoTensor for the dropped
	names  map[string]bool
	pieces map[ir.TensorID][]ir.TensorID // a packed W or b → its pieces in ng
}

func rebuildSplit(g *ir.Graph, found []packed) (*ir.Graph, error) {
	sp := &splitter{g: g, ng: &ir.Graph{Name: g.Name, Loss: ir.NoTensor}, idmap: make([]ir.TensorID, len(g.Tensors)),
		names: map[string]bool{}, pieces: map[ir.TensorID][]ir.TensorID{}}
	for i := range g.Tensors {
		sp.names[g.Tensors[i].Name] = true
	}
	for i := range g.Ops {
		sp.names["op:"+g.Ops[i].Name] = true
	}
	at := map[ir.OpID]*packed{}
	dropped := map[ir.TensorID]bool{}
	skip := map[ir.OpID]bool{}
	for i := range found {
		p := &found[i]
		at[p.split] = p
		dropped[p.w] = true
		for _, op := range p.steps {
			skip[op] = true
			dropped[g.Ops[op].Outputs[0]] = true
		}
		if p.b != ir.NoTensor {
			dropped[p.b] = true
		}
	}
	// Tensors keep their order; a packed parameter's pieces take its place.
	for i := range g.Tensors {
		id := ir.TensorID(i)
		sp.idmap[i] = ir.NoTensor
		if !dropped[id] {
			sp.idmap[i] = sp.add(g.Tensors[i], false)
		}
	}
	for i := range found {
		sp.paramPieces(&found[i])
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		switch {
		case at[op.ID] != nil:
			sp.chains(at[op.ID])
		case !skip[op.ID]:
			sp.emit(*op, sp.mapIDs(op.Inputs), sp.mapIDs(op.Outputs))
		}
	}
	if g.Loss != ir.NoTensor {
		sp.ng.Loss = sp.idmap[g.Loss]
	}
	if err := sp.ng.Check(); err != nil {
		return nil, err
	}
	return sp.ng, nil
}

// add appends t to the new graph (a fresh name when asked) and returns its ID.
func (sp *splitter) add(t ir.Tensor, rename bool) ir.TensorID {
	if rename {
		t.Name = sp.unique("", t.Name)
	}
	t.ID = ir.TensorID(len(sp.ng.Tensors))
	t.Shape = t.Shape.Clone()
	t.Producer = ir.NoOp
	sp.ng.Tensors = append(sp.ng.Tensors, t)
	return t.ID
}

// unique makes name unused among tensors (or, with prefix "op:", ops).
func (sp *splitter) unique(prefix, name string) string {
	n := name
	for k := 2; sp.names[prefix+n]; k++ {
		n = name + "_" + strconv.Itoa(k)
	}
	sp.names[prefix+n] = true
	return n
}

func (sp *splitter) mapIDs(ids []ir.TensorID) []ir.TensorID {
	out := make([]ir.TensorID, len(ids))
	for i, id := range ids {
		out[i] = sp.idmap[id]
	}
	return out
}

func (sp *splitter) emit(op ir.Op, in, out []ir.TensorID) {
	op.ID = ir.OpID(len(sp.ng.Ops))
	op.Inputs, op.Outputs = in, out
	op.Attrs = op.Attrs.Clone()
	for _, o := range out {
		sp.ng.Tensors[o].Producer = op.ID
	}
	sp.ng.Ops = append(sp.ng.Ops, op)
}

// paramPieces declares W's (and b's) pieces, named by their index range and
// recording it in Part.
func (sp *splitter) paramPieces(p *packed) {
	sizes := sp.g.Ops[p.split].Attrs.Sizes
	cut := func(t ir.TensorID, axis int) {
		whole := sp.g.Tensors[t]
		start := 0
		for _, size := range sizes {
			piece := whole
			piece.Shape = whole.Shape.Clone()
			piece.Shape[axis] = size
			piece.Name = fmt.Sprintf("%s[%d:%d]", whole.Name, start, start+size)
			piece.Part = ir.Part{Of: whole.Name, Axis: axis, Start: start, End: start + size}
			sp.pieces[t] = append(sp.pieces[t], sp.add(piece, true))
			start += size
		}
	}
	cut(p.w, p.wAxis)
	if p.b != ir.NoTensor {
		cut(p.b, 0)
	}
}

// chains emits, per piece, the matmul, reshape and bias the packed
// projection had, the last one writing the split's output.
func (sp *splitter) chains(p *packed) {
	g := sp.g
	split := &g.Ops[p.split]
	for i, size := range split.Attrs.Sizes {
		cur := sp.idmap[p.x]
		for j, old := range p.steps {
			op := g.Ops[old]
			in := []ir.TensorID{cur}
			switch op.Kind {
			case ir.OpMatMul:
				in = append(in, sp.pieces[p.w][i])
			case ir.OpBias:
				in = append(in, sp.pieces[p.b][i])
			}
			var out ir.TensorID
			if j == len(p.steps)-1 {
				out = sp.idmap[split.Outputs[i]]
			} else {
				t := g.Tensors[op.Outputs[0]]
				t.Shape = t.Shape.Clone()
				t.Shape[len(t.Shape)-1] = size
				t.Name = t.Name + "." + strconv.Itoa(i)
				out = sp.add(t, true)
			}
			op.Name = sp.unique("op:", op.Name+"."+strconv.Itoa(i))
			if op.Kind == ir.OpReshape {
				op.Attrs.Shape = append([]int{}, op.Attrs.Shape...)
				op.Attrs.Shape[len(op.Attrs.Shape)-1] = size
			}
			sp.emit(op, in, []ir.TensorID{out})
			cur = out
		}
	}
}
