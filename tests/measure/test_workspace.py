"""Heap workspaces (measure.codegen.workspace): a temporary too large for the stack is cached
across calls, so a call does not page-fault it in again; concurrent calls and parallel workers
get buffers of their own; the cache is freed with the kernel."""
from __future__ import annotations

import gc
import resource
import threading

import numpy as np
import pytest

from measure.kernel import build_func

from .helpers import run, two_pass


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_large_temporary_is_not_faulted_in_again():
    # 48 MiB: above glibc's largest mmap threshold, so a per-call aligned_alloc/free would map and
    # fault in all 12288 pages on every call.
    rows, cols = 3072, 4096
    k = build_func(two_pass(rows, cols, parallel=False))
    a = np.ones((rows, cols), np.float32)
    out = np.zeros_like(a)
    k(a, out)  # the first call allocates and faults the workspace in
    before = _minor_faults()
    for _ in range(4):
        k(a, out)
    faults = _minor_faults() - before
    assert faults < 2000, f"{faults} page faults in 4 calls: the temporary is allocated per call"
    np.testing.assert_array_equal(out, 3.0)


@pytest.mark.parametrize("parallel", [False, True])
def test_concurrent_calls_get_their_own_buffers(parallel):
    rows, cols = 128, 256  # 128 KiB: heap
    k = build_func(two_pass(rows, cols, parallel))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(6)]
    errors: list[str] = []

    def worker(a: np.ndarray) -> None:
        for _ in range(30):
            got = run(k, a)
            if not np.array_equal(got, a[::-1] * 2 + 1):
                errors.append("wrong result")
                return

    threads = [threading.Thread(target=worker, args=(a,)) for a in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_workspaces_are_released_with_the_kernel():
    k = build_func(two_pass(128, 256, parallel=False))
    assert "@__ansor_workspace_release" in k.llvm_ir
    run(k, np.ones((128, 256), np.float32))
    fin = k._workspaces
    assert fin is not None and fin.alive
    del k
    gc.collect()
    assert not fin.alive


def test_small_temporaries_stay_on_the_stack():
    k = build_func(two_pass(16, 16, parallel=False))
    assert "__ansor_ws" not in k.llvm_ir and k._workspaces is None
