"""Task extraction: a network's fused subgraphs as ``SearchTask``\\ s with weights.

``extract_tasks(graph)`` fuses the graph (``fuse.fuse``), lowers every group to a ComputeDAG
(``te_ops.lower_group``) and merges groups whose DAGs have the same workload key - a hash of the
computation and shapes, independent of every name - into one task whose weight is how many times
it occurs. As in TVM's auto-scheduler, by default only subgraphs with a reduction (conv, dense,
matmul, pools, softmax, norms) are tasks; ``include_simple=True`` adds the injective-only ones.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compute.compute_dag import ComputeDAG
from compute.tensor import ComputeOp

from ..search_task import SearchTask
from .fuse import DEFAULT_MAX_DEPTH, FusedGroup, fuse
from .ir import Graph
from .te_ops import LoweredGroup, lower_group


class GraphTask(SearchTask):
    """A ``SearchTask`` for one fused subgraph of a network, shared by its ``weight`` identical
    occurrences (``group_names``: the fused node names of each, for display)."""

    def __init__(self, dag: ComputeDAG, desc: str, group_names: Sequence[str], weight: int):
        super().__init__(tensors=dag, desc=desc)
        self.group_names = list(group_names)
        self.weight = weight

    def __str__(self) -> str:
        shown = ", ".join(self.group_names[:3]) + (", ..." if len(self.group_names) > 3 else "")
        return (f"Task {self.desc} (weight {self.weight}, {self.flop_count / 1e6:.2f} MFLOP each; "
                f"key {self.workload_key[:8]}; subgraphs: {shown})\n{self.compute_dag}")


@dataclass
class _Occurrence:
    group: FusedGroup
    lowered: LoweredGroup
    dag: ComputeDAG


def has_reduction(dag: ComputeDAG) -> bool:
    """Whether any stage of ``dag`` reduces (what makes a subgraph worth tuning)."""
    return any(isinstance(op, ComputeOp) and op.reduce_axes for op in dag.ops)


def group_desc(group: FusedGroup) -> str:
    """``conv2d+add+relu 1x56x56x64``: the op chain and output shape (names stay out: they are
    untrusted and identical subgraphs share a task)."""
    ops = "+".join(n.op for n in group.nodes)
    if len(ops) > 80:
        ops = ops[:77] + "..."
    return f"{ops} {'x'.join(map(str, group.nodes[-1].type.shape))}"


def lower_groups(graph: Graph, max_depth: int = DEFAULT_MAX_DEPTH) -> list[_Occurrence]:
    """Every fused group of ``graph`` with its tensors and DAG, in execution order."""
    out = []
    for g in fuse(graph, max_depth):
        low = lower_group(g, graph)
        out.append(_Occurrence(g, low, ComputeDAG(low.tensors)))
    return out


def tasks_from_groups(occurrences: Sequence[_Occurrence], include_simple: bool = False
                      ) -> tuple[list[GraphTask], list[int], dict[int, int]]:
    """Merge occurrences by workload key. Returns the tasks, their weights and, per occurrence
    index, the index of its task (occurrences that are not tasks are absent)."""
    by_key: dict[str, int] = {}
    tasks: list[GraphTask] = []
    task_of: dict[int, int] = {}
    for i, occ in enumerate(occurrences):
        if not include_simple and not has_reduction(occ.dag):
            continue
        key = occ.dag.workload_key
        if key not in by_key:
            by_key[key] = len(tasks)
            tasks.append(GraphTask(occ.dag, group_desc(occ.group), [], 0))
        t = tasks[by_key[key]]
        t.weight += 1
        t.group_names.append(occ.group.name)
        task_of[i] = by_key[key]
    return tasks, [t.weight for t in tasks], task_of


def extract_tasks(graph: Graph, include_simple: bool = False,
                  max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[list[GraphTask], list[int]]:
    """``tasks, weights``: one task per distinct fused subgraph with a reduction (every distinct
    subgraph with ``include_simple``), weight = number of occurrences, in first-occurrence order."""
    if not isinstance(graph, Graph):
        raise TypeError(f"extract_tasks takes an ansor.graph.Graph, got {type(graph).__name__}")
    tasks, weights, _ = tasks_from_groups(lower_groups(graph, max_depth), include_simple)
    return tasks, weights
