package main

import (
	"math"
	"testing"

	"hap/ir"
	"hap/models"
	"hap/torchref"
)

// paperFLOPsTolerance is how far an imported paper model's forward FLOPs,
// dropout aside, may be from the zoo's. The graphs differ in views
// (reshapes around each linear layer, nn.MultiheadAttention's
// sequence-first permutes) and in how ViT's class token is broadcast, a
// small part of the work; the parameters must match exactly. Dropout is
// left out because nn.TransformerEncoderLayer has one between its two
// feed-forward linears that the zoo's layer does not (bench/import.md).
const paperFLOPsTolerance = 0.01

// The HAP paper's models written in PyTorch (examples/torch/paper_models.py)
// import to the zoo's shapes: at the zoo's tiny sizes, the same parameter
// count, forward FLOPs within paperFLOPsTolerance, and hap's CPU step
// equal to PyTorch's. bench/import.md compares their plans at full size.
func TestPaperModelsImportAsTheZoo(t *testing.T) {
	py := torchPython(t)
	for _, c := range []struct{ factory, zoo string }{
		{"paper_models.py:vgg19_tiny", "vgg19-tiny"},
		{"paper_models.py:vit_tiny", "vit-tiny"},
		{"paper_models.py:bert_base_tiny", "bert-base-tiny"},
		{"paper_models.py:bert_moe_tiny", "bert-moe-tiny"},
	} {
		t.Run(c.zoo, func(t *testing.T) {
			graph, ref := importWithReference(t, py, c.factory)
			imported, err := models.Load(graph, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			zoo, err := models.Load(c.zoo, models.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if a, b := imported.ParamCount(), zoo.ParamCount(); a != b {
				t.Errorf("%d parameters imported, the zoo's %s has %d", a, c.zoo, b)
			}
			if a, b := forwardFLOPs(imported), forwardFLOPs(zoo); math.Abs(a-b) > paperFLOPsTolerance*b {
				t.Errorf("%.6g forward FLOPs imported, the zoo's %s has %.6g", a, c.zoo, b)
			}
			t.Logf("%s: %d ops imported, %d in the zoo; forward FLOPs ratio %.6f", c.zoo, len(imported.Ops), len(zoo.Ops), forwardFLOPs(imported)/forwardFLOPs(zoo))
			code, rep, errs := checkAgainstTorch(t, graph, ref)
			if code != 0 || rep == nil || rep.Worst.Rel > torchref.Tolerance {
				t.Fatalf("verify --against-torch: exit %d: %s", code, errs)
			}
		})
	}
}

func forwardFLOPs(g *ir.Graph) float64 {
	var f float64
	for i := range g.Ops {
		if g.Ops[i].Kind == ir.OpDropout {
			continue
		}
		w, _ := g.Work(ir.OpID(i))
		f += w.FLOPs
	}
	return f
}
