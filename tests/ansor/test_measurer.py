"""ProgramMeasurer, the measuring half shared by every tuning loop: per-task bookkeeping (one
measurer serving two tasks), deduplication, a failing batch turned into error results, the log
written before booking and a batch the log refuses abandoned, and the stop rules.

Builder and runner are fakes (nothing is compiled): these tests check the bookkeeping only.
"""
from __future__ import annotations

from typing import Sequence

import pytest

import ansor
from ansor import measurer as M
from measure.builder import LocalBuilder
from measure.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureResult
from measure.log_file import RecordFileError
from measure.runner import LocalRunner


class FakeBuilder(LocalBuilder):
    def build(self, inputs: Sequence[MeasureInput], verbose: int = 0) -> list[BuildResult]:
        return [BuildResult(None, int(MeasureErrorNo.NO_ERROR), "", 0.0) for _ in inputs]


class FakeRunner(LocalRunner):
    """Costs given per i split factor; a factor missing from ``costs`` fails to run."""

    def __init__(self, costs: dict[int, float]) -> None:
        super().__init__()
        self.costs = costs
        self.broken = False

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        if self.broken:
            raise RuntimeError("the worker is gone")
        out = []
        for inp in inputs:
            c = self.costs.get(inp.state.steps[0].lengths[0])
            out.append(MeasureResult((c,), int(MeasureErrorNo.NO_ERROR)) if c is not None else
                       MeasureResult((), int(MeasureErrorNo.RUNTIME_DEVICE), "boom"))
        return out


def states(task: ansor.SearchTask, factors: Sequence[int]) -> list[ansor.State]:
    s0 = task.compute_dag.init_state()
    return [s0.split("matmul", "i", [f]) for f in factors]


@pytest.fixture
def tasks() -> tuple[ansor.SearchTask, ansor.SearchTask]:
    return (ansor.SearchTask(func="matmul", args=(32, 32, 32)),
            ansor.SearchTask(func="matmul", args=(16, 32, 32)))


def measure_and_commit(m: M.ProgramMeasurer, task: ansor.SearchTask, sts: list) -> str | None:
    inputs = [MeasureInput(task, s) for s in sts]
    return m.commit(task.workload_key, inputs, m.measure(inputs))


def test_bookkeeping_is_per_task_and_dedups(tasks):
    a, b = tasks
    m = M.ProgramMeasurer(FakeBuilder(), FakeRunner({1: 3e-3, 2: 1e-3, 4: 2e-3}))
    sa = states(a, [1, 2, 8])
    assert measure_and_commit(m, a, sa) is None
    st = m.stats(a.workload_key)
    assert (st.trials, st.errors, st.consecutive_errors) == (3, 1, 1)
    assert st.best.best is not None and st.best.best[0] == 1e-3
    assert st.last_improvement == 2
    # Measured states and repeats within a batch are dropped; another task's are not measured.
    again = states(a, [1, 4, 4, 2])
    assert [s.steps[0].lengths[0] for s in m.new_states(a.workload_key, again, 10)] == [4]
    assert len(m.new_states(b.workload_key, states(b, [1, 2]), 10)) == 2
    assert m.new_states(a.workload_key, states(a, [4, 16, 32]), 2)[-1].steps[0].lengths[0] == 16
    assert m.stats(b.workload_key).trials == 0


def test_a_failing_batch_becomes_error_results(tasks):
    a, _ = tasks
    runner = FakeRunner({1: 1e-3})
    runner.broken = True
    m = M.ProgramMeasurer(FakeBuilder(), runner)
    res = m.measure([MeasureInput(a, s) for s in states(a, [1, 2])])
    assert [r.error_no for r in res] == [MeasureErrorNo.UNKNOWN] * 2
    assert "the worker is gone" in res[0].error_msg


def test_the_log_is_written_first_and_a_refused_batch_is_not_booked(tasks):
    a, _ = tasks
    logged: list[int] = []

    def recorder(inputs, results):
        if logged:
            raise RecordFileError("disk full")
        logged.append(len(inputs))

    m = M.ProgramMeasurer(FakeBuilder(), FakeRunner({1: 1e-3, 2: 1e-3}), recorder)
    st = m.stats(a.workload_key)
    seen: list[int] = []  # trials booked when the caller's own bookkeeping runs
    for f in (1, 2):
        inputs = [MeasureInput(a, s) for s in states(a, [f])]
        stop = m.commit(a.workload_key, inputs, m.measure(inputs),
                        then=lambda: seen.append(st.trials))
    assert stop is not None and stop.startswith(M.STOP_LOG_FAILED) and "disk full" in stop
    assert logged == [1] and st.trials == 1 and len(st.measured_keys) == 1 and seen == [1]


def test_stop_rules(tasks, monkeypatch):
    a, _ = tasks
    m = M.ProgramMeasurer(FakeBuilder(), FakeRunner({1: 1e-3, 2: 2e-3, 4: 3e-3}))
    measure_and_commit(m, a, states(a, [1, 2, 4]))  # best first, then 2 without improvement
    key = a.workload_key
    assert m.stop_reason(key, 10, None) is None
    assert m.stop_reason(key, 3, None) == M.STOP_BUDGET
    assert m.stop_reason(key, 10, 2).startswith("early stopping: no improvement in the last 2")
    assert m.stop_reason(key, 10, 3) is None
    monkeypatch.setattr(M, "MAX_CONSECUTIVE_ERRORS", 2)
    measure_and_commit(m, a, states(a, [8, 16]))
    why = m.stop_reason(key, 10, None)
    assert why is not None and why.startswith("too many errors: 2 measurements in a row failed")
    assert "RUNTIME_DEVICE: boom" in why
