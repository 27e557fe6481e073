"""The graph-level choices made from a tuning log, in the order the compile applies them: which
pairs of groups run as one kernel (``two_anchor``), then which variant (layout, Winograd tile
size) each group of the resulting network runs (``layout_tuning``).

``network tune --fuse-pairs`` may be combined with ``--layout-tuning`` / ``--winograd``: every
group's variants and every fused pair are tuned as tasks of their own. A pair is then fused when
its fused kernel beats the two groups run separately *each in its fastest variant* (a 3x3 conv
after a 1x1 may be faster as Winograd than fused with it), and the layouts are solved for the
network with those pairs merged (a merged group runs NHWC: ``layouts`` refuses a second conv).
Both choices are written to the sidecar (``LOG.layouts.jsonl``): the pairs under the network's
key, the layouts under the merged network's, so ``compile_network(fuse_pairs="auto",
layouts="auto")`` (``executor.plan_as_compiled``) builds exactly what was chosen here.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .ir import Graph
from .layout_sidecar import append_entries, sidecar_path
from .layout_tuning import LayoutChoice, group_costs, layout_variants, network_key, solve_layouts
from .plan import NetworkPlan
from .two_anchor import PairCandidate, PairChoice, choose_pairs


@dataclass(frozen=True)
class NetworkChoice:
    """What was chosen: ``pairs`` (None: no pair was offered), the ``plan`` with them merged and
    the ``layouts`` solved for it (None: no variant was offered), with the ``variants`` solved."""

    pairs: list[PairChoice] | None
    plan: NetworkPlan
    layouts: LayoutChoice | None
    variants: list | None


def choose_network(plan: NetworkPlan, log_file: str | os.PathLike, candidates: Sequence[PairCandidate] | None,
                   variants: Sequence | None, blocked: bool = False, winograd: bool = False,
                   cache: str | None = None, factors: Mapping[str, float] | None = None) -> NetworkChoice:
    """Choose the pairs (``candidates``) then the variants (``variants``, the ``layout_variants``
    of ``plan.groups`` tuned with ``blocked`` layouts / ``winograd``) from ``log_file`` and record
    both beside it. Transforms missing from the sidecar are measured (``cache`` mode).
    ``factors``: per workload key, how much slower the task's kernel ran in the compiled network
    than its records (``network_calibration``): the variants are chosen on their records scaled
    by them, so a Winograd conv that loses more in the network than the direct one (its larger
    transformed tensors) is chosen on what it costs there. The pairs are chosen on records."""
    graph: Graph = plan.graph
    pairs = None
    merged = plan
    if candidates:
        alone = None
        if variants is not None:  # a group run separately runs its fastest variant
            # (a group with no record of any variant costs 0 there, "keep NHWC": unmeasured here)
            alone = [min(c) or math.inf for c in group_costs(variants, graph, log_file)]
        pairs = choose_pairs(graph, plan.groups, candidates, log_file, alone)
        chosen = [c.candidate for c in pairs if c.fused]
        append_entries(sidecar_path(log_file), [{"kind": "pairs", "network": network_key(plan.groups),
                                                 "pairs": [[c.producer, c.consumer] for c in chosen]}])
        if chosen:
            merged = plan.with_pairs(chosen)
    layouts = None
    solved = None
    if variants is not None:
        if merged is plan:
            solved = list(variants)
        else:  # the untouched groups keep their variants; a merged group is offered NHWC only
            solved = layout_variants(graph, occurrences=merged.groups, blocked=blocked, winograd=winograd)
        layouts = solve_layouts(graph, log_file, variants=solved, cache=cache, factors=factors)
    return NetworkChoice(pairs, merged, layouts, solved)
