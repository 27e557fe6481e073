"""Task schedulers compared on one network: estimated and measured latency against trials.

Input: the logs of ``ansor network tune NET --strategy S --seed K --log LOG`` runs with the same
trial budget (e.g. gradient and round-robin, two seeds each). For each run:

* the estimated latency (sum of weight x best task latency) after every round, read from the
  ``LOG.latency.tsv`` history the tuner wrote;
* the measured latency at checkpoints: the network compiled from the log's first T trials (with
  the re-measurements of bests made before trial T+1; at the last checkpoint, the whole log),
  exported once, then loaded and timed in a fresh process (``NetworkModule.benchmark``). Each
  round times every run at every checkpoint once; the figure is the median over ``--rounds``.

Usage:
  python benchmarks/scheduler_curves.py --network resnet-18 \\
      --log gradient-0=r18-gradient-0.json --log round-robin-0=r18-round-robin-0.json ... \\
      [--checkpoints 108 216 324 432] [--rounds 3] [--threads 2] [--json OUT] [--plot OUT.png]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ansor.bench.network_compare import load_graph  # noqa: E402
from ansor.bench.timing import machine_info, run_fresh, worker_env  # noqa: E402
from ansor.graph.executor import compile_network  # noqa: E402
from ansor.scheduler_progress import read_latency_history  # noqa: E402

_TIME = ("import sys; from ansor.graph.executor import load_module; "
         "from ansor.bench.timing import emit_result; "
         "emit_result(load_module(sys.argv[1]).benchmark(repeat=5))")


def log_prefix(path: str, trials: int | None) -> bytes:
    """The lines of ``path`` before its (trials+1)-th new schedule (all lines: ``trials`` None).
    A schedule's later lines (re-measurements confirming a best) are not trials."""
    seen: set[tuple[str, str]] = set()
    out = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            rec = json.loads(raw)
            key = (rec["input"]["workload_key"], json.dumps(rec["input"]["steps"]))
            if key not in seen:
                if trials is not None and len(seen) == trials:
                    break
                seen.add(key)
            out.append(raw)
    return b"".join(out)


def trial_count(path: str) -> int:
    return len({(r["input"]["workload_key"], json.dumps(r["input"]["steps"]))
                for r in map(json.loads, filter(bytes.strip, open(path, "rb")))})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", required=True)
    ap.add_argument("--log", action="append", required=True, metavar="NAME=LOG")
    ap.add_argument("--checkpoints", type=int, nargs="*", default=None,
                    help="trial counts (default: quarters of the shortest run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("ANSOR_NUM_THREADS", os.cpu_count() or 1)))
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    runs = dict(spec.split("=", 1) for spec in args.log)
    total = min(trial_count(p) for p in runs.values())
    checkpoints = args.checkpoints or [total * k // 4 for k in (1, 2, 3, 4)]
    graph = load_graph(args.network)
    tmp = tempfile.mkdtemp(prefix="sched-curves-")
    modules: dict[tuple[str, int], str] = {}
    for name, path in runs.items():
        for t in checkpoints:
            prefix = os.path.join(tmp, f"{name}-{t}.json")
            with open(prefix, "wb") as f:
                f.write(log_prefix(path, None if t >= trial_count(path) else t))
            mod = compile_network(graph, prefix, verbose=False)
            modules[(name, t)] = str(mod.export(os.path.join(tmp, f"{name}-{t}")))
            print(f"compiled {name} at {t} trials", flush=True)
    measured: dict[str, dict[int, list[float]]] = {n: {t: [] for t in checkpoints} for n in runs}
    # Rounds outermost: every (run, checkpoint) is timed once per round, so a drift of the
    # machine's speed over the minutes this takes lands on all of them alike.
    for _ in range(args.rounds):
        for t in checkpoints:
            for name in runs:
                r = run_fresh(["-c", _TIME, modules[(name, t)]], args.threads, env=worker_env())
                if "error" in r:
                    print(f"{name} at {t}: {r['error']}", file=sys.stderr)
                    continue
                measured[name][t].append(r["mean"] * 1e3)
    estimated = {}
    for name, path in runs.items():
        hist = read_latency_history(path + ".latency.tsv")
        estimated[name] = [(int(h["trials"]), float(h["estimated_latency_ms"])) for h in hist
                           if h["estimated_latency_ms"] == h["estimated_latency_ms"]]
    info = machine_info()
    print(f"\n{args.network}, {info.get('cpu', '?')}, {args.threads} threads; measured: median of "
          f"{args.rounds} fresh-process runs (ms)")
    head = "| run | " + " | ".join(f"est. @{t}" for t in checkpoints) + " | " + \
        " | ".join(f"measured @{t}" for t in checkpoints) + " |"
    print(head)
    print("|---|" + "---:|" * (2 * len(checkpoints)))
    rows = {}
    for name in runs:
        est = []
        for t in checkpoints:
            before = [e for n, e in estimated[name] if n <= t]
            est.append(before[-1] if before else None)
        meas = [statistics.median(measured[name][t]) if measured[name][t] else None for t in checkpoints]
        rows[name] = {"estimated": est, "measured": meas}
        print(f"| {name} | " + " | ".join("-" if e is None else f"{e:.2f}" for e in est) + " | " +
              " | ".join("-" if m is None else f"{m:.2f}" for m in meas) + " |")
    result = {"network": args.network, "machine": info, "threads": args.threads,
              "checkpoints": checkpoints, "rounds": args.rounds, "rows": rows,
              "estimated_history": estimated,
              "measured_all": {n: {str(t): v for t, v in d.items()} for n, d in measured.items()}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no plot", file=sys.stderr)
            return 0
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        for name in runs:
            style = "-" if name.startswith("gradient") else "--"
            xs, ys = zip(*estimated[name]) if estimated[name] else ((), ())
            a.plot(xs, ys, style, label=name)
            ms = rows[name]["measured"]
            b.plot([t for t, m in zip(checkpoints, ms) if m], [m for m in ms if m], style, marker="o", label=name)
        a.set(title=f"{args.network}: estimated latency", xlabel="trials", ylabel="ms")
        b.set(title="measured (compiled network)", xlabel="trials", ylabel="ms")
        a.legend()
        b.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
