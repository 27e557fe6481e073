"""What a single-operator tuning call found (``TuneResult``) and the summary it prints.

Three schedules are compared: the default one (the naive loop nest of ``init_state()``, timed
apart from the trials for the speed-up figure), the rule-based untuned one (``ansor.untuned``,
the first trial unless ``TuningOptions.measure_untuned_first`` is off) and the searched ones.
Kept apart from the loop (``ansor.tuning``, which re-exports it) so that each stays readable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .measurer import STOP_INTERRUPTED, STOP_LOG_FAILED, STOP_UNAVAILABLE
from .tuning_format import format_duration, format_seconds, format_speedup
from .tuning_format import gflops_part as _gflops_part

if TYPE_CHECKING:
    from sketch.loop_state import State

__all__ = ["TuneResult"]


@dataclass(frozen=True)
class TuneResult:
    """What a tuning call found. Costs are seconds per call; ``best_*`` cover the resumed records
    too, ``trials`` and ``errors`` only this call's new measurements.

    ``best_state`` is None (and ``best_cost``/``best_gflops`` too) when no schedule has been
    measured successfully; ``default_cost`` is None when the default schedule could not be
    measured (see ``default_note``). ``best_*`` and ``speedup_over_default`` are the log's best
    (every trial: the untuned schedule and the searched ones). ``untuned_cost``: the rule-based
    untuned schedule's (``untuned_state``), a logged trial, so ``best_cost <= untuned_cost``;
    None when it was not measured (``untuned_note`` says why, empty when it was not asked for).
    The default schedule is timed for comparison, not logged; when it ran faster than every
    trial (``default_is_faster``: a tiny operator on a busy machine), it is the schedule to keep:
    ``kept_state``/``kept_cost``/``kept_speedup`` are the faster of the two, and what the summary
    prints - never slower than the default or the untuned schedule.
    """

    task_desc: str
    best_state: "State | None"
    best_cost: float | None
    best_gflops: float | None
    trials: int
    errors: int
    wall_seconds: float
    default_cost: float | None
    speedup_over_default: float | None
    log_file: str | None
    stop_reason: str = ""
    resumed_records: int = 0
    search_seconds: float = 0.0
    measure_seconds: float = 0.0
    default_note: str = ""
    model_seconds: float = 0.0  # the cost model learning from measurements (features + training)
    default_state: "State | None" = None
    untuned_cost: float | None = None
    untuned_state: "State | None" = None
    untuned_note: str = ""

    @property
    def default_is_faster(self) -> bool:
        """The default schedule ran faster than every tuned schedule."""
        return (self.default_cost is not None and self.best_cost is not None
                and self.default_cost < self.best_cost)

    @property
    def untuned_is_best(self) -> bool:
        """The log's best is the untuned schedule: no searched schedule ran faster."""
        return (self.best_state is not None and self.untuned_state is not None
                and self.best_state.canonical_key() == self.untuned_state.canonical_key())

    @property
    def kept_state(self) -> "State | None":
        """The schedule to keep: the best tuned one, or the default when it ran faster."""
        return self.default_state if self.default_is_faster else self.best_state

    @property
    def kept_cost(self) -> float | None:
        return self.default_cost if self.default_is_faster else self.best_cost

    @property
    def kept_speedup(self) -> float | None:
        """``kept_cost`` over the default schedule's (>= 1), or None when either is unknown."""
        kept = self.kept_cost
        if kept is None or self.default_cost is None or kept <= 0:
            return None
        return self.default_cost / kept

    @property
    def interrupted(self) -> bool:
        return self.stop_reason == STOP_INTERRUPTED

    @property
    def log_failed(self) -> bool:
        """The run stopped because a batch could not be appended to the log."""
        return self.stop_reason.startswith(STOP_LOG_FAILED)

    @property
    def measurement_stopped(self) -> bool:
        """The run stopped because the builder or runner could not go on (a Dask scheduler
        went away); ``stop_reason`` says how to resume."""
        return self.stop_reason.startswith(STOP_UNAVAILABLE)

    def _gflops(self, cost: float) -> float | None:
        # The FLOPs are known when the best has GFLOPS.
        if self.best_gflops is None or self.best_cost is None or cost <= 0:
            return None
        return self.best_gflops * self.best_cost / cost

    def summary(self) -> str:
        """The block ``tune`` prints at the end (verbose >= 1)."""
        lines = [f"[{self.task_desc}] tuning finished: {self.stop_reason}"]
        if self.best_cost is None:
            lines.append("  best time        none (no schedule was measured successfully)")
        else:
            kept = self.kept_cost
            assert kept is not None
            why = (" (the default schedule: no tuned schedule was faster)" if self.default_is_faster
                   else " (the untuned schedule: no searched schedule was faster)"
                   if self.untuned_is_best else "")
            lines.append(f"  best time        {format_seconds(kept)}{_gflops_part(self._gflops(kept))}"
                         f"{why}")
            if self.default_is_faster:
                lines.append(f"  tuned best       {format_seconds(self.best_cost)}"
                             f"{_gflops_part(self.best_gflops)} (the log's best)")
        if self.untuned_cost is not None:
            lines.append(f"  untuned schedule {format_seconds(self.untuned_cost)}"
                         f"{_gflops_part(self._gflops(self.untuned_cost))} (rule-based, a trial)")
        elif self.untuned_note:
            lines.append(f"  untuned schedule {self.untuned_note}")
        if self.default_cost is not None:
            d = f"  default schedule {format_seconds(self.default_cost)} (naive loop nest)"
            if self.kept_speedup is not None:
                d += f" -> speed-up {format_speedup(self.kept_speedup)} over the default schedule"
            lines.append(d)
        elif self.default_note:
            lines.append(f"  default schedule {self.default_note}")
        resumed = f" (+{self.resumed_records} from the log)" if self.resumed_records else ""
        lines.append(f"  trials           {self.trials} new{resumed}, {self.errors} error(s)")
        lines.append(f"  wall time        {format_duration(self.wall_seconds)} (search "
                     f"{format_duration(self.search_seconds)}, measurement "
                     f"{format_duration(self.measure_seconds)}, cost model "
                     f"{format_duration(self.model_seconds)})")
        lines.append(f"  log file         {self.log_file if self.log_file else '(none)'}")
        return "\n".join(lines)
