"""Few trials against many: one network compiled from several tuning logs, timed in one alternation.

Issue 44 asks that 10 trials per task come within 10% of what 100 per task give (3 seeds,
median), and that the task scheduler's strategies be compared on measured latency. Each run's
own closing comparison is taken at another time, and on this VM a network's median moves 5-10%
between alternations minutes apart; so this compiles the network once per log (each with the
choices recorded beside it: fused pairs, Winograd and blocked layouts, ``compile_network``'s
``"auto"``) and times them all, and onnxruntime, in the same alternating fresh-process rounds
(``ansor.bench.network_compare.compare_network`` with one variant per log).

Reported: each log's median latency, onnxruntime / it, and it against the ``--reference`` log;
then, per group of logs named ``GROUP-...`` (``10-seed0``, ``10-seed1``...), the median of the
group's latencies against the reference.

Usage (a quiet machine):
  python benchmarks/few_trials.py --network mobilenet-v2 --reference 100=mbv2.json \\
      --log 10-seed0=s0/t.json --log 10-seed1=s1/t.json --log 10-seed2=s2/t.json [--rounds 5] [--json OUT]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _named(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=LOG, got {text!r}")
    if not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"{path}: no such file")
    return name, path


def measure(ns: argparse.Namespace) -> dict[str, Any]:
    """``compare_network``'s result for the reference and every log, with the machine named."""
    from ansor.bench.network_compare import compare_network
    from ansor.bench.timing import machine_info

    logs = dict([ns.reference, *ns.log])
    if len(logs) != 1 + len(ns.log):
        raise SystemExit("few_trials: every log needs its own name")
    options = {} if ns.image_size is None else {"image_size": ns.image_size}
    res = compare_network(ns.network, options, threads=ns.threads, rounds=ns.rounds,
                          say=lambda m: print(m, file=sys.stderr, flush=True),
                          variants={name: {"log": os.path.abspath(path)} for name, path in logs.items()},
                          peers=() if ns.no_peer else ("onnxruntime",))
    return {"machine": machine_info(), "network": ns.network, "threads": ns.threads, "rounds": ns.rounds,
            "reference": ns.reference[0], "logs": logs, "results": res}


def markdown(rep: dict[str, Any]) -> str:
    m, res, ref = rep["machine"], rep["results"], rep["reference"]
    sec = {k: v["seconds"] if v.get("seconds") is not None else math.nan for k, v in res.items()}
    ort = sec.get("onnxruntime", math.nan)
    lines = [f"# {rep['network']}: compiled from each log, one alternation", "",
             f"{m['cpu']} ({m['llvm_cpu']}), {rep['threads']} thread(s), {m['date']}; median of "
             f"{rep['rounds']} alternating rounds, a fresh process each", "",
             f"| compiled from | latency (ms) | onnxruntime / it | it / {ref} |", "| --- | ---: | ---: | ---: |"]
    for k, v in sec.items():
        lines.append(f"| {k} | {v * 1e3:.3f} | {ort / v:.2f}x | {v / sec[ref]:.3f} |")
    groups: dict[str, list[float]] = {}
    for k in rep["logs"]:
        if k != ref and "-" in k:
            groups.setdefault(k.split("-", 1)[0], []).append(sec[k])
    if groups:
        lines += ["", f"| group | logs | median latency (ms) | median / {ref} |", "| --- | ---: | ---: | ---: |"]
        for g, vs in groups.items():
            med = statistics.median(vs)
            lines.append(f"| {g} | {len(vs)} | {med * 1e3:.3f} | {med / sec[ref]:.3f} |")
    lines += [f"{k}: {v['error']}" for k, v in res.items() if "error" in v]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", required=True, help="a zoo network")
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--reference", type=_named, required=True, metavar="NAME=LOG",
                    help="the log the others are compared with (e.g. 100 trials per task)")
    ap.add_argument("--log", type=_named, action="append", default=[], metavar="NAME=LOG",
                    help="another log; NAME 'GROUP-x' groups it (median of the group)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-peer", action="store_true", help="leave onnxruntime out")
    ap.add_argument("--json", default=None)
    ns = ap.parse_args(argv)
    rep = measure(ns)
    from ansor.bench.report import emit  # noqa: PLC0415 - lazy, as the script's other imports

    emit(rep, markdown(rep), ns.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
