"""The ``ansor`` command line.

``ansor`` with no arguments runs the built-in default job (what the README's quick start shows);
``ansor workloads`` lists the operator library; ``ansor build NAME --args ...`` compiles a workload's
default schedule, checks it against the numpy reference and times it.
"""
from __future__ import annotations

import argparse
import ast
import sys
import time
from typing import Sequence

import numpy as np


def _parse_args_tuple(text: str | None) -> tuple | None:
    """``1024,1024,1024`` or ``(4, 5), (5,)`` -> a tuple of Python literals (never executes code)."""
    if text is None:
        return None
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError) as err:
        raise SystemExit(f"ansor: --args {text!r} is not a comma-separated list of numbers/tuples "
                         f"({err.__class__.__name__})") from None
    return tuple(value)


def _fmt_time(sec: float) -> str:
    if sec >= 1:
        return f"{sec:.2f} s"
    if sec >= 1e-3:
        return f"{sec * 1e3:.3f} ms"
    return f"{sec * 1e6:.1f} us"


def _check_and_time(name: str, tensors: list, label: str) -> dict:
    import ansor
    from compute import reference
    from compute.tensor import ComputeOp

    dag = ansor.ComputeDAG(tensors)
    t0 = time.perf_counter()
    kernel = ansor.build(dag)
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
    print(f"  {label:<38} build {build_s:6.2f} s | run {_fmt_time(sec):>10} | {gf:7.2f} GFLOPS | "
          f"{'matches reference' if ok else 'MISMATCH'}")
    return {"name": name, "ok": ok, "seconds": sec, "gflops": gf, "build_seconds": build_s}


def cmd_default(_: argparse.Namespace) -> int:
    """Build the default schedules of a GEMM and a ResNet conv2d, check them and time them."""
    from compute.ops import workloads as W
    from measure.runtime import num_threads

    print(f"ansor-py default job: default schedules (no tuning yet), {num_threads()} thread(s)")
    results = [
        _check_and_time("matmul", W.matmul(512, 512, 512), "matmul 512x512x512"),
        _check_and_time("conv2d", W.conv2d_nhwc(1, 56, 56, 64, 64, 3, 3, 1, 1),
                        "conv2d NHWC 1x56x56x64 -> 64, 3x3"),
    ]
    a = np.random.rand(512, 512).astype("float32")
    b = np.random.rand(512, 512).astype("float32")
    a @ b
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    np_sec = float(np.median(times))
    print(f"  {'numpy a @ b (OpenBLAS) 512^3':<38} {'':>14} | run {_fmt_time(np_sec):>10} | "
          f"{2 * 512 ** 3 / np_sec / 1e9:7.2f} GFLOPS")
    print(f"  default-schedule matmul runs at {np_sec / results[0]['seconds']:.3f}x numpy: this is "
          "the starting point the schedules and the search improve on")
    return 0 if all(r["ok"] for r in results) else 1


def cmd_workloads(_: argparse.Namespace) -> int:
    from compute.ops import WORKLOADS

    for name, spec in WORKLOADS.items():
        args = ",".join(map(str, spec.default_args))
        print(f"{name:<24} {spec.description}  (default --args {args})")
    return 0


def cmd_build(ns: argparse.Namespace) -> int:
    from compute.ops import get_workload

    try:
        spec = get_workload(ns.workload)
    except KeyError as err:
        print(f"ansor: {err.args[0]}", file=sys.stderr)
        return 2
    args = _parse_args_tuple(ns.args) or spec.default_args
    try:
        tensors = spec.func(*args)
    except (TypeError, ValueError) as err:
        print(f"ansor: {ns.workload}{args}: {err}", file=sys.stderr)
        return 2
    r = _check_and_time(ns.workload, tensors, f"{ns.workload}{args}")
    return 0 if r["ok"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ansor", description="Template-free auto-scheduler for "
                                     "tensor programs on x86 CPUs. With no command: the default job.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("workloads", help="list the operator library's workloads")
    p = sub.add_parser("build", help="build a workload's default schedule, check it and time it")
    p.add_argument("workload")
    p.add_argument("--args", help="shape arguments, e.g. 1024,1024,1024 (default: the workload's)")
    ns = parser.parse_args(argv)
    handlers = {None: cmd_default, "workloads": cmd_workloads, "build": cmd_build}
    return handlers[ns.command](ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
