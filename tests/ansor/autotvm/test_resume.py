"""Resuming template tuning (``ansor.resume``, shared with the auto-scheduler): a run killed
mid-way resumes with nothing lost - no configuration measured twice, configurations that did
not instantiate counted and not proposed again, counts and best as if the run had not stopped -
and a hostile log resumes without a crash.

Measurement is faked (``sched_fakes``: nothing is compiled; a schedule's cost is a hash of it).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

import ansor
from ansor import autotvm
from measure.measure import MeasureErrorNo
from measure.record import RecordWarning

from ..sched_fakes import FakeBuilder, FakeRunner

ROOT = Path(__file__).resolve().parents[3]
SHAPE = (64, 8, 8)
TEMPLATE = '''
def half_bad(cfg, dag):
    """28 splits of i, each with and without an annotation that does not apply (a reduction
    loop cannot be vectorized): 56 configurations, 28 of them INSTANTIATION_ERROR."""
    cfg.define_split("tile", 64, num_outputs=3)
    cfg.define_knob("ann", ["none", "vectorize"])
    s = dag.init_state()
    s, _ = cfg["tile"].apply(s, "matmul", "i")
    if cfg["ann"].val != "none":
        s = s.annotate("matmul", "k", cfg["ann"].val)
    return s
'''
_CHILD = '''
import sys
sys.path.insert(0, {root!r})
import ansor
from ansor import autotvm
from tests.ansor.sched_fakes import FakeBuilder, FakeRunner
{template}
autotvm.register_template("t_resume_half_bad", workloads=())(half_bad)
task = autotvm.create_task("matmul", {shape!r}, template="t_resume_half_bad")
autotvm.RandomTuner(task, seed=0).tune(
    56, autotvm.measure_option(FakeBuilder(), FakeRunner(sleep=0.2)), log_file={log!r},
    batch_size=4, verbose=0)
'''


def _lines(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _half_bad_task(scratch_templates):
    scope: dict = {}
    exec(TEMPLATE, scope)  # the child's template, so both have the same space
    scratch_templates.append("t_resume_half_bad")
    autotvm.register_template("t_resume_half_bad", workloads=())(scope["half_bad"])
    return autotvm.create_task("matmul", SHAPE, template="t_resume_half_bad")


def _best_line(lines: list[dict]) -> dict:
    valid = [ln for ln in lines if ln["result"]["error_no"] == 0]
    return min(valid, key=lambda ln: ln["result"]["costs"][0])


def test_a_killed_run_resumes_with_nothing_lost(tmp_path, capsys, scratch_templates):
    log = tmp_path / "t.json"
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(
        root=str(ROOT), template=TEMPLATE, shape=SHAPE, log=str(log))], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and log.read_text().count("\n") >= 12:
                break
            assert child.poll() is None, "the tuning run ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the log got no lines in 60 s")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    before = _lines(log)
    n = len(before)
    assert 12 <= n < 56
    failed_before = sum(ln["result"]["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR
                        for ln in before)
    assert failed_before  # the point of the test: such records are restored too

    task = _half_bad_task(scratch_templates)
    assert len(task.space) == 56
    runner = FakeRunner()
    tuner = autotvm.RandomTuner(task, seed=1)
    res = tuner.tune(56, autotvm.measure_option(FakeBuilder(), runner), log_file=log,
                     batch_size=4)
    out = capsys.readouterr().out
    assert f"resuming from {log}: {n} record(s), {n} configuration(s) of this space" in out
    # The rest of the space, each configuration once: none of the log's proposed again.
    assert res.resumed_records == n and res.trials == 56 - n
    assert res.stop_reason.startswith("the space is exhausted")
    lines = _lines(log)
    assert sorted(ln["autotvm"]["index"] for ln in lines) == list(range(56))
    after = lines[n:]
    assert res.errors == sum(ln["result"]["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR
                             for ln in after) == 28 - failed_before
    # The runner measured the new valid configurations only, none of the log's schedules.
    assert len(runner.measured) == len(set(runner.measured)) == 56 - n - res.errors
    # The best is the best of both runs, with its configuration.
    best = _best_line(lines)
    assert res.best_cost == pytest.approx(best["result"]["costs"][0])
    assert res.best_config.index == best["autotvm"]["index"]
    assert res.best_gflops == pytest.approx(task.flop / best["result"]["costs"][0] / 1e9)


def test_resume_of_a_partial_run_matches_the_log(tmp_path, scratch_templates):
    """In one process: counts, visited configurations and best after a resume are the log's."""
    task = _half_bad_task(scratch_templates)
    log = tmp_path / "p.json"
    mo = autotvm.measure_option(FakeBuilder(), FakeRunner())
    first = autotvm.RandomTuner(task, seed=0).tune(20, mo, log_file=log, batch_size=8,
                                                   verbose=0)
    assert first.errors  # some configurations did not instantiate
    again = autotvm.GATuner(task, pop_size=6, seed=0)
    res = again.tune(0, mo, log_file=log, verbose=0)
    assert res.resumed_records == 20 and res.trials == 0
    assert again.visited == {ln["autotvm"]["index"] for ln in _lines(log)}
    assert res.best_config == first.best_config and res.best_cost == pytest.approx(first.best_cost)
    # The tuner learned every resumed score: the failed ones as 0.
    assert len(again.scores) == 20 and sum(s == 0 for s in again.scores.values()) == first.errors


def test_a_hostile_log_resumes_without_a_crash(tmp_path, capsys, scratch_templates):
    task = _half_bad_task(scratch_templates)
    log = tmp_path / "h.json"
    mo = autotvm.measure_option(FakeBuilder(), FakeRunner())
    autotvm.GridSearchTuner(task).tune(4, mo, log_file=log, batch_size=4, verbose=0)
    good = log.read_text().splitlines()
    other = json.loads(good[0])
    other["input"]["target"]["key"] = "0" * 16  # timed on another CPU
    other["autotvm"]["index"] = 40
    bad_part = json.loads(good[1])
    bad_part["autotvm"] = {"template": 3, "index": True, "knobs": [1]}
    with open(log, "a") as f:
        f.write("{not json\n")
        f.write(json.dumps(other) + "\n")
        f.write(json.dumps(bad_part) + "\n")  # the same schedule again, no usable configuration
    tuner = autotvm.GridSearchTuner(task)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = tuner.tune(4, mo, log_file=log, batch_size=4)
    assert any(issubclass(w.category, RecordWarning) for w in caught)
    assert res.resumed_records == 4 and res.trials == 4
    assert 40 not in tuner.visited  # the other CPU's configuration is not measured *here*
    assert "1 of another CPU/toolchain ignored" in capsys.readouterr().out


def test_configurations_another_tuner_logs_meanwhile_are_not_measured(tmp_path):
    """Two tuners on one log: what the other appends during the run counts as measured
    (``ProgramMeasurer.new_states`` catches up, as in every tuner's round)."""
    task = autotvm.create_task("matmul", SHAPE)
    log = tmp_path / "two.json"
    other = autotvm.records.ConfigRecordToFile(log, task.template.name, task.space.signature)
    theirs = [task.space.get(i) for i in (2, 3)]
    inputs = [ansor.MeasureInput(task.search_task, task.instantiate(c)) for c in theirs]

    def the_other_tuner(tuner, inp, res):  # after the first batch: logs configurations 2 and 3
        if len(tuner.visited) == 2:
            other.write(inputs, FakeRunner().run(inputs, [None] * 2), theirs)

    runner = FakeRunner()
    res = autotvm.GridSearchTuner(task).tune(
        4, autotvm.measure_option(FakeBuilder(), runner), log_file=log, batch_size=2, verbose=0,
        callbacks=[the_other_tuner])
    assert res.trials == 4
    assert [ln["autotvm"]["index"] for ln in _lines(log)] == [0, 1, 2, 3, 4, 5]
    assert len(runner.measured) == 4
    assert not {inp.state.canonical_key() for inp in inputs} & {k for _, k in runner.measured}


def test_a_template_log_read_by_the_auto_scheduler_has_no_placeholder_schedules(
        tmp_path, scratch_templates):
    """A configuration that did not instantiate is logged with the initial schedule standing in
    (``is_placeholder``): resuming from the log, or catching up with it, marks that schedule
    measured for no tuner and restores it as no record."""
    from ansor.measurer import ProgramMeasurer, TaskStats
    from ansor.resume import restore
    from ansor.shared_log import SharedLog

    task = _half_bad_task(scratch_templates)
    log = tmp_path / "t.json"
    res = autotvm.RandomTuner(task, seed=0).tune(
        20, autotvm.measure_option(FakeBuilder(), FakeRunner()), log_file=log, batch_size=8,
        verbose=0)
    assert res.errors
    st = ansor.SearchTask(func="matmul", args=SHAPE)
    assert st.workload_key == task.workload_key
    init = st.compute_dag.init_state().canonical_key()
    m = ProgramMeasurer(FakeBuilder(), FakeRunner())
    restored = restore([str(log)], [st], m)
    assert restored.records == len(restored.inputs) == 20 - res.errors
    assert init not in m.stats(st.workload_key).measured_keys
    # Appended while another run watches the log: the same.
    watched = tmp_path / "w.json"
    watched.write_text("")
    shared = SharedLog(str(watched))
    try:
        watched.write_text(log.read_text())
        stats = TaskStats()
        assert shared.catch_up(st.workload_key, st.compute_dag, stats, {st.workload_key}) == \
            20 - res.errors
        assert init not in stats.measured_keys
    finally:
        shared.close()
