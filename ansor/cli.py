"""The ``ansor`` command line.

``ansor`` with no arguments runs the built-in default job (default vs hand-written schedules);
``ansor tune`` with no workload runs the README's quick start, a short GEMM tuning run compared
with numpy; ``ansor tune NAME --args ... --trials N --log FILE`` tunes any library workload;
``ansor workloads`` lists the operator library; ``ansor build NAME --args ...`` compiles a
workload's default schedule, checks it against the numpy reference and times it;
``ansor records ...`` summarises, distills and re-measures tuning logs.
"""
from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
from typing import Sequence

import numpy as np

from ansor import argtypes
from measure.checks import MAX_TIMEOUT_S


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


def _numpy_matmul_best_seconds(n: int, repeats: int = 7, min_repeat_s: float = 0.1) -> float:
    """The fastest of ``repeats`` timings (each >= ``min_repeat_s``) of numpy's ``a @ b``, after a
    warm-up. The best of several, because the tuned figure it is compared with is the best of many
    candidates: on a busy machine a median would charge numpy for noise the tuner escaped."""
    a = np.random.rand(n, n).astype("float32")
    b = np.random.rand(n, n).astype("float32")
    t_end = time.perf_counter() + 0.3
    calls = 0
    while time.perf_counter() < t_end:
        a @ b
        calls += 1
    number = max(1, int(calls * min_repeat_s / 0.3))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            a @ b
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def _numpy_matmul_in_subprocess(n: int, threads: int) -> tuple[float | None, str]:
    """numpy's ``a @ b`` for n^3 timed in a fresh interpreter: its OpenBLAS threads and the
    kernels' libgomp threads never share a process (idle pools spin and steal each other's
    cores). Returns (seconds, "") or (None, why)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)  # the same number of threads as our kernels get
    code = ("import sys; from ansor.cli import _numpy_matmul_best_seconds as f; "
            "print(repr(f(int(sys.argv[1]))))")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(n)], env=env, capture_output=True,
                             text=True, timeout=120, check=True)
        return float(out.stdout.strip().splitlines()[-1]), ""
    except subprocess.TimeoutExpired:
        return None, "timed out"
    except (subprocess.CalledProcessError, ValueError, IndexError) as err:
        detail = getattr(err, "stderr", "") or str(err)
        return None, detail.strip().splitlines()[-1] if detail.strip() else "failed"


def _tune_options(ns: argparse.Namespace, log: str | None, trials: int, per_round: int,
                  **kw):
    import dataclasses

    from ansor.tuning import TuningOptions

    params = None
    if ns.population is not None:
        from sketch.search_policy import SearchParams

        params = dataclasses.replace(SearchParams(), population_size=ns.population)
    verbose = 0 if ns.quiet else 1 + ns.verbose
    return TuningOptions(num_measure_trials=trials, num_measures_per_round=per_round,
                         early_stopping=ns.early_stopping, log_file=log, verbose=verbose,
                         search_params=params, **kw)


def _show_tuning_logs(level: int) -> None:
    """Send the ``ansor.*`` loggers (``ansor.tune``, ``ansor.search``) to stderr at ``level``."""
    import logging

    lg = logging.getLogger("ansor")
    lg.setLevel(level)
    if not any(getattr(h, "_ansor_cli", False) for h in lg.handlers):  # once per process
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        h._ansor_cli = True  # type: ignore[attr-defined]
        lg.addHandler(h)


def cmd_tune(ns: argparse.Namespace) -> int:
    """Tune a library workload, or (no workload) the quick-start GEMM compared with numpy."""
    import logging

    from ansor.search_task import SearchTask
    from compute.ops import get_workload

    if ns.verbose and not ns.quiet:
        _show_tuning_logs(logging.INFO if ns.verbose == 1 else logging.DEBUG)
    quick = ns.workload is None
    if quick:
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
        task = SearchTask(func=name, args=args)
    except (TypeError, ValueError) as err:
        print(f"ansor: {name}{args}: {err}", file=sys.stderr)
        return 2
    trials = ns.trials if ns.trials is not None else (QUICK_TUNE_TRIALS if quick else 200)
    per_round = (ns.per_round if ns.per_round is not None
                 else QUICK_TUNE_PER_ROUND if quick else 64)
    runner = None
    if quick:
        from measure.runner import LocalRunner
        from measure.runtime import num_threads

        runner = LocalRunner(**QUICK_TUNE_RUNNER)
        # Seeded by default so that the quick start's first round is the same on every run.
        opts = _tune_options(ns, log, trials, per_round, runner=runner,
                             seed=0 if ns.seed is None else ns.seed)
        if opts.verbose:
            print(f"ansor tune: a short tuning run of a float32 GEMM {QUICK_TUNE_N}^3 on "
                  f"{num_threads()} thread(s), {trials} trials, then numpy's a @ b for "
                  "comparison (ansor tune --help for more)", flush=True)
    else:
        if ns.timeout is not None or ns.min_repeat_ms is not None:
            from measure.runner import LocalRunner

            runner = LocalRunner(timeout=ns.timeout if ns.timeout is not None else 10.0,
                                 min_repeat_ms=ns.min_repeat_ms if ns.min_repeat_ms is not None else 100)
        opts = _tune_options(ns, log, trials, per_round, seed=ns.seed,
                             **({"runner": runner} if runner is not None else {}))
    model = _cost_model_arg(ns.cost_model, opts.seed)
    if isinstance(model, str):
        print(f"ansor tune: {model}", file=sys.stderr)
        return 2
    from measure.record import RecordFileError

    try:
        result = task.tune(opts, cost_model=model)
    except RecordFileError as err:  # the log path is unusable: found before anything is measured
        print(f"ansor tune: {err}", file=sys.stderr)
        return 2
    finally:
        if runner is not None:
            runner.close()
    if result.interrupted:
        return 130
    if result.log_failed:  # e.g. the disk filled up: the log keeps every complete record
        print(f"ansor tune: {result.stop_reason}", file=sys.stderr)
        return 1
    if result.best_cost is None:
        return 1
    if quick and opts.verbose:
        from ansor.tuning import format_speedup
        from measure.runtime import num_threads

        np_sec, why = _numpy_matmul_in_subprocess(QUICK_TUNE_N, num_threads())
        if np_sec is None:
            print(f"numpy a @ b: not measured ({why})")
        else:
            ratio = np_sec / result.best_cost
            print(f"numpy a @ b (OpenBLAS, {num_threads()} thread(s), best of 7): "
                  f"{_fmt_time(np_sec)} {2 * QUICK_TUNE_N ** 3 / np_sec / 1e9:.0f} GFLOPS -> "
                  f"the tuned schedule runs "
                  f"at {ratio:.2f}x numpy's speed"
                  + (f" ({format_speedup(result.speedup_over_default)} the default schedule's)"
                     if result.speedup_over_default else ""), flush=True)
    return 0


def _add_tune_parser(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--trials", type=argtypes.count(0),
                   help="new measurements to make (default 200; quick "
                   f"run {QUICK_TUNE_TRIALS})")
    p.add_argument("--log", help="record file: appended each round, resumed from if it exists")
    p.add_argument("--per-round", dest="per_round", type=argtypes.count(1),
                   help=f"measurements per round (default 64; quick run {QUICK_TUNE_PER_ROUND})")
    p.add_argument("--seed", type=argtypes.seed,
                   help="random seed (a fixed seed makes a run reproducible "
                   "up to measurement noise)")
    p.add_argument("--early-stopping", dest="early_stopping", type=argtypes.count(1), metavar="N",
                   help="stop when the best has not improved for N trials")
    p.add_argument("--population", type=argtypes.count(1), metavar="N",
                   help="evolutionary search population size (default 2048)")
    p.add_argument("--timeout", type=argtypes.seconds(), metavar="SECONDS",
                   help="runner timeout per candidate (default 10; a slower candidate is an error)")
    p.add_argument("--min-repeat-ms", dest="min_repeat_ms", metavar="MS",
                   type=argtypes.nonnegative(MAX_REPEAT_MS),
                   help="each timing repeats the kernel for at least this long (default 100)")
    p.add_argument("--cost-model", dest="cost_model", default="learned", metavar="MODEL",
                   help="'learned' (LightGBM, default), 'random', or a model file saved by "
                   "`ansor costmodel train` (warm start from other tasks' records)")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="also print a mark per candidate and the search's statistics; -vv also "
                   "every failed candidate's error")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")


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
    args = ns.args or spec.default_args
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

    if not _import_user_modules(ns.imports):  # records of unregistered workloads cannot replay
        return 2
    try:
        rep = distill(ns.log, ns.output, top_k=ns.top_k, in_place=ns.in_place)
    except (ValueError, IsADirectoryError) as err:  # -o names the input, or a directory
        msg = str(err).removeprefix("distill: ").replace("pass in_place=True", "use --in-place")
        print(f"ansor records distill: {msg}", file=sys.stderr)
        return 2
    except OSError as err:  # an unusable output path: no space, no permission, ...
        print(f"ansor records distill: cannot write {ns.output or ns.log!r}: "
              f"{err.strerror or err}", file=sys.stderr)
        return 2
    print(f"wrote {rep.written} record(s) to {rep.out_path} (best {ns.top_k} per workload "
          "that replay)")
    print(rep.summary())
    if rep.backup:
        print(f"original kept as {rep.backup}")
    return 0


def _import_user_modules(mods: Sequence[str]) -> bool:
    """Import the modules given with --import (they register the user's workloads)."""
    if mods and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for mod in mods:
        try:
            importlib.import_module(mod)
        except ImportError as err:
            print(f"ansor: --import {mod}: {err}", file=sys.stderr)
            return False
    return True


def _records_verify(ns: argparse.Namespace) -> int:
    from ansor.records import verify_best

    if not _import_user_modules(ns.imports):
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
    q = rs.add_parser("distill", help="keep the best K valid records of each workload that "
                      "replay")
    q.add_argument("log")
    out = q.add_mutually_exclusive_group(required=True)
    out.add_argument("-o", "--output", help="output log (not the input: see --in-place)")
    out.add_argument("--in-place", dest="in_place", action="store_true",
                     help="replace the input, keeping the original as LOG.bak")
    q.add_argument("--top-k", type=argtypes.count(1), default=1,
                   help="records kept per workload (default 1)")
    q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (to register its workloads: records of a workload "
                   "that is not registered cannot replay and are dropped); repeatable")
    q = rs.add_parser("verify", help="rebuild and re-time each workload's best record in a fresh "
                      "process; print recorded vs re-measured time")
    q.add_argument("log")
    q.add_argument("--number", type=argtypes.count(1), default=3,
                   help="runs per timing (default 3)")
    q.add_argument("--repeat", type=argtypes.count(1), default=3, help="timings (default 3)")
    q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (to register its workloads); repeatable")


def _cost_model_arg(spec: str, seed: int | None):
    """The cost model ``--cost-model`` names, or an error message."""
    from cost_model import LGBModel, RandomModel

    if spec == "learned":
        return LGBModel(seed=seed)
    if spec == "random":
        return RandomModel(seed)
    if not os.path.isfile(spec):
        return f"--cost-model {spec!r}: not 'learned', 'random' or a model file"
    try:
        return LGBModel.load(spec, seed=seed)
    except ValueError as err:
        return str(err)


def _costmodel_eval(ns: argparse.Namespace) -> int:
    import warnings

    from cost_model import LGBModel
    from cost_model.evaluate import evaluate_task, format_table
    from cost_model.lgbm_model import samples_from_file

    per_task: dict[str, list] = {}
    desc: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for log in ns.logs:
            for line_key, state, cost in samples_from_file(log, None):
                per_task.setdefault(line_key, []).append((state, cost))
                desc.setdefault(line_key, state.dag.tensors[-1].op.name)
    for w in caught[:3]:
        print(f"warning: {w.message}", file=sys.stderr)
    rows, skipped = [], []
    for key, samples in per_task.items():
        if len(samples) <= ns.train:
            skipped.append(f"{desc[key]} ({len(samples)} records)")
            continue
        rows.append(evaluate_task(samples, lambda: LGBModel(seed=ns.seed), key, desc[key],
                                  train_size=ns.train, split=ns.split, seed=ns.seed, top=ns.top))
    if not rows:
        print(f"ansor costmodel eval: no task has more than --train {ns.train} records "
              f"({', '.join(skipped) or 'no records'})", file=sys.stderr)
        return 1
    print(f"cost model: LightGBM pack-sum, trained on the first {ns.train} records of each task "
          f"({ns.split} split), scored on the rest")
    print(format_table(rows, ns.top))
    if skipped:
        print(f"skipped (too few records): {', '.join(skipped)}")
    return 0


def _costmodel_train(ns: argparse.Namespace) -> int:
    from lightgbm.basic import LightGBMError

    from cost_model import LGBModel

    model = LGBModel(seed=ns.seed)
    logs = ", ".join(ns.logs)
    try:
        added = sum(model.update_from_file(log) for log in ns.logs)
        if not model.num_samples():
            print(f"ansor costmodel train: no usable records in {logs}", file=sys.stderr)
            return 1
        need = model.params.min_train_samples
        if model.num_samples() < need:
            # LightGBM fails on a handful of rows (every feature filtered out): say so instead.
            print(f"ansor costmodel train: {model.num_samples()} usable record(s) in {logs}; "
                  f"training needs at least {need} distinct schedules", file=sys.stderr)
            return 1
        model.train()
    except LightGBMError as err:
        why = str(err).strip().splitlines()[0] if str(err).strip() else "no reason given"
        print(f"ansor costmodel train: the {model.num_samples()} record(s) in {logs} give "
              f"LightGBM nothing to learn from ({why}); tune longer or add logs", file=sys.stderr)
        return 1
    model.save(ns.output)
    print(f"trained on {added} records of {len(model.data)} task(s) in {model.train_seconds:.1f} s "
          f"-> {ns.output} (use: ansor tune WORKLOAD --cost-model {ns.output})")
    return 0


def cmd_costmodel(ns: argparse.Namespace) -> int:
    handler = {"eval": _costmodel_eval, "train": _costmodel_train}.get(ns.costmodel_command)
    if handler is None:
        print("ansor costmodel: give a command: eval or train (see --help)", file=sys.stderr)
        return 2
    missing = [p for p in ns.logs if not os.path.isfile(p)]
    if missing:
        print(f"ansor: no record file {missing[0]!r}", file=sys.stderr)
        return 2
    if not _import_user_modules(ns.imports):
        return 2
    return handler(ns)


def _add_costmodel_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("costmodel", help="evaluate or train the learned cost model on record logs")
    cs = p.add_subparsers(dest="costmodel_command")
    q = cs.add_parser("eval", help="train on each task's first records, print pairwise ranking "
                      "accuracy and top-k recall on the rest")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("--train", type=argtypes.count(1), default=512,
                   help="records per task to train on (default 512)")
    q.add_argument("--split", choices=("chrono", "random"), default="chrono",
                   help="held-out records: the later ones (default) or a random part")
    q.add_argument("--top", type=argtypes.fraction(), default=0.05,
                   help="top share for recall (default 0.05)")
    q.add_argument("--seed", type=argtypes.seed, default=0)
    q = cs.add_parser("train", help="train on every record of the logs and save the model")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("-o", "--output", required=True, help="model file to write")
    q.add_argument("--seed", type=argtypes.seed, default=0)
    for q in cs.choices.values():
        q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="import MODULE first (to register its workloads); repeatable")


def _check_num_threads() -> bool:
    """``$ANSOR_NUM_THREADS`` checked before any work (kernels read it in worker processes,
    where a bad value only showed up later, as failed measurements); its warning (more threads
    than CPUs) printed as one line."""
    import warnings

    from measure.runtime import check_num_threads

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_num_threads()
        except ValueError as err:
            print(f"ansor: {err}", file=sys.stderr)
            return False
    for w in caught:
        print(f"ansor: warning: {w.message}", file=sys.stderr)
    return True


# ---- ansor bench: the benchmark suite (ansor.bench.suite parses its own options) ----------------

def cmd_bench(argv: Sequence[str]) -> int:
    from ansor.bench.suite import main as bench_main

    return bench_main(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["bench"]:
        return cmd_bench(args[1:])
    parser = argparse.ArgumentParser(prog="ansor", description="Template-free auto-scheduler for "
                                     "tensor programs on x86 CPUs. With no command: the default job.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("workloads", help="list the operator library's workloads")
    p = sub.add_parser("build", help="build a workload's default schedule, check it and time it")
    p.add_argument("workload")
    p.add_argument("--args", type=argtypes.shape_args,
                   help="shape arguments, e.g. 1024,1024,1024 (default: the workload's)")
    _add_tune_parser(sub)
    _add_records_parser(sub)
    sub.add_parser("bench", add_help=False, help="the benchmark suite: tune and time workloads "
                   "against numpy, PyTorch and TVM (ansor bench --help)")
    _add_costmodel_parser(sub)
    ns = parser.parse_args(argv)
    runs_kernels = ns.command not in ("workloads", "records") or (
        ns.command == "records" and ns.records_command == "verify")
    if runs_kernels and not _check_num_threads():
        return 2
    handlers = {None: cmd_default, "workloads": cmd_workloads, "build": cmd_build,
                "tune": cmd_tune, "records": cmd_records, "costmodel": cmd_costmodel}
    return handlers[ns.command](ns)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
