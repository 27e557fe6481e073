"""Two tuners on one log: the second is warned at its start, and neither measures a schedule the
log already holds (issue 40, item 9: "two tuners on one log measure the same schedules twice
without a word").

The runs here measure with the task-scheduler tests' fakes (nothing is compiled), and "the other
tuner" appends its records at a chosen moment, so the interleaving is deterministic.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter

import pytest

import ansor
from ansor.search_task import SearchTask
from measure.log_share import LOCK_SUFFIX, LogClaim, LogSharedWarning
from measure.measure import MeasureInput, MeasureResult
from measure.record import RecordToFile

from .sched_fakes import FakeBuilder, FakeRunner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return SearchTask(func="matmul", args=(16, 16, 16))


def _states(task: SearchTask) -> list:
    s0 = task.compute_dag.init_state()
    return [s0.split("matmul", ax, [f]) for ax in ("i", "j") for f in (2, 4, 8)]


class _Policy:
    """Proposes the fixed states not yet measured; before its first proposal, ``on_first``
    (the other tuner) appends records to the log."""

    def __init__(self, states, on_first):
        self.states, self.on_first = states, on_first

    def generate_measure_candidates(self, num, measured_keys, best_states):
        if self.on_first is not None:
            self.on_first()
            self.on_first = None
        return self.states[:num]  # even the measured ones: the measurer must drop them


def _tune(task, log, policy, runner):
    # The given states only (no untuned schedule first): what each tuner logs is counted exactly.
    return task.tune(ansor.TuningOptions(num_measure_trials=6, num_measures_per_round=6,
                                         log_file=log, verbose=0, builder=FakeBuilder(),
                                         runner=runner, measure_untuned_first=False),
                     search_policy=policy)


def _logged_steps(log) -> Counter:
    return Counter(json.dumps(json.loads(ln)["input"]["steps"]) for ln in open(log))


def test_schedules_another_tuner_logged_meanwhile_are_not_measured(task, tmp_path):
    log = str(tmp_path / "log.json")
    states = _states(task)

    def other_tuner_appends():
        RecordToFile(log)([MeasureInput(task, s) for s in states[:3]],
                          [MeasureResult((1e-8,), 0) for _ in range(3)])  # faster than ours

    runner = FakeRunner()
    res = _tune(task, log, _Policy(states, other_tuner_appends), runner)
    measured = {k for _, k in runner.measured}
    assert not measured & {s.canonical_key() for s in states[:3]}
    assert {s.canonical_key() for s in states[3:]} <= measured
    # Every schedule is in the log once (the default schedule's probe is not logged).
    steps = _logged_steps(log)
    assert len(steps) == 6 and set(steps.values()) == {1}, steps
    assert res.trials == 3 and res.best_cost == pytest.approx(1e-8)  # the other tuner's best counts


def test_the_search_is_told_before_it_proposes(task, tmp_path):
    """Records the other tuner appends while this run starts (here: during the default
    schedule's probe) are measured keys for the search's first proposal, and it goes on with
    the rest rather than stopping with nothing new."""
    log = str(tmp_path / "log.json")
    states = _states(task)
    seen: list[set] = []

    class Runner(FakeRunner):
        def run(self, inputs, built, verbose=0):
            if not seen:
                seen.append(set())
                RecordToFile(log)([MeasureInput(task, s) for s in states[:3]],
                                  [MeasureResult((1e-8,), 0) for _ in range(3)])
            return super().run(inputs, built, verbose)

    class Policy:
        def generate_measure_candidates(self, num, measured_keys, best_states):
            seen.append(set(measured_keys))
            return [s for s in states if s.canonical_key() not in measured_keys][:num]

    res = _tune(task, log, Policy(), Runner())
    assert {s.canonical_key() for s in states[:3]} <= seen[1]
    assert res.trials == 3 and sorted(_logged_steps(log).values()) == [1] * 6


def test_own_lines_are_not_counted_twice(task, tmp_path):
    """The run reads its own appends back: they must not be pooled again into its costs."""
    log = str(tmp_path / "log.json")
    states = _states(task)
    runner = FakeRunner()
    _tune(task, log, _Policy(states[:2], None), runner)
    from ansor.measurer import ProgramMeasurer

    m = ProgramMeasurer(FakeBuilder(), runner, RecordToFile(log))
    try:
        inputs = [MeasureInput(task, s) for s in states[2:4]]
        m.commit(task.workload_key, inputs, runner.run(inputs, []))
        # states[:2] were logged before this measurer started: resuming reads those, not it.
        assert m.new_states(task.workload_key, states, 6) == states[:2] + states[4:]
        best = m.stats(task.workload_key).best
        assert [best.samples(s) for s in states[2:4]] == [1, 1]
    finally:
        m.close()


def test_a_second_tuner_is_warned_at_its_start(task, tmp_path):
    log = str(tmp_path / "log.json")
    other = LogClaim(log)  # the first tuner's claim (flock: per open file, so in-process works)
    try:
        assert other.held and os.path.exists(log + LOCK_SUFFIX)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _tune(task, log, _Policy(_states(task)[:1], None), FakeRunner())
        msgs = [str(w.message) for w in caught if issubclass(w.category, LogSharedWarning)]
        assert msgs == [f"another tuner (pid {os.getpid()} on {os.uname().nodename}) is writing "
                        f"{log}: this run skips the schedules it logs, but on one machine each "
                        "times its candidates while the other loads the CPU"], msgs
    finally:
        other.release()
    assert not os.path.exists(log + LOCK_SUFFIX)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogSharedWarning)  # released: no warning any more
        _tune(task, log, _Policy(_states(task)[1:2], None), FakeRunner())
    assert not os.path.exists(log + LOCK_SUFFIX)  # a run removes its claim when it ends


def test_the_warning_from_another_process(tmp_path):
    """A claim held by another process is seen, with its pid, and goes when it ends."""
    log = str(tmp_path / "log.json")
    code = ("import sys, time; from measure.log_share import LogClaim; c = LogClaim(sys.argv[1]); "
            "print('held' if c.held else 'not held', flush=True); sys.stdin.readline(); c.release()")
    p = subprocess.Popen([sys.executable, "-c", code, log], env=dict(os.environ, PYTHONPATH=ROOT),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.warns(LogSharedWarning, match=rf"another tuner \(pid {p.pid} on "):
            mine = LogClaim(log)
        assert not mine.held and mine.holder.startswith(f"pid {p.pid} ")
    finally:
        p.communicate("\n", timeout=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogSharedWarning)
        mine = LogClaim(log)
        assert mine.held
        mine.release()


def test_no_lock_file_leaves_the_run_unclaimed(task, tmp_path):
    """Where the lock file cannot be made (here: a directory is in its place; a read-only
    directory does the same), the run goes on unclaimed and silent."""
    log = tmp_path / "log.json"
    os.mkdir(str(log) + LOCK_SUFFIX)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogSharedWarning)
        claim = LogClaim(log)
        assert not claim.held and claim.holder is None
        claim.release()
        res = _tune(task, str(log), _Policy(_states(task)[:2], None), FakeRunner())
    assert res.trials == 2 and os.path.isdir(str(log) + LOCK_SUFFIX)


def test_the_template_tuner_claims_its_log_too(tmp_path):
    from ansor import autotvm

    log = str(tmp_path / "log.json")
    task = autotvm.create_task("matmul", (16, 16, 16))
    mo = autotvm.measure_option(FakeBuilder(), FakeRunner())
    other = LogClaim(log)
    try:
        with pytest.warns(LogSharedWarning, match=rf"another tuner .* is writing {log}:"):
            autotvm.GridSearchTuner(task).tune(2, mo, log_file=log, verbose=0)
        assert os.path.exists(log + LOCK_SUFFIX)  # the other's, untouched
    finally:
        other.release()
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogSharedWarning)
        assert autotvm.GridSearchTuner(task).tune(2, mo, log_file=log, verbose=0).trials == 2
    assert not os.path.exists(log + LOCK_SUFFIX)
