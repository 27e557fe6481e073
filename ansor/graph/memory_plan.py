"""How much memory running a ``Graph`` takes, checked before anything is compiled or allocated.

A model's dims and pads are untrusted: a [1, 3, 100000, 100000] input or a pad of 200000 is a
valid graph whose buffers need 112 GiB, and compiling then running it used to die with a
``MemoryError`` traceback deep inside numpy. ``check_graph_memory`` sizes every tensor and the
plan as a whole against the memory available (``compute.memory``) and raises one
``MemoryBudgetError`` naming the largest tensor instead.

The compiled module (``executor.compile_network``) holds the inputs, the constants and its
intermediate buffers, which it reuses once their last reader has run, so it needs at least the
peak of the values live at once (``peak``); the numpy reference interpreter keeps every value
(``all_values``). ``plan_buffers`` is that reuse: which buffer each intermediate value takes.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from compute.memory import check_bytes, fmt_bytes, nbytes_of

from .ir import Graph, TensorType, display_name


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes a graph's values take: ``inputs`` and ``constants``; ``peak``, the most node outputs
    alive at once in execution order (a lower bound of the compiled module's buffer pool);
    ``all_values``, every node output (what the reference interpreter keeps); the ``largest``
    tensor's name, type and bytes."""

    inputs: int
    constants: int
    peak: int
    all_values: int
    largest: tuple[str, TensorType, int]


def _bytes(t: TensorType) -> int:
    return nbytes_of(t.shape, np.dtype(t.dtype).itemsize)


def memory_plan(graph: Graph) -> MemoryPlan:
    """Size every tensor of ``graph`` (shapes only: nothing is allocated)."""
    sizes: dict[str, tuple[TensorType, int]] = {}
    for name, t in graph.inputs.items():
        sizes[name] = (t, _bytes(t))
    for name, arr in graph.constants.items():
        sizes[name] = (TensorType(arr.shape, str(arr.dtype)), int(arr.nbytes))
    last_use: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        sizes[node.name] = (node.type, _bytes(node.type))
        for v in node.inputs:
            last_use[v] = i
    for out in graph.outputs:
        last_use[out] = len(graph.nodes)
    live = peak = total = 0
    for i, node in enumerate(graph.nodes):
        nbytes = sizes[node.name][1]
        live += nbytes
        total += nbytes
        peak = max(peak, live)  # the output is written while its inputs are still alive
        for v in set(node.inputs):
            if last_use.get(v) == i and v not in graph.inputs and v not in graph.constants:
                live -= sizes[v][1]
        if node.name not in last_use:  # never read (a dead value): freed at once
            live -= nbytes
    name, (t, nbytes) = max(sizes.items(), key=lambda kv: kv[1][1], default=("-", (TensorType(()), 0)))
    return MemoryPlan(sum(sizes[n][1] for n in graph.inputs), sum(sizes[n][1] for n in graph.constants),
                      peak, total, (name, t, nbytes))


def check_graph_memory(graph: Graph, compiled: bool = True, reference: bool = False) -> MemoryPlan:
    """Raise ``MemoryBudgetError`` if the largest tensor of ``graph``, or the whole of what
    running it takes (the ``compiled`` module's buffers and/or the numpy ``reference``'s values,
    both when a run checks one against the other), exceeds the memory available."""
    plan = memory_plan(graph)
    name, t, nbytes = plan.largest
    check_bytes(nbytes, f"graph {display_name(graph.name)}: tensor {display_name(name)} {t}")
    # Constants are shared; the module has its own input buffers beside the caller's arrays.
    need, parts = plan.constants, []
    if compiled:
        need += plan.inputs + plan.peak
        parts.append(f"{fmt_bytes(plan.peak)} of compiled buffers")
    if reference:
        need += plan.inputs + plan.all_values
        parts.append(f"{fmt_bytes(plan.all_values)} of reference values")
    check_bytes(need, f"graph {display_name(graph.name)}: running it ({fmt_bytes(plan.inputs)} of inputs, "
                      f"{fmt_bytes(plan.constants)} of weights, {', '.join(parts)}; largest tensor "
                      f"{display_name(name)} {t}, {fmt_bytes(nbytes)})")
    return plan


def plan_buffers(order: list[tuple[str, list[str]]], types: Mapping[str, TensorType], keep: set[str]
                  ) -> dict[str, int]:
    """Buffer id per intermediate value. ``order`` lists (written value, values read) per step;
    ``keep`` values (outputs) never share. A value takes a free buffer of its dtype (one whose
    last reader ran before it is written), else a new one; a buffer's size is the largest value
    it holds (``buffer_sizes``), each value its first elements.

    Which free buffer: the most recently freed that is large enough, else the most recently
    freed (grown). The most recently freed was read last, so a kernel writes its output into
    lines still in cache rather than a cold buffer (on MobileNet-V2 a depthwise conv ran 2x its
    time alone when each size had buffers of its own: 11.9 MB of activations beside 14 MB of
    weights); and a network touches about its peak of live values, not a buffer per size."""
    last_use: dict[str, int] = {}
    for i, (_, reads) in enumerate(order):
        for r in reads:
            last_use[r] = i
    assign: dict[str, int] = {}
    cap: list[int] = []  # elements per buffer so far
    free: dict[str, list[int]] = {}  # per dtype, least recently freed first
    for i, (value, reads) in enumerate(order):
        t = types[value]
        pool = free.get(t.dtype, [])
        if value not in keep and pool:
            fits = [b for b in pool if cap[b] >= t.size]
            bid = fits[-1] if fits else pool[-1]
            pool.remove(bid)
            cap[bid] = max(cap[bid], t.size)
        else:
            bid = len(cap)
            cap.append(t.size)
        assign[value] = bid
        for r in set(reads):
            if r in assign and r not in keep and last_use.get(r) == i:
                free.setdefault(types[r].dtype, []).append(assign[r])
    return assign


def buffer_sizes(planned: Mapping[str, int], types: Mapping[str, TensorType]) -> dict[int, tuple[int, str]]:
    """``(elements, dtype)`` of each buffer of ``plan_buffers``: the largest value it holds."""
    sizes: dict[int, tuple[int, str]] = {}
    for value, bid in planned.items():
        t = types[value]
        if bid not in sizes or sizes[bid][0] < t.size:
            sizes[bid] = (t.size, t.dtype)
    return sizes
