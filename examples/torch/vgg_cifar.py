"""torchvision's VGG-11 at CIFAR-10 shapes (32×32, 10 classes):
`hap import examples/torch/vgg_cifar.py:model` (the trace importer/testdata
holds; it records shapes, not weights, so it is small)."""
import torch
import torch.nn.functional as F
import torchvision


def _loss(m, images, labels):
    return F.cross_entropy(m(images), labels, reduction="sum")


def model(batch=32):
    m = torchvision.models.vgg11(num_classes=10)
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _loss

