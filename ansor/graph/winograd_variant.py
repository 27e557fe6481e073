"""Winograd as a variant of a conv group (issue 45 item 1): the group computed by
``compute.ops.winograd`` instead of the direct convolution, its epilogue fused as in the direct
group.

A variant is named ``winograd{m}`` (m in ``compute.ops.winograd.ALLOWED_M``, one variant per m)
and takes its place beside the layout variants (``layouts.candidate_layouts``): its own DAG,
workload key and task (``conv2d_winograd+add+relu 1x14x14x256 [winograd4]``), tuned by the task
scheduler like any other, chosen per group from the measured best times in the log by the layout
solver (``layout_tuning.solve_layouts``). Separate tasks per m rather than one searched parameter:
each m has its own tensor shapes (a x a tiles), so one task could not hold them, and separate
tasks are measured and chosen by the machinery that exists. Activations stay NHWC, so a Winograd
group never needs a layout transform beside NHWC neighbours.

Eligible: a ``conv2d`` anchoring its group (first node, the only conv), 3x3, 1x3 or 3x1 kernel,
stride 1, dilation 1, groups 1, float32, a constant weight read by the conv alone, data computed
at run time, and at least ``MIN_CHANNELS`` input and output channels (below that the transforms,
about 27 + 15 multiply-adds per output and channel at m = 4, cost as much as the GEMM saves:
6.75 per output, input and output channel). A tile size is offered when its padded tiles cover at
most ``MAX_TILE_WASTE`` times the output (F(6, 3) on a 7x7 output computes 12x12).

The weight transform ``U = G g G^T`` is done here, when the group is lowered (compile time, from
the graph constant): the kernel's argument is ``U``, a derived constant like a blocked weight,
and with layout rewrite it is packed further at compile time as any constant input.
"""
from __future__ import annotations

import math
import re

from compute.ops.winograd import (ALLOWED_M, conv2d_winograd_nhwc, tile_sizes, weight_transform,
                                  winograd_inputs)
from compute import te
from compute.tensor import Tensor

from .fuse import FusedGroup
from .ir import Graph, Node
from .te_ops import LowerCtx, LoweredGroup, lower_group

MIN_CHANNELS = 16
MAX_TILE_WASTE = 1.5
_NAME = re.compile(r"winograd([0-9]{1,2})")


def winograd_name(m: int) -> str:
    """The variant name of tile size ``m``: ``winograd4``."""
    return f"winograd{m}"


def winograd_m(variant: str) -> int | None:
    """``m`` of a ``winograd{m}`` variant name (any m of ``ALLOWED_M``), None for another name;
    ValueError for a Winograd name with an m not offered."""
    found = _NAME.fullmatch(variant) if isinstance(variant, str) else None
    if found is None:
        return None
    m = int(found.group(1))
    if m not in ALLOWED_M:
        raise ValueError(f"unknown variant {variant!r}: Winograd tile sizes are "
                         f"{', '.join(map(str, ALLOWED_M))}")
    return m


def winograd_problem(group: FusedGroup, graph: Graph) -> str | None:
    """Why ``group`` cannot run as Winograd (any m), or None when it can."""
    conv = group.nodes[0]
    if conv.op != "conv2d":
        return f"{conv.op} is not a convolution"
    if any(n.op == "conv2d" for n in group.nodes[1:]):
        return "the group holds a second convolution"
    a = conv.attrs
    kh, kw, ci, co = graph.type_of(conv.inputs[1]).shape
    if (kh, kw) not in ((3, 3), (1, 3), (3, 1)):
        return f"a {kh}x{kw} kernel (Winograd F(m, 3): 3x3, 1x3 or 3x1)"
    if tuple(a["strides"]) != (1, 1) or tuple(a["dilation"]) != (1, 1) or a["groups"] != 1:
        return "strided, dilated or grouped"
    if str(conv.type.dtype) != "float32":
        return f"{conv.type.dtype} (float32 only)"
    if conv.inputs[1] not in graph.constants:
        return "the weight is computed at run time (it is transformed at compile time)"
    if conv.inputs[0] in graph.constants:
        return "a convolution of a constant"
    if [i for n in group.nodes for i in n.inputs].count(conv.inputs[1]) > 1:
        return "the conv's weight is read again in the group"
    if min(ci, co) < MIN_CHANNELS:
        return f"{ci} input / {co} output channels (fewer than {MIN_CHANNELS})"
    return None


def winograd_tiles(group: FusedGroup, graph: Graph) -> tuple[tuple[int, ...], tuple[tuple[int, str], ...]]:
    """The tile sizes worth offering for an eligible group, and the refused ones with why."""
    conv = group.nodes[0]
    kernel = graph.type_of(conv.inputs[1]).shape[:2]
    _, oh, ow, _ = conv.type.shape
    ok, refused = [], []
    for m in ALLOWED_M:
        mh, mw = tile_sizes(m, kernel)
        covered = math.ceil(oh / mh) * mh * math.ceil(ow / mw) * mw
        if covered > MAX_TILE_WASTE * oh * ow:
            refused.append((m, f"tiles of {m} cover {covered / (oh * ow):.2f}x the {oh}x{ow} output"))
        else:
            ok.append(m)
    return tuple(ok), tuple(refused)


def lower_group_winograd(group: FusedGroup, graph: Graph, m: int) -> LoweredGroup:
    """``group`` lowered with its conv as Winograd F(m, 3) (call ``winograd_problem`` first): the
    weight's placeholder becomes ``U`` bound to the transformed constant, the per-axis matrices
    are derived constants, the rest of the group is lowered as usual."""

    def conv(ctx: LowerCtx, node: Node, xs: list[Tensor]) -> Tensor:
        data, weight = xs
        k = [id(p) for p in ctx.placeholders].index(id(weight))
        w = graph.constants[node.inputs[1]]
        u = weight_transform(w, m)
        ctx.placeholders[k] = te.placeholder(u.shape, str(u.dtype), weight.name)
        ctx.inputs[k] = u
        kernel = tuple(w.shape[:2])
        mats = winograd_inputs(m, kernel)
        if kernel == (3, 3):  # both axes share one B^T and one A^T
            bt, at = ctx.extra(mats[0]), ctx.extra(mats[1])
            tensors = (bt, at, bt, at)
        else:
            tensors = tuple(ctx.extra(a) for a in mats)
        return conv2d_winograd_nhwc(data, ctx.placeholders[k], *tensors, kernel=kernel,
                                    padding=node.attrs["padding"], name=ctx.name("conv2d_winograd"))

    return lower_group(group, graph, {group.nodes[0].name: conv})
