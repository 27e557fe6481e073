"""``ansor tune``: tune a library workload, or (no workload) the quick start: a short GEMM run
compared with numpy's ``a @ b`` timed in a fresh process.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from ansor import argtypes
from ansor.search_task import SearchTask
from ansor.tuning import TuneResult, TuningOptions, default_cost_model, format_speedup
from compute.ops import get_workload
from cost_model import LGBModel, RandomModel
from measure.checks import MAX_TIMEOUT_S
from measure.record import RecordFileError
from measure.runner import LocalRunner
from measure.runtime import num_threads
from sketch.search_policy import SearchParams

from . import numpy_matmul
from .cluster import RESUME_HINT, add_cluster_argument, open_cluster
from .common import check_workload_memory, fmt_time, log_refused

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
# A repeat must fit in the runner's timeout, which is at most MAX_TIMEOUT_S.
MAX_REPEAT_MS = MAX_TIMEOUT_S * 1e3


def _tune_options(ns: argparse.Namespace, log: str | None, trials: int, per_round: int,
                  **kw):
    params = None
    if ns.population is not None:
        params = dataclasses.replace(SearchParams(), population_size=ns.population)
    verbose = 0 if ns.quiet else 1 + ns.verbose
    return TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                         early_stopping=ns.early_stopping, log_file=log, verbose=verbose,
                         search_params=params, **kw)


def _show_tuning_logs(level: int) -> None:
    """Send the ``ansor.*`` loggers (``ansor.tune``, ``ansor.search``) to stderr at ``level``."""
    lg = logging.getLogger("ansor")
    lg.setLevel(level)
    if not any(getattr(h, "_ansor_cli", False) for h in lg.handlers):  # once per process
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        h._ansor_cli = True  # type: ignore[attr-defined]
        lg.addHandler(h)


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
        return SearchTask(func=name, args=args,
                          layout_rewrite_inputs=getattr(ns, "constant_inputs", None) or ()), log
    except (TypeError, ValueError) as err:
        print(f"ansor: {name}{args}: {err}", file=sys.stderr)
        return 2


def _runner_and_options(ns: argparse.Namespace, log: str | None,
                        quick: bool) -> tuple[list, TuningOptions] | int:
    """The builder and runner to close after the run (none: the tuner's own) and the tuning
    options, or the exit code of a cluster that cannot be reached."""
    trials = ns.trials if ns.trials is not None else (QUICK_TUNE_TRIALS if quick else 200)
    per_round = (ns.per_round if ns.per_round is not None
                 else QUICK_TUNE_PER_ROUND if quick else 64)
    settings: dict = {}
    if quick:
        settings = dict(QUICK_TUNE_RUNNER)
    elif ns.timeout is not None or ns.min_repeat_ms is not None:
        settings = dict(timeout=ns.timeout if ns.timeout is not None else 10.0,
                        min_repeat_ms=ns.min_repeat_ms if ns.min_repeat_ms is not None else 100)
    kw: dict = {}
    if ns.cluster is not None:
        opened = open_cluster(ns.cluster, "ansor tune", **settings)
        if isinstance(opened, int):
            return opened
        kw = dict(builder=opened[0], runner=opened[1])
    elif quick or settings:
        kw = dict(runner=LocalRunner(**settings))
    # Seeded by default in the quick run so that its first round is the same on every run.
    seed = (0 if ns.seed is None else ns.seed) if quick else ns.seed
    opts = _tune_options(ns, log, trials, per_round, seed=seed, **kw)
    if quick and opts.verbose:
        where = f" on the Dask cluster at {ns.cluster}" if ns.cluster else ""
        print(f"ansor tune: a short tuning run of a float32 GEMM {QUICK_TUNE_N}^3 on "
              f"{num_threads()} thread(s){where}, {trials} trials, then numpy's a @ b for "
              "comparison (ansor tune --help for more)", flush=True)
    return list(kw.values()), opts


def _print_numpy_comparison(result: TuneResult) -> None:
    """The quick start's last line: numpy's ``a @ b`` timed in a fresh process, and the ratio."""
    np_sec, why = numpy_matmul.best_seconds_in_fresh_process(QUICK_TUNE_N, num_threads())
    if np_sec is None:
        print(f"numpy a @ b: not measured ({why})")
    else:
        ratio = np_sec / result.best_cost
        print(f"numpy a @ b (OpenBLAS, {num_threads()} thread(s), best of 7): "
              f"{fmt_time(np_sec)} {2 * QUICK_TUNE_N ** 3 / np_sec / 1e9:.0f} GFLOPS -> "
              f"the tuned schedule runs "
              f"at {ratio:.2f}x numpy's speed"
              + (f" ({format_speedup(result.speedup_over_default)} the default schedule's)"
                 if result.speedup_over_default else ""), flush=True)


def cmd_tune(ns: argparse.Namespace) -> int:
    """Tune a library workload, or (no workload) the quick-start GEMM compared with numpy."""
    if ns.verbose and not ns.quiet:
        _show_tuning_logs(logging.INFO if ns.verbose == 1 else logging.DEBUG)
    quick = ns.workload is None
    found = _task_and_log(ns)
    if isinstance(found, int):
        return found
    task, log = found
    if ns.cluster is None:  # measured here: its tensors must fit (a cluster's workers: theirs)
        check_workload_memory(task.compute_dag, task.desc)
    # The cost model first: a refused model file must not leave an empty log behind.
    model = _cost_model_arg(ns.cost_model, ns.seed if ns.seed is not None or not quick else 0)
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
    p.add_argument("--trials", type=argtypes.trials,
                   help="new measurements to make (default 200; quick "
                   f"run {QUICK_TUNE_TRIALS})")
    p.add_argument("--log", help="record file: appended each round, resumed from if it exists")
    p.add_argument("--per-round", dest="per_round", type=argtypes.per_round,
                   help=f"measurements per round (default 64; quick run {QUICK_TUNE_PER_ROUND})")
    p.add_argument("--seed", type=argtypes.seed,
                   help="random seed (a fixed seed makes a run reproducible "
                   "up to measurement noise)")
    p.add_argument("--early-stopping", dest="early_stopping", type=argtypes.early_stopping, metavar="N",
                   help="stop when the best has not improved for N trials")
    p.add_argument("--population", type=argtypes.population(), metavar="N",
                   help="evolutionary search population size (default 2048)")
    p.add_argument("--timeout", type=argtypes.seconds(), metavar="SECONDS",
                   help="runner timeout per candidate (default 10; a slower candidate is an error)")
    p.add_argument("--min-repeat-ms", dest="min_repeat_ms", metavar="MS",
                   type=argtypes.nonnegative(MAX_REPEAT_MS),
                   help="each timing repeats the kernel for at least this long (default 100)")
    add_cluster_argument(p)
    p.add_argument("--cost-model", dest="cost_model", default="learned", metavar="MODEL",
                   help="'learned' (LightGBM starting from the pre-trained model shipped in the "
                   "package, default; `ansor costmodel info`), 'untrained' (LightGBM from nothing: "
                   "the first round is random), 'random', or a model file saved by `ansor "
                   "costmodel train|pretrain` (warm start from other tasks' records)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="also print a mark per candidate and the search's statistics; -vv also "
                   "every failed candidate's error")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")


def _cost_model_arg(spec: str, seed: int | None) -> LGBModel | RandomModel | str:
    """The cost model ``--cost-model`` names, or an error message."""
    if spec == "learned":  # from the pre-trained model when the package ships one
        return default_cost_model(seed)
    if spec == "untrained":
        return LGBModel(seed=seed)
    if spec == "random":
        return RandomModel(seed)
    if not os.path.isfile(spec):
        return f"--cost-model {spec!r}: not 'learned', 'untrained', 'random' or a model file"
    try:
        return LGBModel.load(spec, seed=seed)
    except ValueError as err:
        return str(err)
