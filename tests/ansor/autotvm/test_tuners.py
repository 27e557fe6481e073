"""Template tuners: each finds valid schedules on each template, the log they write (readable by
the record tools, one line per configuration), resume without measuring anything twice, invalid
configurations as measurement errors, progress lines, the strategies' own rules (no repeats,
elites, the model's plan, transfer) and errors for bad input.

Measurements use a fast runner (one call, no warm-up): these tests check the loop, not timing.
Strategy tests that need no measurement feed the tuners synthetic scores.
"""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import ansor
from ansor import autotvm
from ansor.autotvm.task import _BY_WORKLOAD, _TEMPLATES
from ansor.records import load_records, summarize
from measure.measure import MeasureErrorNo

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)
SMALL = {  # quick shapes per template
    "matmul": (32, 32, 32),
    "dense": (8, 32, 16),
    "batch_matmul": (2, 16, 16, 8),
    "conv2d_nhwc": (1, 6, 6, 8, 8, 3, 3, 1, 1),
    "conv2d_bias_relu": (1, 6, 6, 8, 8, 3, 3, 1, 1),
    "depthwise_conv2d_nhwc": (1, 8, 8, 8, 3, 3, 1, 1),
}
PROGRESS = re.compile(r"^\[Task \S+\] Current/Best: +\d+\.\d\d/ +\d+\.\d\d GFLOPS \| "
                      r"Progress: \(\d+/\d+\) \| \d+\.\d\d s( Done\.)?$")


def make(name: str, task, **kw):
    """A tuner by short name, with sizes that act within a few trials."""
    if name == "ga":
        kw.setdefault("pop_size", 6)
    if name == "lgbm":
        kw.setdefault("plan_size", 4)
        kw.setdefault("sa_iters", 50)
    return autotvm.TUNERS[name](task, seed=0, **kw)


@pytest.fixture(scope="module")
def mo():
    with ansor.LocalBuilder(timeout=30, n_parallel=2) as b, ansor.LocalRunner(timeout=10, **FAST) as r:
        yield autotvm.measure_option(b, r)


def log_lines(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


# ---- every tuner finds valid schedules -----------------------------------------------------------

@pytest.mark.parametrize("tuner", list(autotvm.TUNERS))
def test_each_tuner_finds_valid_schedules_and_logs_them(tuner, mo, tmp_path, capsys):
    task = autotvm.create_task("matmul", SMALL["matmul"])
    log = tmp_path / "log.json"
    res = make(tuner, task).tune(12, mo, log_file=log, batch_size=4)
    assert res.trials == 12 and res.stop_reason == "trial budget reached"
    assert res.best_gflops > 0 and res.best_config is not None and len(res.curve) == 12
    assert list(res.curve) == sorted(res.curve) and res.curve[-1] == res.best_gflops
    # One record per trial, each naming its configuration; none twice.
    lines = log_lines(log)
    assert len(lines) == 12
    idx = [ln["autotvm"]["index"] for ln in lines]
    assert len(set(idx)) == 12
    assert all(ln["autotvm"]["template"] == "matmul" for ln in lines)
    assert all(ln["autotvm"]["space"] == task.space.signature for ln in lines)
    # The record tools read the log as any other: the recorded state is the configuration's.
    recs = list(load_records(log))
    assert len(recs) == 12
    for (inp, _), ln in zip(recs, lines):
        assert inp.state.canonical_key() == task.instantiate(ln["autotvm"]["index"]).canonical_key()
    (summary,) = summarize(log)
    assert summary.n_records == 12 and summary.gflops == pytest.approx(res.best_gflops)
    cfg, state = task.best_config(log)
    assert cfg == res.best_config and state.canonical_key() == res.best_state.canonical_key()
    assert ansor.build(task.search_task.apply_best(log)) is not None
    out = capsys.readouterr().out.strip().splitlines()
    assert all(PROGRESS.match(line) for line in out), out
    assert out[-1].endswith("Progress: (12/12) | " + out[-1].split("| ")[-1]) and "Done." in out[-1]


@pytest.mark.parametrize("template", list(SMALL))
def test_random_tuner_on_every_template(template, mo):
    task = autotvm.create_task(template, SMALL[template])
    res = autotvm.RandomTuner(task, seed=1).tune(4, mo, batch_size=4, verbose=0)
    assert res.trials == 4 and res.best_gflops > 0


@pytest.mark.slow
@pytest.mark.parametrize("template", list(SMALL))
@pytest.mark.parametrize("tuner", list(autotvm.TUNERS))
def test_every_tuner_on_every_template(tuner, template, mo):
    task = autotvm.create_task(template, SMALL[template])
    res = make(tuner, task).tune(10, mo, batch_size=5, verbose=0)
    assert res.trials == 10 and res.best_gflops > 0 and res.errors < 10


# ---- resume --------------------------------------------------------------------------------------

@pytest.mark.parametrize("tuner", ["random", "lgbm"])
def test_resume_skips_measured_configurations(tuner, mo, tmp_path, capsys):
    task = autotvm.create_task("matmul", SMALL["matmul"])
    log = tmp_path / "r.json"
    first = make(tuner, task).tune(8, mo, log_file=log, batch_size=4)
    again = make(tuner, task)  # a fresh process would start like this
    second = again.tune(8, mo, log_file=log, batch_size=4)
    assert second.trials == 8 and second.resumed_records == 8
    assert second.best_gflops >= first.best_gflops
    idx = [ln["autotvm"]["index"] for ln in log_lines(log)]
    assert len(idx) == 16 and len(set(idx)) == 16
    assert set(idx) <= again.visited
    assert "resuming from" in capsys.readouterr().out
    # n_trial=0 on a resumed log measures nothing and reports the log's best.
    third = make(tuner, task).tune(0, mo, log_file=log, verbose=0)
    assert third.trials == 0 and third.best_gflops == pytest.approx(
        max(second.best_gflops, first.best_gflops))


def test_resume_recognises_states_without_a_config_part(mo, tmp_path):
    """Plain records (e.g. a copied state) still count as measured: same state, no new trial."""
    task = autotvm.create_task("matmul", SMALL["matmul"])
    log = tmp_path / "plain.json"
    states = [task.instantiate(i) for i in range(3)]
    inputs = [ansor.MeasureInput(task.search_task, s) for s in states]
    results = ansor.measure_batch(inputs, *_bm(mo))
    ansor.RecordToFile(log)(inputs, results)
    res = autotvm.GridSearchTuner(task).tune(5, mo, log_file=log, verbose=0)
    new = [ln["autotvm"]["index"] for ln in log_lines(log)[3:]]
    assert res.trials == 5 and new == [3, 4, 5, 6, 7]


def _bm(mo):
    return mo.builder, mo.runner


# ---- errors during tuning -----------------------------------------------------------------------


def test_invalid_configs_are_measurement_errors(mo, tmp_path, scratch_templates):
    scratch_templates.append("t_half_bad")

    @autotvm.register_template("t_half_bad", workloads=())
    def tmpl(cfg, dag):
        cfg.define_split("tile", 16, num_outputs=2)
        cfg.define_knob("ann", ["none", "vectorize"])
        s = dag.init_state()
        s, (_, _) = cfg["tile"].apply(s, "matmul", "i")
        if cfg["ann"].val != "none":
            s = s.annotate("matmul", "k", cfg["ann"].val)  # invalid: a reduction loop
        return s

    task = autotvm.create_task("matmul", (16, 8, 8), template="t_half_bad")
    assert len(task.space) == 10
    log = tmp_path / "bad.json"
    res = autotvm.GridSearchTuner(task).tune(20, mo, log_file=log, verbose=0, batch_size=4)
    assert res.stop_reason.startswith("the space is exhausted") and res.trials == 10
    assert res.errors == 5 and res.best_gflops > 0
    lines = log_lines(log)
    errs = [ln for ln in lines if ln["result"]["error_no"] == MeasureErrorNo.INSTANTIATION_ERROR]
    assert len(errs) == 5 and all(ln["autotvm"]["knobs"]["ann"] == "vectorize" for ln in errs)
    assert all("does not instantiate" in ln["result"]["error_msg"] for ln in errs)
    # Resuming counts the failed ones as measured too.
    assert autotvm.GridSearchTuner(task).tune(5, mo, log_file=log, verbose=0).trials == 0


def test_a_template_that_raises_on_some_configs_does_not_crash_the_tuner(mo, scratch_templates):
    scratch_templates.append("t_raises")

    @autotvm.register_template("t_raises", workloads=())
    def tmpl(cfg, dag):
        cfg.define_knob("k", [1, 2, 4, 8])
        if cfg["k"].val == 4 and not isinstance(cfg, autotvm.ConfigSpace):
            raise ZeroDivisionError("template bug")
        return dag.init_state().split("matmul", "i", [cfg["k"].val])

    task = autotvm.create_task("matmul", (8, 8, 8), template="t_raises")
    res = autotvm.RandomTuner(task, seed=0).tune(4, mo, verbose=0)
    assert res.trials == 4 and res.errors == 1 and res.best_gflops > 0


def test_callbacks_see_every_batch(mo):
    task = autotvm.create_task("matmul", SMALL["matmul"])
    seen: list[int] = []
    autotvm.RandomTuner(task, seed=3).tune(6, mo, batch_size=4, verbose=0,
                                           callbacks=[lambda t, i, r: seen.append(len(r))])
    assert seen == [4, 2]


def test_early_stopping(mo):
    task = autotvm.create_task("matmul", SMALL["matmul"])
    res = autotvm.GridSearchTuner(task).tune(200, mo, batch_size=2, verbose=0, early_stopping=2)
    assert res.stop_reason.startswith("early stopping") and res.trials < 200


# ---- bad input -----------------------------------------------------------------------------------

def test_bad_arguments_are_clear_errors(mo):
    task = autotvm.create_task("matmul", (8, 8, 8))
    t = autotvm.RandomTuner(task)
    with pytest.raises(ValueError, match="n_trial must be an integer >= 0"):
        t.tune(-1, mo)
    with pytest.raises(ValueError, match="batch_size"):
        t.tune(4, mo, batch_size=0)
    with pytest.raises(ValueError, match="early_stopping"):
        t.tune(4, mo, early_stopping=0)
    with pytest.raises(TypeError, match="measure_option"):
        t.tune(4, {"builder": "local"})
    with pytest.raises(ValueError, match="builder must be 'local'"):
        autotvm.measure_option(builder="rpc")
    with pytest.raises(TypeError, match="TemplateTask"):
        autotvm.RandomTuner(ansor.SearchTask(func="matmul", args=(8, 8, 8)))
    with pytest.raises(ValueError, match="pop_size"):
        autotvm.GATuner(task, pop_size=1)
    with pytest.raises(ValueError, match="elite_num"):
        autotvm.GATuner(task, pop_size=4, elite_num=4)
    with pytest.raises(ValueError, match="mutation_prob"):
        autotvm.GATuner(task, mutation_prob=2)
    with pytest.raises(ValueError, match="unknown loss_type 'xgb'"):
        autotvm.LGBMTuner(task, loss_type="xgb")
    with pytest.raises(ValueError, match="plan_size"):
        autotvm.LGBMTuner(task, plan_size=0)


# ---- strategies, without measurement ------------------------------------------------------------

def _drive(tuner, score, rounds: int, batch: int) -> list[int]:
    """Run a tuner's propose/update cycle against a synthetic score (no measurement)."""
    out = []
    for _ in range(rounds):
        idx = tuner.next_batch(batch)
        assert len(idx) == len(set(idx)) and not set(idx) & tuner.visited
        tuner.visited.update(idx)
        tuner.update(idx, [score(i) for i in idx])
        out += idx
    return out


def _tiny_task():
    return autotvm.create_task("depthwise_conv2d_nhwc", (1, 4, 4, 4, 3, 3, 1, 1))


def test_grid_and_random_cover_a_small_space_without_repeats():
    task = _tiny_task()
    n = len(task.space)
    for cls in (autotvm.GridSearchTuner, autotvm.RandomTuner):
        t = cls(task, seed=5)
        seen = _drive(t, lambda i: 1.0, rounds=n, batch=7)
        assert sorted(seen) == list(range(n)) and not t.has_next()
    assert _drive(autotvm.GridSearchTuner(task), lambda i: 1.0, 1, 5) == [0, 1, 2, 3, 4]


def test_same_seed_same_proposals():
    task = autotvm.create_task("matmul", (64, 64, 64))
    for name in ("random", "ga", "lgbm"):
        a, b = make(name, task), make(name, task)
        score = lambda i: float(i % 97)  # noqa: E731
        assert _drive(a, score, 4, 6) == _drive(b, score, 4, 6)


def test_ga_keeps_elites_and_breeds_from_the_fittest():
    task = autotvm.create_task("matmul", (64, 64, 64))
    ga = autotvm.GATuner(task, pop_size=10, elite_num=3, seed=0)
    first = _drive(ga, lambda i: float(i % 101), 1, 10)
    assert len(first) == 10 and ga.n_generations == 1
    second = ga.next_batch(100)
    elites = sorted(first, key=lambda i: i % 101, reverse=True)[:3]
    assert ga.generation[:3] == elites          # kept, with their known scores ...
    assert len(second) == 7 and not set(second) & set(first)  # ... and not measured again


def test_model_tuner_plan_follows_the_learned_score():
    """Scores rise with the register tile's width: after a fit, the SA plan proposes wide tiles
    far more often than random picks do."""
    task = autotvm.create_task("matmul", (64, 64, 64))
    for loss in ("rank", "reg"):
        t = autotvm.LGBMTuner(task, loss_type=loss, plan_size=16, sa_iters=100, seed=0,
                              eps_greedy=0.0)
        score = lambda i: float(task.space.get(i)["tile_x"].size[-1])  # noqa: E731
        _drive(t, score, 2, 16)  # random, then the first fit
        assert t.n_fits >= 1 and t.plan
        planned = _drive(t, score, 1, 16)
        rand = autotvm.RandomTuner(task, seed=0).sample_unvisited(200)
        assert np.mean([score(i) for i in planned]) > 2 * np.mean([score(i) for i in rand]), loss


def test_model_tuner_transfers_from_another_workloads_log(mo, tmp_path):
    src = autotvm.create_task("matmul", (32, 16, 32))
    log = tmp_path / "src.json"
    autotvm.RandomTuner(src, seed=0).tune(8, mo, log_file=log, verbose=0)
    dst = autotvm.create_task("matmul", SMALL["matmul"])
    t = autotvm.LGBMTuner(dst, plan_size=4, sa_iters=30, seed=0)
    assert t.load_history(log) == 8
    assert t.n_fits == 1 and len(t.plan) == 4
    plan = list(t.plan)
    res = t.tune(4, mo, batch_size=4, verbose=0, log_file=tmp_path / "dst.json")
    assert res.trials == 4 and res.best_gflops > 0
    measured = [ln["autotvm"]["index"] for ln in log_lines(tmp_path / "dst.json")]
    assert len(set(measured) & set(plan)) >= 2  # the model chose the first batch
    # Another template's records teach nothing; a bad argument is a clear error.
    other = autotvm.LGBMTuner(autotvm.create_task("depthwise_conv2d_nhwc", SMALL["depthwise_conv2d_nhwc"]))
    assert other.load_history(log) == 0 and other.booster is None
    with pytest.raises(TypeError, match="log paths or ConfigRecords"):
        other.load_history([1, 2])


def test_gflops_of_failures_is_zero():
    from ansor.autotvm.tuner import gflops_of
    from measure.measure import MeasureResult

    assert gflops_of(2e9, MeasureResult((1.0,), 0)) == pytest.approx(2.0)
    assert gflops_of(2e9, MeasureResult((1.0,), int(MeasureErrorNo.RUN_TIMEOUT))) == 0.0
    assert math.isfinite(gflops_of(0.0, MeasureResult((1e-3,), 0)))


def test_configs_with_the_same_state_are_measured_once(mo, scratch_templates):
    scratch_templates.append("t_same")

    @autotvm.register_template("t_same", workloads=())
    def tmpl(cfg, dag):
        cfg.define_knob("ignored", ["a", "b", "c"])  # changes nothing in the schedule
        cfg.define_knob("k", [2, 4])
        return dag.init_state().split("matmul", "i", [cfg["k"].val])

    task = autotvm.create_task("matmul", (8, 8, 8), template="t_same")
    t = autotvm.GridSearchTuner(task)
    res = t.tune(10, mo, verbose=0)
    assert res.trials == 2 and len(t.visited) == 6 and res.stop_reason.startswith("the space")
