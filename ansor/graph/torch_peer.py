"""A network graph as a PyTorch eager module, the peer users would deploy with: op by op, channels-last.

``to_torch(graph)`` walks the graph's nodes in order and calls the ``torch.nn.functional`` op
with the IR's semantics for each (PyTorch eager execution: one dispatch per op). The IR is
NHWC; PyTorch's convolutions and pools are NCHW-logical, and with ``channels_last`` memory an
NCHW-logical tensor *is* an NHWC buffer, so images are kept NCHW-logical in channels-last memory
between image ops (the layout PyTorch recommends for CNN inference on CPU) and are viewed back
as NHWC only where a layout-blind op (reshape, dense, ...) reads them: a permuted view, no copy.

``torch`` is an optional dependency (the ``torch`` extra): imported when a module is built.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .ir import OPS, Graph, GraphError, Node, display_name

# IR (NHWC) axis -> NCHW-logical dimension of the same image
_NHWC_TO_NCHW = (0, 2, 3, 1)


class UnsupportedForTorch(GraphError):
    """The graph uses an op (or attribute) this translator does not map to PyTorch."""


def _torch() -> Any:
    import torch  # noqa: PLC0415 - optional dependency, only for the comparison

    return torch


class Value:
    """A tensor and its form: ``nchw`` for an IR NHWC image held NCHW-logical (channels-last)."""

    __slots__ = ("t", "nchw")

    def __init__(self, t: Any, nchw: bool = False):
        self.t, self.nchw = t, nchw

    def plain(self) -> Any:
        """The tensor in the IR's layout (NHWC for images)."""
        return self.t.permute(0, 2, 3, 1) if self.nchw else self.t

    def image(self) -> Any:
        """The tensor as an NCHW-logical image."""
        return self.t if self.nchw else self.t.permute(0, 3, 1, 2)


def _as_image_operand(v: Value) -> Any:
    """An elementwise operand next to an NCHW image: images as they are, a lower-rank operand
    (a per-channel bias [C]) first broadcast to NHWC rank, then permuted like the image."""
    if v.nchw:
        return v.t
    t = v.t
    if t.dim() < 4:
        t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    return t.permute(0, 3, 1, 2)


def _sym_pad(padding: tuple[int, ...]) -> tuple[int, int] | None:
    t, l, b, r = padding
    return (t, l) if (t, l) == (b, r) else None


class Runner:
    """The graph's ops over torch tensors (built once per module: weights converted here)."""

    def __init__(self, graph: Graph):
        torch = _torch()
        self.torch, self.F = torch, torch.nn.functional
        self.graph = graph
        self.consts = {n: torch.from_numpy(np.require(a, requirements=["C", "W"])) for n, a in graph.constants.items()}
        self.conv_w: dict[str, Any] = {}
        for node in graph.nodes:
            if node.op not in _OPS and OPS[node.op].torch is None:
                raise UnsupportedForTorch(f"node {display_name(node.name)}: op {node.op!r} has no PyTorch mapping")
            if node.op == "conv2d" and node.inputs[1] in graph.constants:
                # HWIO -> OIHW once, channels-last like the activations
                w = torch.from_numpy(np.ascontiguousarray(graph.constants[node.inputs[1]].transpose(3, 2, 0, 1)))
                self.conv_w[node.name] = w.contiguous(memory_format=torch.channels_last)

    def run(self, inputs: list[Any]) -> list[Any]:
        env: dict[str, Value] = {n: Value(t) for n, t in zip(self.graph.inputs, inputs)}
        env.update({n: Value(t) for n, t in self.consts.items()})
        for node in self.graph.nodes:
            fn = _OPS.get(node.op) or OPS[node.op].torch
            env[node.name] = fn(self, node, [env[i] for i in node.inputs])
        return [env[o].plain().contiguous() for o in self.graph.outputs]


def _conv2d(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    w = r.conv_w.get(node.name)
    if w is None:
        w = xs[1].plain().permute(3, 2, 0, 1)
    x = xs[0].image()
    pad = _sym_pad(a["padding"])
    if pad is None:
        t, l, b, rr = a["padding"]
        x, pad = r.F.pad(x, (l, rr, t, b)), (0, 0)
    return Value(r.F.conv2d(x, w, None, a["strides"], pad, a["dilation"], a["groups"]), True)


def _pool(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    x = xs[0].image()
    pad = _sym_pad(a["padding"])
    kmax = tuple(k // 2 for k in a["kernel"])
    if pad is None or pad[0] > kmax[0] or pad[1] > kmax[1]:
        t, l, b, rr = a["padding"]
        if node.op == "avg_pool2d":
            # PyTorch pads symmetrically only: pad by hand and divide the window sums by the
            # pooled mask of what counts (real pixels, or also the declared padding); the
            # pool's own divisor cancels in the ratio.
            mask = r.torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
            mask = r.F.pad(mask, (l, rr, t, b), value=1.0 if a["count_include_pad"] else 0.0)
            x = r.F.pad(x, (l, rr, t, b))
            num = r.F.avg_pool2d(x, a["kernel"], a["strides"], 0, ceil_mode=a["ceil_mode"])
            den = r.F.avg_pool2d(mask, a["kernel"], a["strides"], 0, ceil_mode=a["ceil_mode"])
            return Value(num / den, True)
        x, pad = r.F.pad(x, (l, rr, t, b), value=-math.inf), (0, 0)
    if node.op == "max_pool2d":
        y = r.F.max_pool2d(x, a["kernel"], a["strides"], pad, ceil_mode=a["ceil_mode"])
    else:
        y = r.F.avg_pool2d(x, a["kernel"], a["strides"], pad, ceil_mode=a["ceil_mode"],
                           count_include_pad=a["count_include_pad"])
    return Value(y, True)


def _binary(fn_name: str):
    def op(r: Runner, node: Node, xs: list[Value]) -> Value:
        fn = getattr(r.torch, fn_name)
        if any(v.nchw for v in xs) and len(node.type.shape) == 4:
            return Value(fn(*[_as_image_operand(v) for v in xs]), True)
        return Value(fn(*[v.plain() for v in xs]))
    return op


def elementwise_torch(fn: Callable[[Runner, Node, Any], Any]) -> Callable[[Runner, Node, list[Value]], Value]:
    """The peer of a one-input elementwise op: ``fn(runner, node, tensor)``, in whichever layout
    the tensor is held."""
    def op(r: Runner, node: Node, xs: list[Value]) -> Value:
        return Value(fn(r, node, xs[0].t), xs[0].nchw)
    return op


def _batch_norm(r: Runner, node: Node, xs: list[Value]) -> Value:
    x, gamma, beta, mean, var = xs
    if x.nchw and node.attrs["axis"] == 3:
        return Value(r.F.batch_norm(x.t, mean.t, var.t, gamma.t, beta.t, False, 0.0, node.attrs["eps"]), True)
    t = x.plain()
    shape = [-1 if i == node.attrs["axis"] else 1 for i in range(t.dim())]
    scale = gamma.t / r.torch.sqrt(var.t + node.attrs["eps"])
    return Value(t * scale.reshape(shape) + (beta.t - mean.t * scale).reshape(shape))


def _lrn(r: Runner, node: Node, xs: list[Value]) -> Value:
    a = node.attrs
    if a["axis"] != 3 or xs[0].t.dim() != 4:
        raise UnsupportedForTorch(f"node {display_name(node.name)}: lrn over axis {a['axis']}")
    return Value(r.F.local_response_norm(xs[0].image(), a["size"], a["alpha"], a["beta"], a["bias"]), True)


def _concat(r: Runner, node: Node, xs: list[Value]) -> Value:
    axis = node.attrs["axis"]
    if len(node.type.shape) == 4 and any(v.nchw for v in xs):
        return Value(r.torch.cat([v.image() for v in xs], dim=_NHWC_TO_NCHW[axis]), True)
    return Value(r.torch.cat([v.plain() for v in xs], dim=axis))


def _matmul(r: Runner, node: Node, xs: list[Value]) -> Value:
    a, b = (v.plain() for v in xs)
    if node.attrs["transpose_a"]:
        a = a.transpose(-1, -2)
    if node.attrs["transpose_b"]:
        b = b.transpose(-1, -2)
    return Value(r.torch.matmul(a, b))


def _gelu(r: Runner, node: Node, t: Any) -> Any:
    return r.F.gelu(t, approximate=node.attrs["approximate"])


def _clip(r: Runner, node: Node, t: Any) -> Any:
    return r.torch.clamp(t, node.attrs["min"], node.attrs["max"])


def _cast(r: Runner, node: Node, t: Any) -> Any:
    return t.to(getattr(r.torch, node.attrs["dtype"]))


def plain_torch(fn: Callable[..., Any]) -> Callable[[Runner, Node, list[Value]], Value]:
    """The peer of an op on its inputs in the IR's layout: ``fn(runner, node, *tensors)``."""
    def op(r: Runner, node: Node, xs: list[Value]) -> Value:
        return Value(fn(r, node, *[v.plain() for v in xs]))
    return op


def _layer_norm(r: Runner, node: Node, x: Any, gamma: Any, beta: Any) -> Any:
    shape = tuple(x.shape[node.attrs["axis"]:])
    return r.F.layer_norm(x, shape, gamma.reshape(shape), beta.reshape(shape), node.attrs["eps"])


def _pad(r: Runner, node: Node, x: Any) -> Any:
    before, after = node.attrs["before"], node.attrs["after"]
    spec: list[int] = []
    for b, e in zip(reversed(before), reversed(after)):
        spec += [b, e]
    return r.F.pad(x, spec, value=node.attrs["value"])


def _slice(r: Runner, node: Node, x: Any) -> Any:
    a = node.attrs
    return x[tuple(slice(b, e, s) for b, e, s in zip(a["begin"], a["end"], a["step"]))]


_OPS: dict[str, Any] = {
    "conv2d": _conv2d, "max_pool2d": _pool, "avg_pool2d": _pool,
    "global_avg_pool": lambda r, n, xs: Value(xs[0].image().mean((2, 3), keepdim=True), True),
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div"),
    "maximum": _binary("maximum"), "minimum": _binary("minimum"), "pow": _binary("pow"),
    "relu": elementwise_torch(lambda r, n, t: r.F.relu(t)), "sigmoid": elementwise_torch(lambda r, n, t: r.torch.sigmoid(t)),
    "tanh": elementwise_torch(lambda r, n, t: r.torch.tanh(t)), "exp": elementwise_torch(lambda r, n, t: r.torch.exp(t)),
    "sqrt": elementwise_torch(lambda r, n, t: r.torch.sqrt(t)), "neg": elementwise_torch(lambda r, n, t: -t),
    "erf": elementwise_torch(lambda r, n, t: r.torch.erf(t)), "identity": elementwise_torch(lambda r, n, t: t),
    "gelu": elementwise_torch(_gelu), "clip": elementwise_torch(_clip), "cast": elementwise_torch(_cast),
    "batch_norm": _batch_norm, "lrn": _lrn, "concat": _concat, "matmul": _matmul,
    "dense": plain_torch(lambda r, n, x, w: r.F.linear(x, w)),
    "softmax": plain_torch(lambda r, n, x: r.torch.softmax(x, n.attrs["axis"])),
    "layer_norm": plain_torch(_layer_norm),
    "reduce_mean": plain_torch(lambda r, n, x: x.mean(n.attrs["axes"], keepdim=n.attrs["keepdims"])),
    "reshape": plain_torch(lambda r, n, x: x.reshape(n.attrs["shape"])),
    "transpose": plain_torch(lambda r, n, x: x.permute(*n.attrs["perm"])),
    "pad": plain_torch(_pad), "slice": plain_torch(_slice),
}


def to_torch(graph: Graph) -> Any:
    """``graph`` as a ``torch.nn.Module`` in eval mode: ``module(*inputs)`` takes the graph's
    inputs (IR layout, in ``graph.inputs`` order) as tensors and returns the outputs' list."""
    torch = _torch()
    runner = Runner(graph)

    class GraphModule(torch.nn.Module):
        def forward(self, *inputs: Any) -> list[Any]:
            return runner.run(list(inputs))

    return GraphModule().eval()
