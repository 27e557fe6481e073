"""SearchTask.tune: the log it writes, resuming without measuring anything twice, the progress it
prints, early stopping, surviving failing candidates and Ctrl-C, and ``ansor tune``.

The tuning loop is tested with the real search policy (``sketch.search_policy.SketchPolicy``, a
small population) where the policy matters, and with small policies written here where the test
needs to control the candidates: ``TinyPolicy`` (random splits + a parallel loop on a matmul) and
``ListPolicy`` (given states, in order). Measurements use a fast runner (one call per candidate,
no warm-up): these tests check the loop, not timing precision.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from typing import Any

import pytest

import ansor
from ansor import measurer, tuning
from ansor.cli import main
from ansor.records import best_record, load_records
from ansor.tuning import TuneResult, TuningOptions
from cost_model.cost_model import RandomModel
from measure.measure import MeasureErrorNo

from sketch.search_policy import SearchParams

# The real policy, kept small: these tests check the loop, not the search.
SMALL_PARAMS = SearchParams(population_size=64, num_generations=1)
FAST = dict(number=1, repeat=1, min_repeat_ms=0, warmup_ms=0)
# Tests whose candidates are given one by one (``ListPolicy``: a repeat, a failing build) measure
# those only, without the untuned schedule first (tested in test_untuned_first.py).
POLICY_ONLY = dict(measure_untuned_first=False)


# ---- small policies ----------------------------------------------------------------------------

class TinyPolicy:
    """Random splits of a matmul's i, j, k (divisors) and a parallel outer loop: a space of a few
    hundred distinct schedules, enough to exercise the loop."""

    def __init__(self, task: ansor.SearchTask, seed: int = 0, axes=("i", "j", "k")):
        self.task, self.rng, self.axes = task, random.Random(seed), axes
        self.calls: list[tuple[int, set, list]] = []
        self.last_round_stats: dict = {}

    def sample(self) -> ansor.State:
        s = self.task.compute_dag.init_state()
        ext = {it.name: it.extent for it in s["matmul"].leaf_iters}
        for ax in self.axes:
            n = ext[ax]
            s = s.split("matmul", ax, [self.rng.choice([d for d in range(1, n + 1) if n % d == 0])])
        return s.parallel("matmul", "i.0")

    def generate_measure_candidates(self, num, measured_keys, best_states):
        t0 = time.monotonic()
        self.calls.append((num, set(measured_keys), list(best_states)))
        out, seen = [], set(measured_keys)
        for _ in range(num * 50):
            s = self.sample()
            if s.canonical_key() not in seen:
                seen.add(s.canonical_key())
                out.append(s)
                if len(out) == num:
                    break
        self.last_round_stats = {"seconds": time.monotonic() - t0}
        return out


class ListPolicy:
    """Proposes the given states in order, ``num`` at a time; ``interrupt_at``: raise
    KeyboardInterrupt on that call (0-based), as Ctrl-C during the search would."""

    def __init__(self, states, interrupt_at: int | None = None):
        self.states, self.pos, self.n_calls = list(states), 0, 0
        self.interrupt_at = interrupt_at
        self.last_round_stats = {"seconds": 0.0}

    def generate_measure_candidates(self, num, measured_keys, best_states):
        if self.n_calls == self.interrupt_at:
            raise KeyboardInterrupt
        self.n_calls += 1
        out = self.states[self.pos:self.pos + num]
        self.pos += len(out)
        return out


def i_split_states(task: ansor.SearchTask, factors, j: int = 16) -> list[ansor.State]:
    """One state per factor: i split by it, j by ``j``, outer i parallel."""
    s0 = task.compute_dag.init_state()
    return [s0.split("matmul", "i", [f]).split("matmul", "j", [j]).parallel("matmul", "i.0")
            for f in factors]


# ---- build hook for failing candidates (imported by the builder's workers) ---------------------

def faulty_build(state: Any, name: str) -> Any:
    """Default build, except by the factors of the first two splits (i, j): i by 2 -> a kernel
    with matmul's arguments that loops ~forever (the runner times out), i or j by 4 -> code
    generation raises, i by 8 -> the builder process crashes."""
    from measure.builder import default_build_func

    f, g = (tuple(getattr(st, "lengths", (None,))[0] for st in state.steps[:2]) + (None, None))[:2]
    if f == 4 or g == 4:
        raise RuntimeError("injected code generation failure")
    if f == 8:
        os.kill(os.getpid(), signal.SIGSEGV)
    if f == 2:
        from ansor import te

        A = te.placeholder((64, 64), name="A")
        B = te.placeholder((64, 64), name="B")
        k1, k2 = te.reduce_axis((0, 1 << 30), name="k1"), te.reduce_axis((0, 1 << 30), name="k2")
        C = te.compute((64, 64), lambda i, j: te.sum(A[i, (k1 + k2) % 64] * B[(k1 + k2) % 64, j],
                                                     axis=[k1, k2]), name="forever")
        return default_build_func(ansor.ComputeDAG([A, B, C]).init_state(), name)
    return default_build_func(state, name)


# ---- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def builder():
    with ansor.LocalBuilder(timeout=30, n_parallel=2) as b:
        yield b


@pytest.fixture(scope="module")
def runner():
    with ansor.LocalRunner(timeout=10, **FAST) as r:
        yield r


@pytest.fixture
def task():
    return ansor.SearchTask(func="matmul", args=(64, 64, 64))


def opts(builder, runner, **kw) -> TuningOptions:
    kw.setdefault("verbose", 0)
    kw.setdefault("seed", 0)
    kw.setdefault("search_params", SMALL_PARAMS)
    return TuningOptions(builder=builder, runner=runner, **kw)


def log_keys(path) -> list[str]:
    return [inp.state.canonical_key() for inp, _ in load_records(path)]


# ---- the log, the result, resume ---------------------------------------------------------------

def test_tune_writes_a_log_whose_best_is_the_result(task, builder, runner, tmp_path):
    log = tmp_path / "matmul.json"
    res = task.tune(opts(builder, runner, num_measure_trials=16, num_measures_per_round=8,
                         log_file=log))
    assert isinstance(res, TuneResult) and res.trials == 16
    assert res.stop_reason == "trial budget reached"
    records = list(load_records(log))
    assert len(records) == 16
    assert all(inp.task.workload_key == task.workload_key for inp, _ in records)
    inp, best = best_record(log, task)
    assert res.best_cost == best.mean_cost
    assert res.best_state.canonical_key() == inp.state.canonical_key()
    assert res.best_gflops == pytest.approx(task.flop_count / res.best_cost / 1e9)
    assert res.errors == sum(not r.ok for _, r in records)
    assert res.log_file == os.fspath(log) and res.resumed_records == 0
    assert res.default_cost
    assert res.speedup_over_default == pytest.approx(res.default_cost / res.best_cost)
    assert ansor.build(task.apply_best(log)) is not None


def test_resume_measures_no_schedule_twice(task, builder, runner, tmp_path):
    """A finished 64-trial run resumed for 64 more: 128 records, no canonical key twice."""
    log = tmp_path / "resume.json"
    o = opts(builder, runner, num_measure_trials=64, num_measures_per_round=16, log_file=log)
    first = task.tune(o)
    assert first.trials == 64 and len(log_keys(log)) == 64
    second = task.tune(o)
    assert second.trials == 64 and second.resumed_records == 64
    keys = log_keys(log)
    assert len(keys) == 128 and len(set(keys)) == 128
    # The best starts from the log's: never worse than the first run's.
    assert second.best_cost <= first.best_cost
    assert best_record(log, task)[1].mean_cost == second.best_cost


def test_resume_hands_the_log_to_the_policy_and_model(task, builder, runner, tmp_path):
    log = tmp_path / "r.json"
    o = opts(builder, runner, num_measure_trials=8, num_measures_per_round=8, log_file=log)
    task.tune(o, search_policy=TinyPolicy(task, seed=1))
    first_best = best_record(log, task)[0].state.canonical_key()

    class Model(RandomModel):
        def __init__(self):
            super().__init__(0)
            self.updates: list[int] = []

        def update(self, inputs, results):
            self.updates.append(len(inputs))

    policy, model = TinyPolicy(task, seed=2), Model()
    res = task.tune(o, cost_model=model, search_policy=policy)
    num, measured, best_states = policy.calls[0]
    assert num == 8 and measured == set(log_keys(log)[:8])
    assert best_states and best_states[0].canonical_key() == first_best
    costs = [r.mean_cost for _, r in list(load_records(log))[:8] if r.ok]
    assert len(best_states) == len(costs)
    assert model.updates == [8, 8]  # the 8 resumed records, then the new round
    assert res.trials == 8 and len(log_keys(log)) == 16


def test_records_of_other_workloads_in_the_log_are_left_alone(task, builder, runner, tmp_path):
    log = tmp_path / "mixed.json"
    other = ansor.SearchTask(func="matmul", args=(32, 32, 32))
    o = opts(builder, runner, num_measure_trials=8, num_measures_per_round=8, log_file=log)
    other.tune(o, search_policy=TinyPolicy(other))
    res = task.tune(o, search_policy=TinyPolicy(task))
    assert res.resumed_records == 0 and res.trials == 8
    assert len(log_keys(log)) == 16


# ---- stopping ----------------------------------------------------------------------------------

def test_early_stopping(task, builder, runner, tmp_path):
    log = tmp_path / "es.json"
    res = task.tune(opts(builder, runner, num_measure_trials=400, num_measures_per_round=4,
                         early_stopping=8, log_file=log), search_policy=TinyPolicy(task, seed=3))
    assert res.stop_reason.startswith("early stopping") and res.trials < 400
    costs = [r.mean_cost for _, r in load_records(log)]
    assert len(costs) == res.trials
    last_best = min(range(len(costs)), key=lambda i: (costs[i], i))  # 0-based index of the best
    assert res.trials - (last_best + 1) >= 8
    # It stopped at the first round boundary where 8 trials had passed without improvement.
    assert res.trials - (last_best + 1) < 8 + 4


def test_search_space_exhausted_ends_the_run(builder, runner):
    task = ansor.SearchTask(func="matmul", args=(4, 4, 4))
    res = task.tune(opts(builder, runner, num_measure_trials=50, num_measures_per_round=2),
                    search_policy=TinyPolicy(task, axes=("i",)))
    # The policy's whole space (i split by 1, 2 or 4) and the untuned schedule measured first.
    assert res.trials == 3 + 1 and "exhausted" in res.stop_reason


def test_a_policy_repeating_itself_costs_no_measurements(task, builder, runner, tmp_path):
    states = i_split_states(task, [1, 2, 4])
    policy = ListPolicy([states[0], states[0], states[1], states[1], states[2], states[0]])
    res = task.tune(opts(builder, runner, num_measure_trials=10, num_measures_per_round=2,
                         log_file=tmp_path / "dup.json", **POLICY_ONLY), search_policy=policy)
    keys = log_keys(tmp_path / "dup.json")
    assert res.trials == 3 and len(keys) == len(set(keys)) == 3


def test_zero_trials_measures_only_the_default(task, builder, runner):
    res = task.tune(opts(builder, runner, num_measure_trials=0), search_policy=TinyPolicy(task))
    assert res.trials == 0 and res.best_state is None and res.best_cost is None
    assert res.default_cost and res.speedup_over_default is None


def test_a_default_schedule_faster_than_every_candidate_is_the_one_kept(task, tmp_path, capsys):
    """``ansor tune dense 64,256,128`` on a loaded machine reported "speed-up 0.414x": every
    parallel candidate ran slower than the naive single-threaded default. The default schedule
    is now the one kept when it is faster: a tuning never reports a schedule slower than the one
    it started from; ``best_*`` stay the tuned schedules' (the log's)."""
    from .sched_fakes import FakeBuilder, FakeRunner

    default_key = task.compute_dag.init_state().canonical_key()

    class DefaultIsFastest(FakeRunner):
        def run(self, inputs, build_results, verbose=0):
            out = super().run(inputs, build_results, verbose)
            return [type(r)((1e-5 if inp.state.canonical_key() == default_key else 1e-3,),
                            r.error_no, r.error_msg, all_cost=0.0, timestamp=r.timestamp)
                    for inp, r in zip(inputs, out)]

    log = tmp_path / "d.json"
    res = task.tune(opts(FakeBuilder(), DefaultIsFastest(), num_measure_trials=8,
                         num_measures_per_round=4, log_file=log, verbose=1),
                    search_policy=TinyPolicy(task))
    assert res.trials == 8 and res.default_cost == 1e-5 and res.default_is_faster
    assert res.kept_cost == 1e-5 and res.kept_speedup == 1.0
    assert res.kept_state.canonical_key() == default_key
    assert res.best_cost == 1e-3 == best_record(log, task)[1].mean_cost  # the log: tuned only
    assert res.speedup_over_default == pytest.approx(0.01)
    out = capsys.readouterr().out
    assert "best time        10 us" in out and "no tuned schedule was faster" in out
    assert "tuned best       1 ms" in out and "speed-up 1x" in out and "0.01x" not in out
    assert "| best 10 us" in out  # the progress line's best too
    # A faster tuned schedule is the one kept, as before.
    res = task.tune(opts(FakeBuilder(), FakeRunner(), num_measure_trials=4,
                         num_measures_per_round=4), search_policy=TinyPolicy(task))
    assert not res.default_is_faster and res.kept_state is res.best_state
    assert res.kept_speedup == res.speedup_over_default


def test_a_default_schedule_too_slow_to_time_is_skipped_with_a_note(builder, monkeypatch, capsys):
    monkeypatch.setattr(tuning, "DEFAULT_SCHEDULE_TIMEOUT", 0.002)
    task = ansor.SearchTask(func="matmul", args=(256, 256, 256))  # ~20 ms a call, naive
    with ansor.LocalRunner(timeout=0.002, **FAST) as r:
        res = task.tune(opts(builder, r, num_measure_trials=0, verbose=1),
                        search_policy=TinyPolicy(task))
    assert res.default_cost is None and res.speedup_over_default is None
    assert res.default_note == "not measured: one call takes longer than 0.002 s"
    assert "default schedule not measured: one call takes longer" in capsys.readouterr().out


# ---- failures ----------------------------------------------------------------------------------

def test_failing_candidates_do_not_crash_tuning(task, runner, tmp_path):
    """A runner timeout, a code generation error and a builder crash among good candidates."""
    log = tmp_path / "faults.json"
    states = i_split_states(task, [1, 2, 4, 8, 16, 32])
    with ansor.LocalBuilder(timeout=30, n_parallel=2,
                            build_func="tests.ansor.test_tune:faulty_build") as b, \
            ansor.LocalRunner(timeout=1, **FAST) as r:
        res = task.tune(opts(b, r, num_measure_trials=6, num_measures_per_round=6, log_file=log,
                             **POLICY_ONLY), search_policy=ListPolicy(states))
    assert res.trials == 6 and res.errors == 3
    got = {inp.state.steps[0].lengths[0]: MeasureErrorNo(r.error_no)
           for inp, r in load_records(log)}
    assert got == {1: MeasureErrorNo.NO_ERROR, 2: MeasureErrorNo.RUN_TIMEOUT,
                   4: MeasureErrorNo.COMPILE_HOST, 8: MeasureErrorNo.COMPILE_HOST,
                   16: MeasureErrorNo.NO_ERROR, 32: MeasureErrorNo.NO_ERROR}
    assert res.best_cost is not None and res.best_state.steps[0].lengths[0] in (1, 16, 32)


def test_too_many_consecutive_errors_stop_the_run(task, runner, monkeypatch, capsys):
    monkeypatch.setattr(measurer, "MAX_CONSECUTIVE_ERRORS", 4)
    good = i_split_states(task, [16])
    bad = i_split_states(task, [1, 2, 16, 32, 64], j=4)  # j by 4: the build fails
    with ansor.LocalBuilder(timeout=30, n_parallel=2,
                            build_func="tests.ansor.test_tune:faulty_build") as b:
        res = task.tune(opts(b, runner, num_measure_trials=20, num_measures_per_round=2,
                             verbose=1, **POLICY_ONLY), search_policy=ListPolicy(good + bad))
    assert res.stop_reason.startswith("too many errors") and res.trials == 6 and res.errors == 5
    assert "5 measurements in a row failed" in res.stop_reason
    assert "too many errors" in capsys.readouterr().out


def test_ctrl_c_during_the_search_ends_cleanly(task, builder, runner, tmp_path, capsys):
    log = tmp_path / "int.json"
    policy = ListPolicy(i_split_states(task, [1, 2, 4, 8]), interrupt_at=2)
    res = task.tune(opts(builder, runner, num_measure_trials=8, num_measures_per_round=2,
                         log_file=log, verbose=1), search_policy=policy)
    assert res.interrupted and res.trials == 4 and len(log_keys(log)) == 4
    out = capsys.readouterr().out
    assert "tuning finished: interrupted (Ctrl-C)" in out and "log file" in out


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="SIGINT is delivered to the main thread")
def test_ctrl_c_during_measurement_abandons_the_batch(task, runner, tmp_path):
    """SIGINT while the second batch builds: that batch is neither recorded nor counted, the
    first one is in the log, and the builder's workers are usable afterwards."""
    log = tmp_path / "int2.json"
    states = i_split_states(task, [1, 16, 2, 32])

    class SlowSecondRound(ListPolicy):
        def generate_measure_candidates(self, num, measured_keys, best_states):
            if self.n_calls == 1:  # the batch about to be measured hangs in the builder (see hook)
                # To the main thread, where Python acts on it (os.kill lets the kernel pick any
                # thread; the pool's sliced waits cover that case too).
                main = threading.main_thread().ident
                threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT)).start()
            return super().generate_measure_candidates(num, measured_keys, best_states)

    # As in an interactive session: a process started in the background by a non-interactive
    # shell begins with SIGINT ignored (no Ctrl-C can reach it), and pytest keeps that.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ansor.LocalBuilder(timeout=60, n_parallel=2,
                                build_func="tests.ansor.test_tune:slow_build") as b:
            t0 = time.monotonic()
            res = task.tune(opts(b, runner, num_measure_trials=4, num_measures_per_round=2,
                                 log_file=log), search_policy=SlowSecondRound(states))
            assert time.monotonic() - t0 < 30
            assert res.interrupted and res.trials == 2 and len(log_keys(log)) == 2
            assert b.build([ansor.MeasureInput(task, states[0])])[0].error_no == 0
    finally:
        signal.signal(signal.SIGINT, previous)


def slow_build(state: Any, name: str) -> Any:
    """Default build; a first split by 2 or 32 sleeps for a minute first."""
    from measure.builder import default_build_func

    if state.steps and getattr(state.steps[0], "lengths", (None,))[0] in (2, 32):
        time.sleep(60)
    return default_build_func(state, name)


# ---- output ------------------------------------------------------------------------------------

PROGRESS = re.compile(
    r"^\[matmul\(64, 64, 64\)\] trials (\d+)/(\d+) \| best (?:[\d.]+ (?:us|ms|s) [\d.]+ GFLOPS|-) "
    r"\| round best (?:[\d.]+ (?:us|ms|s)|-) \| errors (\d+) \| [\d.]+ s elapsed"
    r"(, ~[\d.]+ s left)?$")


def test_progress_lines_and_summary(task, builder, runner, tmp_path, capsys):
    res = task.tune(opts(builder, runner, num_measure_trials=24, num_measures_per_round=8,
                         log_file=tmp_path / "p.json", verbose=1), search_policy=TinyPolicy(task))
    out = capsys.readouterr().out
    lines = out.splitlines()
    progress = [m for m in map(PROGRESS.match, lines) if m]
    assert [(int(m[1]), int(m[2])) for m in progress] == [(8, 24), (16, 24), (24, 24)]
    assert progress[0][4] and progress[1][4] and not progress[2][4]  # ETA until the last round
    assert lines[0].startswith("[matmul(64, 64, 64)] tuning: 24 trials, 8 per round, seed 0")
    assert any(line.startswith("[matmul(64, 64, 64)] default schedule: ") for line in lines)
    summary = out[out.index("tuning finished"):]
    for field in ("best time", "GFLOPS", "default schedule", "speed-up", "trials           24 new",
                  "wall time", f"log file         {tmp_path / 'p.json'}"):
        assert field in summary
    assert res.summary() in out


def test_verbose_zero_prints_nothing(task, builder, runner, capfd):
    task.tune(opts(builder, runner, num_measure_trials=8, num_measures_per_round=8, verbose=0))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_details_go_to_the_logger(task, runner, caplog):
    states = i_split_states(task, [1, 4])
    with ansor.LocalBuilder(timeout=30, n_parallel=2,
                            build_func="tests.ansor.test_tune:faulty_build") as b, \
            caplog.at_level("DEBUG", logger="ansor.tune"):
        task.tune(opts(b, runner, num_measure_trials=2, num_measures_per_round=2, **POLICY_ONLY),
                  search_policy=ListPolicy(states))
    text = caplog.text
    assert "COMPILE_HOST" in text and "injected code generation failure" in text
    assert "search" in text


def test_formatting():
    assert tuning.format_seconds(0.00052) == "0.52 ms"
    assert tuning.format_seconds(5.23e-5) == "52.3 us"
    assert tuning.format_seconds(2.5) == "2.5 s"
    assert tuning.format_duration(41.2) == "41 s" and tuning.format_duration(725) == "12 min 5 s"
    assert tuning.format_gflops(4130.4) == "4130" and tuning.format_gflops(12.34) == "12.3"


# ---- options -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    dict(num_measure_trials=-1), dict(num_measures_per_round=0), dict(early_stopping=0),
    dict(verbose=-1), dict(builder="remote"), dict(runner=3), dict(num_measure_trials=True),
])
def test_bad_options_are_rejected(kw):
    with pytest.raises((ValueError, TypeError)):
        TuningOptions(**kw)


def test_options_are_exported():
    assert ansor.TuningOptions is TuningOptions and ansor.TuneResult is TuneResult
    o = TuningOptions()
    assert (o.num_measure_trials, o.num_measures_per_round, o.early_stopping, o.log_file,
            o.verbose, o.builder, o.runner) == (200, 64, None, None, 1, "local", "local")


# ---- the real policy ---------------------------------------------------------------------------

def test_a_fixed_seed_reproduces_the_first_round(task, builder, runner, tmp_path):
    """The first round depends on nothing measured: with one seed, the same candidates."""
    keys = []
    for k in range(2):
        log = tmp_path / f"seed{k}.json"
        task.tune(opts(builder, runner, num_measure_trials=8, num_measures_per_round=8,
                       log_file=log, seed=7))
        keys.append(log_keys(log))
    assert keys[0] == keys[1]


# ---- the command line ---------------------------------------------------------------------------

def test_cli_tune_a_workload(tmp_path, capsys):
    log = tmp_path / "cli.json"
    rc = main(["tune", "matmul", "--args", "32,32,32", "--trials", "8", "--per-round", "8",
               "--log", str(log), "--seed", "0", "--population", "64"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "[matmul(32, 32, 32)] trials 8/8" in out and "tuning finished" in out
    summary = out[out.index("tuning finished"):]
    assert "untuned schedule " in summary and "over the default schedule" in summary
    assert len(log_keys(log)) == 8
    assert all(json.loads(line)["input"]["task"] == {"workload": "matmul", "args": [32, 32, 32]}
               for line in log.read_text().splitlines())


@pytest.mark.parametrize("argv, message", [
    (["tune", "nope"], "unknown workload 'nope'"),
    (["tune", "matmul", "--args", "1,2"], "matmul"),
    (["tune", "matmul", "--trials", "-1"], "--trials"),
    (["tune", "--args", "8,8,8"], "needs a workload"),
])
def test_cli_tune_bad_input(argv, message, capsys):
    try:
        rc = main(argv)
    except SystemExit as err:  # argparse's usage errors (bad numbers)
        rc = err.code
    assert rc == 2
    assert message in capsys.readouterr().err
