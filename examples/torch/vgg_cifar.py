"""torchvision's VGG-11 at CIFAR-10 shapes (32×32, 10 classes):
`hap import examples/torch/vgg_cifar.py:model` (the trace importer/testdata
holds; it records shapes, not weights, so it is small).

`narrow` is the same network (torchvision's VGG class: the conv stack, the
adaptive 7×7 average pool, the 3-layer classifier with dropout) at a
quarter of the widths (classifier 128 wide), 1.4M parameters, small enough for the float64
reference check: `hap import examples/torch/vgg_cifar.py:narrow --reference DIR`."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.vgg import VGG, make_layers


def _loss(m, images, labels):
    return F.cross_entropy(m(images), labels, reduction="sum")


def model(batch=32):
    m = torchvision.models.vgg11(num_classes=10)
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _loss


def narrow(batch=2, width=16, hidden=128):
    """VGG-11's layout ("A": 8 convs, 5 max-pools) with channels divided
    by 64 // width and a classifier hidden size of hidden."""
    cfg = [c if c == "M" else c * width // 64 for c in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]]
    m = VGG(make_layers(cfg), num_classes=10)
    c = cfg[-2]
    m.classifier = nn.Sequential(
        nn.Linear(c * 7 * 7, hidden), nn.ReLU(True), nn.Dropout(),
        nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(),
        nn.Linear(hidden, 10))
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _loss
