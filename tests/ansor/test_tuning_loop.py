"""The one tuning loop (``ansor.tuning_loop``): the session every tuner runs in and the batch
every round measures.

The session turns Ctrl-C and a lost cluster into a stop reason and always closes the measurer (an
unrelated error still propagates); a batch measures only what is not known yet, logs and books
every row in order, and the learner sees only batches the log took.
"""
from __future__ import annotations

import pytest

import ansor
from ansor.measurer import STOP_INTERRUPTED, STOP_LOG_FAILED, STOP_UNAVAILABLE, ProgramMeasurer
from ansor.tuning_loop import Session, measure_batch, run_round
from measure.measure import MeasureErrorNo, MeasureInput, MeasureResult, MeasureUnavailableError
from measure.log_file import RecordFileError

from .sched_fakes import FakeBuilder, FakeRunner


class ClosingMeasurer(ProgramMeasurer):
    def __init__(self) -> None:
        super().__init__(FakeBuilder(), FakeRunner())
        self.closed = 0

    def close(self) -> None:
        self.closed += 1
        super().close()


class Owned:
    """Stands in for ``measure.measurers.Measurers``: counts its closes."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_session_ends_on_ctrl_c_and_on_a_lost_cluster_and_always_closes() -> None:
    m, owned = ClosingMeasurer(), Owned()
    with Session(m, "x.json", measurers=owned) as s:
        raise KeyboardInterrupt
    assert s.stop == STOP_INTERRUPTED and m.closed == 1 and owned.closed == 1
    with Session(m, "x.json") as s:
        raise MeasureUnavailableError("the Dask scheduler went away")
    assert s.stop.startswith(STOP_UNAVAILABLE) and "the log x.json keeps" in s.stop
    with pytest.raises(ValueError), Session(m, None, measurers=owned):
        raise ValueError("a bug, not a stop")
    assert m.closed == 3 and owned.closed == 2  # closed whatever ended the block
    with Session(m, None) as s:
        s.stop = "done"
    assert s.stop == "done" and m.closed == 4 and owned.closed == 2


def _states(task: ansor.SearchTask, factors) -> list:
    s0 = task.compute_dag.init_state()
    return [s0.split("matmul", "i", [f]) for f in factors]


def test_a_batch_measures_only_what_is_not_known_and_books_every_row_in_order() -> None:
    task = ansor.SearchTask(func="matmul", args=(16, 16, 16))
    m = ProgramMeasurer(FakeBuilder(), FakeRunner())
    states = _states(task, [1, 2, 4])
    failed = MeasureResult((1e10,), int(MeasureErrorNo.INSTANTIATION_ERROR), "did not instantiate")
    learned: list[int] = []
    booked: list[int] = []
    out = measure_batch(m, task.workload_key, [MeasureInput(task, s) for s in states],
                        learn=lambda inputs, results: learned.append(len(inputs)),
                        states=[states[0], None, states[2]], known=[None, failed, None],
                        then=lambda batch: booked.append(len(batch.results)))
    assert m.runner.measured == [(task.workload_key, states[i].canonical_key()) for i in (0, 2)]
    assert out.results[1] is failed and out.results[0].ok and out.results[2].ok
    assert out.stop is None and learned == [3] and booked == [3]
    st = m.stats(task.workload_key)
    assert st.trials == 3 and st.errors == 1


def test_a_batch_the_log_refuses_is_not_learned() -> None:
    task = ansor.SearchTask(func="matmul", args=(16, 16, 16))

    def full_disk(inputs, results):
        raise RecordFileError("no space left on device")

    m = ProgramMeasurer(FakeBuilder(), FakeRunner(), recorder=full_disk)
    learned: list[int] = []
    out = measure_batch(m, task.workload_key, [MeasureInput(task, s) for s in _states(task, [2])],
                        learn=lambda inputs, results: learned.append(len(inputs)))
    assert out.stop is not None and out.stop.startswith(STOP_LOG_FAILED)
    assert learned == [] and m.stats(task.workload_key).trials == 0


def test_a_round_puts_the_first_states_before_the_policys_after_it_proposed() -> None:
    task = ansor.SearchTask(func="matmul", args=(16, 16, 16))
    m = ProgramMeasurer(FakeBuilder(), FakeRunner())
    first, proposed = _states(task, [1, 2, 4, 8])[:1], _states(task, [2, 4, 8])
    calls: list[str] = []

    class Policy:
        def generate_measure_candidates(self, num, measured_keys, best_states):
            calls.append("policy")
            return proposed + first  # the first state again: measured once

    def put_first():
        calls.append("first")
        return first

    out = run_round(task, Policy(), m, None, 3, first=put_first)
    assert calls == ["policy", "first"]
    assert [inp.state.canonical_key() for inp in out.inputs] == \
        [s.canonical_key() for s in first + proposed[:2]]
    assert run_round(task, Policy(), m, None, 3).inputs[0].state.canonical_key() == \
        proposed[2].canonical_key()
