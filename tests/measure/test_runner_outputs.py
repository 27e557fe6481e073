"""The runner's output arrays: zeros placed 16 bytes past a cache line, as numpy may place a
caller's array, so a schedule whose threads share an output line is measured at its worst."""
from __future__ import annotations

import numpy as np
import pytest

from measure.runner import OUTPUT_LINE_OFFSET, output_zeros


@pytest.mark.parametrize("shape,dtype", [((8, 77, 64), "float32"), ((3,), "int8"), ((5, 7), "float64")])
def test_output_zeros_start_past_a_line_boundary(shape, dtype):
    for _ in range(5):
        a = output_zeros(shape, dtype)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and not a.any()
        assert a.ctypes.data % 64 == OUTPUT_LINE_OFFSET
        assert a.flags.c_contiguous and a.flags.writeable
        a[...] = 1  # the whole array is writable memory
