"""The contracts between the tuners and what measures for them: ``Builder`` and ``Runner``.

A tuner (``ansor.tuning``, the task scheduler, the template tuners, ``measure_batch``) needs no
more of a builder or runner than what is written here; the local classes (``LocalBuilder``,
``LocalRunner``: worker processes on this machine) and the Dask ones (``DaskBuilder``,
``DaskRunner``: a cluster's workers) each implement it, neither is a subclass of the other, so
either stands in wherever one is expected. Both are ``runtime_checkable``: ``isinstance`` checks
that an object has every member (not their signatures).
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from .measure import BuildResult, MeasureInput, MeasureResult


@runtime_checkable
class Builder(Protocol):
    """Compiles candidates. ``timeout``: seconds one build may take (BUILD_TIMEOUT past it)."""

    timeout: float

    def build(self, inputs: Sequence[MeasureInput], verbose: int = 0) -> list[BuildResult]:
        """One result per input, in order; a candidate's failure is an error code, never an
        exception (``MeasureUnavailableError`` when the machinery cannot build at all)."""
        ...

    def close(self) -> None:
        """Release the workers or the cluster connection; the builder is not used after it."""
        ...

    def __enter__(self) -> "Builder":
        ...

    def __exit__(self, *exc: object) -> None:
        ...


@runtime_checkable
class Runner(Protocol):
    """Times built candidates. The settings are read at each ``run``, so a tuner may change them
    for a while (the default schedule is timed with ``number=1, repeat=1``): ``timeout`` (seconds
    per candidate), ``number``, ``repeat``, ``min_repeat_ms``, ``warmup_ms`` (see
    ``measure.timer.time_calls``) and ``check_correctness``. The local and Dask runners also
    have ``cache`` (``"warm"`` or ``"cold"``, ``measure.runner``); it is not required here (a
    runner without it times warm), so a runner written before the modes still qualifies."""

    timeout: float
    number: int
    repeat: int
    min_repeat_ms: float
    warmup_ms: float
    check_correctness: bool

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        """One result per input, in order; a candidate whose build failed carries its build
        error and is not run."""
        ...

    def close(self) -> None:
        ...

    def __enter__(self) -> "Runner":
        ...

    def __exit__(self, *exc: object) -> None:
        ...
