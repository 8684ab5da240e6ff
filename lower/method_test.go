package lower

import (
	"testing"

	"hap/cost"
	"hap/ir"
)

// A collective keeps the method the plan gave it: a grouped all-gather is
// lowered grouped even when its pieces happen to be equal (the planner
// priced it grouped; the even ring is what padded costs at equal pieces),
// and a padded one with equal pieces runs the even ring.
func TestLoweringKeepsTheMethod(t *testing.T) {
	for _, c := range []struct {
		method string
		sizes  []int
		want   cost.Method
	}{
		{"grouped", []int{2, 2}, cost.MethodGrouped},
		{"grouped", []int{3, 1}, cost.MethodGrouped},
		{"padded", []int{2, 2}, cost.MethodEven},
		{"padded", []int{3, 1}, cost.MethodPadded},
	} {
		steps := make([]*ir.Graph, 2)
		for d := range steps {
			b := ir.NewBuilder("gather", ir.Float32)
			x := b.Input("x", ir.Float32, c.sizes[d], 3)
			y := b.Emit(ir.OpAllGather, ir.Attrs{Axis: 0, Sizes: c.sizes, Method: c.method, Rank: d}, x)[0]
			g, err := b.Finish(b.ReduceSum(y, 0, 1))
			if err != nil {
				t.Fatal(err)
			}
			steps[d] = g
		}
		p, err := Schedule(steps)
		if err != nil {
			t.Fatal(err)
		}
		for d, dp := range p.Devices {
			for _, in := range dp.Instrs {
				if in.Comm != nil && in.Comm.Method != c.want {
					t.Errorf("%s %v, device %d: method %q, want %q", c.method, c.sizes, d, in.Comm.Method, c.want)
				}
			}
		}
	}
}
