"""Process-wide runtime support for compiled kernels: the thread-count check, the thread pool and
the math library.

The thread count itself (``num_threads``: ``ANSOR_NUM_THREADS`` or the usable CPUs) is a fact of
the host, read in ``measure.target`` and re-exported here for the callers that know it here.

Parallel loops call ``ansor_parallel_for``, the persistent thread pool of ``measure.thread_pool``
(compiled once per process, its symbols added to the JIT's); float64 transcendental functions and
``frem`` call libm, loaded into the process symbol namespace. Both happen once, before the first
kernel is linked, so the JIT resolves those symbols. (lightgbm still brings its own libgomp for
its own training; kernels never call it.)
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading
import warnings
from typing import Iterable

import llvmlite.binding as llvm

from . import target, thread_pool
from .target import ENV_NUM_THREADS, MAX_NUM_THREADS, num_threads, usable_cpus  # noqa: F401

_LOCK = threading.Lock()
_LOADED: dict[str, str] = {}
_POOL_ENGINE: list = []  # the MCJIT engine owning the thread pool's code, alive for the process


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
    _check_spin_env()
    return n


_warned_spin = False


def _check_spin_env() -> None:
    """Warn once when ``ANSOR_SPIN_US`` is set but not a whole number of microseconds: the pool
    (which reads it natively, where nothing can be said) then spins its default."""
    global _warned_spin

    raw = os.environ.get(thread_pool.ENV_SPIN_US)
    if raw is None or _warned_spin or re.fullmatch(r"\s*\+?[0-9]+", raw):
        return
    _warned_spin = True
    warnings.warn(f"{thread_pool.ENV_SPIN_US}={raw[:40]!r} is not a whole number of microseconds >= 0: the "
                  f"kernels' thread pool spins its default {thread_pool.SPIN_US} us", RuntimeWarning, stacklevel=3)


def _load_permanently(candidates: Iterable[str]) -> str | None:
    for path in candidates:
        try:
            # ctypes first with RTLD_GLOBAL so an already-mapped copy is reused; then LLVM's
            # loader, which is what makes the symbols visible to the JIT linker.
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            llvm.load_library_permanently(path)
            return path
        except (OSError, RuntimeError):
            continue
    return None


def _install_thread_pool() -> None:
    """Compile the thread pool for this host and make ``ansor_parallel_for`` visible to every
    kernel engine linked from now on (called once, under the lock)."""
    mod = llvm.parse_assembly(thread_pool.pool_ir(target.host_triple(), target.data_layout(), hidden=False))
    mod.verify()
    engine = llvm.create_mcjit_compiler(mod, target.new_target_machine("native"))
    engine.finalize_object()
    _POOL_ENGINE.append(engine)
    llvm.add_symbol(thread_pool.ENTRY, engine.get_function_address(thread_pool.ENTRY))


def ensure_loaded() -> dict[str, str]:
    """Compile the thread pool and load libm into the JIT's symbol space (once per process);
    returns the libraries' paths."""
    if _LOADED:
        return _LOADED
    with _LOCK:
        if _LOADED:
            return _LOADED
        libm_name = ctypes.util.find_library("m")
        libm = _load_permanently([p for p in (libm_name, "libm.so.6") if p])
        if libm is None:
            raise RuntimeError("cannot load the C math library (libm.so.6)")
        _install_thread_pool()
        _LOADED.update(m=libm)
        return _LOADED
