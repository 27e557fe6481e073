"""Aligned host arrays (``measure.buffers``): the runner's arguments, a kernel's random arguments,
a compiled network's buffers and the benchmark's arrays all start on a 64-byte boundary, so a
kernel is timed where it will run and a timing does not depend on the allocator's whim."""
from __future__ import annotations

import numpy as np
import pytest

from measure.buffers import ALIGN_BYTES, aligned_copy, aligned_empty, aligned_zeros, is_aligned


@pytest.mark.parametrize("shape,dtype", [((8, 77, 64), "float32"), ((3,), "int8"), ((5, 7), "float64"),
                                         ((), "float32"), ((0, 4), "float32")])
def test_aligned_arrays_start_on_a_line(shape, dtype):
    for _ in range(5):
        for a in (aligned_zeros(shape, dtype), aligned_empty(shape, dtype)):
            assert a.shape == shape and a.dtype == np.dtype(dtype)
            assert is_aligned(a) and (a.size == 0 or a.ctypes.data % ALIGN_BYTES == 0)
            assert a.flags.c_contiguous and a.flags.writeable
            a[...] = 1  # the whole array is writable memory
        assert not aligned_zeros(shape, dtype).any()


def test_aligned_copy_keeps_values_shape_and_dtype():
    src = np.arange(2 * 3 * 5, dtype=np.int16).reshape(2, 3, 5)[:, ::-1]  # not contiguous
    c = aligned_copy(src)
    assert is_aligned(c) and c.flags.c_contiguous and c.dtype == src.dtype
    np.testing.assert_array_equal(c, src)
    assert is_aligned(aligned_empty(7, "float32", align=4096), 4096)
    with pytest.raises(ValueError, match="power of two"):
        aligned_empty(3, align=48)
    with pytest.raises(ValueError, match="negative dimension"):
        aligned_zeros((4, -1))


def test_kernel_random_args_are_aligned():
    from compute import te
    from compute.compute_dag import ComputeDAG
    from measure.kernel import build_func
    from sketch.lower import lower

    a = te.placeholder((33, 17), name="A")
    b = te.compute((33, 17), lambda i, j: a[i, j] * 2.0, name="B")
    k = build_func(lower(ComputeDAG([a, b]).init_state()))
    for arr in k.random_args():
        assert is_aligned(arr)


def test_runner_arguments_are_aligned():
    # The worker's arguments for one candidate: inputs copied from the workload's random arrays
    # (numpy-placed) and zeroed outputs, every one on a line.
    from compute import te
    from compute.compute_dag import ComputeDAG
    from measure.runner import _arguments, _Workload

    a = te.placeholder((33, 17), name="A")
    b = te.placeholder((17,), name="B")
    c = te.compute((33, 17), lambda i, j: a[i, j] + b[j], name="C")
    dag = ComputeDAG([a, b, c])
    rng = np.random.default_rng(0)
    raw = rng.standard_normal(33 * 17 + 3).astype(np.float32)
    w = _Workload(dag=dag, inputs=[raw[1:1 + 33 * 17].reshape(33, 17), rng.standard_normal(17).astype(np.float32)])
    args, outs = _arguments(w, [None] * 3)
    assert len(args) == 3 and len(outs) == 1 and outs[0] is args[2]
    assert all(is_aligned(x) for x in args)
    np.testing.assert_array_equal(args[0], w.inputs[0])
    assert not outs[0].any()
