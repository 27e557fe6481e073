"""Host arrays whose data starts on a 64-byte boundary, for every buffer the system allocates
itself (the runner's arguments, a compiled network's buffers, the benchmark's arrays).

Why: numpy only guarantees 16-byte alignment, so where an array starts within a cache line changes
from one allocation (and one process) to the next. A vectorised kernel then splits a varying share
of its loads and stores across two lines, and its time with it: the zero-trial depthwise conv2d
pick ran 0.17 ms on 64-byte-aligned arrays and 0.17-0.42 ms on numpy's own, depending on the
process. A schedule whose threads split rows at a line boundary also shares output lines between
threads (false sharing) only on a misaligned output. TVM allocates at 64 bytes for the same
reasons (``kAllocAlignment``). Arrays a caller passes to a kernel are used where they are; this
module's ``aligned_empty`` gives a caller the same placement.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from sketch.hardware import CACHE_LINE_BYTES

# A cache line on every x86 CPU we target (a fixed size, not this machine's: an exported module
# must allocate alike everywhere); also the widest vector (512 bits).
ALIGN_BYTES = CACHE_LINE_BYTES


def aligned_empty(shape: Sequence[int] | int, dtype: Any = "float32", align: int = ALIGN_BYTES) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` whose data starts at a multiple of
    ``align`` bytes (a power of two)."""
    if align <= 0 or align & (align - 1):
        raise ValueError(f"aligned_empty: align must be a positive power of two, got {align}")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"aligned_empty: negative dimension in shape {list(shape)}")
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_zeros(shape: Sequence[int] | int, dtype: Any = "float32", align: int = ALIGN_BYTES) -> np.ndarray:
    """Zeros of ``shape``, the data starting at a multiple of ``align`` bytes."""
    out = aligned_empty(shape, dtype, align)
    out.fill(0)
    return out


def aligned_copy(a: Any, align: int = ALIGN_BYTES) -> np.ndarray:
    """A C-contiguous copy of ``a`` (same dtype and shape), the data starting at a multiple of
    ``align`` bytes."""
    a = np.asarray(a)
    out = aligned_empty(a.shape, a.dtype, align)
    out[...] = a
    return out


def is_aligned(a: np.ndarray, align: int = ALIGN_BYTES) -> bool:
    """Whether ``a``'s data starts at a multiple of ``align`` bytes (an empty array has no data)."""
    return a.size == 0 or a.ctypes.data % align == 0


def argument_copies(arrays: Sequence[np.ndarray], copies: int,
                    align: int = ALIGN_BYTES) -> tuple[np.ndarray, list[list[int]]]:
    """``copies`` further copies of the argument set ``arrays`` for a cold timing's rotation
    (``measure.timer.Timer(rotate=...)``), all in one slab so that even thousands of copies of a
    small set cost a few numpy operations: returns the slab (keep it alive while the pointers are
    used) and each copy's data pointers, in argument order. Every copy of an argument starts on
    an ``align`` boundary and holds the argument's bytes (inputs their values, outputs their
    zeros); every page of the slab is written here, so no page fault lands in a timed call."""
    offsets, size = [], 0
    for a in arrays:
        offsets.append(size)
        size += -(-max(1, a.nbytes) // align) * align
    stride = max(size, align)
    slab = aligned_empty((max(0, int(copies)), stride), np.uint8, align)
    slab.fill(0)  # the padding too: every page touched
    for a, off in zip(arrays, offsets):
        if a.nbytes:
            slab[:, off:off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    base = slab.ctypes.data
    return slab, [[base + k * stride + off for off in offsets] for k in range(slab.shape[0])]
