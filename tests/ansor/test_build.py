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
