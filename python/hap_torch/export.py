"""Trace (model, inputs, loss) with make_fx on fake tensors; write hap.aten JSON.

Works on torch 1.13 and is written for 2.x: version-specific APIs are looked
up defensively. The only job here is recording; every decision about what an
ATen op means is made by hap's Go importer (importer/table.go).
"""

import ast
import contextlib
import functools
import importlib.util
import inspect
import json
import math
import operator
import os
import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .ops import trace_ops

try:  # torch >= 1.13
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
except ImportError as e:  # pragma: no cover
    raise ImportError("hap_torch needs torch >= 1.13 (FakeTensorMode)") from e

FORMAT = "hap.aten"
VERSION = 1


def _factory_args(spec, text):
    """Reads FACTORY's keyword arguments, "key=value,key=value" with Python
    literals for values (batch=64,seq=128), as the zoo's --model name:key=val."""
    kw = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ValueError(f"{spec!r}: argument {part!r}: want key=value")
        try:
            kw[key] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"{spec!r}: argument {key}={value!r}: want a Python literal (a number, string, bool)") from None
    return kw


def _load_factory(spec):
    """FILE.py:FACTORY or FILE.py:FACTORY:key=value,... → the factory (its
    arguments bound) and the graph's name."""
    i = spec.find(".py:")
    if i < 0:
        raise ValueError(f"{spec!r}: want FILE.py:FACTORY")
    path, name = spec[:i + 3], spec[i + 4:]
    kw = {}
    if ":" in name:
        name, args = name.split(":", 1)
        kw = _factory_args(spec, args)
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    sys.path.insert(0, os.path.dirname(path))
    mspec = importlib.util.spec_from_file_location("hap_user_model", path)
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise AttributeError(f"{path} has no callable {name!r}")
    if kw:
        fn = functools.partial(fn, **kw)
    stem = os.path.splitext(os.path.basename(path))[0]
    return fn, stem if name == "model" else f"{stem}.{name}"


def _fake_mode():
    try:
        return FakeTensorMode(allow_meta=True)
    except TypeError:  # newer signatures
        return FakeTensorMode()


def export_factory(spec, path):
    """Call FILE.py:FACTORY under FakeTensorMode (so no weights are allocated),
    trace what it returns and write the raw JSON to path."""
    fn, name = _load_factory(spec)
    mode = _fake_mode()
    with mode:
        got = fn()
    if not (isinstance(got, (tuple, list)) and len(got) == 3):
        raise TypeError(f"{name}() must return (model, inputs, loss), got {type(got).__name__}")
    model, inputs, loss = got
    doc = trace(model, inputs, loss, name=name, mode=mode)
    _write(doc, path)


def export(model, inputs, loss, path, name=None):
    """Trace loss(model, *inputs) and write hap.aten JSON to path. Real
    parameters and inputs are replaced by fake copies for the trace."""
    doc = trace(model, inputs, loss, name=name)
    _write(doc, path)


def _write(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"), allow_nan=False)
        f.write("\n")


def _dtype(dt):
    return str(dt).replace("torch.", "")


def _spec(v):
    if isinstance(v, torch.Tensor):
        return {"dtype": _dtype(v.dtype), "shape": [int(d) for d in v.shape]}
    return None


def _module_graph():
    """The fx graph make_fx is building, found through the dispatch modes."""
    modes = []
    try:
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
        modes += list(_get_current_dispatch_mode_stack())
    except ImportError:
        pass
    get = getattr(torch._C, "_get_dispatch_mode", None)
    key = getattr(getattr(torch._C, "_TorchDispatchModeKey", None), "PROXY", None)
    if get is not None and key is not None:
        modes.append(get(key))
    for m in modes:
        g = getattr(getattr(m, "tracer", None), "graph", None)
        if g is not None:
            return g
    return None


class _ModulePaths:
    """Forward pre/post hooks keep a stack of module paths; every fx node
    created while a module runs is tagged with the innermost path."""

    def __init__(self, model):
        self.model = model
        self.stack = [""]
        self.graph = None
        self.last = None
        self.handles = []

    def __enter__(self):
        for path, m in self.model.named_modules():
            self.handles.append(m.register_forward_pre_hook(self._pre(path)))
            self.handles.append(m.register_forward_hook(self._post()))
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return False

    def start(self):
        self.graph = _module_graph()
        self.last = getattr(self.graph, "_root", None)

    def flush(self):
        if self.graph is None or self.last is None:
            return
        root, n = self.graph._root, self.last.next
        while n is not root:
            n.meta.setdefault("hap_module", self.stack[-1])
            self.last, n = n, n.next

    def _pre(self, path):
        def hook(mod, args):
            self.flush()
            self.stack.append(path)
        return hook

    def _post(self):
        def hook(mod, args, out):
            self.flush()
            if len(self.stack) > 1:
                self.stack.pop()
        return hook


def _arg(a):
    if isinstance(a, torch.fx.Node):
        return a  # resolved by the caller
    if isinstance(a, (list, tuple)):
        return [_arg(x) for x in a]
    if isinstance(a, bool) or a is None or isinstance(a, (int, str)):
        return a
    if isinstance(a, float):
        if math.isinf(a) or math.isnan(a):
            return {"float": str(a)}
        return a
    if isinstance(a, torch.dtype):
        return {"dtype": _dtype(a)}
    return {"enum": str(a)}


def _with_defaults(op, args, kwargs):
    """Every positional argument of op's schema, the defaults fx leaves out
    filled in; keyword-only ones present or with a default go to kwargs."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return args, kwargs
    out = []
    for i, a in enumerate(schema.arguments):
        has_def = a.has_default_value() if hasattr(a, "has_default_value") else a.default_value is not None
        if a.kwarg_only:
            if a.name not in kwargs and has_def:
                kwargs[a.name] = a.default_value
            continue
        if i < len(args):
            out.append(args[i])
        elif a.name in kwargs:
            out.append(kwargs.pop(a.name))
        elif has_def:
            out.append(a.default_value)
        else:
            break
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return out, kwargs


def _loss_arg_names(loss, n):
    try:
        ps = list(inspect.signature(loss).parameters.values())[1:]
        names = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    if len(names) < n:
        names = [f"input{i}" for i in range(n)]
    return names[:n]


def trace(model, inputs, loss, name=None, mode=None):
    """Trace loss(model, *inputs) into the hap.aten document (a dict)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    gm, leaves, _ = _trace_graph(model, inputs, loss, mode or _fake_mode())
    return _document(gm, leaves, name or type(model).__name__)


def _trace_graph(model, inputs, loss, mode):
    """make_fx's graph of loss(model, *inputs), its placeholders' (kind,
    name) and the tensors it was traced with. mode is a FakeTensorMode, or
    None to trace the real tensors as they are."""
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    params = list(model.named_parameters())
    buffers = list(model.named_buffers())
    fake = {}

    def fakeify(t):
        """t as a fake tensor of mode: ours as is; another mode's (copy.deepcopy
        of a fake module makes those) or a real one replaced by a fresh fake."""
        if isinstance(t, FakeTensor) and getattr(t, "fake_mode", None) is mode:
            return t
        if id(t) not in fake:
            if isinstance(t, FakeTensor):
                with mode:
                    f = torch.empty(t.shape, dtype=t.dtype)
            else:
                f = mode.from_tensor(t.detach())
            if isinstance(t, torch.nn.Parameter):
                f = torch.nn.Parameter(f, requires_grad=t.requires_grad)
            fake[id(t)] = f
        return fake[id(t)]

    swap = {}
    if mode is not None:
        swap = {n: fakeify(t) for n, t in params + buffers}
        swap = {n: t for n, t in swap.items() if t is not dict(params + buffers)[n]}
        inputs = tuple(fakeify(x) if isinstance(x, torch.Tensor) else x for x in inputs)
    ptensors = [swap.get(n, p) for n, p in params]
    btensors = [swap.get(n, b) for n, b in buffers]
    tinputs = [x for x in inputs if isinstance(x, torch.Tensor)]
    in_names = _loss_arg_names(loss, len(inputs))
    leaves = ([("param", n) for n, _ in params] + [("buffer", n) for n, _ in buffers]
              + [("input", in_names[i]) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)])
    flat = ptensors + btensors + tinputs
    paths = _ModulePaths(model)

    def reparam():
        if not swap:
            return contextlib.nullcontext()
        from torch.nn.utils import stateless
        return stateless._reparametrize_module(model, swap)

    def f(*args):
        paths.start()
        with reparam():
            out = loss(model, *inputs)
        paths.flush()
        return out

    with (mode or contextlib.nullcontext()), paths, trace_ops():
        gm = make_fx(f)(*flat)
    return gm, leaves, flat


# ---- constants computed from buffers ----

# Ops whose results are views or copies of their input: a buffer read
# through them alone stays a read of the buffer, not a folded constant.
_VIEWS = {"slice", "select", "view", "reshape", "_reshape_alias", "_unsafe_view", "unsqueeze", "squeeze",
          "expand", "t", "transpose", "permute", "alias", "detach", "clone", "lift_fresh_copy", "getitem"}
_RANDOM = ("bernoulli", "rand", "dropout", "normal", "uniform", "multinomial")


def _op_base(n):
    """aten.slice.Tensor -> "slice"; operator.getitem -> "getitem"."""
    if n.target is operator.getitem:
        return "getitem"
    parts = str(n.target).split(".")
    return parts[1] if len(parts) >= 3 else parts[-1]


def _constants(gm, leaves):
    """The fx nodes whose values depend on buffers and constants alone (no
    parameter, input or random number), and among them those to fold: each
    read by a node that is not constant, and computed by more than views."""
    const, computed = set(), set()
    i = 0
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if leaves[i][0] == "buffer":
                const.add(n)
            i += 1
        elif n.op == "get_attr":
            const.add(n)
        elif n.op == "call_function":
            base = _op_base(n)
            if base.endswith("_") or any(r in base for r in _RANDOM):
                continue  # in-place (a buffer updated by the step) or random
            if all(a in const for a in n.all_input_nodes):
                const.add(n)
                if base not in _VIEWS or any(a in computed for a in n.all_input_nodes):
                    computed.add(n)
    fold = [n for n in gm.graph.nodes if n in computed and n.op == "call_function"
            and any(u not in const for u in n.users) and _numbers_value(n) is None]
    return const, fold


# A constant computed from Python numbers alone (torch.where(m, x, 0.5)
# traces a scalar_tensor) is recorded by value, as a tensor constant, when
# it has one element: the importer reads those as numbers. Larger ones
# (an arange of positions) stay folded buffers, fed as state tensors.
_NUMBERS_MAX = 1


def _numbers_value(n):
    """n's value when n is computed from Python numbers alone by a few
    small ops (no placeholder, attribute or random number), else None."""
    def ev(m, depth):
        if not isinstance(m, torch.fx.Node):
            return m
        if m.op != "call_function" or depth > 8 or _op_base(m).endswith("_") or \
                any(r in _op_base(m) for r in _RANDOM):
            raise LookupError
        args = torch.fx.node.map_arg(m.args, lambda a: ev(a, depth + 1))
        kwargs = torch.fx.node.map_arg(m.kwargs, lambda a: ev(a, depth + 1))
        kwargs = {k: (torch.device("cpu") if k == "device" else v) for k, v in kwargs.items()}
        return m.target(*args, **kwargs)
    val = n.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.numel() > _NUMBERS_MAX:
        return None
    try:
        v = ev(n, 0)  # outside the trace's fake mode: real, tiny tensors
    except LookupError:
        return None
    return v if isinstance(v, torch.Tensor) else None


def _cone(n, const):
    """The distinct ops (aten.cos, ...) of the constants n is computed from."""
    seen, ops, todo = set(), [], [n]
    while todo:
        m = todo.pop()
        if m in seen or m.op != "call_function":
            continue
        seen.add(m)
        if _op_base(m) not in _VIEWS and str(m.target) not in ops:
            ops.append(str(m.target))
        todo.extend(a for a in m.all_input_nodes if a in const)
    return sorted(ops)


def _folded_names(fold):
    """The buffer names folded constants take: "<module>.folded<k>", k
    counting them in graph order. The reference's trace (real, float64,
    dropout off) finds the same constants in the same order, whatever its
    node names: neither dtype nor dropout changes what is constant."""
    names = {}
    for k, n in enumerate(fold):
        module = n.meta.get("hap_module", "")
        stack = n.meta.get("nn_module_stack")
        if stack:
            path = list(stack.values())[-1]
            module = path[0] if isinstance(path, tuple) else str(path)
        names[n] = f"{module}.folded{k}" if module else f"folded{k}"
    return names


def folded_values(model, inputs, loss):
    """{buffer name: value} of the constants trace folds, computed from
    model's real buffers."""
    gm, leaves, flat = _trace_graph(model, inputs, loss, None)
    _, fold = _constants(gm, leaves)
    want = {n.name: name for n, name in _folded_names(fold).items()}
    vals = {}

    class grab(torch.fx.Interpreter):
        def run_node(self, n):
            v = super().run_node(n)
            if n.name in want:
                vals[want[n.name]] = v
            return v

    if want:
        with torch.no_grad(), trace_ops():
            grab(gm).run(*flat)
    return vals


def _document(gm, leaves, name):
    refs = {}  # fx node -> tensor name in the document
    placeholders, nodes, out = [], [], None
    getitems = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is operator.getitem:
            getitems.setdefault(n.args[0], []).append(n)

    def ref(a):
        if isinstance(a, torch.fx.Node):
            if a not in refs:
                raise ValueError(f"node {a.name} is used before it is defined")
            return {"t": refs[a]}
        if isinstance(a, list):
            return [ref(x) for x in a]
        return a

    const, fold = _constants(gm, leaves)
    fold = _folded_names(fold)
    i = 0
    for n in gm.graph.nodes:
        if n in fold:  # computed from buffers alone: one new buffer
            refs[n] = fold[n]
            d = {"name": refs[n], "kind": "buffer", "folded": _cone(n, const)}
            d.update(_spec(n.meta.get("val")) or {})
            placeholders.append(d)
            continue
        if n in const and n.op == "call_function" and all(u in const for u in n.users):
            continue  # only constants read it: folded into a later one
        if n in const and n.op == "call_function" and (v := _numbers_value(n)) is not None:
            refs[n] = n.name  # computed from numbers alone: recorded by value
            d = {"name": n.name, "kind": "constant"}
            d.update(_spec(v) or {})
            d["value"] = v.detach().reshape(-1).double().tolist()
            placeholders.append(d)
            continue
        if n.op == "placeholder":
            kind, tname = leaves[i]
            i += 1
            refs[n] = tname
            d = {"name": tname, "kind": kind}
            d.update(_spec(n.meta.get("val")) or {})
            placeholders.append(d)
        elif n.op == "get_attr":
            v = getattr(gm, n.target)
            refs[n] = n.name
            d = {"name": n.name, "kind": "constant"}
            d.update(_spec(v) or {})
            if isinstance(v, torch.Tensor) and not isinstance(v, FakeTensor) and v.numel() <= 64 and v.device.type != "meta":
                d["value"] = v.detach().cpu().reshape(-1).tolist()
            placeholders.append(d)
        elif n.op == "call_function" and n.target is operator.getitem:
            parent, idx = n.args
            refs[n] = f"{refs[parent]}#{idx}"
        elif n.op == "call_function":
            refs[n] = n.name
            val = n.meta.get("val")
            if isinstance(val, torch.Tensor):
                outs = [_spec(val)]
            elif n in getitems:
                k = max(g.args[1] for g in getitems[n]) + 1
                outs = [None] * k
                for g in getitems[n]:
                    outs[g.args[1]] = _spec(g.meta.get("val"))
            elif isinstance(val, (list, tuple)):
                outs = [_spec(v) for v in val]
            else:
                outs = []
            args, kwargs = _with_defaults(n.target, list(n.args), dict(n.kwargs))
            d = {"name": n.name, "op": str(n.target),
                 "args": ref(_arg(args)), "outputs": outs}
            if kwargs:
                d["kwargs"] = {k: ref(_arg(v)) for k, v in kwargs.items()}
            stack = n.meta.get("nn_module_stack")
            if stack:  # torch 2.x records it itself
                path = list(stack.values())[-1]
                d["module"] = path[0] if isinstance(path, tuple) else str(path)
            else:
                d["module"] = n.meta.get("hap_module", "")
            nodes.append(d)
        elif n.op == "output":
            o = n.args[0]
            while isinstance(o, (list, tuple)) and len(o) == 1:
                o = o[0]
            if not isinstance(o, torch.fx.Node):
                raise TypeError("loss(model, *inputs) must return one tensor")
            out = refs[o]
            val = o.meta.get("val")
            if isinstance(val, torch.Tensor) and val.dim() != 0:
                raise ValueError(f"loss must be a scalar, got shape {list(val.shape)}")
        else:
            raise ValueError(f"unexpected fx node {n.op} {n.target}")
    return {"format": FORMAT, "version": VERSION, "name": name,
            "torch": torch.__version__, "placeholders": placeholders,
            "nodes": nodes, "loss": out}


# ---- the reference check (hap verify --against-torch) ----

REF_FORMAT = "hap.reference"
REF_VERSION = 1
REF_MANIFEST = "manifest.json"


def _neutralise_dropout(model):
    """Make every dropout of model the identity while it stays in training
    mode: nn.Dropout* modules get p = 0, nn.MultiheadAttention its attention
    dropout 0. Returns the paths of the modules changed. (A functional
    F.dropout with a literal p inside forward is out of reach.)"""
    changed = []
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            if m.p != 0:
                m.p = 0.0
                changed.append(path)
        elif isinstance(m, torch.nn.MultiheadAttention) and m.dropout != 0:
            m.dropout = 0.0
            changed.append(path)
    return changed


def _write_tensor(outdir, role, name, t, entries):
    t = t.detach().cpu().contiguous()
    if t.is_floating_point() or t.dtype == torch.bool:  # a bool mask: 0s and 1s, as hap imports it
        t, dt = t.to(torch.float64), "float64"
    elif t.dtype == torch.int64 or t.dtype == torch.int32:
        t, dt = t.to(torch.int64), "int64"
    else:
        raise TypeError(f"{role} {name!r} is {_dtype(t.dtype)}; the reference holds float64 and int64 tensors")
    fname = f"{role}.{name}.bin"
    if "/" in fname or fname.startswith("."):
        raise ValueError(f"{role} name {name!r} cannot name a file")
    data = t.numpy().astype("<f8" if dt == "float64" else "<i8", copy=False).tobytes()
    with open(os.path.join(outdir, fname), "wb") as f:
        f.write(data)
    entries.append({"role": role, "name": name, "dtype": dt,
                    "shape": [int(d) for d in t.shape], "file": fname})


def export_reference(spec, outdir, seed=0):
    """Call FILE.py:FACTORY with real tensors (torch seeded with seed), make
    the model float64 with its dropout the identity, run one forward and
    backward of loss(model, *inputs) and write outdir: manifest.json and
    one raw little-endian file per tensor (docs/import.md, "The reference
    check")."""
    fn, name = _load_factory(spec)
    torch.manual_seed(seed)
    got = fn()
    if not (isinstance(got, (tuple, list)) and len(got) == 3):
        raise TypeError(f"{name}() must return (model, inputs, loss), got {type(got).__name__}")
    model, inputs, loss = got
    write_reference(model, inputs, loss, outdir, name=name, seed=seed)


def write_reference(model, inputs, loss, outdir, name=None, seed=None):
    """The reference of export_reference for a real model and inputs: model
    is converted to float64 and its dropout zeroed in place."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if any(isinstance(t, FakeTensor) for t in list(model.parameters()) + list(model.buffers())):
        raise TypeError("the reference needs real weights; call the factory outside FakeTensorMode")
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    model = model.double()
    dropped = _neutralise_dropout(model)
    inputs = tuple(x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    model.zero_grad(set_to_none=True)
    out = loss(model, *inputs)
    if not isinstance(out, torch.Tensor) or out.dim() != 0:
        raise ValueError("loss(model, *inputs) must return a scalar tensor")
    out.backward()
    os.makedirs(outdir, exist_ok=True)
    entries = []
    for n, p in model.named_parameters():
        _write_tensor(outdir, "param", n, p, entries)
    for n, b in model.named_buffers():
        _write_tensor(outdir, "buffer", n, b, entries)
    for n, v in folded_values(model, inputs, loss).items():
        _write_tensor(outdir, "buffer", n, v, entries)
    in_names = _loss_arg_names(loss, len(inputs))
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            _write_tensor(outdir, "input", in_names[i], x, entries)
    for n, p in model.named_parameters():
        if p.grad is not None:
            _write_tensor(outdir, "grad", n, p.grad, entries)
    doc = {"format": REF_FORMAT, "version": REF_VERSION, "name": name or type(model).__name__,
           "torch": torch.__version__, "seed": seed, "loss": float(out.item()),
           "dropout_zeroed": dropped, "tensors": entries}
    tensors = doc.pop("tensors")
    head = json.dumps(doc, allow_nan=False)[:-1]
    with open(os.path.join(outdir, REF_MANIFEST), "w") as f:  # one tensor a line
        f.write(head + ',\n "tensors": [\n  ')
        f.write(",\n  ".join(json.dumps(e) for e in tensors))
        f.write("\n ]}\n")
