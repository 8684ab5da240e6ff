"""hap_torch: trace a PyTorch training program into hap's raw "hap.aten" JSON.

    import hap_torch
    hap_torch.export(model, inputs, loss, "model.aten.json")

loss(model, *inputs) must return a scalar summed over the samples. The
forward pass and the loss are traced at the ATen level with make_fx on fake
tensors (no weights are allocated); `hap import` turns the raw file into hap's
graph JSON. The format is described in docs/import.md.
"""

from .ops import top2_gate  # noqa: F401  (registers hap::top2_gate and hap::einsum)
from .export import export, export_factory, export_reference, write_reference, trace, FORMAT, VERSION  # noqa: F401
