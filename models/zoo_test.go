package models

import (
	"math"
	"testing"
)

// paramTolerance is the allowed relative deviation from the published
// parameter counts (the "within 1%").
const paramTolerance = 0.01

func TestParamCountsMatchPublishedFigures(t *testing.T) {
	want := map[string]float64{
		"vgg19":     139.6e6, // paper §8
		"vit":       85e6,    // ViT-Base/4 on 32×32
		"bert-base": 136e6,   // with WikiText-2 vocabulary and untied decoder
		"gpt2":      124e6,   // GPT-2 small
	}
	for name, w := range want {
		cfg, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Batch = 1
		s, err := Summarize(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rel := math.Abs(float64(s.Params)-w) / w; rel > paramTolerance {
			t.Errorf("%s has %d params, want %.1fM ±1%% (off by %.2f%%)", name, s.Params, w/1e6, 100*rel)
		}
	}
}

func TestEveryZooModelBuilds(t *testing.T) {
	for _, n := range Names() {
		cfg, _ := Lookup(n)
		cfg.Batch = 2
		if _, err := Build(cfg); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}
