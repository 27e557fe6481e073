"""Measure a batch of candidates on this machine: build them all, then run them.

Building finishes before running starts, so no compiler process competes with the kernel being
timed. This is the one entry point the search needs; ``LocalBuilder`` and ``LocalRunner`` are
re-exported for convenience.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from .builder import LocalBuilder
from .measure import MeasureInput, MeasureResult
from .protocols import Builder, Runner
from .runner import LocalRunner

__all__ = ["LocalBuilder", "LocalRunner", "measure_batch"]


def measure_batch(inputs: Sequence[MeasureInput], builder: Builder, runner: Runner,
                  verbose: int = 0) -> list[MeasureResult]:
    """Build then run ``inputs``; one result per input, in order. ``all_cost`` is the candidate's
    build time plus its run time."""
    inputs = list(inputs)
    build_results = builder.build(inputs, verbose=verbose)
    results = runner.run(inputs, build_results, verbose=verbose)
    return [dataclasses.replace(r, all_cost=b.time_cost + r.all_cost, timestamp=r.timestamp)
            for b, r in zip(build_results, results)]
