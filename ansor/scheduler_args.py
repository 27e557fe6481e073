"""The checks of ``TaskScheduler``'s arguments: tasks, weights, pick strategy and filter.

Kept apart from the scheduler's loop so that ``task_scheduler`` reads as the run itself; every
check raises the ``TypeError`` / ``ValueError`` the constructor documents, before anything runs.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Sequence

from .scheduler_policy import TaskFilter

if TYPE_CHECKING:
    from .search_task import SearchTask

__all__ = ["check_pick_args", "check_task_filter", "check_task_weights", "task_index"]


def task_index(tasks: Sequence["SearchTask"]) -> dict[str, int]:
    """Each task's number by workload key; not tasks, none or the same computation twice raise."""
    from .search_task import SearchTask  # noqa: PLC0415 - the task module imports tuning

    if not tasks:
        raise ValueError("TaskScheduler needs at least one task")
    keys: dict[str, int] = {}
    for i, t in enumerate(tasks):
        if not isinstance(t, SearchTask):
            raise TypeError(f"TaskScheduler task {i} must be an ansor.SearchTask, got "
                            f"{type(t).__name__}")
        if t.workload_key in keys:
            raise ValueError(f"TaskScheduler tasks {keys[t.workload_key]} and {i} are the same "
                             f"computation ({t.desc}): merge them and add their weights")
        keys[t.workload_key] = i
    return keys


def check_task_weights(tasks: Sequence["SearchTask"], task_weights: Sequence[float] | None) -> list[float]:
    """The weights (default: each task's ``weight``, else 1), one positive number per task."""
    if task_weights is None:
        task_weights = [getattr(t, "weight", 1) for t in tasks]
    weights = [float(w) for w in task_weights]
    if len(weights) != len(tasks):
        raise ValueError(f"TaskScheduler: {len(weights)} task_weights for {len(tasks)} tasks")
    for i, w in enumerate(weights):
        if not math.isfinite(w) or w <= 0:
            raise ValueError(f"TaskScheduler task_weights[{i}] must be a positive number, got {w!r}")
    return weights


def check_pick_args(strategy: str, alpha: float, beta: float, backward_window_size: int) -> None:
    """Raise on an unknown strategy or a gradient constant out of its range."""
    if strategy not in ("gradient", "round-robin"):
        raise ValueError(f"TaskScheduler strategy must be 'gradient' or 'round-robin', got {strategy!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"TaskScheduler alpha must be in [0, 1], got {alpha!r}")
    if not beta >= 1.0:
        raise ValueError(f"TaskScheduler beta must be >= 1, got {beta!r}")
    if isinstance(backward_window_size, bool) or not isinstance(backward_window_size, int) \
            or backward_window_size < 1:
        raise ValueError("TaskScheduler backward_window_size must be an integer >= 1, got "
                         f"{backward_window_size!r}")


def check_task_filter(task_filter: "TaskFilter | str | Callable[[int, SearchTask], bool] | None"
                 ) -> "TaskFilter | Callable[[int, SearchTask], bool] | None":
    """A ``TaskFilter`` (a pattern string becomes one), a predicate or None."""
    if isinstance(task_filter, str):
        task_filter = TaskFilter(pattern=task_filter)
    if task_filter is not None and not (isinstance(task_filter, TaskFilter) or callable(task_filter)):
        raise TypeError("TaskScheduler task_filter must be a TaskFilter, a pattern string or "
                        f"a predicate, got {type(task_filter).__name__}")
    return task_filter
