package executor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"hap/ir"
	"hap/spmd"
)

// pinned runs the ops it names with their rule of that name and completes
// the rest greedily.
type pinned struct {
	rules map[ir.OpID]string
	rest  spmd.Greedy
}

func (p pinned) Choose(g *ir.Graph, op *ir.Op, rules []spmd.Rule, avail [][]spmd.Layout) (spmd.Rule, error) {
	name, ok := p.rules[op.ID]
	if !ok {
		return p.rest.Choose(g, op, rules, avail)
	}
	for _, r := range rules {
		if r.Name == name {
			return r, nil
		}
	}
	return spmd.Rule{}, fmt.Errorf("no rule %s among %d", name, len(rules))
}

// swiglu's partial-up rule holds for partial sums that overlap: up made by
// a row-parallel matmul, so that every device holds a whole-size partial
// sum, on 2, 3, 5 and 8 devices with uneven lengths, device 0's share
// empty, and both collective methods. The generic check
// (TestEveryRuleMatchesSingleDevice) makes its partial sums by padding
// pieces, which do not overlap; there, because silu(0) = 0, passing
// partial sums of gate would have looked exact too.
func TestSwiGLUPartialSumsOverlap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	g := caseGraph(t, ruleCase{"swiglu/partial-up", func(b *ir.Builder) ir.TensorID {
		return b.SwiGLU(prm(b, "gate", 6, 5), b.MatMul(prm(b, "a", 6, 4), prm(b, "w", 4, 5)))
	}})
	mm, sw := opUnderTest(t, g, "matmul"), opUnderTest(t, g, "swiglu")
	for i, n := range []int{2, 3, 5, 8} {
		segs := unevenSegments(g, n, rng)
		var leaves []spmd.LeafLayout
		for j := range g.Tensors {
			if g.Tensors[j].Kind.IsLeaf() {
				leaves = append(leaves, spmd.LeafLayout{Tensor: g.Tensors[j].ID, Layout: spmd.I})
			}
		}
		method := spmd.MethodPadded
		if i%2 == 1 {
			method = spmd.MethodGrouped
		}
		ch := pinned{rules: map[ir.OpID]string{mm.ID: "row-parallel", sw.ID: "partial-up"}, rest: spmd.Greedy{Devices: n, FLOPsPerByte: 1}}
		p, err := spmd.Assemble(g, n, segs, leaves, ch, func(ir.TensorID, spmd.Layout, spmd.Layout) string { return method })
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		rep, err := Verify(g, p, Options{DType: ir.Float64, Steps: 1, Seed: 3, Optimizer: ir.SGD(0.1)})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if !(rep.Max() <= 1e-10) {
			t.Errorf("n=%d: relative error %.3g (loss %.3g, grads %.3g on %s)", n, rep.Max(), rep.Loss.MaxRel, rep.Grads.MaxRel, rep.Grads.Worst)
		}
	}
}
