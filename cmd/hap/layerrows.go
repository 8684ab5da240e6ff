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
// and the rest of its cells, already formatted.
type tableRow struct {
	name  string
	cells []string
}

// mergeLayerRows merges the rows of identical repeated layers into one.
// Two rows merge when their names differ only in their layer number
// (ir.SplitLayer: "layer3.attn.q.w") and every other cell reads the same:
// the twelve all-gathers of a BERT layer's query weight, all padded at the
// same cost, are one row "layer0–11.attn.q.w ×12". A row whose cells differ
// in one layer (the last layer's output, read by the head) stays its own.
// Merged rows print where their first member stood, so the table keeps
// program order. Nothing is dropped: each merged row names the layers it
// stands for and how many rows.
func mergeLayerRows(rows []tableRow) []tableRow {
	type group struct {
		at           int // index of the merged row in out
		prefix, tail string
		layers       []int
		count        int
	}
	var out []tableRow
	groups := map[string]*group{}
	var order []*group
	for _, r := range rows {
		prefix, n, tail, ok := ir.SplitLayer(r.name)
		if !ok {
			out = append(out, r)
			continue
		}
		key := prefix + "\x00" + tail + "\x00" + strings.Join(r.cells, "\x00")
		g := groups[key]
		if g == nil {
			g = &group{at: len(out), prefix: prefix, tail: tail}
			groups[key] = g
			order = append(order, g)
			out = append(out, r)
		}
		g.count++
		g.layers = append(g.layers, n)
	}
	for _, g := range order {
		if g.count > 1 {
			out[g.at].name = g.prefix + numberSet(g.layers) + g.tail + " ×" + strconv.Itoa(g.count)
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

// mergeLayerSources sums the sources of identical layers — ops of one kind,
// or tensors, whose names differ only in their layer number — so that the
// costliest list ranks "the twelve FFN weights" against the decoder, not
// layer 0's FFN weight against layer 1's. Unlike mergeLayerRows it merges
// whatever the times: the row is their sum. The result is sorted by time,
// costliest first, ties in srcs' order.
func mergeLayerSources(srcs []plan.Source) []layerSource {
	type group struct {
		layerSource
		name         string // the first member's: the row's name when it stands alone
		prefix, tail string
		layers       []int
		count        int
		op           bool
		kind         ir.OpKind
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, s := range srcs {
		prefix, n, tail, ok := ir.SplitLayer(s.Name)
		key := fmt.Sprint(s.Op, "\x00", s.OpKind, "\x00", prefix, "\x00", tail)
		if !ok {
			key = "\x01" + strconv.Itoa(len(groups)) // a group of its own
		}
		g := byKey[key]
		if g == nil {
			g = &group{name: s.Name, prefix: prefix, tail: tail, op: s.Op, kind: s.OpKind}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.compute += s.Compute
		g.comm += s.Comm
		g.instrs += s.Instrs
		g.count++
		g.layers = append(g.layers, n)
	}
	out := make([]layerSource, len(groups))
	for i, g := range groups {
		name := g.name
		if g.count > 1 {
			name = g.prefix + numberSet(g.layers) + g.tail + " ×" + strconv.Itoa(g.count)
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
