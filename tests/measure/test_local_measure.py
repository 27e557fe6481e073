"""LocalBuilder, LocalRunner and measure_batch on well-behaved candidates: results in order, sane
timings, correctness checking, the measurement options, the sandbox settings of the workers."""
from __future__ import annotations

import pytest

from measure.builder import LocalBuilder
from measure.host import this_host
from measure.kernel import load
from measure.local import measure_batch
from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput
from measure.runner import LocalRunner
from tests.measure import faults as F

FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)


@pytest.fixture(scope="module")
def builder():
    with LocalBuilder(timeout=30, n_parallel=2) as b:
        yield b


def test_build_results_in_input_order(builder):
    sizes = [16, 40, 24, 64, 8, 32]
    res = builder.build([F.initial(F.add_dag(n)) for n in sizes])
    assert [r.error_no for r in res] == [MeasureErrorNo.NO_ERROR] * len(sizes)
    assert [r.compiled.args[0].shape for r in res] == [(n,) for n in sizes]
    assert all(r.time_cost > 0 and r.error_msg == "" for r in res)


def test_measure_batch_in_order_with_failures_interleaved(builder):
    dag, good = F.gemm_tiled(64)
    ok, bad = MeasureInput(F.task(dag), good), F.nested_parallel(64)
    pattern = [True, False, True, True, False, True]
    inputs = [ok if p else bad for p in pattern]
    with LocalRunner(check_correctness=True, **FAST) as runner:
        res = measure_batch(inputs, builder, runner)
    assert [r.ok for r in res] == pattern
    for r in res:
        if r.ok:
            assert len(r.costs) == 1 and 0 < r.costs[0] < 1
        else:
            assert r.error_no == MeasureErrorNo.INSTANTIATION_ERROR and r.costs == (MAX_FLOAT,)
            assert r.mean_cost == MAX_FLOAT
        assert r.all_cost > 0


def test_all_cost_is_build_plus_run(builder):
    inputs = [F.initial(F.add_dag(64))]
    built = builder.build(inputs)
    with LocalRunner(number=1, repeat=1, min_repeat_ms=150, warmup_ms=0) as runner:
        ran = runner.run(inputs, built)
        both = measure_batch(inputs, builder, runner)
    assert ran[0].ok and ran[0].all_cost >= 0.15  # min_repeat_ms made the repeat last 150 ms
    assert both[0].all_cost >= 0.15 + 0.9 * built[0].time_cost


def test_timing_agrees_with_kernel_benchmark(builder, monkeypatch):
    """GEMM 256^3: the runner's figure is within 3x of Kernel.benchmark's in this process (timed
    before and after, on one thread, so that load from elsewhere hits both alike)."""
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    dag, s = F.gemm_tiled(256, 8, 32)
    inputs = [MeasureInput(F.task(dag), s)]
    built = builder.build(inputs)
    assert built[0].error_no == MeasureErrorNo.NO_ERROR, built[0].error_msg
    kernel = load(built[0].compiled)
    assert kernel.num_threads == 1
    before = kernel.benchmark(repeat=3, min_repeat_ms=50, warmup_ms=200)
    with LocalRunner(number=3, repeat=3, min_repeat_ms=50, warmup_ms=200) as runner:
        res = runner.run(inputs, built)
    after = kernel.benchmark(repeat=3, min_repeat_ms=50, warmup_ms=200)
    assert res[0].ok and len(res[0].costs) == 3
    assert min(before, after) / 3 < res[0].mean_cost < max(before, after) * 3, (res[0].costs, before, after)


def test_options_repeat_cooldown_flush(builder):
    inputs = [F.initial(F.add_dag(4096))]
    built = builder.build(inputs)
    with LocalRunner(number=2, repeat=3, min_repeat_ms=0, warmup_ms=0, cooldown_interval=0.05,
                     enable_cpu_cache_flush=True) as runner:
        res = runner.run(inputs, built)
    assert res[0].ok and len(res[0].costs) == 3 and all(c > 0 for c in res[0].costs)
    assert res[0].all_cost >= 0.1  # two cooldowns


def test_build_errors_are_not_run():
    inputs = [F.nested_parallel(64), F.initial(F.add_dag(64))]
    with LocalBuilder(n_parallel=1) as b, LocalRunner(**FAST) as runner:
        built = b.build(inputs)
        res = runner.run(inputs, built)
        assert runner._pool is not None and runner.pool.restarts == 0
    assert res[0].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    assert res[0].error_msg == built[0].error_msg and "nested parallel" in res[0].error_msg
    assert res[1].ok
    # Every result names the machine: the one that timed it, or for a build error the builder's.
    assert built[0].host == built[1].host == res[0].host == res[1].host == this_host() != ""


def test_run_compiled_takes_the_thread_count_it_is_given(builder, monkeypatch):
    """What a remote runner does on its machine: time a compiled object of a workload given as
    data, with the tuner's thread count rather than the environment's."""
    monkeypatch.setenv("ANSOR_NUM_THREADS", "2")
    dag, s = F.gemm_tiled(64)
    built = builder.build([MeasureInput(F.task(dag), s)])
    with LocalRunner(**FAST) as runner:
        res = runner.run_compiled(dag.workload_key, dag.to_json(), built[0].compiled, num_threads=1)
        assert runner.pool.run(F.thread_count, timeout=10).value == 2  # the sandbox's environment
    assert res.ok and res.host == this_host()
    assert runner.settings() == dict(timeout=10, memory_limit_gb=8.0, cooldown_interval=0.0,
                                     enable_cpu_cache_flush=False, check_correctness=False,
                                     repeat=1, cache="warm", **{k: v for k, v in FAST.items() if k != "repeat"})


def test_worker_sandbox_settings(monkeypatch):
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")
    with LocalRunner(memory_limit_gb=3) as runner, LocalBuilder(n_parallel=1, memory_limit_gb=2) as b:
        facts = runner.pool.run(F.worker_facts, timeout=10).value
        assert facts["rlimit_as"][0] == 3 << 30 and facts["sigint_ignored"]
        assert runner.pool.run(F.thread_count, timeout=10).value == 1
        facts = b.pool.run(F.worker_facts, timeout=10).value
        assert facts["rlimit_as"][0] == 2 << 30 and facts["sigint_ignored"]


def test_argument_validation():
    with pytest.raises(ValueError, match="module:function"):
        LocalBuilder(build_func="no_colon_here")
    with pytest.raises(ValueError, match="positive"):
        LocalRunner(timeout=0)
    with LocalRunner() as runner:
        with pytest.raises(ValueError, match="2 inputs but 1 build results"):
            runner.run([F.initial(F.add_dag())] * 2, [None])
    assert LocalBuilder().build([]) == []
