"""Out-of-bounds computations fail before they are built or tuned, with a clear error.

``ansor.build`` must raise before compiling (the user's process must never run a kernel that
reads outside its arrays), and a tuning run or a template task must fail before measuring
anything, rather than log garbage-producing candidates as valid.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import ansor
from ansor import autotvm, te
from ansor.tuning import TuningOptions
from compute.access_bounds import OutOfBoundsError
from sketch.search_policy import SearchParams


def _issue_example(modulus: int):
    A = te.placeholder((100,), name="A")
    C = te.compute((100,), lambda i: A[(i * 7919) % modulus] * 2.0, name="C")
    return [A, C]


@pytest.mark.parametrize("modulus", [100000, 10**9])
def test_build_raises_instead_of_running_out_of_bounds(modulus):
    with pytest.raises(OutOfBoundsError, match=r"reads tensor 'A' out of bounds"):
        ansor.build(_issue_example(modulus))


def test_build_of_a_state_checks_its_dag():
    A, C = _issue_example(100000)
    dag = ansor.ComputeDAG([A, C])
    with pytest.raises(OutOfBoundsError, match=r"i=1\b"):
        ansor.build(dag.init_state())


def test_build_of_a_legal_padded_computation_still_runs():
    A = te.placeholder((100,), name="A")
    C = te.compute((100,), lambda i: te.if_then_else(i >= 1, A[i - 1], 0.0), name="C")
    kernel = ansor.build([A, C])
    a = np.arange(100, dtype="float32")
    c = np.empty(100, "float32")
    kernel(a, c)
    assert c[0] == 0 and np.array_equal(c[1:], a[:-1])


def test_tuning_an_out_of_bounds_task_fails_fast_and_logs_nothing(tmp_path):
    task = ansor.SearchTask(tensors=_issue_example(100000))
    log = tmp_path / "oob.json"
    opts = TuningOptions(num_measure_trials=8, num_measures_per_round=8, log_file=log, verbose=0,
                         seed=0, search_params=SearchParams(population_size=16, num_generations=1))
    t0 = time.monotonic()
    with pytest.raises(OutOfBoundsError, match=r"compute 'C' reads tensor 'A' out of bounds"):
        task.tune(opts)
    assert time.monotonic() - t0 < 5.0
    assert not log.exists() or log.read_text() == ""


def test_template_task_on_an_out_of_bounds_computation_fails_at_creation():
    M, N, K = 8, 8, 16
    A = te.placeholder((M, 1000), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), "k")
    ok = te.compute((M, N), lambda i, j: te.sum(A[i, (k * 7) % 1000] * B[k, j], axis=k),
                    name="C")
    autotvm.create_task(ansor.SearchTask(tensors=[A, B, ok]), template="matmul")  # in range
    A2 = te.placeholder((M, 100), name="A")
    C2 = te.compute((M, N), lambda i, j: te.sum(A2[i, (k * 7919) % 1000] * B[k, j], axis=k),
                    name="C")
    with pytest.raises(OutOfBoundsError, match=r"'A'.*index 1"):
        autotvm.create_task(ansor.SearchTask(tensors=[A2, B, C2]), template="matmul")


def test_build_leaves_data_dependent_indices_to_the_caller_but_tuning_checks_them(tmp_path):
    A = te.placeholder((100,), name="A")
    B = te.placeholder((50,), "int32", name="B")
    C = te.compute((50,), lambda i: A[B[i]], name="C")
    kernel = ansor.build([A, B, C])  # a gather: in range for the caller's indices
    a = np.random.default_rng(0).random(100).astype("float32")
    b = np.arange(0, 100, 2, dtype="int32")
    c = np.empty(50, "float32")
    kernel(a, b, c)
    assert np.array_equal(c, a[b])
    # The tuner measures on random inputs, whose int32 values include negative indices.
    task = ansor.SearchTask(tensors=[A, B, C])
    with pytest.raises(OutOfBoundsError, match=r"'A'.*random inputs"):
        task.tune(TuningOptions(num_measure_trials=8, log_file=tmp_path / "g.json", verbose=0))
    assert not (tmp_path / "g.json").exists()
