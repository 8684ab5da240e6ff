"""A post-LN nn.TransformerEncoder classifier over token ids:
`hap import examples/torch/transformer_encoder.py:model`. vit_base is a
ViT-Base-sized encoder (12 layers, d=768, 12 heads, 197 tokens)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, vocab, d, heads, ff, layers, classes, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=dropout, activation="relu",
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d, classes)

    def forward(self, ids):
        h = self.encoder(self.embed(ids))
        return self.head(h.sum(dim=1))


def _loss(m, ids, labels):
    return F.cross_entropy(m(ids), labels, reduction="sum")


def model(batch=4, seq=16, vocab=100, d=32, heads=4, ff=64, layers=3, classes=5):
    m = Classifier(vocab, d, heads, ff, layers, classes)
    ids = torch.randint(0, vocab, (batch, seq))
    labels = torch.randint(0, classes, (batch,))
    return m, (ids, labels), _loss


def vit_base(batch=8):
    return model(batch=batch, seq=197, vocab=1000, d=768, heads=12, ff=3072, layers=12, classes=1000)


def seven_b(batch=64):
    """A 7B-parameter stack at decoder shapes (32 layers, width 4096, 32
    heads, FFN 16384, sequence 2048, vocabulary 32000), for timing the
    trace: on fake tensors its 27 GB of float32 weights are never allocated.
    (No causal mask: nn.TransformerEncoderLayer's attn_mask is not imported.)
    The batch, one sample per GPU of paper-64, is what `hap plan` plans."""
    return model(batch=batch, seq=2048, vocab=32000, d=4096, heads=32, ff=16384, layers=32, classes=32000)
