package strategy

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"hap/cluster"
	"hap/ir"
	"hap/models"
)

// randomlyNamed is g with every op and tensor named at random: nothing in
// a name says what it is.
func randomlyNamed(g *ir.Graph) *ir.Graph {
	r := g.Clone()
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range r.Ops {
		r.Ops[i].Name = fmt.Sprintf("op%x", rng.Uint64())
	}
	for i := range r.Tensors {
		r.Tensors[i].Name = fmt.Sprintf("t%x", rng.Uint64())
	}
	return r
}

// The strategies find what they shard by structure: on the zoo's models
// named at random, tp, megatron, ep and zero3 make exactly the programs
// they make under the zoo's names, on one machine and on a mesh.
func TestStrategiesWhateverTheNames(t *testing.T) {
	for _, cl := range []string{"paper-8", "paper-16"} {
		c, err := cluster.Load(cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, model := range []string{"bert-base-tiny", "bert-moe-tiny", "gpt2-tiny", "vit-tiny"} {
			g, err := models.Load(model, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := randomlyNamed(g)
			for _, s := range []string{"tp", "megatron", "ep", "zero3"} {
				if s == "ep" && model != "bert-moe-tiny" {
					continue
				}
				want, err := Build(s, g, c)
				if err != nil {
					t.Fatalf("%s %s on %s: %v", s, model, cl, err)
				}
				got, err := Build(s, r, c)
				if err != nil {
					t.Errorf("%s %s on %s, named at random: %v", s, model, cl, err)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s %s on %s: named at random, another program", s, model, cl)
				}
			}
		}
	}
}

// What tp splits in BERT, found by structure, is what the zoo's names
// say: q, k, v and out of every layer's attention, fc1 and fc2 of every
// FFN; and ep's experts are every MoE layer's w1, b1, w2, b2.
func TestFoundAsNamed(t *testing.T) {
	names := func(g *ir.Graph, ts []ir.TensorID) []string {
		var out []string
		for _, t := range ts {
			out = append(out, g.Tensors[t].Name)
		}
		return out
	}
	suffixed := func(g *ir.Graph, suffixes ...string) []string {
		var out []string
		for _, t := range g.TensorsOfKind(ir.Param) {
			for _, s := range suffixes {
				if strings.HasSuffix(g.Tensors[t].Name, s) {
					out = append(out, g.Tensors[t].Name)
				}
			}
		}
		return out
	}
	sorted := func(s []string) string {
		c := append([]string{}, s...)
		slices.Sort(c)
		return strings.Join(c, " ")
	}
	g, err := models.Load("bert-moe", models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, f := findAttention(g), findFeedForward(g)
	check := func(what string, got []ir.TensorID, suffixes ...string) {
		if g, w := sorted(names(g, got)), sorted(suffixed(g, suffixes...)); g != w {
			t.Errorf("%s: found %s\nwant %s", what, g, w)
		}
	}
	check("q, k, v weights", a.qkvW, "attn.q.w", "attn.k.w", "attn.v.w")
	check("q, k, v biases", a.qkvB, "attn.q.b", "attn.k.b", "attn.v.b")
	check("out weights", a.outW, "attn.out.w")
	check("fc1 weights", f.w1, "ffn.fc1.w")
	check("fc1 biases", f.b1, "ffn.fc1.b")
	check("fc2 weights", f.w2, "ffn.fc2.w")
	experts, e := findExperts(g)
	check("experts", experts, "moe.w1", "moe.w2", "moe.b1", "moe.b2")
	if e != 16 || !reflect.DeepEqual(a.heads, []int{12}) || !reflect.DeepEqual(f.widths, []int{3072}) {
		t.Errorf("experts %d, heads %v, FFN widths %v; want 16, [12], [3072]", e, a.heads, f.widths)
	}
}
