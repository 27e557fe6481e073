"""Fault injection: candidates that crash, hang, compute wrong values, fail to compile, are invalid
or make the compiler hang, each in a batch with normal candidates, which must still be measured.

Each fault is a real program (see ``faults.py``) except the compile failure and the build hang,
which use the builder's ``build_func`` hook. Timeouts are short so the suite stays fast, and kernels
run on one thread so that a concurrently loaded machine cannot push normal candidates past them.
"""
from __future__ import annotations

import time

import pytest

from measure.builder import LocalBuilder
from measure.local import measure_batch
from measure.measure import MAX_FLOAT, MeasureErrorNo as Err, MeasureInput
from measure.runner import LocalRunner
from tests.measure import faults as F

FAST = dict(number=1, repeat=2, min_repeat_ms=5, warmup_ms=20)
FAULTY_BUILD = "tests.measure.faults:faulty_build"


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    # A 2-thread kernel on a machine someone else is loading can wait for a preempted thread's
    # last chunk, and the normal candidates could time out. One thread keeps these tests about
    # faults, not about load.
    monkeypatch.setenv("ANSOR_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def builder():
    # 3 s: a normal build (LLVM O3 of a tiled gemm) took over 1 s on a 2-core machine loaded 4x,
    # and every candidate of a batch then read as a build timeout; the hung build sleeps an hour.
    with LocalBuilder(timeout=3.0, n_parallel=2, build_func=FAULTY_BUILD) as b:
        yield b


def _normal():
    dag, s = F.gemm_tiled(64)
    return [MeasureInput(F.task(dag), s), F.initial(F.add_dag(64))]


def _assert_measured(res):
    assert res.error_no == Err.NO_ERROR, res.error_msg
    assert len(res.costs) == FAST["repeat"] and all(0 < c < 1 for c in res.costs)


def test_segfault_and_hang_in_a_batch(builder):
    g, a = _normal()
    inputs = [g, F.initial(F.segfault_dag()), a, F.initial(F.forever_dag()), g, a]
    with LocalRunner(timeout=1.0, **FAST) as runner:
        t0 = time.monotonic()
        res = measure_batch(inputs, builder, runner)
        elapsed = time.monotonic() - t0
        restarts = runner.pool.restarts
    assert [r.error_no for r in res] == [Err.NO_ERROR, Err.RUNTIME_DEVICE, Err.NO_ERROR,
                                         Err.RUN_TIMEOUT, Err.NO_ERROR, Err.NO_ERROR]
    assert "crashed" in res[1].error_msg and "SIGSEGV" in res[1].error_msg
    assert "longer than 1 s" in res[3].error_msg
    assert res[1].costs == res[3].costs == (MAX_FLOAT,)
    for r in (res[0], res[2], res[4], res[5]):
        _assert_measured(r)
    assert restarts == 2  # one worker replaced per fault, and the batch went on
    assert 1.0 <= res[3].all_cost < 3 and elapsed < 10


def test_wrong_answer_detected(builder):
    g, a = _normal()
    inputs = [g, F.initial(F.wrong_answer_dag()), a]
    with LocalRunner(timeout=5.0, check_correctness=True, **FAST) as runner:
        res = measure_batch(inputs, builder, runner)
    assert [r.error_no for r in res] == [Err.NO_ERROR, Err.WRONG_ANSWER, Err.NO_ERROR]
    assert "output cast" in res[1].error_msg and "differ from the reference" in res[1].error_msg
    _assert_measured(res[0])
    _assert_measured(res[2])
    # Without the check the same kernel is simply timed.
    with LocalRunner(timeout=5.0, **FAST) as runner:
        _assert_measured(measure_batch(inputs[1:2], builder, runner)[0])


def test_compile_failure_invalid_schedule_and_build_timeout(builder):
    g, a = _normal()
    inputs = [g, F.initial(F.add_dag(48, "compile_fails")), F.nested_parallel(64),
              F.initial(F.add_dag(40, "build_hangs")), a]
    with LocalRunner(timeout=5.0, **FAST) as runner:
        res = measure_batch(inputs, builder, runner)
        assert runner.pool.restarts == 0  # nothing that failed to build reached the runner
    assert [r.error_no for r in res] == [Err.NO_ERROR, Err.COMPILE_HOST, Err.INSTANTIATION_ERROR,
                                         Err.BUILD_TIMEOUT, Err.NO_ERROR]
    assert "injected code generation failure" in res[1].error_msg
    assert "nested parallel" in res[2].error_msg
    assert "longer than 3 s" in res[3].error_msg and res[3].all_cost >= 1.0
    _assert_measured(res[0])
    _assert_measured(res[4])


def test_builder_crash_is_compile_host():
    inputs = [F.initial(F.add_dag(64)), F.initial(F.add_dag(56, "build_crashes")), F.initial(F.add_dag(32))]
    with LocalBuilder(timeout=5.0, n_parallel=1, build_func=FAULTY_BUILD) as b:
        res = b.build(inputs)
    assert [r.error_no for r in res] == [Err.NO_ERROR, Err.COMPILE_HOST, Err.NO_ERROR]
    assert "builder crashed" in res[1].error_msg


def test_unusable_reference_is_reported(builder):
    # check_correctness on a DAG the reference cannot evaluate (its index is out of bounds):
    # an error naming the reference, not a crash of the tuner; other workloads are unaffected.
    inputs = [F.initial(F.segfault_dag()), _normal()[1]]
    with LocalRunner(timeout=5.0, check_correctness=True, **FAST) as runner:
        res = measure_batch(inputs, builder, runner)
    assert res[0].error_no == Err.UNKNOWN and "reference evaluator failed" in res[0].error_msg
    _assert_measured(res[1])
