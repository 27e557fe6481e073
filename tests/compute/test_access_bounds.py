"""Out-of-bounds reads are caught before anything is compiled (compute/access_bounds.py).

A read that interval arithmetic proves out of range is rejected when the ComputeDAG is made; a read
it cannot prove in range (``%``, data-dependent, guarded by a condition) is checked once, exactly,
by ``ComputeDAG.check_bounds()``. Neither may reject a legal computation: padding reads out of
range in the branch its select does not take, and every workload of the library must pass.
"""
from __future__ import annotations

import time

import pytest

from compute import ops, te
from compute.access_bounds import OutOfBoundsError
from compute.compute_dag import ComputeDAG
from tests.workloads import CASES


def _one_d(body, n: int = 100, name: str = "A", dtype: str = "float32"):
    A = te.placeholder((n,), dtype, name=name)
    C = te.compute((n,), lambda i: body(A, i), name="C")
    return [A, C]


# ---- the issue's example ------------------------------------------------------------------------

def test_issue_example_is_caught_by_the_check_with_a_witness():
    dag = ComputeDAG(_one_d(lambda A, i: A[(i * 7919) % 100000] * 2.0))
    assert dag.unproven_accesses  # % is not exact: interval arithmetic cannot decide
    with pytest.raises(OutOfBoundsError) as ei:
        dag.check_bounds()
    msg = str(ei.value)
    # i = 1 is the first point out of range: 7919 % 100000 = 7919 >= 100.
    assert "'C'" in msg and "'A'" in msg and "index 0" in msg
    assert "i=1" in msg and "7919" in msg and "[0, 100)" in msg
    assert isinstance(ei.value, IndexError) and isinstance(ei.value, ValueError)


def test_issue_example_with_a_large_modulus_is_rejected_at_construction():
    # i * 7919 < 10**9 for every i: the modulus never wraps and the range [0, 783981] is exact.
    with pytest.raises(OutOfBoundsError) as ei:
        ComputeDAG(_one_d(lambda A, i: A[(i * 7919) % 1000000000] * 2.0))
    msg = str(ei.value)
    assert "'A'" in msg and "index 0" in msg and "0..783981" in msg and "[0, 100)" in msg


@pytest.mark.parametrize("shift, lo, hi", [(1, 1, 100), (-1, -1, 98), (500, 500, 599)])
def test_provably_out_of_range_shift_is_rejected(shift, lo, hi):
    with pytest.raises(OutOfBoundsError) as ei:
        ComputeDAG(_one_d(lambda A, i: A[i + shift]))
    msg = str(ei.value)
    assert "'A'" in msg and "'C'" in msg and f"{lo}..{hi}" in msg and "[0, 100)" in msg
    assert "i in [0, 100)" in msg


def test_two_dimensional_error_names_the_position():
    A = te.placeholder((8, 9), name="A")
    C = te.compute((8, 9), lambda i, j: A[i, j + 1], name="C")
    with pytest.raises(OutOfBoundsError, match=r"index 1 .*1\.\.9.*\[0, 9\)"):
        ComputeDAG([A, C])


def test_reduction_reading_past_the_end_is_rejected():
    A = te.placeholder((10, 16), name="A")
    k = te.reduce_axis((0, 17), "k")
    C = te.compute((10,), lambda i: te.sum(A[i, k], axis=k), name="C")
    with pytest.raises(OutOfBoundsError, match=r"index 1 .*0\.\.16.*\[0, 16\)"):
        ComputeDAG([A, C])


def test_in_range_access_through_modulo_passes_the_check():
    dag = ComputeDAG(_one_d(lambda A, i: A[(i * 7) % 100]))
    dag.check_bounds()
    dag.check_bounds()  # cached, and still fine


# ---- guarded reads: legal padding must never be rejected ------------------------------------------

def test_padding_guarded_by_select_is_accepted():
    dag = ComputeDAG(_one_d(lambda A, i: te.if_then_else(i >= 1, A[i - 1], 0.0)))
    assert not dag.unproven_accesses
    dag.check_bounds()


def test_padding_in_the_false_branch_is_accepted():
    dag = ComputeDAG(_one_d(lambda A, i: te.if_then_else(i < 1, 0.0, A[i - 1])))
    assert not dag.unproven_accesses
    dag.check_bounds()


def test_padding_written_as_an_offset_comparison_is_accepted():
    dag = ComputeDAG(_one_d(lambda A, i: te.if_then_else(
        te.all(i - 1 >= 0, i - 1 < 99), A[i - 1], 0.0)))
    assert not dag.unproven_accesses


def test_reduction_where_guards_its_source():
    A = te.placeholder((10,), name="A")
    k = te.reduce_axis((0, 11), "k")
    C = te.compute((1,), lambda i: te.sum(A[k - 1], axis=k, where=k >= 1), name="C")
    dag = ComputeDAG([A, C])
    dag.check_bounds()


def test_guard_that_does_not_exclude_the_bad_reads_fails_the_check():
    # The guard is there but admits i = 99, which reads A[100]: not provable statically (guarded),
    # caught exactly by the check.
    dag = ComputeDAG(_one_d(lambda A, i: te.if_then_else(i >= 1, A[i + 1], 0.0)))
    with pytest.raises(OutOfBoundsError, match=r"= 100 at i=99, .*\[0, 100\)"):
        dag.check_bounds()


def test_padded_conv2d_is_accepted():
    x = te.placeholder((1, 7, 7, 3), name="x")
    w = te.placeholder((3, 3, 3, 4), name="w")
    y = ops.conv2d_nhwc(x, w, stride=1, padding=1)
    dag = ComputeDAG([x, w, y])
    assert not dag.unproven_accesses
    dag.check_bounds()


# ---- data-dependent indices ----------------------------------------------------------------------

def test_data_dependent_index_clamped_into_range_is_accepted():
    A = te.placeholder((100,), name="A")
    B = te.placeholder((50,), "int32", name="B")
    C = te.compute((50,), lambda i: A[te.max(te.min(B[i], 99), 0)], name="C")
    dag = ComputeDAG([A, B, C])
    assert not dag.unproven_accesses


def test_data_dependent_index_is_checked_on_the_tuning_inputs():
    # The tuner measures on compute.reference.random_inputs, whose int32 values include negatives.
    A = te.placeholder((100,), name="A")
    B = te.placeholder((50,), "int32", name="B")
    C = te.compute((50,), lambda i: A[B[i]], name="C")
    dag = ComputeDAG([A, B, C])
    assert dag.unproven_accesses
    with pytest.raises(OutOfBoundsError, match=r"'A'.*random"):
        dag.check_bounds()


# ---- no false positives: every library computation passes -----------------------------------------

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_test_workload_is_accepted(case):
    ComputeDAG(case.make()).check_bounds()


@pytest.mark.parametrize("name", sorted(ops.WORKLOADS))
@pytest.mark.parametrize("small", [True, False], ids=["small", "default"])
def test_every_library_workload_is_accepted_without_runtime_cost(name, small):
    dag = ComputeDAG(ops.WORKLOADS[name].make(small=small))
    t0 = time.perf_counter()
    dag.check_bounds()
    assert time.perf_counter() - t0 < 2.0, "the check must stay cheap on real shapes"


def test_every_benchmark_suite_workload_is_accepted():
    from ansor.bench.suite import SUITE
    from compute.workload_registry import make_workload

    for w in SUITE:
        ComputeDAG(make_workload(w.workload, w.args)).check_bounds()


# ---- the exact check's mechanics -------------------------------------------------------------------

def test_grid_check_in_chunks_reports_the_first_bad_point(monkeypatch):
    from compute import access_bounds

    monkeypatch.setattr(access_bounds, "GRID_CHUNK", 7)
    # i * 7 % 1000 first reaches 200 at i = 29 (203), in the fifth chunk of seven points.
    dag = ComputeDAG(_one_d(lambda A, i: A[(i * 7) % 1000], n=200))
    with pytest.raises(OutOfBoundsError, match=r"= 203 at i=29, .*\[0, 200\)"):
        dag.check_bounds()


def test_grid_too_large_falls_back_to_the_reference(monkeypatch):
    from compute import access_bounds

    monkeypatch.setattr(access_bounds, "GRID_MAX", 10)
    dag = ComputeDAG(_one_d(lambda A, i: A[(i * 7919) % 100000] * 2.0))
    with pytest.raises(OutOfBoundsError, match=r"'A'.*\[7919\].*random inputs"):
        dag.check_bounds()
    ok = ComputeDAG(_one_d(lambda A, i: A[(i * 7) % 100]))
    ok.check_bounds()
