package cpu

import (
	"math"
	"testing"

	"hap/ir"
)

// PeakBytes follows Run's release rule: leaves for the whole run, each
// computed tensor until its last reader, an unread one to the end.
func TestPeakBytesFollowsTheReleaseRule(t *testing.T) {
	g := &ir.Graph{Name: "chain"}
	add := func(name string, kind ir.TensorKind, n int) ir.TensorID {
		id := ir.TensorID(len(g.Tensors))
		g.Tensors = append(g.Tensors, ir.Tensor{ID: id, Name: name, Kind: kind, DType: ir.Float32, Shape: ir.Shape{n}, Producer: ir.NoOp})
		return id
	}
	x := add("x", ir.Input, 10)        // 40 B, held throughout
	a := add("a", ir.Activation, 100)  // 400 B
	b := add("b", ir.Activation, 1000) // 4000 B
	c := add("c", ir.Activation, 1)    // 4 B, never read
	g.Ops = []ir.Op{
		{Name: "a", Kind: ir.OpReLU, Inputs: []ir.TensorID{x}, Outputs: []ir.TensorID{a}},
		{Name: "b", Kind: ir.OpReLU, Inputs: []ir.TensorID{a}, Outputs: []ir.TensorID{b}},
		{Name: "c", Kind: ir.OpReLU, Inputs: []ir.TensorID{b}, Outputs: []ir.TensorID{c}},
	}
	// Peak at op b: x, a (read by b, freed after it) and b.
	if got, want := PeakBytes(g, 4), int64(40+400+4000); got != want {
		t.Fatalf("PeakBytes = %d, want %d", got, want)
	}
	g.Tensors[b].Shape = ir.Shape{math.MaxInt64/2 + 1}
	if got := PeakBytes(g, 4); got != math.MaxInt64 {
		t.Fatalf("an overflowing size: PeakBytes = %d, want it saturated", got)
	}
}
