package models

import (
	"fmt"

	"hap/ir"
)

// ArchLLaMA is a LLaMA-style decoder: pre-norm blocks with RMSNorm, rotary
// position embeddings on q and k, grouped-query causal attention (KVHeads
// key/value heads), a SwiGLU feed-forward w2(silu(w1·x) ⊙ w3·x), no
// biases, a final RMSNorm and an untied output projection, trained as a
// causal LM (cross-entropy of every position against its next token, the
// labels fed shifted).
const ArchLLaMA Arch = "llama"

// llamaZoo are the LLaMA-style configurations: "llama" has TinyLlama-1.1B's
// shapes (22 layers, width 2048, 32 query and 4 key/value heads, FFN
// 5632, vocabulary 32000, 2048 tokens), "llama-7b" LLaMA-2-7B's (32
// layers, width 4096, 32 heads without grouping, FFN 11008, vocabulary
// 32000, 4096 tokens), "llama-tiny" a CPU-sized one with grouping.
func llamaZoo() []Config {
	return []Config{
		{Name: "llama", Arch: ArchLLaMA, Batch: 32, Layers: 22, Hidden: 2048, Heads: 32, KVHeads: 4, FFN: 5632, Seq: 2048, Vocab: 32000},
		{Name: "llama-7b", Arch: ArchLLaMA, Batch: 32, Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, FFN: 11008, Seq: 4096, Vocab: 32000},
		{Name: "llama-tiny", Arch: ArchLLaMA, Batch: 4, Layers: 2, Hidden: 16, Heads: 4, KVHeads: 2, FFN: 24, Seq: 8, Vocab: 50},
	}
}

// rmsNormEps is LLaMA-2's RMSNorm ε.
const rmsNormEps = 1e-5

// checkLLaMA says what in c a LLaMA-style decoder cannot be built from.
func checkLLaMA(c Config) error {
	switch {
	case c.Layers < 1 || c.Hidden < 1 || c.Heads < 1 || c.FFN < 1 || c.Seq < 1 || c.Vocab < 1:
		return fmt.Errorf("model %s: layers, hidden, heads, ffn, seq and vocab must be positive, got %d, %d, %d, %d, %d, %d", c.Name, c.Layers, c.Hidden, c.Heads, c.FFN, c.Seq, c.Vocab)
	case c.Hidden%c.Heads != 0:
		return fmt.Errorf("model %s: hidden %d is not a multiple of heads %d", c.Name, c.Hidden, c.Heads)
	case (c.Hidden/c.Heads)%2 != 0:
		return fmt.Errorf("model %s: head width hidden/heads = %d must be even (rotary embeddings rotate its halves)", c.Name, c.Hidden/c.Heads)
	case c.KVHeads < 1 || c.Heads%c.KVHeads != 0:
		return fmt.Errorf("model %s: kv_heads %d must be positive and divide heads %d", c.Name, c.KVHeads, c.Heads)
	}
	return nil
}

func buildLLaMA(b *ir.Builder, c Config) ir.TensorID {
	ids := b.Input("tokens", ir.Int64, c.Batch, c.Seq)
	y := b.Label("labels", c.Batch*c.Seq)
	dh := c.Hidden / c.Heads
	// The rotary tables cos, sin [S, dh] (HF's layout: each frequency
	// twice) are fed with the tokens; they depend on positions only.
	cos := b.Input("rope.cos", c.DType, c.Seq, dh)
	sin := b.Input("rope.sin", c.DType, c.Seq, dh)
	x := b.Embedding(ids, b.ParamInit("embed", ir.InitNormal, c.Vocab, c.Hidden))
	for i := 0; i < c.Layers; i++ {
		x = llamaBlock(b, c, x, cos, sin, i)
	}
	x = rmsNorm(b, "norm", x, c.Hidden)
	logits := b.MatMul(b.Reshape(x, c.Batch*c.Seq, c.Hidden), b.Param("lm_head", c.Hidden, c.Vocab))
	return b.CrossEntropy(logits, y)
}

// llamaBlock is x += attn(rmsnorm(x)); x += mlp(rmsnorm(x)).
func llamaBlock(b *ir.Builder, c Config, x, cos, sin ir.TensorID, i int) ir.TensorID {
	defer b.Scope(fmt.Sprintf("layer%d", i))()
	x = b.Add(x, llamaAttention(b, c, rmsNorm(b, "attn_norm", x, c.Hidden), cos, sin))
	return b.Add(x, swiGLU(b, c, rmsNorm(b, "mlp_norm", x, c.Hidden)))
}

// llamaAttention is grouped-query causal self-attention with rotary q and
// k: heads are split off by reshape and permute to [B, H, S, dh] (k and v
// with KVHeads heads), and the one attention op serves each key/value head
// to Heads/KVHeads query heads.
func llamaAttention(b *ir.Builder, c Config, x, cos, sin ir.TensorID) ir.TensorID {
	defer b.Scope("attn")()
	d, h, kv := c.Hidden, c.Heads, c.KVHeads
	dh := d / h
	proj := func(name string, heads int) ir.TensorID {
		t := b.MatMul(x, b.Param(name, d, heads*dh))
		return b.Permute(b.Reshape(t, c.Batch, c.Seq, heads, dh), 0, 2, 1, 3)
	}
	q := b.Rotary(proj("wq", h), cos, sin)
	k := b.Rotary(proj("wk", kv), cos, sin)
	v := proj("wv", kv)
	o := b.AttentionWith(q, k, v, ir.NoTensor, true, h/kv)
	o = b.Reshape(b.Permute(o, 0, 2, 1, 3), c.Batch, c.Seq, d)
	return b.MatMul(o, b.Param("wo", d, d))
}

// swiGLU is LLaMA's feed-forward: w2(silu(x·w1) ⊙ x·w3), the gated
// product one swiglu op, which keeps x·w1 and x·w3 for the backward but
// not silu(x·w1): one FFN-wide activation less per layer than silu then
// mul.
func swiGLU(b *ir.Builder, c Config, x ir.TensorID) ir.TensorID {
	defer b.Scope("mlp")()
	gate := b.MatMul(x, b.Param("w1", c.Hidden, c.FFN))
	up := b.MatMul(x, b.Param("w3", c.Hidden, c.FFN))
	return b.MatMul(b.SwiGLU(gate, up), b.Param("w2", c.FFN, c.Hidden))
}

// rmsNorm is x·rsqrt(mean(x²) + ε)·w over the last dim, with gain w[d]:
// hap's rms_norm op.
func rmsNorm(b *ir.Builder, name string, x ir.TensorID, d int) ir.TensorID {
	defer b.Scope(name)()
	return b.RMSNorm(x, b.ParamInit("w", ir.InitOnes, d), rmsNormEps)
}
