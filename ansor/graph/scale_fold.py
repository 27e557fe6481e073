"""A per-channel scale folded into the convolution that reads it (issue 45: less work than the
graph says).

A squeeze-excite block (EfficientNet, MobileNet-V3) ends with ``y * gate`` (gate
``[1, 1, 1, C]``, one value per channel) read by a 1x1 projection conv. As written, that
multiply is a kernel of its own: it reads the whole ``H x W x C`` activation and writes it back
(2.3 million values, 9.2 MB each way, over EfficientNet-B0's 16 blocks), for the conv to read it
again. Because a
convolution is linear in each input channel, ``conv(y * s, W) = conv(y, W * s[ci])``: the scale
moves onto the weight, ``kh x kw x C x Co`` multiplies per inference instead of ``N x H x W x C``
loads, multiplies and stores. Zero padding commutes with the scale, so the result is the same
up to float rounding.

It pays where the weight is the smaller of the two, ``N * H * W > kh * kw * Co``: every block of
EfficientNet-B0 down to 14x14, 2.05 of its 2.3 million values (the 112x112x32 block: 512 weight
products instead of 401,408 activation products; ``benchmarks/scale_fold.py`` lists them). At 7x7 with 1152 channels into 192 it would not (the weight, 221,184
values, is four times the activation, and a computed weight is packed per inference instead of
once at compile time), and the multiply is kept.

``fold_channel_scales(graph)`` rewrites every such ``conv2d(mul(y, s), W)`` (either operand order;
``s`` broadcast along the channels only; ``W`` a constant, ``groups`` 1; the product read by the
conv alone) into ``conv2d(y, mul(W, reshape(s, [1, 1, C, 1])))``; ``plan.plan_network`` applies
it, so tuning, the compile and the export all see the same network.
"""
from __future__ import annotations

from .ir import Graph, Node, make_node

__all__ = ["channel_vector", "fold_channel_scales", "foldable_scale"]


def channel_vector(shape: tuple[int, ...], channels: int) -> bool:
    """``shape`` broadcasts along the last axis only: ``[.., 1, C]`` with every other extent 1."""
    return len(shape) >= 1 and shape[-1] == channels and all(d == 1 for d in shape[:-1])


def foldable_scale(graph: Graph, conv: Node, producers: dict[str, Node], readers: dict[str, list[Node]]
                   ) -> tuple[str, str] | None:
    """``(y, s)`` when ``conv``'s data is ``y * s`` with the scale foldable into its weight
    (module docstring), else None."""
    if conv.op != "conv2d" or conv.attrs.get("groups", 1) != 1 or conv.inputs[1] not in graph.constants:
        return None
    x = conv.inputs[0]
    mul = producers.get(x)
    if mul is None or mul.op != "mul" or x in graph.outputs or len(readers[x]) != 1:
        return None
    n, h, w, ci = graph.type_of(x).shape
    kh, kw, _, co = graph.type_of(conv.inputs[1]).shape
    if graph.type_of(x).dtype != "float32" or n * h * w <= kh * kw * co:
        return None
    a, b = mul.inputs
    for y, s in ((a, b), (b, a)):
        if graph.type_of(y).shape == (n, h, w, ci) and channel_vector(graph.type_of(s).shape, ci):
            return y, s
    return None


def fold_channel_scales(graph: Graph) -> Graph:
    """``graph`` with every foldable per-channel scale moved onto its conv's weight (the same
    graph object when there is none)."""
    producers = {n.name: n for n in graph.nodes}
    readers = graph.consumers()
    folds = {}
    for node in graph.nodes:
        found = foldable_scale(graph, node, producers, readers)
        if found is not None:
            folds[node.name] = found
    if not folds:
        return graph
    taken = set(graph.inputs) | set(graph.constants) | {n.name for n in graph.nodes}

    def fresh(hint: str) -> str:
        name, k = hint, 1
        while name in taken:
            k += 1
            name = f"{hint}_{k}"
        taken.add(name)
        return name

    dropped = {producers[c].inputs[0] for c in folds}  # the products: read by their conv alone
    t = graph.type_of
    nodes: list[Node] = []
    for node in graph.nodes:
        if node.name in dropped:
            continue
        if node.name in folds:
            y, s = folds[node.name]
            w = node.inputs[1]
            r = make_node(fresh(f"{node.name}_scale"), "reshape", [s], [t(s)], {"shape": (1, 1, t(w).shape[2], 1)})
            sw = make_node(fresh(f"{node.name}_scaled_w"), "mul", [w, r.name], [t(w), r.type])
            nodes += [r, sw]
            node = make_node(node.name, node.op, [y, sw.name, *node.inputs[2:]],
                             [t(y), sw.type, *(t(i) for i in node.inputs[2:])], node.attrs)
        nodes.append(node)
    return Graph(graph.inputs, graph.constants, tuple(nodes), graph.outputs, graph.name, graph.io_dtypes)
