"""``ansor records show|distill|verify``: summarise, distill and re-measure tuning logs."""
from __future__ import annotations

import argparse
import os
import sys

from ansor import argtypes
from ansor.records import distill, summarize, verify_best

from .common import fmt_time, import_user_modules
from .options import DEFAULT_MIN_REPEAT_MS, add_measurement_options, add_threads_option

# A re-measured best is a schedule that ran before: a generous cut-off (``verify_best``'s).
VERIFY_TIMEOUT_S = 60.0


def _records_show(ns: argparse.Namespace) -> int:
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
    if not import_user_modules(ns.imports):  # records of unregistered workloads cannot replay
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


def _records_verify(ns: argparse.Namespace) -> int:
    if not import_user_modules(ns.imports):
        return 2
    rows = verify_best(ns.log, number=ns.number, repeat=ns.repeat,
                       run_timeout=VERIFY_TIMEOUT_S if ns.timeout is None else ns.timeout,
                       min_repeat_ms=(DEFAULT_MIN_REPEAT_MS if ns.min_repeat_ms is None
                                      else ns.min_repeat_ms))
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
            print(f"{r.desc:<{width}}  {fmt_time(r.recorded):>11}  {'FAILED':>11}  {'-':>7}  "
                  f"{r.error}{note}")
        else:
            print(f"{r.desc:<{width}}  {fmt_time(r.recorded):>11}  {fmt_time(r.measured):>11}  "
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


def add_parser(sub: argparse._SubParsersAction) -> None:
    """``ansor records``' commands and options."""
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
    q.add_argument("--number", type=argtypes.repeat, default=3,
                   help="runs per timing (default 3)")
    q.add_argument("--repeat", type=argtypes.repeat, default=3, help="timings (default 3)")
    add_measurement_options(q, f"{VERIFY_TIMEOUT_S:g}")
    add_threads_option(q)
    q.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (to register its workloads); repeatable")
