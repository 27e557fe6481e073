"""``NetworkModule.profile``: each kernel's time inside the running network, from the native step
harness (``measure.timer.StepTimer``), named by step and by tuning task, kept through export."""
from __future__ import annotations

import numpy as np

import ansor
from ansor.graph.plan import plan_network
from compute import expr as E
from measure import timer
from tests.ansor.graph.test_network_compile import _inputs, _small
from tests.measure.helpers import elementwise


def test_the_step_harness_calls_every_step_in_order_and_times_each():
    n = 1024
    add1 = elementwise(lambda x: x + E.const(1.0, "float32"), ["float32"], "float32", n)
    add2 = elementwise(lambda x, y: x + y, ["float32", "float32"], "float32", n, name="ew2")
    x = np.arange(n, dtype=np.float32)
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    steps = [(add1.address, add1.arg_pointers(x, y)), (add2.address, add2.arg_pointers(y, x, z))]
    run = timer.StepTimer(steps)
    elapsed = run(5)
    np.testing.assert_array_equal(z, 2 * x + 1)  # step 2 read what step 1 wrote
    per_pass = run.step_seconds()
    assert len(per_pass) == 5 and all(len(p) == 2 and min(p) > 0 for p in per_pass)
    assert sum(map(sum, per_pass)) <= elapsed


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
