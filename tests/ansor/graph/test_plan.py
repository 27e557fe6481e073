"""The network plan (issue 41 item 2): a network is fused and lowered once per command - by
``ansor network tune`` (tasks, layout choice and the final compile) and by ``compile_network`` -
and a plan handed to ``compile_network`` is not lowered again; the network's zero-trial guess
uses the one named network setting."""
import sys

import numpy as np
import pytest

import ansor
from ansor.cli import main as ansor_main
from ansor.graph import GraphBuilder, run
from ansor.graph import layout_tuning, plan as plan_mod, tasks as tasks_mod  # noqa: F401 - spied on
from ansor.graph.layouts import NHWC
from ansor.graph.plan import extract_tasks, plan_network
from ansor.search_task import NETWORK_GUESS_SEARCH
from ansor.untuned import untuned_schedule


def _tiny(channels: int = 8):
    rng = np.random.default_rng(0)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 6, 6, channels))
    w = b.constant(rng.standard_normal((3, 3, channels, 8)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, b.constant(rng.standard_normal(8).astype(np.float32), "b"), padding=1))
    w2 = b.constant(rng.standard_normal((3, 3, 8, 8)).astype(np.float32), "w2")
    return b.build(b.relu(b.conv2d(y, w2, b.constant(np.zeros(8, np.float32), "b2"), padding=1)))


def _count_lowering(monkeypatch) -> list[int]:
    """Count calls of ``tasks.lower_groups`` wherever a module of ansor bound it."""
    real = tasks_mod.lower_groups
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    for name, mod in list(sys.modules.items()):
        if name.startswith("ansor") and getattr(mod, "lower_groups", None) is real:
            monkeypatch.setattr(mod, "lower_groups", counted)
    return calls


def _inputs(g):
    rng = np.random.default_rng(1)
    return {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in g.inputs.items()}


def test_compile_network_lowers_once_and_a_given_plan_not_again(monkeypatch):
    g = _tiny()
    calls = _count_lowering(monkeypatch)
    lib = ansor.compile_network(g, verbose=False)
    assert len(calls) == 1
    plan = plan_network(g)
    assert len(calls) == 2
    again = ansor.compile_network(plan, verbose=False)
    assert len(calls) == 2  # the plan's groups are reused
    x = _inputs(g)
    ref = run(g, x)
    for out in (lib.run(x), again.run(x)):
        for k in ref:
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-4 * np.abs(ref[k]).max())


@pytest.mark.parametrize("layout_tuning", [False, True])
def test_network_tune_lowers_the_network_once(tmp_path, monkeypatch, capsys, layout_tuning):
    g = _tiny()
    monkeypatch.setattr("ansor.cli.common.load_model", lambda *a, **k: g)
    # The final timing is not what this counts, and on a shared, loaded host it can take minutes.
    monkeypatch.setattr(ansor.NetworkModule, "benchmark",
                        lambda self, *a, **k: {"mean": 1e-3, "overhead": 0.0, "overhead_share": 0.0,
                                               "kernels": self.num_kernels})
    calls = _count_lowering(monkeypatch)
    log = tmp_path / "net.json"
    argv = ["network", "tune", "tiny", "--trials", "2", "--per-round", "1", "--population", "16",
            "--log", str(log), "--seed", "0", "--rounds", "0", "--verbose", "0"]
    assert ansor_main(argv + (["--layout-tuning"] if layout_tuning else [])) == 0, capsys.readouterr().err
    assert "measured latency of the compiled network" in capsys.readouterr().out
    assert len(calls) == 1


def test_plan_holds_the_tasks_of_extract_tasks_and_lays_out_without_lowering(monkeypatch):
    g = _tiny()
    plan = plan_network(g)
    tasks, weights = extract_tasks(g)
    assert [t.workload_key for t in plan.tasks] == [t.workload_key for t in tasks]
    assert list(plan.weights) == weights and plan.layouts == (NHWC,) * len(plan.groups)
    assert sorted(plan.task_of) == list(range(len(plan.groups)))
    calls = _count_lowering(monkeypatch)
    blocked = plan.with_layouts(["NCHW8c", NHWC])
    assert not calls and blocked.groups is plan.groups
    assert blocked.occurrences[1] is plan.occurrences[1]
    assert blocked.occurrences[0].dag.workload_key != plan.occurrences[0].dag.workload_key
    assert ansor.compile_network(plan, verbose=False, layouts=["NCHW8c", NHWC]).num_layout_transforms > 0
    assert not calls


def test_a_plan_and_a_contradicting_layout_rewrite_are_refused():
    plan = plan_network(_tiny(), layout_rewrite=False)
    with pytest.raises(ValueError, match="layout_rewrite"):
        ansor.compile_network(plan, verbose=False, layout_rewrite=True)
    with pytest.raises(ValueError, match="include_simple"):
        ansor.compile_network(plan_network(_tiny(), include_simple=True), verbose=False)


def test_the_network_guess_uses_the_named_network_setting(monkeypatch):
    from ansor.graph import schedules
    from ansor.graph.tasks import GraphTask

    seen = []

    def guess(self, cost_model=None, search_params=None, seed=0):
        seen.append(search_params)
        return untuned_schedule(self.compute_dag)[0]

    class Pretrained:
        base_booster = object()

    monkeypatch.setattr(schedules, "default_cost_model", lambda seed: Pretrained())
    monkeypatch.setattr(GraphTask, "best_guess", guess)
    ansor.compile_network(_tiny(), verbose=False, untuned="guess")
    assert seen and all(p is NETWORK_GUESS_SEARCH for p in seen)
