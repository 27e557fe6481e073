"""The suite's workers: one job each, run in a fresh process (``timing.run_fresh``) started as
``python -m ansor.bench.workers JOB_JSON``: tune with ours, compute the numpy reference, or
time one system (ours from the log, numpy, PyTorch eager or ``torch.compile``) after checking
its output. TVM's jobs are in ``peers_tvm``.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from typing import Sequence

import numpy as np

import ansor
from ansor.records import best_record
from ansor.search_task import SearchTask
from ansor.tuning import TuningOptions
from compute import reference
from cost_model import LGBModel
from measure.builder import LocalBuilder
from measure.measure import MeasureInput
from measure.record import RecordToFile
from measure.runner import LocalRunner
from measure.target import toolchain_key
from sketch.search_params import SearchParams

from . import timing
from .inputs import check_output, kernel_arrays, make_dag, make_inputs
from .peers import NoFormulation, numpy_impl, torch_impl
from .sessions import count_records


def _load_ref(job: dict):
    return np.load(job["ref"])


def _time_ours(job: dict) -> dict:
    task = SearchTask(func=job["workload"], args=job["args"])
    best = best_record(job["log"], task, target_key=toolchain_key())
    state = best[0].state if best is not None else task.apply_best(job["log"])
    t0 = time.perf_counter()
    kernel = ansor.build(state)
    build_s = time.perf_counter() - t0
    dag = task.compute_dag
    arrays = kernel_arrays(dag)
    kernel(*arrays)
    err = check_output(arrays[-1], _load_ref(job))
    if err:
        return {"error": err}
    # Called through a bare ctypes prototype on checked pointers, as Kernel.benchmark does:
    # the per-call argument checks of kernel(...) are not part of the kernel's time.
    call = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(arrays)))(kernel.address)
    ptrs = kernel.arg_pointers(*arrays)
    res = timing.time_callable(lambda: call(*ptrs), **timing.job_timing(job))
    res.update(build_seconds=build_s, threads=kernel.num_threads,
               recorded_cost=None if best is None else best[1].mean_cost)
    return res


def _time_numpy(job: dict) -> dict:
    dag = make_dag(job["workload"], job["args"])
    try:
        fn = numpy_impl(job["workload"], job["args"], make_inputs(dag))
    except NoFormulation as why:
        return {"skipped": str(why)}
    err = check_output(fn(), _load_ref(job))
    if err:
        return {"error": err}
    res = timing.time_callable(fn, **timing.job_timing(job))
    res["version"] = np.__version__
    res["blas"] = timing.blas_kernels()
    return res


def _time_torch(job: dict, compiled: bool) -> dict:
    if compiled:
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    try:
        import torch
    except ImportError as err:
        return {"skipped": f"torch not importable ({err})"}
    torch.set_num_threads(int(job["threads"]))
    dag = make_dag(job["workload"], job["args"])
    try:
        fn, tensors, to_numpy = torch_impl(job["workload"], job["args"], make_inputs(dag))
    except NoFormulation as why:
        return {"skipped": str(why)}
    res: dict = {"version": torch.__version__}
    with torch.inference_mode():
        if compiled:
            t0 = time.perf_counter()
            try:
                fn = torch.compile(fn, dynamic=False)
                out = fn(*tensors)
            except Exception as err:  # noqa: BLE001 - any compiler failure: not available here
                msg = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
                return {"skipped": f"torch.compile failed: {type(err).__name__}: {msg}"}
            res["compile_seconds"] = time.perf_counter() - t0
        else:
            out = fn(*tensors)
        err = check_output(to_numpy(out), _load_ref(job))
        if err:
            return {"error": err}
        res.update(timing.time_callable(lambda: fn(*tensors), **timing.job_timing(job)))
    return res


def _tune_ours(job: dict) -> dict:
    task = SearchTask(func=job["workload"], args=job["args"])
    log = job["log"]
    existing = count_records(log, task)
    need = max(0, int(job["trials"]) - existing)
    out: dict = {"existing": existing, "trials": 0}
    if need == 0:
        return out
    start = time.time()
    params = None
    if job.get("search_params"):  # overrides of SearchParams' defaults (search ablations)
        params = SearchParams(**job["search_params"])
    model = None
    if job.get("cost_model") == "untrained":  # the search as it was before the pre-trained model
        model = LGBModel(seed=job.get("seed"))
    res = task.tune(TuningOptions(num_measure_trials=need, num_measures_per_round=job["per_round"],
                                  log_file=log, seed=job.get("seed"), verbose=1,
                                  search_params=params), cost_model=model)
    end = time.time()
    out.update(trials=res.trials, errors=res.errors, start=start, end=end,
               wall_seconds=end - start, search_seconds=res.search_seconds,
               measure_seconds=res.measure_seconds, stop_reason=res.stop_reason,
               best_cost=res.best_cost)
    return out


def _guess_ours(job: dict) -> dict:
    """``SearchTask.best_guess`` (no measurement to choose it), then measured once by the
    ordinary measurer into ``job["log"]`` so the suite's timing job can time it."""
    task = SearchTask(func=job["workload"], args=job["args"])
    t0 = time.perf_counter()
    state = task.best_guess(seed=int(job.get("seed") or 0))
    guess_seconds = time.perf_counter() - t0
    inp = MeasureInput(task, state)
    with LocalBuilder() as builder, LocalRunner() as runner:
        res = runner.run([inp], builder.build([inp]))
    RecordToFile(job["log"])([inp], res)
    return {"guess_seconds": guess_seconds, "error_no": int(res[0].error_no),
            "cost": float(res[0].mean_cost)}


def _reference(job: dict) -> dict:
    dag = make_dag(job["workload"], job["args"])
    t0 = time.perf_counter()
    (ref,) = reference.evaluate(dag, make_inputs(dag))[-1:]
    np.save(job["ref"], ref)
    return {"seconds": time.perf_counter() - t0, "flop": dag.flop_count}


def worker(job: dict) -> dict:
    """Run one job in this (fresh) process: ``{"job": "time"|"tune"|"ref", ...}``."""
    kind, system = job["job"], job.get("system")
    try:
        if kind == "ref":
            return _reference(job)
        if kind == "tune" and system == "ours":
            return _tune_ours(job)
        if kind == "guess" and system == "ours":
            return _guess_ours(job)
        if kind == "time":
            if system == "ours":
                return _time_ours(job)
            if system == "numpy":
                return _time_numpy(job)
            if system in ("torch", "torch_compile"):
                return _time_torch(job, compiled=system == "torch_compile")
    except Exception as err:  # noqa: BLE001 - reported as this measurement's error
        return {"error": f"{type(err).__name__}: {str(err)[:300]}"}
    raise ValueError(f"unknown job {kind!r} for system {system!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ansor.bench.workers JOB_JSON``: run the job, emit its result."""
    argv = sys.argv[1:] if argv is None else list(argv)
    timing.emit_result(worker(json.loads(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
