"""The options the tuning commands share, defined once (issue 41: ``ansor tune`` and ``ansor
network tune`` had grown two dialects - different flags, defaults and bounds for the same idea).

``add_tuning_options`` gives a command --log, --trials, --per-round, --early-stopping, --seed,
--population, --timeout, --min-repeat-ms, --cache, --cost-model, --threads, --target, --cluster and -v/-q, with one
type, bound and meaning each; the functions below turn the parsed values into what the tuners
take (the cost model, the builder and runner, ``TuningOptions``), so both commands hand the same
option to the same place. ``add_threads_option`` gives --threads to the other commands that run
kernels; ``threads_env`` applies it. ``add_target_option`` gives --target (the CPU to build for)
to every command that compiles (the tuning commands get it with the rest). ``add_model_options`` gives every ``network`` command MODEL
with --seq-len, --image-size, --shape and --batch.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
from typing import Any, Iterator, Sequence

from ansor import argtypes
from cost_model import LGBModel, RandomModel
from measure.checks import MAX_TIMEOUT_S
from measure.measure import CACHE_MODES, WARM
from measure.runtime import ENV_NUM_THREADS
from sketch.search_params import SearchParams

from .cluster import add_cluster_argument, open_cluster

# Defaults where the user gives nothing (``TuningOptions``' and ``LocalRunner``'s own defaults;
# tests/ansor/test_cli_options.py checks they agree). The trial budget of ``network tune`` is
# over all its tasks: the task count is not known when the options are parsed, so a fixed total.
DEFAULT_TRIALS = 200
DEFAULT_PER_ROUND = 64
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MIN_REPEAT_MS = 100.0
# --population: at least 16 in every command (``network tune``'s minimum; ``tune`` took 1). The
# search seeds a fifth of the population with measured bests (``SearchParams.use_measured_ratio``
# 0.2): below 5 no measured state seeds it at all, and a handful of states leaves the evolution
# (selection, mutation, crossover) nothing to choose between. 16 keeps 3 seeds.
MIN_POPULATION = 16
# A repeat must fit in the runner's timeout, which is at most MAX_TIMEOUT_S.
MAX_REPEAT_MS = MAX_TIMEOUT_S * 1e3
# Verbosity levels (``TuningOptions.verbose``): -q, the default, -v, -vv.
QUIET, NORMAL = 0, 1

COST_MODEL_HELP = ("'learned' (LightGBM starting from the pre-trained model shipped in the "
                   "package, default; `ansor costmodel info`), 'untrained' (LightGBM from nothing: "
                   "the first round is random), 'random', or a model file saved by `ansor "
                   "costmodel train|pretrain` (warm start from other tasks' records)")


SHAPE_HELP = ("an ONNX input's shape, NAME=1x3x224x224 (or NAME=1,3,224,224; without NAME= for a "
              "one-input model); repeat it for each input the model leaves dynamic. A static "
              "dimension given must equal the model's")
BATCH_HELP = ("batch size: for an .onnx file, the first dimension of every input whose first "
              "dimension is dynamic (a static one is the model's own and kept; --shape wins for "
              "the inputs it names); for a zoo network its batch (default 1)")
IMAGE_SIZE_HELP = ("image size (zoo CNNs). Not for an .onnx file (an error): its spatial size "
                   "may be fixed by its weights and reshape targets, and which input is an image "
                   "is the model's to say; give the input's shape with --shape instead")


def add_model_options(p: argparse.ArgumentParser) -> None:
    """MODEL and the options that size it, the same for every ``network`` command that takes
    one (``common.load_model`` reads them): --seq-len, --image-size (zoo), --shape (ONNX) and
    --batch (both)."""
    p.add_argument("model", help="a zoo name ('ansor network list') or a path to an .onnx file")
    p.add_argument("--seq-len", type=argtypes.network_size, default=None,
                   help="sequence length (zoo: bert-base-layer); for an .onnx file use --shape")
    p.add_argument("--image-size", type=argtypes.network_size, default=None, help=IMAGE_SIZE_HELP)
    p.add_argument("--shape", action="append", default=None, metavar="NAME=DIMS", help=SHAPE_HELP)
    p.add_argument("--batch", type=argtypes.network_size, default=None, metavar="N", help=BATCH_HELP)


def add_threads_option(p: argparse.ArgumentParser) -> None:
    """--threads N: ANSOR_NUM_THREADS for this run (same bound as the variable)."""
    p.add_argument("--threads", type=argtypes.threads, default=None, metavar="N",
                   help=f"threads of the kernels for this run: sets {ENV_NUM_THREADS} (default: "
                   f"${ENV_NUM_THREADS}, else every usable CPU)")


TARGET_HELP = ("the CPU to build for: native (this host, default), x86-64-v2, x86-64-v3, haswell, "
               "x86-64-v4, skylake-avx512, znver3, znver4 or another LLVM CPU name; code for a CPU "
               "feature this host lacks is built but not run here, and only that target's "
               "records are used")


def add_target_option(p: argparse.ArgumentParser) -> None:
    """--target NAME: the CPU every command that compiles builds for (``measure.targets``; an
    unknown name is a one-line error when the command starts building)."""
    p.add_argument("--target", default="native", metavar="NAME", help=TARGET_HELP)


def add_measurement_options(p: argparse.ArgumentParser, timeout_default: str) -> None:
    """--timeout and --min-repeat-ms: how one measurement runs (None when not given: the
    command's runner keeps its default, which ``timeout_default`` states)."""
    p.add_argument("--timeout", type=argtypes.seconds(), metavar="SECONDS",
                   help=f"seconds one measurement may run (default {timeout_default}; a "
                   "slower kernel is an error)")
    p.add_argument("--min-repeat-ms", dest="min_repeat_ms", metavar="MS",
                   type=argtypes.nonnegative(MAX_REPEAT_MS),
                   help="each timing repeats the kernel for at least this long (default "
                   f"{DEFAULT_MIN_REPEAT_MS:g})")


CACHE_HELP = ("how candidates are timed: 'warm' (every call on the same buffers: the kernel "
              "alone, in a loop), 'cold' (every call on arguments no cache holds: after other "
              "kernels evicted its weights and activations) or 'network' (its weights rotated "
              "over what the rest of the network touches, its input and output kept warm: as "
              "the kernel runs in its network)")


def add_tuning_options(p: argparse.ArgumentParser, *, log_help: str, trials_help: str,
                       per_round_help: str, timeout_help: str = f"{DEFAULT_TIMEOUT_S:g}",
                       cache_default: str = WARM) -> None:
    """The options every tuning command takes, with the same names, types, bounds and meaning.
    ``*_help``: what the command's default for --log, --trials, --per-round, --timeout is;
    ``cache_default``: its timing mode (--cache; warm for one kernel, network for a network)."""
    p.add_argument("--log", metavar="FILE",
                   help=f"record file: appended each round, resumed from if it exists ({log_help})")
    p.add_argument("--trials", type=argtypes.trials, metavar="N",
                   help=f"new measurements to make in this run ({trials_help})")
    p.add_argument("--per-round", dest="per_round", type=argtypes.per_round, metavar="K",
                   help=f"measurements per round ({per_round_help})")
    p.add_argument("--early-stopping", dest="early_stopping", type=argtypes.early_stopping,
                   metavar="N", help="stop tuning a workload when its best has not improved for "
                   "N trials")
    p.add_argument("--seed", type=argtypes.seed,
                   help="random seed of the search and the cost model (a fixed seed makes a run "
                   "reproducible up to measurement noise)")
    p.add_argument("--population", type=argtypes.population(MIN_POPULATION), metavar="N",
                   help=f"evolutionary search population per round (default: 32 per measurement "
                   f"of the round, 512 to 2048, so 2048 at Ansor's 64 per round; smaller is "
                   f"faster; at least {MIN_POPULATION})")
    add_measurement_options(p, timeout_help)
    p.add_argument("--cache", choices=CACHE_MODES, default=cache_default,
                   help=f"{CACHE_HELP} (default {cache_default}); records say which, and a run "
                   "resumes only its own mode's")
    p.set_defaults(cache_default=cache_default)  # the tuner's own runner times in this mode
    p.add_argument("--cost-model", dest="cost_model", default="learned", metavar="MODEL",
                   help=COST_MODEL_HELP)
    add_threads_option(p)
    add_target_option(p)
    add_cluster_argument(p)
    p.add_argument("-v", dest="verbose", action="count", default=0,
                   help="-v, --verbose: more output: a mark per candidate and the search's "
                   "statistics; -vv also every failed candidate's error")
    # --verbose N: ``network tune``'s old level (0 quiet, 1 normal, 2 = -v, 3 = -vv), kept as a
    # deprecated alias; a bare --verbose is -v (``verbose_alias`` rewrites the argv).
    p.add_argument("--verbose", dest="verbose_level", type=argtypes.verbose, default=None,
                   help=argparse.SUPPRESS)
    p.add_argument("-q", "--quiet", action="store_true",
                   help="quiet: no progress output (errors and warnings are still shown)")


def verbose_alias(argv: Sequence[str]) -> list[str]:
    """``--verbose`` in a tuning command's argv: followed by an integer it is the deprecated
    level (``--verbose=N``), otherwise it is ``-v``. Rewritten before parsing because one
    argparse option cannot both count and take an optional value without swallowing the
    positional after it (``ansor tune --verbose matmul``)."""
    args = list(argv)
    if not (args[:1] == ["tune"] or args[:2] == ["network", "tune"]):
        return args
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        if a == "--verbose":
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and _is_int(nxt):
                out.append(f"--verbose={nxt}")
                i += 2
                continue
            out.append("-v")
        else:
            out.append(a)
        i += 1
    return out


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def verbosity(ns: argparse.Namespace) -> int:
    """The run's level (``TuningOptions.verbose``): 0 with -q, else --verbose N if given, else
    1 plus the -v count (at most ``argtypes.MAX_VERBOSE``)."""
    if ns.quiet:
        return QUIET
    if ns.verbose_level is not None:
        return ns.verbose_level
    return min(NORMAL + ns.verbose, argtypes.MAX_VERBOSE)


def show_tuning_logs(level: int) -> None:
    """From -v on, the ``ansor.*`` loggers (``ansor.tune``, ``ansor.search``, the task
    scheduler) go to stderr: INFO with -v, DEBUG with -vv."""
    if level <= NORMAL:
        return
    lg = logging.getLogger("ansor")
    lg.setLevel(logging.INFO if level == NORMAL + 1 else logging.DEBUG)
    if not any(getattr(h, "_ansor_cli", False) for h in lg.handlers):  # once per process
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        h._ansor_cli = True  # type: ignore[attr-defined]
        lg.addHandler(h)


def load_cost_model(spec: str, seed: int | None) -> Any:
    """The cost model --cost-model names, or (a str) why it cannot be used."""
    from ansor.tuning import default_cost_model  # noqa: PLC0415 - start-up time of the CLI

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


def runner_settings(ns: argparse.Namespace, base: dict | None = None) -> dict:
    """The runner's settings: ``base`` (a command's own, e.g. the quick start's) with --timeout,
    --min-repeat-ms where given and --cache where it is not the command's default (the tuner's
    own runner times in that mode: ``SearchTask.tune`` warm, ``TaskScheduler`` cold); empty when
    nothing says anything (the tuner's runner)."""
    settings = dict(base or {})
    cache = getattr(ns, "cache", None)
    if cache is not None and cache != getattr(ns, "cache_default", WARM):
        settings["cache"] = cache
    if ns.timeout is not None:
        settings["timeout"] = ns.timeout
    if ns.min_repeat_ms is not None:
        settings["min_repeat_ms"] = ns.min_repeat_ms
    return settings


def open_measurers(ns: argparse.Namespace, prog: str, settings: dict) -> dict | int:
    """``builder``/``runner`` for ``TuningOptions`` (to close after the run): the cluster's
    with --cluster, a ``LocalRunner`` with ``settings``, or none (the tuner's own); or the exit
    code of a cluster that cannot be reached (printed)."""
    if ns.cluster is not None:  # the mode always said: a DaskRunner's default is warm
        cache = {"cache": ns.cache} if getattr(ns, "cache", None) is not None else {}
        opened = open_cluster(ns.cluster, prog, **{**cache, **settings})
        if isinstance(opened, int):
            return opened
        return dict(builder=opened[0], runner=opened[1])
    if settings:
        from measure.runner import LocalRunner  # noqa: PLC0415 - start-up time of the CLI

        return dict(runner=LocalRunner(**settings))
    return {}


def tuning_options(ns: argparse.Namespace, *, log: str | None, trials: int, per_round: int,
                   seed: int | None, measurers: dict) -> Any:
    """``TuningOptions`` from the shared options (looked up in ``ansor.tuning`` at call time, so
    tests can substitute it)."""
    from ansor import tuning  # noqa: PLC0415 - start-up time of the CLI

    params = None
    if ns.population is not None:
        params = dataclasses.replace(SearchParams(), population_size=ns.population)
    return tuning.TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                                early_stopping=ns.early_stopping, log_file=log,
                                verbose=verbosity(ns), seed=seed, search_params=params,
                                **measurers)


@contextlib.contextmanager
def threads_env(threads: int | None) -> Iterator[None]:
    """``ANSOR_NUM_THREADS=threads`` while a command runs (None: unchanged), set before any
    kernel is loaded or worker started (they read it when they start), restored afterwards."""
    if threads is None:
        yield
        return
    old = os.environ.get(ENV_NUM_THREADS)
    os.environ[ENV_NUM_THREADS] = str(threads)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV_NUM_THREADS, None)
        else:
            os.environ[ENV_NUM_THREADS] = old
