"""A builder or runner whose machinery goes away (``MeasureUnavailableError``, e.g. a Dask
scheduler shut down) ends every tuner cleanly: the batch under way is abandoned, the log keeps the
finished ones, the stop reason says how to resume, and a run on the same log resumes from it.

Measurement is faked (``sched_fakes``: nothing is compiled); the cluster itself going away is
tested with a real one in ``tests/measure/test_dask_faults.py``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

import ansor
from ansor import autotvm
from ansor import measurer as M
from ansor.task_scheduler import TaskScheduler
from measure.measure import BuildResult, MeasureInput, MeasureResult, MeasureUnavailableError

from .sched_fakes import SMALL_PARAMS, FakeBuilder, FakeRunner


class GoneRunner(FakeRunner):
    """A FakeRunner whose cluster goes away at its ``gone_at``-th call (0-based)."""

    def __init__(self, gone_at: int) -> None:
        super().__init__()
        self.gone_at, self.calls = gone_at, 0

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        self.calls += 1
        if self.calls - 1 == self.gone_at:
            raise MeasureUnavailableError("the Dask scheduler at tcp://127.0.0.1:1 went away")
        return super().run(inputs, build_results, verbose)


def lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip()]


def test_the_measurer_lets_it_through():
    m = M.ProgramMeasurer(FakeBuilder(), GoneRunner(0))
    task = ansor.SearchTask(func="matmul", args=(16, 16, 16))
    with pytest.raises(MeasureUnavailableError, match="went away"):
        m.measure([MeasureInput(task, task.compute_dag.init_state())])


def test_tune_stops_with_the_log_intact_and_resumes(tmp_path):
    task = ansor.SearchTask(func="matmul", args=(16, 16, 16))
    log = tmp_path / "t.json"
    # Calls: the default schedule (a probe, then timed as candidates are), round 1, round 2 ->
    # gone during round 2.
    res = task.tune(ansor.TuningOptions(num_measure_trials=16, num_measures_per_round=4,
                                        log_file=str(log), builder=FakeBuilder(),
                                        runner=GoneRunner(3), seed=0, search_params=SMALL_PARAMS,
                                        verbose=0))
    assert res.measurement_stopped and not res.interrupted and res.trials == 4
    assert "went away" in res.stop_reason and f"the log {log} keeps every finished round" in \
        res.stop_reason and "tune again with the same log" in res.stop_reason
    assert len(lines(log)) == 4  # round 1; round 2 abandoned
    runner = FakeRunner()
    again = task.tune(ansor.TuningOptions(num_measure_trials=4, num_measures_per_round=4,
                                          log_file=str(log), builder=FakeBuilder(), runner=runner,
                                          seed=0, search_params=SMALL_PARAMS, verbose=0))
    assert again.resumed_records == 4 and again.trials == 4 and not again.measurement_stopped
    assert len(lines(log)) == 8 and len(set(lines(log))) == 8


def test_the_task_scheduler_stops_with_the_log_intact(tmp_path, capsys):
    tasks = [ansor.SearchTask(func="matmul", args=(16, 16, 16)),
             ansor.SearchTask(func="matmul", args=(32, 16, 8))]
    log = tmp_path / "net.json"
    res = TaskScheduler(tasks, remeasure_best=1).tune(ansor.TuningOptions(
        num_measure_trials=16, num_measures_per_round=4, log_file=str(log), builder=FakeBuilder(),
        runner=GoneRunner(2), seed=0, search_params=SMALL_PARAMS, verbose=1))
    assert res.measurement_stopped and res.trials == 8 and len(lines(log)) == 8
    assert "stopped: measurements stopped: the Dask scheduler" in capsys.readouterr().out
    again = TaskScheduler(tasks, remeasure_best=1).tune(ansor.TuningOptions(
        num_measure_trials=4, num_measures_per_round=4, log_file=str(log), builder=FakeBuilder(),
        runner=FakeRunner(), seed=0, search_params=SMALL_PARAMS, verbose=0))
    assert again.restored == 8 and again.trials == 4 and not again.measurement_stopped


def test_a_template_tuner_stops_with_the_log_intact(tmp_path):
    task = autotvm.create_task("matmul", (16, 16, 16))
    log = tmp_path / "a.json"
    mo = autotvm.measure_option(builder=FakeBuilder(), runner=GoneRunner(1))
    res = autotvm.RandomTuner(task, seed=0).tune(12, mo, log_file=str(log), batch_size=4,
                                                 verbose=0)
    assert res.stop_reason.startswith(M.STOP_UNAVAILABLE) and "resume" in res.stop_reason
    assert res.trials == 4 and len(lines(log)) == 4
    mo = autotvm.measure_option(builder=FakeBuilder(), runner=FakeRunner())
    again = autotvm.RandomTuner(task, seed=0).tune(4, mo, log_file=str(log), batch_size=4,
                                                   verbose=0)
    assert again.resumed_records == 4 and again.trials == 4
