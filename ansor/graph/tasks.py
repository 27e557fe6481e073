"""Task extraction: a network's fused subgraphs as ``SearchTask``\\ s with weights.

Here: ``lower_groups`` fuses the graph (``fuse.fuse``) and lowers every group to a ComputeDAG
(``te_ops.lower_group``); ``tasks_from_groups`` merges groups whose DAGs have the same workload
key - a hash of the computation and shapes, independent of every name - into one task whose
weight is how many times it occurs. ``plan.plan_network`` calls both, once per network, and
``plan.extract_tasks`` returns its tasks. As in TVM's auto-scheduler, by default only subgraphs with a reduction (conv, dense,
matmul, pools, softmax, norms) are tasks; ``include_simple=True`` adds the injective-only ones.

A task knows which of its inputs are constants of the network in every occurrence (weights, and
arrays derived from them at compile time): ``constant_inputs``, argument positions. With
``layout_rewrite`` (the default) they are the task's ``layout_rewrite_inputs``: a candidate that
packs one is measured with the pack outside the timed kernel, as ``compile_network`` runs it.

A task also knows its ``network_footprint_bytes``: what the rest of the network touches between
two calls of one of its kernels, for the runner's network mode (``measure.runner``: constants
rotated over that many bytes). Approximated as the argument bytes (inputs, weights, outputs) of
every other fused group of one inference, each counted once per group: an activation written by
one kernel and read by the next counts twice, as it may be in the caches twice in its two
layouts; the layout transforms between groups and the executor's own buffers are left out.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from compute import dtype as dt
from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp

from ..search_task import SearchTask
from .fuse import DEFAULT_MAX_DEPTH, FusedGroup, fuse
from .ir import Graph, GraphError, display_name
from .te_ops import LoweredGroup, lower_group


class GraphTask(SearchTask):
    """A ``SearchTask`` for one fused subgraph of a network, shared by its ``weight`` identical
    occurrences (``group_names``: the fused node names of each, for display)."""

    def __init__(self, dag: ComputeDAG, desc: str, group_names: Sequence[str], weight: int,
                 constant_inputs: Sequence[int] = (), layout_rewrite: bool = True,
                 network_footprint_bytes: int | None = None):
        super().__init__(tensors=dag, desc=desc,
                         layout_rewrite_inputs=constant_inputs if layout_rewrite else ())
        self.group_names = list(group_names)
        self.weight = weight
        self.constant_inputs = tuple(sorted(constant_inputs))
        # The rest of the network's bytes between two calls (module docstring; None: not known).
        self.network_footprint_bytes = network_footprint_bytes

    def __str__(self) -> str:
        shown = ", ".join(self.group_names[:3]) + (", ..." if len(self.group_names) > 3 else "")
        return (f"Task {self.desc} (weight {self.weight}, {self.flop_count / 1e6:.2f} MFLOP each; "
                f"key {self.workload_key[:8]}; subgraphs: {shown})\n{self.compute_dag}")


@dataclass
class Occurrence:
    """One fused group of a network as lowered: the group, its tensors and their ComputeDAG
    (groups with equal workload keys are occurrences of one task)."""

    group: FusedGroup
    lowered: LoweredGroup
    dag: ComputeDAG


# Ops that only rename a row-major value: a group of these alone runs no kernel (``executor``).
VIEW_OPS = frozenset({"reshape"})


def is_view_group(o: Occurrence) -> bool:
    """Whether the group holds only view ops (``VIEW_OPS``), whatever its layouts."""
    return all(n.op in VIEW_OPS for n in o.group.nodes)


def has_reduction(dag: ComputeDAG) -> bool:
    """Whether any stage of ``dag`` reduces (what makes a subgraph worth tuning)."""
    return any(isinstance(op, ComputeOp) and op.reduce_axes for op in dag.ops)


def group_desc(group: FusedGroup, variant: str | None = None) -> str:
    """``conv2d+add+relu 1x56x56x64``: the op chain and output shape (names stay out: they are
    untrusted and identical subgraphs share a task). A ``variant`` other than NHWC is appended
    in brackets (``[NCHW16c]``); a Winograd one also renames the conv: ``conv2d_winograd+add+relu
    1x14x14x256 [winograd4]``."""
    names = [n.op for n in group.nodes]
    if variant is not None and variant.startswith("winograd") and names[0] == "conv2d":
        names[0] = "conv2d_winograd"
    ops = "+".join(names)
    if len(ops) > 80:
        ops = ops[:77] + "..."
    tag = f" [{variant}]" if variant is not None and variant != "NHWC" else ""
    return f"{ops} {'x'.join(map(str, group.nodes[-1].type.shape))}{tag}"


def _check_no_empty_tensors(graph: Graph) -> None:
    """Kernels index tensors whose every dimension is at least 1: an empty value (ONNX allows
    them, e.g. a Shape sliced to nothing) is a GraphError naming it, not a ValueError deep in
    the lowering. The numpy interpreter (``ansor.graph.run``) runs such graphs."""
    for node in graph.nodes:
        for name in (*node.inputs, node.name):
            t = graph.type_of(name)
            if 0 in t.shape:
                raise GraphError(f"value {display_name(name)} {t} (used by node {display_name(node.name)}, "
                                 f"{node.op}) is empty: compiled kernels need every dimension to be at least 1")


def lower_groups(graph: Graph, max_depth: int = DEFAULT_MAX_DEPTH) -> list[Occurrence]:
    """Every fused group of ``graph`` with its tensors and DAG, in execution order."""
    _check_no_empty_tensors(graph)
    out = []
    for g in fuse(graph, max_depth):
        low = lower_group(g, graph)
        out.append(Occurrence(g, low, ComputeDAG(low.tensors)))
    return out


def argument_bytes(dag: ComputeDAG) -> int:
    """The bytes of a kernel's arguments: its inputs (weights too) and outputs."""
    total = 0
    for t in dag.tensors:
        n = dt.nbytes(t.dtype)
        for d in t.shape:
            n *= int(d)
        total += n
    return total


def constant_positions(occ: Occurrence, constants: Collection[str]) -> set[int]:
    """The argument positions of ``occ``'s kernel bound to a constant: a graph constant (by
    name) or an array derived at compile time (a transposed dense weight, pool divisors)."""
    return {k for k, v in enumerate(occ.lowered.inputs)
            if not isinstance(v, str) or v in constants}


def tasks_from_groups(occurrences: Sequence[Occurrence], include_simple: bool = False,
                      constants: Collection[str] = (), layout_rewrite: bool = True,
                      variants: Sequence[str] | None = None
                      ) -> tuple[list[GraphTask], list[int], dict[int, int]]:
    """Merge occurrences by workload key. Returns the tasks, their weights and, per occurrence
    index, the index of its task (occurrences that are not tasks are absent). ``constants``: the
    graph's constant value names; an input constant in every occurrence of a task is one of its
    ``constant_inputs`` (``layout_rewrite``: measured pre-packed). ``variants``: per occurrence,
    the layout or algorithm it is lowered in (named in the task's desc, ``group_desc``). Each task's
``network_footprint_bytes``: ``occurrences``' argument bytes less its own (module docstring)."""
    by_key: dict[str, int] = {}
    members: list[list[int]] = []
    task_of: dict[int, int] = {}
    for i, occ in enumerate(occurrences):
        if not include_simple and not has_reduction(occ.dag):
            continue
        key = occ.dag.workload_key
        if key not in by_key:
            by_key[key] = len(members)
            members.append([])
        members[by_key[key]].append(i)
        task_of[i] = by_key[key]
    network_bytes = sum(argument_bytes(o.dag) for o in occurrences)
    tasks: list[GraphTask] = []
    for idx in members:
        first = occurrences[idx[0]]
        const = set.intersection(*(constant_positions(occurrences[i], constants) for i in idx))
        tag = None if variants is None else variants[idx[0]]
        tasks.append(GraphTask(first.dag, group_desc(first.group, tag),
                               [occurrences[i].group.name for i in idx], len(idx),
                               sorted(const), layout_rewrite,
                               network_bytes - argument_bytes(first.dag)))
    return tasks, [t.weight for t in tasks], task_of

