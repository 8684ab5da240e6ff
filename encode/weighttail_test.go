package encode

import (
	"testing"

	"hap/ir"
)

// weightTail counts the backward ops of a forward op that come after its
// input gradient and make only parameter gradients: a matmul's dW after
// its dX, a first layer's dW (its input needs no gradient), nothing for an
// op without parameters.
func TestWeightTail(t *testing.T) {
	b := ir.NewBuilder("mlp", ir.Float32)
	x := b.Input("x", ir.Float32, 8, 4)
	labels := b.Input("labels", ir.Int64, 8)
	h := b.ReLU(b.MatMul(x, b.Param("w1", 4, 6)))
	g, err := b.Finish(b.CrossEntropy(b.MatMul(h, b.Param("w2", 6, 3)), labels))
	if err != nil {
		t.Fatal(err)
	}
	step, err := ir.BuildTrainStep(g, ir.Adam(1e-3))
	if err != nil {
		t.Fatal(err)
	}
	tail := weightTail(step, len(g.Ops))
	want := map[ir.OpKind][]int{ir.OpMatMul: {1, 1}, ir.OpReLU: {0}, ir.OpCrossEntropy: {0}}
	seen := map[ir.OpKind]int{}
	for i := range g.Ops {
		k := g.Ops[i].Kind
		w, ok := want[k]
		if !ok {
			continue
		}
		if got := tail[i]; got != w[seen[k]] {
			t.Errorf("op %d %s: weight tail %d backward ops, want %d", i, g.Ops[i].Name, got, w[seen[k]])
		}
		seen[k]++
	}
	if seen[ir.OpMatMul] != 2 {
		t.Fatalf("the graph has %d matmuls, want 2", seen[ir.OpMatMul])
	}
}
