"""Process-wide runtime support for compiled kernels: the thread-count check and shared libraries.

The thread count itself (``num_threads``: ``ANSOR_NUM_THREADS`` or the usable CPUs) is a fact of
the host, read in ``measure.target`` and re-exported here for the callers that know it here.

Parallel loops call into libgomp (``GOMP_parallel``, ``omp_get_thread_num``,
``omp_get_num_threads``); float64 transcendental functions and ``frem`` call libm. Both libraries
are loaded into the process symbol namespace once, before the first kernel is linked, so the JIT
resolves those symbols. libgomp is the one lightgbm already links, so kernels and lightgbm share a
single OpenMP runtime (two runtimes in one process would oversubscribe the cores).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
import warnings
from typing import Iterable, Iterator

import llvmlite.binding as llvm

from .target import ENV_NUM_THREADS, MAX_NUM_THREADS, num_threads, usable_cpus  # noqa: F401

_LOCK = threading.Lock()
_LOADED: dict[str, str] = {}


_warned_oversubscription = False


def check_num_threads() -> int:
    """``num_threads()``, for the start of a command or a tuning run: raises its ValueError
    before any work is done (kernels read the variable in worker processes, where a bad value
    only showed up as failed measurements), and warns once per process when the count exceeds
    the usable CPUs (oversubscribed kernels run many times slower and time noisily)."""
    global _warned_oversubscription

    n = num_threads()
    cpus = usable_cpus()
    if n > cpus and not _warned_oversubscription:
        _warned_oversubscription = True
        warnings.warn(f"{ENV_NUM_THREADS}={n} is more than the {cpus} CPU(s) usable here: "
                      "kernels will oversubscribe the cores, run far slower and time noisily; "
                      f"set it to {cpus} or less (or unset it)", RuntimeWarning, stacklevel=2)
    return n


def _gomp_candidates() -> Iterator[str]:
    found = ctypes.util.find_library("gomp")
    if found:
        yield found
    yield "libgomp.so.1"
    try:  # lightgbm ships or links libgomp; its directory is the next place to look
        import lightgbm  # noqa: PLC0415 - slow to import, so only when the system lookup failed

        base = os.path.dirname(lightgbm.__file__)
        for pattern in ("lib/libgomp*.so*", "../lightgbm.libs/libgomp*.so*", "../*.libs/libgomp*.so*"):
            yield from sorted(glob.glob(os.path.join(base, pattern)))
    except ImportError:
        pass


def _load_permanently(candidates: Iterable[str]) -> str | None:
    for path in candidates:
        try:
            # ctypes first with RTLD_GLOBAL so an already-mapped copy (lightgbm's) is reused; then
            # LLVM's loader, which is what makes the symbols visible to the JIT linker.
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            llvm.load_library_permanently(path)
            return path
        except (OSError, RuntimeError):
            continue
    return None


def ensure_loaded() -> dict[str, str]:
    """Load libgomp and libm into the JIT's symbol space (once per process); returns the paths."""
    if _LOADED:
        return _LOADED
    with _LOCK:
        if _LOADED:
            return _LOADED
        gomp = _load_permanently(_gomp_candidates())
        if gomp is None:
            raise RuntimeError(
                "cannot load the GNU OpenMP runtime (libgomp.so.1), which parallel kernels call; "
                "install it with your system package manager (e.g. `apt-get install libgomp1` "
                "or `dnf install libgomp`) or reinstall lightgbm, which ships with it")
        libm_name = ctypes.util.find_library("m")
        libm = _load_permanently([p for p in (libm_name, "libm.so.6") if p])
        if libm is None:
            raise RuntimeError("cannot load the C math library (libm.so.6)")
        _LOADED.update(gomp=gomp, m=libm)
        return _LOADED
