"""A tiny MLP classifier: `hap import examples/torch/mlp.py:model`."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def model(batch=8):
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))
    x = torch.randn(batch, 16)
    y = torch.randint(0, 4, (batch,))

    def loss(m, x, y):
        return F.cross_entropy(m(x), y, reduction="sum")

    return m, (x, y), loss
