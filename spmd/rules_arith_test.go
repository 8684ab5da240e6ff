package spmd_test

import (
	"slices"
	"testing"

	"hap/ir"
	"hap/spmd"
)

// The rules of the broadcasting and reducing ops name the layouts their
// shapes call for: a broadcast operand stays whole where it lacks a dim or
// stretches size 1 over it, a kept dim's output position shifts when the
// reduced dims before it are dropped, and only mean splits a reduced dim;
// gather splits every dim but the gathered one; swiglu splits gate, up and
// the output alike on any dim and passes partial sums of up.
// (executor's TestEveryRuleMatchesSingleDevice runs them all.)
func TestArithRuleLayouts(t *testing.T) {
	segs := []spmd.Segment{{Name: "d7", Units: 7, Lengths: []int{3, 4}}, {Name: "d5", Units: 5, Lengths: []int{2, 3}}, {Name: "d3", Units: 3, Lengths: []int{1, 2}}}
	rules := func(build func(b *ir.Builder) ir.TensorID) []string {
		t.Helper()
		b := ir.NewBuilder("t", ir.Float64)
		y := build(b)
		g, err := b.Finish(b.ReduceSum(y, allAxes(b.Shape(y))...))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range spmd.Rules(g, &g.Ops[0], segs) {
			s := r.Name + ":"
			for _, l := range r.In {
				s += " " + l.String()
			}
			s += " ->"
			for _, l := range r.Out {
				s += " " + l.String()
			}
			out = append(out, s)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		build func(b *ir.Builder) ir.TensorID
		want  []string
	}{
		{"add/row", func(b *ir.Builder) ir.TensorID { return b.Add(b.Param("a", 7, 5), b.Param("b", 5)) }, []string{
			"replicated: Identity Identity -> Identity",
			"split-broadcast: Gather(0,s0) Identity -> Gather(0,s0)",
			"split: Gather(1,s1) Gather(0,s1) -> Gather(1,s1)",
			"partial: Reduce Reduce -> Reduce",
		}},
		{"sub/size-1", func(b *ir.Builder) ir.TensorID { return b.Sub(b.Param("a", 3, 7, 1), b.Param("b", 7, 5)) }, []string{
			"replicated: Identity Identity -> Identity",
			"split-broadcast: Gather(0,s2) Identity -> Gather(0,s2)",
			"split: Gather(1,s0) Gather(0,s0) -> Gather(1,s0)",
			"split-broadcast: Identity Gather(1,s1) -> Gather(2,s1)",
			"partial: Reduce Reduce -> Reduce",
		}},
		{"mean/drop", func(b *ir.Builder) ir.TensorID { return b.Mean(b.Param("x", 7, 3, 5), false, 1) }, []string{
			"replicated: Identity -> Identity",
			"split: Gather(0,s0) -> Gather(0,s0)",
			"split-reduced: Gather(1,s2) -> Reduce",
			"split: Gather(2,s1) -> Gather(1,s1)",
			"partial: Reduce -> Reduce",
		}},
		{"var/keep", func(b *ir.Builder) ir.TensorID { return b.Var(b.Param("x", 7, 3, 5), 1, true, 1) }, []string{
			"replicated: Identity -> Identity",
			"split: Gather(0,s0) -> Gather(0,s0)",
			"split: Gather(2,s1) -> Gather(2,s1)",
		}},
		{"amax/two", func(b *ir.Builder) ir.TensorID { return b.Amax(b.Param("x", 7, 3, 5), false, 0, 1) }, []string{
			"replicated: Identity -> Identity",
			"split: Gather(2,s1) -> Gather(0,s1)",
		}},
		{"gather/middle", func(b *ir.Builder) ir.TensorID {
			return b.Gather(b.Param("x", 7, 3, 5), 1, b.Input("i", ir.Int64, 7, 2, 5))
		}, []string{
			"replicated: Identity Identity -> Identity",
			"split: Gather(0,s0) Gather(0,s0) -> Gather(0,s0)",
			"split: Gather(2,s1) Gather(2,s1) -> Gather(2,s1)",
			"partial: Reduce Identity -> Reduce",
		}},
		{"swiglu", func(b *ir.Builder) ir.TensorID { return b.SwiGLU(b.Param("g", 7, 3, 5), b.Param("u", 7, 3, 5)) }, []string{
			"replicated: Identity Identity -> Identity",
			"split: Gather(0,s0) Gather(0,s0) -> Gather(0,s0)",
			"split: Gather(1,s2) Gather(1,s2) -> Gather(1,s2)",
			"split: Gather(2,s1) Gather(2,s1) -> Gather(2,s1)",
			"partial-up: Identity Reduce -> Reduce",
		}},
		{"rms_norm", func(b *ir.Builder) ir.TensorID { return b.RMSNorm(b.Param("x", 7, 5), b.Param("w", 5), 1e-6) }, []string{
			"replicated: Identity Identity -> Identity",
			"split: Gather(0,s0) Identity -> Gather(0,s0)",
		}},
	} {
		if got := rules(c.build); !slices.Equal(got, c.want) {
			t.Errorf("%s: rules\n%q\nwant\n%q", c.name, got, c.want)
		}
	}
}

func allAxes(s ir.Shape) []int {
	axes := make([]int, len(s))
	for i := range axes {
		axes[i] = i
	}
	return axes
}
