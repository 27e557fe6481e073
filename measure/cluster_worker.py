"""What runs on a Dask worker for a tuner: its facts, one build, one measurement.

A Dask worker is a long-lived process that runs whatever tasks it is sent in its own threads. The
candidates a tuner sends are untrusted programs, so they never run there directly: each worker
thread keeps its own ``LocalBuilder`` / ``LocalRunner`` (one sandboxed process each, started on
first use and kept warm), and a build or measurement here is exactly the local one - same
timeouts, crash and hang handling, memory cap, warm-up and timing - with its result, or its error
code, sent back. A candidate that segfaults or hangs kills a sandbox, never the Dask worker.

Nothing here imports ``distributed``: these functions travel to workers by reference (the worker
needs ansor-py installed) and are plain Python there. ``dask_setup`` is the preload hook that
``ansor worker`` passes to ``dask worker --preload``.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

from . import target
from .builder import LocalBuilder
from .host import this_host
from .measure import BuildResult, MeasureResult
from .runner import LocalRunner
from .target import ENV_NUM_THREADS, usable_cpus

# One builder and one runner per worker thread: a sandbox pool serves one caller at a time, and a
# Dask worker with several threads runs several builds at once.
_LOCAL = threading.local()


def worker_facts() -> dict:
    """What the tuner checks before this worker may build or measure: the machine's name, its
    toolchain identity (CPU, features, LLVM), its ``ANSOR_NUM_THREADS`` and usable CPUs."""
    return {"host": this_host(), "identity": dict(target.toolchain_identity()),
            "env_threads": os.environ.get(ENV_NUM_THREADS), "usable_cpus": usable_cpus(),
            "pid": os.getpid(), "python": sys.version.split()[0]}


def _builder(settings: dict) -> LocalBuilder:
    b = getattr(_LOCAL, "builder", None)
    if b is not None and b.settings() != settings:
        b.close()  # another tuner's settings (a timeout, a build function): a fresh sandbox
        b = None
    if b is None:
        b = _LOCAL.builder = LocalBuilder(n_parallel=1, **settings)
    return b


def build_on_worker(job: tuple, settings: dict) -> BuildResult:
    """Build one candidate (a ``make_build_jobs`` tuple) with a builder of ``settings``."""
    return _builder(settings).build_jobs([job])[0]


def _runner(settings: dict, reference_timeout: float) -> LocalRunner:
    r = getattr(_LOCAL, "runner", None)
    if r is not None and r.memory_limit_gb != settings["memory_limit_gb"]:
        r.close()  # the cap is set when the sandbox starts
        r = None
    if r is None:
        r = _LOCAL.runner = LocalRunner(**settings)
    else:
        # Read per measurement, as the local tuner changes them for a while: no restart needed.
        for k, v in settings.items():
            setattr(r, k, v)
    r.reference_timeout = reference_timeout
    return r


def measure_on_worker(workload_key: str, dag_json: dict, compiled: Any, settings: dict,
                      reference_timeout: float, num_threads: int,
                      conditions: dict | None = None) -> MeasureResult:
    """Time one compiled candidate with a runner of ``settings`` on ``num_threads`` threads
    (``conditions``: the task's ``measure.network_conditions``, checked where it is timed)."""
    return _runner(settings, reference_timeout).run_compiled(workload_key, dag_json, compiled,
                                                             num_threads=num_threads,
                                                             conditions=conditions)


def dask_setup(worker: Any) -> None:
    """``dask worker --preload measure.cluster_worker``: fail at start-up, not at the first
    candidate, if this worker cannot build (LLVM does not start), and say what it is."""
    facts = worker_facts()
    ident = facts["identity"]
    resources = getattr(getattr(worker, "state", None), "total_resources", None) or {}
    print(f"ansor worker on {facts['host']}: CPU {ident['cpu']}, LLVM {ident['llvm']}, toolchain "
          f"{ident['key']}, {'measures' if resources.get('measure') else 'builds only (no measure resource)'}",
          file=sys.stderr, flush=True)
