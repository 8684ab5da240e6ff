"""Attention as Hugging Face's and nanoGPT's models write it: one packed
q/k/v projection split in three, heads as a fourth dimension, and
softmax(q @ kᵀ · s) @ v with 4-D matmuls. hap import recognises the chain
and imports one attention op per layer (docs/import.md):

    hap import examples/torch/matmul_attention.py:model -o attn.json

`selected` picks q, k and v apart as torch 2.x's nn.MultiheadAttention does
(unflatten to (3, d), move the 3 to the front, index it); it imports to the
same graph.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, d, heads, select=False):
        super().__init__()
        self.heads = heads
        self.select = select
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        if self.select:
            p = self.c_attn(x).unflatten(-1, (3, d)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
            q, k, v = p[0], p[1], p[2]
        else:
            q, k, v = self.c_attn(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Net(nn.Module):
    def __init__(self, d, heads, layers, classes, select=False):
        super().__init__()
        self.h = nn.ModuleList(SelfAttention(d, heads, select) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        for blk in self.h:
            x = x + blk(x)
        return self.head(self.ln(x)[:, 0])


def model(batch=2, seq=4, d=16, heads=2, layers=2, classes=3, select=False):
    m = Net(d, heads, layers, classes, select)
    x = torch.randn(batch, seq, d)
    y = torch.randint(0, classes, (batch,))
    return m, (x, y), lambda m, x, y: F.cross_entropy(m(x), y, reduction="sum")


def selected():
    return model(select=True)
