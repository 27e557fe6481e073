"""``ansor tune``: tune a library workload, or (no workload) the quick start: a short GEMM run
compared with numpy's ``a @ b`` timed in a fresh process.
"""
from __future__ import annotations

import argparse
import sys

from ansor import argtypes
from ansor.search_task import SearchTask
from ansor.tuning import TuneResult, TuningOptions, format_speedup
from compute.ops import get_workload
from measure.log_file import RecordFileError
from measure.runtime import num_threads
from measure.targets import TargetError

from . import numpy_matmul, options
from .cluster import RESUME_HINT
from .common import check_workload_memory, fmt_time, log_refused
from .options import DEFAULT_PER_ROUND, DEFAULT_TIMEOUT_S, DEFAULT_TRIALS

# ``ansor tune`` with no workload: a GEMM small enough that the whole run (search, measurements,
# numpy comparison) stays under two minutes on a 2-core machine.
QUICK_TUNE_N = 512
QUICK_TUNE_TRIALS = 96
QUICK_TUNE_PER_ROUND = 32
# The search's random share includes GEMMs 10x slower than the default schedule (~2 s a call);
# timed as TVM does (3 calls + warm-up) each costs ~8 s, most of the quick run. One timed call
# and a 4 s cut-off cost them ~4 s; kernels under 33 ms, the ones that matter, are timed exactly
# as before (min_repeat_ms sets their call count).
QUICK_TUNE_RUNNER = dict(number=1, timeout=4.0)


def _task_and_log(ns: argparse.Namespace) -> tuple[SearchTask, str | None] | int:
    """The task ``ansor tune`` names and its log path, or the exit code of a usage error."""
    if ns.workload is None:
        if ns.args is not None:
            print("ansor tune: --args needs a workload name (e.g. ansor tune matmul --args "
                  "1024,1024,1024)", file=sys.stderr)
            return 2
        name, args = "matmul", (QUICK_TUNE_N,) * 3
        log = ns.log  # the quick start leaves no file behind unless asked to
    else:
        try:
            spec = get_workload(ns.workload)
        except KeyError as err:
            print(f"ansor: {err.args[0]}", file=sys.stderr)
            return 2
        name, args = ns.workload, ns.args or spec.default_args
        log = ns.log if ns.log is not None else f"{name}.json"
    try:
        return SearchTask(func=name, args=args, target=ns.target,
                          layout_rewrite_inputs=getattr(ns, "constant_inputs", None) or ()), log
    except TargetError as err:  # an unknown --target, said as the option's problem
        print(f"ansor tune: --target: {err}", file=sys.stderr)
        return 2
    except (TypeError, ValueError) as err:
        print(f"ansor: {name}{args}: {err}", file=sys.stderr)
        return 2


def _runner_and_options(ns: argparse.Namespace, log: str | None,
                        quick: bool) -> tuple[list, TuningOptions] | int:
    """The builder and runner to close after the run (none: the tuner's own) and the tuning
    options, or the exit code of a cluster that cannot be reached."""
    trials = ns.trials if ns.trials is not None else (QUICK_TUNE_TRIALS if quick else DEFAULT_TRIALS)
    per_round = (ns.per_round if ns.per_round is not None
                 else QUICK_TUNE_PER_ROUND if quick else DEFAULT_PER_ROUND)
    # The quick start's runner, with --timeout/--min-repeat-ms where given (as everywhere).
    settings = options.runner_settings(ns, QUICK_TUNE_RUNNER if quick else None)
    measurers = options.open_measurers(ns, "ansor tune", settings)
    if isinstance(measurers, int):
        return measurers
    # Seeded by default in the quick run so that its first round is the same on every run.
    seed = (0 if ns.seed is None else ns.seed) if quick else ns.seed
    opts = options.tuning_options(ns, log=log, trials=trials, per_round=per_round, seed=seed,
                                  measurers=measurers)
    if quick and opts.verbose:
        where = f" on the Dask cluster at {ns.cluster}" if ns.cluster else ""
        print(f"ansor tune: a short tuning run of a float32 GEMM {QUICK_TUNE_N}^3 on "
              f"{num_threads()} thread(s){where}, {trials} trials, then numpy's a @ b for "
              "comparison (ansor tune --help for more)", flush=True)
    return list(measurers.values()), opts


def _print_numpy_comparison(result: TuneResult) -> None:
    """The quick start's last line: numpy's ``a @ b`` timed in a fresh process, and the ratio."""
    np_sec, why = numpy_matmul.best_seconds_in_fresh_process(QUICK_TUNE_N, num_threads())
    if np_sec is None:
        print(f"numpy a @ b: not measured ({why})")
    else:
        # The kept schedule, as the summary says it: never slower than the default schedule.
        kept = result.kept_cost if result.kept_cost is not None else result.best_cost
        ratio = np_sec / kept
        print(f"numpy a @ b (OpenBLAS, {num_threads()} thread(s), best of 7): "
              f"{fmt_time(np_sec)} {2 * QUICK_TUNE_N ** 3 / np_sec / 1e9:.0f} GFLOPS -> "
              f"the {'default' if result.default_is_faster else 'tuned'} schedule runs "
              f"at {ratio:.2f}x numpy's speed"
              + (f" ({format_speedup(result.kept_speedup)} the default schedule's)"
                 if result.kept_speedup else ""), flush=True)


def cmd_tune(ns: argparse.Namespace) -> int:
    """Tune a library workload, or (no workload) the quick-start GEMM compared with numpy."""
    options.show_tuning_logs(options.verbosity(ns))
    quick = ns.workload is None
    found = _task_and_log(ns)
    if isinstance(found, int):
        return found
    task, log = found
    if ns.cluster is None:  # measured here: its tensors must fit (a cluster's workers: theirs)
        check_workload_memory(task.compute_dag, task.desc)
        task.target.check_runnable("candidates")  # and this CPU run its code: before the log
    # The cost model first: a refused model file must not leave an empty log behind.
    model = options.load_cost_model(ns.cost_model,
                                    ns.seed if ns.seed is not None or not quick else 0)
    if isinstance(model, str):
        print(f"ansor tune: {model}", file=sys.stderr)
        return 2
    if log_refused(log, "ansor tune"):
        return 2
    made = _runner_and_options(ns, log, quick)
    if isinstance(made, int):
        return made
    owned, opts = made
    try:
        result = task.tune(opts, cost_model=model)
    except RecordFileError as err:  # the log path is unusable: found before anything is measured
        print(f"ansor tune: {err}", file=sys.stderr)
        return 2
    finally:
        for m in owned:
            m.close()
    if result.interrupted:
        return 130
    if result.log_failed:  # e.g. the disk filled up: the log keeps every complete record
        print(f"ansor tune: {result.stop_reason}", file=sys.stderr)
        return 1
    if result.measurement_stopped:  # the cluster went away: the log keeps every finished round
        print(f"ansor tune: {result.stop_reason}\n{RESUME_HINT}", file=sys.stderr)
        return 1
    if result.best_cost is None:
        return 1
    if quick and opts.verbose:
        _print_numpy_comparison(result)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``ansor tune``'s options."""
    p = sub.add_parser(
        "tune", help="search for a fast schedule of a workload (no workload: a short GEMM "
        f"{QUICK_TUNE_N}^3 run compared with numpy)",
        description="Tune a library workload (see `ansor workloads`); records go to --log "
        "(default WORKLOAD.json), and a run on an existing log resumes it. With no workload: a "
        f"short tuning run of GEMM {QUICK_TUNE_N}^3 ({QUICK_TUNE_TRIALS} trials, no log unless "
        "--log), then numpy's a @ b measured for comparison.")
    p.add_argument("workload", nargs="?", help="a library workload name (default: the quick run)")
    p.add_argument("--args", type=argtypes.shape_args,
                   help="shape arguments, e.g. 1024,1024,1024 (default: the workload's)")
    p.add_argument("--constant-inputs", dest="constant_inputs", type=argtypes.shape_args,
                   metavar="POSITIONS",
                   help="argument positions of inputs that are constants where the kernel will run "
                   "(e.g. 1 for a weight): a candidate that packs one is measured with the pack "
                   "outside the timed kernel (layout rewrite; default: none, the pack is timed)")
    options.add_tuning_options(
        p, log_help="default WORKLOAD.json; the quick run writes none unless given",
        trials_help=f"default {DEFAULT_TRIALS}; quick run {QUICK_TUNE_TRIALS}",
        per_round_help=f"default {DEFAULT_PER_ROUND}; quick run {QUICK_TUNE_PER_ROUND}",
        timeout_help=f"{DEFAULT_TIMEOUT_S:g}; quick run {QUICK_TUNE_RUNNER['timeout']:g}")
