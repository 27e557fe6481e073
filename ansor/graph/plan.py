"""A network plan, built once: the fused groups, their layouts, the tasks and the map between them.

``plan_network(graph)`` fuses the graph and lowers every group (``tasks.lower_groups``, the only
call of it in a command), lowers the groups chosen to run in a blocked layout again in that
layout, and merges the occurrences into tasks (``tasks.tasks_from_groups``). The result is handed
to everything that needs it - task extraction (``extract_tasks``), layout tuning (the NHWC
``groups``), compilation (``compile_network``) and the CLI - instead of each fusing and lowering
the network again.

``with_layouts`` gives the plan of the same network in other layouts without fusing or lowering
the NHWC groups again (only the blocked groups are lowered, in their layout).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compute.compute_dag import ComputeDAG

from .fuse import DEFAULT_MAX_DEPTH
from .ir import Graph
from .layout_tuning import check_layouts
from .layouts import NHWC, lower_group_in_layout
from .scale_fold import fold_channel_scales
from .tasks import GraphTask, Occurrence, is_view_group, lower_groups, tasks_from_groups
from .two_anchor import PairCandidate, fuse_pairs


@dataclass(frozen=True)
class NetworkPlan:
    """One network, fused and lowered. ``groups``: every fused group in NHWC, in execution order
    (the layout solver's and the sidecar's view); ``layouts[i]``: group ``i``'s layout;
    ``occurrences[i]``: group ``i`` lowered in it, ``input_layouts[i]`` the layout it reads each
    input in (None: a constant or any); ``tasks``/``weights``: the distinct occurrences worth
    tuning, ``task_of``: occurrence index -> task index (absent: not a task)."""

    graph: Graph
    groups: tuple[Occurrence, ...]
    layouts: tuple[str, ...]
    occurrences: tuple[Occurrence, ...]
    input_layouts: tuple[tuple[str | None, ...], ...]
    tasks: tuple[GraphTask, ...]
    weights: tuple[int, ...]
    task_of: dict[int, int]
    layout_rewrite: bool
    include_simple: bool

    def with_layouts(self, layouts: Sequence[str] | None, source: str = "layouts") -> NetworkPlan:
        """The plan with group ``i`` in ``layouts[i]`` (None: NHWC everywhere), checked
        (``GraphError`` naming ``source``); the NHWC groups are reused, not lowered again."""
        return _laid_out(self.graph, self.groups, layouts, self.layout_rewrite, self.include_simple, source)

    def with_pairs(self, chosen: Sequence[PairCandidate]) -> NetworkPlan:
        """The plan with each chosen pair of groups merged into one (``two_anchor``), in NHWC;
        the other groups are reused, not lowered again."""
        groups = tuple(fuse_pairs(self.groups, chosen))
        return _laid_out(self.graph, groups, None, self.layout_rewrite, self.include_simple, "layouts")


def plan_network(graph: Graph, layout_rewrite: bool = True, layouts: Sequence[str] | None = None,
                 include_simple: bool = False, max_depth: int = DEFAULT_MAX_DEPTH,
                 fold_scales: bool = True) -> NetworkPlan:
    """Fuse and lower ``graph`` once. ``layouts``: one per fused group (None: NHWC everywhere);
    ``layout_rewrite``: tasks measure constant packs outside the timed kernel (as the compiled
    network runs them); ``include_simple``: injective-only groups are tasks too;
    ``fold_scales``: per-channel scales read by a conv moved onto its weight first
    (``scale_fold``; the plan's ``graph`` is then the rewritten one, which callers use with its
    groups)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"plan_network takes an ansor.graph.Graph, got {type(graph).__name__}")
    if fold_scales:
        graph = fold_channel_scales(graph)
    return _laid_out(graph, tuple(lower_groups(graph, max_depth)), layouts, layout_rewrite, include_simple,
                     "layouts")


def _laid_out(graph: Graph, groups: tuple[Occurrence, ...], layouts: Sequence[str] | None,
              layout_rewrite: bool, include_simple: bool, source: str) -> NetworkPlan:
    chosen = (NHWC,) * len(groups) if layouts is None else check_layouts(graph, groups, layouts, source)
    occ: list[Occurrence] = []
    needs: list[tuple[str | None, ...]] = []
    for o, lay in zip(groups, chosen):
        if lay == NHWC:  # the group's own lowering (its DAG already hashed): nothing lowered again
            occ.append(o)
            needs.append(tuple(None if not isinstance(v, str) or v in graph.constants else NHWC
                               for v in o.lowered.inputs))
            continue
        low = lower_group_in_layout(o.group, graph, lay)
        occ.append(Occurrence(o.group, low.lowered, ComputeDAG(low.lowered.tensors)))
        needs.append(tuple(low.input_layouts))
    tasks, weights, task_of = tasks_from_groups(occ, include_simple, graph.constants, layout_rewrite, chosen)
    return NetworkPlan(graph, groups, tuple(chosen), tuple(occ), tuple(needs), tuple(tasks), tuple(weights),
                       task_of, layout_rewrite, include_simple)


def extract_tasks(graph: Graph, include_simple: bool = False,
                  max_depth: int = DEFAULT_MAX_DEPTH, layout_rewrite: bool = True
                  ) -> tuple[list[GraphTask], list[int]]:
    """``tasks, weights``: one task per distinct fused subgraph with a reduction (every distinct
    subgraph with ``include_simple``), weight = number of occurrences, in first-occurrence order.
    ``layout_rewrite``: tasks measure candidates that pack a constant input with the pack done
    outside the timed kernel (as ``compile_network(..., layout_rewrite=True)`` runs them).
    The tasks of ``plan_network(graph)``; a caller that needs the plan too builds it and reads
    ``plan.tasks``."""
    if not isinstance(graph, Graph):
        raise TypeError(f"extract_tasks takes an ansor.graph.Graph, got {type(graph).__name__}")
    plan = plan_network(graph, layout_rewrite, include_simple=include_simple, max_depth=max_depth)
    return list(plan.tasks), list(plan.weights)


def is_view(plan: NetworkPlan, i: int) -> bool:
    """Whether occurrence ``i`` is a row-major reshape of one activation, read and written NHWC
    (the value as typed): its output is then the same bytes as its input, a view, not a copy."""
    o, graph = plan.occurrences[i], plan.graph
    return (is_view_group(o) and len(o.lowered.inputs) == 1
            and isinstance(o.lowered.inputs[0], str) and o.lowered.inputs[0] not in graph.constants
            and plan.layouts[i] == NHWC and plan.input_layouts[i][0] == NHWC)
