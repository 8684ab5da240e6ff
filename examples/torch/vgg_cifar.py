"""torchvision's VGG-11 at CIFAR-10 shapes (32×32, 10 classes):
`hap import examples/torch/vgg_cifar.py:model`. vgg_small is the same network
with a narrow classifier, the fixture importer/testdata holds."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


def _loss(m, images, labels):
    return F.cross_entropy(m(images), labels, reduction="sum")


def model(batch=32):
    m = torchvision.models.vgg11(num_classes=10)
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _loss


def vgg_small(batch=2):
    m = torchvision.models.vgg11(num_classes=10)
    # The same layers, with a 64-wide classifier instead of 4096.
    m.classifier = nn.Sequential(
        nn.Linear(512 * 7 * 7, 64), nn.ReLU(True), nn.Dropout(0.5),
        nn.Linear(64, 64), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(64, 10))
    return m, (torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))), _loss
