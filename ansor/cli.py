"""The ``ansor`` command line.

``ansor`` with no arguments runs the built-in default job (what the README's quick start shows);
``ansor workloads`` lists the operator library; ``ansor build NAME --args ...`` compiles a workload's
default schedule, checks it against the numpy reference and times it; ``ansor records ...``
summarises, distills and re-measures tuning logs.
"""
from __future__ import annotations

import argparse
import ast
import os
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


def _check_and_time(target, label: str) -> dict:
    """Build ``target`` (tensors, DAG or State), check it against the reference and time it."""
    import ansor
    from compute import reference
    from compute.tensor import ComputeOp
    from sketch.loop_state import State

    dag = target.dag if isinstance(target, State) else ansor.ComputeDAG(target)
    t0 = time.perf_counter()
    kernel = ansor.build(target if isinstance(target, State) else dag)
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
    print(f"  {label:<44} build {build_s:5.2f} s | {_fmt_time(sec):>10} | {gf:7.1f} GFLOPS | "
          f"{'matches reference' if ok else 'MISMATCH'}", flush=True)
    return {"ok": ok, "seconds": sec, "gflops": gf, "build_seconds": build_s}


def _numpy_matmul_seconds(n: int) -> float:
    a = np.random.rand(n, n).astype("float32")
    b = np.random.rand(n, n).astype("float32")
    t_end = time.perf_counter() + 0.3  # warm the cores up, as Kernel.benchmark does
    while time.perf_counter() < t_end:
        a @ b
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(10):
            a @ b
        times.append((time.perf_counter() - t0) / 10)
    return float(np.median(times))


def cmd_default(_: argparse.Namespace) -> int:
    """A GEMM and a ResNet conv2d: default schedule, hand-written schedule, numpy."""
    from ansor.hand_schedules import conv2d_schedule, gemm_schedule
    from compute.ops import workloads as W
    from measure.runtime import num_threads

    n = 512
    print(f"ansor-py default job ({num_threads()} thread(s)): default schedules vs schedules written "
          "with transform steps (ansor.hand_schedules), each checked against the numpy reference",
          flush=True)
    g0 = _check_and_time(W.matmul(n, n, n), f"matmul {n}^3, default schedule")
    g1 = _check_and_time(gemm_schedule(n, n, n)[1], f"matmul {n}^3, hand-written schedule")
    np_sec = _numpy_matmul_seconds(n)
    print(f"  {f'numpy a @ b (OpenBLAS) {n}^3':<44} {'':>13} | {_fmt_time(np_sec):>10} | "
          f"{2 * n ** 3 / np_sec / 1e9:7.1f} GFLOPS")
    c0 = _check_and_time(W.conv2d_nhwc(1, 56, 56, 64, 64, 3, 3, 1, 1), "conv2d NHWC 56x56x64->64 3x3, default")
    c1 = _check_and_time(conv2d_schedule()[1], "conv2d NHWC 56x56x64->64 3x3, hand-written")
    print(f"speed-up of the schedules over the default: matmul {g0['seconds'] / g1['seconds']:.0f}x, "
          f"conv2d {c0['seconds'] / c1['seconds']:.0f}x; matmul vs numpy: "
          f"{np_sec / g1['seconds']:.2f}x numpy's speed")
    return 0 if all(r["ok"] for r in (g0, g1, c0, c1)) else 1


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
    r = _check_and_time(tensors, f"{ns.workload}{args}")
    return 0 if r["ok"] else 1


def _records_show(ns: argparse.Namespace) -> int:
    from ansor.records import summarize

    rows = summarize(ns.log)
    print(f"{ns.log}: {len(rows)} workload(s), {sum(r.n_records for r in rows)} record(s)")
    width = max([len("workload")] + [len(r.desc) for r in rows])
    print(f"{'workload':<{width}}  {'records':>7}  {'valid':>6}  {'best ms':>11}  {'GFLOPS':>8}")
    for r in rows:
        best = "-" if r.best_cost is None else f"{r.best_cost * 1e3:.4f}"
        gf = ("-" if r.gflops is None else f"{r.gflops:.2f}" if r.gflops >= 0.01
              else f"{r.gflops:.1e}")
        note = "" if r.n_targets <= 1 else f"  ({r.n_targets} toolchains)"
        print(f"{r.desc:<{width}}  {r.n_records:>7}  {r.n_valid:>6}  {best:>11}  {gf:>8}{note}")
    return 0


def _records_distill(ns: argparse.Namespace) -> int:
    from ansor.records import distill

    if ns.top_k < 1:
        print(f"ansor: --top-k must be at least 1, got {ns.top_k}", file=sys.stderr)
        return 2
    n = distill(ns.log, ns.output, top_k=ns.top_k)
    print(f"wrote {n} record(s) to {ns.output} (best {ns.top_k} per workload)")
    return 0


def _records_verify(ns: argparse.Namespace) -> int:
    import importlib

    from ansor.records import verify_best

    if ns.imports and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for mod in ns.imports:  # modules that register the user's workloads
        try:
            importlib.import_module(mod)
        except ImportError as err:
            print(f"ansor: --import {mod}: {err}", file=sys.stderr)
            return 2
    rows = verify_best(ns.log, number=ns.number, repeat=ns.repeat)
    if not rows:
        print(f"{ns.log}: no valid records to verify")
        return 1
    width = max([len("workload")] + [len(r.desc) for r in rows])
    print(f"{'workload':<{width}}  {'recorded':>11}  {'re-measured':>11}  {'ratio':>7}")
    ok = True
    for r in rows:
        note = "" if r.same_toolchain else "  (recorded with another toolchain/CPU)"
        if r.measured is None:
            ok = False
            print(f"{r.desc:<{width}}  {_fmt_time(r.recorded):>11}  {'FAILED':>11}  {'-':>7}  "
                  f"{r.error}{note}")
        else:
            print(f"{r.desc:<{width}}  {_fmt_time(r.recorded):>11}  {_fmt_time(r.measured):>11}  "
                  f"{f'{r.ratio:.3g}x':>7}{note}")
    return 0 if ok else 1


def cmd_records(ns: argparse.Namespace) -> int:
    handler = {"show": _records_show, "distill": _records_distill,
               "verify": _records_verify}.get(ns.records_command)
    if handler is None:
        print("ansor records: give a command: show, distill or verify (see --help)",
              file=sys.stderr)
        return 2
    if not os.path.isfile(ns.log):
        print(f"ansor: no record file {ns.log!r}", file=sys.stderr)
        return 2
    return handler(ns)


def _add_records_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("records", help="summarise, distill and re-measure tuning record logs")
    rs = p.add_subparsers(dest="records_command")
    q = rs.add_parser("show", help="one line per workload: records, valid, best time, GFLOPS")
    q.add_argument("log")
    q = rs.add_parser("distill", help="keep the best K valid records of each workload")
    q.add_argument("log")
    q.add_argument("-o", "--output", required=True, help="output log (may be the input)")
    q.add_argument("--top-k", type=int, default=1, help="records kept per workload (default 1)")
    q = rs.add_parser("verify", help="rebuild and re-time each workload's best record in a fresh "
                      "process; print recorded vs re-measured time")
    q.add_argument("log")
    q.add_argument("--number", type=int, default=3, help="runs per timing (default 3)")
    q.add_argument("--repeat", type=int, default=3, help="timings (default 3)")
    q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (to register its workloads); repeatable")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ansor", description="Template-free auto-scheduler for "
                                     "tensor programs on x86 CPUs. With no command: the default job.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("workloads", help="list the operator library's workloads")
    p = sub.add_parser("build", help="build a workload's default schedule, check it and time it")
    p.add_argument("workload")
    p.add_argument("--args", help="shape arguments, e.g. 1024,1024,1024 (default: the workload's)")
    _add_records_parser(sub)
    ns = parser.parse_args(argv)
    handlers = {None: cmd_default, "workloads": cmd_workloads, "build": cmd_build,
                "records": cmd_records}
    return handlers[ns.command](ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
