"""A schedule for every fused group of a network plan: record, else guess, else rules.

``choose_schedules(plan, log_file)`` is the first half of ``compile_network`` (the second is
``executor.link``): each task's best record in ``log_file`` (one pass over the log); a task
without one gets the pre-trained model's zero-trial pick (``untuned="guess"``: ``best_guess``
with ``search_task.NETWORK_GUESS_SEARCH``, the network's named setting) or the rule-based
schedule (``untuned="rules"``, ``ansor.untuned``); a group that is no task always gets the rules.
Untuned tasks are named loudly: a table (name, shape, weight, share of FLOPs) on stderr, and an
error with ``strict=True`` (TVM fell back silently when a fused op changed a key, apache/tvm#7135).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ..records import best_records
from ..search_task import NETWORK_GUESS_SEARCH
from ..tuning import default_cost_model
from ..untuned import untuned_schedule
from .ir import display_name
from .plan import NetworkPlan

UNTUNED_MODES = ("rules", "guess")


class UntunedTaskError(RuntimeError):
    """``compile_network(..., strict=True)`` found tasks with no record in the log."""


def untuned_table(tasks: Sequence[Any], which: Sequence[int]) -> str:
    """``| ID | task | shape | weight | FLOP share |`` for the tasks ``which``."""
    total = sum(t.flop_count * t.weight for t in tasks) or 1.0
    rows = [("ID", "subgraph", "weight", "FLOPs share")]
    for ti in which:
        t = tasks[ti]
        rows.append((str(ti), t.desc, str(t.weight), f"{100 * t.flop_count * t.weight / total:.1f}%"))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    return "\n".join("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |" for r in rows)


def choose_schedules(plan: NetworkPlan, log_file: str | os.PathLike | None = None, strict: bool = False,
                     verbose: bool = True, file: TextIO | None = None, untuned: str = "rules") -> list[Any]:
    """Per occurrence of ``plan`` (execution order), its schedule (a ``State``). Occurrences of
    one task, and groups with one workload key that are no task, share one state object (so
    ``link`` builds their kernel once). ``UntunedTaskError`` with ``strict`` when a task has no
    record; ValueError for ``untuned="guess"`` without a pre-trained model."""
    if untuned not in UNTUNED_MODES:
        raise ValueError(f"compile_network untuned must be one of {', '.join(UNTUNED_MODES)}, got {untuned!r}")
    tasks = plan.tasks
    states: dict[int, Any] = {}
    if log_file is not None:
        for ti, best in enumerate(best_records(log_file, list(tasks))):  # one pass over the log
            if best is not None:
                states[ti] = best[0].state
    missing = [ti for ti in range(len(tasks)) if ti not in states]
    guess_model = None
    if missing:
        table = untuned_table(tasks, missing)
        if strict:
            raise UntunedTaskError(f"{len(missing)} of {len(tasks)} task(s) have no record"
                                   + (f" in {os.fspath(log_file)!r}" if log_file is not None else "")
                                   + ":\n" + table)
        if verbose:
            how = "the pre-trained model's zero-trial pick" if untuned == "guess" else "an untuned schedule"
            print(f"ansor: {len(missing)} of {len(tasks)} task(s) of {display_name(plan.graph.name)} have no "
                  f"tuning record and use {how}:\n{table}", file=file or sys.stderr)
        if untuned == "guess":
            guess_model = default_cost_model(0)
            if getattr(guess_model, "base_booster", None) is None:
                raise ValueError("compile_network(untuned='guess') needs the pre-trained cost model, "
                                 "and none is available (ANSOR_PRETRAINED_MODEL=none, or a package "
                                 "without cost_model/data/pretrained.json)")
    rules: dict[str, Any] = {}  # workload key -> the rule-based state
    out: list[Any] = []
    for i, o in enumerate(plan.occurrences):
        ti = plan.task_of.get(i)
        if ti is not None and ti not in states and guess_model is not None:
            states[ti] = tasks[ti].best_guess(cost_model=guess_model, search_params=NETWORK_GUESS_SEARCH)
        if ti is not None and ti in states:
            out.append(states[ti])
            continue
        key = o.dag.workload_key
        if key not in rules:
            rules[key] = untuned_schedule(o.dag)[0]
        out.append(rules[key])
    return out
