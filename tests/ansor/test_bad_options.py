"""Bad numbers and the smaller holes: every numeric option is checked where it enters.

Command-line flags of every subcommand exit 2 with ``argument --NAME: why`` (argparse's own
format, as for any other bad argument); library objects (``LocalRunner``, ``LocalBuilder``,
``WorkerPool``, ``TuningOptions``, ``verify_best``) raise ``ValueError``/``TypeError`` naming the
field. Also: ``ANSOR_NUM_THREADS`` checked up front (and a warning above the core count),
``records verify`` showing the exception, ``costmodel train`` on too few records, numpy integers
as shape extents, and ``apply_best`` preferring this machine's records.
"""
from __future__ import annotations

import errno
import json
import math
import os
import warnings

import numpy as np
import pytest

from ansor.cli import main
from ansor.records import RecordToFile, best_record, verify_best
from ansor.search_task import SearchTask
from ansor.tuning import TuningOptions
from compute import te
from measure import runtime
from measure.builder import LocalBuilder
from measure.measure import MeasureInput, MeasureResult
from measure.record import encode_line, target_summary
from measure.runner import LocalRunner
from measure.worker_pool import WorkerPool


def _refuse(*args, **kwargs):
    raise AssertionError("a bad option must stop the command before it starts working")


def _cli_error(argv, monkeypatch, capsys) -> str:
    """Run the CLI in-process; it must exit 2 (argparse's usage error) before doing any work
    (a tuning run with ``--timeout nan`` would hang). Returns stderr."""
    import ansor.bench.suite
    import ansor.records
    import ansor.task_scheduler

    monkeypatch.setattr(SearchTask, "tune", _refuse)
    monkeypatch.setattr(ansor.task_scheduler.TaskScheduler, "tune", _refuse)
    monkeypatch.setattr(os, "execv", _refuse)  # ansor worker would replace the test process
    monkeypatch.setattr(ansor.records, "verify_best", _refuse)
    monkeypatch.setattr(ansor.bench.suite, "run_suite", _refuse)
    monkeypatch.setattr(ansor.bench.suite, "run_curve", _refuse)
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, (info.value.code, err)
    return err


@pytest.fixture
def log(tmp_path):
    """A small valid log (one matmul record of this machine)."""
    path = tmp_path / "log.json"
    t = SearchTask(func="matmul", args=(8, 8, 8))
    RecordToFile(path)([MeasureInput(t, t.compute_dag.init_state())],
                       [MeasureResult((1e-3,), 0, "", 0.1, 5.0)])
    return str(path)


# ---- command-line flags ----------------------------------------------------------------------

BAD_TUNE = [
    ("--timeout", "nan", "finite"), ("--timeout", "inf", "finite"), ("--timeout", "-1", "positive"),
    ("--timeout", "0", "positive"), ("--timeout", "1e9", "at most"),
    ("--timeout", "x", "not a number"),
    ("--min-repeat-ms", "nan", "finite"), ("--min-repeat-ms", "-1", ">= 0"),
    ("--min-repeat-ms", "inf", "finite"), ("--seed", "-1", "[0, 4294967295]"),
    ("--seed", str(2**32), "[0, 4294967295]"), ("--seed", "1.5", "not an integer"),
    ("--trials", "-1", ">= 0"), ("--per-round", "0", ">= 1"), ("--early-stopping", "0", ">= 1"),
    ("--population", "0", ">= 16"), ("--population", "15", ">= 16"),  # one minimum (issue 41)
    # Upper bounds (issue 40): --population 1e12 grew memory for minutes, measuring nothing.
    ("--population", "1000000000000", "at most 16384"), ("--trials", "1000001", "at most 1000000"),
    ("--per-round", "4097", "at most 4096"), ("--early-stopping", str(10**7), "at most 1000000"),
    ("--population", "9" * 4000, "(4000 digits)"),
]


@pytest.mark.parametrize("flag, value, why", BAD_TUNE)
def test_tune_flags_are_checked_by_argparse(flag, value, why, monkeypatch, capsys):
    err = _cli_error(["tune", "matmul", "--args", "8,8,8", flag, value], monkeypatch, capsys)
    assert f"argument {flag}: " in err and why in err and "Traceback" not in err


@pytest.mark.parametrize("argv, flag, why", [
    (["records", "verify", "LOG", "--number", "0"], "--number", ">= 1"),
    (["records", "verify", "LOG", "--repeat", "-1"], "--repeat", ">= 1"),
    (["records", "verify", "LOG", "--number", "nan"], "--number", "not an integer"),
    (["records", "distill", "LOG", "-o", "out.json", "--top-k", "0"], "--top-k", ">= 1"),
    (["costmodel", "eval", "LOG", "--train", "0"], "--train", ">= 1"),
    (["costmodel", "eval", "LOG", "--top", "0"], "--top", "(0, 1]"),
    (["costmodel", "eval", "LOG", "--top", "nan"], "--top", "finite"),
    (["costmodel", "eval", "LOG", "--top", "1.5"], "--top", "(0, 1]"),
    (["costmodel", "eval", "LOG", "--seed", "-1"], "--seed", "[0, "),
    (["costmodel", "train", "LOG", "-o", "m.json", "--seed", "-1"], "--seed", "[0, "),
    (["bench", "--trials", "-1"], "--trials", ">= 0"),
    (["bench", "--threads", "0"], "--threads", ">= 1"),
    (["bench", "--rounds", "0"], "--rounds", ">= 1"),
    (["bench", "--repeat", "0"], "--repeat", ">= 1"),
    (["bench", "--per-round", "0"], "--per-round", ">= 1"),
    (["bench", "--seed", "-1"], "--seed", "[0, "),
    (["bench", "--min-repeat-ms", "nan"], "--min-repeat-ms", "finite"),
    (["bench", "--warmup", "inf"], "--warmup", "finite"),
    (["bench", "--warmup", "-1"], "--warmup", ">= 0"),
    # Upper bounds, each named in the message (issue 40).
    (["records", "verify", "LOG", "--number", "10001"], "--number", "at most 10000"),
    (["records", "verify", "LOG", "--repeat", str(10**9)], "--repeat", "at most 10000"),
    (["records", "distill", "LOG", "-o", "out.json", "--top-k", str(10**7)], "--top-k", "at most"),
    (["costmodel", "eval", "LOG", "--train", str(10**12)], "--train", "at most 1000000"),
    (["bench", "--trials", str(10**7)], "--trials", "at most 1000000"),
    (["bench", "--threads", "5000"], "--threads", "at most 4096"),
    (["bench", "--rounds", "1001"], "--rounds", "at most 1000"),
    (["bench", "--repeat", str(10**6)], "--repeat", "at most 10000"),
    (["bench", "--per-round", str(10**6)], "--per-round", "at most 4096"),
    (["worker", "tcp://127.0.0.1:1", "--nthreads", "5000"], "--nthreads", "at most 4096"),
    (["network", "tune", "mlp", "--trials", str(10**7), "--log", "x.json"], "--trials", "at most"),
    (["network", "tune", "mlp", "--trials", "1", "--log", "x.json", "--per-round", "5000"],
     "--per-round", "at most 4096"),
    (["network", "tune", "mlp", "--trials", "1", "--log", "x.json", "--population", str(10**12)],
     "--population", "at most 16384"),
    (["network", "tune", "mlp", "--trials", "1", "--log", "x.json", "--rounds", "5000"],
     "--rounds", "at most 1000"),
    (["network", "tune", "mlp", "--trials", "1", "--log", "x.json", "--remeasure-best", "100000"],
     "--remeasure-best", "at most 10000"),
    (["network", "tune", "bert-base-layer", "--trials", "1", "--log", "x.json", "--seq-len",
      "100000"], "--seq-len", "at most 8192"),
    (["network", "tune", "resnet-18", "--trials", "1", "--log", "x.json", "--image-size",
      "100000"], "--image-size", "at most 8192"),
    (["network", "tune", "mlp", "--trials", "1", "--log", "x.json", "--verbose", "99"],
     "--verbose", "at most 3"),
])
def test_every_subcommand_checks_its_numbers(argv, flag, why, log, monkeypatch, capsys):
    err = _cli_error([log if a == "LOG" else a for a in argv], monkeypatch, capsys)
    assert f"argument {flag}: " in err and why in err


@pytest.mark.parametrize("spec, why", [("matmul:1,,2", "bad arguments"),
                                       ("nope", "unknown workload"),
                                       ("nope:1", "unknown registered workload")])
def test_bench_workloads_errors_exit_2(spec, why, monkeypatch, capsys):
    err = _cli_error(["bench", "--workloads", spec], monkeypatch, capsys)
    assert "argument --workloads: " in err and why in err


@pytest.mark.parametrize("argv, why", [
    (["build", "matmul", "--args", "100000000000,1,1"], "at most 2147483647"),
    (["tune", "add", "--args", f"(4, {10**20}), (4,)"], "at most 2147483647"),
    (["tune", "--constant-inputs", str(2**40)], "at most 2147483647"),
    (["build", "matmul", "--args", "1," * 6000], "longer than 10000 characters"),
])
def test_shape_arguments_are_bounded(argv, why, monkeypatch, capsys):
    err = _cli_error(argv, monkeypatch, capsys)
    assert "argument --" in err and why in err and "Traceback" not in err


def test_bench_workload_arguments_are_bounded(monkeypatch, capsys):
    err = _cli_error(["bench", "--workloads", "matmul:1,99999999999,1"], monkeypatch, capsys)
    assert "argument --workloads: " in err and "at most 2147483647" in err


@pytest.mark.parametrize("argv", [["tune", "matmul", "--args", "1,,2"],
                                  ["build", "matmul", "--args", "__import__('os')"],
                                  ["build", "matmul", "--args", ""]])
def test_args_parse_errors_exit_2_like_other_argument_errors(argv, monkeypatch, capsys):
    err = _cli_error(argv, monkeypatch, capsys)
    assert "argument --args: " in err and "not a comma-separated list" in err


# ---- library objects -------------------------------------------------------------------------

@pytest.mark.parametrize("kw, why", [
    ({"timeout": math.nan}, "finite"), ({"timeout": math.inf}, "finite"),
    ({"timeout": 1e12}, "at most"), ({"timeout": 0}, "positive"),
    ({"number": 0}, "number"), ({"repeat": -1}, "repeat"), ({"number": 2.5}, "number"),
    ({"min_repeat_ms": math.nan}, "min_repeat_ms"), ({"min_repeat_ms": -1}, "min_repeat_ms"),
    ({"cooldown_interval": math.inf}, "cooldown_interval"), ({"warmup_ms": -5}, "warmup_ms"),
    ({"memory_limit_gb": 0}, "memory_limit_gb"), ({"memory_limit_gb": math.nan}, "memory_limit_gb"),
    ({"number": 10**9}, "number must be at most 10000"), ({"repeat": 10**5}, "repeat must be at most"),
])
def test_local_runner_rejects_bad_numbers(kw, why):
    with pytest.raises((ValueError, TypeError), match=why.replace("(", r"\(")):
        LocalRunner(**kw)


@pytest.mark.parametrize("kw, why", [
    ({"timeout": math.nan}, "finite"), ({"timeout": math.inf}, "finite"),
    ({"timeout": 1e12}, "at most"), ({"n_parallel": 0}, "n_parallel"),
    ({"n_parallel": 10**6}, "n_parallel must be at most 4096"),
    ({"memory_limit_gb": -1}, "memory_limit_gb"),
])
def test_local_builder_rejects_bad_numbers(kw, why):
    with pytest.raises((ValueError, TypeError), match=why):
        LocalBuilder(**kw)


def test_worker_pool_rejects_a_timeout_that_would_disable_it():
    with pytest.raises(ValueError, match="start_timeout"):
        WorkerPool(1, start_timeout=math.nan)
    with WorkerPool(1) as pool:
        for bad in (math.nan, math.inf, -1.0):
            with pytest.raises(ValueError, match="timeout"):
                pool.run(abs, -1, timeout=bad)
        assert pool.run(abs, -1, timeout=30).value == 1  # the pool is still usable


@pytest.mark.parametrize("kw, why", [
    ({"num_measure_trials": 10**7}, "num_measure_trials must be at most 1000000"),
    ({"num_measures_per_round": 10**5}, "num_measures_per_round must be at most 4096"),
    ({"early_stopping": 10**9}, "early_stopping must be at most 1000000"),
])
def test_tuning_options_have_upper_bounds(kw, why):
    with pytest.raises(ValueError, match=why):
        TuningOptions(**kw)


def test_search_params_population_has_an_upper_bound():
    from sketch.search_params import MAX_POPULATION, SearchParams

    with pytest.raises(ValueError, match=rf"population_size must be in \[1, {MAX_POPULATION}\]"):
        SearchParams(population_size=10**12)
    assert SearchParams(population_size=MAX_POPULATION).population_size == MAX_POPULATION


@pytest.mark.parametrize("seed", [-1, 2**32, 2**70])
def test_tuning_options_seed_must_be_in_numpys_range(seed):
    with pytest.raises(ValueError, match="seed"):
        TuningOptions(seed=seed)
    assert TuningOptions(seed=2**32 - 1).seed == 2**32 - 1
    assert TuningOptions(seed=np.int64(7)).seed == 7


@pytest.mark.parametrize("kw", [{"number": 0}, {"repeat": -1}, {"min_repeat_ms": math.nan},
                                {"run_timeout": math.inf}, {"build_timeout": 0}])
def test_verify_best_checks_its_numbers_before_anything(kw, log):
    with pytest.raises((ValueError, TypeError), match=next(iter(kw))):
        verify_best(log, **kw)


# ---- ANSOR_NUM_THREADS -----------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["0", "-1", "abc", "1e3"])
def test_cli_checks_ansor_num_threads_first(bad, monkeypatch, capsys):
    monkeypatch.setenv("ANSOR_NUM_THREADS", bad)
    assert main(["build", "matmul", "--args", "4,4,4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ansor: ANSOR_NUM_THREADS=") and "Traceback" not in err


def test_tune_checks_ansor_num_threads_before_measuring(monkeypatch, tmp_path):
    import ansor.tuning

    monkeypatch.setenv("ANSOR_NUM_THREADS", "abc")
    monkeypatch.setattr(ansor.tuning._Run, "run", _refuse)  # the run must not even start
    task = SearchTask(func="matmul", args=(8, 8, 8))
    with pytest.raises(ValueError, match="ANSOR_NUM_THREADS='abc'"):
        task.tune(TuningOptions(num_measure_trials=4, verbose=0))


def test_an_absurd_thread_count_is_refused(monkeypatch):
    monkeypatch.setenv("ANSOR_NUM_THREADS", str(10**7))  # would overflow the kernels' int32
    with pytest.raises(ValueError, match="at most"):
        runtime.check_num_threads()


def test_more_threads_than_cores_warns_once(monkeypatch):
    monkeypatch.setattr(runtime, "_warned_oversubscription", False)
    monkeypatch.setenv("ANSOR_NUM_THREADS", str(runtime.usable_cpus() + 1))
    with pytest.warns(RuntimeWarning, match="more than the .* CPU"):
        assert runtime.check_num_threads() == runtime.usable_cpus() + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime.check_num_threads()  # once per process
    monkeypatch.setenv("ANSOR_NUM_THREADS", str(runtime.usable_cpus()))
    monkeypatch.setattr(runtime, "_warned_oversubscription", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runtime.check_num_threads()


# ---- records verify shows the cause ----------------------------------------------------------

def test_verify_error_shows_the_exception_not_the_traceback_head(tmp_path):
    # Its inputs (10.7 GB) do not fit under the runner's 8 GB memory limit: the worker's set-up
    # fails with a MemoryError traceback, whose head says nothing.
    p = te.placeholder((1 << 29, 5), "float32", "P")
    r = te.compute((1 << 29, 5), lambda i, j: p[i, j] * 2.0, "R")
    task = SearchTask(tensors=[p, r], desc="huge")
    path = tmp_path / "huge.json"
    RecordToFile(path)([MeasureInput(task, task.compute_dag.init_state())],
                       [MeasureResult((1e-3,), 0, "", 0.1, 5.0)])
    (row,) = verify_best(path, number=1, repeat=1)
    assert row.measured is None
    assert "MemoryError" in row.error and "\n" not in row.error and len(row.error) <= 400


# ---- costmodel train on too few records ------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2])
def test_costmodel_train_on_a_few_records_is_a_clear_error(n, tmp_path, capsys):
    from tests.sketch.random_schedules import random_state
    import random

    task = SearchTask(func="matmul", args=(17, 7, 9))
    rng = random.Random(0)
    states = [task.compute_dag.init_state()] + [
        random_state(task.compute_dag.init_state(), rng, 4) for _ in range(n - 1)]
    path = tmp_path / "few.json"
    RecordToFile(path)([MeasureInput(task, s) for s in states],
                       [MeasureResult((1e-3 * (i + 1),), 0, "", 0.1, 5.0) for i in range(n)])
    out = tmp_path / "model.json"
    assert main(["costmodel", "train", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{n} usable record" in err and "at least" in err
    assert not out.exists()


# ---- numpy integers as shape extents ---------------------------------------------------------

def test_numpy_integers_are_shape_extents():
    a = te.placeholder((np.int64(4), np.int32(3)), "float32", "A")
    b = te.compute((np.uint8(4), 3), lambda i, j: a[i, j] + 1.0, "B")
    assert a.shape == (4, 3) and b.shape == (4, 3)
    assert all(type(d) is int for d in a.shape + b.shape)
    assert te.placeholder(np.int64(5), "float32", "C").shape == (5,)
    for bad in ((True, 3), (np.bool_(True), 3), (4.0, 3), (np.float64(4), 3)):
        with pytest.raises(TypeError, match="non-integer extent"):
            te.placeholder(bad, "float32", "D")
    with pytest.raises(ValueError, match="non-positive"):
        te.placeholder((np.int64(0),), "float32", "E")


# ---- apply_best prefers this machine's records -----------------------------------------------

def _foreign_line(task: SearchTask, state, cost: float) -> str:
    """A record of ``task`` measured on another CPU (another toolchain key)."""
    target = dict(target_summary(), key="0123456789abcdef", cpu="othercpu9000")
    return encode_line(task.workload_key, json.dumps(task.to_json()), state.steps,
                       MeasureResult((cost,), 0, "", 0.1, 5.0), json.dumps(target), None)


def test_apply_best_prefers_this_machines_records(tmp_path):
    task = SearchTask(func="matmul", args=(16, 16, 16))
    init = task.compute_dag.init_state()
    foreign = init.split("matmul", "i", [4])  # states are immutable: a new one
    path = tmp_path / "mixed.json"
    with open(path, "w") as f:  # the other CPU's record is faster
        f.write(_foreign_line(task, foreign, 1e-6) + "\n")
    RecordToFile(path)([MeasureInput(task, init)], [MeasureResult((1e-3,), 0, "", 0.1, 5.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        state = task.apply_best(path)
    assert state.canonical_key() == init.canonical_key()
    assert best_record(path, task)[1].mean_cost == pytest.approx(1e-3)


def test_apply_best_falls_back_to_another_cpu_and_says_so(tmp_path):
    task = SearchTask(func="matmul", args=(16, 16, 16))
    path = tmp_path / "foreign.json"
    with open(path, "w") as f:
        f.write(_foreign_line(task, task.compute_dag.init_state(), 2e-6) + "\n")
    with pytest.warns(UserWarning, match="othercpu9000"):
        state = task.apply_best(path)
    assert state.canonical_key() == task.compute_dag.init_state().canonical_key()
    assert os.path.getsize(path) > 0


# ---- memory of ansor build -------------------------------------------------------------------

@pytest.mark.parametrize("args, budget, why", [
    ("100000,100000,100000", "16G", "matmul(100000, 100000, 100000): tensor A [100000, 100000] "
     "float32 needs 37.3 GiB, more than the 16.0 GiB"),
    ("300,300,300", "1M", "matmul(300, 300, 300): the working set (3 tensors and the reference's "
     "outputs) needs 1.4 MiB, more than the 1.0 MiB"),
])
def test_build_checks_the_memory_of_its_arguments_first(args, budget, why, monkeypatch, capsys):
    monkeypatch.setenv("ANSOR_MAX_MEMORY", budget)
    assert main(["build", "matmul", "--args", args]) == 2
    err = capsys.readouterr().err
    assert err == f"ansor: {why} of memory available (ANSOR_MAX_MEMORY sets the budget)\n"


def test_tune_checks_the_memory_of_its_workload_first(tmp_path, monkeypatch, capsys):
    """Was: every measurement failed (the runner could not allocate A), then exit 1."""
    monkeypatch.setenv("ANSOR_MAX_MEMORY", "16G")
    monkeypatch.setattr(SearchTask, "tune", _refuse)
    log = tmp_path / "big.json"
    assert main(["tune", "matmul", "--args", "100000,100000,100000", "--log", str(log)]) == 2
    assert capsys.readouterr().err == (
        "ansor: matmul(100000, 100000, 100000): tensor A [100000, 100000] float32 needs 37.3 GiB, "
        "more than the 16.0 GiB of memory available (ANSOR_MAX_MEMORY sets the budget)\n")
    assert not log.exists()


# ---- the CLI's last line of defence ----------------------------------------------------------

def test_an_os_error_is_one_line_not_an_internal_error(monkeypatch, capsys):
    """A full disk or an I/O error is the machine's failure (exit 1, one line), not a bug to
    report; --debug still shows the traceback."""
    import ansor.cli.build

    def full(_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out.json")

    monkeypatch.setattr(ansor.cli.build, "cmd_workloads", full)
    assert main(["workloads"]) == 1
    assert capsys.readouterr().err == "ansor: [Errno 28] No space left on device: 'out.json'\n"
    with pytest.raises(OSError):
        main(["workloads", "--debug"])
