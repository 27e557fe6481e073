"""Confirming the tasks' best schedules: a best is trusted after ``remeasure_best`` measurements.

A single measurement can be lucky (a quiet moment of the machine); a ``TaskScheduler`` measures
each unconfirmed best once more at the start of every round and in a last pass, its cost being
the median of its measurements (``measure.measure.pooled_cost``). Re-measurements are logged like
any measurement and pooled, never counted as trials. A base of ``TaskScheduler``, on top of
``SchedulerNumbers`` (it confirms the tuned tasks).
"""
from __future__ import annotations

from measure.measure import MeasureInput

from .scheduler_numbers import SchedulerNumbers

__all__ = ["MAX_CONFIRM_PASSES", "BestConfirmation"]

# The last pass confirms bests until none is left unconfirmed; each pass measures one best per
# task, and a best that falls (a lucky window) hands over to the next, so a task may need a few.
MAX_CONFIRM_PASSES = 24


class BestConfirmation(SchedulerNumbers):
    """Confirmation of a ``TaskScheduler``'s bests (which sets every attribute below)."""

    remeasure_best: int
    remeasured: int

    # ---- confirming bests ----------------------------------------------------------------------
    def unconfirmed(self) -> list[int]:
        """The tuned tasks whose best has fewer than ``remeasure_best`` measurements."""
        assert self.measurer is not None
        out = []
        for i in self.tuned_tasks():
            best = self.measurer.stats(self.tasks[i].workload_key).best
            b = best.best
            if b is not None and best.samples(b[1]) < self.remeasure_best:
                out.append(i)
        return out

    def _confirm(self) -> str | None:
        """Measure every unconfirmed best once more, in one batch (its samples are then taken
        seconds apart, one per round, not back to back in one lucky window); logged like any
        measurement, pooled, not trials. Returns why the run must stop, else None."""
        assert self.measurer is not None
        which = self.unconfirmed()
        if not which:
            return None
        inputs = [MeasureInput(self.tasks[i], self.measurer.stats(self.tasks[i].workload_key).best.best[1])
                  for i in which]
        results = self.measurer.measure(inputs)
        for i, inp, res in zip(which, inputs, results):
            stop = self.measurer.commit(self.tasks[i].workload_key, [inp], [res], remeasure=True)
            if stop is not None:
                return stop
            self.remeasured += 1
        return None

    def _confirm_all(self) -> str | None:
        """The last pass: confirm until every task's best is confirmed (a best that falls is
        replaced by the next, which is then confirmed), at most a few passes."""
        for _ in range(MAX_CONFIRM_PASSES):
            if not self.unconfirmed():
                return None
            stop = self._confirm()
            if stop:
                return stop
        return None
