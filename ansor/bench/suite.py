"""The benchmark suite (issue 8): tuned ansor-py kernels against numpy, PyTorch and TVM.

For each workload of the suite (float32, batch 1) the driver

1. tunes it with our auto-scheduler for ``--trials`` trials into ``LOG_DIR/ours/NAME.json``
   (an existing log is resumed: only the missing trials are measured) and, when TVM is
   importable, with TVM MetaSchedule for the same budget into ``LOG_DIR/tvm/NAME/``
   (``peers_tvm``); both record tuning wall time and seconds per trial;
2. computes the numpy reference once (in a worker process);
3. over ``--rounds`` rounds, alternating systems (their order rotates each round), times every
   available system in a fresh process (``timing``): our best schedule from the log, numpy,
   PyTorch eager (NHWC convolutions through ``channels_last``), ``torch.compile`` and TVM's
   best schedule. Each output is checked against the reference before it is timed;
4. writes ``OUT/suite.json`` (machine, versions, settings, every figure including the per-round
   and per-repeat times), ``OUT/suite.md`` (the table) and, with matplotlib, ``OUT/suite.png``.

``--curve`` instead tunes the selected workloads (same logs, so it reuses a suite run's) and
plots the best GFLOPS found against trials and against wall-clock seconds, for us and TVM
(``OUT/curve_NAME.json`` / ``.png``).

    ansor bench                                     # the whole suite (long: tuning dominates)
    ansor bench --trials 8 --workloads gemm_512,softmax --rounds 2
    ansor bench --workloads matmul:256,256,256 --no-tvm   # any registered workload, WORKLOAD:ARGS
    ansor bench --curve --workloads gemm_512
    ansor bench --list
"""
from __future__ import annotations

import argparse
import ctypes
import inspect
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from measure.checks import MAX_TIMEOUT_S

from .. import argtypes
from . import timing

# ---- the suite ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchWorkload:
    """One row of the suite: a registered workload (``compute.ops``) with its arguments."""

    name: str            # the suite's key, e.g. "gemm_1024"; names logs and result entries
    workload: str        # registered workload name
    args: tuple
    label: str           # how the table names it
    memory_bound: bool = False  # reported in milliseconds: its FLOP count says little


SUITE: tuple[BenchWorkload, ...] = (
    BenchWorkload("gemm_1024", "matmul", (1024, 1024, 1024), "GEMM 1024^3"),
    BenchWorkload("gemm_512", "matmul", (512, 512, 512), "GEMM 512^3"),
    BenchWorkload("batch_matmul", "batch_matmul", (16, 128, 128, 128), "batch matmul 16x128^3"),
    BenchWorkload("conv2d", "conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1),
                  "conv2d NHWC 56x56x64->64 3x3"),
    BenchWorkload("conv2d_bias_relu", "conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1),
                  "conv2d 3x3 + bias + relu"),
    BenchWorkload("conv2d_1x1", "conv2d_nhwc", (1, 56, 56, 64, 256, 1, 1, 1, 0),
                  "conv2d 1x1 56x56x64->256"),
    BenchWorkload("depthwise_conv2d", "depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 3, 1, 1),
                  "depthwise conv2d 112x112x32 3x3"),
    BenchWorkload("dense_bias_relu", "dense_bias_relu", (128, 1024, 1024),
                  "dense 128x1024x1024 + bias + relu"),
    BenchWorkload("softmax", "softmax", (1024, 1024), "softmax 1024x1024", memory_bound=True),
    BenchWorkload("layer_norm", "layer_norm", (1024, 1024), "layer_norm 1024x1024",
                  memory_bound=True),
)

PEERS = ("numpy", "torch", "torch_compile", "tvm")
SYSTEMS = ("ours",) + PEERS
SYSTEM_LABELS = {"ours": "ours", "numpy": "numpy", "torch": "PyTorch",
                 "torch_compile": "torch.compile", "tvm": "TVM"}
MEMORY_BOUND_WORKLOADS = {"softmax", "layer_norm", "relu", "gelu", "bias_add", "add", "multiply",
                          "transpose", "reshape", "pad", "max_pool2d", "avg_pool2d", "norm"}
INPUT_SEED = 0
TIMING_TIMEOUT = 1800.0  # one timing worker (torch.compile's first compile is the slow part)
# A hung TVM tuning run must not hold the suite forever (MetaSchedule takes ~5 s a trial here).
TVM_TUNE_TIMEOUT_BASE, TVM_TUNE_TIMEOUT_PER_TRIAL = 900.0, 30.0


def parse_workloads(text: str | None) -> list[BenchWorkload]:
    """``None`` -> the whole suite; else comma-separated suite names or ``WORKLOAD:ARGS`` items
    (``matmul:64,64,64``; separate several such items with ``;``)."""
    if not text:
        return list(SUITE)
    by_name = {w.name: w for w in SUITE}
    items = [t.strip() for t in (text.split(";") if ":" in text else text.split(",")) if t.strip()]
    out = []
    for item in items:
        if item in by_name:
            out.append(by_name[item])
            continue
        if ":" not in item:
            raise SystemExit(f"ansor bench: unknown workload {item!r}; suite workloads: "
                             f"{', '.join(by_name)} (or WORKLOAD:ARGS, e.g. matmul:64,64,64)")
        wl, _, arg_text = item.partition(":")
        from compute.ops import WORKLOADS

        if wl not in WORKLOADS:
            raise SystemExit(f"ansor bench: unknown registered workload {wl!r} (see `ansor "
                             "workloads`)")
        import ast

        try:
            args = tuple(ast.literal_eval(f"({arg_text},)")) if arg_text.strip() else \
                WORKLOADS[wl].default_args
        except (ValueError, SyntaxError):
            raise SystemExit(f"ansor bench: bad arguments {arg_text!r} in {item!r}") from None
        flat = "x".join(str(a) for a in args if not isinstance(a, (tuple, list)))
        out.append(BenchWorkload(f"{wl}_{flat}" if flat else wl, wl, args, f"{wl}{args}",
                                 memory_bound=wl in MEMORY_BOUND_WORKLOADS))
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise SystemExit(f"ansor bench: a workload is selected twice: {', '.join(names)}")
    return out


def bound_args(workload: str, args: Sequence[Any]) -> dict:
    """The workload function's parameters for ``args``, defaults filled in (for the peers)."""
    from compute.workload_registry import get_workload_func

    sig = inspect.signature(get_workload_func(workload))
    ba = sig.bind(*args)
    ba.apply_defaults()
    return dict(ba.arguments)


# ---- inputs, reference, checking ------------------------------------------------------------------

def make_dag(workload: str, args: Sequence[Any]):
    from ansor.compute_dag import ComputeDAG
    from compute.workload_registry import make_workload

    return ComputeDAG(make_workload(workload, tuple(args)))


def make_inputs(dag) -> list:
    """The same random inputs for every system (uniform in [-1, 1), fixed seed)."""
    from compute.reference import random_inputs

    return random_inputs(dag, seed=INPUT_SEED)


def kernel_arrays(dag) -> list:
    """A kernel's arguments in ``dag.tensors`` order: the random inputs, zeroed outputs (the
    last is the workload's output)."""
    import numpy as np

    from compute.tensor import ComputeOp

    inputs = iter(make_inputs(dag))
    return [np.zeros(t.shape, t.dtype) if isinstance(t.op, ComputeOp) else next(inputs)
            for t in dag.tensors]


def check_output(out, ref) -> str | None:
    """None if ``out`` matches the reference, else what is wrong."""
    import numpy as np

    out = np.asarray(out)
    if tuple(out.shape) != tuple(ref.shape):
        return f"wrong result: shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    if not np.allclose(out, ref, rtol=1e-3, atol=1e-3 * scale):
        err = float(np.max(np.abs(out.astype("float64") - ref)))
        return f"wrong result: max abs error {err:.3g} (reference max {scale:.3g})"
    return None


# ---- the peers' formulations ---------------------------------------------------------------------

class NoFormulation(Exception):
    """This peer has no formulation of this workload (or of these arguments)."""


def _int_param(p: dict, name: str) -> int:
    v = p.get(name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise NoFormulation(f"{name}={v!r} (only a single int is supported)")
    return v


def _conv_params(p: dict) -> tuple[int, int]:
    stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
    if p.get("dilation", 1) != 1 or p.get("groups", 1) != 1:
        raise NoFormulation("dilated or grouped convolution")
    return stride, pad


def numpy_impl(workload: str, args: Sequence[Any], inputs: list) -> Callable[[], Any]:
    """numpy's natural formulation: ``@`` for (batched) GEMMs, im2col by a strided window view
    and ``tensordot`` (BLAS) for convolutions, shifted slices for depthwise, vectorised
    reductions for softmax and layer norm."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    p = bound_args(workload, args)
    if workload in ("matmul", "batch_matmul"):
        a, b = inputs
        ta, tb = p.get("transpose_a", False), p.get("transpose_b", False)
        a = np.swapaxes(a, -1, -2) if ta else a
        b = np.swapaxes(b, -1, -2) if tb else b
        return lambda: np.matmul(a, b)
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        stride, pad = _conv_params(p)
        x, w = inputs[0], inputs[1]
        kh, kw, ci, co = w.shape
        if kh == kw == 1 and stride == 1 and pad == 0:
            def conv():
                return (x.reshape(-1, ci) @ w.reshape(ci, co)).reshape(*x.shape[:3], co)
        else:
            def conv():
                xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
                win = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::stride, ::stride]
                return np.tensordot(win, w, axes=([4, 5, 3], [0, 1, 2]))  # N, OH, OW, CO
        if workload == "conv2d_nhwc":
            return conv
        bias = inputs[2]
        return lambda: np.maximum(conv() + bias, 0)
    if workload == "depthwise_conv2d_nhwc":
        stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
        if p.get("dilation", 1) != 1:
            raise NoFormulation("dilated depthwise convolution")
        x, w = inputs
        kh, kw, c, mult = w.shape
        if mult != 1:
            raise NoFormulation("channel multiplier > 1")
        n, h, wd, _ = x.shape
        oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1

        def depthwise():
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else x
            out = np.zeros((n, oh, ow, c), x.dtype)
            for i in range(kh):
                for j in range(kw):
                    out += xp[:, i:i + (oh - 1) * stride + 1:stride,
                              j:j + (ow - 1) * stride + 1:stride, :] * w[i, j, :, 0]
            return out
        return depthwise
    if workload in ("dense", "dense_bias_relu"):
        x, w = inputs[0], inputs[1]
        if len(inputs) == 2:
            return lambda: x @ w.T
        b = inputs[2]
        if workload == "dense":
            return lambda: x @ w.T + b
        return lambda: np.maximum(x @ w.T + b, 0)
    if workload == "softmax":
        (x,) = inputs

        def softmax():
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            e /= e.sum(axis=-1, keepdims=True)
            return e
        return softmax
    if workload == "layer_norm":
        x, g, b = inputs
        eps = float(p.get("eps", 1e-5))

        def layer_norm():
            d = x - x.mean(axis=-1, keepdims=True)
            var = np.mean(d * d, axis=-1, keepdims=True)
            return d / np.sqrt(var + eps) * g + b
        return layer_norm
    raise NoFormulation(f"no numpy formulation of {workload}")


def torch_impl(workload: str, args: Sequence[Any], inputs: list):
    """PyTorch's formulation: ``(fn, tensors, to_numpy)`` with ``fn(*tensors)`` the output.
    NHWC data is passed as channels_last NCHW tensors (the same memory), weights converted once
    outside the timed call."""
    import torch
    import torch.nn.functional as F

    p = bound_args(workload, args)
    t = [torch.from_numpy(x) for x in inputs]
    same = lambda y: y.numpy()  # noqa: E731
    nhwc = lambda y: y.permute(0, 2, 3, 1).numpy()  # noqa: E731 - channels_last NCHW -> NHWC view
    if workload in ("matmul", "batch_matmul"):
        a, b = t
        a = a.transpose(-1, -2) if p.get("transpose_a") else a
        b = b.transpose(-1, -2) if p.get("transpose_b") else b
        return (lambda x, y: torch.matmul(x, y)), [a, b], same
    if workload in ("conv2d_nhwc", "conv2d_bias_relu"):
        stride, pad = _conv_params(p)
        x = t[0].permute(0, 3, 1, 2)  # NHWC memory is a channels_last NCHW tensor
        w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # HWIO -> OIHW
        if workload == "conv2d_nhwc":
            return (lambda x, w: F.conv2d(x, w, None, stride, pad)), [x, w], nhwc
        return (lambda x, w, b: torch.relu(F.conv2d(x, w, b, stride, pad))), [x, w, t[2]], nhwc
    if workload == "depthwise_conv2d_nhwc":
        stride, pad = _int_param(p, "stride"), _int_param(p, "padding")
        if p.get("dilation", 1) != 1:
            raise NoFormulation("dilated depthwise convolution")
        kh, kw, c, mult = inputs[1].shape
        x = t[0].permute(0, 3, 1, 2)
        w = t[1].permute(2, 3, 0, 1).reshape(c * mult, 1, kh, kw).contiguous(
            memory_format=torch.channels_last)
        return (lambda x, w: F.conv2d(x, w, None, stride, pad, 1, c)), [x, w], nhwc
    if workload in ("dense", "dense_bias_relu"):
        if workload == "dense" and len(t) == 2:
            return (lambda x, w: F.linear(x, w)), t, same
        if workload == "dense":
            return (lambda x, w, b: F.linear(x, w, b)), t, same
        return (lambda x, w, b: torch.relu(F.linear(x, w, b))), t, same
    if workload == "softmax":
        return (lambda x: torch.softmax(x, dim=-1)), t, same
    if workload == "layer_norm":
        eps = float(p.get("eps", 1e-5))
        n = inputs[0].shape[-1]
        return (lambda x, g, b: F.layer_norm(x, (n,), g, b, eps)), t, same
    raise NoFormulation(f"no PyTorch formulation of {workload}")


# ---- the workers (each runs in a fresh process) ------------------------------------------------

def _timing_kw(job: dict) -> dict:
    t = job.get("timing", {})
    return dict(repeat=int(t.get("repeat", timing.DEFAULT_REPEAT)),
                min_repeat_ms=float(t.get("min_repeat_ms", timing.DEFAULT_MIN_REPEAT_MS)),
                warmup_s=float(t.get("warmup_s", timing.DEFAULT_WARMUP_S)))


def _load_ref(job: dict):
    import numpy as np

    return np.load(job["ref"])


def _time_ours(job: dict) -> dict:
    import ansor
    from ansor.records import best_record
    from ansor.search_task import SearchTask
    from measure.target import toolchain_key

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
    res = timing.time_callable(lambda: call(*ptrs), **_timing_kw(job))
    res.update(build_seconds=build_s, threads=kernel.num_threads,
               recorded_cost=None if best is None else best[1].mean_cost)
    return res


def _time_numpy(job: dict) -> dict:
    import numpy as np

    dag = make_dag(job["workload"], job["args"])
    try:
        fn = numpy_impl(job["workload"], job["args"], make_inputs(dag))
    except NoFormulation as why:
        return {"skipped": str(why)}
    err = check_output(fn(), _load_ref(job))
    if err:
        return {"error": err}
    res = timing.time_callable(fn, **_timing_kw(job))
    res["version"] = np.__version__
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
        res.update(timing.time_callable(lambda: fn(*tensors), **_timing_kw(job)))
    return res


def count_records(log: str | os.PathLike, task) -> int:
    """Records of ``task`` measured with this toolchain in ``log`` (0 if there is no log)."""
    from measure.record import LineWarner, iter_lines
    from measure.target import toolchain_key

    if not os.path.isfile(log):
        return 0
    here, key = toolchain_key(), task.workload_key
    warner = LineWarner(os.fspath(log))
    n = sum(1 for line in iter_lines(log, warner)
            if line.workload_key == key and line.target_key == here)
    warner.finish()
    return n


def _tune_ours(job: dict) -> dict:
    from ansor.search_task import SearchTask
    from ansor.tuning import TuningOptions

    task = SearchTask(func=job["workload"], args=job["args"])
    log = job["log"]
    existing = count_records(log, task)
    need = max(0, int(job["trials"]) - existing)
    out: dict = {"existing": existing, "trials": 0}
    if need == 0:
        return out
    start = time.time()
    res = task.tune(TuningOptions(num_measure_trials=need, num_measures_per_round=job["per_round"],
                                  log_file=log, seed=job.get("seed"), verbose=1))
    end = time.time()
    out.update(trials=res.trials, errors=res.errors, start=start, end=end,
               wall_seconds=end - start, search_seconds=res.search_seconds,
               measure_seconds=res.measure_seconds, stop_reason=res.stop_reason,
               best_cost=res.best_cost)
    return out


def _reference(job: dict) -> dict:
    import numpy as np

    from compute import reference

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


# ---- tuning logs and sessions --------------------------------------------------------------------

def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def add_session(path: Path, session: dict) -> None:
    """Append one tuning session (start, end, trials, wall seconds) to a sessions file."""
    data = _read_json(path, {"sessions": []})
    data.setdefault("sessions", []).append(session)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def tuning_summary(sessions_path: Path, total_trials: int | None = None) -> dict:
    """Tuning wall time and seconds per trial over every recorded session."""
    sessions = _read_json(sessions_path, {}).get("sessions", [])
    trials = sum(int(s.get("trials", 0)) for s in sessions)
    wall = sum(float(s.get("wall_seconds", 0.0)) for s in sessions)
    out = {"sessions": len(sessions), "timed_trials": trials, "wall_seconds": wall,
           "seconds_per_trial": wall / trials if trials else None}
    if total_trials is not None:
        out["trials_in_log"] = total_trials
    return out


def elapsed_times(timestamps: Sequence[float], sessions: Sequence[dict]) -> list[float]:
    """Seconds of tuning time at each timestamp: the durations of the earlier sessions plus the
    time since the start of the session holding it (pauses between sessions do not count). A
    timestamp outside every session counts from the first timestamp."""
    spans = sorted((float(s["start"]), float(s["end"])) for s in sessions
                   if "start" in s and "end" in s)
    out = []
    for ts in timestamps:
        before = 0.0
        for start, end in spans:
            if start <= ts <= end + 1.0:
                out.append(before + ts - start)
                break
            before += end - start
        else:
            out.append(ts - timestamps[0] if timestamps else 0.0)
    return out


def ours_curve(log: Path, sessions_path: Path, wl: BenchWorkload) -> dict:
    """Best GFLOPS so far after each of our trials, by trial and by tuning seconds."""
    from ansor.search_task import SearchTask
    from measure.record import LineWarner, iter_lines
    from measure.target import toolchain_key

    task = SearchTask(func=wl.workload, args=wl.args)
    flop = float(task.flop_count)
    here, key = toolchain_key(), task.workload_key
    costs, stamps = [], []
    if log.is_file():
        warner = LineWarner(os.fspath(log))
        for line in iter_lines(log, warner):
            if line.workload_key == key and line.target_key == here:
                costs.append(line.result.mean_cost if line.is_valid else None)
                stamps.append(line.result.timestamp)
        warner.finish()
    sessions = _read_json(sessions_path, {}).get("sessions", [])
    return _curve(costs, elapsed_times(stamps, sessions), flop)


def _curve(costs: Sequence[float | None], seconds: Sequence[float], flop: float) -> dict:
    best, best_gflops = math.inf, []
    for c in costs:
        if c is not None and 0 < c < best:
            best = c
        best_gflops.append(flop / best / 1e9 if best < math.inf else None)
    return {"trials": list(range(1, len(costs) + 1)), "seconds": list(seconds),
            "best_gflops": best_gflops}


# ---- the driver ----------------------------------------------------------------------------------

@dataclass
class Options:
    workloads: list[BenchWorkload]
    out: Path
    log_dir: Path
    trials: int = 200
    threads: int = 2
    rounds: int = 5
    tvm: bool = True
    torch_compile: bool = True
    seed: int | None = None
    per_round: int = 64
    timing: dict = field(default_factory=lambda: {
        "repeat": timing.DEFAULT_REPEAT, "min_repeat_ms": timing.DEFAULT_MIN_REPEAT_MS,
        "warmup_s": timing.DEFAULT_WARMUP_S})
    curve: bool = False
    quiet: bool = False


def say(opts: Options, text: str) -> None:
    if not opts.quiet:
        print(text, file=sys.stderr, flush=True)


def _worker_env(extra: dict | None = None) -> dict:
    """This environment, with the directory holding this copy of ``ansor`` first on PYTHONPATH:
    workers import the same code even when the suite runs from an uninstalled checkout."""
    env = dict(os.environ, **(extra or {}))
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _suite_job(job: dict, threads: int, stream: bool = False, timeout: float | None = None,
               env: dict | None = None) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.suite", "--worker", json.dumps(job)], threads,
                            timeout=timeout, stream=stream, env=_worker_env(env))


def _tvm_job(job: dict, threads: int, stream: bool = False,
             timeout: float | None = None) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.peers_tvm", json.dumps(job)], threads,
                            timeout=timeout, stream=stream, env=_worker_env())


def _ours_paths(opts: Options, wl: BenchWorkload) -> tuple[Path, Path]:
    d = opts.log_dir / "ours"
    return d / f"{wl.name}.json", d / f"{wl.name}.sessions.json"


def _tvm_dir(opts: Options, wl: BenchWorkload) -> Path:
    return opts.log_dir / "tvm" / wl.name


def probe_tvm(opts: Options) -> dict:
    """TVM's versions, or ``{"unavailable": why}``."""
    res = _tvm_job({"job": "probe"}, opts.threads, timeout=300)
    if "error" in res or "unavailable" in res:
        return {"unavailable": res.get("unavailable") or res["error"]}
    return res


def tune_all(opts: Options, tvm_info: dict) -> dict:
    """Tune every workload with each tuner (resuming logs). Returns per workload and tuner the
    tuning summary, or an ``unavailable``/``error`` note."""
    from measure.target import host_cpu_name

    out: dict = {}
    for i, wl in enumerate(opts.workloads, 1):
        entry = out[wl.name] = {}
        log, sessions = _ours_paths(opts, wl)
        log.parent.mkdir(parents=True, exist_ok=True)
        say(opts, f"== [{i}/{len(opts.workloads)}] {wl.name}: tuning with ansor-py "
                  f"({opts.trials} trials, log {log})")
        res = _suite_job({"job": "tune", "system": "ours", "workload": wl.workload,
                          "args": list(wl.args), "log": str(log), "trials": opts.trials,
                          "per_round": opts.per_round, "seed": opts.seed}, opts.threads,
                         stream=not opts.quiet)
        if "error" in res:
            entry["ours"] = {"error": f"tuning failed: {res['error']}"}
        else:
            if res.get("trials"):
                add_session(sessions, {k: res[k] for k in ("start", "end", "trials",
                                                            "wall_seconds", "search_seconds",
                                                            "measure_seconds") if k in res})
            entry["ours"] = tuning_summary(sessions, res["existing"] + res.get("trials", 0))
            entry["ours"]["this_run_trials"] = res.get("trials", 0)
        if not opts.tvm:
            entry["tvm"] = {"unavailable": "disabled (--no-tvm)"}
            continue
        if "unavailable" in tvm_info:
            entry["tvm"] = {"unavailable": tvm_info["unavailable"]}
            continue
        work = _tvm_dir(opts, wl)
        say(opts, f"== [{i}/{len(opts.workloads)}] {wl.name}: tuning with TVM MetaSchedule "
                  f"({opts.trials} trials, work dir {work})")
        res = _tvm_job({"job": "tune", "workload": wl.workload, "args": list(wl.args),
                        "work_dir": str(work), "trials": opts.trials, "threads": opts.threads,
                        "mcpu": host_cpu_name(), "seed": opts.seed, "per_round": opts.per_round},
                       opts.threads, stream=not opts.quiet,
                       timeout=TVM_TUNE_TIMEOUT_BASE + TVM_TUNE_TIMEOUT_PER_TRIAL * opts.trials)
        if "error" in res or "unavailable" in res:
            entry["tvm"] = {"unavailable": "tuning failed: "
                            + str(res.get("unavailable") or res.get("error"))}
        else:
            if res.get("trials"):
                add_session(work / "sessions.json", {k: res[k] for k in (
                    "start", "end", "trials", "wall_seconds") if k in res})
            entry["tvm"] = tuning_summary(work / "sessions.json", res.get("trials_in_log"))
            entry["tvm"]["this_run_trials"] = res.get("trials", 0)
    return out


def _systems(opts: Options) -> list[str]:
    out = ["ours", "numpy", "torch"]
    if opts.torch_compile:
        out.append("torch_compile")
    if opts.tvm:
        out.append("tvm")
    return out


def time_all(opts: Options, tuning: dict, tvm_info: dict, refs: dict) -> dict:
    """The timing rounds: every (workload, system) once per round, each in a fresh process."""
    from measure.target import host_cpu_name

    systems = _systems(opts)
    raw: dict = {wl.name: {s: [] for s in systems} for wl in opts.workloads}
    dead: dict = {}  # (workload, system) -> why it is not timed (any more)
    for wl in opts.workloads:
        if "error" in tuning[wl.name].get("ours", {}):
            dead[(wl.name, "ours")] = {"error": tuning[wl.name]["ours"]["error"]}
        if "tvm" in systems and "unavailable" in tuning[wl.name].get("tvm", {}):
            dead[(wl.name, "tvm")] = {"skipped": tuning[wl.name]["tvm"]["unavailable"]}
        if "error" in refs[wl.name]:
            for s in systems:
                dead[(wl.name, s)] = {"error": f"no reference: {refs[wl.name]['error']}"}
    compile_env = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    for r in range(opts.rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for wl in opts.workloads:
            for s in order:
                if (wl.name, s) in dead:
                    continue
                job = {"job": "time", "system": s, "workload": wl.workload, "args": list(wl.args),
                       "ref": refs[wl.name]["path"], "threads": opts.threads,
                       "timing": opts.timing}
                if s == "tvm":
                    job.update(work_dir=str(_tvm_dir(opts, wl)), mcpu=host_cpu_name())
                    res = _tvm_job(job, opts.threads, timeout=TIMING_TIMEOUT)
                else:
                    if s == "ours":
                        job["log"] = str(_ours_paths(opts, wl)[0])
                    res = _suite_job(job, opts.threads, timeout=TIMING_TIMEOUT,
                                     env=compile_env if s == "torch_compile" else None)
                res["round"] = r + 1
                raw[wl.name][s].append(res)
                if "seconds" not in res:
                    dead[(wl.name, s)] = res  # skipped or failed: not timed again
        say(opts, f"timing round {r + 1}/{opts.rounds} done")
    return {"raw": raw, "dead": dead}


def _status(results: list, dead: dict | None) -> str:
    if dead is not None and "seconds" not in dead:
        if "skipped" in dead:
            return f"unavailable: {dead['skipped']}"
        if "unavailable" in dead:
            return f"unavailable: {dead['unavailable']}"
        return f"error: {dead.get('error', '?')}"
    if not results:
        return "not run"
    return "ok"


def summarize(opts: Options, tuning: dict, timed: dict, refs: dict) -> dict:
    workloads = {}
    for wl in opts.workloads:
        flop = refs[wl.name].get("flop")
        systems = {}
        for s, results in timed["raw"][wl.name].items():
            status = _status(results, timed["dead"].get((wl.name, s)))
            entry: dict = {"status": status, "rounds": results}
            if status == "ok":
                sec = statistics.median(x["seconds"] for x in results)
                entry["seconds"] = sec
                entry["ms"] = sec * 1e3
                entry["gflops"] = flop / sec / 1e9 if flop else None
                entry["round_seconds"] = [x["seconds"] for x in results]
            systems[s] = entry
        ours = systems.get("ours", {}).get("seconds")
        peers = {s: e["seconds"] for s, e in systems.items() if s != "ours" and "seconds" in e}
        best_peer = min(peers, key=peers.get) if peers else None
        workloads[wl.name] = {
            "label": wl.label, "workload": wl.workload, "args": list(wl.args),
            "flop": flop, "unit": "ms" if wl.memory_bound else "GFLOPS",
            "systems": systems, "tuning": tuning.get(wl.name, {}),
            "best_peer": best_peer,
            "ours_over_best_peer": (peers[best_peer] / ours if ours and best_peer else None),
        }
    return workloads


def compute_references(opts: Options, tmp: Path) -> dict:
    refs = {}
    for wl in opts.workloads:
        path = tmp / f"{wl.name}.npy"
        res = _suite_job({"job": "ref", "workload": wl.workload, "args": list(wl.args),
                          "ref": str(path)}, opts.threads, timeout=TIMING_TIMEOUT)
        refs[wl.name] = dict(res, path=str(path))
    return refs


def run_suite(opts: Options) -> dict:
    opts.out.mkdir(parents=True, exist_ok=True)
    info = timing.machine_info()
    tvm_info = probe_tvm(opts) if opts.tvm else {"unavailable": "disabled (--no-tvm)"}
    info["versions"]["tvm"] = tvm_info.get("tvm")
    info["versions"]["tvm_ffi"] = tvm_info.get("tvm_ffi")
    info["versions"]["tvm_llvm"] = tvm_info.get("llvm")
    if "unavailable" in tvm_info and opts.tvm:
        say(opts, f"TVM: unavailable: {tvm_info['unavailable']}")
    t0 = time.time()
    tuning = tune_all(opts, tvm_info)
    tuning_s = time.time() - t0
    with tempfile.TemporaryDirectory(prefix="ansor-bench-ref-") as tmp:
        refs = compute_references(opts, Path(tmp))
        timed = time_all(opts, tuning, tvm_info, refs)
    report = {
        "suite": "ansor-py benchmark suite (issue 8)",
        **info,
        "settings": {"trials": opts.trials, "threads": opts.threads, "rounds": opts.rounds,
                     "timing": opts.timing, "seed": opts.seed, "per_round": opts.per_round,
                     "systems": _systems(opts), "dtype": "float32", "batch": 1,
                     "log_dir": str(opts.log_dir), "input_seed": INPUT_SEED},
        "tvm": tvm_info,
        "tuning_wall_seconds_this_run": tuning_s,
        "workloads": summarize(opts, tuning, timed, refs),
    }
    (opts.out / "suite.json").write_text(json.dumps(report, indent=1))
    md = render_markdown(report)
    (opts.out / "suite.md").write_text(md)
    png = plot_suite(report, opts.out / "suite.png")
    print(md)
    print(f"JSON: {opts.out / 'suite.json'}\nMarkdown: {opts.out / 'suite.md'}")
    print(f"PNG: {png}" if isinstance(png, Path) else f"PNG: not written ({png})")
    return report


# ---- reports ------------------------------------------------------------------------------------

def _fmt_figure(entry: dict, unit: str) -> str:
    if "seconds" not in entry:
        return "-"
    if unit == "ms":
        ms = entry["ms"]
        return f"{ms:.3f} ms" if ms < 10 else f"{ms:.1f} ms"
    g = entry.get("gflops")
    return "-" if g is None else f"{g:.1f}"


def _fmt_spt(t: dict) -> str:
    v = t.get("seconds_per_trial") if isinstance(t, dict) else None
    return "-" if v is None else f"{v:.2f}"


def render_markdown(report: dict) -> str:
    st = report["settings"]
    tm = st["timing"]
    systems = st["systems"]
    peers = [s for s in systems if s != "ours"]
    lines = [
        "## ansor-py benchmark suite",
        "",
        f"{report['cpu']} ({report['machine']}, LLVM CPU `{report['llvm_cpu']}`), "
        f"{st['threads']} thread(s), float32, batch 1, {st['trials']} tuning trials per tuner; "
        f"{report['date']}.",
        "",
        f"Each system runs in a fresh process, systems alternate over {st['rounds']} round(s) "
        f"and the figure is the median over rounds of the median of {tm['repeat']} repeats "
        f"of >= {tm['min_repeat_ms']:g} ms (after {tm['warmup_s']:g} s of warm-up), on random "
        "inputs, each output checked against the numpy reference first. "
        "**Units: GFLOPS (higher is better) in rows marked [GFLOPS], milliseconds per call "
        "(lower is better) in rows marked [ms]** (softmax and layer norm: their FLOP counts are "
        "tiny). FLOPs are counted once per workload (`ComputeDAG.flop_count`) and used for "
        "every system. *ours / best peer* = the fastest peer's time / our time (> 1: ours is "
        "faster). Tuning s/trial = tuning wall time / trials measured.",
        "",
    ]
    head = (["workload [unit]", "ours"] + [SYSTEM_LABELS[s] for s in peers]
            + ["ours / best peer", "our tuning s/trial"]
            + (["TVM s/trial"] if "tvm" in systems else []))
    lines.append("| " + " | ".join(head) + " |")
    lines.append("| --- " + "| ---: " * (len(head) - 1) + "|")
    notes: dict = {}
    for name, w in report["workloads"].items():
        unit = w["unit"]
        row = [f"{w['label']} [{unit}]"]
        for s in systems:
            e = w["systems"].get(s, {})
            row.append(_fmt_figure(e, unit))
            if e.get("status", "ok") != "ok":
                notes.setdefault((s, e["status"]), []).append(name)
        ratio = w.get("ours_over_best_peer")
        best = w.get("best_peer")
        row.append(f"{ratio:.2f} ({SYSTEM_LABELS[best]})" if ratio else "-")
        row.append(_fmt_spt(w["tuning"].get("ours", {})))
        if "tvm" in systems:
            row.append(_fmt_spt(w["tuning"].get("tvm", {})))
        lines.append("| " + " | ".join(row) + " |")
    if notes:
        lines += ["", "Not measured:", ""]
        for (s, status), names in notes.items():
            lines.append(f"- {SYSTEM_LABELS.get(s, s)} on {', '.join(names)}: {status}")
    v = report["versions"]
    vers = ", ".join(f"{k} {v[k]}" for k in ("python", "numpy", "torch", "tvm", "tvm_ffi",
                                             "llvmlite", "llvm", "tvm_llvm") if v.get(k))
    lines += ["", f"Versions: {vers}.", ""]
    return "\n".join(lines)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_suite(report: dict, path: Path) -> Path | str:
    """Grouped bars: each system's speed relative to the fastest system on each workload."""
    plt = _pyplot()
    if plt is None:
        return "matplotlib is not installed (pip install 'ansor-py[plot]')"
    systems = report["settings"]["systems"]
    names = list(report["workloads"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(names) + 3), 4.5))
    width = 0.8 / len(systems)
    for k, s in enumerate(systems):
        vals = []
        for n in names:
            secs = {x: e["seconds"] for x, e in report["workloads"][n]["systems"].items()
                    if "seconds" in e}
            vals.append(min(secs.values()) / secs[s] if s in secs else 0.0)
        xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(names))]
        ax.bar(xs, vals, width, label=SYSTEM_LABELS[s])
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([report["workloads"][n]["label"] for n in names], rotation=30,
                       ha="right", fontsize=8)
    ax.set_ylabel("speed relative to the fastest system")
    st = report["settings"]
    ax.set_title(f"ansor-py vs peers: {report['cpu']}, {st['threads']} thread(s), "
                 f"{st['trials']} trials", fontsize=9)
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.set_ylim(0, 1.25)
    ax.legend(fontsize=8, ncol=len(systems), loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---- tuning curves ------------------------------------------------------------------------------

def run_curve(opts: Options) -> dict:
    """Tune (resuming the logs) and plot best GFLOPS against trials and seconds, us and TVM."""
    opts.out.mkdir(parents=True, exist_ok=True)
    info = timing.machine_info()
    tvm_info = probe_tvm(opts) if opts.tvm else {"unavailable": "disabled (--no-tvm)"}
    tuning = tune_all(opts, tvm_info)
    out = {}
    for wl in opts.workloads:
        flop = float(make_dag(wl.workload, wl.args).flop_count)
        curves: dict = {"ours": ours_curve(*_ours_paths(opts, wl), wl)}
        if "unavailable" in tuning[wl.name].get("tvm", {"unavailable": "-"}):
            curves["tvm"] = {"unavailable": tuning[wl.name].get("tvm", {}).get("unavailable")}
        else:
            from .peers_tvm import tvm_curve  # reads TVM's files only: no TVM import

            curves["tvm"] = tvm_curve(_tvm_dir(opts, wl), flop)
        data = {"workload": wl.name, "label": wl.label, "registered": wl.workload,
                "args": list(wl.args), "flop": flop, "trials": opts.trials,
                "threads": opts.threads, **info, "tvm_versions": tvm_info,
                "tuning": tuning[wl.name], "curves": curves}
        jpath = opts.out / f"curve_{wl.name}.json"
        jpath.write_text(json.dumps(data, indent=1))
        png = plot_curve(data, opts.out / f"curve_{wl.name}.png")
        print(f"{wl.name}: " + "; ".join(
            f"{SYSTEM_LABELS[s]} best {_last(c.get('best_gflops')):.1f} GFLOPS after "
            f"{len(c['trials'])} trials, {c['seconds'][-1]:.0f} s" if c.get("trials")
            else f"{SYSTEM_LABELS[s]}: {c.get('unavailable', 'no trials')}"
            for s, c in curves.items()))
        print(f"JSON: {jpath}\n" + (f"PNG: {png}" if isinstance(png, Path)
                                     else f"PNG: not written ({png})"))
        out[wl.name] = data
    return out


def _last(vals: Sequence[float | None] | None) -> float:
    for v in reversed(vals or []):
        if v is not None:
            return v
    return float("nan")


def plot_curve(data: dict, path: Path) -> Path | str:
    plt = _pyplot()
    if plt is None:
        return "matplotlib is not installed (pip install 'ansor-py[plot]')"
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for s, c in data["curves"].items():
        if not c.get("trials"):
            continue
        ys = [0.0] + [v or 0.0 for v in c["best_gflops"]]  # nothing found before the first trial
        kw = dict(label=SYSTEM_LABELS[s], drawstyle="steps-post")
        a1.plot([0] + c["trials"], ys, **kw)
        a2.plot([0.0] + c["seconds"], ys, **kw)
    a1.set_xlabel("trials")
    a2.set_xlabel("tuning wall-clock seconds")
    for a in (a1, a2):
        a.set_ylabel("best GFLOPS so far")
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle(f"{data['label']}: tuning curves ({data['cpu']}, {data['threads']} "
                 "thread(s))", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ---- command line -------------------------------------------------------------------------------

def default_out() -> Path:
    """``benchmarks/results/suite`` of the source checkout this package runs from, else
    ``./ansor-bench`` (an installed copy has no benchmarks directory)."""
    repo = Path(__file__).resolve().parents[2]
    if (repo / "benchmarks").is_dir() and (repo / "pyproject.toml").is_file():
        return repo / "benchmarks" / "results" / "suite"
    return Path("ansor-bench")


def build_parser(prog: str = "ansor bench") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--workloads", help="comma-separated suite workloads (default: all; see "
                    "--list) or WORKLOAD:ARGS items separated by ';' (matmul:64,64,64)")
    ap.add_argument("--trials", type=argtypes.count(0), default=200,
                    help="tuning trials per tuner and "
                    "workload (default 200); existing logs count")
    ap.add_argument("--log-dir", help="tuning logs, reused across runs (default OUT/logs)")
    ap.add_argument("--out", help=f"output directory (default {default_out()})")
    ap.add_argument("--threads", type=argtypes.count(1), default=2,
                    help="threads for every system (default 2)")
    ap.add_argument("--rounds", type=argtypes.count(1), default=5, help="timing rounds (default 5)")
    ap.add_argument("--no-tvm", action="store_true", help="leave TVM MetaSchedule out")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--curve", action="store_true", help="tuning curves instead of the table")
    ap.add_argument("--seed", type=argtypes.seed, help="seed for both tuners")
    ap.add_argument("--per-round", type=argtypes.count(1), default=64,
                    help="measurements per tuning round, both tuners (default 64)")
    ap.add_argument("--repeat", type=argtypes.count(1), default=timing.DEFAULT_REPEAT,
                    help=f"timed repeats per measurement (default {timing.DEFAULT_REPEAT})")
    ap.add_argument("--min-repeat-ms", type=argtypes.nonnegative(MAX_TIMEOUT_S * 1e3),
                    default=timing.DEFAULT_MIN_REPEAT_MS,
                    help=f"minimum length of a repeat (default {timing.DEFAULT_MIN_REPEAT_MS:g})")
    ap.add_argument("--warmup", type=argtypes.nonnegative(MAX_TIMEOUT_S),
                    default=timing.DEFAULT_WARMUP_S,
                    help=f"warm-up seconds before timing (default {timing.DEFAULT_WARMUP_S:g})")
    ap.add_argument("--list", action="store_true", help="list the suite's workloads")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "ansor bench") -> int:
    ap = build_parser(prog)
    ns = ap.parse_args(argv)
    if ns.worker:
        timing.emit_result(worker(json.loads(ns.worker)))
        return 0
    if ns.list:
        for w in SUITE:
            print(f"{w.name:<18} {w.label:<36} {w.workload}{w.args}")
        return 0
    try:
        workloads = parse_workloads(ns.workloads)
    except SystemExit as err:  # a bad --workloads is a usage error: exit 2, as argparse's are
        if not isinstance(err.code, str):
            raise
        ap.error(f"argument --workloads: {err.code.split(': ', 1)[-1]}")
    out = Path(ns.out) if ns.out else default_out()
    opts = Options(workloads=workloads, out=out,
                   log_dir=Path(ns.log_dir) if ns.log_dir else out / "logs",
                   trials=ns.trials, threads=ns.threads, rounds=ns.rounds, tvm=not ns.no_tvm,
                   torch_compile=not ns.no_compile, seed=ns.seed, per_round=ns.per_round,
                   timing={"repeat": ns.repeat, "min_repeat_ms": ns.min_repeat_ms,
                           "warmup_s": ns.warmup},
                   curve=ns.curve, quiet=ns.quiet)
    if opts.curve:
        run_curve(opts)
        return 0
    report = run_suite(opts)
    ok = all(w["systems"].get("ours", {}).get("status") == "ok"
             for w in report["workloads"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
