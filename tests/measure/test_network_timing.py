"""Network-mode timing (``LocalRunner(cache="network")``): only the constant arguments rotate (the
pointers each call gets), through enough copies to cover the network's footprint; the same
verdicts as warm; the mode and the task's conditions travel to a remote runner, checked there."""
from __future__ import annotations

import types

import numpy as np
import pytest

from measure import cluster_worker, target, timer
from measure.builder import LocalBuilder
from measure.measure import (COLD, HANDOFF, NETWORK, WARM, MeasureErrorNo, MeasureInput, check_conditions,
                             network_conditions)
from measure.runner import LocalRunner
from measure.timing_modes import handed_off, mode_timer as _timer
from tests.measure import faults as F
from tests.measure.helpers import elementwise

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)


def test_rotation_sets_cover_the_footprint_up_to_the_cold_rule():
    llc = 32 << 20
    assert timer.rotation_sets(4096, llc, 0) == 1  # nothing between two calls: no rotation
    assert timer.rotation_sets(4096, llc, 3 * 4096) == 4  # three other sets cover it
    assert timer.rotation_sets(4096, llc, 3 * 4096 + 1) == 5
    assert timer.rotation_sets(4096, llc, 100 * llc) == 1 + 2 * llc // 4096  # beyond 2 LLC: evicted
    assert timer.rotation_sets(2 << 30, llc, 1 << 30) == 1  # the memory cap, as cold


def _add3(n=256):
    """Out = X + W: X an activation, W a constant (position 1)."""
    k = elementwise(lambda x, w: x + w, ["float32", "float32"], "float32", n)
    x = np.arange(n, dtype=np.float32)
    w = np.full(n, 0.5, np.float32)
    return k, x, w, np.zeros(n, np.float32)


def test_only_the_constants_rotate_and_each_call_takes_the_next_copy():
    k, x, w, out = _add3()
    ptrs = k.arg_pointers(x, w, out)
    t, slab = _timer(k.address, ptrs, [x, w, out], NETWORK, (1,), 3 * w.nbytes)
    assert t.sets == 4 and slab.shape[0] == 3
    flat = list(t._args)
    sets = [flat[i * 3:(i + 1) * 3] for i in range(4)]
    assert all(s[0] == ptrs[0] and s[2] == ptrs[2] for s in sets)  # activation and output: one set
    assert len({s[1] for s in sets}) == 4 and sets[0][1] == ptrs[1]
    for r in range(3):  # mark each copy of W so the output says which one a call read
        np.testing.assert_array_equal(slab[r, :w.nbytes].view(np.float32), w)
        slab[r, :w.nbytes].view(np.float32)[:] = 10.0 * (r + 1)
    for expected in (0.5, 10.0, 20.0, 30.0, 0.5):
        t(1)
        np.testing.assert_array_equal(out, x + expected)


def test_the_footprint_unknown_means_the_cold_rule_and_no_constants_means_warm():
    k, x, w, out = _add3()
    ptrs = k.arg_pointers(x, w, out)
    llc = target.last_level_cache_bytes()
    t, _ = _timer(k.address, ptrs, [x, w, out], NETWORK, (1,), None)
    assert t.sets == timer.rotation_sets(w.nbytes, llc, timer.COLD_LLC_FACTOR * llc) > 2
    assert _timer(k.address, ptrs, [x, w, out], NETWORK, (), 1 << 30)[0].sets == 1
    assert _timer(k.address, ptrs, [x, w, out], WARM, (1,), 1 << 30)[0].sets == 1
    cold = _timer(k.address, ptrs, [x, w, out], COLD, (1,), 0)[0]  # cold ignores both
    assert cold.sets == timer.rotation_sets(x.nbytes + w.nbytes + out.nbytes, llc)


def test_conditions_are_read_from_the_task_and_checked():
    graph_task = types.SimpleNamespace(constant_inputs=(2, 1), layout_rewrite_inputs=(),
                                       network_footprint_bytes=1000)
    assert network_conditions(graph_task) == {"constants": [2, 1], "footprint": 1000}
    assert network_conditions(types.SimpleNamespace(layout_rewrite_inputs=(1,))) == \
        {"constants": [1], "footprint": None}
    assert network_conditions(object()) == {"constants": [], "footprint": None}
    assert check_conditions({"constants": [2, 1, 1], "footprint": 5}, 3) == ((1, 2), 5)
    assert check_conditions({}, 3) == ((), None)
    for bad, what in (([], "must be a dict"), ({"constants": [3]}, "positions below 3"),
                      ({"constants": ["0"]}, "positions"), ({"constants": [True]}, "positions"),
                      ({"footprint": -1}, "footprint must be bytes"),
                      ({"footprint": 1.5}, "footprint must be bytes")):
        with pytest.raises(ValueError, match=what):
            check_conditions(bad, 3)


@pytest.fixture(scope="module")
def built():
    dag, s = F.gemm_tiled(64)
    gemm = types.SimpleNamespace(compute_dag=dag, workload_key=dag.workload_key, constant_inputs=(1,),
                                 network_footprint_bytes=1 << 20)
    inputs = [MeasureInput(gemm, s), F.initial(F.wrong_answer_dag()), F.initial(F.add_dag(4096))]
    with LocalBuilder(timeout=30, n_parallel=1) as b:
        return inputs, b.build(inputs)


@pytest.mark.parametrize("mode", [NETWORK, HANDOFF])
def test_network_modes_give_the_same_verdicts_and_say_so_in_every_result(built, mode):
    inputs, results = built
    with LocalRunner(check_correctness=True, cache=mode, **FAST) as runner:
        res = runner.run(inputs, results)
    assert [r.error_no for r in res] == [MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER,
                                         MeasureErrorNo.NO_ERROR]
    assert all(r.cache == mode for r in res) and all(0 < c < 1 for c in res[0].costs)


def test_the_mode_and_the_conditions_reach_a_remote_runner(built, monkeypatch):
    inputs, results = built
    with LocalRunner(cache=NETWORK, **FAST) as runner:
        settings = runner.settings()
    assert settings["cache"] == NETWORK and LocalRunner(**settings).cache == NETWORK
    monkeypatch.setattr(cluster_worker, "_LOCAL", type(cluster_worker._LOCAL)())
    dag = inputs[0].task.compute_dag
    args = (dag.workload_key, dag.to_json(), results[0].compiled, settings, 60.0, 1)
    try:
        ok = cluster_worker.measure_on_worker(*args, network_conditions(inputs[0].task))
        assert ok.ok and ok.cache == NETWORK, ok.error_msg
        bad = cluster_worker.measure_on_worker(*args, {"constants": [7], "footprint": 0})
        assert bad.error_no == MeasureErrorNo.RUNTIME_DEVICE
        assert "constants must be argument positions below 3" in bad.error_msg
    finally:
        cluster_worker._runner(settings, 60.0).close()


def test_handoff_rewrites_the_activations_before_every_call_and_times_only_the_calls():
    k, x, w, out = _add3()
    ptrs = k.arg_pointers(x, w, out)
    t, _ = _timer(k.address, ptrs, [x, w, out], HANDOFF, (1,), 3 * w.nbytes)
    assert t.sets == 4  # the constants rotate as in network mode
    calls = []

    def kernel_timer(n):  # stands for the harness: sees the input as each call would
        calls.append(x.copy())
        x[:] = -1.0  # a kernel scribbling on its input: the next call must not see it
        return 1e-6 * n
    run = handed_off(kernel_timer, [x])
    pristine = x.copy()
    assert run(3) == pytest.approx(3e-6)  # only the calls' own seconds
    assert len(calls) == 3 and all(np.array_equal(c, pristine) for c in calls)
    assert handed_off(t, []) is t  # nothing to hand off: the harness as it is
