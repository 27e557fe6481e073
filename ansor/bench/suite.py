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
# This module is the suite's command line (``ansor bench``, ``benchmarks/suite.py``); its
# docstring above is the ``--help`` text. The suite's pieces: ``workloads`` (what is measured),
# ``inputs`` (inputs and the output check), ``peers`` / ``peers_tvm`` (the peers' formulations),
# ``workers`` (the jobs run in fresh processes), ``timing``, ``sessions`` (tuning sessions and
# curves), ``driver`` (tuning and timing rounds) and ``report`` (Markdown, PNG).
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from measure.checks import MAX_TIMEOUT_S

from .. import argtypes
from . import timing
from .driver import Options, run_curve, run_suite
from .inputs import check_output, make_dag, make_inputs
from .peers import NoFormulation, numpy_impl, torch_impl
from .sessions import add_session, elapsed_times, tuning_summary
from .sessions import best_so_far as _curve
from .workers import worker
from .workloads import SETS, SUITE, parse_workloads

# The suite's pieces under the names this module had before it was split (tests use them).
__all__ = ["SUITE", "NoFormulation", "Options", "_curve", "add_session", "build_parser",
           "check_output", "elapsed_times", "main", "make_dag", "make_inputs", "numpy_impl",
           "parse_workloads", "run_curve", "run_suite", "torch_impl", "tuning_summary"]


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
    ap.add_argument("--trials", type=argtypes.trials, default=200,
                    help="tuning trials per tuner and "
                    "workload (default 200); existing logs count")
    ap.add_argument("--log-dir", help="tuning logs, reused across runs (default OUT/logs)")
    ap.add_argument("--out", help=f"output directory (default {default_out()})")
    ap.add_argument("--threads", type=argtypes.threads, default=2,
                    help="threads for every system (default 2)")
    ap.add_argument("--rounds", type=argtypes.rounds(1), default=5, help="timing rounds (default 5)")
    ap.add_argument("--no-tvm", action="store_true", help="leave TVM MetaSchedule out")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--curve", action="store_true", help="tuning curves instead of the table")
    ap.add_argument("--seed", type=argtypes.seed, help="seed for both tuners")
    ap.add_argument("--per-round", type=argtypes.per_round, default=64,
                    help="measurements per tuning round, both tuners (default 64)")
    ap.add_argument("--repeat", type=argtypes.repeat, default=timing.DEFAULT_REPEAT,
                    help=f"timed repeats per measurement (default {timing.DEFAULT_REPEAT})")
    ap.add_argument("--min-repeat-ms", type=argtypes.nonnegative(MAX_TIMEOUT_S * 1e3),
                    default=timing.DEFAULT_MIN_REPEAT_MS,
                    help=f"minimum length of a repeat (default {timing.DEFAULT_MIN_REPEAT_MS:g})")
    ap.add_argument("--warmup", type=argtypes.nonnegative(MAX_TIMEOUT_S),
                    default=timing.DEFAULT_WARMUP_S,
                    help=f"warm-up seconds before timing (default {timing.DEFAULT_WARMUP_S:g})")
    ap.add_argument("--set", choices=sorted(SETS), default="suite",
                    help="which rows: the suite (default), 'odd' (odd and prime sizes from "
                         "real models) or 'reductions' (reduction-heavy operators of real models)")
    ap.add_argument("--list", action="store_true", help="list the set's workloads")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    return ap


def main(argv: Sequence[str] | None = None, prog: str = "ansor bench") -> int:
    ap = build_parser(prog)
    ns = ap.parse_args(argv)
    if ns.worker:
        timing.emit_result(worker(json.loads(ns.worker)))
        return 0
    if ns.list:
        for w in SETS[ns.set]:
            print(f"{w.name:<18} {w.label:<36} {w.workload}{w.args}")
        return 0
    try:
        workloads = parse_workloads(ns.workloads, SETS[ns.set])
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


def set_main(set_name: str, out: Path, argv: Sequence[str], prog: str) -> int:
    """``main`` on another row set (the benchmark scripts of issues 18 and 19): results under
    ``out`` unless ``--out`` is given; TVM and torch.compile are left out unless asked for
    (``--with-tvm``, ``--with-compile``)."""
    argv = list(argv)
    args = ["--set", set_name]
    if "--out" not in argv:
        args += ["--out", str(out)]
    for flag, off in (("--with-tvm", "--no-tvm"), ("--with-compile", "--no-compile")):
        if flag in argv:
            argv.remove(flag)
        else:
            args.append(off)
    return main(args + argv, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
