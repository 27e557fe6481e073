"""``NetworkModule.profile``: each kernel's time inside the running network, from the module's call
chain with the clock read between calls (``measure.call_chain``, tested there), named by step and
by tuning task, kept through export."""
from __future__ import annotations

import ansor
from ansor.graph.plan import plan_network
from tests.ansor.graph.test_network_compile import _inputs, _small


def test_profile_names_every_step_and_its_task(tmp_path):
    g = _small()
    plan = plan_network(g)
    lib = ansor.compile_network(plan, verbose=False)
    prof = lib.profile(min_repeat_ms=20, warmup_ms=5)
    assert len(prof) == lib.num_kernels
    assert all(p["seconds"] > 0 and isinstance(p["name"], str) and not p["transform"] for p in prof)
    keys = {t.workload_key for t in plan.tasks}
    tasks = [p["task"] for p in prof if p["task"]]
    assert tasks and set(tasks) == keys  # every task's kernel ran, and only tasks carry a key
    lib.run(_inputs(g))  # the module still runs as before
    lib.export(tmp_path / "mod")
    loaded = ansor.load_module(tmp_path / "mod")
    assert [p["task"] for p in loaded.profile(min_repeat_ms=5, warmup_ms=0)] == [p["task"] for p in prof]


def test_profile_statistic_mean_sums_to_the_mean_inference(monkeypatch):
    import numpy as np
    import pytest

    from measure.call_chain import CallTable

    lib = ansor.compile_network(plan_network(_small()), verbose=False)
    n = lib.num_kernels

    def fake(self, passes):  # one slow inference in three: the median hides it, the mean not
        rows = np.full((passes, n), 1e-3)  # passes >= 5
        rows[::3, 0] = 7e-3
        return rows
    monkeypatch.setattr(CallTable, "profile", fake)
    med = lib.profile(min_repeat_ms=0, warmup_ms=0)
    mean = lib.profile(min_repeat_ms=0, warmup_ms=0, statistic="mean")
    assert med[0]["seconds"] == pytest.approx(1e-3) and mean[0]["seconds"] > 2e-3
    assert [m["task"] for m in mean] == [m["task"] for m in med]
    with pytest.raises(ValueError, match="profile statistic must be one of median, mean"):
        lib.profile(statistic="max")
