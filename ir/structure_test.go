package ir_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"testing"

	"hap/ir"
	"hap/models"
)

// samePartition checks that two keyings of the same items group them
// alike: a bijection between the keys of a and those of b.
func samePartition(t *testing.T, what string, names []string, a, b []string) {
	t.Helper()
	ab, ba := map[string]string{}, map[string]string{}
	for i := range a {
		if k, ok := ab[a[i]]; ok && k != b[i] {
			t.Errorf("%s %q: tied with others by %q, but structure says %q, not %q", what, names[i], a[i], b[i], k)
		}
		if k, ok := ba[b[i]]; ok && k != a[i] {
			t.Errorf("%s %q: structure ties it by %q with others the names key %q, not %q", what, names[i], b[i], k, a[i])
		}
		ab[a[i]], ba[b[i]] = b[i], a[i]
	}
}

// The zoo's models name their layers layer<N>.; structure must tie exactly
// what those names tie — no more, no less — so that their plans stay byte
// for byte what they were when the names decided.
func TestLayersTieAsZooNames(t *testing.T) {
	for _, name := range models.Names() {
		t.Run(name, func(t *testing.T) {
			cfg, err := models.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			g, err := models.Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ls := ir.FindLayers(g)
			structKey := func(p ir.LayerPos, id int) string {
				if p.Key == "" {
					return fmt.Sprint("#", id)
				}
				return p.Key
			}
			var names, byName, byStruct []string
			for i := range g.Ops {
				names = append(names, g.Ops[i].Name)
				byName = append(byName, ir.LayerTemplate(g.Ops[i].Name))
				byStruct = append(byStruct, structKey(ls.Ops[i], i))
			}
			samePartition(t, "op", names, byName, byStruct)
			names, byName, byStruct = nil, nil, nil
			for i := range g.Tensors {
				if !g.Tensors[i].Kind.IsLeaf() {
					continue
				}
				names = append(names, g.Tensors[i].Name)
				byName = append(byName, ir.LayerTemplate(g.Tensors[i].Name))
				byStruct = append(byStruct, structKey(ls.Tensors[i], i))
			}
			samePartition(t, "leaf", names, byName, byStruct)
		})
	}
}

// renamed returns a copy of g whose layer<N>. names are spelled another
// way: "layers.N.", "h.N.", "encoder.layer.N.", "lN.", or (scheme
// "random") every op and tensor named at random.
func renamed(g *ir.Graph, scheme string, seed uint64) *ir.Graph {
	c := g.Clone()
	rng := rand.New(rand.NewPCG(seed, 1))
	re := regexp.MustCompile(`layer([0-9]+)\.`)
	name := func(s string, i int) string {
		if scheme == "random" {
			return fmt.Sprintf("n%x_%d", rng.Uint64(), i)
		}
		return re.ReplaceAllString(s, scheme)
	}
	for i := range c.Ops {
		c.Ops[i].Name = name(c.Ops[i].Name, i)
	}
	for i := range c.Tensors {
		c.Tensors[i].Name = name(c.Tensors[i].Name, i)
	}
	return c
}

// namingSchemes are the spellings of "layer 3" the tests rename to.
var namingSchemes = []string{"layer${1}.", "layers.${1}.", "h.${1}.", "encoder.layer.${1}.", "l${1}.", "random"}

// Names do not matter: the same models with their layers named as other
// exporters name them, or named at random, tie op for op and leaf for leaf
// as with the zoo's names.
func TestLayersTieWhateverTheNames(t *testing.T) {
	for _, name := range []string{"bert-base-tiny", "bert-moe-tiny", "gpt2-tiny", "vit-tiny"} {
		cfg, err := models.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Layers = 4
		g, err := models.Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := ir.FindLayers(g)
		if want.Stacks != 1 || want.LayersIn[0] != 4 {
			t.Fatalf("%s: found %d stacks %v, want one of 4 layers", name, want.Stacks, want.LayersIn)
		}
		for _, scheme := range namingSchemes {
			got := ir.FindLayers(renamed(g, scheme, 7))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s named %q: layers differ from the zoo's names'", name, scheme)
			}
		}
	}
}

// block is a pre-LN transformer layer built by hand; odd changes it in
// one way: "shape" (a wider FFN), "attr" (causal attention), "connection"
// (v projected from q rather than from the layer's input), "kind" (ReLU
// for GELU).
func block(b *ir.Builder, x ir.TensorID, batch, seq, d, heads, ffn int, odd string, params *int) ir.TensorID {
	name := func() string { *params++; return fmt.Sprint("p", *params) }
	ln := func(x ir.TensorID) ir.TensorID {
		return b.LayerNorm(x, b.ParamInit(name(), ir.InitOnes, d), b.ParamInit(name(), ir.InitZeros, d))
	}
	lin := func(x ir.TensorID, in, out int) ir.TensorID {
		return b.Linear(x, b.Param(name(), in, out), b.ParamInit(name(), ir.InitZeros, out))
	}
	split := func(t ir.TensorID) ir.TensorID {
		return b.Permute(b.Reshape(t, batch, seq, heads, d/heads), 0, 2, 1, 3)
	}
	h := ln(x)
	q := lin(h, d, d)
	k := lin(h, d, d)
	vin := h
	if odd == "connection" {
		vin = q
	}
	v := lin(vin, d, d)
	o := b.Attention(split(q), split(k), split(v), odd == "attr")
	o = lin(b.Reshape(b.Permute(o, 0, 2, 1, 3), batch, seq, d), d, d)
	x = b.Add(x, o)
	f := ffn
	if odd == "shape" {
		f = 2 * ffn
	}
	h = lin(ln(x), d, f)
	if odd == "kind" {
		h = b.ReLU(h)
	} else {
		h = b.GELU(h)
	}
	return b.Add(x, lin(h, f, d))
}

// decoder builds a decoder of n pre-LN layers, layer oddAt changed as
// block's odd says; its names say nothing of layers.
func decoder(t testing.TB, n, d, ffn int, oddAt int, odd string) *ir.Graph {
	t.Helper()
	const batch, seq, vocab, heads = 2, 8, 64, 4
	b := ir.NewBuilder("decoder", ir.Float32)
	ids := b.Input("ids", ir.Int64, batch, seq)
	y := b.Label("y", batch*seq)
	x := b.Embedding(ids, b.ParamInit("emb", ir.InitNormal, vocab, d))
	params := 0
	for i := range n {
		o := ""
		if i == oddAt {
			o = odd
		}
		x = block(b, x, batch, seq, d, heads, ffn, o, &params)
	}
	x = b.LayerNorm(x, b.ParamInit("lnf.g", ir.InitOnes, d), b.ParamInit("lnf.b", ir.InitZeros, d))
	g, err := b.Finish(b.CrossEntropy(b.MatMulT(b.Reshape(x, batch*seq, d), b.Param("head", d, vocab), false, false), y))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A layer that differs from its neighbours in one shape, attribute, op
// kind or connection is not tied to them where it differs: the ops that
// differ tie with no op of another layer, while every op that is the same
// as its counterpart (same kind, attributes, shapes, and inputs from the
// same places) still ties with it, in the odd layer as in the others.
func TestOddLayerIsNotTied(t *testing.T) {
	const n, odd = 6, 4
	for _, change := range []string{"", "shape", "attr", "connection", "kind"} {
		g := decoder(t, n, 16, 32, odd, change)
		ls := ir.FindLayers(g)
		if ls.Stacks != 1 || ls.LayersIn[0] != n {
			t.Fatalf("%q: %d stacks %v, want one of %d layers", change, ls.Stacks, ls.LayersIn, n)
		}
		per := (len(g.Ops) - 5) / n // the embedding before, 4 ops after
		at := func(l, k int) ir.OpID { return ir.OpID(1 + l*per + k) }
		// same reports whether op k of layer l is op k of layer 1 in
		// kind, attributes, shapes and where its inputs come from.
		same := func(l, k int) bool {
			a, b := &g.Ops[at(l, k)], &g.Ops[at(1, k)]
			aa, ba := a.Attrs, b.Attrs
			aa.Seed, ba.Seed = 0, 0
			if a.Kind != b.Kind || !reflect.DeepEqual(aa, ba) || len(a.Inputs) != len(b.Inputs) {
				return false
			}
			for j := range a.Inputs {
				ta, tb := &g.Tensors[a.Inputs[j]], &g.Tensors[b.Inputs[j]]
				if !ta.Shape.Equal(tb.Shape) || ta.Kind != tb.Kind {
					return false
				}
				ra, rb := int(ta.Producer)-int(at(l, 0)), int(tb.Producer)-int(at(1, 0))
				if ta.Producer == ir.NoOp || ra < 0 {
					ra = -1
				}
				if tb.Producer == ir.NoOp || rb < 0 {
					rb = -1
				}
				if ra != rb {
					return false
				}
			}
			return g.Tensors[a.Outputs[0]].Shape.Equal(g.Tensors[b.Outputs[0]].Shape)
		}
		differ := 0
		for k := range per {
			for l := range n {
				tied := ls.Tied(at(l, k), at(1, k))
				if l == odd && !same(l, k) {
					differ++
					for m := range n {
						if m != l && ls.Tied(at(l, k), at(m, k)) {
							t.Errorf("%q: op %d of the odd layer (%s) differs, yet ties with layer %d's", change, k, g.Ops[at(l, k)].Kind, m)
						}
					}
				} else if !tied {
					t.Errorf("%q: op %d of layer %d (%s) is layer 1's, yet not tied with it", change, k, l, g.Ops[at(l, k)].Kind)
				}
			}
		}
		t.Logf("%q: %d of %d ops of the odd layer differ", change, differ, per)
		if (differ == 0) != (change == "") {
			t.Errorf("%q: %d ops of the odd layer differ", change, differ)
		}
	}
}

// FindLayers on a 32-layer decoder with a 7B model's widths (d 4096, FFN
// 11008; 834 forward ops): it runs on every Encode, so it must take
// milliseconds, not grow with the square of the ops.
func BenchmarkFindLayers32(b *testing.B) {
	g := decoder(b, 32, 4096, 11008, -1, "")
	b.ResetTimer()
	for b.Loop() {
		if ls := ir.FindLayers(g); ls.LayersIn[0] != 32 {
			b.Fatalf("found %v layers", ls.LayersIn)
		}
	}
}
