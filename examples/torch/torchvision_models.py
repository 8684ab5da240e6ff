"""torchvision's classifiers as issue 68 lists them, for `hap import`:

    hap import examples/torch/torchvision_models.py:resnet18 -o resnet18.json

ResNets and MobileNet at CIFAR shapes (32×32, 10 classes), ConvNeXt-Tiny
and ViT-B/16 at their 224×224 ImageNet input. Each factory takes a batch;
`hap import` calls it with the default. Nothing here is hap's: the modules
are torchvision's own, in training mode (batch norm uses batch statistics
and updates its running ones)."""
import torch
import torch.nn.functional as F
import torchvision


def _loss(m, images, labels):
    return F.cross_entropy(m(images), labels, reduction="sum")


def _make(m, batch, size, classes):
    return m, (torch.randn(batch, 3, size, size), torch.randint(0, classes, (batch,))), _loss


def resnet18(batch=2):
    return _make(torchvision.models.resnet18(num_classes=10), batch, 32, 10)


def resnet50(batch=2, size=32, classes=10):
    # resnet50:batch=32,size=224,classes=1000 is ImageNet's ResNet-50.
    return _make(torchvision.models.resnet50(num_classes=classes), batch, size, classes)


def mobilenet_v3_small(batch=2):
    return _make(torchvision.models.mobilenet_v3_small(num_classes=10), batch, 32, 10)


def convnext_tiny(batch=2):
    # Stochastic depth off: torchvision's drops whole samples' residual
    # branches at random (a bernoulli of [N, 1, 1, 1]), which hap's dropout,
    # elementwise, is not; hap refuses it naming the module.
    return _make(torchvision.models.convnext_tiny(num_classes=1000, stochastic_depth_prob=0.0), batch, 224, 1000)


def vit_b_16(batch=2):
    return _make(torchvision.models.vit_b_16(num_classes=1000), batch, 224, 1000)


# Small versions for the reference check (hap's float64 CPU step against
# PyTorch's): the same torchvision classes, at CIFAR shapes or narrow.


def convnext_tiny_cifar(batch=2):
    # ConvNeXt-Tiny's full width and depth; 32×32 pools to 1×1 after its
    # four downsamplings (4, 2, 2, 2).
    return _make(torchvision.models.convnext_tiny(num_classes=10, stochastic_depth_prob=0.0), batch, 32, 10)


def resnet50_check(batch=4):
    # ResNet-50 at 64×64 for the reference check. At 32×32 and batch 2 its
    # last stage sees 1×1 maps, so batch norm there normalises each channel
    # over two values; the gradients grow to ~40 and amplify rounding, and
    # hap's and PyTorch's float64 steps differ by 1.8e-4 relative. Four
    # 2×2 maps agree to 1.6e-12, and so does 32×32 at batch 8 (resnet50,
    # batch=8: 2.6e-12; batch 16: 1.9e-12), which the reference test runs.
    return _make(torchvision.models.resnet50(num_classes=10), batch, 64, 10)


def vit_narrow(batch=2):
    # torchvision's VisionTransformer at 32×32 with 8×8 patches (16 and a
    # class token), 2 layers of width 16.
    m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                             hidden_dim=16, mlp_dim=32, num_classes=10)
    return _make(m, batch, 32, 10)
