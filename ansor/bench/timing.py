"""The timing method behind every published figure, and running one measurement in a fresh process.

Method: a system is timed in a *fresh process* (leftover spinning threads of one runtime -
OpenBLAS's, oneDNN's, TVM's, libgomp's - distort another's timing on a small machine), with the
number of threads fixed through the environment; inside, the function first runs for a warm-up
period, then the figure is the median of ``repeat`` repeats of ``number`` calls each, ``number``
chosen so that one repeat takes at least ``min_repeat_ms``. Callers alternate systems over
several rounds and report the median over rounds.

Worker protocol: ``run_fresh`` starts ``python ARGV...`` with the thread variables set and
``ANSOR_BENCH_RESULT`` naming a file; the worker calls ``emit_result(dict)``, which writes the
dict there as JSON (or prints it as the last stdout line when run by hand). A worker that
crashes, times out or writes nothing yields ``{"error": "..."}`` instead.
"""
from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

RESULT_ENV = "ANSOR_BENCH_RESULT"
# Every runtime's own thread-count variable: each system gets the same number of threads.
THREAD_ENV_VARS = ("ANSOR_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "MKL_NUM_THREADS", "TVM_NUM_THREADS")

# Overrides of OpenBLAS's CPU detection that some hosts set for old OpenBLAS builds (which crash
# or compute wrongly on newer CPUs): with them a current numpy runs an older kernel (on a Zen 5,
# "Haswell" instead of "SkylakeX": 60 instead of 450 GFLOPS on a 1024^3 GEMM, measured). A timed
# peer runs in its own fresh process without them, so numpy is compared at its real speed; tests
# and tuning keep the environment as it is.
BLAS_CORE_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# The suite's defaults: median of 15 repeats of >= 50 ms after 0.6 s of warm-up.
DEFAULT_REPEAT = 15
DEFAULT_MIN_REPEAT_MS = 50.0
# On this kind of host an idle vCPU runs ~2.5x slower for the first ~250 ms of work (measured):
# keep the cores busy for a while before the first timed repeat.
DEFAULT_WARMUP_S = 0.6


def time_callable(fn: Callable[[], Any], repeat: int = DEFAULT_REPEAT,
                  min_repeat_ms: float = DEFAULT_MIN_REPEAT_MS,
                  warmup_s: float = DEFAULT_WARMUP_S) -> dict:
    """Time ``fn()`` with the one timing loop (``measure.timer.time_calls``): warm up for
    ``warmup_s``, then ``repeat`` repeats of ``number`` calls, each repeat lasting at least
    ``min_repeat_ms``. Returns ``{"seconds": median seconds per call, "repeats": [seconds per
    call of each repeat], "number": calls per repeat}``."""
    from measure import timer  # noqa: PLC0415 - see machine_info: workers import this module

    t = timer.time_calls(timer.python_calls(fn), repeat=repeat, min_repeat_ms=min_repeat_ms,
                         warmup_s=warmup_s)
    return {"seconds": t.median, "repeats": list(t.samples), "number": t.number}


def job_timing(job: dict) -> dict:
    """``time_callable``'s keyword arguments from a worker job's ``"timing"`` settings (the
    suite's defaults for what it leaves out)."""
    t = job.get("timing", {})
    return dict(repeat=int(t.get("repeat", DEFAULT_REPEAT)),
                min_repeat_ms=float(t.get("min_repeat_ms", DEFAULT_MIN_REPEAT_MS)),
                warmup_s=float(t.get("warmup_s", DEFAULT_WARMUP_S)))


def thread_env(threads: int, base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) with every runtime limited to ``threads``
    and OpenBLAS left to detect the CPU itself (``BLAS_CORE_OVERRIDES``)."""
    env = dict(os.environ if base is None else base)
    for var in THREAD_ENV_VARS:
        env[var] = str(threads)
    for var in BLAS_CORE_OVERRIDES:
        env.pop(var, None)
    return env


def blas_kernels() -> list[dict]:
    """Which BLAS this process runs and with which CPU kernel and threads (threadpoolctl's view,
    from the ``compare`` extra), so a published numpy figure says what it measured; empty if
    threadpoolctl is not installed."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads")}
            for d in threadpool_info() if d.get("user_api") == "blas"]


def worker_env(extra: dict | None = None) -> dict:
    """This environment (plus ``extra``), with the directory holding this copy of ``ansor`` first
    on PYTHONPATH: workers import the same code even when run from an uninstalled checkout."""
    env = dict(os.environ, **(extra or {}))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def emit_result(result: dict) -> None:
    """A worker's answer: to the file ``run_fresh`` named, else as the last line of stdout."""
    text = json.dumps(result)
    path = os.environ.get(RESULT_ENV)
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        print(text, flush=True)


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def run_fresh(argv: Sequence[str], threads: int, timeout: float | None = 600.0,
              stream: bool = False, env: dict | None = None, cwd: str | None = None) -> dict:
    """Run ``python ARGV...`` in a fresh interpreter with ``threads`` threads for every runtime
    and return the dict it emitted (``emit_result``), or ``{"error": why}``.

    ``stream``: the worker's output goes to this process's stdout/stderr (progress of a long
    run); otherwise it is captured and only the tail of stderr appears in an error.
    """
    fd, path = tempfile.mkstemp(prefix="ansor-bench-", suffix=".json")
    os.close(fd)
    full_env = thread_env(threads, env)
    full_env[RESULT_ENV] = path
    try:
        try:
            proc = subprocess.run([sys.executable, *argv], env=full_env, cwd=cwd, timeout=timeout,
                                  stdout=None if stream else subprocess.PIPE,
                                  stderr=None if stream else subprocess.PIPE, text=True)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:g} s"}
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            text = ""
        if proc.returncode != 0 or not text:
            if proc.returncode < 0:
                why = f"crashed ({_signal_name(proc.returncode)})"
            elif proc.returncode != 0:
                why = f"exited with status {proc.returncode}"
            else:
                why = "returned no result"
            tail = (proc.stderr or "").strip().splitlines() if not stream else []
            if tail:
                why += f": {tail[-1][:300]}"
            return {"error": why}
        return json.loads(text)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def cpu_name() -> str:
    """The CPU's marketing name: ``measure.target.cpu_model_name``, where machine facts are read."""
    from measure import target  # noqa: PLC0415 - see machine_info

    return target.cpu_model_name()


def _dist_version(dist: str) -> str | None:
    """An installed distribution's version, without importing it (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    """Where and with what a figure was measured: date, machine, CPU (``measure.target``'s facts),
    versions. TVM's version is not here: importing TVM is left to its own subprocess
    (``peers_tvm``)."""
    # Imported here: the rest of this module is stdlib only, so that the fresh-process workers
    # and the ``ansor`` command line, which import it, do not pay for what only reports need.
    import llvmlite
    import llvmlite.binding as llvm
    import numpy

    from measure import target  # noqa: PLC0415 - as above: LLVM, only for reports

    info = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "cpu": target.cpu_model_name(),
        "llvm_cpu": target.host_cpu_name(),
        "logical_cpus": target.logical_cpus(),
        # What a measurement could use: the affinity mask (a container or taskset narrows it).
        "usable_cpus": target.usable_cpus(),
        "cache_line_bytes": target.cache_line_bytes(),
        "versions": {
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(str(v) for v in llvm.llvm_version_info),
            "torch": _dist_version("torch"),
        },
    }
    try:
        from ansor import __version__ as ours

        info["versions"]["ansor_py"] = ours
    except ImportError:  # pragma: no cover - this module is part of ansor
        pass
    return info
