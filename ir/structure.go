package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Repeated layers by structure. A model's layers are found from the ops
// themselves — kinds, attributes, shapes and how they connect — never
// from names, so that "layers.3.", "h.3.", "encoder.layer.3." and unnamed
// exports tie alike. The encoder keys its op and tensor classes by what
// FindLayers assigns (a 24-layer model then plans about as fast as a
// 1-layer one), and reports fold identical layers' rows by it.
//
// How layers are found, in linear time:
//
//  1. Cuts. Walking the ops in topological order, a cut is a point where
//     at most one computed tensor made before it is read after it: the
//     residual stream between sublayers. Tensors computed from fed data
//     alone, no parameter involved (masks, position tables), are left out
//     of the count: every layer reads them, and they would hide every cut.
//  2. Segments. The ops between two cuts are a segment; each gets a type,
//     the hash of its ops' kinds, attributes (dropout seeds aside), shapes
//     and dtypes, and of where each input comes from: a position inside the
//     segment, the stream coming in, a leaf of some kind, a shared tensor.
//  3. Stacks. A type of segment holding more than one op (an attention
//     sublayer, a residual block) that recurs anchors a stack: where its
//     occurrences recur at a constant gap of p segments, each occurrence
//     and the p−1 segments after it are one layer (the earliest type
//     first: a layer starts with its first sublayer). A plain chain of single
//     ops (a VGG conv, bias, ReLU; an MLP's linear layers) has no such
//     segment and is left untied: every op there is a segment of its own.
//  4. Keys. Layers of one stack that are identical (the same segment types)
//     tie op by op, by position. Where a stack mixes layer types (BERT-MoE:
//     dense and mixture-of-experts feed-forwards in alternate layers), the
//     ops of their longest common prefix tie by position from the layer's
//     start and those of their longest common suffix by position from its
//     end; the rest tie within their layer type.

// LayerPos is where an op or tensor sits in the graph's repeated layers.
type LayerPos struct {
	// Stack numbers the stack of repeated layers, −1 outside every stack.
	Stack int
	// Layer is the layer's index within its stack.
	Layer int
	// Key is identical for the corresponding op (or tensor) of every layer
	// of its stack, and unique to it otherwise; "" outside every stack.
	Key string
}

// Layers is the structure FindLayers finds: the repeated layers of a
// graph's (forward) ops and the tensors they make and read first.
type Layers struct {
	// Stacks is the number of stacks of repeated layers found.
	Stacks int
	// LayersIn is, per stack, its number of layers.
	LayersIn []int
	// Ops and Tensors are indexed by OpID and TensorID.
	Ops     []LayerPos
	Tensors []LayerPos
}

// Tied reports whether op a and op b are corresponding ops of two layers.
func (l *Layers) Tied(a, b OpID) bool {
	return l.Ops[a].Key != "" && l.Ops[a].Key == l.Ops[b].Key
}

// FindLayers finds g's repeated layers by structure (see above). For a
// training step only the forward ops are searched; backward follows them.
func FindLayers(g *Graph) *Layers {
	n := len(g.Ops)
	if g.Train != nil {
		n = g.Train.ForwardOps
	}
	out := &Layers{Ops: make([]LayerPos, len(g.Ops)), Tensors: make([]LayerPos, len(g.Tensors))}
	for i := range out.Ops {
		out.Ops[i].Stack = -1
	}
	for i := range out.Tensors {
		out.Tensors[i].Stack = -1
	}
	if n < 2 {
		return out
	}
	shared := sharedTensors(g, n)
	segStart := cuts(g, n, shared)
	segOf := make([]int32, n)
	for s := 0; s+1 < len(segStart); s++ {
		for i := segStart[s]; i < segStart[s+1]; i++ {
			segOf[i] = int32(s)
		}
	}
	sigs := make([]string, n)
	var buf []byte
	for i := range n {
		buf = opSignature(g, &g.Ops[i], buf)
		sigs[i] = string(buf)
	}
	types, multi := segmentTypes(g, segStart, segOf, sigs, shared)
	for _, st := range findStacks(types, multi) {
		stack := out.Stacks
		out.Stacks++
		out.LayersIn = append(out.LayersIn, len(st.starts))
		layers := make([][2]int, len(st.starts)) // op ranges
		for l, s := range st.starts {
			layers[l] = [2]int{segStart[s], segStart[s+st.period]}
		}
		keys := alignLayers(g, layers, types, segOf, sigs, shared, st.period)
		for l, r := range layers {
			for i := r[0]; i < r[1]; i++ {
				out.Ops[i] = LayerPos{Stack: stack, Layer: l, Key: "S" + strconv.Itoa(stack) + "." + keys[l][i-r[0]]}
			}
		}
	}
	// Tensors: what a layer's op makes is that op's; a leaf belongs to the
	// first op that reads it, if that op is in a layer.
	for i := range n {
		op := &g.Ops[i]
		p := out.Ops[i]
		if p.Stack < 0 {
			continue
		}
		for j, t := range op.Outputs {
			out.Tensors[t] = LayerPos{Stack: p.Stack, Layer: p.Layer, Key: p.Key + "/o" + strconv.Itoa(j)}
		}
	}
	seen := make([]bool, len(g.Tensors))
	for i := range n {
		for slot, t := range g.Ops[i].Inputs {
			if seen[t] || !g.Tensors[t].Kind.IsLeaf() {
				continue
			}
			seen[t] = true
			if p := out.Ops[i]; p.Stack >= 0 {
				out.Tensors[t] = LayerPos{Stack: p.Stack, Layer: p.Layer, Key: p.Key + "/i" + strconv.Itoa(slot)}
			}
		}
	}
	return out
}

// sharedTensors marks the tensors that derive from fed data alone, no
// parameter involved: inputs, labels and state, and what ops compute from
// nothing else (an attention mask from a padding mask, position tables).
// Every layer may read them, so they do not count at a cut.
func sharedTensors(g *Graph, n int) []bool {
	shared := make([]bool, len(g.Tensors))
	for i := range g.Tensors {
		if k := g.Tensors[i].Kind; k.IsLeaf() && k != Param {
			shared[i] = true
		}
	}
	for i := range n {
		op := &g.Ops[i]
		all := true
		for _, t := range op.Inputs {
			all = all && shared[t]
		}
		for _, t := range op.Outputs {
			shared[t] = all
		}
	}
	return shared
}

// cuts returns the starts of the segments of ops [0, n), and n: the
// points where at most one computed, unshared tensor made before is read
// after (a difference array over each tensor's live range).
func cuts(g *Graph, n int, shared []bool) []int {
	last := make([]int32, len(g.Tensors))
	for i := range last {
		last[i] = -1
	}
	for i := range n {
		for _, t := range g.Ops[i].Inputs {
			last[t] = int32(i)
		}
	}
	diff := make([]int, n+1)
	for i := range n {
		for _, t := range g.Ops[i].Outputs {
			if shared[t] || int(last[t]) <= i {
				continue
			}
			diff[i+1]++
			diff[last[t]+1]--
		}
	}
	starts := []int{0}
	live := 0
	for p := 1; p < n; p++ {
		live += diff[p]
		if live <= 1 {
			starts = append(starts, p)
		}
	}
	return append(starts, n)
}

// opSignature is what two corresponding ops of identical layers share,
// their connections aside: kind, attributes (dropout seeds differ per
// layer), and the shapes, dtypes and leaf kinds of inputs and outputs.
// It is written by hand, not with fmt, since it runs for every op of
// every Encode.
func opSignature(g *Graph, op *Op, buf []byte) []byte {
	b := append(buf[:0], op.Kind...)
	b = appendAttrs(append(b, '|'), &op.Attrs)
	for _, t := range op.Inputs {
		tt := &g.Tensors[t]
		b = appendShape(append(b, '|'), tt.Shape)
		b = append(b, byte('0'+tt.DType))
		if tt.Kind.IsLeaf() {
			b = append(b, byte('a'+tt.Kind))
		}
	}
	b = append(b, '>')
	for _, t := range op.Outputs {
		tt := &g.Tensors[t]
		b = appendShape(append(b, '|'), tt.Shape)
		b = append(b, byte('0'+tt.DType))
	}
	return b
}

func appendShape(b []byte, s Shape) []byte {
	for _, d := range s {
		b = strconv.AppendInt(append(b, ','), int64(d), 10)
	}
	return b
}

// appendAttrs writes every attribute but the dropout seed.
func appendAttrs(b []byte, a *Attrs) []byte {
	ints := func(b []byte, tag byte, v ...int) []byte {
		b = append(b, tag)
		for _, x := range v {
			b = strconv.AppendInt(append(b, ','), int64(x), 10)
		}
		return b
	}
	floats := func(b []byte, tag byte, v ...float64) []byte {
		b = append(b, tag)
		for _, x := range v {
			b = strconv.AppendFloat(append(b, ','), x, 'g', -1, 64)
		}
		return b
	}
	flag := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	b = ints(b, 'a', a.Axis, a.Start, a.End, flag(a.TransA), flag(a.TransB), a.Kernel, a.Stride, a.Pad, flag(a.Causal), a.Capacity, flag(a.Partial), a.Rank)
	if a.Momentum != 0 {
		b = floats(b, 'M', a.Momentum)
	}
	if a.Groups != 0 {
		// Only when set, so the signatures of ungrouped ops stay as they were.
		b = ints(b, 'G', a.Groups)
	}
	b = ints(b, 'x', a.Axes...)
	b = ints(b, 'p', a.Perm...)
	b = ints(b, 's', a.Shape...)
	b = ints(b, 'z', a.Sizes...)
	b = ints(b, 'o', a.Offset...)
	b = ints(b, 'g', a.Group...)
	b = ints(b, 'l', a.Split...)
	b = floats(b, 'f', a.Rate, a.Eps, a.Scale, a.LR)
	b = floats(b, 'b', a.Betas...)
	b = append(append(b, 'e'), a.Equation...)
	if a.KVGroup != 0 {
		// Only when set, so that every graph without grouped-query
		// attention keeps the signatures it had.
		b = ints(b, 'q', a.KVGroup)
	}
	// Written only when set, so the signatures of graphs without them
	// (every graph before these attributes existed) stay what they were.
	if a.KeepDims || a.Value != 0 || a.Correction != 0 {
		b = ints(b, 'k', flag(a.KeepDims), a.Correction)
		b = floats(b, 'v', a.Value)
	}
	return append(append(append(b, 'm'), a.Method...), ';')
}

// segmentTypes numbers the segments by structure: two segments get one
// type when their ops, in order, have the same signatures and inputs from
// the same places — the same position (and output) inside the segment, the
// stream from before it, a shared tensor, or a leaf. multi[s] says whether
// segment s holds more than one op.
func segmentTypes(g *Graph, segStart []int, segOf []int32, sigs []string, shared []bool) (types []int, multi []bool) {
	byKey := map[string]int{}
	var b strings.Builder
	for s := 0; s+1 < len(segStart); s++ {
		b.Reset()
		lo, hi := segStart[s], segStart[s+1]
		for i := lo; i < hi; i++ {
			b.WriteString(sigs[i])
			for _, t := range g.Ops[i].Inputs {
				b.WriteString(origin(g, t, func(p int) (string, bool) {
					if p >= lo && p < i {
						return strconv.Itoa(p - lo), true
					}
					return "", false
				}, shared))
			}
			b.WriteByte(';')
		}
		k := b.String()
		id, ok := byKey[k]
		if !ok {
			id = len(byKey)
			byKey[k] = id
		}
		types = append(types, id)
		multi = append(multi, hi-lo > 1)
	}
	return types, multi
}

// origin writes where input t comes from: inside(p) names an op at
// position p of the block being described (ok false: outside it); else a
// shared tensor, a leaf of its kind, or a tensor from outside the block.
func origin(g *Graph, t TensorID, inside func(p int) (string, bool), shared []bool) string {
	tt := &g.Tensors[t]
	if p := tt.Producer; p != NoOp {
		if at, ok := inside(int(p)); ok {
			return "<" + at + "." + strconv.Itoa(slices.Index(g.Ops[p].Outputs, t))
		}
	}
	switch {
	case tt.Kind.IsLeaf():
		return "<leaf"
	case shared[t]:
		return "<shared"
	}
	return "<in"
}

// A stack is a run of layers: each starts at segment starts[l] and spans
// period segments.
type stack struct {
	starts []int
	period int
}

// findStacks finds the stacks of repeated layers among segments of the
// given types (see the top of the file). Anchors are the multi-op segment
// types that occur more than once, in the order they first occur: a
// layer starts with its first sublayer. An anchor's unclaimed
// occurrences at a constant gap of p segments start layers of p segments
// each; a gap of a few times p (up to maxOddLayers layers whose first
// sublayer differs, as where one layer is odd) is bridged by layers of p
// segments too, which alignLayers then ties only where they agree.
func findStacks(types []int, multi []bool) []stack {
	first := map[int]int{}
	count := map[int]int{}
	for s, ty := range types {
		if !multi[s] {
			continue
		}
		if count[ty] == 0 {
			first[ty] = s
		}
		count[ty]++
	}
	var anchors []int
	for ty, c := range count {
		if c >= 2 {
			anchors = append(anchors, ty)
		}
	}
	slices.SortFunc(anchors, func(a, b int) int { return first[a] - first[b] })
	claimed := make([]bool, len(types))
	free := func(lo, hi int) bool {
		if hi > len(types) {
			return false
		}
		for s := lo; s < hi; s++ {
			if claimed[s] {
				return false
			}
		}
		return true
	}
	var out []stack
	for _, ty := range anchors {
		var occ []int
		for s := range types {
			if types[s] == ty && !claimed[s] {
				occ = append(occ, s)
			}
		}
		for i := 0; i+1 < len(occ); {
			p := occ[i+1] - occ[i]
			if !free(occ[i], occ[i]+p) {
				i++
				continue
			}
			st := stack{period: p, starts: []int{occ[i]}}
			at := occ[i]
			for j := i + 1; j < len(occ); j++ {
				gap := occ[j] - at
				if gap%p != 0 || gap > (maxOddLayers+1)*p || !free(at+p, occ[j]+p) {
					break
				}
				for s := at + p; s <= occ[j]; s += p {
					st.starts = append(st.starts, s)
				}
				at = occ[j]
				i = j
			}
			i++
			if len(st.starts) < 2 {
				continue
			}
			for s := st.starts[0]; s < at+p; s++ {
				claimed[s] = true
			}
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b stack) int { return a.starts[0] - b.starts[0] })
	return out
}

// maxOddLayers is how many layers in a row may differ from the stack's
// in their first sublayer and still be bridged into it.
const maxOddLayers = 3

// alignLayers gives every op of every layer (op ranges) its key within
// the stack: its position where all layers are identical; where they are
// not, "p<k>" in the layers' common prefix, "e<k>" k ops from the end in
// their common suffix, and "t<type>.<k>" between.
func alignLayers(g *Graph, layers [][2]int, types []int, segOf []int32, sigs []string, shared []bool, period int) [][]string {
	// A layer's type is the types of its segments.
	typeOf := make([]int, len(layers))
	byKey := map[string]int{}
	var reps []int // a layer of each type
	for l, r := range layers {
		s0 := int(segOf[r[0]])
		k := fmt.Sprint(types[s0 : s0+period])
		id, ok := byKey[k]
		if !ok {
			id = len(reps)
			byKey[k] = id
			reps = append(reps, l)
		}
		typeOf[l] = id
	}
	keys := make([][]string, len(layers))
	if len(reps) == 1 {
		for l, r := range layers {
			keys[l] = make([]string, r[1]-r[0])
			for k := range keys[l] {
				keys[l][k] = strconv.Itoa(k)
			}
		}
		return keys
	}
	// desc describes op k of layer l for alignment; prefix is the common
	// prefix found so far: inputs from inside the layer are named by
	// position from the start within it and from the end beyond it.
	desc := func(l, k, prefix int) string {
		lo, hi := layers[l][0], layers[l][1]
		var b strings.Builder
		b.WriteString(sigs[lo+k])
		for _, t := range g.Ops[lo+k].Inputs {
			b.WriteString(origin(g, t, func(p int) (string, bool) {
				switch {
				case p >= lo && p-lo < prefix:
					return "p" + strconv.Itoa(p-lo), true
				case p >= lo && p < hi:
					return "e" + strconv.Itoa(hi-1-p), true
				}
				return "", false
			}, shared))
		}
		return b.String()
	}
	size := func(l int) int { return layers[l][1] - layers[l][0] }
	prefix := size(reps[0])
	for _, r := range reps[1:] {
		prefix = min(prefix, size(r))
		for k := 0; k < prefix; k++ {
			if desc(reps[0], k, k) != desc(r, k, k) {
				prefix = k
				break
			}
		}
	}
	suffix := size(reps[0]) - prefix
	for _, r := range reps[1:] {
		suffix = min(suffix, size(r)-prefix)
		for j := 0; j < suffix; j++ {
			if desc(reps[0], size(reps[0])-1-j, prefix) != desc(r, size(r)-1-j, prefix) {
				suffix = j
				break
			}
		}
	}
	for l := range layers {
		sz := size(l)
		keys[l] = make([]string, sz)
		for k := range sz {
			switch {
			case k < prefix:
				keys[l][k] = "p" + strconv.Itoa(k)
			case sz-1-k < suffix:
				keys[l][k] = "e" + strconv.Itoa(sz-1-k)
			default:
				keys[l][k] = "t" + strconv.Itoa(typeOf[l]) + "." + strconv.Itoa(k)
			}
		}
	}
	return keys
}
