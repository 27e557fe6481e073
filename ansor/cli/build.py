"""``ansor`` (no command: the default job), ``ansor workloads`` and ``ansor build``: build
schedules, check them against the numpy reference and time them.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import ansor
from ansor import argtypes
from ansor.hand_schedules import conv2d_schedule, gemm_schedule
from compute import reference
from compute.ops import WORKLOADS, get_workload
from compute.ops import workloads as W
from compute.tensor import ComputeOp
from measure.runtime import num_threads
from sketch.loop_state import State

from . import numpy_matmul
from .common import check_workload_memory, fmt_time
from .options import add_target_option, add_threads_option


def _check_and_time(target, label: str, cpu: str | None = None) -> dict:
    """Build ``target`` (tensors, DAG or State) for ``cpu`` (a target name; default native),
    check it against the reference and time it."""
    dag = target.dag if isinstance(target, State) else ansor.ComputeDAG(target)
    check_workload_memory(dag, label, reference=True)
    t0 = time.perf_counter()
    kernel = ansor.build(target if isinstance(target, State) else dag, cpu=cpu)
    build_s = time.perf_counter() - t0
    inputs = reference.random_inputs(dag, seed=0)
    it = iter(inputs)
    args = [np.zeros(t.shape, t.dtype) if isinstance(t.op, ComputeOp) else next(it) for t in dag.tensors]
    kernel(*args)
    expected = reference.evaluate(dag, inputs)
    outs = [a for a, t in zip(args, dag.tensors) if isinstance(t.op, ComputeOp)]
    ok = all(np.allclose(o, e, rtol=1e-4, atol=1e-4) for o, e in zip(outs, expected))
    sec = kernel.benchmark(*args, repeat=5, min_repeat_ms=100)
    flops = dag.flop_count
    gf = flops / sec / 1e9 if flops else 0.0
    print(f"  {label:<44} build {build_s:5.2f} s | {fmt_time(sec):>10} | {gf:7.1f} GFLOPS | "
          f"{'matches reference' if ok else 'MISMATCH'}", flush=True)
    return {"ok": ok, "seconds": sec, "gflops": gf, "build_seconds": build_s}


def cmd_default(_: argparse.Namespace) -> int:
    """A GEMM and a ResNet conv2d: default schedule, hand-written schedule, numpy."""
    n = 512
    print(f"ansor-py default job ({num_threads()} thread(s)): default schedules vs schedules written "
          "with transform steps (ansor.hand_schedules), each checked against the numpy reference",
          flush=True)
    g0 = _check_and_time(W.matmul(n, n, n), f"matmul {n}^3, default schedule")
    g1 = _check_and_time(gemm_schedule(n, n, n)[1], f"matmul {n}^3, hand-written schedule")
    np_sec = numpy_matmul.median_seconds(n)
    print(f"  {f'numpy a @ b (OpenBLAS) {n}^3':<44} {'':>13} | {fmt_time(np_sec):>10} | "
          f"{2 * n ** 3 / np_sec / 1e9:7.1f} GFLOPS")
    c0 = _check_and_time(W.conv2d_nhwc(1, 56, 56, 64, 64, 3, 3, 1, 1), "conv2d NHWC 56x56x64->64 3x3, default")
    c1 = _check_and_time(conv2d_schedule()[1], "conv2d NHWC 56x56x64->64 3x3, hand-written")
    print(f"speed-up of the schedules over the default: matmul {g0['seconds'] / g1['seconds']:.0f}x, "
          f"conv2d {c0['seconds'] / c1['seconds']:.0f}x; matmul vs numpy: "
          f"{np_sec / g1['seconds']:.2f}x numpy's speed")
    return 0 if all(r["ok"] for r in (g0, g1, c0, c1)) else 1


def cmd_workloads(_: argparse.Namespace) -> int:
    for name, spec in WORKLOADS.items():
        args = ",".join(map(str, spec.default_args))
        print(f"{name:<24} {spec.description}  (default --args {args})")
    return 0


def cmd_build(ns: argparse.Namespace) -> int:
    try:
        spec = get_workload(ns.workload)
    except KeyError as err:
        print(f"ansor: {err.args[0]}", file=sys.stderr)
        return 2
    args = ns.args or spec.default_args
    try:
        tensors = spec.func(*args)
    except (TypeError, ValueError) as err:
        print(f"ansor: {ns.workload}{args}: {err}", file=sys.stderr)
        return 2
    r = _check_and_time(tensors, f"{ns.workload}{args}", cpu=ns.target)
    return 0 if r["ok"] else 1


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``ansor workloads`` and ``ansor build``."""
    sub.add_parser("workloads", help="list the operator library's workloads")
    p = sub.add_parser("build", help="build a workload's default schedule, check it and time it")
    p.add_argument("workload")
    p.add_argument("--args", type=argtypes.shape_args,
                   help="shape arguments, e.g. 1024,1024,1024 (default: the workload's)")
    add_threads_option(p)
    add_target_option(p)
