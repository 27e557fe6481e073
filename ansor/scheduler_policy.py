"""The task scheduler's choice of task, as arithmetic on plain numbers (Ansor, section 6).

What the ``TaskScheduler`` decides each round - which task to tune, which tasks are similar,
which tasks a ``TaskFilter`` keeps, what a task without a measurement stands for - depends only on
the tasks' best costs, FLOPs, round histories and weights. Kept apart from the run loop (which
owns the measurer, the search policies and the log), it can be read and tested on made-up numbers.

The gradient of task i with best latency g after t rounds: ``chain`` = d objective / d latency_i
(numerically, so any objective works); ``backward`` = (best[t-1] - best[t-1-w]) / w over the last
w rounds; ``forward`` = min(-g / t, beta * flops_i / max_j(flops_j / cost_j) - g) over the similar
tasks j (same anchor op tag and int(log_1.618(flops + 1)): an optimistic guess that i can reach
its fastest sibling's throughput); ``grad = chain * (alpha * backward + (1 - alpha) * forward)``.
"""
from __future__ import annotations

import fnmatch
import math
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from compute.errors import InputError
from compute.tensor import ComputeOp

if TYPE_CHECKING:
    from .search_task import SearchTask

# The latency a task without any valid measurement stands for in the objective (TVM's 1e10 s):
# large enough that such a task dominates every gradient until it has a schedule.
NO_COST = 1e10
# The golden ratio base of the FLOP buckets of similar tasks (Ansor's choice).
_FLOP_BUCKET_BASE = 1.618
# A task leaves its similarity group after this many rounds more than any of its siblings.
_GROUP_LEAVE_ROUNDS = 5

Objective = Callable[[Sequence[float]], float]


@dataclass
class TaskState:
    """What the scheduler keeps of one task besides its measurements."""

    rounds: int = 0  # rounds spent (restored ones reconstructed from the log)
    restored: int = 0  # records restored from the log
    history: list[float] = field(default_factory=list)  # best cost after each round
    dead: str = ""  # why the task retired ("" = live)
    tuned: bool = True  # False: excluded by the filter


def default_objective(weights: Sequence[float]) -> Objective:
    """sum(weight x latency) over the tasks."""
    def objective(costs: Sequence[float]) -> float:
        return float(sum(w * c for w, c in zip(weights, costs)))

    return objective


# ---- the tasks' latencies ----------------------------------------------------------------------

def median_speed(flops: Sequence[float], known: Sequence[float | None]) -> float | None:
    """The median throughput (FLOP/s) of the tasks with a known cost and FLOPs (None: none)."""
    speeds = sorted(flops[i] / c for i, c in enumerate(known)
                    if c is not None and c > 0 and flops[i] > 0)
    return speeds[len(speeds) // 2] if speeds else None


def objective_costs(known: Sequence[float | None], flops: Sequence[float],
                    tuned: Sequence[bool]) -> list[float]:
    """Every task's latency as the objective sees it: its best cost ``known[i]``; for a task not
    tuned (``tuned[i]`` False) that has no cost, its FLOPs at the measured tasks' median
    throughput; ``NO_COST`` when neither is known."""
    speed = median_speed(flops, known)
    out = []
    for i, c in enumerate(known):
        if c is None and not tuned[i] and speed is not None:
            c = flops[i] / speed
        out.append(NO_COST if c is None else c)
    return out


def estimated_shares(known: Sequence[float | None], flops: Sequence[float],
                     weights: Sequence[float]) -> list[float]:
    """Each task's share of the estimated latency sum(weight x latency): the best cost where
    known, else its FLOPs at the median throughput of the measured tasks (by FLOPs alone
    when none is measured: the same throughput for every task)."""
    speed = median_speed(flops, known) or 1e9
    lat = [weights[i] * (c if c is not None else flops[i] / speed) for i, c in enumerate(known)]
    total = sum(lat)
    return [x / total if total > 0 else 1.0 / len(lat) for x in lat]


# ---- similar tasks -----------------------------------------------------------------------------

def anchor_tag(task: "SearchTask") -> str:
    """``conv2d_nhwc``: the tags of the task's reduction stages (its anchor ops), "" for a task
    without a reduction."""
    return "+".join(op.tag or op.name for op in task.compute_dag.ops
                    if isinstance(op, ComputeOp) and op.reduce_axes)


def similarity_tag(task: "SearchTask") -> str:
    """``conv2d_nhwc_27``: the ``anchor_tag`` and the FLOP bucket int(log_1.618(flops + 1)); ""
    for a task without a reduction (grouped with nothing)."""
    tags = anchor_tag(task)
    if not tags:
        return ""
    flops = float(task.flop_count or 0.0)
    return tags + f"_{int(math.log(flops + 1) / math.log(_FLOP_BUCKET_BASE))}"


def schedule_donors(tasks: Sequence["SearchTask"]) -> list[list[int]]:
    """Per task, the other tasks with its ``anchor_tag`` (any size), nearest in FLOPs first:
    whose best schedules it may start from (``TaskScheduler(share_schedules=True)``)."""
    tags = [anchor_tag(t) for t in tasks]
    logf = [math.log(float(t.flop_count or 0.0) + 1) for t in tasks]
    return [sorted((j for j in range(len(tasks)) if j != i and tags[i] and tags[j] == tags[i]),
                   key=lambda j: (abs(logf[j] - logf[i]), j)) for i in range(len(tasks))]


def similarity_groups(tags: Sequence[str]) -> dict[str, list[int]]:
    """The task indices of each non-empty similarity tag, in task order."""
    groups: dict[str, list[int]] = {}
    for i, tag in enumerate(tags):
        if tag:
            groups.setdefault(tag, []).append(i)
    return groups


def group_speed(group: Sequence[int], flops: Sequence[float], known: Sequence[float | None]) -> float:
    """The best measured throughput (FLOP/s) in a similarity group (0: none measured)."""
    return max((flops[j] / c for j in group if (c := known[j]) is not None and c > 0), default=0.0)


def leaves_group(i: int, group: Sequence[int], flops: Sequence[float], known: Sequence[float | None],
                 rounds: Sequence[int], beta: float) -> bool:
    """Whether task i leaves its similarity group ``group``: after 5 rounds more than any sibling
    it still runs below the group's best throughput / beta, so the optimism about it was
    unfounded."""
    if len(group) <= 1 or i not in group:
        return False
    c = known[i]
    if c is None or flops[i] <= 0:
        return False
    others = max(rounds[j] for j in group if j != i)
    return flops[i] / c < group_speed(group, flops, known) / beta and \
        rounds[i] > _GROUP_LEAVE_ROUNDS + others


# ---- the pick ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class GradientParams:
    """Ansor's constants of the gradient: ``alpha`` weighs the backward (observed) slope against
    the forward (hoped-for) one, ``beta`` is the optimism about similar tasks, ``window`` the
    rounds the backward slope spans."""

    alpha: float = 0.2
    beta: float = 2.0
    window: int = 3


def gradients(objective: Objective, costs: Sequence[float], known: Sequence[float | None],
              live: Sequence[int], histories: Sequence[Sequence[float]], rounds: Sequence[int],
              flops: Sequence[float], groups: Sequence[Sequence[int]],
              params: GradientParams) -> dict[int, float]:
    """The gradient of every live task (the most negative one is tuned next). ``costs``: the
    objective's latencies (``objective_costs``); ``known``: the best measured costs;
    ``histories[i]``: the best cost after each round of task i; ``groups[i]``: the similarity
    group task i is in (empty: none)."""
    base = float(objective(costs))
    out: dict[int, float] = {}
    for i in live:
        g = costs[i]
        delta = max(g * 1e-3, 1e-12)
        lowered = list(costs)
        lowered[i] = g - delta
        chain = (base - float(objective(lowered))) / delta
        h, w = histories[i], params.window
        backward = (h[-1] - h[-1 - w]) / w if len(h) > w else 0.0
        t = max(1, rounds[i])
        forward = -g / t
        group = groups[i]
        if len(group) > 1 and flops[i] > 0:
            best_speed = group_speed(group, flops, known)
            if best_speed > 0:
                forward = min(forward, params.beta * flops[i] / best_speed - g)
        out[i] = chain * (params.alpha * backward + (1 - params.alpha) * forward)
    return out


def lowest_gradient(live: Sequence[int], grads: dict[int, float], rng: random.Random) -> int:
    """The live task of the most negative gradient; ties broken at random by ``rng``."""
    lowest = min(grads.values())
    best = [i for i in live if grads[i] == lowest]
    return best[0] if len(best) == 1 else rng.choice(best)


def next_round_robin(live: Sequence[int], n_tasks: int, last: int | None) -> int:
    """The first live task after ``last`` in turn (from task 0 when None); ``live`` not empty."""
    start = -1 if last is None else last
    return next(j % n_tasks for j in range(start + 1, start + 1 + n_tasks) if j % n_tasks in live)


# ---- which tasks are tuned ---------------------------------------------------------------------

@dataclass(frozen=True)
class TaskFilter:
    """Which tasks to tune. ``pattern``: a shell glob matched against the whole task description
    or a regular expression searched in it (``"conv2d*"``, ``"dense|matmul"``); ``min_share``: the
    task's share of the estimated latency (weight x best cost from the log; tasks without a record
    estimated from their FLOPs at the measured tasks' median throughput, or by FLOPs alone when
    none is measured) must be at least this (0.05 = 5%). Both given: both must hold."""

    pattern: str | None = None
    min_share: float = 0.0

    def __post_init__(self) -> None:
        if self.pattern is not None and not isinstance(self.pattern, str):
            raise TypeError(f"TaskFilter.pattern must be a string, got {type(self.pattern).__name__}")
        if (isinstance(self.min_share, bool) or not isinstance(self.min_share, (int, float))
                or not 0.0 <= self.min_share < 1.0):
            raise ValueError(f"TaskFilter.min_share must be a number in [0, 1), got {self.min_share!r}")

    def matches_name(self, desc: str) -> bool:
        if self.pattern is None:
            return True
        if fnmatch.fnmatchcase(desc, self.pattern):
            return True
        try:
            return re.search(self.pattern, desc) is not None
        except re.error:
            return False  # not a regular expression: the glob alone decides


TaskPredicate = Callable[[int, "SearchTask"], bool]


def select_tasks(task_filter: TaskFilter | TaskPredicate, tasks: Sequence["SearchTask"],
                 shares: Callable[[], Sequence[float]]) -> list[bool]:
    """Which tasks ``task_filter`` keeps (``shares()``: ``estimated_shares``, asked for by a
    ``TaskFilter`` only). A filter that excludes every task raises InputError (a ValueError) naming them."""
    if isinstance(task_filter, TaskFilter):
        share = shares()
        keep = [task_filter.matches_name(t.desc) and share[i] >= task_filter.min_share
                for i, t in enumerate(tasks)]
    else:
        keep = [bool(task_filter(i, t)) for i, t in enumerate(tasks)]
    if not any(keep):
        shown = "; ".join(t.desc for t in tasks[:8]) + ("; ..." if len(tasks) > 8 else "")
        raise InputError(f"the task filter {task_filter!r} excludes all {len(tasks)} tasks ({shown})")
    return keep
