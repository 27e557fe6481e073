"""Single-operator tuning measures the rule-based untuned schedule first, as the task scheduler does.

``SearchTask.tune``'s first round starts with ``ansor.untuned.untuned_schedule`` (the one
``tuning_loop.UntunedFirst``, shared with the task scheduler): a trial like any other, logged as a
normal record, so the best the run reports - ``TuneResult`` and ``apply_best`` from the log - is
never slower than it; ``TuningOptions.measure_untuned_first=False`` leaves it out. Measurement is
faked (``sched_fakes``: nothing compiled), the costs chosen per schedule.
"""
from __future__ import annotations

import pytest

import ansor
from ansor.records import load_records
from ansor.untuned import untuned_schedule
from measure.measure import MeasureErrorNo, MeasureResult

from .sched_fakes import FakeBuilder, FakeRunner


class Splits:
    """Proposes matmul schedules (i split by a divisor, outer i parallel), none of them the
    untuned one, ``num`` at a time."""

    def __init__(self, task: ansor.SearchTask):
        s0 = task.compute_dag.init_state()
        self.states = [s0.split("matmul", "i", [f]).parallel("matmul", "i.0")
                       for f in (1, 2, 4, 8, 16, 32, 64)]
        self.last_round_stats: dict = {}

    def generate_measure_candidates(self, num, measured_keys, best_states):
        return [s for s in self.states if s.canonical_key() not in measured_keys][:num]


class Costs(FakeRunner):
    """``FakeRunner`` with a cost per kind of schedule: the untuned one, the default one, the
    rest."""

    def __init__(self, task: ansor.SearchTask, untuned: float, default: float, other: float):
        super().__init__()
        self.untuned_key = untuned_of(task).canonical_key()
        self.default_key = task.compute_dag.init_state().canonical_key()
        self.cost = {self.untuned_key: untuned, self.default_key: default}
        self.other = other

    def run(self, inputs, build_results, verbose=0):
        out = super().run(inputs, build_results, verbose)
        return [MeasureResult((self.cost.get(inp.state.canonical_key(), self.other),),
                              r.error_no, r.error_msg, all_cost=0.0, timestamp=r.timestamp)
                for inp, r in zip(inputs, out)]


def untuned_of(task: ansor.SearchTask) -> ansor.State:
    return untuned_schedule(task.compute_dag, hardware_params=task.hardware_params)[0]


def tune(task, runner, log=None, trials=6, **kw) -> ansor.TuneResult:
    opts = ansor.TuningOptions(num_measure_trials=trials, num_measures_per_round=3, seed=0,
                               verbose=kw.pop("verbose", 0), builder=FakeBuilder(), runner=runner,
                               log_file=None if log is None else str(log), **kw)
    return task.tune(opts, search_policy=Splits(task))


@pytest.fixture
def task() -> ansor.SearchTask:
    return ansor.SearchTask(func="matmul", args=(64, 64, 64))


def test_the_first_trial_is_the_untuned_schedule_logged_as_a_normal_record(task, tmp_path):
    log = tmp_path / "u.json"
    runner = Costs(task, untuned=2e-4, default=1e-3, other=1e-4)
    res = tune(task, runner, log)
    untuned = untuned_of(task)
    # The runner saw the default schedule (timed apart, once or twice), then the trials.
    trials = runner.measured[-res.trials:]
    assert res.trials == 6 and len(runner.measured) > 6
    assert trials[0] == (task.workload_key, untuned.canonical_key())
    assert all(k == runner.default_key for _, k in runner.measured[:-res.trials])
    records = list(load_records(log))
    assert len(records) == 6
    first, result = records[0]
    assert first.state.canonical_key() == untuned.canonical_key() and result.mean_cost == 2e-4
    assert res.untuned_cost == 2e-4 and res.untuned_state.canonical_key() == untuned.canonical_key()
    # A searched schedule ran faster: it is the best, kept and applied.
    assert res.best_cost == res.kept_cost == 1e-4 and not res.untuned_is_best
    assert task.apply_best(log).canonical_key() != untuned.canonical_key()
    assert res.kept_speedup == pytest.approx(10.0)


def test_an_untuned_schedule_faster_than_every_searched_one_is_the_best(task, tmp_path, capsys):
    log = tmp_path / "u.json"
    res = tune(task, Costs(task, untuned=1e-4, default=1e-3, other=5e-4), log, verbose=1)
    untuned_key = untuned_of(task).canonical_key()
    assert res.best_cost == res.kept_cost == res.untuned_cost == 1e-4 and res.untuned_is_best
    assert res.kept_state.canonical_key() == untuned_key
    assert task.apply_best(log).canonical_key() == untuned_key  # the log's best: never slower
    out = capsys.readouterr().out
    assert "untuned schedule (rule-based): 0.1 ms" in out  # said once its round is in
    summary = res.summary()
    assert "best time        0.1 ms" in summary and "no searched schedule was faster" in summary
    assert "untuned schedule 0.1 ms" in summary
    assert "speed-up 10x over the default schedule" in summary


def test_the_default_schedule_still_wins_when_it_is_the_fastest(task, tmp_path):
    res = tune(task, Costs(task, untuned=1e-4, default=1e-5, other=5e-4), tmp_path / "u.json")
    assert res.default_is_faster and res.kept_cost == 1e-5 and res.kept_speedup == 1.0
    assert res.best_cost == res.untuned_cost == 1e-4
    assert "speed-up 1x over the default schedule" in res.summary()


def test_off_measures_only_the_policy_candidates(task, tmp_path):
    log = tmp_path / "u.json"
    runner = Costs(task, untuned=1e-5, default=1e-3, other=5e-4)
    res = tune(task, runner, log, measure_untuned_first=False)
    untuned_key = untuned_of(task).canonical_key()
    assert res.trials == 6 and untuned_key not in {k for _, k in runner.measured}
    assert res.untuned_cost is None and res.untuned_state is None and res.untuned_note == ""
    assert [inp.state.canonical_key() for inp, _ in load_records(log)] == [
        s.canonical_key() for s in Splits(task).states[:6]]
    assert "untuned schedule" not in res.summary()


def test_a_resumed_run_does_not_measure_it_again_but_reports_its_cost(task, tmp_path):
    log = tmp_path / "u.json"
    tune(task, Costs(task, untuned=2e-4, default=1e-3, other=5e-4), log, trials=3)
    runner = Costs(task, untuned=2e-4, default=1e-3, other=5e-4)
    res = tune(task, runner, log, trials=3)
    untuned_key = untuned_of(task).canonical_key()
    assert res.resumed_records == 3 and res.trials == 3
    assert untuned_key not in {k for _, k in runner.measured}
    assert res.untuned_cost == 2e-4 and res.best_cost == 2e-4
    keys = [inp.state.canonical_key() for inp, _ in load_records(log)]
    assert keys.count(untuned_key) == 1 and len(set(keys)) == 6


def test_a_failed_untuned_schedule_is_noted(task):
    class UntunedFails(Costs):
        def run(self, inputs, build_results, verbose=0):
            out = super().run(inputs, build_results, verbose)
            return [MeasureResult((1e10,), int(MeasureErrorNo.RUNTIME_DEVICE), "injected", 0.0, r.timestamp)
                    if inp.state.canonical_key() == self.untuned_key else r
                    for inp, r in zip(inputs, out)]

    res = tune(task, UntunedFails(task, untuned=1e-4, default=1e-3, other=5e-4))
    assert res.untuned_cost is None and res.errors == 1 and res.best_cost == 5e-4
    assert "untuned schedule not measured successfully" in res.summary()


def test_the_option_is_checked():
    with pytest.raises(TypeError, match="measure_untuned_first must be True or False"):
        ansor.TuningOptions(measure_untuned_first="yes")
