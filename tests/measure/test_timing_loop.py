"""The one timing loop (``measure.timer.time_calls``): warm-up, calls per repeat, repeats, minimum
repeat length, flush hook and cooldown on a fake clock; and every place that times something
(the runner, ``Kernel.benchmark``, a network module, the benchmark suite, the numpy figure) goes
through it."""
from __future__ import annotations

import pytest

from measure import timer
from measure.timer import Timing, python_calls, time_calls

C = 2.0 ** -10  # seconds per fake call: a power of two, so the fake clock's sums are exact


class FakeRun:
    """``run(n)`` on a fake clock: ``n`` calls take ``n * C`` seconds; records each ``n``."""

    def __init__(self, per_call: float = C):
        self.per_call = per_call
        self.batches: list[int] = []

    def __call__(self, number: int) -> float:
        self.batches.append(number)
        return number * self.per_call


def test_warm_up_doubles_batches_until_its_time_is_spent_then_number_is_kept():
    run = FakeRun()
    t = time_calls(run, repeat=2, number=3, warmup_s=10 * C)
    # Warm-up 1, 2, 4 then what is left (3 calls); min_repeat_ms 0 keeps number=3.
    assert run.batches == [1, 2, 4, 3, 3, 3]
    assert t == Timing((C, C), 3)


def test_number_grows_from_the_warm_up_estimate_to_the_minimum_repeat_length():
    run = FakeRun()
    t = time_calls(run, repeat=2, number=3, warmup_s=10 * C, min_repeat_ms=32 * C * 1e3)
    assert run.batches == [1, 2, 4, 3, 32, 32] and t.number == 32


def test_a_given_first_estimate_replaces_the_warm_up():
    run = FakeRun()
    t = time_calls(run, repeat=1, first_estimate=C, min_repeat_ms=32 * C * 1e3)
    assert run.batches == [32] and t.samples == (C,)


def test_a_short_first_repeat_grows_number_and_is_redone_with_the_hook_before_each_attempt(
        monkeypatch):
    run, hooks, sleeps = FakeRun(), [], []
    monkeypatch.setattr(timer.time, "sleep", sleeps.append)
    t = time_calls(run, repeat=2, min_repeat_ms=32 * C * 1e3,
                   before_repeat=lambda: hooks.append(len(run.batches)), cooldown_s=0.25)
    # No estimate: 1 call is too short, number grows to ceil(1 * 32 * 1.1) = 36 and the repeat
    # is redone; the second repeat keeps 36 (only the first repeat regrows).
    assert run.batches == [1, 36, 36]
    assert hooks == [0, 1, 2]  # before every timed attempt, the redone one too
    assert sleeps == [0.25]  # between repeats only
    assert t == Timing((C, C), 36)


def test_repeat_and_number_are_at_least_one():
    run = FakeRun()
    assert time_calls(run, repeat=0, number=0).samples == (C,) and run.batches == [1]


def test_timing_statistics():
    t = Timing((3.0, 1.0, 2.0, 10.0), 5)
    assert (t.median, t.mean, t.best) == (2.5, 4.0, 1.0)


def test_python_calls_makes_n_calls():
    calls = []
    elapsed = python_calls(lambda: calls.append(1))(5)
    assert len(calls) == 5 and elapsed >= 0


# ---- every caller goes through time_calls ------------------------------------------------------

@pytest.fixture
def spy(monkeypatch):
    """Record each ``time_calls`` call's keyword arguments; answer with a fixed Timing."""
    seen: list[dict] = []

    def fake(run, **kw):
        seen.append(kw)
        run(1)  # the caller's ``run`` works
        return Timing((1e-3, 2e-3, 3e-3), 7)

    monkeypatch.setattr(timer, "time_calls", fake)
    return seen


def test_the_runner_passes_its_settings_unchanged(spy, monkeypatch):
    from measure import runner

    opts = {"number": 3, "repeat": 4, "min_repeat_ms": 100, "warmup_ms": 300,
            "cooldown_interval": 0.5, "enable_cpu_cache_flush": False}
    monkeypatch.setattr(runner, "_last_busy", 0.0)  # idle for long: the full warm-up
    costs = runner._time(FakeRun(), 2e-3, [], opts)
    assert costs == [1e-3, 2e-3, 3e-3]
    assert spy == [dict(repeat=4, number=3, min_repeat_ms=100.0, warmup_s=0.3,
                        first_estimate=2e-3, before_repeat=None, cooldown_s=0.5)]
    runner._time(FakeRun(), None, [], opts)  # right after a candidate: the short warm-up
    assert spy[1]["warmup_s"] == runner.BUSY_WARMUP_S and spy[1]["first_estimate"] is None


def test_the_runner_flushes_its_arguments_before_each_repeat_when_asked(spy, monkeypatch):
    import numpy as np

    from measure import runner

    flushed = []
    monkeypatch.setattr(timer, "can_flush", lambda: True)
    monkeypatch.setattr(timer, "flush", lambda address, nbytes: flushed.append(nbytes))
    opts = {"number": 1, "repeat": 1, "min_repeat_ms": 0, "warmup_ms": 0,
            "cooldown_interval": 0, "enable_cpu_cache_flush": True}
    args = [np.zeros(4, np.float32), np.zeros(8, np.float64)]
    runner._time(FakeRun(), None, args, opts)
    spy[0]["before_repeat"]()
    assert flushed == [16, 64]


def test_kernel_benchmark_calibrates_number_or_keeps_a_given_one(spy):
    from tests.measure.test_kernel import _axpy
    from measure.kernel import build_func

    k = build_func(_axpy())
    assert k.benchmark(repeat=3, min_repeat_ms=5, warmup_ms=1) == 2e-3  # the median
    assert spy[0] == dict(repeat=3, number=1, min_repeat_ms=5, warmup_s=1e-3)
    k.benchmark(number=10, repeat=2, warmup_ms=0)
    assert spy[1] == dict(repeat=2, number=10, min_repeat_ms=0.0, warmup_s=0.0)


def test_a_network_module_times_inferences_and_dispatch_with_it(spy):
    from ansor.graph.module_benchmark import DISPATCH_REPS, benchmark_table, native_noop_address
    from measure.call_chain import chain_for

    calls = [(native_noop_address(), [8, 16])]
    table = chain_for([2]).table(calls)
    out = benchmark_table(table, calls, repeat=4, min_repeat_ms=20, warmup_ms=50)
    assert out == {"mean": 2e-3, "overhead": 2e-3, "overhead_share": 1.0, "kernels": 1}
    assert spy == [dict(repeat=4, min_repeat_ms=20, warmup_s=0.05),
                   dict(repeat=1, number=DISPATCH_REPS)]


def test_the_benchmark_suite_and_the_numpy_figure_time_with_it(spy):
    from ansor.bench import timing
    from ansor.cli import numpy_matmul

    res = timing.time_callable(lambda: None, repeat=3, min_repeat_ms=2, warmup_s=0.01)
    assert res == {"seconds": 2e-3, "repeats": [1e-3, 2e-3, 3e-3], "number": 7}
    assert spy[0] == dict(repeat=3, min_repeat_ms=2, warmup_s=0.01)
    assert numpy_matmul.best_seconds(4, repeats=3) == 1e-3
    assert numpy_matmul.median_seconds(4) == 2e-3
    assert len(spy) == 3
