package models

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"hap/ir"
)

// Arch names a model family.
type Arch string

const (
	ArchMLP     Arch = "mlp"
	ArchVGG19   Arch = "vgg19"
	ArchViT     Arch = "vit"
	ArchBERT    Arch = "bert"
	ArchBERTMoE Arch = "bert-moe"
	ArchGPT2    Arch = "gpt2"
)

// Config is a model's shape. Fields a family does not use stay zero.
type Config struct {
	Name    string `json:"name"`
	Arch    Arch   `json:"arch"`
	Batch   int    `json:"batch"`              // samples per step (global batch)
	Layers  int    `json:"layers"`             // transformer blocks / MLP hidden layers
	Hidden  int    `json:"hidden,omitempty"`   // model width d
	Heads   int    `json:"heads,omitempty"`    // attention heads
	KVHeads int    `json:"kv_heads,omitempty"` // key/value heads (grouped-query attention, LLaMA)
	FFN     int    `json:"ffn,omitempty"`      // feed-forward width
	Seq     int    `json:"seq,omitempty"`      // tokens per sample (text models)
	MaxPos  int    `json:"max_pos,omitempty"`  // position-table rows (GPT-2: 1024)
	Vocab   int    `json:"vocab,omitempty"`    // vocabulary (text models)
	Classes int    `json:"classes,omitempty"`  // output classes (vision, MLP)
	Image   int    `json:"image,omitempty"`    // square image side
	Patch   int    `json:"patch,omitempty"`    // ViT patch side
	Input   int    `json:"input,omitempty"`    // MLP input features
	Widths  []int  `json:"widths,omitempty"`   // VGG conv widths; 0 marks a max-pool
	Pool    int    `json:"pool,omitempty"`     // VGG adaptive pool side
	FC      int    `json:"fc,omitempty"`       // VGG classifier width
	Experts int    `json:"experts,omitempty"`  // MoE experts (2 × devices in the paper)
	// CapacityFactor scales expert capacity per gating group (one
	// sequence, see moe): C = ⌈CapacityFactor·2·Seq/Experts⌉ (the paper's
	// "1.25 × 2": factor 1.25 times top-2).
	CapacityFactor float64  `json:"capacity_factor,omitempty"`
	Dropout        float64  `json:"dropout,omitempty"`
	DType          ir.DType `json:"-"`
}

// vgg19Widths is VGG19's configuration "E": 16 convolutions, 5 max-pools.
var vgg19Widths = [...]int{64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0}

// zoo returns the built-in configurations, fresh on every call.
func zoo() []Config {
	tinyVGG := []int{4, 4, 0, 8, 8, 0, 8, 8, 8, 8, 0, 16, 16, 16, 16, 0, 16, 16, 16, 16, 0}
	return append([]Config{
		{Name: "mlp", Arch: ArchMLP, Batch: 32, Layers: 3, Hidden: 1024, Input: 784, Classes: 10},
		{Name: "mlp-tiny", Arch: ArchMLP, Batch: 8, Layers: 2, Hidden: 32, Input: 16, Classes: 4},
		{Name: "vgg19", Arch: ArchVGG19, Batch: 32, Image: 32, Classes: 10, Widths: vgg19Widths[:], Pool: 7, FC: 4096, Dropout: 0.5},
		{Name: "vgg19-tiny", Arch: ArchVGG19, Batch: 4, Image: 32, Classes: 10, Widths: tinyVGG, Pool: 2, FC: 32, Dropout: 0.5},
		{Name: "vit", Arch: ArchViT, Batch: 32, Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Image: 32, Patch: 4, Classes: 10},
		{Name: "vit-tiny", Arch: ArchViT, Batch: 4, Layers: 2, Hidden: 16, Heads: 2, FFN: 32, Image: 8, Patch: 4, Classes: 10},
		{Name: "bert-base", Arch: ArchBERT, Batch: 32, Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Seq: 128, Vocab: 33278, Dropout: 0.1},
		{Name: "bert-base-tiny", Arch: ArchBERT, Batch: 4, Layers: 2, Hidden: 16, Heads: 2, FFN: 32, Seq: 8, Vocab: 50, Dropout: 0.1},
		{Name: "bert-moe", Arch: ArchBERTMoE, Batch: 32, Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Seq: 128, Vocab: 33278, Experts: 16, CapacityFactor: 1.25, Dropout: 0.1},
		{Name: "bert-moe-tiny", Arch: ArchBERTMoE, Batch: 4, Layers: 2, Hidden: 16, Heads: 2, FFN: 32, Seq: 8, Vocab: 50, Experts: 4, CapacityFactor: 1.25, Dropout: 0.1},
		{Name: "gpt2", Arch: ArchGPT2, Batch: 32, Layers: 12, Hidden: 768, Heads: 12, FFN: 3072, Seq: 1024, MaxPos: 1024, Vocab: 50257, Dropout: 0.1},
		{Name: "gpt2-tiny", Arch: ArchGPT2, Batch: 4, Layers: 2, Hidden: 16, Heads: 2, FFN: 32, Seq: 8, MaxPos: 16, Vocab: 50, Dropout: 0.1},
	}, llamaZoo()...)
}

// Names lists the zoo's model names, sorted.
func Names() []string {
	var n []string
	for _, c := range zoo() {
		n = append(n, c.Name)
	}
	sort.Strings(n)
	return n
}

// Lookup returns the named configuration (float32).
func Lookup(name string) (Config, error) {
	for _, c := range zoo() {
		if c.Name == name {
			c.Widths = append([]int{}, c.Widths...)
			return c, nil
		}
	}
	return Config{}, fmt.Errorf("unknown model %q (zoo: %s)", name, strings.Join(Names(), ", "))
}

// MaxBatch bounds a zoo model's global batch. The largest batches trained
// in practice are tens of thousands of samples (ImageNet in minutes:
// 65,536 images; LLM pre-training: a few thousand sequences of a few
// million tokens), so 2^20 is sixteen times past any of them, and far
// below where batch × a sample's elements could overflow the graph's
// shape arithmetic (ir.MaxElements checks every tensor as well).
const MaxBatch = 1 << 20

// Build constructs the forward graph of cfg, ending in its loss.
func Build(cfg Config) (*ir.Graph, error) {
	if cfg.Batch < 1 || cfg.Batch > MaxBatch {
		return nil, fmt.Errorf("model %s: batch %d must be in [1, %d]", cfg.Name, cfg.Batch, MaxBatch)
	}
	if cfg.Arch == ArchBERTMoE && (cfg.Experts < 2 || cfg.CapacityFactor <= 0) {
		return nil, fmt.Errorf("model %s: top-2 mixture of experts needs experts ≥ 2 and capacity factor > 0, got %d and %g", cfg.Name, cfg.Experts, cfg.CapacityFactor)
	}
	b := ir.NewBuilder(cfg.Name, cfg.DType)
	var loss ir.TensorID
	switch cfg.Arch {
	case ArchMLP:
		loss = buildMLP(b, cfg)
	case ArchVGG19:
		loss = buildVGG(b, cfg)
	case ArchViT:
		loss = buildViT(b, cfg)
	case ArchBERT, ArchBERTMoE:
		loss = buildBERT(b, cfg)
	case ArchGPT2:
		loss = buildGPT2(b, cfg)
	case ArchLLaMA:
		if err := checkLLaMA(cfg); err != nil {
			return nil, err
		}
		loss = buildLLaMA(b, cfg)
	default:
		return nil, fmt.Errorf("model %s: unknown architecture %q", cfg.Name, cfg.Arch)
	}
	return b.Finish(loss)
}

// linear is a dense layer with bias: x·w + b, w[in, out].
func linear(b *ir.Builder, name string, x ir.TensorID, in, out int) ir.TensorID {
	defer b.Scope(name)()
	return b.Linear(x, b.Param("w", in, out), b.ParamInit("b", ir.InitZeros, out))
}

func layerNorm(b *ir.Builder, name string, x ir.TensorID, d int) ir.TensorID {
	defer b.Scope(name)()
	return b.LayerNorm(x, b.ParamInit("gamma", ir.InitOnes, d), b.ParamInit("beta", ir.InitZeros, d))
}

func buildMLP(b *ir.Builder, c Config) ir.TensorID {
	x := b.Input("x", c.DType, c.Batch, c.Input)
	y := b.Label("labels", c.Batch)
	in := c.Input
	for i := 0; i < c.Layers; i++ {
		x = b.ReLU(linear(b, fmt.Sprintf("fc%d", i), x, in, c.Hidden))
		in = c.Hidden
	}
	return b.CrossEntropy(linear(b, "head", x, in, c.Classes), y)
}

func buildVGG(b *ir.Builder, c Config) ir.TensorID {
	x := b.Input("images", c.DType, c.Batch, 3, c.Image, c.Image)
	y := b.Label("labels", c.Batch)
	ch, conv, block := 3, 0, 1
	for _, w := range c.Widths {
		if w == 0 {
			x = b.MaxPool2D(x, 2, 2)
			block++
			conv = 0
			continue
		}
		conv++
		func() {
			defer b.Scope(fmt.Sprintf("block%d.conv%d", block, conv))()
			x = b.Conv2D(x, b.Param("w", w, ch, 3, 3), 1, 1)
			x = b.ReLU(b.Bias(x, b.ParamInit("b", ir.InitZeros, w), 1))
		}()
		ch = w
	}
	x = b.Flatten(b.AdaptiveAvgPool2D(x, c.Pool, c.Pool))
	x = b.Dropout(b.ReLU(linear(b, "fc1", x, ch*c.Pool*c.Pool, c.FC)), c.Dropout)
	x = b.Dropout(b.ReLU(linear(b, "fc2", x, c.FC, c.FC)), c.Dropout)
	return b.CrossEntropy(linear(b, "fc3", x, c.FC, c.Classes), y)
}

// attention is multi-head self-attention over x[B,S,d] with head-split
// projections, the shape tensor parallelism shards by heads.
func attention(b *ir.Builder, c Config, x ir.TensorID, seq int, causal bool) ir.TensorID {
	defer b.Scope("attn")()
	d, h := c.Hidden, c.Heads
	dh := d / h
	heads := func(name string) ir.TensorID {
		t := linear(b, name, x, d, d)
		return b.Permute(b.Reshape(t, c.Batch, seq, h, dh), 0, 2, 1, 3)
	}
	q, k, v := heads("q"), heads("k"), heads("v")
	o := b.Attention(q, k, v, causal)
	o = b.Reshape(b.Permute(o, 0, 2, 1, 3), c.Batch, seq, d)
	return linear(b, "out", o, d, d)
}

func ffn(b *ir.Builder, c Config, x ir.TensorID) ir.TensorID {
	defer b.Scope("ffn")()
	return linear(b, "fc2", b.GELU(linear(b, "fc1", x, c.Hidden, c.FFN)), c.FFN, c.Hidden)
}

// moe is a top-2 mixture of experts replacing an FFN, in GShard's grouped
// form: tokens are gated in groups of one sequence each, with per-group
// expert capacity C = ⌈CapacityFactor·2·Seq/Experts⌉ (moeCapacity). Shapes,
// with G = Batch groups and S = Seq tokens per group:
//
//	logits   [G,S,E]    = x[G,S,d] · gate[d,E]
//	combine, dispatch [G,S,E,C] = top2_gate(logits)
//	xe       [E,G,C,d]  = einsum(gsec,gsd->egcd)   dispatch
//	h        [E,G,C,f]  = gelu(einsum(egcd,edf->egcf) + b1[E,f])
//	ye       [E,G,C,d]  = einsum(egcf,efd->egcd) + b2[E,d]
//	y        [G,S,d]    = einsum(gsec,egcd->gsd)   combine
//
// Why one sequence per group: a group dim is split by the planner's batch
// segment, which cuts a dim of Batch·k elements, so G must be a multiple of
// Batch (coarser groups — 32 sequences, say — could not be split unevenly
// per sequence, and dp-cp's or the synthesizer's ratios would be lost); and
// the dense dispatch and combine einsums cost 2·S·E·C·d ≈ 5·S²·d per group,
// i.e. 5·S·d per token, about 5% of a token's expert FFN (4·d·f) at S = 128,
// d = 768, f = 3072, where a 4096-token group would make each of them cost
// 1.7× the experts. The dispatch and combine tensors hold G·S·E·C ≈
// 2.5·S·tokens elements: linear in the batch.
//
// Parameters per MoE layer: gate d·E plus E experts of 2·d·f + f + d
// (E·4.72 M at BERT-Base width). Forward FLOPs per token: gate 2·d·E,
// experts 2·(E·C/S)·2·d·f ≈ 2.5× a dense FFN (capacity factor 1.25 × top-2,
// padded slots included), dispatch and combine 2·E·C·d each.
func moe(b *ir.Builder, c Config, x ir.TensorID) ir.TensorID {
	defer b.Scope("moe")()
	d, e, f := c.Hidden, c.Experts, c.FFN
	logits := b.MatMul(x, b.Param("gate", d, e))
	combine, dispatch := b.Top2Gate(logits, moeCapacity(c))
	xe := b.Einsum("gsec,gsd->egcd", dispatch, x)
	h := b.Bias(b.Einsum("egcd,edf->egcf", xe, b.Param("w1", e, d, f)), b.ParamInit("b1", ir.InitZeros, e, f), 0, 3)
	ye := b.Bias(b.Einsum("egcf,efd->egcd", b.GELU(h), b.Param("w2", e, f, d)), b.ParamInit("b2", ir.InitZeros, e, d), 0, 3)
	return b.Einsum("gsec,egcd->gsd", combine, ye)
}

// moeCapacity is the expert capacity of one gating group (one sequence):
// ⌈CapacityFactor · 2 · Seq / Experts⌉, the 2 for top-2 routing.
func moeCapacity(c Config) int {
	return int(math.Ceil(c.CapacityFactor * 2 * float64(c.Seq) / float64(c.Experts)))
}

// postLNBlock is BERT's block: x = LN(x + attn(x)); x = LN(x + ffn(x)).
func postLNBlock(b *ir.Builder, c Config, x ir.TensorID, i int, useMoE bool) ir.TensorID {
	defer b.Scope(fmt.Sprintf("layer%d", i))()
	x = layerNorm(b, "ln1", b.Add(x, b.Dropout(attention(b, c, x, c.Seq, false), c.Dropout)), c.Hidden)
	var f ir.TensorID
	if useMoE {
		f = moe(b, c, x)
	} else {
		f = ffn(b, c, x)
	}
	return layerNorm(b, "ln2", b.Add(x, b.Dropout(f, c.Dropout)), c.Hidden)
}

// preLNBlock is ViT's and GPT-2's block: x += attn(LN(x)); x += ffn(LN(x)).
func preLNBlock(b *ir.Builder, c Config, x ir.TensorID, i, seq int, causal bool) ir.TensorID {
	defer b.Scope(fmt.Sprintf("layer%d", i))()
	x = b.Add(x, b.Dropout(attention(b, c, layerNorm(b, "ln1", x, c.Hidden), seq, causal), c.Dropout))
	return b.Add(x, b.Dropout(ffn(b, c, layerNorm(b, "ln2", x, c.Hidden)), c.Dropout))
}

func buildBERT(b *ir.Builder, c Config) ir.TensorID {
	ids := b.Input("tokens", ir.Int64, c.Batch, c.Seq)
	y := b.Label("labels", c.Batch*c.Seq)
	x := b.Embedding(ids, b.ParamInit("embed.word", ir.InitNormal, c.Vocab, c.Hidden))
	x = b.Bias(x, b.ParamInit("embed.pos", ir.InitNormal, c.Seq, c.Hidden), 1, 2)
	x = b.Dropout(layerNorm(b, "embed.ln", x, c.Hidden), c.Dropout)
	for i := 0; i < c.Layers; i++ {
		x = postLNBlock(b, c, x, i, c.Arch == ArchBERTMoE && i%2 == 1)
	}
	logits := linear(b, "decoder", b.Reshape(x, c.Batch*c.Seq, c.Hidden), c.Hidden, c.Vocab)
	return b.CrossEntropy(logits, y)
}

func buildViT(b *ir.Builder, c Config) ir.TensorID {
	img := b.Input("images", c.DType, c.Batch, 3, c.Image, c.Image)
	y := b.Label("labels", c.Batch)
	grid := c.Image / c.Patch
	n := grid * grid
	var x ir.TensorID
	func() {
		defer b.Scope("patch")()
		x = b.Conv2D(img, b.Param("w", c.Hidden, 3, c.Patch, c.Patch), c.Patch, 0)
		x = b.Bias(x, b.ParamInit("b", ir.InitZeros, c.Hidden), 1)
	}()
	x = b.Permute(b.Reshape(x, c.Batch, c.Hidden, n), 0, 2, 1) // [B, n, d]
	// The class token is a parameter broadcast over the batch: a zero
	// tensor shaped [B,1,d] plus the token as a bias.
	zeros := b.Emit(ir.OpFillLike, ir.Attrs{}, b.Slice(x, 1, 0, 1))[0]
	cls := b.Bias(zeros, b.ParamInit("cls", ir.InitNormal, 1, c.Hidden), 1, 2)
	x = b.Concat(1, cls, x)
	x = b.Bias(x, b.ParamInit("pos", ir.InitNormal, n+1, c.Hidden), 1, 2)
	for i := 0; i < c.Layers; i++ {
		x = preLNBlock(b, c, x, i, n+1, false)
	}
	x = layerNorm(b, "ln", x, c.Hidden)
	x = b.Reshape(b.Slice(x, 1, 0, 1), c.Batch, c.Hidden)
	return b.CrossEntropy(linear(b, "head", x, c.Hidden, c.Classes), y)
}

func buildGPT2(b *ir.Builder, c Config) ir.TensorID {
	ids := b.Input("tokens", ir.Int64, c.Batch, c.Seq)
	y := b.Label("labels", c.Batch*c.Seq)
	wte := b.ParamInit("wte", ir.InitNormal, c.Vocab, c.Hidden)
	x := b.Embedding(ids, wte)
	pos := b.ParamInit("wpe", ir.InitNormal, c.MaxPos, c.Hidden)
	if c.Seq < c.MaxPos {
		pos = b.Slice(pos, 0, 0, c.Seq)
	}
	x = b.Dropout(b.Bias(x, pos, 1, 2), c.Dropout)
	for i := 0; i < c.Layers; i++ {
		x = preLNBlock(b, c, x, i, c.Seq, true)
	}
	x = layerNorm(b, "ln_f", x, c.Hidden)
	// The decoder is tied to the token embedding: logits = x·wteᵀ.
	logits := b.MatMulT(b.Reshape(x, c.Batch*c.Seq, c.Hidden), wte, false, true)
	return b.CrossEntropy(logits, y)
}

// Summary is what `hap models` lists.
type Summary struct {
	Name           string  `json:"name"`
	Arch           Arch    `json:"arch"`
	Params         int64   `json:"params"`
	FLOPsPerSample float64 `json:"flops_per_sample"` // forward
	TrainFLOPs     float64 `json:"train_flops_per_sample"`
	Batch          int     `json:"batch"`
	Ops            int     `json:"ops"`
}

// Summarize builds cfg and measures it.
func Summarize(cfg Config) (Summary, error) {
	g, err := Build(cfg)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Name: cfg.Name, Arch: cfg.Arch, Params: g.ParamCount(), Batch: cfg.Batch, Ops: len(g.Ops)}
	for i := range g.Ops {
		f, bw := g.Work(ir.OpID(i))
		s.FLOPsPerSample += f.FLOPs
		s.TrainFLOPs += f.FLOPs + bw.FLOPs
	}
	s.FLOPsPerSample /= float64(cfg.Batch)
	s.TrainFLOPs /= float64(cfg.Batch)
	return s, nil
}
