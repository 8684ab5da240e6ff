package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"hap/ir"
	"hap/plan"
)

// A tableRow is one row of a report table: the name of what it is about
// and the rest of its cells, already formatted; layer is where that tensor
// or op sits in the graph's repeated layers (ir.FindLayers). A row made
// without it (Stack 0 and no Key: the zero value) is read by its name.
type tableRow struct {
	name  string
	cells []string
	layer ir.LayerPos
}

// layerKey is what the rows of corresponding tensors or ops of identical
// layers share: their structural key (ir.LayerPos.Key, whatever their
// names), or where no structure was given, their name around its layer
// number (ir.SplitLayer: "layer" and ".attn.q.w" of "layer3.attn.q.w"),
// the zoo's display convention. ok is false outside every layer.
func layerKey(name string, pos ir.LayerPos) (key string, ok bool) {
	if pos.Key != "" {
		return "s\x00" + pos.Key, true
	}
	if pos.Stack < 0 {
		return "", false // structure says: in no layer
	}
	prefix, _, tail, ok := ir.SplitLayer(name)
	return "n\x00" + prefix + "\x00" + tail, ok
}

// layerName names the merged row of members with the given names and
// structural layers: by the layer numbers their names carry where they do
// ("layer0–11.attn.q.w", "h.{0,2}.mlp.w"), else by the first one's name
// and the layers it stands for.
func layerName(names []string, layers []int) string {
	if prefix, nums, tail, ok := numbered(names); ok {
		return prefix + numberSet(nums) + tail
	}
	return names[0] + " (layers " + numberSet(layers) + ")"
}

// numbered reads names as one prefix and one tail around a number each:
// the zoo's layer<N>. (ir.SplitLayer), or for another convention ("h.3.",
// "layers.3.", "l3.") the decimal number where the names differ.
func numbered(names []string) (prefix string, nums []int, tail string, ok bool) {
	prefix, _, tail, ok = ir.SplitLayer(names[0])
	for _, name := range names {
		p, k, t, same := ir.SplitLayer(name)
		if !same || p != prefix || t != tail {
			ok = false
			break
		}
		nums = append(nums, k)
	}
	if ok {
		return prefix, nums, tail, true
	}
	// The longest common prefix and suffix, backed off digits so that
	// "h.1." and "h.11." differ in their whole numbers.
	lo, hi := names[0], names[0]
	for _, name := range names[1:] {
		lo = lo[:commonPrefix(lo, name)]
		hi = hi[len(hi)-commonSuffix(hi, name):]
	}
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	for lo != "" && isDigit(lo[len(lo)-1]) {
		lo = lo[:len(lo)-1]
	}
	for hi != "" && isDigit(hi[0]) {
		hi = hi[1:]
	}
	nums = nums[:0]
	for _, name := range names {
		if len(name) < len(lo)+len(hi) {
			return "", nil, "", false
		}
		mid := name[len(lo) : len(name)-len(hi)]
		k, err := strconv.Atoi(mid)
		if err != nil || mid == "" || !isDigit(mid[0]) || strconv.Itoa(k) != mid {
			return "", nil, "", false
		}
		nums = append(nums, k)
	}
	return lo, nums, hi, true
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// mergeLayerRows merges the rows of identical repeated layers into one.
// Two rows merge when they are about corresponding tensors of two layers
// (layerKey: by structure, or by name for rows made without it) and every
// other cell reads the same: the twelve all-gathers of a BERT layer's
// query weight, all padded at the same cost, are one row
// "layer0–11.attn.q.w ×12". A row whose cells differ in one layer (the
// last layer's output, read by the head) stays its own. Merged rows print
// where their first member stood, so the table keeps program order.
// Nothing is dropped: each merged row names the layers it stands for and
// how many rows.
func mergeLayerRows(rows []tableRow) []tableRow {
	type group struct {
		at     int // index of the merged row in out
		names  []string
		layers []int
		count  int
	}
	var out []tableRow
	groups := map[string]*group{}
	var order []*group
	for _, r := range rows {
		lk, ok := layerKey(r.name, r.layer)
		if !ok {
			out = append(out, r)
			continue
		}
		key := lk + "\x00" + strings.Join(r.cells, "\x00")
		g := groups[key]
		if g == nil {
			g = &group{at: len(out)}
			groups[key] = g
			order = append(order, g)
			out = append(out, r)
		}
		g.count++
		g.names = append(g.names, r.name)
		g.layers = append(g.layers, r.layer.Layer)
	}
	for _, g := range order {
		if g.count > 1 {
			out[g.at].name = layerName(g.names, g.layers) + " ×" + strconv.Itoa(g.count)
		}
	}
	return out
}

// numberSet writes the layer numbers as ranges: "0–11" alone, "{0–3,5}"
// when there is more than one range.
func numberSet(ns []int) string {
	ns = slices.Compact(slices.Sorted(slices.Values(ns)))
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(ns[i])+"–"+strconv.Itoa(ns[j]))
		} else {
			parts = append(parts, strconv.Itoa(ns[i]))
		}
		i = j + 1
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// A layerSource is a bottleneck source (plan.Source) or, merged, the
// sources of identical layers: their times summed.
type layerSource struct {
	text          string // "op layer0–11.ffn.fc1.matmul ×12 (matmul)", "tensor decoder.w"
	compute, comm float64
	instrs        int
}

func (s layerSource) seconds() float64 { return s.compute + s.comm }

// graphLayers says where the ops and tensors of g, by name, sit in its
// repeated layers (ir.FindLayers); a name g does not have (an
// instruction grouped under its own name) is read by its name alone.
func graphLayers(g *ir.Graph) func(name string, op bool) ir.LayerPos {
	ls := ir.FindLayers(g)
	ops, tensors := map[string]ir.LayerPos{}, map[string]ir.LayerPos{}
	for i := range g.Ops {
		ops[g.Ops[i].Name] = ls.Ops[i]
	}
	for i := range g.Tensors {
		tensors[g.Tensors[i].Name] = ls.Tensors[i]
	}
	return func(name string, op bool) ir.LayerPos {
		m := tensors
		if op {
			m = ops
		}
		return m[name] // the zero value, read by name, when g has none
	}
}

// mergeLayerSources sums the sources of identical layers — ops of one kind,
// or tensors, that correspond in two layers (layerKey; where, a lookup by
// name, nil to read names alone) — so that the costliest list ranks "the
// twelve FFN weights" against the decoder, not layer 0's FFN weight against
// layer 1's. Unlike mergeLayerRows it merges whatever the times: the row is
// their sum. The result is sorted by time, costliest first, ties in srcs'
// order.
func mergeLayerSources(srcs []plan.Source, where func(name string, op bool) ir.LayerPos) []layerSource {
	type group struct {
		layerSource
		names  []string
		layers []int
		count  int
		op     bool
		kind   ir.OpKind
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, s := range srcs {
		var pos ir.LayerPos
		if where != nil {
			pos = where(s.Name, s.Op)
		}
		lk, ok := layerKey(s.Name, pos)
		key := fmt.Sprint(s.Op, "\x00", s.OpKind, "\x00", lk)
		if !ok {
			key = "\x01" + strconv.Itoa(len(groups)) // a group of its own
		}
		g := byKey[key]
		if g == nil {
			g = &group{op: s.Op, kind: s.OpKind}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.compute += s.Compute
		g.comm += s.Comm
		g.instrs += s.Instrs
		g.count++
		g.names = append(g.names, s.Name)
		g.layers = append(g.layers, pos.Layer)
	}
	out := make([]layerSource, len(groups))
	for i, g := range groups {
		name := g.names[0]
		if g.count > 1 {
			name = layerName(g.names, g.layers) + " ×" + strconv.Itoa(g.count)
		}
		g.text = "tensor " + name
		if g.op {
			g.text = fmt.Sprintf("op %s (%s)", name, g.kind)
		}
		out[i] = g.layerSource
	}
	slices.SortStableFunc(out, func(a, b layerSource) int { return cmp.Compare(b.seconds(), a.seconds()) })
	return out
}
