"""``ansor network ...``: list the zoo, show a network's tasks, compile and run a network, export
it as a shared library (``network_export``) and ``ops``: the supported ONNX operators
(``network_ops``).

MODEL is a zoo name (``ansor network list``) or a path to an ``.onnx`` file. ``register(sub)``
adds the ``network`` command to an argparse subparsers object; ``main(argv)`` runs it alone.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

import numpy as np

from ansor import argtypes

from . import network_export, network_tune, options
from .common import check_log, load_model, model_options, print_table
from measure.runtime import num_threads
from . import network_ops


def _cmd_list(args: argparse.Namespace) -> int:
    from ansor import networks

    for name in networks.list_networks():
        print(name)
    return 0


def _cmd_tasks(args: argparse.Namespace) -> int:
    from ansor.graph.plan import extract_tasks

    g = load_model(args)
    tasks, weights = extract_tasks(g)
    n_separate = len(tasks)
    if getattr(args, "fuse_pairs", False):
        from ansor.graph.plan import plan_network  # noqa: PLC0415 - start-up time
        from ansor.graph.two_anchor import pair_candidates, pair_tasks  # noqa: PLC0415

        plan = plan_network(g)
        more, more_w = pair_tasks(plan.graph, pair_candidates(plan.graph, plan.groups))
        tasks, weights = tasks + more, weights + more_w
    total = sum(t.flop_count * w for t, w in zip(tasks[:n_separate], weights)) or 1.0
    rows = [("ID", "subgraph", "weight", "MFLOP", "share")]
    for i, (t, w) in enumerate(zip(tasks, weights)):
        rows.append((str(i), t.desc, str(w), f"{t.flop_count / 1e6:.2f}", f"{100 * t.flop_count * w / total:.1f}%"))
    print_table(rows)
    print(f"{n_separate} tasks, {sum(weights[:n_separate])} subgraphs, {total / 1e9:.3f} GFLOP per inference"
          + (f"; {len(tasks) - n_separate} fused pair task(s) beside them (share: of the separate network)"
             if len(tasks) > n_separate else ""))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ansor.graph import run as reference_run
    from ansor.graph.executor import compile_network
    from ansor.graph.ir_types import numpy_dtype
    from ansor.graph.memory_plan import check_graph_memory

    g = load_model(args)
    check_log(args.log)
    # The module and the numpy reference it is checked against live at once: size both first.
    check_graph_memory(g, compiled=True, reference=True)
    t0 = time.perf_counter()
    try:
        lib = compile_network(g, log_file=args.log, strict=args.strict,
                              layout_rewrite=not args.no_layout_rewrite,
                              layouts=None if args.nhwc else "auto", untuned=args.untuned,
                              target=args.target)
    except ValueError as err:  # --untuned guess without a pre-trained model
        print(f"ansor network run: {err}", file=sys.stderr)
        return 2
    transforms = lib.num_layout_transforms
    print(f"compiled {lib.num_kernels} kernels in {time.perf_counter() - t0:.1f} s"
          + (f" ({transforms} layout transform(s), layouts chosen by layout tuning)" if transforms else ""))
    rng = np.random.default_rng(0)
    # Inputs in the dtype a caller gives (float16 for a half-precision model: through the boundary).
    x = {n: rng.standard_normal(t.shape).astype(numpy_dtype(g.boundary_dtype(n))) for n, t in g.inputs.items()}
    out, ref = lib.run(x), reference_run(g, x)
    worst, problems, warnings = compare_outputs(out, ref)
    print(f"max error against the numpy reference (relative to the largest output): {worst:.2e}")
    if worst > 1e-3:
        problems.append(f"max error {worst:.2e} is above the tolerance of 1e-3")
    for line in warnings:
        print(f"ansor network run: warning: {line}", file=sys.stderr)
    for line in problems:
        print(f"ansor network run: {line}", file=sys.stderr)
    b = lib.benchmark()
    print(f"ansor: {b['mean'] * 1e3:.3f} ms per inference in this process (executor overhead "
          f"{b['overhead'] * 1e6:.1f} us, {100 * b['overhead_share']:.2f}%)")
    if problems:
        return 1
    if args.rounds > 0:
        _compare(args, num_threads())
    return 0


def compare_outputs(out: dict[str, np.ndarray], ref: dict[str, np.ndarray]
                    ) -> tuple[float, list[str], list[str]]:
    """The largest error of ``out`` against ``ref`` over the values finite in both, relative to
    the largest finite reference value; one line per output whose NaN/inf values differ from the
    reference's (failures: ``max(nan, ...)`` used to pass the gate, a NaN output exited 0); and
    one warning per output with NaN/inf in both, which the error does not cover."""
    worst, problems, warnings = 0.0, [], []
    for k, r in ref.items():
        o = np.asarray(out[k])
        fin_o, fin_r = np.isfinite(o), np.isfinite(r)
        with np.errstate(invalid="ignore"):
            same = (o == r) | (np.isnan(o) & np.isnan(r))
        bad = int(np.count_nonzero(fin_r & ~fin_o))
        differ = int(np.count_nonzero(~fin_r & ~same))
        both_bad = int(np.count_nonzero(~fin_r & ~fin_o & same))
        if bad:
            problems.append(f"output {k}: {bad} of {o.size} value(s) are NaN or inf where the numpy "
                            f"reference is finite")
        if differ:
            problems.append(f"output {k}: {differ} value(s) are finite or differ where the numpy "
                            f"reference is NaN or inf")
        if both_bad:
            warnings.append(f"output {k}: {both_bad} of {o.size} value(s) are NaN or inf in the numpy "
                            f"reference too (the network overflows); the error covers only finite values")
        both = fin_o & fin_r
        if both.any():
            scale = float(np.abs(r[both]).max()) or 1.0
            worst = max(worst, float(np.abs(o[both].astype(np.float64) - r[both]).max()) / scale)
    return worst, problems, warnings


def _compare(args: argparse.Namespace, threads: int) -> None:
    """Latency beside onnxruntime and PyTorch eager (those installed), fresh processes, alternating."""
    import importlib.util

    from ansor.bench.network_compare import compare_network

    systems = ["ansor"] + [s for s, mod in (("onnxruntime", "onnxruntime"), ("torch", "torch"))
                           if importlib.util.find_spec(mod) is not None]
    missing = [s for s in ("onnxruntime", "torch") if s not in systems]
    opts = model_options(args)
    print(f"timing {', '.join(systems)}: {threads} thread(s), a fresh process each, "
          f"{args.rounds} alternating round(s), median ...", flush=True)
    res = compare_network(args.model, opts, systems, threads=threads, rounds=args.rounds, log=args.log,
                          untuned=args.untuned)
    ours = res["ansor"]["seconds"]
    rows = [("system", "latency (ms)", "ansor's speed-up")]
    for s in systems:
        r = res[s]
        if r["seconds"] is None:
            rows.append((s, "-", r.get("error", "no result")))
            continue
        ratio = "" if ours is None or s == "ansor" else f"{r['seconds'] / ours:.2f}x"
        rows.append((s, f"{r['seconds'] * 1e3:.3f}", ratio))
    print_table(rows)
    for m in missing:
        print(f"{m}: not installed (pip install -e '.[compare]')")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``network {list, tasks, run, tune, export, ops}`` to ``subparsers``."""
    p = subparsers.add_parser("network", help="whole networks: list the zoo, show tasks, compile and run")
    sub = p.add_subparsers(dest="network_command", required=True)
    sub.add_parser("list", help="the zoo's network names").set_defaults(func=_cmd_list)
    for name, fn, help_ in (("tasks", _cmd_tasks, "the tuning tasks of MODEL (id, subgraph, weight, FLOPs)"),
                            ("run", _cmd_run, "compile MODEL, check it against the reference, time it")):
        q = sub.add_parser(name, help=help_)
        options.add_model_options(q)
        if name == "tasks":
            q.add_argument("--fuse-pairs", action="store_true",
                           help="also list the fused pair tasks 'network tune --fuse-pairs' tunes "
                                "('conv1x1+dwconv3x3 1x28x28x144')")
        if name == "run":
            q.add_argument("--log", default=None, help="tuning records to take schedules from")
            options.add_threads_option(q)
            options.add_target_option(q)
            q.add_argument("--strict", action="store_true", help="fail if a task has no record")
            q.add_argument("--no-layout-rewrite", action="store_true",
                           help="compile without weight layout rewrite: a kernel that packs a weight "
                                "copies it on every run instead of reading it packed at compile time")
            q.add_argument("--untuned", choices=("rules", "guess"), default="rules",
                           help="a task without a record: the rule-based schedule (default) or the "
                                "pre-trained cost model's zero-trial pick (SearchTask.best_guess)")
            q.add_argument("--nhwc", action="store_true",
                           help="ignore the layouts chosen by 'network tune --layout-tuning' "
                                "(LOG.layouts.jsonl): every group runs NHWC")
            q.add_argument("--rounds", type=argtypes.rounds(0), default=3,
                           help="rounds of the latency comparison with onnxruntime and PyTorch "
                                "(fresh processes, alternating; 0: skip it)")
        q.set_defaults(func=fn)
    network_tune.add_parser(sub)
    network_export.add_parser(sub)
    network_ops.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``ansor network ...`` on its own (argv without the leading ``network``)."""
    parser = argparse.ArgumentParser(prog="ansor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(options.verbose_alias(["network", *(sys.argv[1:] if argv is None else argv)]))
    with options.threads_env(getattr(args, "threads", None)):
        return int(args.func(args))
