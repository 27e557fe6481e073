"""The task scheduler's objective when a network is tuned with alternatives: layout or Winograd
variants of a group (``--layout-tuning``, ``--winograd``) and fused pairs (``--fuse-pairs``).

The default objective, sum over tasks of weight x best latency, counts every variant and every
pair as if the network ran them all: a ResNet-18 tuned with ``--winograd`` read 43.8 ms while the
network it compiles to was estimated at 12.8 ms, and the gradient scheduler spent trials on
variants that could no longer be chosen as readily as on the ones the network would run.

Here the objective is the network as it will be compiled, made smooth so its gradient still
reaches a variant that is close: per group, the mean of its variants' latencies weighted by a
softmax of their speed (``soft_choice``: the fastest alone when it leads clearly, the plain mean
when they tie; a variant ``SOFTNESS`` x the fastest slower weighs e^-1 as much); then per
candidate pair of groups, fused or not as ``choose_pairs`` would choose on these costs
(greedily by saving, no group in two pairs), the fused one counted with the same soft choice
against the two groups. Layout transforms are not counted (they are measured apart). The value
is what ``network tune`` prints as the estimated latency during the run.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

# The softmax temperature, relative to the fastest alternative: a variant 5% slower than the
# fastest weighs e^-1 of it, 15% slower e^-3.
SOFTNESS = 0.05

Objective = Callable[[Sequence[float]], float]


def soft_choice(costs: Sequence[float], softness: float = SOFTNESS) -> float:
    """The softmax-weighted mean of ``costs`` (weights exp(-(c - min) / (softness x min))):
    between the smallest and the mean, equal to the smallest when one alternative is clearly
    faster. Empty: 0."""
    if not costs:
        return 0.0
    low = min(costs)
    if len(costs) == 1 or not math.isfinite(low) or low <= 0:
        return float(low)
    t = softness * low
    ws = [math.exp(-(c - low) / t) if math.isfinite(c) else 0.0 for c in costs]
    return float(sum(w * c for w, c in zip(ws, costs) if w) / sum(ws))


def network_objective(group_tasks: Sequence[Sequence[int]], pairs: Sequence[tuple[int, int, int]] = (),
                      softness: float = SOFTNESS) -> Objective:
    """The objective over the scheduler's task latencies: ``group_tasks[g]`` the task index of
    each alternative of group ``g`` (none: a group no task costs); ``pairs`` ``(producer group,
    consumer group, fused task index)``."""
    groups = [tuple(ts) for ts in group_tasks]
    cands = [(int(a), int(b), int(t)) for a, b, t in pairs]

    def objective(costs: Sequence[float]) -> float:
        per_group = [soft_choice([costs[t] for t in ts], softness) for ts in groups]
        total = sum(per_group)
        savings = []
        for a, b, t in cands:
            separate = per_group[a] + per_group[b]
            saving = separate - soft_choice([costs[t], separate], softness)
            if saving > 0:
                savings.append((saving, a, b))
        used: set[int] = set()
        for saving, a, b in sorted(savings, reverse=True):
            if a not in used and b not in used:
                used.update((a, b))
                total -= saving
        return float(total)

    return objective


def objective_for(tasks: Sequence[object], group_keys: Sequence[Sequence[str]],
                  pair_keys: Sequence[tuple[int, int, str]] = (), softness: float = SOFTNESS) -> Objective | None:
    """``network_objective`` with the alternatives given by workload key (``group_keys[g]``: the
    keys of group ``g``'s variants, a key of no task being a group with no reduction, costed 0;
    ``pair_keys``: ``(producer, consumer, fused key)``), matched to ``tasks`` (each with a
    ``workload_key``). None (the caller keeps the default objective) when a pair's key matches
    no task or some task is no group's or pair's alternative."""
    index = {getattr(t, "workload_key"): i for i, t in enumerate(tasks)}
    groups = [sorted({index[k] for k in keys if k in index}) for keys in group_keys]
    if any(k not in index for _, _, k in pair_keys):
        return None
    pairs = [(a, b, index[k]) for a, b, k in pair_keys]
    if {i for g in groups for i in g} | {t for _, _, t in pairs} != set(range(len(tasks))):
        return None
    return network_objective(groups, pairs, softness)
