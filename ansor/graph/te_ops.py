"""Turning a fused subgraph into tensor expressions (a ComputeDAG): the lowering machinery.

``lower_group(group, graph)`` builds the ``te`` computation of each node of a ``FusedGroup`` over
placeholders for the group's inputs, by calling the ``lower`` of its op's ``OpDef`` (declared with
the operator in ``ansor/graph/ops/``; where the operator library ``compute.ops`` has the op with
the IR's exact semantics the lowering uses it: conv2d NHWC, dense, transpose, reshape, pad).
``LowerCtx`` is what a lowering gets besides its node and input tensors; the helpers here are
shared by several lowerings (``unary_lower`` for an elementwise op from its scalar body,
``broadcast_index``, ``padded``, the reduction indexing of ``reduced_shape``/``full_index``/
``keep_index``), and ``unary_expr``/``binary_expr`` give the scalar body (``OpDef.expr``) of an
elementwise op to the blocked-layout lowering (``layouts.py``).

Tensor names are generated (``conv2d_0``, ``p1``), never taken from the model: names in a model
are untrusted and the DAG's workload key must not depend on them, so two identical blocks of a
network give the same key. Some ops need a small derived constant (an average pool's divisor per
output position): ``LoweredGroup.inputs`` lists, per placeholder, either the graph value it reads
or such an array.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compute import ops, te
from compute.expr import Expr, IterVar, const
from compute.tensor import Tensor

from .fuse import FusedGroup
from .ir import OPS, Graph, GraphError, Node, display_name


@dataclass
class LoweredGroup:
    """A fused group as tensors: ``placeholders`` (bound to ``inputs``: a value name or a derived
    numpy array each) and the ``output`` tensor. A placeholder may read its value in another
    shape of the same size, row-major (a depthwise conv's weight)."""

    placeholders: list[Tensor]
    inputs: list[str | np.ndarray]
    output: Tensor

    @property
    def tensors(self) -> list[Tensor]:
        """Kernel argument order: placeholders, then the output."""
        return [*self.placeholders, self.output]


class LowerCtx:
    """What a lowering rule gets besides its node and input tensors: fresh tensor names, derived
    constants as extra placeholders, and which placeholders one node alone reads."""

    def __init__(self) -> None:
        self.placeholders: list[Tensor] = []
        self.inputs: list[str | np.ndarray] = []
        self.count = 0
        # ids of the placeholders exactly one node of the group reads (a lowering may then
        # replace such a placeholder by one of another shape over the same buffer)
        self.read_once: set[int] = set()
        # the graph's constants by value name (a lowering may bind a constant in another layout)
        self.constants: dict[str, np.ndarray] = {}

    def name(self, op: str) -> str:
        self.count += 1
        return f"{op}_{self.count}"

    def extra(self, arr: np.ndarray) -> Tensor:
        """A placeholder for a derived constant array."""
        t = te.placeholder(arr.shape, str(arr.dtype), f"p{len(self.placeholders)}")
        self.placeholders.append(t)
        self.inputs.append(np.require(arr, requirements="C"))  # keeps a 0-d array 0-d
        return t


LowerFn = Callable[[LowerCtx, Node, list[Tensor]], Tensor]


def broadcast_index(t: Tensor, i: Sequence[Expr], out_shape: Sequence[int]) -> tuple:
    """Numpy broadcasting: the index of ``t`` read at output index ``i``."""
    off = len(out_shape) - t.ndim
    return tuple(const(0) if n == 1 and out_shape[d + off] != 1 else i[d + off] for d, n in enumerate(t.shape))


def unary_lower(fn: Callable[[Expr, Node], Expr]) -> LowerFn:
    """The lowering of an elementwise op given its scalar body ``fn(value, node)``."""
    def lower(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
        x = xs[0]
        return te.compute(x.shape, lambda *i: fn(x[i], node), name=ctx.name(node.op), tag="elemwise")
    return lower


def unary_expr(op: str) -> Callable[[Expr, Node], Expr] | None:
    """The scalar body (``OpDef.expr``) of an elementwise unary op, or None if ``op`` is not one
    (the blocked-layout lowering of ``layouts.py`` reuses it)."""
    d = OPS.get(op)
    if d is None:
        return None
    return d.expr if d.expr is not None and d.arity == (1, 1) and d.pattern == "elemwise" else None


def binary_expr(op: str) -> Callable[[Expr, Expr], Expr] | None:
    """The scalar body (``OpDef.expr``) of a broadcasting binary op, or None if ``op`` is not one."""
    d = OPS.get(op)
    if d is None:
        return None
    return d.expr if d.expr is not None and d.arity == (2, 2) and d.pattern == "broadcast" else None


def padded(ctx: LowerCtx, x: Tensor, pads: Sequence[tuple[int, int]], value: float | Expr) -> Tensor:
    """``x`` padded by (before, after) per axis with ``value`` (``x`` itself if no padding)."""
    if not any(p for pp in pads for p in pp):
        return x
    return ops.pad(x, [p[0] for p in pads], [p[1] for p in pads], value, name=ctx.name("pad"))


def reduced_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` kept as 1s."""
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def full_index(i: Sequence[IterVar], axes: Sequence[int], ks: Sequence[IterVar]) -> tuple:
    """Index into the input from a keepdims output index with reduce axes replaced by ``ks``."""
    kk = dict(zip(axes, ks))
    return tuple(kk.get(d, v) for d, v in enumerate(i))


def keep_index(i: Sequence[IterVar], axes: Sequence[int]) -> tuple:
    """Index into a keepdims reduction's result (reduced axes at 0) from a full index ``i``."""
    return tuple(const(0) if d in axes else v for d, v in enumerate(i))


def lower_group(group: FusedGroup, graph: Graph, override: dict[str, LowerFn] | None = None) -> LoweredGroup:
    """The group as tensors over placeholders ``p0, p1, ...`` for its inputs (first-use order).
    ``override``: node name -> the lowering to use for that node instead of its op's (a conv as
    Winograd, ``winograd_variant``)."""
    ctx = LowerCtx()
    ctx.constants = graph.constants
    env: dict[str, Tensor] = {}
    for value in group.inputs:
        t = graph.type_of(value)
        ph = te.placeholder(t.shape, t.dtype, f"p{len(ctx.placeholders)}")
        ctx.placeholders.append(ph)
        ctx.inputs.append(value)
        env[value] = ph
    reads = [i for n in group.nodes for i in n.inputs]
    ctx.read_once = {id(env[v]) for v in group.inputs if reads.count(v) == 1}
    for node in group.nodes:
        fn = (override or {}).get(node.name) or OPS[node.op].lower
        if fn is None:
            raise GraphError(f"node {display_name(node.name)}: op {node.op!r} has no tensor-expression "
                             "lowering; it cannot be compiled")
        try:
            env[node.name] = fn(ctx, node, [env[i] for i in node.inputs])
        except (ValueError, TypeError) as e:
            raise GraphError(f"node {display_name(node.name)} ({node.op}): cannot lower: {e}") from None
    return LoweredGroup(ctx.placeholders, ctx.inputs, env[group.output])
