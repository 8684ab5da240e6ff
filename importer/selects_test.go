package importer

import (
	"testing"

	"hap/ir"
)

// selectGraph builds x[2,5,6] → reshape [2,5,3,2] → permute perm → unit
// slices of all of axis 0, each reshaped to [2,5,2] and summed into the loss.
func selectGraph(t *testing.T, perm []int, pieceShape []int) *ir.Graph {
	t.Helper()
	b := ir.NewBuilder("select", ir.Float64)
	x := b.Param("x", 2, 5, 6)
	p := b.Permute(b.Reshape(x, 2, 5, 3, 2), perm...)
	var loss ir.TensorID = ir.NoTensor
	for i := 0; i < b.Shape(p)[0]; i++ {
		s := b.ReduceSum(b.Reshape(b.Slice(p, 0, i, i+1), pieceShape...), 0, 1, 2)
		if loss == ir.NoTensor {
			loss = s
		} else {
			loss = b.Add(loss, s)
		}
	}
	g, err := b.Finish(loss)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The chain becomes one split of x's last dim only when piece i is
// x[..., 2i:2i+2]: moving n to the front qualifies; moving E there, or
// swapping the leading dims on the way, does not.
func TestSelectsToSplit(t *testing.T) {
	for _, c := range []struct {
		name  string
		perm  []int
		piece []int
		split bool
	}{
		{"n to the front", []int{2, 0, 1, 3}, []int{2, 5, 2}, true},
		{"leading dims swapped", []int{2, 1, 0, 3}, []int{2, 5, 2}, false},
		{"pieces of E", []int{3, 0, 1, 2}, []int{2, 5, 3}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := selectGraph(t, c.perm, c.piece)
			ng := selectsToSplit(g)
			if err := ng.Check(); err != nil {
				t.Fatal(err)
			}
			got := kinds(ng)
			if split := got[ir.OpSplit] == 1 && got[ir.OpSlice] == 0 && got[ir.OpPermute] == 0; split != c.split {
				t.Fatalf("rewritten to a split: %v, want %v (ops %v)", split, c.split, got)
			}
			if !c.split {
				return
			}
			for i := range ng.Ops {
				if op := &ng.Ops[i]; op.Kind == ir.OpSplit && (op.Attrs.Axis != 2 || len(op.Attrs.Sizes) != 3 || op.Attrs.Sizes[0] != 2) {
					t.Errorf("split %+v; want axis 2, sizes [2 2 2]", op.Attrs)
				}
			}
		})
	}
}
