package cost

import (
	"sort"

	"hap/ir"
)

// ClassTime is one op class's share of a graph's single-device step:
// how many ops of the class there are, their forward and backward FLOPs
// and bytes, and the time the cost model gives them.
type ClassTime struct {
	Class   string  `json:"class"`
	Ops     int     `json:"ops"`
	FLOPs   float64 `json:"flops"`
	Bytes   float64 `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// Breakdown is the forward and backward compute of g on device dev, one
// row per op class (sorted by time, longest first), and the matmul-only
// figure: every FLOP of the step at the matmul class's rate, as a
// FLOP-counting estimate prices a model. Their ratio says how far the
// model's non-matmul work (memory-bound elementwise, normalisation and
// data movement; convolutions and attention at their own efficiencies)
// sits from that estimate. Communication and the optimizer update are not
// counted: one device, no plan.
func (m *Model) Breakdown(g *ir.Graph, dev int) (rows []ClassTime, matmulOnly float64) {
	by := map[string]*ClassTime{}
	add := func(w ir.Work) {
		r := by[w.Class]
		if r == nil {
			r = &ClassTime{Class: w.Class}
			by[w.Class] = r
		}
		r.FLOPs += max(w.FLOPs, 0)
		r.Bytes += max(w.Bytes, 0)
		r.Seconds += m.ComputeTime(dev, w)
	}
	total := 0.0
	n := len(g.Ops)
	if g.Train != nil { // a training graph: its forward ops state both
		n = g.Train.ForwardOps
	}
	for id := range n {
		fwd, bwd := g.Work(ir.OpID(id))
		add(fwd)
		add(bwd)
		by[fwd.Class].Ops++
		total += max(fwd.FLOPs, 0) + max(bwd.FLOPs, 0)
	}
	for _, r := range by {
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Seconds != rows[j].Seconds {
			return rows[i].Seconds > rows[j].Seconds
		}
		return rows[i].Class < rows[j].Class
	})
	return rows, total / m.FLOPRate(dev, ir.ClassMatMul)
}
