package importer

import (
	"fmt"
	"strings"
	"testing"

	"hap/ir"
)

// swigluDoc is a trace of silu(g) and a product by u, then whatever the
// nodes after add up to the loss "s".
func swigluDoc(mulArgs, rest string) []byte {
	return []byte(`{"format":"hap.aten","version":1,"name":"sw","torch":"1.13.1",
"placeholders":[{"name":"g","kind":"param","dtype":"float32","shape":[3,4]},{"name":"u","kind":"param","dtype":"float32","shape":[3,4]}],
"nodes":[{"name":"si","op":"aten.silu.default","args":[{"t":"g"}],"outputs":[{"dtype":"float32","shape":[3,4]}],"module":"mlp.act"},
{"name":"m","op":"aten.mul.Tensor","args":` + mulArgs + `,"outputs":[{"dtype":"float32","shape":[3,4]}],"module":"mlp"},
` + rest + `],
"loss":"s"}`)
}

// silu(g)·u and u·silu(g) import as one swiglu(g, u), gate first, with no
// silu or mul left; a silu read by a second op as well imports as silu and
// mul, as before; and a silu whose one reader is a mul by a number is a
// silu and a scale.
func TestImportSwiGLU(t *testing.T) {
	sum := `{"name":"s","op":"aten.sum.default","args":[{"t":"m"}],"outputs":[{"dtype":"float32","shape":[]}],"module":""}`
	for _, args := range []string{`[{"t":"si"},{"t":"u"}]`, `[{"t":"u"},{"t":"si"}]`} {
		r, err := Import(swigluDoc(args, sum))
		if err != nil {
			t.Fatalf("mul%s: %v", args, err)
		}
		g := r.Graph
		got := kinds(g)
		if got[ir.OpSwiGLU] != 1 || got[ir.OpSiLU] != 0 || got[ir.OpMul] != 0 {
			t.Fatalf("mul%s: ops %v; want one swiglu and no silu or mul", args, got)
		}
		for i := range g.Ops {
			op := &g.Ops[i]
			if op.Kind != ir.OpSwiGLU {
				continue
			}
			if gate, up := g.Tensor(op.Inputs[0]).Name, g.Tensor(op.Inputs[1]).Name; gate != "g" || up != "u" {
				t.Errorf("mul%s: swiglu(%s, %s); want swiglu(g, u)", args, gate, up)
			}
			if op.Name != "mlp.swiglu" {
				t.Errorf("mul%s: swiglu named %q; want mlp.swiglu (the mul's module)", args, op.Name)
			}
		}
	}

	// silu(g) also summed into the loss: fusing would compute it twice.
	twice := `{"name":"a","op":"aten.add.Tensor","args":[{"t":"m"},{"t":"si"}],"outputs":[{"dtype":"float32","shape":[3,4]}],"module":""},
{"name":"s","op":"aten.sum.default","args":[{"t":"a"}],"outputs":[{"dtype":"float32","shape":[]}],"module":""}`
	r, err := Import(swigluDoc(`[{"t":"si"},{"t":"u"}]`, twice))
	if err != nil {
		t.Fatal(err)
	}
	g := r.Graph
	if got := kinds(g); got[ir.OpSwiGLU] != 0 || got[ir.OpSiLU] != 1 || got[ir.OpMul] != 1 {
		t.Fatalf("silu read twice: ops %v; want one silu and one mul", got)
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		switch op.Kind {
		case ir.OpSiLU:
			if op.Name != "mlp.act.silu" || g.Tensor(op.Inputs[0]).Name != "g" {
				t.Errorf("silu %q of %q; want mlp.act.silu of g, as before the fusion", op.Name, g.Tensor(op.Inputs[0]).Name)
			}
		case ir.OpMul:
			if p := g.Tensor(op.Inputs[0]).Producer; p == ir.NoOp || g.Ops[p].Kind != ir.OpSiLU || g.Tensor(op.Inputs[1]).Name != "u" {
				t.Errorf("mul of %v; want silu(g) · u", op.Inputs)
			}
		}
	}

	// silu(g)·2: the mul takes a number, so the pending silu is the silu
	// op after all, scaled.
	r, err = Import(swigluDoc(`[{"t":"si"},2]`, sum))
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(r.Graph); got[ir.OpSwiGLU] != 0 || got[ir.OpSiLU] != 1 || got[ir.OpFillLike] != 1 {
		t.Errorf("silu(g)·2: ops %v; want a silu scaled by a fill_like of 2", got)
	}

	// Operands of different dtypes are refused as a mul of them would be,
	// naming the op.
	bad := strings.Replace(string(swigluDoc(`[{"t":"si"},{"t":"u"}]`, sum)), `{"name":"u","kind":"param","dtype":"float32"`, `{"name":"u","kind":"param","dtype":"float64"`, 1)
	if _, err := Import([]byte(bad)); err == nil || !strings.Contains(err.Error(), "dtype mismatch") || !strings.Contains(err.Error(), "aten.mul.Tensor") {
		t.Errorf("silu(float32)·float64: err %v; want a dtype mismatch at the mul", err)
	}
}

// The tiny LLaMA's feed-forwards (examples/torch/llama.py:tiny,
// down_proj(silu(gate_proj(x)) * up_proj(x))) import as one swiglu per
// layer reading the gate_proj and up_proj matmuls, with no silu left.
func TestImportLLaMASwiGLU(t *testing.T) {
	g := importFixture(t, "llama_tiny.aten.json").Graph
	got := kinds(g)
	if got[ir.OpSwiGLU] != 2 || got[ir.OpSiLU] != 0 {
		t.Fatalf("%d swiglu and %d silu ops; want 2 and 0 (all ops: %v)", got[ir.OpSwiGLU], got[ir.OpSiLU], got)
	}
	layer := 0
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Kind != ir.OpSwiGLU {
			continue
		}
		for j, proj := range []string{"gate_proj", "up_proj"} {
			p := g.Tensor(op.Inputs[j]).Producer
			want := fmt.Sprintf("layers.%d.mlp.%s.weight", layer, proj)
			if p == ir.NoOp || g.Ops[p].Kind != ir.OpMatMul || g.Tensor(g.Ops[p].Inputs[1]).Name != want {
				t.Errorf("swiglu %s input %d is not the matmul by %s", op.Name, j, want)
			}
		}
		layer++
	}
}
