"""Factories for the reference check's tests (torchref_test.go): more of the
importer's table than the examples reach, each against PyTorch in float64."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _loss(m, x, labels):
    return F.cross_entropy(m(x), labels, reduction="sum")


class _Mixed(nn.Module):
    """Pre-LN GELU encoder with a non-default eps, a buffer, mean, tanh,
    sigmoid, sub, split, cat, transposes, scalar mul/div/add."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 24)
        layer = nn.TransformerEncoderLayer(24, 4, 48, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True, layer_norm_eps=1e-6)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.ln = nn.LayerNorm(24, eps=1e-3)
        self.a = nn.Linear(24, 16)
        self.b = nn.Linear(24, 16)
        self.head = nn.Linear(32, 3)
        self.register_buffer("shift", torch.randn(16))

    def forward(self, ids):
        h = self.ln(self.enc(self.emb(ids)))
        m = h.mean(dim=1)
        x = torch.tanh(self.a(m)) - torch.sigmoid(self.b(m)) * 0.5 + self.shift
        u, v = x.split(8, dim=1)
        y = torch.cat([F.relu(u), v / 3.0, u * v, x.transpose(0, 1).t()[:, 8:] + 1.0], dim=1)
        return self.head(y)


def mixed():
    return _Mixed(), (torch.randint(0, 50, (3, 10)), torch.randint(0, 3, (3,))), _loss


def cnn():
    """Strided, padded convs (one without bias), an overlapping max pool, and
    adaptive average pools that shrink unevenly and grow."""
    m = nn.Sequential(nn.Conv2d(3, 8, 5, stride=2, padding=2), nn.ReLU(), nn.MaxPool2d(3, stride=2),
                      nn.Conv2d(8, 6, 3, padding=1, bias=False), nn.Tanh(), nn.AdaptiveAvgPool2d(3),
                      nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(96, 4))
    return m, (torch.randn(2, 3, 23, 23), torch.randint(0, 4, (2,))), _loss


class _Folded(nn.Module):
    """A sinusoidal position table computed inside forward from a buffer
    (arange, outer, sin, cos, cat): constants the exporter folds into one
    state tensor, whose values the reference writes."""

    def __init__(self, d=8, seq=6):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
        self.seq = seq
        self.lin = nn.Linear(d, 3)

    def forward(self, x):
        freqs = torch.outer(torch.arange(self.seq, dtype=self.inv_freq.dtype), self.inv_freq)
        pos = torch.cat([freqs.sin(), freqs.cos()], dim=-1)
        return self.lin(torch.tanh(x + pos))[:, 0]


def folded():
    return _Folded(), (torch.randn(2, 6, 8), torch.randint(0, 3, (2,))), _loss


class _Mobile(nn.Module):
    """A MobileNet-style block: a strided conv, batch norm and hardswish,
    a depthwise conv (groups = channels) with batch norm, a grouped 1×1 conv,
    a hardsigmoid gate, an average pool and global average pooling."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8, eps=1e-3),
                                nn.Hardswish())
        self.pw = nn.Conv2d(8, 12, 1, groups=2)
        self.bn = nn.BatchNorm2d(12, affine=False, momentum=0.3)
        self.gate = nn.Hardsigmoid()
        self.pool = nn.AvgPool2d(3, stride=2, padding=1)
        self.head = nn.Linear(12, 5)

    def forward(self, x):
        h = self.pw(self.dw(self.stem(x)))
        h = self.pool(F.silu(self.bn(h)) * self.gate(h))
        return self.head(h.mean(dim=(2, 3)))


def mobile():
    return _Mobile(), (torch.randn(3, 3, 11, 11), torch.randint(0, 5, (3,))), _loss


class _SwiGLU(nn.Module):
    """A LLaMA-style feed-forward: silu(x·W_gate) ⊙ (x·W_up) · W_down, no
    biases, between two linear layers."""

    def __init__(self, d=12, f=20):
        super().__init__()
        self.inp = nn.Linear(6, d)
        self.gate = nn.Linear(d, f, bias=False)
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        h = self.inp(x)
        h = h + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.out(h)


def swiglu():
    return _SwiGLU(), (torch.randn(5, 6), torch.randint(0, 4, (5,))), _loss


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class _LlamaAttention(nn.Module):
    """Attention as LLaMA's Hugging Face code writes it, with plain torch:
    rotary embeddings on q and k (rotate_half, [S, d] cos/sin buffers),
    grouped-query heads repeated by expand + reshape (repeat_kv), 4-D
    matmuls and an additive mask buffer on the scaled scores — imported as
    rotary ops and one attention op with kv_group and a mask input."""

    def __init__(self, d=16, heads=4, kv=2, seq=6, mask=True, kv_repeat=True):
        super().__init__()
        self.h, self.kv, self.dh = heads, kv, d // heads
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, kv * self.dh, bias=False)
        self.wv = nn.Linear(d, kv * self.dh, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2).double() / self.dh))
        f = torch.outer(torch.arange(seq).double(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos().float())
        self.register_buffer("sin", emb.sin().float())
        self.mask = mask
        # A causal mask and a random additive one: the check sees the mask's
        # values, not only its zeros and −∞s.
        self.register_buffer("bias", torch.triu(torch.full((seq, seq), -1e9), 1) + 0.3 * torch.randn(seq, seq))

    def forward(self, x):
        b, s, d = x.shape
        q = self.wq(x).view(b, s, self.h, self.dh).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv, self.dh).transpose(1, 2)
        q = q * self.cos + _rotate_half(q) * self.sin
        k = k * self.cos + _rotate_half(k) * self.sin
        n = self.h // self.kv
        k = k[:, :, None, :, :].expand(b, self.kv, n, s, self.dh).reshape(b, self.h, s, self.dh)
        v = v[:, :, None, :, :].expand(b, self.kv, n, s, self.dh).reshape(b, self.h, s, self.dh)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.dh)
        if self.mask:
            att = att + self.bias
        y = F.softmax(att, dim=-1) @ v
        return self.wo(y.transpose(1, 2).reshape(b, s, d))


class _LlamaNet(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.layers = nn.ModuleList([_LlamaAttention(**kw), _LlamaAttention(**kw)])
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        for a in self.layers:
            x = x + a(x)
        return self.head(torch.tanh(x)[:, 0])


def llama_attention():
    """Rotary, grouped-query (4 query heads on 2 key/value heads) and
    masked attention, two layers."""
    return _LlamaNet(), (torch.randn(2, 6, 16), torch.randint(0, 3, (2,))), _loss


def rotary_gqa():
    """Rotary and grouped-query attention (4 on 1 key/value head), no mask."""
    return _LlamaNet(kv=1, mask=False), (torch.randn(3, 6, 16), torch.randint(0, 3, (3,))), _loss


class _Arith(nn.Module):
    """The arithmetic of today's models between two linear layers: a
    squeeze-and-excitation scale broadcast over a feature map, a layer
    scale, division by a tensor, exp, log, sqrt, reciprocal, powers,
    var and amax with and without keep-dims, a mean over a middle dim, a
    layer norm without affine parameters and an RMSNorm written out."""

    def __init__(self, d=8):
        super().__init__()
        self.inp = nn.Linear(6, 4 * d)
        self.se = nn.Linear(d, d)
        self.scale = nn.Parameter(torch.rand(d, 1) + 0.5)
        self.rms = nn.Parameter(torch.rand(d) + 0.5)
        self.bare = nn.LayerNorm(d, elementwise_affine=False)
        self.out = nn.Linear(3 * d + 4, 3)

    def forward(self, x):
        n, d = x.shape[0], self.se.in_features
        h = self.inp(x).view(n, d, 4)                        # [N, C, L]
        gate = torch.sigmoid(self.se(h.mean(-1)))            # [N, C]
        h = h * gate.unsqueeze(-1) * self.scale              # SE scale, layer scale
        pos = torch.exp(h) + 1.0
        h = h / pos.sqrt() + torch.log(pos) * pos.reciprocal() - h.pow(3) * 0.1
        v = h.var(-1)                                        # [N, C]
        m = h.amax(dim=(1, 2))                               # [N]
        w = h.var(1, unbiased=False, keepdim=True).squeeze(1)  # [N, L]
        t = h.transpose(1, 2)                                # [N, L, C]
        r = t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * self.rms
        b = self.bare(t).mean(1)                             # [N, C]
        y = torch.cat([v / (1.0 + m.unsqueeze(-1)), r.mean(1), b, w], dim=-1)
        return self.out(y)


def arith():
    return _Arith(), (torch.randn(5, 6), torch.randint(0, 3, (5,))), _loss


class _ClassToken(nn.Module):
    """ViT's front: a patch convolution, a class token expanded over the
    batch and put before the patches, a position embedding, and the
    class token's output to the head."""

    def __init__(self, d=8):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 5, d))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)         # [N, 4, d]
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.ln(torch.relu(h))[:, 0])


def class_token():
    return _ClassToken(), (torch.randn(3, 3, 8, 8), torch.randint(0, 3, (3,))), _loss


class _Masked(nn.Module):
    """Boolean masks from buffers, as GPT-2 and older code write them: a
    causal bool buffer filled with −∞ by masked_fill before softmax, its
    inverse (folded), and torch.where between a tensor and a number on
    either side — imported as masked_fill ops on state masks."""

    def __init__(self, d=8, seq=5, classes=3):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.head = nn.Linear(d, classes)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))
        self.register_buffer("keep", torch.rand(seq, d) > 0.3)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (f(x).view(b, n, 2, d // 2).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = q @ k.transpose(-2, -1) / math.sqrt(d // 2)
        s = s.masked_fill(~self.causal, float("-inf"))  # GPT-2's causal mask: one attention op
        y = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        y = torch.where(self.keep, y, 0.5) + torch.where(self.keep, -1.0, torch.tanh(y))
        return self.head(y[:, 0])


def masked():
    return _Masked(), (torch.randn(3, 5, 8), torch.randint(0, 3, (3,))), _loss


class _Indexing(nn.Module):
    """Indexing by constant positions: index_select by an int64 buffer
    (an embedding lookup into the activation), a literal list of
    positions (slices of its runs, concatenated) and select."""

    def __init__(self, d=6, classes=3):
        super().__init__()
        self.l = nn.Linear(d, d)
        self.head = nn.Linear(9, classes)
        self.register_buffer("pick", torch.tensor([4, 0, 2, 2, 5]))

    def forward(self, x):
        h = torch.tanh(self.l(x))  # [N, S, d]
        a = h.index_select(2, self.pick)  # [N, S, 5]
        b = h[:, :, [1, 2, 3, 0]]  # [N, S, 4]
        y = torch.cat((a, b * a[:, :, :4].sum(-1, keepdim=True)), dim=-1)
        return self.head(y.index_select(1, self.pick[:2])[:, 1] + y[:, 0])


def indexing():
    return _Indexing(), (torch.randn(3, 6, 6), torch.randint(0, 3, (3,))), _loss


class _Gathering(nn.Module):
    """torch.gather by int64 buffers: along dim 1 (more positions than
    the dim holds, so they repeat and the gradient's scatter-add sums) and
    along the last dim of that."""

    def __init__(self, n=3, s=5, d=6, classes=3):
        super().__init__()
        self.l = nn.Linear(d, d)
        self.head = nn.Linear(4, classes)
        g = torch.Generator().manual_seed(68)
        self.register_buffer("rows", torch.randint(0, s, (n, 7, d), generator=g))
        self.register_buffer("cols", torch.randint(0, d, (n, 7, 4), generator=g))

    def forward(self, x):
        h = torch.tanh(self.l(x))  # [N, S, d]
        a = torch.gather(h, 1, self.rows)  # [N, 7, d]
        b = torch.gather(a, -1, self.cols)  # [N, 7, 4]
        return self.head((b * a[:, :, :4]).sum(1) + b[:, 0])


def gathering():
    return _Gathering(), (torch.randn(3, 5, 6), torch.randint(0, 3, (3,))), _loss
