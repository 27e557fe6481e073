"""``ansor network tune MODEL``: tune a whole network with the task scheduler.

The network is planned once (``plan_network``: fused and lowered) and the plan feeds the tasks,
the layout choice and the final compile. Its tasks share one trial budget (``ansor.TaskScheduler``,
gradient or round-robin); after each round the progress table is printed and the estimated-latency
history is appended beside the log (``F.latency.tsv``, plotted to ``F.latency.png`` when matplotlib is
installed). The run is resumable (run the same command again: the log's records are restored,
nothing is measured twice, the cost model is retrained on them) and Ctrl-C safe (the log keeps
every finished round). It ends with the estimated latency and the measured latency of the network
compiled with the log's best schedules, beside the untuned network, onnxruntime and PyTorch eager
(each in a fresh process, alternating: ``ansor.bench.network_compare``), then writes the network as
one shared library (``--export``, default ``LOG-lib/net.so``; ``network_export``) and prints the two
lines that run it with numpy only. With ``--cluster
ADDRESS`` the candidates are built and measured on a Dask cluster (``ansor.cli.cluster``).
The options shared with ``ansor tune`` (--log, --trials, --timeout, --cost-model, -v/-q, ...)
come from ``ansor.cli.options`` and mean the same here; --cache defaults to network here (warm in
``ansor tune``): every candidate is timed with its weights rotated over what the rest of the
network touches and its activations warm, as the network runs it (``measure.runner``).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time

from ansor import argtypes
from measure.measure import NETWORK

from . import options
from .cluster import RESUME_HINT
from .common import model_options, print_table
from .network_export import export_and_tell
from .options import DEFAULT_PER_ROUND, DEFAULT_TRIALS


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``tune`` to the ``network`` subcommands."""
    q = sub.add_parser("tune", help="tune MODEL's tasks with one trial budget (resumable, Ctrl-C safe)")
    options.add_model_options(q)
    q.add_argument("--strategy", choices=("gradient", "round-robin"), default="gradient",
                   help="which task gets the next round (default: gradient, as Ansor)")
    q.add_argument("--tasks", default=None, metavar="PATTERN",
                   help="tune only tasks whose description matches this glob or regular expression "
                        "(see 'ansor network tasks MODEL'); the others are shown, not tuned")
    q.add_argument("--min-share", type=argtypes.nonnegative(0.999), default=0.0, metavar="X",
                   help="tune only tasks with at least this share of the estimated latency (0.05 = 5%%)")
    q.add_argument("--remeasure-best", type=argtypes.repeat, default=3, metavar="K",
                   help="measurements a task's best needs before it is trusted: an unconfirmed best "
                        "is measured again in later rounds and its cost is the median (default 3; "
                        "1: trust single measurements)")
    q.add_argument("--rounds", type=argtypes.rounds(0), default=3,
                   help="rounds of the final latency comparison: untuned, tuned, onnxruntime and "
                        "PyTorch when installed (fresh processes, alternating; 0: only time the tuned "
                        "network here)")
    q.add_argument("--no-layout-rewrite", action="store_true",
                   help="measure candidates that pack a weight with the copy inside the timed kernel "
                        "(default: outside, as the compiled network runs them) and compile without "
                        "layout rewrite")
    q.add_argument("--layout-tuning", action="store_true",
                   help="also tune each conv in blocked NCHW[x]c layouts (x: one and two vector "
                        "registers of floats) as tasks of their own, measure the layout transforms "
                        "between neighbours and pick the layouts of the whole network (DP/PBQP); "
                        "the choice is written to LOG.layouts.jsonl and used by 'network run'")
    q.add_argument("--winograd", action="store_true",
                   help="also tune each eligible 3x3 (1x3, 3x1) stride-1 conv as Winograd F(m,3), "
                        "m in 2, 4, 6, tasks of their own ('conv2d_winograd ... [winograd4]'), and "
                        "keep per conv the fastest measured (recorded as --layout-tuning's choice)")
    q.add_argument("--fuse-pairs", action="store_true",
                   help="also tune, as tasks of their own ('conv1x1+dwconv3x3 1x28x28x32'), each pair of "
                        "convs where the first's output feeds only the second (1x1 -> depthwise 3x3, "
                        "depthwise 3x3 -> 1x1, 1x1 -> 3x3) fused into one kernel; a pair runs fused "
                        "when its measured time beats the two separate ones, each in its fastest "
                        "variant with --winograd/--layout-tuning (the choice is written to "
                        "LOG.layouts.jsonl and used by 'network run'; the layouts are then chosen "
                        "for the network with those pairs fused)")
    q.add_argument("--no-share-schedules", action="store_true",
                   help="start each task's search from its own schedules only (default: also from "
                        "the best ones of similar tasks, the same ops at other shapes, until it has "
                        "64 of its own: what few trials per task need)")
    q.add_argument("--no-calibrate", action="store_true",
                   help="do not profile the network during the run (default: once every task has a "
                        "record and every quarter of the budget, the network as it would be compiled "
                        "is profiled and each task's latency scaled by its slowdown there, for the "
                        "estimate and the gradient)")
    q.add_argument("--export", default=None, metavar="DIR/NAME.so",
                   help="after tuning, write the network as one shared library with the loader "
                        "ansor_runtime.py (numpy only) beside it (default: LOG-lib/net.so)")
    q.add_argument("--no-export", action="store_true", help="do not write the shared library")
    options.add_tuning_options(
        q, log_help="default MODEL.json in the current directory: the zoo name, or the ONNX "
        "file's name without .onnx",
        trials_help=f"over all tasks; default {DEFAULT_TRIALS}",
        per_round_help=f"capped at trials / tasks; default {DEFAULT_PER_ROUND}",
        cache_default=NETWORK)  # weights evicted by the rest of the network, the input just written
    q.set_defaults(func=cmd_tune)
    return q


def default_log(model: str) -> str:
    """--log when none is given: ``MODEL.json`` in the current directory, MODEL being the zoo
    name or the ONNX file's name without ``.onnx`` (as ``ansor tune`` writes WORKLOAD.json)."""
    name = os.path.basename(model.rstrip(os.sep)) or "network"
    return f"{name[:-len('.onnx')] if name.endswith('.onnx') else name}.json"


def cmd_tune(args: argparse.Namespace) -> int:
    from ansor.graph.executor import compile_network
    from ansor.graph.network_calibration import median_profile
    from ansor.graph.plan import plan_network
    from ansor.measurer import STOP_LOG_FAILED
    from ansor.task_scheduler import LogEstimatedLatency, PrintTableInfo, TaskFilter, TaskScheduler
    from ansor.tuning import format_duration
    from measure.log_file import RecordFileError  # noqa: PLC0415 - start-up time of the CLI

    from .common import load_model, log_refused

    level = options.verbosity(args)
    options.show_tuning_logs(level)
    if args.log is None:
        args.log = default_log(args.model)
    g = load_model(args)
    from ansor.graph.memory_plan import check_graph_memory  # noqa: PLC0415 - start-up time

    check_graph_memory(g)  # a huge --shape: one line before any work, as compile_network says it
    rewrite = not getattr(args, "no_layout_rewrite", False)
    # Fused and lowered once: the tasks, the layout choice and the final compile all read it.
    plan = plan_network(g, layout_rewrite=rewrite)
    g = plan.graph  # per-channel scales folded into their convs (``scale_fold``): the groups' graph
    variants = None
    if getattr(args, "layout_tuning", False) or getattr(args, "winograd", False):
        from ansor.graph.layout_tuning import layout_variants, variant_tasks  # noqa: PLC0415 - start-up time

        variants = layout_variants(g, occurrences=plan.groups, blocked=getattr(args, "layout_tuning", False),
                                   winograd=getattr(args, "winograd", False))
        tasks, weights = variant_tasks(g, variants, layout_rewrite=rewrite)
    else:
        tasks, weights = list(plan.tasks), list(plan.weights)
    candidates = None
    if getattr(args, "fuse_pairs", False):
        from ansor.graph.two_anchor import pair_candidates, pair_tasks  # noqa: PLC0415 - start-up time

        # Beside the separate tasks: the choice compares the fused time with their sum.
        candidates = pair_candidates(g, plan.groups)
        more, more_w = pair_tasks(g, candidates, layout_rewrite=rewrite)
        tasks, weights = tasks + more, weights + more_w
    objective = None
    group_keys: list[list[str]] = [[o.dag.workload_key] for o in plan.groups]
    pair_keys = [(c.producer, c.consumer, c.occurrence.dag.workload_key) for c in candidates or ()]
    if variants is not None or candidates:
        # The network as it will be compiled, each group's fastest variant and each pair fused
        # or not, made smooth (``network_objective``): not the sum of every alternative.
        from ansor.graph.layout_tuning import variant_occurrence  # noqa: PLC0415 - start-up time
        from ansor.graph.network_objective import objective_for  # noqa: PLC0415 - start-up time

        if variants is not None:
            group_keys = [[variant_occurrence(v, k).dag.workload_key for k in range(len(v.layouts))]
                          for v in variants]
        objective = objective_for(tasks, group_keys, pair_keys)
    for task in tasks:  # the run's CPU (--target): candidates, records and the final compile
        task.target = args.target
    if tasks and args.cluster is None:  # measured here: before the log is made
        tasks[0].target.check_runnable("candidates")
    if not tasks:  # e.g. a model of element-wise ops only: bad input, not a failed run
        print(f"ansor network tune: {args.model} has no task to tune (no subgraph with a "
              "reduction)", file=sys.stderr)
        return 2
    # The cost model first: a refused model file must not leave an empty log behind.
    model = options.load_cost_model(args.cost_model, args.seed)
    if isinstance(model, str):
        print(f"ansor network tune: {model}", file=sys.stderr)
        return 2
    if log_refused(args.log, "ansor network tune"):
        return 2
    history = LogEstimatedLatency(f"{args.log}.latency.tsv")
    measurers = options.open_measurers(args, "ansor network tune", options.runner_settings(args))
    if isinstance(measurers, int):
        return measurers
    try:
        try:  # what the user asked for, checked before anything is measured: exit 2
            flt = TaskFilter(pattern=args.tasks, min_share=args.min_share) \
                if args.tasks is not None or args.min_share else None
            trials = DEFAULT_TRIALS if args.trials is None else args.trials
            calibration = _calibration(plan, args, variants, candidates, group_keys, pair_keys, trials)
            sched = TaskScheduler(tasks, weights, strategy=args.strategy, seed=args.seed,
                                  task_filter=flt, remeasure_best=args.remeasure_best,
                                  callbacks=[PrintTableInfo(), history] + ([calibration] if calibration else []),
                                  cost_model=model,
                                  share_schedules=not getattr(args, "no_share_schedules", False),
                                  objective_func=objective)
            per_round = DEFAULT_PER_ROUND if args.per_round is None else args.per_round
            opts = options.tuning_options(args, log=args.log, trials=trials, per_round=per_round,
                                          seed=args.seed, measurers=measurers)
        except ValueError as err:  # a filter matching nothing, ...
            print(f"ansor network tune: {err}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        res = sched.tune(opts)  # an InputError inside (e.g. a bad pre-trained model) is exit 2 too
    except RecordFileError as err:  # the log path is unusable: found before anything is measured
        print(f"ansor network tune: {err}", file=sys.stderr)
        return 2
    finally:
        for m in measurers.values():
            m.close()
    print(f"tuning: {res.trials} new trial(s) ({res.restored} restored) in "
          f"{format_duration(time.perf_counter() - t0)}; history in {history.path}")
    if res.stop_reason.startswith(STOP_LOG_FAILED):  # e.g. a full disk: the log keeps every
        print(f"ansor network tune: {res.stop_reason}", file=sys.stderr)  # complete record
        return 1
    if history.error is None:
        side_plot(history.path, f"{args.log}.latency.png")
    est = res.estimated_latency
    cal = calibration.last if calibration else None
    print("estimated latency: " + ("- (some task has no valid schedule)" if est is None
                                   else f"{est * 1e3:.3f} ms (sum of weight x best task latency timed {args.cache}"
                                   + (f", each scaled by its slowdown in the network as profiled at trial "
                                      f"{cal.at_trials}" if cal is not None else "")
                                   + (", each group's fastest variant and each pair fused where faster, "
                                      "smoothed; layout transforms not counted)" if objective is not None
                                      else ")")))
    if res.interrupted:
        print(f"interrupted: run the same command again to resume from {args.log}")
        return 130
    if res.measurement_stopped:  # the cluster went away: the log keeps every finished round
        print(f"ansor network tune: {res.stop_reason}\n{RESUME_HINT}", file=sys.stderr)
        return 1
    if not os.path.isfile(args.log):
        return 0
    if variants is not None or candidates:
        code = _choose(plan, args, variants, candidates, calibration.key_factors() if calibration else None)
        if code:
            return code
    lib = None
    if calibration is not None:  # the network just chosen, profiled: how close the estimate came
        lib = compile_network(plan, log_file=args.log, target=args.target)
        if calibration.run(sched, functools.partial(median_profile, lib)) is not None:
            print(f"estimated latency, calibrated in the network as compiled now: "
                  f"{(sched.estimated_latency() or 0) * 1e3:.3f} ms")
    if args.rounds == 0 or args.target != "native" or lib is not None:
        # layouts: the choice just recorded, if any; timed here, right after the estimate
        lib = lib or compile_network(plan, log_file=args.log, target=args.target)
        b = lib.benchmark()
        print(f"measured latency of the compiled network: {b['mean'] * 1e3:.3f} ms per inference"
              + (" (in this process; fresh processes below)" if args.rounds and args.target == "native" else ""))
    if args.rounds and args.target == "native":  # the comparison compiles natively
        _before_after(args)
    if args.no_export:
        return 0
    # The shippable result: one shared library and the loader that needs only numpy.
    return export_and_tell(plan, args.log, args.export or export_path(args.log), "ansor network tune",
                           target=args.target)


def _calibration(plan, args: argparse.Namespace, variants, candidates, group_keys, pair_keys,
                 trials: int):
    """The in-network calibration of the run (``network_calibration``): after the warm-up and
    every quarter of the budget, each one's factors in ``LOG.calibration.tsv``; None when the
    network cannot run here (another --target, a cluster's CPUs) or ``--no-calibrate``."""
    from ansor.graph.network_calibration import NetworkCalibration, network_profiler  # noqa: PLC0415

    if getattr(args, "no_calibrate", False) or args.target != "native" or args.cluster is not None:
        return None
    choose = None
    if variants is not None or candidates:
        from ansor.graph.network_choice import choose_network  # noqa: PLC0415 - start-up time

        def choose():  # the variants weighed by the last calibration's in-network factors
            return choose_network(plan, args.log, candidates, variants,
                                  blocked=getattr(args, "layout_tuning", False),
                                  winograd=getattr(args, "winograd", False), cache=args.cache,
                                  factors=calibration.key_factors())
    calibration = NetworkCalibration(network_profiler(plan, args.log, args.target, choose), group_keys,
                                     pair_keys, every=max(1, trials // 4), tsv=f"{args.log}.calibration.tsv")
    return calibration


def export_path(log: str) -> str:
    """--export when none is given: ``LOG-lib/net.so`` beside the log (``bert.json`` -> ``bert-lib/net.so``)."""
    stem = log[:-len(".json")] if log.endswith(".json") else log
    return os.path.join(f"{stem}-lib", "net.so")


def side_plot(history: str, out: str) -> None:
    """The latency plot, a side output: a failure to draw or write it (a full disk, a history
    cut short) is one warning line, never the run's failure (``plot_latency_history`` leaves no
    partial image behind)."""
    from ansor.task_scheduler import plot_latency_history  # noqa: PLC0415 - start-up time

    try:
        if plot_latency_history(history, out):
            print(f"plot: {out}")
    except Exception as err:  # noqa: BLE001 - whatever broke the plot, the tuning run stands
        why = (err.strerror if isinstance(err, OSError) and err.strerror else str(err)) or \
            type(err).__name__
        print(f"ansor network tune: warning: the plot {out} was not written: "
              f"{why.splitlines()[0]}", file=sys.stderr)


def _choose(plan, args: argparse.Namespace, variants, candidates, factors=None) -> int:
    """Choose the fused pairs, then the layouts of the network they leave (``network_choice``;
    ``factors``: the last calibration's, scaling the variants' records), print both and the
    estimate of the network as compiled; 1 when the choice fails."""
    from ansor.graph.layout_sidecar import LayoutFileError, sidecar_path  # noqa: PLC0415
    from ansor.graph.layout_solver import LayoutSolverError  # noqa: PLC0415
    from ansor.graph.network_choice import choose_network  # noqa: PLC0415 - start-up time
    from measure.targets import use_target  # noqa: PLC0415 - start-up time of the CLI

    try:
        with use_target(args.target):
            choice = choose_network(plan, args.log, candidates, variants,
                                    blocked=getattr(args, "layout_tuning", False),
                                    winograd=getattr(args, "winograd", False), cache=args.cache,
                                    factors=factors)
    except (LayoutFileError, LayoutSolverError) as err:
        print(f"ansor network tune: layout tuning: {err}", file=sys.stderr)
        return 1
    if choice.pairs is not None:
        _show_pairs(choice.pairs)
    if choice.layouts is not None:
        _show_layouts(choice.layouts, choice.variants, sidecar_path(args.log), factors is not None)
    _show_estimate(plan, args)
    return 0


def _show_layouts(choice, variants, side, in_network: bool = False) -> None:
    """The solved layouts, per group with its candidates' costs (``in_network``: records scaled
    by the calibration's factors)."""
    rows = [("group", "layout", "candidates (ms, in the network)" if in_network else "candidates (ms)")]
    for v, lay, costs in zip(variants, choice.layouts, choice.group_costs):
        shown = ", ".join(f"{n} {c * 1e3:.3f}" if c != float("inf") else f"{n} -"
                          for n, c in zip(v.layouts, costs))
        rows.append((v.occurrence.group.name[:60], lay, shown))
    print_table(rows)
    sol = choice.solution
    moved = sum(1 for lay in choice.layouts if lay != "NHWC" and not lay.startswith("winograd"))
    wino = sum(1 for lay in choice.layouts if lay.startswith("winograd"))
    print(f"layouts: {moved} of {len(choice.layouts)} group(s) blocked, {wino} Winograd; estimated {sol.cost * 1e3:.3f} ms "
          f"with transforms ({sol.method}, {'optimal' if sol.optimal else 'heuristic'}; {sol.note}); "
          f"{len(choice.transforms)} transform(s) costed; written to {side}")


def _show_pairs(choices) -> None:
    """The measured choice per fusable pair (what 'network run' and the compile below apply)."""
    def ms(x: float) -> str:
        return "-" if x == float("inf") else f"{x * 1e3:.3f}"

    rows = [("pair", "groups", "fused (ms)", "separate (ms)", "runs")]
    for c in choices:
        k = c.candidate
        rows.append((f"{'+'.join(k.kinds)} {'x'.join(map(str, k.occurrence.group.nodes[-1].type.shape))}",
                     f"{k.producer}, {k.consumer}", ms(c.fused_seconds), ms(c.separate_seconds),
                     "fused" if c.fused else "separate"))
    print_table(rows)
    print(f"fused pairs: {sum(c.fused for c in choices)} of {len(choices)} candidate(s) run as one kernel")


def _show_estimate(plan, args: argparse.Namespace) -> None:
    """The estimate of the network as it is compiled (pairs and layouts chosen), one line."""
    from ansor.graph.executor import plan_as_compiled  # noqa: PLC0415 - start-up time
    from ansor.graph.network_estimate import estimate_network  # noqa: PLC0415 - start-up time
    from measure.targets import use_target  # noqa: PLC0415 - start-up time of the CLI

    with use_target(args.target):
        est = estimate_network(plan_as_compiled(plan, args.log), args.log)
    print("estimated latency of the network as compiled: " + est.describe())


def _before_after(args: argparse.Namespace) -> None:
    """The network untuned and tuned, beside onnxruntime and PyTorch eager (those installed)."""
    import importlib.util

    from ansor.bench.network_compare import compare_network  # noqa: PLC0415 - start-up time
    from measure.runtime import num_threads  # noqa: PLC0415 - start-up time of the CLI

    ours = "ansor-no-rewrite" if getattr(args, "no_layout_rewrite", False) else "ansor"
    systems = ["ansor-untuned", ours] + [s for s in ("onnxruntime", "torch")
                                             if importlib.util.find_spec(s) is not None]
    opts = model_options(args)
    threads = num_threads()
    if options.verbosity(args) > options.QUIET:  # progress: the table below is the result
        print(f"measured latency: {', '.join(systems)}; {threads} thread(s), a fresh process "
              f"each, {args.rounds} alternating round(s), median ...", flush=True)
    res = compare_network(args.model, opts, systems, threads=threads, rounds=args.rounds, log=args.log)
    tuned = res[ours]["seconds"]
    names = {"ansor-untuned": "ansor, untuned", "ansor": "ansor, tuned",
             "ansor-no-rewrite": "ansor, tuned, no layout rewrite", "onnxruntime": "onnxruntime",
             "torch": "PyTorch eager"}
    rows = [("network latency", "ms", "tuned ansor's speed-up")]
    for s in systems:
        r = res[s]
        if r["seconds"] is None:
            rows.append((names[s], "-", r.get("error", "no result")))
            continue
        ratio = "" if tuned is None or s == ours else f"{r['seconds'] / tuned:.2f}x"
        rows.append((names[s], f"{r['seconds'] * 1e3:.3f}", ratio))
    print_table(rows)
