package models

import (
	"strings"
	"testing"

	"hap/ir"
)

func TestResizeFromSpec(t *testing.T) {
	g, err := Load("llama-tiny:layers=3,hidden=24,heads=6,kv_heads=3,ffn=40,seq=6,vocab=30", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "llama-tiny:layers=3,hidden=24,heads=6,kv_heads=3,ffn=40,seq=6,vocab=30" {
		t.Errorf("name %q", g.Name)
	}
	// 30·24 embedding + 3 layers (2·24 norms, 24·24·2 q/o, 24·12·2 k/v, 3·24·40
	// mlp) + 24 final norm + 24·30 head.
	want := int64(30*24 + 3*(2*24+2*24*24+2*24*12+3*24*40) + 24 + 24*30)
	if n := g.ParamCount(); n != want {
		t.Errorf("resized llama-tiny has %d params, want %d", n, want)
	}
	// The example: llama at 48 layers of width 5120.
	cfg, _ := Lookup("llama")
	c, err := Resize(cfg, "llama:layers=48,hidden=5120", "layers=48,hidden=5120")
	if err != nil || c.Layers != 48 || c.Hidden != 5120 || c.Heads != 32 {
		t.Errorf("llama:layers=48,hidden=5120 → %+v, %v", c, err)
	}
	// Every family resizes by its knobs and still builds.
	for _, spec := range []string{
		"mlp-tiny:layers=3,hidden=8,input=5,classes=3", "vgg19-tiny:image=64,classes=7,pool=3,fc=16",
		"vit-tiny:layers=1,hidden=12,heads=3,ffn=20,image=12,patch=3", "bert-base-tiny:seq=6,vocab=40,layers=1",
		"bert-moe-tiny:experts=6,capacity_factor=2", "gpt2-tiny:seq=20,hidden=12,heads=3",
	} {
		if _, err := Load(spec, Options{}); err != nil {
			t.Errorf("%s: %v", spec, err)
		}
	}
	g, err = Load("gpt2-tiny:seq=20", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tok := g.Tensors[g.TensorsOfKind(ir.Input)[0]].Shape; tok[1] != 20 {
		t.Errorf("gpt2-tiny:seq=20 has tokens %v", tok)
	}
}

func TestResizeErrorsNameModelAndKey(t *testing.T) {
	for spec, want := range map[string][]string{
		"llama:widht=4096":           {"llama:widht=4096", `unknown key "widht"`, "layers, hidden, heads, kv_heads"},
		"llama:layers=0":             {"llama:layers=0", "layers", "whole number"},
		"llama:layers=many":          {"layers", `"many"`},
		"llama:hidden=4001":          {"llama:hidden=4001", "hidden 4001 is not a multiple of heads 32"},
		"llama:kv_heads=5":           {"kv_heads 5", "divide heads 32"},
		"llama:layers":               {`"layers" is not key=value`},
		"llama:layers=2,layers=3":    {`"layers" given twice`},
		"llama:":                     {"nothing after", "keys"},
		"vgg19:layers=3":             {`unknown key "layers" for vgg19`, "image, classes"},
		"vit:patch=5":                {"image 32 is not a multiple of patch 5"},
		"gpt2:seq=2048,max_pos=1024": {"seq 2048 exceeds max_pos 1024"},
		"bert-moe:experts=1":         {"experts"},
		"bert-base:dropout=1.5":      {"dropout", "[0, 1)"},
		"mlp:experts=4":              {`unknown key "experts" for mlp`},
	} {
		_, err := Load(spec, Options{})
		if err == nil {
			t.Errorf("%s: no error", spec)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", spec, err, w)
			}
		}
	}
}
