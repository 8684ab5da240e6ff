package cost

import (
	"math"
	"testing"

	"hap/ir"
)

// sumTolerance bounds the relative difference of two sums of the same
// float64 terms added in different orders.
const sumTolerance = 1e-12

// Breakdown's rows add up to the graph's forward and backward compute, op
// by op, and its matmul-only figure is every FLOP at the matmul rate.
func TestBreakdownAddsUp(t *testing.T) {
	b := ir.NewBuilder("breakdown", ir.Float32)
	x := b.Leaf(ir.Input, "x", ir.Float32, ir.Shape{64, 128}, "")
	w := b.Leaf(ir.Param, "w", ir.Float32, ir.Shape{128, 256}, "")
	h := b.Emit(ir.OpReLU, ir.Attrs{}, b.MatMul(x, w))[0]
	y := b.Leaf(ir.Label, "y", ir.Int64, ir.Shape{64}, "")
	g, err := b.Finish(b.Emit(ir.OpCrossEntropy, ir.Attrs{}, h, y)[0])
	if err != nil {
		t.Fatal(err)
	}
	m := paperModel(t, Options{})
	rows, matmulOnly := m.Breakdown(g, 0)
	want, flops, ops := 0.0, 0.0, 0
	for id := range g.Ops {
		fwd, bwd := g.Work(ir.OpID(id))
		want += m.ComputeTime(0, fwd) + m.ComputeTime(0, bwd)
		flops += fwd.FLOPs + bwd.FLOPs
	}
	got := 0.0
	for i, r := range rows {
		got += r.Seconds
		ops += r.Ops
		if i > 0 && r.Seconds > rows[i-1].Seconds {
			t.Errorf("rows not sorted by time: %v", rows)
		}
	}
	if math.Abs(got-want) > sumTolerance*want || ops != len(g.Ops) || len(rows) != 3 {
		t.Errorf("rows %+v: %v s over %d ops; want %v s over %d ops in 3 classes", rows, got, ops, want, len(g.Ops))
	}
	if w := flops / m.FLOPRate(0, ir.ClassMatMul); math.Abs(matmulOnly-w) > sumTolerance*w {
		t.Errorf("matmul-only %v; want %v", matmulOnly, w)
	}
}
