"""A LLaMA-style decoder in plain torch.nn, written the way Hugging Face's
LLaMA is: RMSNorm as x · rsqrt(mean(x²) + ε) · w, a SwiGLU MLP
w2(silu(w1·x) ⊙ w3·x), rotary position embeddings on q and k
(rotate_half, cos/sin tables as buffers), grouped-query attention with
key/value heads repeated by expand + reshape (repeat_kv), a causal mask
added to the scaled scores, untied output projection, and the causal-LM
loss (cross-entropy of every position against the next token, labels fed
shifted). hap import turns each layer's rotary pattern into rotary ops and
its attention into one attention op with kv_group and a mask input
(docs/import.md):

    hap import examples/torch/llama.py:tiny -o llama-tiny.json
    hap import examples/torch/llama.py:seven_b -o llama-7b.json

Factories: tiny (CPU-sized, grouped), one_b (TinyLlama-1.1B's shapes: 22
layers, width 2048, 32 heads on 4 key/value heads, FFN 5632), seven_b
(LLaMA-2-7B's: 32 layers, width 4096, 32 heads, FFN 11008, vocabulary
32000), and attention_block (one layer's attention alone, for the
importer's fixture). The zoo's llama, llama-7b and llama-tiny are the same
models built by hap (models/llama.go).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def repeat_kv(x, n):
    b, kv, s, d = x.shape
    if n == 1:
        return x
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads, seq, theta=10000.0):
        super().__init__()
        self.h, self.kv, self.dh = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, heads * self.dh, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(heads * self.dh, d, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, self.dh, 2).float() / self.dh))
        freqs = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1), persistent=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k, v = repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dh) + self.mask
        y = F.softmax(scores, dim=-1) @ v
        return self.o_proj(y.transpose(1, 2).reshape(b, s, self.h * self.dh))


class MLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn, seq):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = Attention(d, heads, kv_heads, seq)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, ffn)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LLaMA(nn.Module):
    def __init__(self, vocab, d, heads, kv_heads, ffn, layers, seq):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, heads, kv_heads, ffn, seq) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for blk in self.layers:
            x = blk(x)
        return self.lm_head(self.norm(x))


def causal_lm_loss(m, tokens, labels):
    logits = m(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="sum")


def model(batch=2, seq=8, vocab=50, d=16, heads=4, kv_heads=2, ffn=24, layers=2):
    m = LLaMA(vocab, d, heads, kv_heads, ffn, layers, seq)
    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch, seq))
    return m, (tokens, labels), causal_lm_loss


def tiny(batch=4):
    """The zoo's llama-tiny: 2 layers, width 16, 4 heads on 2 key/value heads."""
    return model(batch=batch)


def one_b(batch=1, seq=2048):
    """TinyLlama-1.1B's shapes (the zoo's llama), 1.10 B parameters."""
    return model(batch=batch, seq=seq, vocab=32000, d=2048, heads=32, kv_heads=4, ffn=5632, layers=22)


def seven_b(batch=1, seq=4096):
    """LLaMA-2-7B's shapes (the zoo's llama-7b), 6.74 B parameters; on fake
    tensors its weights are never allocated."""
    return model(batch=batch, seq=seq, vocab=32000, d=4096, heads=32, kv_heads=32, ffn=11008, layers=32)


class _AttentionOnly(nn.Module):
    def __init__(self, d=16, heads=4, kv_heads=2, seq=6, classes=3):
        super().__init__()
        self.attn = Attention(d, heads, kv_heads, seq)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(torch.tanh(x + self.attn(x))[:, 0])


def attention_block():
    """One layer's attention (rotary, 4 query heads on 2 key/value heads,
    causal mask) without the norms and MLP, for the importer's fixture."""
    m = _AttentionOnly()
    return m, (torch.randn(2, 6, 16), torch.randint(0, 3, (2,))), lambda m, x, y: F.cross_entropy(m(x), y, reduction="sum")
