package encode

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	"hap/cluster"
	"hap/cost"
	"hap/ir"
	"hap/models"
	"hap/spmd"
)

// Repeated layers tie by structure, whatever their names: BERT's layers
// named as the zoo names them (layer3.), as Hugging Face does
// (encoder.layer.3., layers.3.), as GPT-2's checkpoints do (h.3.), tersely
// (l3.) or at random all make the same op and tensor classes, as many as
// with the zoo's names and far fewer than untied.
func TestClassesWhateverTheNames(t *testing.T) {
	cl, err := cluster.Load("paper-8")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.New(cl, cost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := models.Lookup("bert-base-tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Layers = 6
	g, err := models.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	segs := []spmd.Segment{{Name: "batch", Units: cfg.Batch}}
	encode := func(g *ir.Graph, noTie bool) *Encoding {
		e, err := Encode(g, segs, m, EncodeOptions{NoTie: noTie})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	want := encode(g, false)
	untied := encode(g, true)
	if len(want.Classes)*2 > len(untied.Classes) {
		t.Fatalf("%d op classes tied, %d untied: the layers did not tie", len(want.Classes), len(untied.Classes))
	}
	re := regexp.MustCompile(`layer([0-9]+)\.`)
	for _, scheme := range []string{"layers.${1}.", "h.${1}.", "encoder.layer.${1}.", "l${1}.", "layer${1}.", "random"} {
		r := g.Clone()
		rng := rand.New(rand.NewPCG(1, 2))
		rename := func(s string) string {
			if scheme == "random" {
				return fmt.Sprintf("%016x", rng.Uint64())
			}
			return re.ReplaceAllString(s, scheme)
		}
		for i := range r.Ops {
			r.Ops[i].Name = rename(r.Ops[i].Name)
		}
		for i := range r.Tensors {
			r.Tensors[i].Name = rename(r.Tensors[i].Name)
		}
		got := encode(r, false)
		if len(got.Classes) != len(want.Classes) || len(got.Tensors) != len(want.Tensors) {
			t.Errorf("named %q: %d op and %d tensor classes, want %d and %d", scheme, len(got.Classes), len(got.Tensors), len(want.Classes), len(want.Tensors))
			continue
		}
		for i := range g.Ops {
			if got.classOf[i] != want.classOf[i] {
				t.Errorf("named %q: op %s in class %d, want %d", scheme, g.Ops[i].Name, got.classOf[i], want.classOf[i])
			}
		}
		for i := range g.Tensors {
			if got.tclassOf[i] != want.tclassOf[i] {
				t.Errorf("named %q: tensor %s in class %d, want %d", scheme, g.Tensors[i].Name, got.tclassOf[i], want.tclassOf[i])
			}
		}
	}
}
