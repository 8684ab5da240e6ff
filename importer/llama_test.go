package importer

import (
	"testing"

	"hap/ir"
)

// LLaMA's attention written in plain torch (examples/torch/llama.py:
// attention_block) imports as two rotary ops (q and k), and one attention
// op reading the two key/value heads with kv_group 2 and the causal mask
// buffer as its mask: no slices, negations, concats, repeats or products
// with the tables remain.
func TestImportLLaMAAttention(t *testing.T) {
	g := importFixture(t, "llama_attention.aten.json").Graph
	got := kinds(g)
	for k, n := range map[ir.OpKind]int{ir.OpRotary: 2, ir.OpAttention: 1, ir.OpConcat: 0, ir.OpMul: 0, ir.OpFillLike: 0, ir.OpSoftmax: 0, ir.OpBias: 1} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	if got[ir.OpSlice] != 1 { // the head's x[:, 0]
		t.Errorf("%d slices, want 1 (all ops: %v)", got[ir.OpSlice], got)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		switch op.Kind {
		case ir.OpAttention:
			if op.Attrs.KVGroup != 2 || len(op.Inputs) != 4 {
				t.Fatalf("attention %s: kv_group %d, %d inputs; want 2 and q, k, v, mask", op.Name, op.Attrs.KVGroup, len(op.Inputs))
			}
			for j, want := range []ir.Shape{{2, 4, 6, 4}, {2, 2, 6, 4}, {2, 2, 6, 4}, {6, 6}} {
				if s := g.Tensor(op.Inputs[j]).Shape; !s.Equal(want) {
					t.Errorf("attention input %d is %v; want %v", j, s, want)
				}
			}
			if m := g.Tensor(op.Inputs[3]); m.Name != "attn.mask" || m.Kind != ir.State {
				t.Errorf("mask is %s %q; want the state tensor attn.mask", m.Kind, m.Name)
			}
			if op.Attrs.Scale != 0.5 {
				t.Errorf("scale %v, want 1/√4", op.Attrs.Scale)
			}
		case ir.OpRotary:
			if c, s := g.Tensor(op.Inputs[1]), g.Tensor(op.Inputs[2]); c.Name != "attn.cos" || s.Name != "attn.sin" {
				t.Errorf("rotary %s reads %q and %q; want attn.cos and attn.sin", op.Name, c.Name, s.Name)
			}
		}
	}
}

// The pieces of the rotary pattern used otherwise are what they compute:
// rotate_half(x) alone imports as slices, a scale by −1 and a concat, and a
// product broadcasting a table outside the pattern is refused by name.
func TestRotaryPiecesOutsideThePattern(t *testing.T) {
	x := &val{spec: Spec{DType: "float32", Shape: []int{2, 3, 4}}, id: ir.NoTensor, kind: lzLeaf}
	h1, ok1 := lazyHalf(x, 2, 0, 2)
	h2, ok2 := lazyHalf(x, 2, 2, 4)
	if !ok1 || !ok2 {
		t.Fatal("halves of the last dim not kept lazy")
	}
	if _, ok := lazyHalf(x, 2, 1, 3); ok {
		t.Error("a middle slice kept as a half")
	}
	if _, ok := lazyHalf(x, 1, 0, 1); ok {
		t.Error("a slice of another dim kept as a half")
	}
	c := &conv{b: ir.NewBuilder("t", ir.Float32)}
	if _, ok := rotateHalf([]*val{h1, h2}, 2); ok {
		t.Error("cat(x1, x2) taken for rotate_half")
	}
	r, ok := rotateHalf([]*val{c.scaled(h2, -1), h1}, 2)
	if !ok {
		t.Fatal("cat(−x2, x1) not recognised")
	}
	xid := c.b.Input("x", ir.Float32, 2, 3, 4)
	x.id, x.kind = xid, lzNone
	id, err := c.mat(r)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.b.Shape(id); !s.Equal(ir.Shape{2, 3, 4}) {
		t.Errorf("materialised rotate_half is %v", s)
	}
	tab := &val{spec: Spec{DType: "float32", Shape: []int{3, 4}}, id: c.b.Input("cos", ir.Float32, 3, 4), kind: lzNone}
	p, ok := tableProduct(x, tab)
	if !ok {
		t.Fatal("x·cos not recognised")
	}
	if _, err := c.mat(p); err == nil {
		t.Error("a broadcasting product outside a rotary embedding was not refused")
	}
}

// The whole tiny LLaMA (examples/torch/llama.py:tiny) imports with each
// RMSNorm, written out as x·rsqrt(mean(x²) + ε)·w, folded into one
// rms_norm op reading x and its weight: two per layer and the final one,
// and none of the pieces left.
func TestImportLLaMARMSNorm(t *testing.T) {
	g := importFixture(t, "llama_tiny.aten.json").Graph
	got := kinds(g)
	for k, n := range map[ir.OpKind]int{ir.OpRMSNorm: 5, ir.OpPowScalar: 0, ir.OpMean: 0, ir.OpRsqrt: 0, ir.OpFillLike: 0, ir.OpRotary: 4, ir.OpAttention: 2, ir.OpSiLU: 0, ir.OpSwiGLU: 2} {
		if got[k] != n {
			t.Errorf("%d %s ops, want %d (all ops: %v)", got[k], k, n, got)
		}
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != ir.OpRMSNorm {
			continue
		}
		w := g.Tensor(op.Inputs[1])
		if op.Attrs.Eps != 1e-5 || w.Kind != ir.Param || !w.Shape.Equal(ir.Shape{16}) {
			t.Errorf("rms_norm %s: eps %g, weight %s %q %v; want 1e-5 and a [16] parameter", op.Name, op.Attrs.Eps, w.Kind, w.Name, w.Shape)
		}
	}
}
