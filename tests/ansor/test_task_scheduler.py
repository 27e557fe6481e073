"""TaskScheduler (issue 17): the gradient pick, round-robin, budget, filter, objective, progress
output, resume (nothing measured twice, cost model retrained) and a SIGKILL mid-run.

Measurement is faked (``sched_fakes``): the search is the real SketchPolicy on tiny matmuls, but
nothing is compiled, so each run takes about a second.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ansor
from ansor.measurer import ProgramMeasurer
from ansor.task_scheduler import (NO_COST, LogEstimatedLatency, PrintTableInfo, TaskFilter,
                                  TaskScheduler, TaskSchedulerCallback, read_latency_history,
                                  similarity_tag)
from cost_model.cost_model import RandomModel
from cost_model.lgbm_model import LGBModel

from .sched_fakes import SMALL_PARAMS, FakeBuilder, FakeRunner

ROOT = Path(__file__).resolve().parents[2]


def small_tasks() -> list[ansor.SearchTask]:
    return [ansor.SearchTask(func="matmul", args=(16, 16, 16)),
            ansor.SearchTask(func="matmul", args=(32, 16, 8)),
            ansor.SearchTask(func="matmul", args=(8, 8, 64))]


def options(trials: int, per_round: int = 8, log=None, runner=None, seed: int = 0, **kw):
    return ansor.TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                               log_file=None if log is None else str(log), builder=FakeBuilder(),
                               runner=runner if runner is not None else FakeRunner(), seed=seed,
                               search_params=SMALL_PARAMS, verbose=kw.pop("verbose", 0), **kw)


class Order(TaskSchedulerCallback):
    """Records the task of every round."""

    def __init__(self) -> None:
        self.picks: list[int] = []

    def post_tune(self, scheduler, task_id):
        self.picks.append(task_id)


def log_keys(path) -> list[tuple[str, str]]:
    """(workload key, steps) of every line of a log."""
    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out.append((rec["input"]["workload_key"], json.dumps(rec["input"]["steps"])))
    return out


# ---- the gradient pick, on made-up costs ---------------------------------------------------------

class _Dummy:
    def canonical_key(self) -> str:
        return "dummy"


def primed(tasks, weights=None, costs=(), histories=(), rounds=4, **kw) -> TaskScheduler:
    """A scheduler whose tasks have the given best costs, per-round histories and round counts,
    without tuning anything."""
    s = TaskScheduler(tasks, weights, callbacks=[], seed=kw.pop("seed", 0), **kw)
    s.measurer = ProgramMeasurer(FakeBuilder(), FakeRunner())
    for i, c in enumerate(costs):
        s.measurer.stats(tasks[i].workload_key).best.add(c, _Dummy())
        s.state[i].rounds = rounds
        s.state[i].history = list(histories[i]) if histories else [c] * rounds
    return s


def test_gradient_prefers_the_heavy_task():
    t = small_tasks()
    s = primed(t, [1, 10, 1], costs=[1e-3, 1e-3, 1e-3])
    assert s.pick() == 1
    g = s.gradients()
    assert g[1] < g[0] < 0 and g[0] == pytest.approx(g[2])
    # chain rule = the weight: the gradient scales with it
    assert g[1] / g[0] == pytest.approx(10, rel=1e-3)


def test_gradient_prefers_the_improving_task():
    t = small_tasks()
    flat = [1e-3] * 4
    s = primed(t, [1, 1, 1], costs=[1e-3, 1e-3, 1e-3],
               histories=[flat, [4e-3, 3e-3, 2e-3, 1e-3], flat])
    assert s.pick() == 1
    # backward = (h[-1] - h[-1-w]) / w = (1e-3 - 4e-3) / 3; forward = -g / t = -1e-3 / 4
    assert s.gradients()[1] == pytest.approx(0.2 * (-1e-3) + 0.8 * (-0.25e-3), rel=1e-3)


def test_dead_and_filtered_tasks_are_not_picked():
    t = small_tasks()
    s = primed(t, [1, 10, 1], costs=[1e-3, 1e-3, 1e-3])
    s.state[1].dead = "search space exhausted"
    assert s.pick() in (0, 2) and 1 not in s.gradients()
    s.state[0].tuned = False
    assert s.pick() == 2
    s.state[2].dead = "early stopping"
    assert s.pick() is None


def test_ties_are_broken_at_random():
    t = small_tasks()
    picks = {primed(t, [1, 1, 1], costs=[1e-3] * 3, seed=seed).pick() for seed in range(20)}
    assert picks == {0, 1, 2}


def test_similar_tasks_make_a_slow_sibling_attractive():
    x = ansor.SearchTask(func="matmul", args=(16, 16, 16))
    y = ansor.SearchTask(func="matmul", args=(16, 16, 17))
    z = ansor.SearchTask(func="matmul", args=(64, 64, 64))
    assert similarity_tag(x) == similarity_tag(y) != similarity_tag(z)
    assert similarity_tag(x).startswith("matmul_")
    # z costs as much as x, but x runs at a tenth of its sibling y's throughput
    cx = 1e-3
    cy = y.flop_count / (10 * x.flop_count / cx)
    s = primed([x, y, z], [1, 1, 1], costs=[cx, cy, cx], rounds=10)
    g = s.gradients()
    # forward of x = beta * flops_x / speed_y - g = 2 * g / 10 - g; z alone: -g / t
    assert g[0] == pytest.approx(0.8 * (2 * cx / 10 - cx), rel=1e-3)
    assert g[2] == pytest.approx(0.8 * (-cx / 10), rel=1e-3)
    assert s.pick() == 0
    # after 5 rounds more than y and still below y's speed / beta, x leaves the group
    s._adjust_group(0)
    assert 0 in s.groups[s.tags[0]]
    s.state[0].rounds = 16
    s._adjust_group(0)
    assert s.groups[s.tags[0]] == [1]
    assert s.gradients()[0] == pytest.approx(0.8 * (-cx / 16), rel=1e-3)


def test_objective_func_steers_the_pick():
    # Only task 2 counts: after the warm-up every round goes to it.
    order = Order()
    s = TaskScheduler(small_tasks(), objective_func=lambda c: c[2], callbacks=[order])
    r = s.tune(options(48, per_round=8))
    assert order.picks[:3] == [0, 1, 2] and set(order.picks[3:]) == {2}
    assert r.estimated_latency == pytest.approx(r.best_costs[2])


# ---- whole runs with fake measurement -----------------------------------------------------------

def test_round_robin_order_and_budget():
    order = Order()
    runner = FakeRunner()
    s = TaskScheduler(small_tasks(), strategy="round-robin", remeasure_best=1, callbacks=[order])
    r = s.tune(options(52, per_round=8, runner=runner))
    assert order.picks == [0, 1, 2, 0, 1, 2, 0]
    # 52 // (2 x 3) = 8 >= 8: 8 per round, the last round cut to the 4 trials left
    assert r.trials == 52 == len(runner.measured) == len(set(runner.measured))
    assert r.task_trials == [20, 16, 16] and r.stop_reason == "trial budget reached"


def test_per_round_is_capped_by_half_the_budget_over_tasks():
    # the warm-up round of every task takes at most half the budget: 12 // (2 x 3) = 2
    runner = FakeRunner()
    s = TaskScheduler(small_tasks(), strategy="round-robin", callbacks=[])
    r = s.tune(options(12, per_round=64, runner=runner))
    assert s.per_round == 2 and r.task_trials == [4, 4, 4] and r.trials == 12
    order = Order()
    g = TaskScheduler(small_tasks(), objective_func=lambda c: c[2], callbacks=[order])
    r = g.tune(options(30, per_round=64, runner=FakeRunner()))
    assert g.per_round == 5 and order.picks[:3] == [0, 1, 2] and set(order.picks[3:]) == {2}
    assert r.task_trials == [5, 5, 20]  # the half after the warm-up: where the gradient points


def test_task_filter_by_pattern(capsys):
    runner = FakeRunner()
    tasks = small_tasks()
    s = TaskScheduler(tasks, task_filter="matmul(16*", callbacks=[PrintTableInfo()])
    r = s.tune(options(16, runner=runner, verbose=1))
    assert {k for k, _ in runner.measured} == {tasks[0].workload_key}
    assert r.task_trials == [16, 0, 0]
    out = capsys.readouterr().out
    assert "tuning 1 of 3 task(s) (2 filtered out)" in out
    assert "| 1  | matmul(32, 16, 8)  | -            | -      | 0 (not tuned) |" in out
    # a regular expression works too
    s = TaskScheduler(tasks, task_filter=r"matmul\((32|8),", callbacks=[])
    s.tune(options(0))
    assert [st.tuned for st in s.state] == [False, True, True]


def test_task_filter_by_share_and_none_left():
    big = ansor.SearchTask(func="matmul", args=(64, 64, 64))
    tasks = [*small_tasks(), big]
    s = TaskScheduler(tasks, task_filter=TaskFilter(min_share=0.5), callbacks=[])
    s.tune(options(0))
    assert [st.tuned for st in s.state] == [False, False, False, True]
    with pytest.raises(ValueError, match="excludes all 4 tasks"):
        TaskScheduler(tasks, task_filter="conv2d*", callbacks=[]).tune(options(8))
    with pytest.raises(ValueError, match=r"min_share must be a number in \[0, 1\)"):
        TaskFilter(min_share=1.5)


def test_progress_table_and_history_file(tmp_path, capsys):
    log = tmp_path / "net.json"
    hist = tmp_path / "net.json.latency.tsv"
    s = TaskScheduler(small_tasks(), callbacks=[PrintTableInfo(), LogEstimatedLatency(hist)])
    r = s.tune(options(48, per_round=8, log=log, verbose=1))
    out = capsys.readouterr().out
    assert "| ID | task               | latency (ms) | GFLOPS | trials |" in out
    assert "| 0  | matmul(16, 16, 16) |" in out
    assert "estimated total latency: - (3 task(s) without a valid schedule) | trials: 0/48" in out
    assert "trials: 48/48 | bests re-measured: " in out and "| elapsed: " in out
    assert "| next task: " in out and "ETA: " in out
    assert out.rstrip().endswith("tuning finished: trial budget reached")
    rows = read_latency_history(hist)
    assert [int(x["round"]) for x in rows] == [1, 2, 3, 4, 5, 6]
    assert [int(x["trials"]) for x in rows] == [8, 16, 24, 32, 40, 48]
    assert [x["estimated_latency_ms"] != x["estimated_latency_ms"] for x in rows] == \
        [True, True, False, False, False, False]  # nan until every task has a cost
    assert rows[-1]["estimated_latency_ms"] == pytest.approx(r.estimated_latency * 1e3, rel=1e-5)
    # A resumed run continues the history's round count.
    s = TaskScheduler(small_tasks(), callbacks=[LogEstimatedLatency(hist)])
    r2 = s.tune(options(48, per_round=8, log=log))
    rows = read_latency_history(hist)
    assert r2.rounds == 6 and [int(x["round"]) for x in rows] == list(range(1, 13))
    assert int(rows[-1]["trials"]) == 96
    assert all(a["elapsed_s"] <= b["elapsed_s"] for a, b in zip(rows, rows[1:]))
    bad = tmp_path / "other.tsv"
    bad.write_text("hello\n")
    with pytest.raises(ValueError, match="other.tsv, line 1: not an estimated-latency history"):
        TaskScheduler(small_tasks(), callbacks=[LogEstimatedLatency(bad)]).tune(options(8))


def test_plot_history(tmp_path):
    pytest.importorskip("matplotlib")
    from ansor.task_scheduler import plot_latency_history

    hist = tmp_path / "h.tsv"
    TaskScheduler(small_tasks(), callbacks=[LogEstimatedLatency(hist)]).tune(options(32))
    assert plot_latency_history(hist, tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000


def test_bad_arguments_are_named():
    t = small_tasks()
    with pytest.raises(ValueError, match="strategy must be 'gradient' or 'round-robin', got 'greedy'"):
        TaskScheduler(t, strategy="greedy")
    with pytest.raises(ValueError, match="2 task_weights for 3 tasks"):
        TaskScheduler(t, [1, 2])
    with pytest.raises(ValueError, match=r"task_weights\[1\] must be a positive number"):
        TaskScheduler(t, [1, -1, 1])
    with pytest.raises(ValueError, match="tasks 0 and 3 are the same computation"):
        TaskScheduler([*t, ansor.SearchTask(func="matmul", args=(16, 16, 16))])
    with pytest.raises(TypeError, match="task 0 must be an ansor.SearchTask"):
        TaskScheduler(["matmul"])
    with pytest.raises(FileNotFoundError, match="load_log_file .*nope.json: no such file"):
        TaskScheduler(t, load_log_file="/nonexistent/nope.json", callbacks=[]).tune(options(8))


# ---- resume -------------------------------------------------------------------------------------

def test_resume_measures_nothing_twice_and_retrains_the_model(tmp_path, capsys):
    log = tmp_path / "net.json"
    first = FakeRunner()
    r1 = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[]).tune(options(24, log=log, runner=first))
    assert r1.task_trials == [8, 8, 8] and len(log_keys(log)) == 24

    # Budget 0: only the restore happens. The fresh model is trained on the log's records.
    model = LGBModel(seed=0)
    assert model.booster is None
    s = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[], cost_model=model)
    r = s.tune(options(0, log=log, verbose=1))
    out = capsys.readouterr().out
    assert f"resuming from {log}: 24 record(s) of 3 task(s) restored" in out
    assert "cost model retrained on the 24 restored record(s) of 3 task(s)" in out
    assert r.restored == 24 and r.task_trials == [8, 8, 8] and r.trials == 0
    assert model.num_samples() == 24 and model.booster is not None
    assert r.best_costs == r1.best_costs
    assert [st.rounds for st in s.state] == [1, 1, 1]  # restored rounds of 8 (per_round)

    # A larger budget: the new run measures only new schedules, and skips the warm-up.
    second = FakeRunner()
    order = Order()
    r2 = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[order]).tune(
        options(32, log=log, runner=second, seed=1))
    assert r2.restored == 24 and r2.trials == 32
    assert not set(first.measured) & set(second.measured)
    keys = log_keys(log)
    assert len(keys) == 56 == len(set(keys))
    assert sum(r2.task_trials) == 56
    assert all(c2 <= c1 for c1, c2 in zip(r1.best_costs, r2.best_costs))


def test_load_log_file_separate_from_the_output_log(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    first = FakeRunner()
    TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[]).tune(options(24, log=old, runner=first))
    second = FakeRunner()
    r = TaskScheduler(small_tasks(), load_log_file=old, remeasure_best=1, callbacks=[]).tune(
        options(16, log=new, runner=second))
    assert r.restored == 24 and not set(first.measured) & set(second.measured)
    assert len(log_keys(new)) == 16 and len(log_keys(old)) == 24


def test_records_of_another_toolchain_are_ignored(tmp_path, capsys):
    log = tmp_path / "net.json"
    TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[]).tune(options(24, log=log))
    lines = log.read_text().splitlines()
    foreign = []
    for line in lines[:5]:
        rec = json.loads(line)
        rec["input"]["target"]["key"] = "another-toolchain"
        foreign.append(json.dumps(rec))
    log.write_text("\n".join(foreign + lines[5:]) + "\n")
    r = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[]).tune(options(0, log=log, verbose=1))
    assert r.restored == 19
    assert "(5 of another CPU/toolchain ignored)" in capsys.readouterr().out


_CHILD = """
import sys
sys.path.insert(0, {root!r})
import ansor
from ansor.task_scheduler import TaskScheduler
from tests.ansor.sched_fakes import SMALL_PARAMS, FakeBuilder, FakeRunner
tasks = [ansor.SearchTask(func="matmul", args=a) for a in ((16, 16, 16), (32, 16, 8), (8, 8, 64))]
TaskScheduler(tasks, remeasure_best=1, callbacks=[]).tune(ansor.TuningOptions(
    num_measure_trials=400, num_measures_per_round=4, log_file={log!r}, builder=FakeBuilder(),
    runner=FakeRunner(sleep=0.3), seed=0, search_params=SMALL_PARAMS, verbose=0))
"""


def test_sigkill_mid_run_then_resume(tmp_path, capsys):
    log = tmp_path / "net.json"
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(root=str(ROOT), log=str(log))],
                             cwd=tmp_path)
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
    assert child.returncode == -signal.SIGKILL
    complete = [ln for ln in log.read_text().split("\n")[:-1] if ln.strip()]
    n = len(complete)
    assert n >= 12

    model = LGBModel(seed=0)
    runner = FakeRunner()
    r = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[], cost_model=model).tune(
        options(12, per_round=4, log=log, runner=runner, verbose=1))
    out = capsys.readouterr().out
    assert r.restored == n and f"{n} record(s) of" in out
    assert model.num_samples() >= n  # the model learned from every restored record
    assert f"cost model retrained on the {n} restored record(s)" in out
    keys = log_keys(log)
    assert len(keys) == n + 12 == len(set(keys)), "a schedule was measured twice"
    restored_keys = set(keys[:n])
    assert not restored_keys & {(k, s) for k, s in keys[n:]}
    # the runner was never asked for a restored schedule
    assert len(runner.measured) == 12


def test_random_model_works_too():
    # A cost model without training (RandomModel) is accepted as the shared model.
    r = TaskScheduler(small_tasks(), callbacks=[], cost_model=RandomModel(seed=0)).tune(options(24))
    assert r.trials == 24 and all(c is not None and c < NO_COST for c in r.best_costs)


class FailingRunner(FakeRunner):
    """Every candidate of one workload fails (as a kernel the runner cannot call does)."""

    def __init__(self, bad_key: str) -> None:
        super().__init__()
        self.bad_key = bad_key

    def run(self, inputs, build_results, verbose=0):
        from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureResult

        out = super().run(inputs, build_results, verbose)
        return [MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.RUNTIME_DEVICE), "cannot call")
                if inp.task.workload_key == self.bad_key else r for inp, r in zip(inputs, out)]


def test_a_task_that_always_fails_retires():
    # Without a cost it stands for NO_COST and would win every pick until 150 errors in a row.
    tasks = small_tasks()
    order = Order()
    s = TaskScheduler(tasks, callbacks=[order])
    r = s.tune(options(60, per_round=4, runner=FailingRunner(tasks[1].workload_key)))
    assert order.picks.count(1) == 3 and r.task_trials[1] == 12 and r.best_costs[1] is None
    assert s.state[1].dead.startswith("no valid schedule in 3 rounds (last error: RUNTIME_DEVICE")
    assert r.trials == 60


def test_first_round_of_each_task_measures_the_untuned_schedule(tmp_path):
    from ansor.untuned import untuned_schedule
    from sketch.transform_steps import steps_to_json

    log = tmp_path / "log.json"
    tasks = small_tasks()
    s = TaskScheduler(tasks, strategy="round-robin", callbacks=[])
    s.tune(options(12, per_round=4, log=log))
    keys = log_keys(log)
    for t in tasks:
        first = next(steps for wk, steps in keys if wk == t.workload_key)
        untuned = untuned_schedule(t.compute_dag, hardware_params=t.hardware_params)[0]
        assert json.loads(first) == steps_to_json(untuned.steps)


def test_measure_untuned_first_off_leaves_the_policy_candidates_as_they_were(tmp_path):
    """The untuned schedule goes before the policy's candidates, which are drawn as without it
    (the search's random stream is the same); off, the first round is the policy's alone."""
    from ansor.untuned import untuned_schedule
    from sketch.transform_steps import steps_to_json

    on, off = tmp_path / "on.json", tmp_path / "off.json"
    TaskScheduler(small_tasks(), strategy="round-robin", callbacks=[]).tune(
        options(24, per_round=4, log=on))
    TaskScheduler(small_tasks(), strategy="round-robin", callbacks=[]).tune(
        options(24, per_round=4, log=off, measure_untuned_first=False))
    t = small_tasks()[0]
    first_on = [steps for wk, steps in log_keys(on) if wk == t.workload_key]
    first_off = [steps for wk, steps in log_keys(off) if wk == t.workload_key]
    untuned = json.dumps(steps_to_json(untuned_schedule(t.compute_dag,
                                                        hardware_params=t.hardware_params)[0].steps))
    assert first_on[0] == untuned and untuned not in first_off
    assert first_on[1:4] == first_off[:3]


# ---- confirming bests (remeasure_best) ----------------------------------------------------------

class LuckyRunner(FakeRunner):
    """The first measurement of half the schedules lands in a "lucky window" and reads 3x too
    fast (a shared host's 2-thread kernels do this); every later measurement is the true cost."""

    def run(self, inputs, build_results, verbose=0):
        out = []
        for inp, res in zip(inputs, super().run(inputs, build_results, verbose)):
            key = (inp.task.workload_key, inp.state.canonical_key())
            if self.measured.count(key) == 1 and hash(key[1]) % 2:
                res = ansor.MeasureResult((res.costs[0] / 3,), res.error_no, "", 0.0, res.timestamp)
            out.append(res)
        return out


def test_a_lucky_best_is_measured_again_and_the_median_decides(tmp_path, capsys):
    from .sched_fakes import fake_cost

    log = tmp_path / "net.json"
    r = TaskScheduler(small_tasks(), callbacks=[]).tune(options(48, log=log, runner=LuckyRunner()))
    assert r.trials == 48 and sum(r.task_trials) == 48 and r.remeasured > 0
    assert len(log_keys(log)) == 48 + r.remeasured
    for i, t in enumerate(small_tasks()):
        inp, res = ansor.best_record(log, t)
        # the best is confirmed: its cost is its true one, pooled over >= 3 measurements
        assert res.mean_cost == pytest.approx(fake_cost(inp)) == pytest.approx(r.best_costs[i])
        assert log_keys(log).count((t.workload_key, json.dumps(json.loads(
            inp.state.canonical_key())))) >= 3
    # Trusting single measurements, some task's "best" is a lucky window (the test can fail).
    log1 = tmp_path / "one.json"
    r1 = TaskScheduler(small_tasks(), remeasure_best=1, callbacks=[]).tune(
        options(48, log=log1, runner=LuckyRunner()))
    assert r1.remeasured == 0 and len(log_keys(log1)) == 48
    lucky = [fake_cost(ansor.best_record(log1, t)[0]) > c * 2 for t, c in zip(small_tasks(), r1.best_costs)]
    assert any(lucky)

    # Resuming restores the re-measurements too: nothing left to confirm, nothing measured.
    again = FakeRunner()
    r2 = TaskScheduler(small_tasks(), callbacks=[]).tune(options(0, log=log, runner=again, verbose=1))
    assert again.measured == [] and r2.remeasured == 0 and r2.restored == 48
    assert r2.best_costs == pytest.approx(r.best_costs)
    assert "48 record(s) of 3 task(s) restored" in capsys.readouterr().out


def test_remeasure_best_is_checked():
    with pytest.raises(ValueError, match="remeasure_best must be an integer >= 1"):
        TaskScheduler(small_tasks(), remeasure_best=0)


# ---- schedules shared between similar tasks ------------------------------------------------------

def test_similar_tasks_lend_their_best_schedules(monkeypatch):
    """A task's first round is offered its siblings' best schedules (nearest size first), the
    search replays them onto its shapes; none once it has enough of its own, none when off."""
    import ansor.task_scheduler as ts
    from sketch.search_policy import SketchPolicy

    offered: list[tuple[str, int]] = []
    real_run = ts.run_round

    def spy(task, policy, measurer, model, n, **kw):
        offered.append((task.workload_key, len(kw.get("borrowed", ()))))
        return real_run(task, policy, measurer, model, n, **kw)

    monkeypatch.setattr(ts, "run_round", spy)
    tasks = small_tasks()
    s = TaskScheduler(tasks, strategy="round-robin", callbacks=[])
    assert s.donors == [[1, 2], [0, 2], [1, 0]] or all(sorted(d) == sorted(set(range(3)) - {i})
                                                         for i, d in enumerate(s.donors))
    s.tune(options(12, per_round=4))
    assert offered[0] == (tasks[0].workload_key, 0)  # nothing measured yet to lend
    assert offered[1][1] > 0 and offered[2][1] > 0
    lent = s.borrowed(2)
    assert lent and all(st.dag is not tasks[2].compute_dag for st in lent)
    pol = SketchPolicy(tasks[2], RandomModel(0), params=SMALL_PARAMS, seed=0)
    assert pol._reseed(lent, len(lent))  # they replay onto the other shapes
    monkeypatch.setattr(ts, "SHARE_BELOW", 1)
    assert s.borrowed(2) == []  # enough of its own
    offered.clear()
    off = TaskScheduler(small_tasks(), strategy="round-robin", callbacks=[], share_schedules=False)
    off.tune(options(24, per_round=4))
    assert [n for _, n in offered] == [0] * 6
    with pytest.raises(TypeError, match="share_schedules must be True or False"):
        TaskScheduler(small_tasks(), share_schedules=1)
