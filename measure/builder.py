"""LocalBuilder: compile candidates to object code in parallel worker processes.

Each candidate travels as JSON (the DAG and the transform steps), is replayed, lowered and
compiled in a worker, and comes back as a picklable ``CompiledObject`` for the runner. Compiling
out of process isolates the tuner from LLVM: a schedule that makes the optimiser run for minutes
or crash costs one worker restart (BUILD_TIMEOUT / COMPILE_HOST), never the tuning run.

Error classification (TVM's codes): a schedule whose steps do not apply or that does not lower
(``InvalidStepError``) is INSTANTIATION_ERROR; any other exception while replaying, lowering,
generating code or running LLVM is COMPILE_HOST with the exception text; a build that overruns
``timeout`` is BUILD_TIMEOUT; a worker that dies is COMPILE_HOST ("builder crashed").
"""
from __future__ import annotations

import importlib
import traceback
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Callable, Sequence

from .checks import MAX_THREADS, check_count, check_memory_limit_gb, check_seconds
from .host import this_host
from .measure import BuildResult, MeasureErrorNo, MeasureInput
from .target import usable_cpus
from .worker_pool import CRASH, OK, TIMEOUT, WorkerPool

KERNEL_NAME = "default_function"
DEFAULT_MEMORY_LIMIT_GB = 8.0

# ---- in the worker ------------------------------------------------------------------------------

_DAG_CACHE: "OrderedDict[str, Any]" = OrderedDict()  # workload_key -> ComputeDAG, per worker
_DAG_CACHE_SIZE = 32
_BUILD_FUNCS: dict[str, Callable[..., Any]] = {}


def default_build_func(state: Any, name: str) -> Any:
    """Lower ``state`` and compile it: the builder's default ``build_func``."""
    from sketch.lower import lower  # noqa: PLC0415 - heavy; imported in workers only

    from .kernel import compile_object  # noqa: PLC0415

    return compile_object(lower(state, name))


def build_pre_packed(state: Any, name: str, positions: Sequence[int]) -> Any:
    """Lower ``state`` with the packs of the inputs at ``positions`` left out of the kernel
    (``sketch.layout_rewrite``) and compile it; the compiled object says which arguments it
    takes packed. With nothing to rewrite this is ``default_build_func``."""
    from sketch.layout_rewrite import lower_pre_packed  # noqa: PLC0415 - as default_build_func

    from .kernel import compile_object  # noqa: PLC0415

    func, packed = lower_pre_packed(state, positions, name)
    compiled = compile_object(func)
    compiled.packed_args = packed
    return compiled


def resolve_build_func(spec: str | None) -> Callable[..., Any]:
    """``None`` -> the default; ``"module:function"`` -> that function (imported on first use)."""
    if spec is None:
        return default_build_func
    fn = _BUILD_FUNCS.get(spec)
    if fn is None:
        module, sep, attr = spec.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"build_func must be 'module:function', got {spec!r}")
        fn = getattr(importlib.import_module(module), attr)
        if not callable(fn):
            raise TypeError(f"build_func {spec!r} is not callable")
        _BUILD_FUNCS[spec] = fn
    return fn


def _dag(workload_key: str, dag_json: dict) -> Any:
    dag = _DAG_CACHE.get(workload_key)
    if dag is None:
        from compute.compute_dag import ComputeDAG  # noqa: PLC0415 - worker side: loaded by the first job

        dag = ComputeDAG.from_json(dag_json)
        _DAG_CACHE[workload_key] = dag
        while len(_DAG_CACHE) > _DAG_CACHE_SIZE:
            _DAG_CACHE.popitem(last=False)
    else:
        _DAG_CACHE.move_to_end(workload_key)
    return dag


def _error_text(e: BaseException) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return f"{type(e).__name__}: {e}\n{''.join(tb[-6:])}"


def build_job(workload_key: str, dag_json: dict, steps_json: list,
              build_func: str | None, layout_rewrite: Sequence[int] = (),
              target_name: str = "native") -> tuple[Any, int, str]:
    """Replay, lower and compile one candidate: ``(compiled or None, error_no, error_msg)``.
    Runs in a builder worker; every exception becomes an error code. ``layout_rewrite``: the
    argument positions of constant inputs whose pack stage is left out of the kernel (the
    runner packs them outside the timed calls); only with the default ``build_func``.
    ``target_name``: the CPU to build for (``measure.targets``)."""
    from .targets import use_target  # noqa: PLC0415 - worker side, as lower

    with use_target(target_name):
        return _build_job(workload_key, dag_json, steps_json, build_func, layout_rewrite)


def _build_job(workload_key: str, dag_json: dict, steps_json: list,
               build_func: str | None, layout_rewrite: Sequence[int]) -> tuple[Any, int, str]:
    from sketch.loop_state import InvalidStepError  # noqa: PLC0415 - worker side, as lower
    from sketch.replay import replay  # noqa: PLC0415 - worker side, as lower
    from sketch.transform_steps import step_from_json  # noqa: PLC0415 - worker side, as lower

    try:
        fn = resolve_build_func(build_func)
        dag = _dag(workload_key, dag_json)
        try:
            steps = [step_from_json(s) for s in steps_json]
        except ValueError as e:  # a malformed step record cannot describe a valid schedule
            raise InvalidStepError(str(e)) from e
        state = replay(dag, steps)
        if layout_rewrite and build_func is None:
            return build_pre_packed(state, KERNEL_NAME, layout_rewrite), int(MeasureErrorNo.NO_ERROR), ""
        return fn(state, KERNEL_NAME), int(MeasureErrorNo.NO_ERROR), ""
    except InvalidStepError as e:
        return None, int(MeasureErrorNo.INSTANTIATION_ERROR), _error_text(e)
    except Exception as e:  # noqa: BLE001 - codegen and LLVM failures are the candidate's
        return None, int(MeasureErrorNo.COMPILE_HOST), _error_text(e)


def init_builder_worker() -> None:
    """Worker initializer: import the compiler and set up LLVM before any job's clock starts."""
    from sketch import lower as _lower  # noqa: F401, PLC0415 - the initializer's whole point

    from . import target  # noqa: PLC0415

    target.target_machine()
    target.toolchain_key()


# ---- in the tuner -------------------------------------------------------------------------------

class BuilderBase(ABC):
    """What every builder honours, local or remote (``measure.protocols.Builder``): the build
    settings, checked here once - ``timeout`` per build, ``build_func`` (an optional
    ``"module:function"`` replacing the default lower-and-compile, called as
    ``fn(state, name) -> CompiledObject`` where the build runs, so it must be importable there;
    it may raise ``InvalidStepError`` for invalid schedules) and ``memory_limit_gb`` (each
    build's address-space cap, None: none) - ``build`` through ``build_jobs``, and closing on
    leaving a ``with`` block. A subclass says where the jobs run."""

    def __init__(self, timeout: float = 15, build_func: str | None = None,
                 memory_limit_gb: float | None = DEFAULT_MEMORY_LIMIT_GB):
        who = type(self).__name__
        timeout = check_seconds(f"{who} timeout", timeout)
        memory_limit_gb = check_memory_limit_gb(who, memory_limit_gb)
        if build_func is not None:
            module, sep, attr = build_func.partition(":")
            if not sep or not module or not attr:
                raise ValueError(f"build_func must be 'module:function', got {build_func!r}")
        self.timeout = float(timeout)
        self.build_func = build_func
        self.memory_limit_gb = memory_limit_gb

    def settings(self) -> dict:
        """The constructor arguments that build as this builder does, but for where (what a
        remote builder ships to the machines that compile)."""
        return {"timeout": self.timeout, "build_func": self.build_func,
                "memory_limit_gb": self.memory_limit_gb}

    def build(self, inputs: Sequence[MeasureInput], verbose: int = 0) -> list[BuildResult]:
        """Build every input; results in input order, one per input, never raising for a
        candidate's failure."""
        return self.build_jobs(make_build_jobs(inputs, self.build_func), verbose=verbose)

    @abstractmethod
    def build_jobs(self, jobs: Sequence[tuple], verbose: int = 0) -> list[BuildResult]:
        """Build jobs made by ``make_build_jobs`` (plain data); results in order, one per job."""

    @abstractmethod
    def close(self) -> None:
        """Release what builds (workers, a cluster connection)."""

    def __enter__(self) -> "BuilderBase":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalBuilder(BuilderBase):
    """Build candidates on this machine with ``n_parallel`` worker processes (default: every
    usable CPU); the other settings are ``BuilderBase``'s, ``memory_limit_gb`` capping each
    worker."""

    def __init__(self, timeout: float = 15, n_parallel: int | None = None,
                 build_func: str | None = None,
                 memory_limit_gb: float | None = DEFAULT_MEMORY_LIMIT_GB):
        super().__init__(timeout=timeout, build_func=build_func, memory_limit_gb=memory_limit_gb)
        if n_parallel is not None:
            n_parallel = check_count("LocalBuilder n_parallel", n_parallel, maximum=MAX_THREADS)
        self.n_parallel = n_parallel if n_parallel is not None else usable_cpus()
        self._pool: WorkerPool | None = None

    @property
    def pool(self) -> WorkerPool:
        """The worker pool, started on first use."""
        if self._pool is None:
            limit = None if self.memory_limit_gb is None else int(self.memory_limit_gb * (1 << 30))
            self._pool = WorkerPool(self.n_parallel, initializer=init_builder_worker,
                                    memory_limit_bytes=limit)
        return self._pool

    def build_jobs(self, jobs: Sequence[tuple], verbose: int = 0) -> list[BuildResult]:
        """Build jobs made by ``make_build_jobs`` (plain data: what a remote builder ships to the
        machine that compiles); results in order, one per job."""
        if not jobs:
            return []
        outcomes = self.pool.map(build_job, jobs, timeout=self.timeout)
        host = this_host()
        results = []
        for out in outcomes:
            if out.status == OK:
                compiled, err, msg = out.value
                res = BuildResult(compiled, err, msg, out.seconds, host)
            elif out.status == TIMEOUT:
                res = BuildResult(None, int(MeasureErrorNo.BUILD_TIMEOUT),
                                  f"build took longer than {self.timeout:g} s", out.seconds, host)
            elif out.status == CRASH:
                res = BuildResult(None, int(MeasureErrorNo.COMPILE_HOST),
                                  f"builder crashed: {out.error}", out.seconds, host)
            else:  # the job function itself failed (e.g. it could not be unpickled)
                res = BuildResult(None, int(MeasureErrorNo.COMPILE_HOST), out.error, out.seconds,
                                  host)
            results.append(res)
            if verbose >= 1:
                print(progress_mark(res.error_no), end="", flush=True)
        if verbose >= 1:
            print(flush=True)
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def make_build_jobs(inputs: Sequence[MeasureInput], build_func: str | None) -> list[tuple]:
    """One ``build_job`` argument tuple per input, as plain data: the workload key, the DAG's
    JSON (encoded once per workload), the steps' JSON, the build function's name, the
    task's ``layout_rewrite_inputs`` (argument positions of constant inputs; () for none) and
    the name of its target (``measure.targets``; "native" for a task without one)."""
    from sketch.transform_steps import steps_to_json  # noqa: PLC0415 - as build_job's imports

    dag_json: dict[str, dict] = {}
    jobs = []
    for inp in inputs:
        key = inp.task.workload_key
        if key not in dag_json:
            dag_json[key] = inp.task.compute_dag.to_json()
        rewrite = tuple(int(p) for p in getattr(inp.task, "layout_rewrite_inputs", ()))
        target_name = str(getattr(inp.task, "target_name", "native"))
        jobs.append((key, dag_json[key], steps_to_json(inp.state.steps), build_func, rewrite,
                     target_name))
    return jobs


def progress_mark(error_no: int) -> str:
    """One character per candidate for verbose progress lines, as TVM prints them."""
    if error_no == MeasureErrorNo.NO_ERROR:
        return "."
    if error_no in (MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.RUN_TIMEOUT):
        return "T"
    return "E"

