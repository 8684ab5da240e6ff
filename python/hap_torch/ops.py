"""hap's own operators for PyTorch models: ops a trace cannot express as
ATen ops hap imports.

top2_gate(logits, capacity) is GShard's top-2 gate, the gate of hap's MoE
layer (zoo bert-moe). Written with torch ops it needs top-k, one-hot and a
cumulative sum whose results steer data, which tracing on fake tensors
cannot follow. Here it is one operator, `hap::top2_gate`: PyTorch runs it
(with its gradient) eagerly, the trace records it as one node, and
`hap import` maps it onto hap's top2_gate. The routing rule is hap's
(cpu/moe.go: top2Routing), so hap's step and PyTorch's agree exactly:

    p = softmax(logits) over experts; e1 = argmax p, e2 = argmax over the
    rest (lowest index on ties); first choices take capacity slots in token
    order, then second choices after them; a slot ≥ capacity is dropped.
    combine[t, e, c] = p_e / (p_e1 + p_e2) at each kept (t, e, c),
    dispatch[t, e, c] = 1 there; both 0 elsewhere. Leading dims are groups
    routed on their own.

While a model is traced (trace_ops()), torch.einsum with two operands is
recorded as one `hap::einsum` node rather than the bmm and permutes ATen
decomposes it into, so an MoE's dispatch, expert and combine einsums reach
hap as einsum ops.
"""
import contextlib

import torch

_lib = torch.library.Library("hap", "DEF")
_lib.define("top2_gate(Tensor logits, int capacity) -> (Tensor, Tensor)")
_lib.define("einsum(str equation, Tensor a, Tensor b) -> Tensor")

_torch_einsum = torch.einsum


def _routing(logits, capacity):
    """One-hot first and second choices [G, T, E, C] (kept only) and p."""
    shape = logits.shape
    e = shape[-1]
    flat = logits.reshape(-1, shape[-2], e)
    p = torch.softmax(flat, dim=-1)
    e1 = p.argmax(dim=-1)
    e2 = p.masked_fill(torch.nn.functional.one_hot(e1, e).bool(), float("-inf")).argmax(dim=-1)
    m1 = torch.nn.functional.one_hot(e1, e).to(torch.int64)  # [G, T, E]
    m2 = torch.nn.functional.one_hot(e2, e).to(torch.int64)
    slot1 = torch.cumsum(m1, dim=1) - m1                      # earlier first choices
    fill = torch.clamp(m1.sum(dim=1, keepdim=True), max=capacity)
    slot2 = fill + torch.cumsum(m2, dim=1) - m2               # after them
    pick1 = (slot1 * m1).sum(-1)                              # [G, T]
    pick2 = (slot2 * m2).sum(-1)
    keep1, keep2 = pick1 < capacity, pick2 < capacity
    c = capacity
    oh1 = torch.nn.functional.one_hot(torch.where(keep1, pick1, 0), c) * keep1[..., None]
    oh2 = torch.nn.functional.one_hot(torch.where(keep2, pick2, 0), c) * keep2[..., None]
    d1 = m1[..., None] * oh1[..., None, :]                    # [G, T, E, C]
    d2 = m2[..., None] * oh2[..., None, :]
    return d1, d2, e1, e2


def _combine(logits, d1, d2, e1, e2):
    """combine from logits with the routing fixed: differentiable."""
    shape = logits.shape
    p = torch.softmax(logits.reshape(-1, shape[-2], shape[-1]), dim=-1)
    p1 = p.gather(-1, e1[..., None])[..., 0]
    p2 = p.gather(-1, e2[..., None])[..., 0]
    g1, g2 = p1 / (p1 + p2), p2 / (p1 + p2)
    out = g1[..., None, None] * d1.to(p.dtype) + g2[..., None, None] * d2.to(p.dtype)
    return out.reshape(*shape, -1)


def _top2_cpu(logits, capacity):
    d1, d2, e1, e2 = _routing(logits, capacity)
    combine = _combine(logits, d1, d2, e1, e2)
    dispatch = (d1 + d2).to(logits.dtype).reshape(combine.shape)
    return combine, dispatch


def _top2_meta(logits, capacity):
    s = tuple(logits.shape) + (capacity,)
    return logits.new_empty(s), logits.new_empty(s)


def _einsum_cpu(equation, a, b):
    return _torch_einsum(equation, a, b)


def _einsum_meta(equation, a, b):
    ins, out = equation.split("->")
    sa, sb = ins.split(",")
    size = dict(zip(sa, a.shape))
    size.update(zip(sb, b.shape))
    return a.new_empty([size[ch] for ch in out])


_lib.impl("top2_gate", _top2_cpu, "CPU")
_lib.impl("top2_gate", _top2_meta, "Meta")
_lib.impl("einsum", _einsum_cpu, "CPU")
_lib.impl("einsum", _einsum_meta, "Meta")


class _Top2Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, capacity):
        combine, dispatch = torch.ops.hap.top2_gate(logits, capacity)
        ctx.save_for_backward(logits)
        ctx.capacity = capacity
        ctx.mark_non_differentiable(dispatch)
        return combine, dispatch

    @staticmethod
    def backward(ctx, dcombine, _ddispatch):
        (logits,) = ctx.saved_tensors
        with torch.enable_grad():
            x = logits.detach().requires_grad_(True)
            d1, d2, e1, e2 = _routing(x.detach(), ctx.capacity)
            (dx,) = torch.autograd.grad(_combine(x, d1, d2, e1, e2), x, dcombine)
        return dx, None


def top2_gate(logits, capacity):
    """GShard's top-2 gate over logits [..., tokens, experts]: (combine,
    dispatch), each [..., tokens, experts, capacity]. See the module doc."""
    if capacity < 1:
        raise ValueError(f"top2_gate: capacity {capacity} must be >= 1")
    return _Top2Gate.apply(logits, int(capacity))


def _traced_einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    if len(operands) == 2 and "..." not in eq and "->" in eq:
        return torch.ops.hap.einsum(eq, *operands)
    return _torch_einsum(equation, *operands)


@contextlib.contextmanager
def trace_ops():
    """While tracing: torch.einsum of two operands is one hap::einsum node."""
    torch.einsum = _traced_einsum
    try:
        yield
    finally:
        torch.einsum = _torch_einsum
