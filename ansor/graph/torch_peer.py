"""A network graph as a PyTorch eager module, the peer users would deploy with: op by op, channels-last.

``to_torch(graph)`` walks the graph's nodes in order and calls the ``torch.nn.functional`` op
with the IR's semantics for each (PyTorch eager execution: one dispatch per op): the ``torch``
part of the op's ``OpDef``, declared with the operator in ``ansor/graph/ops/``; this module has
the ``Runner`` and ``Value`` they work on and the helpers ``elementwise_torch``/``plain_torch``. The IR is
NHWC; PyTorch's convolutions and pools are NCHW-logical, and with ``channels_last`` memory an
NCHW-logical tensor *is* an NHWC buffer, so images are kept NCHW-logical in channels-last memory
between image ops (the layout PyTorch recommends for CNN inference on CPU) and are viewed back
as NHWC only where a layout-blind op (reshape, dense, ...) reads them: a permuted view, no copy.

``torch`` is an optional dependency (the ``torch`` extra): imported when a module is built.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .ir import OPS, Graph, GraphError, Node, display_name


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


class Runner:
    """The graph's ops over torch tensors (one per module; an op may keep what it converts once,
    such as a conv's weight, in ``cache``)."""

    def __init__(self, graph: Graph):
        torch = _torch()
        self.torch, self.F = torch, torch.nn.functional
        self.graph = graph
        self.consts = {n: torch.from_numpy(np.require(a, requirements=["C", "W"])) for n, a in graph.constants.items()}
        # what an op prepares once per module and reuses on every run (a conv's weight, OIHW)
        self.cache: dict[Any, Any] = {}
        for node in graph.nodes:
            if OPS[node.op].torch is None:
                raise UnsupportedForTorch(f"node {display_name(node.name)}: op {node.op!r} has no PyTorch mapping")

    def run(self, inputs: list[Any]) -> list[Any]:
        env: dict[str, Value] = {n: Value(t) for n, t in zip(self.graph.inputs, inputs)}
        env.update({n: Value(t) for n, t in self.consts.items()})
        for node in self.graph.nodes:
            fn = OPS[node.op].torch
            env[node.name] = fn(self, node, [env[i] for i in node.inputs])
        return [env[o].plain().contiguous() for o in self.graph.outputs]


def elementwise_torch(fn: Callable[[Runner, Node, Any], Any]) -> Callable[[Runner, Node, list[Value]], Value]:
    """The peer of a one-input elementwise op: ``fn(runner, node, tensor)``, in whichever layout
    the tensor is held."""
    def op(r: Runner, node: Node, xs: list[Value]) -> Value:
        return Value(fn(r, node, xs[0].t), xs[0].nchw)
    return op


def plain_torch(fn: Callable[..., Any]) -> Callable[[Runner, Node, list[Value]], Value]:
    """The peer of an op on its inputs in the IR's layout: ``fn(runner, node, *tensors)``."""
    def op(r: Runner, node: Node, xs: list[Value]) -> Value:
        return Value(fn(r, node, *[v.plain() for v in xs]))
    return op


def to_torch(graph: Graph) -> Any:
    """``graph`` as a ``torch.nn.Module`` in eval mode: ``module(*inputs)`` takes the graph's
    inputs (IR layout, in ``graph.inputs`` order) as tensors and returns the outputs' list."""
    torch = _torch()
    runner = Runner(graph)

    class GraphModule(torch.nn.Module):
        def forward(self, *inputs: Any) -> list[Any]:
            return runner.run(list(inputs))

    return GraphModule().eval()
