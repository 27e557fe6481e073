"""Tuning sessions and curves: what each tuning run of a workload took (a sessions file next to
its log), how many of a log's records are this machine's, and the best-so-far curve of a log
by trial and by tuning seconds (pauses between sessions not counted).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

from ansor.search_task import SearchTask
from measure.record import LineWarner, iter_lines
from measure.target import toolchain_key

from .workloads import BenchWorkload


def count_records(log: str | os.PathLike, task: SearchTask) -> int:
    """Records of ``task`` measured with this toolchain in ``log`` (0 if there is no log)."""
    if not os.path.isfile(log):
        return 0
    here, key = toolchain_key(), task.workload_key
    warner = LineWarner(os.fspath(log))
    n = sum(1 for line in iter_lines(log, warner)
            if line.workload_key == key and line.target_key == here)
    warner.finish()
    return n


def read_json(path: Path, default: Any) -> Any:
    """The JSON in ``path``, or ``default`` if it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def add_session(path: Path, session: dict) -> None:
    """Append one tuning session (start, end, trials, wall seconds) to a sessions file."""
    data = read_json(path, {"sessions": []})
    data.setdefault("sessions", []).append(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def tuning_summary(sessions_path: Path, total_trials: int | None = None) -> dict:
    """Tuning wall time and seconds per trial over every recorded session."""
    sessions = read_json(sessions_path, {}).get("sessions", [])
    trials = sum(int(s.get("trials", 0)) for s in sessions)
    wall = sum(float(s.get("wall_seconds", 0.0)) for s in sessions)
    out = {"sessions": len(sessions), "timed_trials": trials, "wall_seconds": wall,
           "seconds_per_trial": wall / trials if trials else None}
    if total_trials is not None:
        out["trials_in_log"] = total_trials
    return out


def elapsed_times(timestamps: Sequence[float], sessions: Sequence[dict]) -> list[float]:
    """Seconds of tuning time at each timestamp: the durations of the earlier sessions plus the
    time since the start of the session holding it (pauses between sessions do not count). A
    timestamp outside every session counts from the first timestamp."""
    spans = sorted((float(s["start"]), float(s["end"])) for s in sessions
                   if "start" in s and "end" in s)
    out = []
    for ts in timestamps:
        before = 0.0
        for start, end in spans:
            if start <= ts <= end + 1.0:
                out.append(before + ts - start)
                break
            before += end - start
        else:
            out.append(ts - timestamps[0] if timestamps else 0.0)
    return out


def ours_curve(log: Path, sessions_path: Path, wl: BenchWorkload) -> dict:
    """Best GFLOPS so far after each of our trials, by trial and by tuning seconds."""
    task = SearchTask(func=wl.workload, args=wl.args)
    flop = float(task.flop_count)
    here, key = toolchain_key(), task.workload_key
    costs, stamps = [], []
    if log.is_file():
        warner = LineWarner(os.fspath(log))
        for line in iter_lines(log, warner):
            if line.workload_key == key and line.target_key == here:
                costs.append(line.result.mean_cost if line.is_valid else None)
                stamps.append(line.result.timestamp)
        warner.finish()
    sessions = read_json(sessions_path, {}).get("sessions", [])
    return best_so_far(costs, elapsed_times(stamps, sessions), flop)


def best_so_far(costs: Sequence[float | None], seconds: Sequence[float],
                flop: float) -> dict:
    """Best GFLOPS so far after each trial (None before the first valid one), with the trial
    numbers and the tuning seconds of each."""
    best, best_gflops = math.inf, []
    for c in costs:
        if c is not None and 0 < c < best:
            best = c
        best_gflops.append(flop / best / 1e9 if best < math.inf else None)
    return {"trials": list(range(1, len(costs) + 1)), "seconds": list(seconds),
            "best_gflops": best_gflops}
