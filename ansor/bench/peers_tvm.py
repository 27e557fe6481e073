"""TVM MetaSchedule as a peer of the suite: the workloads in TVM's ``te``, tuning, timing.

Always run as its own process (``python -m ansor.bench.peers_tvm JOB_JSON``, started by
``ansor.bench.driver``), so that a TVM that is missing, broken or crashing (a segfault when a
MetaSchedule task starts, with some apache-tvm-ffi versions) costs the suite one peer, not the
run. Jobs:

* ``probe``: import TVM and report its versions.
* ``tune``: MetaSchedule (``tune_tir``, evolutionary search, XGBoost cost model) for the missing
  trials of a budget into a work dir, which keeps its database across runs. A measure callback
  appends every batch's costs with a timestamp to ``WORK_DIR/batches.jsonl`` (the tuning curve;
  TVM's own database has no timestamps) and prints one progress line per batch. TVM's console
  log goes to ``WORK_DIR/tune_output.log``.
* ``time``: compile the database's best schedule (``compile_tir``), check it against the
  numpy reference and time it like every other system (``timing.time_callable``).

Install (into the same environment): ``pip install apache-tvm==0.27.0.post1
apache-tvm-ffi==0.1.14.post1 xgboost psutil cloudpickle`` - the apache-tvm-ffi that pip picks by
default (0.1.15.post2) segfaults when a MetaSchedule task starts.

Written for TVM 0.27 (``tvm.s_tir.meta_schedule``, ``te.create_prim_func``, ``tvm.compile``,
dict targets). MetaSchedule's default builder imports ``tvm.s_tir.tensor_intrin`` in every
build worker - parsing hundreds of TVMScript intrinsics, ~20 s per batch here, which hits the
30 s build timeout - so the builder here builds without that import (the schedules for these
float32 CPU workloads use no tensor intrinsics).

This module imports TVM only inside the jobs; ``tvm_curve`` reads the work dir's files without it.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from . import timing
from .inputs import bound_args, check_output, make_dag, make_inputs
from .peers import NoFormulation
from .sessions import best_so_far, elapsed_times, read_json

BUILD_TIMEOUT = 60.0
RUN_TIMEOUT = 60.0


# ---- the workloads in TVM's te ------------------------------------------------------------------

def te_workload(workload: str, args: Sequence[Any]) -> list:
    """``[inputs..., output]`` in TVM's ``te``, the same computation and argument order as our
    registered workload ``workload(*args)``."""
    from tvm import te, tirx

    p = bound_args(workload, args)
    dtype = p.get("dtype", "float32")
    zero = tirx.const(0.0, dtype)

    def padded(data, pad: int):
        if not pad:
            return data
        n, h, w, c = data.shape
        return te.compute(
            (n, h + 2 * pad, w + 2 * pad, c),
            lambda i, y, x, k: te.if_then_else(
                te.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
                data[i, y - pad, x - pad, k], zero), name="pad")

    def int_param(name: str) -> int:
        v = p.get(name)
        if isinstance(v, bool) or not isinstance(v, int):
            raise NoFormulation(f"{name}={v!r} (only a single int is supported)")
        return v

    if workload in ("matmul", "batch_matmul"):
        if p.get("transpose_a") or p.get("transpose_b"):
            raise NoFormulation("transposed operands")
        batch = (p["B"],) if workload == "batch_matmul" else ()
        M, N, K = p["M"], p["N"], p["K"]
        a = te.placeholder((*batch, M, K), dtype, "A")
        b = te.placeholder((*batch, K, N), dtype, "B")
        k = te.reduce_axis((0, K), "k")
        if batch:
            c = te.compute((*batch, M, N), lambda q, i, j: te.sum(a[q, i, k] * b[q, k, j], axis=k),
                           name="C")
        else:
            c = te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
        return [a, b, c]
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        if p.get("dilation", 1) != 1 or p.get("groups", 1) != 1:
            raise NoFormulation("dilated or grouped convolution")
        s, pad = int_param("stride"), int_param("padding")
        N, H, W, CI, CO, KH, KW = (p[x] for x in ("N", "H", "W", "CI", "CO", "KH", "KW"))
        data = te.placeholder((N, H, W, CI), dtype, "data")
        kernel = te.placeholder((KH, KW, CI, CO), dtype, "kernel")
        src = padded(data, pad)
        OH, OW = (H + 2 * pad - KH) // s + 1, (W + 2 * pad - KW) // s + 1
        rh, rw = te.reduce_axis((0, KH), "rh"), te.reduce_axis((0, KW), "rw")
        rc = te.reduce_axis((0, CI), "rc")
        conv = te.compute((N, OH, OW, CO), lambda n, y, x, co: te.sum(
            src[n, y * s + rh, x * s + rw, rc] * kernel[rh, rw, rc, co], axis=[rh, rw, rc]),
            name="conv")
        if workload == "conv2d_nhwc":
            return [data, kernel, conv]
        bias = te.placeholder((CO,), dtype, "bias")
        out = te.compute((N, OH, OW, CO),
                         lambda n, y, x, co: te.max(conv[n, y, x, co] + bias[co], zero),
                         name="relu")
        return [data, kernel, bias, out]
    if workload == "depthwise_conv2d_nhwc":
        if p.get("dilation", 1) != 1 or p.get("multiplier", 1) != 1:
            raise NoFormulation("dilation or channel multiplier")
        s, pad = int_param("stride"), int_param("padding")
        N, H, W, C, KH, KW = (p[x] for x in ("N", "H", "W", "C", "KH", "KW"))
        data = te.placeholder((N, H, W, C), dtype, "data")
        kernel = te.placeholder((KH, KW, C, 1), dtype, "kernel")
        src = padded(data, pad)
        OH, OW = (H + 2 * pad - KH) // s + 1, (W + 2 * pad - KW) // s + 1
        rh, rw = te.reduce_axis((0, KH), "rh"), te.reduce_axis((0, KW), "rw")
        out = te.compute((N, OH, OW, C), lambda n, y, x, c: te.sum(
            src[n, y * s + rh, x * s + rw, c] * kernel[rh, rw, c, 0], axis=[rh, rw]),
            name="depthwise")
        return [data, kernel, out]
    if workload in ("dense", "dense_bias_relu"):
        M, N, K = p["M"], p["N"], p["K"]
        data = te.placeholder((M, K), dtype, "data")
        weight = te.placeholder((N, K), dtype, "weight")
        k = te.reduce_axis((0, K), "k")
        mm = te.compute((M, N), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k),
                        name="dense")
        if workload == "dense" and not p.get("bias", True):
            return [data, weight, mm]
        bias = te.placeholder((N,), dtype, "bias")
        if workload == "dense":
            out = te.compute((M, N), lambda i, j: mm[i, j] + bias[j], name="bias_add")
        else:
            out = te.compute((M, N), lambda i, j: te.max(mm[i, j] + bias[j], zero), name="relu")
        return [data, weight, bias, out]
    if workload == "softmax":
        M, N = p["M"], p["N"]
        x = te.placeholder((M, N), dtype, "A")
        k1, k2 = te.reduce_axis((0, N), "k1"), te.reduce_axis((0, N), "k2")
        mx = te.compute((M,), lambda i: te.max(x[i, k1], axis=k1), name="maxelem")
        ex = te.compute((M, N), lambda i, j: te.exp(x[i, j] - mx[i]), name="exp")
        sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="expsum")
        return [x, te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")]
    if workload == "layer_norm":
        M, N = p["M"], p["N"]
        x = te.placeholder((M, N), dtype, "A")
        gamma = te.placeholder((N,), dtype, "gamma")
        beta = te.placeholder((N,), dtype, "beta")
        inv_n = tirx.const(1.0 / N, dtype)
        eps = tirx.const(float(p.get("eps", 1e-5)), dtype)
        k1, k2 = te.reduce_axis((0, N), "k1"), te.reduce_axis((0, N), "k2")
        mean = te.compute((M,), lambda i: te.sum(x[i, k1] * inv_n, axis=k1), name="mean")
        var = te.compute((M,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i])
                                                * inv_n, axis=k2), name="var")
        out = te.compute((M, N), lambda i, j: (x[i, j] - mean[i]) * te.rsqrt(var[i] + eps)
                         * gamma[j] + beta[j], name="layer_norm")
        return [x, gamma, beta, out]
    raise NoFormulation(f"no TVM formulation of {workload}")


def _module_and_target(job: dict):
    import tvm
    from tvm import te

    tensors = te_workload(job["workload"], job["args"])
    mod = tvm.IRModule({"main": te.create_prim_func(tensors)})
    target = tvm.target.Target({"kind": "llvm", "mcpu": job["mcpu"],
                                "num-cores": int(job["threads"])})
    return mod, target


# ---- jobs ---------------------------------------------------------------------------------------

def probe(_: dict) -> dict:
    from importlib import metadata

    import tvm
    from tvm.s_tir import meta_schedule  # noqa: F401 - MetaSchedule must import too

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    llvm = None
    with contextlib.suppress(Exception):
        llvm = str(tvm.target.codegen.llvm_version_major())
    missing = [m for m in ("xgboost",) if dist(m) is None]
    if missing:
        return {"unavailable": f"MetaSchedule's cost model needs {', '.join(missing)} "
                               "(pip install xgboost)"}
    return {"tvm": tvm.__version__, "tvm_ffi": dist("apache-tvm-ffi"), "llvm": llvm}


def build_without_tensor_intrin(mod, target, _params):
    """MetaSchedule's default build, minus its ``import tvm.s_tir.tensor_intrin`` (see the
    module docstring)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def trials_done(work: Path) -> int:
    """Candidates measured in ``work`` so far: our batch file, else TVM's database."""
    batches = work / "batches.jsonl"
    if batches.is_file():
        return sum(len(b.get("costs", [])) for b in _batches(batches))
    db = work / "database_tuning_record.json"
    if db.is_file():
        with open(db) as f:
            return sum(1 for line in f if line.strip())
    return 0


def _batches(path: Path) -> list[dict]:
    out = []
    with open(path) as f:
        for line in f:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


@contextlib.contextmanager
def _stdout_to(path: Path):
    """Send this process's fd 1 (Python and C++ output alike) to ``path``."""
    sys.stdout.flush()
    saved = os.dup(1)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _seconds(v) -> float:
    return float(getattr(v, "value", v))


def tune(job: dict) -> dict:
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms

    work = Path(job["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    done = trials_done(work)
    need = int(job["trials"]) - done
    if need <= 0:
        return {"trials": 0, "trials_in_log": done}
    mod, target = _module_and_target(job)
    flop = float(make_dag(job["workload"], job["args"]).flop_count)
    tag = f"[tvm {job['workload']}{tuple(job['args'])}]"
    start = time.time()
    best = [math.inf]
    count = [0]

    @derived_object
    class Recorder(ms.measure_callback.PyMeasureCallback):
        """Appends each batch's mean run times (None: failed) with a timestamp."""

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results) -> None:
            costs = []
            for b, r in zip(builder_results, runner_results):
                secs = [] if (b.error_msg or r.error_msg or not r.run_secs) else \
                    [_seconds(s) for s in r.run_secs]
                costs.append(sum(secs) / len(secs) if secs else None)
            now = time.time()
            with open(work / "batches.jsonl", "a") as f:
                f.write(json.dumps({"time": now, "costs": costs}) + "\n")
            count[0] += len(costs)
            ok = [c for c in costs if c is not None]
            if ok:
                best[0] = min(best[0], min(ok))
            b_txt = "-" if best[0] == math.inf else \
                f"{best[0] * 1e3:.3f} ms {flop / best[0] / 1e9:.1f} GFLOPS"
            print(f"{tag} trials {count[0]}/{need} | best {b_txt} | errors "
                  f"{len(costs) - len(ok)} in this batch | {now - start:.0f} s elapsed",
                  file=sys.stderr, flush=True)

    threads = int(job["threads"])
    builder = ms.builder.LocalBuilder(f_build=build_without_tensor_intrin,
                                      timeout_sec=BUILD_TIMEOUT)
    runner = ms.runner.LocalRunner(
        timeout_sec=RUN_TIMEOUT,
        # As our tuner's runner measures: 3 calls of >= 100 ms in all, no cache flush.
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=100,
                                                   enable_cpu_cache_flush=False))
    callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [Recorder()]
    with _stdout_to(work / "tune_output.log"):
        ms.tune_tir(mod, target, str(work), max_trials_global=need,
                    num_trials_per_iter=int(job.get("per_round", 64)), builder=builder,
                    runner=runner, measure_callbacks=callbacks, seed=job.get("seed"),
                    num_tuning_cores=threads)
    end = time.time()
    total = trials_done(work)
    return {"trials": total - done, "trials_in_log": total, "start": start, "end": end,
            "wall_seconds": end - start, "best_seconds": None if best[0] == math.inf else best[0]}


def time_best(job: dict) -> dict:
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms

    work = Path(job["work_dir"])
    if not (work / "database_tuning_record.json").is_file():
        return {"error": f"no MetaSchedule database in {work}"}
    mod, target = _module_and_target(job)
    db = ms.database.JSONDatabase(work_dir=str(work), allow_missing=False)
    t0 = time.perf_counter()
    sch = ms.tir_integration.compile_tir(db, mod, target)
    if sch is None:
        return {"error": f"no valid tuning record in {work}"}
    lib = tvm.compile(sch.mod, target=target)
    build_s = time.perf_counter() - t0
    f = lib["main"]
    dag = make_dag(job["workload"], job["args"])
    dev = tvm.cpu()
    out_np = np.zeros(tuple(dag.tensors[-1].shape), dag.tensors[-1].dtype)
    arrays = [tvm.runtime.tensor(x, dev) for x in make_inputs(dag)] + \
        [tvm.runtime.tensor(out_np, dev)]
    f(*arrays)
    err = check_output(arrays[-1].numpy(), np.load(job["ref"]))
    if err:
        return {"error": err}
    res = timing.time_callable(lambda: f(*arrays), **timing.job_timing(job))
    res.update(build_seconds=build_s, version=tvm.__version__)
    return res


def tvm_curve(work: Path, flop: float) -> dict:
    """Best GFLOPS so far after each TVM trial, by trial and by tuning seconds (no TVM import)."""
    path = work / "batches.jsonl"
    if not path.is_file():
        return {"unavailable": f"no {path}"}
    costs, stamps = [], []
    for b in _batches(path):
        for c in b.get("costs", []):
            costs.append(c)
            stamps.append(float(b["time"]))
    sessions = read_json(work / "sessions.json", {}).get("sessions", [])
    return best_so_far(costs, elapsed_times(stamps, sessions), flop)


JOBS = {"probe": probe, "tune": tune, "time": time_best}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    job = json.loads(argv[0])
    try:
        result = JOBS[job["job"]](job)
    except NoFormulation as why:
        result = {"unavailable": str(why)}
    except ImportError as err:
        result = {"unavailable": f"TVM not importable ({err})"}
    except Exception as err:  # noqa: BLE001 - one peer's failure, reported
        result = {"error": f"{type(err).__name__}: {str(err).strip()[:300]}"}
    timing.emit_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
