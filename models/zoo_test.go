package models

import (
	"math"
	"strings"
	"testing"

	"hap/ir"
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

// BERT-MoE gates each sequence on its own: the gating tensors grow linearly
// with the batch (not quadratically, as one global group would), the group
// dim leads so it can be split like the batch, and capacity follows the
// per-sequence formula.
func TestBERTMoEGatingIsPerSequence(t *testing.T) {
	cfg, err := Lookup("bert-moe")
	if err != nil {
		t.Fatal(err)
	}
	gate := func(batch int) (shape ir.Shape, gates int) {
		c := cfg
		c.Batch = batch
		g, err := Build(c)
		if err != nil {
			t.Fatal(err)
		}
		for i := range g.Ops {
			if op := &g.Ops[i]; op.Kind == ir.OpTop2Gate {
				shape = g.Tensors[op.Outputs[1]].Shape
				gates++
			}
		}
		return shape, gates
	}
	s32, n := gate(32)
	if n != cfg.Layers/2 {
		t.Errorf("%d top2_gate ops, want one per MoE layer (%d)", n, cfg.Layers/2)
	}
	wantC := int(math.Ceil(1.25 * 2 * 128 / 16)) // 20 slots per expert per sequence
	if want := (ir.Shape{32, cfg.Seq, cfg.Experts, wantC}); !s32.Equal(want) {
		t.Errorf("dispatch at batch 32 is %v, want %v [groups, tokens per group, experts, capacity]", s32, want)
	}
	s256, _ := gate(256)
	if a, b := s32.Numel(), s256.Numel(); b != 8*a {
		t.Errorf("dispatch grows from %d to %d elements when the batch grows 8×; want linear growth (%d)", a, b, 8*a)
	}
}

// BERT-MoE's parameter count is BERT-Base's with every other FFN replaced
// by a gate and Experts FFNs: Δ = L/2 · (d·E + (E−1)·(2·d·f + f + d)).
func TestBERTMoEParamCount(t *testing.T) {
	count := func(name string, experts int) int64 {
		cfg, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Batch, cfg.Experts = 1, experts
		s, err := Summarize(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s.Params
	}
	base := count("bert-base", 0)
	for _, e := range []int{16, 128} {
		d, f, moeLayers := int64(768), int64(3072), int64(6)
		want := base + moeLayers*(d*int64(e)+int64(e-1)*(2*d*f+f+d))
		if got := count("bert-moe", e); got != want {
			t.Errorf("bert-moe with %d experts has %d params, want %d", e, got, want)
		}
	}
}

// Options that cannot mean what they say are refused: experts for a model
// without them, a batch past MaxBatch (whose shapes would overflow).
func TestLoadRefusesMeaninglessOptions(t *testing.T) {
	for _, tc := range []struct {
		spec string
		opt  Options
		want string
	}{
		{"mlp-tiny", Options{Experts: 4}, "has no experts"},
		{"mlp-tiny", Options{Batch: MaxBatch + 1}, "must be in [1, 1048576]"},
		{"bert-base-tiny", Options{Batch: math.MaxInt64}, "must be in [1, 1048576]"},
	} {
		if _, err := Load(tc.spec, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.spec, tc.opt, err, tc.want)
		}
	}
	if _, err := Load("mlp-tiny", Options{Batch: MaxBatch}); err != nil {
		t.Errorf("batch MaxBatch: %v", err)
	}
}

// The LLaMA-style decoders have their published parameter counts:
// TinyLlama-1.1B (1.100 B) and LLaMA-2-7B (6.738 B), within 1%.
func TestLLaMAParamCounts(t *testing.T) {
	for name, w := range map[string]float64{"llama": 1.100e9, "llama-7b": 6.738e9} {
		cfg, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Batch = 1
		cfg.Seq = 16 // parameters do not depend on the sequence
		s, err := Summarize(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rel := math.Abs(float64(s.Params)-w) / w; rel > paramTolerance {
			t.Errorf("%s has %d params, want %.3gB ±1%% (off by %.2f%%)", name, s.Params, w/1e9, 100*rel)
		}
	}
}
