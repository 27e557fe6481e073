"""A tuning run's view of a log other runs may write too: their schedules count as measured.

``ProgramMeasurer`` makes one per run that has a log. It claims the log (``measure.log_share``:
a second tuner on the log is warned about, once, at its start) and, before candidates are
measured, reads the records appended since its last look: another run's schedule of one of our
tasks, timed with this toolchain, then counts as measured (and competes for the best) exactly as
a record found when resuming does, so it is not measured again. Lines this run wrote itself are
recognised by their steps and skipped without a replay.
"""
from __future__ import annotations

import os
from typing import Any, Container, Sequence

from measure.cost_floor import implausible_for_dag
from measure.log_share import LogClaim
from measure.measure import MeasureInput
from measure.record import RecordLine, target_summary

from .task_records import is_placeholder


class SharedLog:
    """The claim on a run's log and the records others append to it (see the module doc)."""

    def __init__(self, path: str | os.PathLike):
        self.claim = LogClaim(path)
        self.here = target_summary()["key"]
        self._pending: dict[str, list[RecordLine]] = {}
        self._written: set[tuple[str, tuple]] = set()

    def wrote(self, workload_key: str, inputs: Sequence[MeasureInput]) -> None:
        """Note a batch this run appended: its lines are skipped when read back."""
        self._written.update((workload_key, tuple(inp.state.steps)) for inp in inputs)

    def catch_up(self, workload_key: str, dag: Any, stats: Any, tasks: Container[str]) -> int:
        """Book the schedules of ``workload_key`` (DAG ``dag``) that others logged since the last
        look as measured in ``stats`` (the measurer's ``TaskStats``, which imports this module);
        lines of our other ``tasks`` wait for their turn. Returns how many."""
        for line in self.claim.new_lines():
            if (line.target_key == self.here and line.workload_key in tasks
                    and (line.workload_key, line.steps) not in self._written):
                self._pending.setdefault(line.workload_key, []).append(line)
        n = 0
        for line in self._pending.pop(workload_key, ()):
            if is_placeholder(line):  # a template configuration that did not instantiate
                continue
            if line.result.ok and implausible_for_dag(line.result.costs, dag) is not None:
                continue
            try:
                state = dag.replay(line.steps)
            except Exception:  # noqa: BLE001 - as on resume, a line that does not replay is skipped
                continue
            if state.canonical_key() not in stats.measured_keys:
                stats.add_resumed(state, line.result, valid=line.is_valid)
                n += 1
        return n

    def close(self) -> None:
        self.claim.release()
