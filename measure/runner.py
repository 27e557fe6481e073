"""LocalRunner: time compiled candidates, one at a time, in a sandboxed worker process.

One persistent worker runs every candidate sequentially, so the kernel being timed has every core
to itself. A candidate that segfaults kills only the worker (RUNTIME_DEVICE); one that runs past
``timeout`` gets it SIGKILLed (RUN_TIMEOUT); either way the worker is replaced and the batch goes
on. The worker's address space is capped (``memory_limit_gb``).

What one measurement does, in the worker:

1. arguments: the workload's inputs are random (``compute.reference.random_inputs``, fixed seed,
   generated once per workload and copied per candidate so a stray write cannot leak into the next
   candidate), outputs are zero-filled; no candidate ever reads uninitialised memory; every
   argument starts on a 64-byte boundary (``measure.buffers``), as in a compiled network;
2. with ``check_correctness``, the first call's outputs are compared with the numpy reference
   (computed once per workload, outside any candidate's timeout): WRONG_ANSWER on mismatch;
3. warm-up: the kernel runs for ``warmup_ms`` (an idle vCPU here runs ~2.5x slower for the first
   ~250 ms of work; page faults and the thread pool's start also land there);
4. ``repeat`` repeats of ``number`` calls, each timed in native code (``measure.timer``) so no
   Python overhead is counted; ``number`` grows until a repeat lasts ``min_repeat_ms``, as TVM's
   time_evaluator does. Before each repeat the argument buffers are optionally flushed from the
   caches (``enable_cpu_cache_flush``); ``cooldown_interval`` seconds pass between repeats.
   Steps 3 and 4 are ``measure.timer.time_calls``, the one timing loop, given these settings.

Warm, cold, network or handoff (``cache``): what the arguments hold and where they are when each
call starts; ``measure.timing_modes`` says how each mode is made and why.

``costs`` are seconds per call, one per repeat. Nothing of ours competes with the kernel's pool
threads (``measure.thread_pool``) while it is timed (a preempted thread delays the end of every
parallel loop by up to a chunk): the worker runs no other thread, ``measure_batch`` finishes
building before it runs, and the tuner blocks on the worker's socket meanwhile.
"""
from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .buffers import aligned_copy, aligned_zeros
from .builder import progress_mark
from .checks import (MAX_REPEAT, MAX_TIMEOUT_S, check_count, check_memory_limit_gb,
                     check_nonnegative, check_seconds)
from .host import this_host
from .measure import (HANDOFF, MAX_FLOAT, WARM, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult,
                      check_cache_mode, check_conditions, network_conditions)
from .timing_modes import handed_off, mode_timer
from .worker_pool import CRASH, OK, TIMEOUT, WorkerPool

INPUT_SEED = 0
RTOL = ATOL = 1e-4
# Reference evaluation is per workload, not per candidate; it gets its own, generous budget.
REFERENCE_TIMEOUT = 600.0
_WORKLOAD_CACHE_SIZE = 4  # per worker; a batch normally holds one workload

# ---- in the worker ------------------------------------------------------------------------------


@dataclass
class _Workload:
    dag: Any
    inputs: list[np.ndarray]
    reference: list[np.ndarray] | None = None
    reference_error: str | None = None
    packed: dict = field(default_factory=dict)  # PackedArg -> the input in that layout (read-only)


_WORKLOADS: "OrderedDict[str, _Workload]" = OrderedDict()


def _workload(key: str, dag_json: dict, check: bool) -> _Workload:
    w = _WORKLOADS.get(key)
    if w is None:
        from compute import reference  # noqa: PLC0415 - worker side: loaded by the first job
        from compute.compute_dag import ComputeDAG  # noqa: PLC0415 - worker side: loaded by the first job

        dag = ComputeDAG.from_json(dag_json)
        inputs = reference.random_inputs(dag, seed=INPUT_SEED)
        for a in inputs:
            a.flags.writeable = False  # the pristine copy; candidates get their own
        w = _WORKLOADS[key] = _Workload(dag, inputs)
        while len(_WORKLOADS) > _WORKLOAD_CACHE_SIZE:
            _WORKLOADS.popitem(last=False)
    else:
        _WORKLOADS.move_to_end(key)
    if check and w.reference is None and w.reference_error is None:
        from compute import reference  # noqa: PLC0415 - worker side: loaded by the first job

        try:
            w.reference = reference.evaluate(w.dag, w.inputs)
        except Exception as e:  # noqa: BLE001 - e.g. an index out of bounds: the DAG's own fault
            w.reference_error = f"{type(e).__name__}: {e}"
    return w


def prepare_job(key: str, dag_json: dict, check: bool) -> str | None:
    """Generate the workload's inputs (and reference outputs if ``check``) in this worker;
    returns the reference evaluator's error text if it failed."""
    return _workload(key, dag_json, check).reference_error


def _arguments(w: _Workload, specs: Sequence[Any], packed: Sequence[Any] = ()
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(all kernel arguments in order, the outputs among them). ``packed``: the arguments the
    kernel takes pre-packed (``PackedArg``): the workload's input packed once, outside any
    timed call, exactly as a compiled network packs its constants."""
    from compute.tensor import PlaceholderOp  # noqa: PLC0415 - worker side: loaded by the first job
    from sketch.layout_rewrite import pack_array  # noqa: PLC0415 - worker side: loaded by the first job

    by_position = {p.position: p for p in packed}
    args, outs = [], []
    inputs = iter(w.inputs)
    for pos, t in enumerate(w.dag.tensors):
        if isinstance(t.op, PlaceholderOp):
            src = next(inputs)
            p = by_position.get(pos)
            if p is not None:
                arr = w.packed.get(p)
                if arr is None:
                    arr = w.packed[p] = pack_array(src, p)
                    arr.flags.writeable = False
                args.append(aligned_copy(arr))
            else:
                args.append(aligned_copy(src))
        else:
            out = aligned_zeros(t.shape, t.dtype)
            args.append(out)
            outs.append(out)
    if len(args) != len(specs):
        raise ValueError(f"the kernel takes {len(specs)} arguments, the workload has {len(args)}")
    return args, outs


def _compare(dag: Any, got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    from compute import dtype as dt  # noqa: PLC0415 - worker side: loaded by the first job
    from compute.tensor import PlaceholderOp  # noqa: PLC0415 - worker side: loaded by the first job

    names = [t.name for t in dag.tensors if not isinstance(t.op, PlaceholderOp)]
    for name, g, r in zip(names, got, want):
        if dt.is_float(str(g.dtype)):
            with np.errstate(all="ignore"):
                bad = ~np.isclose(g, r, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            bad = g != r
        n_bad = int(np.count_nonzero(bad))
        if n_bad:
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"output {name}: {n_bad} of {g.size} elements differ from the reference; "
                    f"first at {first}: got {g[first]!r}, expected {r[first]!r}")
    return None


def run_job(key: str, dag_json: dict, compiled: Any, opts: dict) -> tuple[tuple[float, ...], int, str]:
    """Measure one compiled candidate: ``(costs, error_no, error_msg)``. Runs in the runner
    worker; exceptions become RUNTIME_DEVICE, a crash is seen by the parent."""
    from .kernel import load  # noqa: PLC0415

    check = bool(opts["check_correctness"])
    try:
        w = _workload(key, dag_json, check)
        if check and w.reference_error is not None:
            return (MAX_FLOAT,), int(MeasureErrorNo.UNKNOWN), \
                f"check_correctness: the reference evaluator failed: {w.reference_error}"
        kernel = load(compiled)
        if opts.get("num_threads") is not None:
            # A remote runner times with the tuner's thread count (the task's), not with what
            # this machine's environment would give.
            kernel.num_threads = int(opts["num_threads"])
        args, outs = _arguments(w, kernel.args, getattr(compiled, "packed_args", ()))
        ptrs = kernel.arg_pointers(*args)
        constants, footprint = check_conditions(opts.get("conditions", {}), len(args))
        mode = opts.get("cache", WARM)
        timed, _slab = mode_timer(kernel.address, ptrs, args, mode, constants, footprint)
        if mode == HANDOFF:
            timed = handed_off(timed, [a for p, a in enumerate(args) if p not in constants
                                       and not any(a is o for o in outs)])
        per_call = None
        if check:
            per_call = timed(1)  # on the zero-filled outputs: these are the values checked
            assert w.reference is not None
            wrong = _compare(w.dag, outs, w.reference)
            if wrong is not None:
                return (MAX_FLOAT,), int(MeasureErrorNo.WRONG_ANSWER), wrong
        costs = _time(timed, per_call, args, opts)
        return tuple(costs), int(MeasureErrorNo.NO_ERROR), ""
    except Exception as e:  # noqa: BLE001 - loading or argument set-up failed
        return (MAX_FLOAT,), int(MeasureErrorNo.RUNTIME_DEVICE), f"{type(e).__name__}: {e}"


# Idle-aware warm-up: measured on this host, a vCPU that has idled runs ~2.5x slower for its first
# ~250 ms of work, so the first candidate after a pause gets the full warm-up and the candidates
# that follow it back to back only a short one (32 GEMM-256 candidates: 12.4 s -> ~3 s).
IDLE_S = 0.05
BUSY_WARMUP_S = 0.01
_last_busy = 0.0


def _time(timed: Any, per_call: float | None, args: list[np.ndarray], opts: dict) -> list[float]:
    """Seconds per call for each repeat (``timer.time_calls`` with the runner's settings).
    ``per_call``: a first estimate, if a call was made."""
    from . import timer  # noqa: PLC0415

    global _last_busy
    warm_s = max(0.0, float(opts["warmup_ms"])) / 1e3
    if time.perf_counter() - _last_busy < IDLE_S:
        # The cores were busy with the previous candidate a moment ago: the slow ramp-up after
        # idleness does not apply, a short warm-up (which also estimates one call) is enough.
        warm_s = min(warm_s, BUSY_WARMUP_S)
    flush = None
    if bool(opts["enable_cpu_cache_flush"]) and timer.can_flush():
        def flush() -> None:
            for a in args:
                timer.flush(a.ctypes.data, a.nbytes)
    timing = timer.time_calls(timed, repeat=int(opts["repeat"]), number=int(opts["number"]),
                              min_repeat_ms=float(opts["min_repeat_ms"]), warmup_s=warm_s,
                              first_estimate=per_call, before_repeat=flush,
                              cooldown_s=float(opts["cooldown_interval"]))
    _last_busy = time.perf_counter()
    return list(timing.samples)


def init_runner_worker() -> None:
    """Worker initializer: load LLVM, the thread pool and libm, and compile the timing harness."""
    from . import runtime, target, timer  # noqa: PLC0415
    from .kernel import Kernel  # noqa: F401, PLC0415

    runtime.ensure_loaded()
    target.toolchain_key()
    if timer.can_flush():
        buf = np.zeros(1, dtype=np.uint8)
        timer.flush(buf.ctypes.data, buf.nbytes)


# ---- in the tuner -------------------------------------------------------------------------------

def built(br: BuildResult) -> bool:
    """Whether a build result can be run."""
    return br.error_no == MeasureErrorNo.NO_ERROR and br.compiled is not None


def build_failure(br: BuildResult, cache: str = WARM) -> MeasureResult:
    """The measurement result of a candidate that did not build: its build error, never run
    (``cache``: the runner's mode, as on every result it returns)."""
    return MeasureResult((MAX_FLOAT,), int(br.error_no) or int(MeasureErrorNo.UNKNOWN),
                         br.error_msg or "no compiled object", 0.0, host=br.host, cache=cache)


class RunnerBase(ABC):
    """What every runner honours, local or remote (``measure.protocols.Runner``): the
    measurement settings, checked here once and read at each ``run`` (``settings()``), and
    closing on leaving a ``with`` block. A subclass says where candidates are timed.

    ``timeout`` covers one candidate's whole measurement (load, check, warm-up, repeats);
    ``number``, ``repeat``, ``min_repeat_ms``, ``warmup_ms``, ``cooldown_interval`` and
    ``enable_cpu_cache_flush`` are the timing loop's (``measure.timer.time_calls``);
    ``check_correctness`` compares the first call's outputs with the numpy reference (within
    ``reference_timeout`` per workload); ``memory_limit_gb`` caps the timing process; ``cache``
    is ``"warm"`` (every call on the same buffers), ``"cold"`` (every call on arguments no cache
    holds), ``"network"`` (constants rotated over the network's footprint, activations warm: see
    the module docstring) or ``"handoff"`` (network, the activations written again before each
    call), carried into every result (``MeasureResult.cache``).
    """

    def __init__(self, timeout: float = 10, number: int = 3, repeat: int = 1,
                 min_repeat_ms: float = 100, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 memory_limit_gb: float | None = 8.0, warmup_ms: float = 300, cache: str = WARM):
        who = type(self).__name__
        # NaN or inf would disable the timeout (and busy-spin the waiting parent) or overflow it.
        self.timeout = check_seconds(f"{who} timeout", timeout)
        self.number = check_count(f"{who} number", number, maximum=MAX_REPEAT)
        self.repeat = check_count(f"{who} repeat", repeat, maximum=MAX_REPEAT)
        self.min_repeat_ms = check_nonnegative(f"{who} min_repeat_ms", min_repeat_ms,
                                               MAX_TIMEOUT_S * 1e3)
        self.cooldown_interval = check_nonnegative(f"{who} cooldown_interval",
                                                   cooldown_interval, MAX_TIMEOUT_S)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.check_correctness = bool(check_correctness)
        self.memory_limit_gb = check_memory_limit_gb(who, memory_limit_gb)
        self.warmup_ms = check_nonnegative(f"{who} warmup_ms", warmup_ms, MAX_TIMEOUT_S * 1e3)
        self.cache = check_cache_mode(f"{who} cache", cache)
        self.reference_timeout = REFERENCE_TIMEOUT

    def settings(self) -> dict:
        """The constructor arguments that reproduce this runner's measurements (what a remote
        runner ships to the machines that time), read now: the tuner changes some for a while
        (the default schedule's measurement)."""
        return {"timeout": self.timeout, "memory_limit_gb": self.memory_limit_gb, **self._opts()}

    def _opts(self) -> dict:
        return {"number": self.number, "repeat": self.repeat, "min_repeat_ms": self.min_repeat_ms,
                "cooldown_interval": self.cooldown_interval, "warmup_ms": self.warmup_ms,
                "enable_cpu_cache_flush": self.enable_cpu_cache_flush,
                "check_correctness": self.check_correctness, "cache": self.cache}

    @abstractmethod
    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        """Measure every successfully built candidate; results in input order, one per input."""

    @abstractmethod
    def close(self) -> None:
        """Release what times (the worker, a cluster connection)."""

    def __enter__(self) -> "RunnerBase":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalRunner(RunnerBase):
    """Run built candidates on this machine, sequentially, in one sandboxed worker process
    (settings: ``RunnerBase``).

    Kernels use ``$ANSOR_NUM_THREADS`` threads (default: every usable CPU): the worker inherits
    the tuner's environment as it is when the worker starts (first use, or a restart).
    """

    def __init__(self, timeout: float = 10, number: int = 3, repeat: int = 1,
                 min_repeat_ms: float = 100, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 memory_limit_gb: float | None = 8.0, warmup_ms: float = 300, cache: str = WARM):
        super().__init__(timeout=timeout, number=number, repeat=repeat,
                         min_repeat_ms=min_repeat_ms, cooldown_interval=cooldown_interval,
                         enable_cpu_cache_flush=enable_cpu_cache_flush,
                         check_correctness=check_correctness, memory_limit_gb=memory_limit_gb,
                         warmup_ms=warmup_ms, cache=cache)
        self._pool: WorkerPool | None = None
        self._prepared: set[str] = set()  # workloads set up in the current worker incarnation
        self._prepared_restarts = 0

    @property
    def pool(self) -> WorkerPool:
        """The (one-worker) pool, started on first use."""
        if self._pool is None:
            limit = None if self.memory_limit_gb is None else int(self.memory_limit_gb * (1 << 30))
            self._pool = WorkerPool(1, initializer=init_runner_worker, memory_limit_bytes=limit)
        return self._pool

    def _prepare(self, key: str, dag_json: dict) -> str | None:
        """Set the workload up in the worker unless this incarnation already has it; returns an
        error text if that failed."""
        pool = self.pool
        if pool.restarts != self._prepared_restarts:
            self._prepared.clear()
            self._prepared_restarts = pool.restarts
        if key in self._prepared:
            return None
        out = pool.run(prepare_job, key, dag_json, self.check_correctness,
                       timeout=self.reference_timeout)
        if out.status == OK and out.value is None:
            self._prepared.add(key)
            return None
        if out.status == OK:
            return f"check_correctness: the reference evaluator failed: {out.value}"
        return f"setting up the workload's inputs failed ({out.status}): {out.error}"

    def run(self, inputs: Sequence[MeasureInput], build_results: Sequence[BuildResult],
            verbose: int = 0) -> list[MeasureResult]:
        """Measure every successfully built candidate; results in input order, one per input.
        A candidate whose build failed is not run: its result carries the build error."""
        if len(inputs) != len(build_results):
            raise ValueError(f"{len(inputs)} inputs but {len(build_results)} build results")
        opts = self._opts()
        dag_json: dict[str, dict] = {}
        results: list[MeasureResult] = []
        for inp, br in zip(inputs, build_results):
            t0 = time.monotonic()
            if not built(br):
                res = build_failure(br, self.cache)
            else:
                key = inp.task.workload_key
                if key not in dag_json:
                    dag_json[key] = inp.task.compute_dag.to_json()
                res = self._run_one(key, dag_json[key], br.compiled,
                                    {**opts, "conditions": network_conditions(inp.task)}, t0)
            results.append(res)
            if verbose >= 1:
                print(progress_mark(res.error_no), end="", flush=True)
        if verbose >= 1:
            print(flush=True)
        return results

    def run_compiled(self, workload_key: str, dag_json: dict, compiled: Any,
                     num_threads: int | None = None, conditions: dict | None = None) -> MeasureResult:
        """Measure one compiled candidate of the workload ``dag_json`` (plain data: what a remote
        runner ships to the machine that times it). ``num_threads``: the kernel's thread count
        (None: ``$ANSOR_NUM_THREADS`` or every usable CPU, as for ``run``); ``conditions``: the
        task's ``measure.network_conditions`` (checked in the worker; None: no constants)."""
        opts = {**self._opts(), "conditions": conditions if conditions is not None else {}}
        if num_threads is not None:
            opts["num_threads"] = check_count("num_threads", num_threads)
        return self._run_one(workload_key, dag_json, compiled, opts, time.monotonic())

    def _run_one(self, key: str, dag_json: dict, compiled: Any, opts: dict, t0: float) -> MeasureResult:
        res = self._measure_one(key, dag_json, compiled, opts, t0)
        # Failures too: a resumed run in the other mode measures the candidate again.
        return res if res.cache == opts["cache"] else dataclasses.replace(res, cache=opts["cache"])

    def _measure_one(self, key: str, dag_json: dict, compiled: Any, opts: dict,
                     t0: float) -> MeasureResult:
        host = this_host()
        failed = self._prepare(key, dag_json)
        if failed is not None:
            return MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.UNKNOWN), failed,
                                 time.monotonic() - t0, host=host)
        out = self.pool.run(run_job, key, dag_json, compiled, opts, timeout=self.timeout)
        if out.status == OK:
            costs, err, msg = out.value
            return MeasureResult(tuple(costs), err, msg, time.monotonic() - t0, host=host)
        if out.status == TIMEOUT:
            return MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.RUN_TIMEOUT),
                                 f"run took longer than {self.timeout:g} s", time.monotonic() - t0,
                                 host=host)
        if out.status == CRASH:
            return MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.RUNTIME_DEVICE),
                                 f"runner crashed: {out.error}", time.monotonic() - t0, host=host)
        return MeasureResult((MAX_FLOAT,), int(MeasureErrorNo.UNKNOWN), out.error,
                             time.monotonic() - t0, host=host)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self._prepared.clear()
