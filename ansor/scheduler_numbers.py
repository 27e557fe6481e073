"""What a ``TaskScheduler`` knows about its tasks at any moment, and the pick it makes from it.

Each task's best cost and trial count, the latencies the objective sees, the estimated network
latency and each task's share of it, the live tasks, the gradients and the next task to tune.
The progress callbacks (``scheduler_progress``) read these too; the arithmetic itself is in
``scheduler_policy``. A base of ``TaskScheduler``, kept apart so that the scheduler's class is
the run.
"""
from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Callable, Sequence

from . import scheduler_policy as policy
from .scheduler_policy import NO_COST, GradientParams, TaskState

if TYPE_CHECKING:
    from .measurer import ProgramMeasurer
    from .search_task import SearchTask
    from .tuning import TuningOptions

__all__ = ["SchedulerNumbers"]


class SchedulerNumbers:
    """The numbers and the pick of a ``TaskScheduler`` (which sets every attribute below)."""

    tasks: list["SearchTask"]
    measurer: "ProgramMeasurer | None"
    options: "TuningOptions | None"
    state: list[TaskState]
    flops: list[float]
    weights: list[float]
    objective: Callable[[Sequence[float]], float]
    base_objective: Callable[[Sequence[float]], float]
    calibration: list[float] | None
    calibrations: int
    strategy: str
    alpha: float
    beta: float
    window: int
    tags: list[str]
    groups: dict[str, list[int]]
    last_task: int | None
    _rng: random.Random

    # ---- the numbers -------------------------------------------------------------------------------
    def best_cost(self, i: int) -> float | None:
        """Task i's best valid cost in seconds (this run's and the log's), or None."""
        if self.measurer is None:
            return None
        b = self.measurer.stats(self.tasks[i].workload_key).best.best
        return None if b is None else b[0]

    def task_trials(self, i: int) -> int:
        """Measurements of task i: restored from the log plus this run's."""
        st = self.state[i]
        new = 0 if self.measurer is None else self.measurer.stats(self.tasks[i].workload_key).trials
        return st.restored + new

    def _known(self) -> list[float | None]:
        return [self.best_cost(i) for i in range(len(self.tasks))]

    def costs(self) -> list[float]:
        """Every task's latency as the objective sees it: its best cost; for a task excluded by
        the filter that has no record, its FLOPs at the measured tasks' median throughput
        (``estimated_shares``); ``NO_COST`` when neither is known."""
        return policy.objective_costs(self._known(), self.flops, [st.tuned for st in self.state])

    def estimated_shares(self) -> list[float]:
        """Each task's share of the estimated latency sum(weight x latency): the best cost where
        known, else its FLOPs at the median throughput of the measured tasks (by FLOPs alone
        when none is measured: the same throughput for every task)."""
        return policy.estimated_shares(self._known(), self.flops, self.weights)

    def estimated_latency(self) -> float | None:
        """The objective over ``costs()``, once every task has a latency; else None."""
        costs = self.costs()
        if any(c >= NO_COST for c in costs):
            return None
        return float(self.objective(costs))

    def set_calibration(self, factors: Sequence[float] | None) -> None:
        """Scale each task's latency by ``factors[i]`` before the objective sees it (the
        estimate, the gradients and early stopping all read the scaled objective): how much
        slower the task's kernel runs inside the network than its records say
        (``ansor.graph.network_calibration``). None: unscaled again."""
        if factors is None:
            self.calibration, self.objective = None, self.base_objective
        else:
            fs = [float(f) for f in factors]
            if len(fs) != len(self.tasks) or not all(math.isfinite(f) and f > 0 for f in fs):
                raise ValueError(f"calibration: one positive finite factor per task ({len(self.tasks)}), "
                                 f"got {factors!r}")
            base = self.base_objective

            def calibrated(costs: Sequence[float]) -> float:
                return base([c if c >= NO_COST else c * f for c, f in zip(costs, fs)])
            self.calibration, self.objective = fs, calibrated
        self.calibrations += 1

    def live_tasks(self) -> list[int]:
        return [i for i, st in enumerate(self.state) if st.tuned and not st.dead]

    def tuned_tasks(self) -> list[int]:
        return [i for i, st in enumerate(self.state) if st.tuned]

    def budget(self) -> int:
        return 0 if self.options is None else self.options.num_measure_trials

    # ---- the pick ------------------------------------------------------------------------------
    def gradients(self) -> dict[int, float]:
        """The gradient of every live task (the most negative one is tuned next)."""
        return policy.gradients(self.objective, self.costs(), self._known(), self.live_tasks(),
                                [st.history for st in self.state], [st.rounds for st in self.state],
                                self.flops, [self.groups.get(tag, []) for tag in self.tags],
                                GradientParams(self.alpha, self.beta, self.window))

    def pick(self) -> int | None:
        """The task to tune next (None: every task is dead)."""
        live = self.live_tasks()
        if not live:
            return None
        if self.strategy == "round-robin":
            return policy.next_round_robin(live, len(self.tasks), self.last_task)
        return policy.lowest_gradient(live, self.gradients(), self._rng)

    def _adjust_group(self, i: int) -> None:
        """Task i leaves its similarity group when it is not similar after all (``leaves_group``)."""
        group = self.groups.get(self.tags[i])
        if group and policy.leaves_group(i, group, self.flops, self._known(),
                                         [st.rounds for st in self.state], self.beta):
            group.remove(i)
