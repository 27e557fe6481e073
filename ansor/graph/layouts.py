"""Activation layouts of a network (issue 20 item 2): NHWC and blocked NCHW[x]c, per fused group.

The graph IR is channels-last (NHWC activations, HWIO conv weights). A conv may instead run
blocked, as TVM's x86 convs do: activations ``[N, C/x, H, W, x]`` (``NCHW{x}c``) and the weight
``[CO/x, CI/x, KH, KW, x(in), x(out)]`` (TVM's OIHW[x]i[y]o with x = y), the innermost ``x``
output channels one or two SIMD registers wide. Which layout is fastest depends on the shape, and
every neighbour that disagrees pays a layout transform, so each layout of a conv group is its own
tunable task (its own DAG and workload key) and a graph-level solver picks (``layout_tuning``).

* ``candidate_layouts(group, graph, hw)``: NHWC always; ``NCHW{x}c`` for x in ``{lanes,
  2 * lanes}`` of the host's ``HardwareParams.vector_lanes`` when the group is a plain conv
  (groups 1) followed only by elementwise/broadcast ops and x divides its input and output
  channels; every refused candidate comes with the reason.
* ``lower_group_in_layout(group, graph, layout)``: the group as tensors in that layout. Fused
  epilogues stay fused (bias, activation, residual add): elementwise ops are layout-agnostic, a
  per-channel constant is read at channel ``co * x + ci``, a residual input is read blocked.
  The weight is blocked here, once, from the graph constant (compile time); the kernel reads it.
* ``transform_tensors(shape, dtype, src, dst)``: the small kernel converting one activation
  between two layouts, in the compute DSL (NHWC <-> NCHW[x]c, NCHW[x]c <-> NCHW[y]c).

Dense, pools, depthwise and grouped convs, concat and every other group keep NHWC.

A group's *variant* is a layout name or an algorithm: ``winograd{m}`` (``winograd_variant``) runs
an eligible conv as Winograd F(m, 3) with NHWC activations. Variants are offered, lowered, tuned
and chosen exactly as layouts are; ``activation_layout(variant)`` is the layout its output and
activation inputs are in (NHWC for Winograd), what transforms are costed and run on.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compute import ops, te
from compute.expr import Expr
from compute.tensor import Tensor
from sketch.hardware import HardwareParams

from .fuse import FusedGroup
from .ir import Graph, display_name
from .te_ops import LoweredGroup, binary_expr, broadcast_index, lower_group, unary_expr
from .winograd_variant import (lower_group_winograd, winograd_m, winograd_name, winograd_problem,
                               winograd_tiles)

NHWC = "NHWC"
MAX_BLOCK = 1024
_BLOCKED = re.compile(r"NCHW([1-9][0-9]{0,3})c")


class LayoutError(ValueError):
    """An unknown layout name, or a layout a tensor or group cannot take (says why)."""


def blocked(x: int) -> str:
    """The name of the blocked layout with ``x`` channels innermost: ``NCHW8c``."""
    if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= MAX_BLOCK:
        raise LayoutError(f"block size must be an integer in [1, {MAX_BLOCK}], got {x!r}")
    return f"NCHW{x}c"


def block_of(layout: str) -> int | None:
    """``x`` of ``NCHW{x}c``, None for NHWC; ``LayoutError`` for anything else."""
    if layout == NHWC:
        return None
    m = _BLOCKED.fullmatch(layout) if isinstance(layout, str) else None
    if m is None or int(m.group(1)) > MAX_BLOCK:
        raise LayoutError(f"unknown layout {layout!r}: expected 'NHWC' or 'NCHW<x>c' with x in "
                          f"[1, {MAX_BLOCK}]")
    return int(m.group(1))


def activation_layout(variant: str) -> str:
    """The layout a group running ``variant`` reads and writes its activations in (NHWC for a
    Winograd variant, the layout itself otherwise); ``LayoutError`` for an unknown name."""
    try:
        if winograd_m(variant) is not None:
            return NHWC
    except ValueError as e:
        raise LayoutError(str(e)) from None
    block_of(variant)
    return variant


def physical_shape(shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """The array shape of a logical NHWC ``shape`` stored in ``layout``."""
    x = block_of(layout)
    if x is None:
        return tuple(shape)
    if len(shape) != 4:
        raise LayoutError(f"{layout}: only 4-D (NHWC) tensors can be blocked, got shape {list(shape)}")
    n, h, w, c = shape
    if c % x:
        raise LayoutError(f"{layout}: {c} channels are not a multiple of {x}")
    return (n, c // x, h, w, x)


def to_layout(arr: np.ndarray, layout: str) -> np.ndarray:
    """A NHWC array stored in ``layout`` (numpy; the reference for the transform kernels)."""
    x = block_of(layout)
    if x is None:
        return np.ascontiguousarray(arr)
    n, c_o, h, w, _ = physical_shape(arr.shape, layout)
    return np.ascontiguousarray(arr.reshape(n, h, w, c_o, x).transpose(0, 3, 1, 2, 4))


def from_layout(arr: np.ndarray, layout: str) -> np.ndarray:
    """The NHWC array of ``arr`` stored in ``layout``."""
    if block_of(layout) is None:
        return np.ascontiguousarray(arr)
    n, c_o, h, w, x = arr.shape
    return np.ascontiguousarray(arr.transpose(0, 2, 3, 1, 4).reshape(n, h, w, c_o * x))


def block_weight(w_hwio: np.ndarray, x: int) -> np.ndarray:
    """HWIO ``[KH, KW, CI, CO]`` -> ``[CO/x, CI/x, KH, KW, x(in), x(out)]``."""
    kh, kw, ci, co = w_hwio.shape
    return np.ascontiguousarray(
        w_hwio.reshape(kh, kw, ci // x, x, co // x, x).transpose(4, 2, 0, 1, 3, 5))


def candidate_blocks(hw: HardwareParams) -> tuple[int, ...]:
    """Block sizes worth offering on ``hw``: one and two registers of float lanes."""
    lanes = hw.vector_lanes
    return (lanes, 2 * lanes)


@dataclass(frozen=True)
class LayoutCandidates:
    """The layouts a group may run in (``layouts``, NHWC first) and the ones refused, with why."""

    layouts: tuple[str, ...]
    refused: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- which groups may block

def _blocking_problem(group: FusedGroup, graph: Graph) -> str | None:
    """Why the group cannot run blocked at all (None: it can, for suitable x)."""
    conv = group.nodes[0]
    if conv.op != "conv2d":
        return f"{conv.op} keeps NHWC (only convolutions take blocked layouts)"
    if conv.attrs["groups"] != 1:
        return "grouped/depthwise conv2d keeps NHWC"
    if conv.inputs[0] in graph.constants:
        return "conv2d of a constant keeps NHWC"
    if conv.inputs[1] not in graph.constants:
        return "conv2d with a weight computed at run time keeps NHWC (the weight is blocked at compile time)"
    if str(conv.type.dtype) != "float32":
        return f"conv2d of {conv.type.dtype} keeps NHWC"
    shape = conv.type.shape
    for node in group.nodes[1:]:
        if unary_expr(node.op) is None and binary_expr(node.op) is None:
            return f"the fused {node.op} is not elementwise"
        if node.type.shape != shape:
            return f"the fused {node.op} changes the shape to {list(node.type.shape)}"
    reads = [i for n in group.nodes for i in n.inputs]
    if reads.count(conv.inputs[1]) > 1:
        return "the conv's weight is read again in the group"
    for v in group.inputs:
        if v in graph.constants or v == conv.inputs[0]:
            continue
        if graph.type_of(v).shape != shape:
            return (f"the group reads {display_name(v)} of shape {list(graph.type_of(v).shape)} "
                    f"broadcast (only full-shape activations follow the layout)")
    return None


def candidate_layouts(group: FusedGroup, graph: Graph, hw: HardwareParams, blocked_layouts: bool = True,
                      winograd: bool = False) -> LayoutCandidates:
    """NHWC, plus ``NCHW{x}c`` for each x of ``candidate_blocks(hw)`` the group can take
    (``blocked_layouts``), plus ``winograd{m}`` for each tile size an eligible conv group is
    offered (``winograd``)."""
    ok, refused = [NHWC], []
    if blocked_layouts:
        blocks = candidate_blocks(hw)
        why = _blocking_problem(group, graph)
        if why is not None:
            refused += [(blocked(x), why) for x in blocks]
        else:
            conv = group.nodes[0]
            ci, co = graph.type_of(conv.inputs[0]).shape[3], conv.type.shape[3]
            for x in blocks:
                bad = [f"{n} {what} channels" for n, what in ((ci, "input"), (co, "output")) if n % x]
                if bad:
                    refused.append((blocked(x), f"{' and '.join(bad)} not a multiple of {x}"))
                else:
                    ok.append(blocked(x))
    if winograd:
        why = winograd_problem(group, graph)
        if why is not None:
            refused.append(("winograd", why))
        else:
            tiles, no = winograd_tiles(group, graph)
            ok += [winograd_name(m) for m in tiles]
            refused += [(winograd_name(m), reason) for m, reason in no]
    return LayoutCandidates(tuple(ok), tuple(refused))


# ---------------------------------------------------------------- lowering in a layout

@dataclass
class LayoutLowered:
    """A group lowered in ``layout``: ``lowered`` as ``te_ops.lower_group`` gives it, and per
    placeholder the layout it reads its value in (None: a constant or derived array, read as
    bound)."""

    lowered: LoweredGroup
    layout: str
    input_layouts: list[str | None]


def lower_group_in_layout(group: FusedGroup, graph: Graph, layout: str) -> LayoutLowered:
    """``group`` as tensors with its activations in ``layout`` (NHWC: ``te_ops.lower_group``), or
    as the Winograd variant ``layout`` names. ``LayoutError`` when the group cannot take the
    layout (says why)."""
    if activation_layout(layout) == NHWC and layout != NHWC:
        why = why_not(group, graph, layout)
        if why is not None:
            raise LayoutError(f"group {group.name} cannot run as {layout}: {why}")
        low = lower_group_winograd(group, graph, winograd_m(layout))
        return LayoutLowered(low, layout, [None if not isinstance(v, str) or v in graph.constants
                                           else NHWC for v in low.inputs])
    x = block_of(layout)
    if x is None:
        low = lower_group(group, graph)
        return LayoutLowered(low, NHWC, [None if not isinstance(v, str) or v in graph.constants
                                         else NHWC for v in low.inputs])
    why = why_not(group, graph, layout)
    if why is not None:
        raise LayoutError(f"group {group.name} cannot run in {layout}: {why}")
    return _lower_blocked(group, graph, x)


def why_not(group: FusedGroup, graph: Graph, layout: str) -> str | None:
    """Why ``group`` cannot run in ``layout`` (any block size, not only the host's candidates),
    or None when it can (a Winograd variant: whether the conv is eligible, any offered m)."""
    if activation_layout(layout) == NHWC and layout != NHWC:
        return winograd_problem(group, graph)
    x = block_of(layout)
    if x is None:
        return None
    why = _blocking_problem(group, graph)
    if why is None:
        conv = group.nodes[0]
        ci, co = graph.type_of(conv.inputs[0]).shape[3], conv.type.shape[3]
        if ci % x or co % x:
            why = f"{ci} input / {co} output channels are not multiples of {x}"
    return why


def _lower_blocked(group: FusedGroup, graph: Graph, x: int) -> LayoutLowered:
    conv = group.nodes[0]
    out_shape = conv.type.shape
    n_, oh, ow, co = out_shape
    placeholders: list[Tensor] = []
    inputs: list[str | np.ndarray] = []
    layouts: list[str | None] = []
    # env[v](n, c_o, h, w, c_i): the element of value v at that blocked output position
    env: dict[str, object] = {}
    for v in group.inputs:
        name = f"p{len(placeholders)}"
        t = graph.type_of(v)
        if v == conv.inputs[1]:
            w = block_weight(np.asarray(graph.constants[v]), x)
            ph = te.placeholder(w.shape, t.dtype, name)
            inputs.append(w)
            layouts.append(None)
        elif v in graph.constants:
            ph = te.placeholder(t.shape, t.dtype, name)
            inputs.append(v)
            layouts.append(None)
            env[v] = (lambda p: lambda n, c, h, w_, i: p[broadcast_index(p, (n, h, w_, c * x + i),
                                                                          out_shape)])(ph)
        else:  # the conv's data or a full-shape activation (a residual): read blocked
            ph = te.placeholder(physical_shape(t.shape, blocked(x)), t.dtype, name)
            inputs.append(v)
            layouts.append(blocked(x))
            env[v] = (lambda p: lambda n, c, h, w_, i: p[n, c, h, w_, i])(ph)
        placeholders.append(ph)
        if v == conv.inputs[1]:
            weight = ph
        if v == conv.inputs[0]:
            data = ph
    a = conv.attrs
    t_, l_, b_, r_ = a["padding"]
    sh, sw = a["strides"]
    dh, dw = a["dilation"]
    src = data
    if t_ or l_ or b_ or r_:
        src = ops.pad(data, [0, 0, t_, l_, 0], [0, 0, b_, r_, 0], 0.0, name="pad_1")
    kh, kw = weight.shape[2], weight.shape[3]
    rc = te.reduce_axis((0, weight.shape[1]), "rco")
    ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
    ri = te.reduce_axis((0, x), "rci")
    out = te.compute(
        (n_, co // x, oh, ow, x),
        lambda n, c, h, w_, i: te.sum(src[n, rc, h * sh + ry * dh, w_ * sw + rx * dw, ri]
                                      * weight[c, rc, ry, rx, ri, i], axis=[rc, ry, rx, ri]),
        name="conv2d_nchwc_2", tag="conv2d_nchwc")
    env[conv.name] = (lambda p: lambda n, c, h, w_, i: p[n, c, h, w_, i])(out)
    count = 2
    for node in group.nodes[1:]:
        count += 1
        args = [env[i] for i in node.inputs]
        if unary_expr(node.op) is not None:
            fn, f0 = unary_expr(node.op), args[0]
            out = te.compute(out.shape, (lambda f0, fn, node: lambda *i: fn(f0(*i), node))(f0, fn, node),
                             name=f"{node.op}_{count}", tag="elemwise")
        else:
            fn, f0, f1 = binary_expr(node.op), args[0], args[1]
            out = te.compute(out.shape, (lambda f0, f1, fn: lambda *i: fn(f0(*i), f1(*i)))(f0, f1, fn),
                             name=f"{node.op}_{count}", tag="broadcast")
        env[node.name] = (lambda p: lambda n, c, h, w_, i: p[n, c, h, w_, i])(out)
    return LayoutLowered(LoweredGroup(placeholders, inputs, out), blocked(x), layouts)


# ---------------------------------------------------------------- transform kernels

def transform_tensors(shape: Sequence[int], dtype: str, src: str, dst: str) -> list[Tensor]:
    """``[input, output]`` of the kernel converting a NHWC-``shape`` activation from layout
    ``src`` to ``dst`` (``LayoutError`` if either cannot hold it or they are equal)."""
    if src == dst:
        raise LayoutError(f"no transform from {src} to itself")
    xs, xd = block_of(src), block_of(dst)
    a = te.placeholder(physical_shape(shape, src), dtype, "src")
    out_shape = physical_shape(shape, dst)

    def read(n: Expr, h: Expr, w: Expr, c: Expr) -> Expr:
        return a[n, h, w, c] if xs is None else a[n, c // xs, h, w, c % xs]

    if xd is None:
        out = te.compute(out_shape, lambda n, h, w, c: read(n, h, w, c), name="layout_transform",
                         tag="injective")
    elif xs is None:
        out = te.compute(out_shape, lambda n, c, h, w, i: a[n, h, w, c * xd + i],
                         name="layout_transform", tag="injective")
    else:
        out = te.compute(out_shape, lambda n, c, h, w, i: read(n, h, w, c * xd + i),
                         name="layout_transform", tag="injective")
    return [a, out]
