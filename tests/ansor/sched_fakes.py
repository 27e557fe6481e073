"""Fake measurement for the task-scheduler tests: nothing is compiled or run.

Each candidate's "cost" is fixed by its task and step list (a hash mapped into a range that
depends on the task's FLOPs), so runs are deterministic and fast; the runner records every
(workload key, canonical state key) it is asked to measure, and can sleep per batch so that a
subprocess run lasts long enough to be killed mid-run.
"""
from __future__ import annotations

import hashlib
import time
from typing import Sequence

from measure.builder import LocalBuilder
from measure.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from measure.runner import LocalRunner
from sketch.search_policy import SearchParams

SMALL_PARAMS = SearchParams(population_size=32, num_generations=1, init_min_population=8)


def fake_cost(inp: MeasureInput) -> float:
    """Seconds: the task's FLOPs at 1-10 GFLOPS, chosen by a hash of the schedule."""
    h = int.from_bytes(hashlib.sha256(inp.state.canonical_key().encode()).digest()[:8], "big")
    gflops = 1.0 + 9.0 * (h / 2.0 ** 64)
    return max(float(inp.task.flop_count), 1.0) / (gflops * 1e9)


class FakeBuilder(LocalBuilder):
    """Builds nothing (no worker pool is started)."""

    def build(self, inputs: Sequence[MeasureInput], verbose: int = 0) -> list[BuildResult]:
        return [BuildResult(None, int(MeasureErrorNo.NO_ERROR), "", 0.0) for _ in inputs]


class FakeRunner(LocalRunner):
    """Returns ``fake_cost`` for each candidate and remembers what it measured."""

    def __init__(self, sleep: float = 0.0) -> None:
        super().__init__()
        self.sleep = sleep
        self.measured: list[tuple[str, str]] = []

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        if self.sleep:
            time.sleep(self.sleep)
        out = []
        for inp in inputs:
            self.measured.append((inp.task.workload_key, inp.state.canonical_key()))
            out.append(MeasureResult((fake_cost(inp),), int(MeasureErrorNo.NO_ERROR), "",
                                     all_cost=0.0, timestamp=time.time()))
        return out
