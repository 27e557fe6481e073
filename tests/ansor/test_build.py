"""ansor.build end to end: every library op, default schedule, against the reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

import ansor
from ansor import te
from tests.util import assert_matches_reference
from tests.workloads import CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_default_schedule_matches_reference(case):
    dag = ansor.ComputeDAG(case.make())
    kernel = ansor.build(dag)
    assert_matches_reference(kernel, dag, case.make_inputs(0), case.rtol, case.atol, case.id)


def test_issue_api_sample_runs_as_written():
    A = te.placeholder((512, 256), name="A"); B = te.placeholder((256, 128), name="B")
    k = te.reduce_axis((0, 256), name="k")
    C = te.compute((512, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    kernel = ansor.build([A, B, C])
    a, b = np.random.rand(512, 256).astype("float32"), np.random.rand(256, 128).astype("float32")
    c = np.empty((512, 128), "float32"); kernel(a, b, c); assert np.allclose(c, a @ b, rtol=1e-4)
    text = str(ansor.ComputeDAG([A, B, C]))
    assert "C(i, j) += A[i, k]*B[k, j]" in text
    assert ansor.ComputeDAG([A, B, C]).flop_count == 2 * 512 * 256 * 128
    assert "define" in kernel.llvm_ir and kernel.assembly
    assert kernel.benchmark(a, b, c, repeat=3, min_repeat_ms=1) > 0


def test_kernel_rejects_bad_arguments_with_clear_messages():
    A = te.placeholder((4, 3), name="A")
    B = te.compute((4, 3), lambda i, j: A[i, j] * 2.0, name="B")
    kernel = ansor.build([A, B])
    a = np.ones((4, 3), "float32")
    with pytest.raises((ValueError, TypeError), match="float32"):
        kernel(a.astype("float64"), np.empty((4, 3), "float32"))
    with pytest.raises(ValueError, match=r"\(4, 3\)|\[4, 3\]"):
        kernel(np.ones((3, 4), "float32"), np.empty((4, 3), "float32"))
    with pytest.raises((ValueError, TypeError), match="contiguous"):
        kernel(np.ones((3, 8), "float32")[:, ::2].T.copy(order="F"), np.empty((4, 3), "float32"))
    with pytest.raises((ValueError, TypeError), match="2"):
        kernel(a)


def _tiled_gemm_state(M=64, N=64, K=48):
    from compute.ops import workloads as W

    dag = ansor.ComputeDAG(W.matmul(M, N, K))
    s = dag.init_state().cache_write("matmul")
    s = s.split("matmul", "i", [32]).split("matmul", "j", [32]).reorder("matmul", ["i.0", "j.0", "i.1", "j.1"])
    s = s.fuse("matmul", ["i.0", "j.0"]).parallel("matmul", 0).compute_at("matmul.local", "matmul", 0)
    s = s.split("matmul.local", "i", [4]).split("matmul.local", "j", [16]).split("matmul.local", "k", [8])
    s = s.reorder("matmul.local", ["k.0", "i.0", "j.0", "k.1", "i.1", "j.1"])
    s = s.unroll("matmul.local", "i.1").vectorize("matmul.local", "j.1").vectorize("matmul", "j.1")
    return dag, s


def test_scheduled_gemm_emits_vector_fma_and_matches_numpy():
    dag, s = _tiled_gemm_state()
    kernel = ansor.build(s)
    asm = kernel.assembly
    assert any(f"vfmadd{v}ps" in asm for v in ("132", "213", "231")), "no packed FMA in the assembly"
    assert "%zmm" in asm or "%ymm" in asm, "FMA is not on vector registers"
    a = np.random.rand(64, 48).astype("float32")
    b = np.random.rand(48, 64).astype("float32")
    c = np.empty((64, 64), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_parallel_kernel_gives_same_result_on_one_and_two_threads():
    dag, s = _tiled_gemm_state()
    kernel = ansor.build(s)
    a = np.random.rand(64, 48).astype("float32")
    b = np.random.rand(48, 64).astype("float32")
    outs = []
    for n in (1, 2):
        kernel.num_threads = n
        c = np.empty((64, 64), "float32")
        kernel(a, b, c)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_readme_schedule_example_runs():
    A = te.placeholder((512, 256), name="A"); B = te.placeholder((256, 128), name="B")
    k = te.reduce_axis((0, 256), name="k")
    C = te.compute((512, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    dag = ansor.ComputeDAG([A, B, C])
    s = dag.init_state().cache_write("C")
    s = s.split("C", "i", [8]).split("C", "j", [16]).reorder("C", ["i.0", "j.0", "i.1", "j.1"])
    s = s.compute_at("C.local", "C", "j.0").parallel("C", "i.0").vectorize("C", "j.1")
    assert "parallel i.0" in str(s) and "C.local = alloc float32[8, 16] local" in str(dag.lower(s))
    kernel = ansor.build(s)
    a, b = np.random.rand(512, 256).astype("float32"), np.random.rand(256, 128).astype("float32")
    c = np.empty((512, 128), "float32"); kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
