"""Two-anchor fusion at the graph level (issue 45 item 2): two fused groups as one kernel.

``fuse.fuse`` gives every conv its own group, so MobileNet-V2's expand 1x1 conv writes its
(six times wider) output to memory and the depthwise conv reads it back. Where a group's output is
read by exactly one other group, and nothing else (not a graph output), and the two anchors are
one of ``PAIRS`` (1x1 -> depthwise 3x3 or 5x5, depthwise -> 1x1, 1x1 -> 3x3), the two groups can run
as one: the merged group lowers like any group (``te_ops.lower_group``) and the sketch rule
``RuleTwoAnchorFusion`` computes the producer a tile at a time inside the consumer's tiles, so
the intermediate never goes to memory.

Fusing is not always faster (the producer's halo is recomputed per tile, and the kernel is
harder to tune), so it is chosen by measurement, as layouts are: ``pair_tasks`` gives each
candidate's merged group as a task of its own (named by its anchors, ``conv1x1+dwconv3x3
1x28x28x32``; its first conv asks the sketch rules for the fused structure only), tuned beside
the separate ones; ``choose_pairs`` fuses a pair only when the log holds a record of the fused
task faster than the sum of the separate tasks' best records (an unmeasured fused task is never
chosen); candidates that share a group (expand -> depthwise and depthwise -> project) are taken
greedily, the largest measured saving first (optimal for MobileNet's chains of two candidates).
``fuse_pairs(occurrences, chosen)`` is the network's groups with the chosen pairs merged, what
``plan.NetworkPlan.with_pairs`` and ``compile_network(fuse_pairs=...)`` run.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from compute import expr as E
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp

from ..records import best_records
from .fuse import PATTERN_LEVEL, FusedGroup, node_pattern_of
from .ir import Graph, GraphError, Node
from .layout_sidecar import read_pair_choices, sidecar_path
from .layout_tuning import find_choice
from .tasks import GraphTask, Occurrence, tasks_from_groups
from .te_ops import lower_group

ANCHOR = "out_elemwise_fusable"
# (producer kind, consumer kind) pairs worth a fused kernel: the producer's tile at the
# consumer's tile (plus a 3x3's halo) is small and the intermediate it saves is large.
# The depthwise 5x5 of EfficientNet and MobileNet-V3 as the 3x3 (bound inference sizes the halo).
PAIRS = frozenset({("conv1x1", "dwconv3x3"), ("dwconv3x3", "conv1x1"), ("conv1x1", "conv3x3"),
                   ("conv1x1", "dwconv5x5"), ("dwconv5x5", "conv1x1")})


def anchor_kind(node: Node, graph: Graph) -> str:
    """``conv1x1``, ``dwconv3x3``, ``conv3x3`` (a grouped conv: ``gconv3x3``) for a conv2d node,
    its op name otherwise: how a two-anchor group is named."""
    if node.op != "conv2d":
        return node.op
    kh, kw, ci_g, _ = graph.type_of(node.inputs[1]).shape
    groups = node.attrs.get("groups", 1)
    ci = graph.type_of(node.inputs[0]).shape[3]
    prefix = "conv" if groups == 1 else ("dwconv" if ci_g == 1 and groups == ci else "gconv")
    return f"{prefix}{kh}x{kw}"


def anchors(group: FusedGroup) -> list[Node]:
    """The group's heavy nodes (conv, dense, matmul, pool): one per group from ``fuse``."""
    return [n for n in group.nodes if PATTERN_LEVEL[node_pattern_of(n, None)] == PATTERN_LEVEL[ANCHOR]]


@dataclass(frozen=True)
class PairCandidate:
    """Groups ``producer`` and ``consumer`` (indices into the network's groups) that may run as
    one kernel, ``occurrence``: their merged group lowered; ``kinds``: the anchors' kinds."""

    producer: int
    consumer: int
    occurrence: Occurrence
    kinds: tuple[str, str]


def merge_groups(a: FusedGroup, b: FusedGroup) -> FusedGroup:
    """``a`` then ``b`` as one group (``b`` reads ``a``'s output, which nobody else reads)."""
    inputs = tuple(dict.fromkeys([*a.inputs, *(v for v in b.inputs if v != a.output)]))
    pattern = max(a.pattern, b.pattern, key=PATTERN_LEVEL.__getitem__)
    return FusedGroup(a.nodes + b.nodes, inputs, pattern)


def _why_not(graph: Graph, groups: Sequence[FusedGroup], i: int, j: int) -> str | None:
    a, b = groups[i], groups[j]
    if a.output in graph.outputs:
        return "the producer's output is a graph output"
    readers = [k for k, g in enumerate(groups) if a.output in g.inputs]
    if readers != [j]:
        return "the producer's output has other readers"
    aa, ab = anchors(a), anchors(b)
    if len(aa) != 1 or len(ab) != 1:
        return "a group without exactly one conv anchor"
    if b.nodes[0] is not ab[0] or ab[0].inputs[0] != a.output:
        return "the consumer's conv does not read the producer's output as its data"
    if sum(1 for n in b.nodes for v in n.inputs if v == a.output) != 1:
        return "the consumer group reads the producer's output more than once"
    kinds = (anchor_kind(aa[0], graph), anchor_kind(ab[0], graph))
    if kinds not in PAIRS:
        return f"{kinds[0]} -> {kinds[1]} is not a fused pattern"
    return None


def pair_candidates(graph: Graph, occurrences: Sequence[Occurrence]) -> list[PairCandidate]:
    """Every pair of consecutive groups of ``occurrences`` (the network's groups, execution
    order) that could run as one kernel, each merged group lowered."""
    groups = [o.group for o in occurrences]
    out = []
    for i, g in enumerate(groups):
        readers = [k for k, h in enumerate(groups) if g.output in h.inputs]
        if len(readers) != 1 or _why_not(graph, groups, i, readers[0]) is not None:
            continue
        j = readers[0]
        merged = merge_groups(g, groups[j])
        try:
            low = lower_group(merged, graph)
        except GraphError:
            continue  # an optional kernel: the two groups stay as they are
        kinds = (anchor_kind(anchors(g)[0], graph), anchor_kind(anchors(groups[j])[0], graph))
        out.append(PairCandidate(i, j, Occurrence(merged, low, _fused_only(low.tensors)), kinds))
    return out


def _fused_only(tensors: list) -> ComputeDAG:
    """The merged group's DAG with its first conv asking the sketch rules for the fused
    structure only (``attrs["sketch"] = "two_anchor"``, part of the workload key): the separate
    structures are the separate tasks' space, so the fused task's budget goes to fused kernels."""
    first = next(op for op in ComputeDAG(tensors).ops
                 if isinstance(op, ComputeOp) and isinstance(op.body, E.Reduce))
    first.attrs["sketch"] = "two_anchor"
    return ComputeDAG(tensors)


def pair_tasks(graph: Graph, candidates: Sequence[PairCandidate], layout_rewrite: bool = True
               ) -> tuple[list[GraphTask], list[int]]:
    """One task per distinct merged group (weight: its occurrences), named by its anchors and
    output shape (``conv1x1+dwconv3x3 1x28x28x32``) in the task table and the tuning history."""
    tasks, weights, task_of = tasks_from_groups([c.occurrence for c in candidates], constants=graph.constants,
                                                layout_rewrite=layout_rewrite)
    first: dict[int, int] = {}
    for k, ti in task_of.items():
        first.setdefault(ti, k)
    for ti, t in enumerate(tasks):
        c = candidates[first[ti]]
        desc = f"{'+'.join(c.kinds)} {'x'.join(map(str, c.occurrence.group.nodes[-1].type.shape))}"
        tasks[ti] = GraphTask(t.compute_dag, desc, t.group_names, t.weight, t.constant_inputs, layout_rewrite)
    return tasks, weights


@dataclass(frozen=True)
class PairChoice:
    """One candidate's measured times (seconds, ``inf``: no record) and whether it is fused."""

    candidate: PairCandidate
    fused_seconds: float
    separate_seconds: float
    fused: bool


def choose_pairs(graph: Graph, occurrences: Sequence[Occurrence], candidates: Sequence[PairCandidate],
                 log_file: str | os.PathLike, group_seconds: Sequence[float] | None = None) -> list[PairChoice]:
    """Per candidate, the fused task's best time in ``log_file`` against the sum of the two
    separate groups' best times; fused when measured and faster (or when the separate ones are
    not all measured but the fused one is); overlapping candidates taken greedily by saving.
    ``group_seconds``: per group of ``occurrences``, its time run separately when the caller
    knows better than its NHWC record (the fastest of its layout and Winograd variants)."""
    def task(o: Occurrence) -> GraphTask:
        return GraphTask(o.dag, "pair", [o.group.name], 1)

    keys: dict[str, GraphTask] = {}
    for c in candidates:
        for o in (c.occurrence, occurrences[c.producer], occurrences[c.consumer]):
            keys.setdefault(o.dag.workload_key, task(o))
    bests = dict(zip(keys, best_records(log_file, list(keys.values()))))

    def seconds(o: Occurrence) -> float:
        b = bests[o.dag.workload_key]
        return math.inf if b is None else float(b[1].mean_cost)

    def alone(i: int) -> float:
        return seconds(occurrences[i]) if group_seconds is None else float(group_seconds[i])

    times = [(seconds(c.occurrence), alone(c.producer) + alone(c.consumer)) for c in candidates]
    order = sorted(range(len(candidates)), key=lambda k: -(times[k][1] - times[k][0])
                   if math.isfinite(times[k][1]) else -math.inf)
    used: set[int] = set()
    fused: set[int] = set()
    for k in order:
        f, s = times[k]
        c = candidates[k]
        if math.isfinite(f) and f < s and not ({c.producer, c.consumer} & used):
            fused.add(k)
            used |= {c.producer, c.consumer}
    return [PairChoice(c, f, s, k in fused) for k, (c, (f, s)) in enumerate(zip(candidates, times))]


def fuse_pairs(occurrences: Sequence[Occurrence], chosen: Sequence[PairCandidate]) -> list[Occurrence]:
    """The groups with each chosen pair merged into one (at the consumer's place in the order);
    GraphError when two chosen pairs share a group or a pair does not match the groups."""
    merged: dict[int, Occurrence] = {}
    dropped: set[int] = set()
    for c in chosen:
        if {c.producer, c.consumer} & (dropped | set(merged)):
            raise GraphError(f"fused pairs share group {occurrences[c.producer].group.name}: each group "
                             "can be fused with one other only")
        if not (0 <= c.producer < c.consumer < len(occurrences)) or c.occurrence.group.output != \
                occurrences[c.consumer].group.output:
            raise GraphError(f"fused pair ({c.producer}, {c.consumer}) does not match the network's groups")
        merged[c.consumer] = c.occurrence
        dropped.add(c.producer)
    return [merged.get(k, o) for k, o in enumerate(occurrences) if k not in dropped]


FUSE_PAIRS_MODES = ("auto", "all")


def recorded_pairs(occurrences: Sequence[Occurrence], candidates: Sequence[PairCandidate],
                   log_file: str | os.PathLike) -> list[PairCandidate] | None:
    """The pairs last recorded for this network (``find_choice``) in ``log_file``'s sidecar, as
    candidates, or None when none is recorded; ``GraphError`` naming the file and
    line for a recorded pair that is not a candidate of this network."""
    side = sidecar_path(log_file)
    found = find_choice(read_pair_choices(side), occurrences)
    if found is None:
        return None
    by_pair = {(c.producer, c.consumer): c for c in candidates}
    missing = [q for q in found[0] if q not in by_pair]
    if missing:
        raise GraphError(f"{side}:{found[1]}: groups {missing[0]} are not a pair this network can fuse")
    return [by_pair[q] for q in found[0]]


def resolve_pairs(graph: Graph, occurrences: Sequence[Occurrence], fuse_pairs: object,
                  log_file: str | os.PathLike | None) -> list[PairCandidate]:
    """The pairs ``compile_network(fuse_pairs=...)`` asks for: ``"auto"``, the pairs recorded for
    this network beside ``log_file`` (``network_choice``: what ``network tune --fuse-pairs``
    chose), else those ``choose_pairs`` fuses by the times in ``log_file`` (none without a log);
    ``"all"``, every candidate that
    shares no group with an earlier one; None, none; or a sequence of ``(producer, consumer)``
    group indices (``GraphError`` naming a pair that cannot be fused, and why)."""
    if fuse_pairs is None:
        return []
    if isinstance(fuse_pairs, str):
        if fuse_pairs not in FUSE_PAIRS_MODES:
            raise ValueError(f"fuse_pairs must be 'auto', 'all', None or (producer, consumer) group index "
                             f"pairs, got {fuse_pairs!r:.40}")
        if fuse_pairs == "auto" and log_file is None:
            return []
        cands = pair_candidates(graph, occurrences)
        if fuse_pairs == "auto":
            recorded = recorded_pairs(occurrences, cands, log_file)
            if recorded is not None:
                return recorded
            return [c.candidate for c in choose_pairs(graph, occurrences, cands, log_file) if c.fused]
        used: set[int] = set()
        out = []
        for c in cands:
            if not {c.producer, c.consumer} & used:
                out.append(c)
                used |= {c.producer, c.consumer}
        return out
    try:
        wanted = [(int(i), int(j)) for i, j in fuse_pairs]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"fuse_pairs must be 'auto', 'all', None or (producer, consumer) group index "
                         f"pairs, got {fuse_pairs!r:.60}") from None
    groups = [o.group for o in occurrences]
    by_pair = {(c.producer, c.consumer): c for c in pair_candidates(graph, occurrences)}
    out = []
    for i, j in wanted:
        if not (0 <= i < len(groups) and 0 <= j < len(groups)):
            raise GraphError(f"fuse_pairs: ({i}, {j}) is not a pair of the network's {len(groups)} groups")
        if (i, j) not in by_pair:
            why = _why_not(graph, groups, i, j) or "the consumer does not read the producer"
            raise GraphError(f"fuse_pairs: groups {groups[i].name} and {groups[j].name} cannot be fused: {why}")
        out.append(by_pair[(i, j)])
    return out
