"""The HAP paper's models (EuroSys 2024) in PyTorch, built to match hap's
zoo (models/zoo.go) layer for layer, so that `hap import` of these and the
zoo's own graphs can be compared (bench/import.md):

    hap import examples/torch/paper_models.py:vgg19 -o vgg19.json
    hap import examples/torch/paper_models.py:vit -o vit.json
    hap import examples/torch/paper_models.py:bert_base -o bert-base.json
    hap import examples/torch/paper_models.py:bert_moe -o bert-moe.json

Each factory takes the global batch, defaulting to the zoo's; the *_tiny
factories are the zoo's *-tiny shapes (for `hap verify` on a CPU).
Losses are summed over samples (hap splits the batch across devices).

BERT-MoE's gate is hap_torch.top2_gate (python/hap_torch), one operator
PyTorch runs with its gradient and hap imports as its own top2_gate: the
GShard gate written with torch ops steers data by top-k and cumsum results,
which tracing on fake tensors cannot follow.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import hap_torch


def _ce(m, images, labels):
    return F.cross_entropy(m(images), labels, reduction="sum")


# ---- VGG19 (zoo vgg19 / vgg19-tiny) ----

VGG19_WIDTHS = [64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0]
VGG19_TINY_WIDTHS = [4, 4, 0, 8, 8, 0, 8, 8, 8, 8, 0, 16, 16, 16, 16, 0, 16, 16, 16, 16, 0]


class VGG(nn.Module):
    """torchvision's VGG with the pool side and classifier width as
    parameters (torchvision fixes them at 7 and 4096): 3×3 convolutions with
    bias and ReLU, 2×2 max-pools (0 in widths), adaptive average pool,
    then Linear-ReLU-Dropout twice and the classifier."""

    def __init__(self, widths, pool, fc, classes, dropout=0.5):
        super().__init__()
        layers, ch = [], 3
        for w in widths:
            if w == 0:
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(ch, w, 3, padding=1), nn.ReLU(inplace=True)]
                ch = w
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool))
        self.classifier = nn.Sequential(
            nn.Linear(ch * pool * pool, fc), nn.ReLU(True), nn.Dropout(dropout),
            nn.Linear(fc, fc), nn.ReLU(True), nn.Dropout(dropout),
            nn.Linear(fc, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def vgg19(batch=32):
    """torchvision.models.vgg19(num_classes=10) at CIFAR-10 shapes: the
    zoo's vgg19 (pool 7, FC 4096, dropout 0.5)."""
    m = torchvision.models.vgg19(num_classes=10)
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _ce


def vgg19_tiny(batch=4):
    m = VGG(VGG19_TINY_WIDTHS, pool=2, fc=32, classes=10)
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _ce


# ---- ViT (zoo vit / vit-tiny) ----

class Block(nn.Module):
    """A transformer block as the zoo's and as BERT's and ViT's reference
    code write it: separate query, key and value projections (the zoo's
    three matmuls; nn.MultiheadAttention's packed in_proj would import as
    one matmul and a split, which shards worse: bench/import.md), softmax
    attention without dropout on its probabilities, dropout after attention
    and after the FFN, exact GELU; pre- or post-LN."""

    def __init__(self, d, heads, ffn, dropout, norm_first):
        super().__init__()
        self.heads, self.norm_first = heads, norm_first
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.drop1, self.drop2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def attend(self, x):
        b, s, d = x.shape
        h = self.heads
        # Heads folded into the batch for bmm, the scale on q, as
        # nn.MultiheadAttention computes it: the importer's attention
        # pattern (a 4-D matmul traces through expand and view instead).
        q, k, v = (p(x).reshape(b, s, h, d // h).transpose(1, 2).reshape(b * h, s, d // h)
                   for p in (self.q, self.k, self.v))
        probs = torch.softmax(torch.bmm(q / math.sqrt(d // h), k.transpose(1, 2)), dim=-1)
        out = torch.bmm(probs, v).reshape(b, h, s, d // h).transpose(1, 2).reshape(b, s, d)
        return self.drop1(self.o(out))

    def mlp(self, x):
        return self.drop2(self.ff2(F.gelu(self.ff1(x))))

    def forward(self, x):
        if self.norm_first:
            x = x + self.attend(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attend(x))
        return self.ln2(x + self.mlp(x))


def _layer(kind, d, heads, ffn, dropout, norm_first):
    """One encoder layer: PyTorch's own nn.TransformerEncoderLayer (packed
    q/k/v, which the importer splits back into three projections; dropout on
    the attention probabilities, which it drops), or Block."""
    if kind == "torch":
        return nn.TransformerEncoderLayer(d, heads, ffn, dropout, activation="gelu",
                                          batch_first=True, norm_first=norm_first)
    return Block(d, heads, ffn, dropout, norm_first)


class ViT(nn.Module):
    """Pre-LN ViT: a strided convolution embeds the patches, a class token
    is prepended, a learned position table added; the class token's final
    (layer-normed) state is classified. Exact GELU; no dropout (the zoo's
    vit has none)."""

    def __init__(self, image, patch, d, heads, ffn, layers, classes, dropout=0.0, layer="torch"):
        super().__init__()
        n = (image // patch) ** 2
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, d))
        self.pos = nn.Parameter(torch.randn(n + 1, d))
        self.encoder = nn.Sequential(*(_layer(layer, d, heads, ffn, dropout, True) for _ in range(layers)))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)  # [B, n, d]
        # The class token broadcast over the batch without expand: zeros
        # shaped [B, 1, d] plus the token (what the zoo builds).
        cls = x[:, :1] * 0 + self.cls
        x = torch.cat([cls, x], dim=1) + self.pos
        x = self.ln(self.encoder(x))
        return self.head(x[:, 0])


def vit(batch=32, layers=12, d=768, heads=12, ffn=3072, image=32, patch=4, classes=10, layer="torch"):
    m = ViT(image, patch, d, heads, ffn, layers, classes, layer=layer)
    return m, (torch.randn(batch, 3, image, image), torch.randint(0, classes, (batch,))), _ce


def vit_tiny(batch=4, layer="torch"):
    return vit(batch=batch, layers=2, d=16, heads=2, ffn=32, image=8, patch=4, layer=layer)


def vit_block(batch=32):
    """vit with Block's separate projections instead of PyTorch's layer."""
    return vit(batch=batch, layer="block")


# ---- BERT-Base (zoo bert-base / bert-base-tiny) ----

class BERT(nn.Module):
    """Post-LN BERT as the zoo's: word embedding plus a learned position
    table, layer norm, dropout; post-LN blocks with exact GELU; a masked-LM
    decoder (a linear layer to the vocabulary, untied) on every token."""

    def __init__(self, vocab, seq, d, heads, ffn, layers, dropout=0.1, layer="torch"):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d))
        self.ln = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Sequential(*(_layer(layer, d, heads, ffn, dropout, False) for _ in range(layers)))
        self.decoder = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.drop(self.ln(self.word(tokens) + self.pos))
        x = self.encoder(x)
        return self.decoder(x.reshape(-1, x.shape[-1]))


def _mlm(m, tokens, labels):
    return F.cross_entropy(m(tokens), labels, reduction="sum")


def bert_base(batch=32, layers=12, d=768, heads=12, ffn=3072, seq=128, vocab=33278, dropout=0.1, layer="torch"):
    m = BERT(vocab, seq, d, heads, ffn, layers, dropout, layer)
    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch * seq,))  # one per token, as the zoo's [B·S] labels
    return m, (tokens, labels), _mlm


def bert_base_tiny(batch=4, layer="torch"):
    return bert_base(batch=batch, layers=2, d=16, heads=2, ffn=32, seq=8, vocab=50, layer=layer)


def bert_base_block(batch=32):
    """bert_base with Block's separate projections instead of PyTorch's layer."""
    return bert_base(batch=batch, layer="block")


# ---- BERT-MoE (zoo bert-moe / bert-moe-tiny) ----

class MoE(nn.Module):
    """GShard's top-2 mixture of experts as the zoo's moe: tokens gated in
    groups of one sequence, expert capacity C = ceil(1.25 * 2 * S / E),
    experts of two linears with exact GELU, dense dispatch and combine
    einsums. The gate is hap_torch.top2_gate: written with torch ops it
    needs top-k, one-hot and cumsum steering data, which a trace cannot
    follow (hap_torch/ops.py)."""

    def __init__(self, d, ffn, experts, capacity):
        super().__init__()
        self.capacity = capacity
        self.gate = nn.Linear(d, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, d, ffn) / math.sqrt(d))
        self.b1 = nn.Parameter(torch.zeros(experts, ffn))
        self.w2 = nn.Parameter(torch.randn(experts, ffn, d) / math.sqrt(ffn))
        self.b2 = nn.Parameter(torch.zeros(experts, d))

    def forward(self, x):  # x [G, S, d]
        combine, dispatch = hap_torch.top2_gate(self.gate(x), self.capacity)
        xe = torch.einsum("gsec,gsd->egcd", dispatch, x)
        h = F.gelu(torch.einsum("egcd,edf->egcf", xe, self.w1) + self.b1[:, None, None, :])
        ye = torch.einsum("egcf,efd->egcd", h, self.w2) + self.b2[:, None, None, :]
        return torch.einsum("gsec,egcd->gsd", combine, ye)


class MoEBlock(Block):
    """Block with the feed-forward network replaced by MoE."""

    def __init__(self, d, heads, ffn, dropout, experts, capacity):
        super().__init__(d, heads, ffn, dropout, False)
        del self.ff1, self.ff2
        self.moe = MoE(d, ffn, experts, capacity)

    def mlp(self, x):
        return self.drop2(self.moe(x))


def bert_moe(batch=32, layers=12, d=768, heads=12, ffn=3072, seq=128, vocab=33278, experts=16,
             capacity_factor=1.25, dropout=0.1):
    """BERT-Base with every second layer's FFN a top-2 MoE (the zoo's
    bert-moe); the layers are Block, as the zoo's are."""
    m = BERT(vocab, seq, d, heads, ffn, layers, dropout, layer="block")
    capacity = math.ceil(capacity_factor * 2 * seq / experts)
    for i in range(1, layers, 2):
        m.encoder[i] = MoEBlock(d, heads, ffn, dropout, experts, capacity)
    tokens = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, vocab, (batch * seq,))
    return m, (tokens, labels), _mlm


def bert_moe_tiny(batch=4):
    return bert_moe(batch=batch, layers=2, d=16, heads=2, ffn=32, seq=8, vocab=50, experts=4)
