"""The scheduler's estimate calibrated in the network (issue 44): factors from a profile, the
mapping of factors to tasks that do not run in the compiled network, the scheduler's scaled
objective, and a run whose callback calibrates after the warm-up and every ``every`` trials.

Measurement is faked (``sched_fakes``) and the network profile is made up: what is checked is
the arithmetic and when it happens; ``test_network_profile`` checks the profile itself.
"""
from __future__ import annotations

import io

import pytest

from ansor.graph.network_calibration import (ALTERNATIVE, FACTOR_RANGE, NetworkCalibration, calibrate,
                                             factors_from_profile, task_factors)
from ansor.task_scheduler import TaskScheduler

from ..sched_fakes import FakeRunner
from ..test_task_scheduler import Order, options, primed, small_tasks


def test_factors_are_in_network_time_per_occurrence_over_the_record():
    rows = [{"task": "a", "seconds": 2e-3}, {"task": "a", "seconds": 4e-3},  # two occurrences
            {"task": "", "seconds": 9e-3},  # a transform: no task
            {"task": "b", "seconds": 1e-3}, {"task": "c", "seconds": 1.0}, {"task": "z", "seconds": 1.0}]
    got = factors_from_profile(rows, {"a": 2e-3, "b": 2e-3, "c": 1e-3})
    assert got == pytest.approx({"a": 1.5, "b": 0.5, "c": FACTOR_RANGE[1]})  # c clamped, z has no cost


def test_tasks_not_in_the_network_take_their_positions_factor():
    groups = [["g0"], ["g1", "g1w"], ["g2"], ["g3"]]
    pairs = [(0, 1, "p01"), (2, 3, "p23")]
    # p01 fused (g0, g1 and its variant g1w not run), p23 run apart, g1w a variant not chosen
    measured = {"p01": 1.4, "g2": 1.2, "g3": 2.0}
    keys = ["g0", "g1", "g1w", "g2", "g3", "p01", "p23", "other"]
    got = dict(zip(keys, task_factors(keys, measured, groups, pairs)))
    assert got["g0"] == got["g1"] == got["g1w"] == pytest.approx(1.4)
    assert got["p23"] == pytest.approx(1.6)  # the mean of its two groups
    assert got["other"] == pytest.approx(1.4)  # the median of the measured factors
    assert task_factors(["x"], {}, [["x"]]) == [1.0]


def test_set_calibration_scales_the_objective_and_is_checked():
    tasks = small_tasks()
    s = primed(tasks, costs=[1e-3, 2e-3, 3e-3])
    assert s.estimated_latency() == pytest.approx(6e-3)
    s.set_calibration([2.0, 1.0, 1.0])
    assert s.estimated_latency() == pytest.approx(7e-3) and s.calibrations == 1
    with pytest.raises(ValueError, match="one positive finite factor per task"):
        s.set_calibration([1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="one positive finite factor per task"):
        s.set_calibration([1.0])
    s.set_calibration(None)
    assert s.estimated_latency() == pytest.approx(6e-3) and s.calibration is None


def test_a_calibrated_task_gets_the_rounds():
    # made-up profile: task 0 runs 20x its records in the network, so after the warm-up's
    # calibration every round goes to it, where without calibration they spread.
    tasks = small_tasks()
    calls = []

    def profile():
        calls.append(1)
        return [{"task": t.workload_key, "seconds": (20.0 if i == 0 else 1.0) * s.best_cost(i)}
                for i, t in enumerate(tasks)]

    cal = NetworkCalibration(profile, [[t.workload_key] for t in tasks], every=0, file=io.StringIO())
    order = Order()
    s = TaskScheduler(tasks, callbacks=[cal, order], seed=0)
    r = s.tune(options(60, per_round=5, runner=FakeRunner()))
    assert len(calls) == 1 and cal.last is not None and cal.last.at_trials == 15  # after the warm-up
    assert cal.last.factors[0] == pytest.approx(FACTOR_RANGE[1])  # 20x, clamped
    picks = order.picks
    assert picks[:3] == [0, 1, 2] and picks[3:].count(0) >= len(picks[3:]) - 2
    assert r.estimated_latency == pytest.approx(8 * r.best_costs[0] + r.best_costs[1] + r.best_costs[2], rel=0.3)


def test_calibration_every_k_trials_and_a_failure_keeps_the_run_going(tmp_path):
    tasks = small_tasks()
    n = {"calls": 0}

    def profile():
        n["calls"] += 1
        if n["calls"] == 2:
            raise RuntimeError("compile failed")
        return [{"task": t.workload_key, "seconds": 1.0 * s.best_cost(i)} for i, t in enumerate(tasks)]

    out = io.StringIO()
    tsv = tmp_path / "log.json.calibration.tsv"
    cal = NetworkCalibration(profile, [[t.workload_key] for t in tasks], every=10, file=out, tsv=tsv)
    s = TaskScheduler(tasks, callbacks=[cal], seed=0, strategy="round-robin", remeasure_best=1)
    r = s.tune(options(45, per_round=5, runner=FakeRunner()))
    assert r.trials == 45 and cal.failed == 1
    # after the warm-up (15), at 25 (fails: told, tried again at 35), at 35, at 45 (the end)
    assert n["calls"] == 4 and "compile failed" in out.getvalue()
    assert cal.last is not None and cal.last.factors == pytest.approx([1.0, 1.0, 1.0])
    rows = [ln.split("\t") for ln in tsv.read_text().splitlines()]
    assert rows[0] == ["trials", "task", "record_ms", "in_network_ms", "factor"]
    assert [r[0] for r in rows[1:]] == ["15"] * 3 + ["35"] * 3 + ["45"] * 3  # the failed one wrote none
    assert {r[1] for r in rows[1:]} == {t.desc for t in tasks} and all(r[4] == "1.000" for r in rows[1:])
    with pytest.raises(ValueError, match="every"):
        NetworkCalibration(profile, [], every=-1)



def test_a_task_filtered_out_of_tuning_does_not_stop_calibration():
    # task 2 is not tuned (no record): the profile still costs 0 for it, the others calibrate
    tasks = small_tasks()

    def profile():
        return [{"task": t.workload_key, "seconds": 2.0 * (s.best_cost(i) or 1e-3)} for i, t in enumerate(tasks)]

    cal = NetworkCalibration(profile, [[t.workload_key] for t in tasks], every=0, file=io.StringIO())
    s = TaskScheduler(tasks, callbacks=[cal], seed=0, task_filter=lambda i, t: i != 2)
    s.tune(options(20, per_round=5, runner=FakeRunner()))
    assert cal.last is not None and set(cal.last.measured) == {tasks[0].workload_key, tasks[1].workload_key}
    assert cal.last.factors == pytest.approx([2.0, 2.0, 2.0])  # the filtered task: the median


def test_the_alternative_networks_rows_give_factors_but_not_the_networks_time():
    tasks = small_tasks()
    s = primed(tasks, costs=[1e-3, 2e-3, 3e-3])
    keys = [t.workload_key for t in tasks]
    # groups: task 0 alone; tasks 1 and 2 two variants of one group (2 chosen, 1 the alternative)
    rows = [{"task": keys[0], "seconds": 1e-3}, {"task": keys[2], "seconds": 6e-3},
            {"task": keys[0], "seconds": 3e-3, ALTERNATIVE: True}, {"task": keys[1], "seconds": 3e-3, ALTERNATIVE: True}]
    cal = calibrate(s, lambda: rows, [[keys[0]], [keys[1], keys[2]]])
    assert cal.profile_seconds == pytest.approx(7e-3) and cal.alternative_seconds == pytest.approx(6e-3)
    assert cal.measured == pytest.approx({keys[0]: 2.0, keys[1]: 1.5, keys[2]: 2.0})  # key 0: both networks
    assert cal.by_key() == dict(zip(keys, cal.factors))


def test_the_profiler_profiles_the_network_with_winograd_swapped_too(monkeypatch):
    """``network_profiler``: the chosen network, then the one ``alternative_layouts`` gives,
    its rows marked; no second network when nothing can be swapped."""
    from types import SimpleNamespace

    from ansor.graph import executor
    from ansor.graph.network_calibration import network_profiler

    compiled = []

    def fake_compile(plan, log_file=None, target=None, verbose=True, layouts="auto"):
        compiled.append(layouts)
        t = 2e-3 if layouts == "auto" else 3e-3
        return SimpleNamespace(profile=lambda statistic: [{"task": "conv", "seconds": t}])

    monkeypatch.setattr(executor, "compile_network", fake_compile)

    def choice(chosen):
        variants = [SimpleNamespace(layouts=("NHWC", "winograd4"))]
        return SimpleNamespace(layouts=SimpleNamespace(layouts=(chosen,), group_costs=((1.0, 0.5),)),
                               variants=variants)

    rows = network_profiler(None, "log.json", choose=lambda: choice("winograd4"))()
    assert compiled == ["auto", ["NHWC"]]
    assert rows == [{"task": "conv", "seconds": 2e-3}, {"task": "conv", "seconds": 3e-3, ALTERNATIVE: True}]
    compiled.clear()
    network_profiler(None, "log.json", choose=lambda: choice("NHWC"))()
    assert compiled == ["auto", ["winograd4"]]
    compiled.clear()
    no_wino = SimpleNamespace(layouts=SimpleNamespace(layouts=("NHWC",), group_costs=((1.0,),)),
                              variants=[SimpleNamespace(layouts=("NHWC",))])
    assert len(network_profiler(None, "log.json", choose=lambda: no_wino)()) == 1 and compiled == ["auto"]
