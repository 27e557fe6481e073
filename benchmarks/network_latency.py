"""End-to-end network latency: ours (untuned, or tuned with a log) against onnxruntime and PyTorch eager.

Each system runs in a fresh process with the same number of threads, systems alternate over the
rounds, and the figure is the median over rounds; every worker checks its outputs against the
graph reference before timing (``ansor.bench.network_compare``). onnxruntime runs the model file
for an ``.onnx`` MODEL and the graph written as ONNX for a zoo network; PyTorch runs the graph
op by op, images channels-last. With ``--log NET=LOG`` the network is timed untuned and tuned in
the same alternation; the ratio columns are for the tuned one (the untuned one without a log).
The executor's own overhead per inference (``lib.benchmark``: the network with every kernel
replaced by an empty function) is measured once per network.

With ``--plot OUT.png`` (matplotlib), one panel per network: the estimated latency against trials
from ``LOG.latency.tsv`` (the tuner's history, if the log has one) beside the measured latency of
every system.

Usage:
  python benchmarks/network_latency.py [--networks resnet-50 mobilenet-v2 bert-base-layer]
      [--threads 2] [--rounds 5] [--log NAME=LOG ...] [--json OUT] [--plot OUT.png]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ansor.bench.network_compare import SYSTEMS, compare_network, load_graph  # noqa: E402
from ansor.bench.timing import machine_info, run_fresh, worker_env  # noqa: E402

DEFAULT_NETWORKS = ["resnet-50", "mobilenet-v2", "bert-base-layer"]


def executor_overhead(model: str, threads: int, log: str | None) -> dict:
    """``lib.benchmark()`` of the compiled network in a fresh process: mean seconds per inference
    and the executor's overhead (its share of that)."""
    code = ("import sys, json; from ansor.bench.network_compare import load_graph; "
            "from ansor.graph.executor import compile_network; from ansor.bench.timing import emit_result; "
            "lib = compile_network(load_graph(sys.argv[1]), log_file=(sys.argv[2] or None), verbose=False); "
            "emit_result(lib.benchmark())")
    return run_fresh(["-c", code, model, log or ""], threads, env=worker_env())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--networks", nargs="+", default=DEFAULT_NETWORKS,
                    help="zoo names or .onnx paths (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", action="append", default=[], metavar="NAME=LOG",
                    help="tuning records for a network (its schedules; the rest untuned)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--plot", default=None, help="the estimated latency history beside the measured figures")
    args = ap.parse_args(argv)
    logs = dict(item.split("=", 1) for item in args.log)
    report = {"machine": machine_info(), "threads": args.threads, "rounds": args.rounds, "networks": {}}
    print(f"# {report['machine']['cpu']} ({report['machine']['llvm_cpu']}), {args.threads} thread(s), "
          f"{args.rounds} rounds, {report['machine']['date']}", flush=True)
    print("| network | ansor untuned (ms) | ansor tuned (ms) | onnxruntime (ms) | PyTorch (ms) | tuned / onnxruntime "
          "| tuned / PyTorch | executor overhead |", flush=True)
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for net in args.networks:
        load_graph(net)  # a bad name fails here, before any timing
        # with a log: the untuned network too, in the same alternation (before and after)
        systems = ("ansor-untuned", *SYSTEMS) if net in logs else SYSTEMS
        res = compare_network(net, None, systems, threads=args.threads, rounds=args.rounds, log=logs.get(net))
        ov = executor_overhead(net, args.threads, logs.get(net))
        res["executor"] = ov
        report["networks"][net] = res
        ms = {s: (None if res[s]["seconds"] is None else res[s]["seconds"] * 1e3) for s in systems}
        if net not in logs:  # the untuned network is the "ansor" run
            ms["ansor-untuned"], ms["ansor"] = ms["ansor"], None

        def cell(s: str) -> str:
            if ms[s] is not None:
                return f"{ms[s]:.2f}"
            return "-" if s not in res else f"- ({res[s].get('error', '?')[:60]})"

        ours = ms["ansor"] or ms["ansor-untuned"]

        def ratio(s: str) -> str:
            return f"{ours / ms[s]:.2f}x" if ours and ms[s] else "-"

        over = (f"{ov['overhead'] * 1e6:.1f} us ({100 * ov['overhead_share']:.2f}%)"
                if "overhead" in ov else ov.get("error", "-"))
        tag = f"{net} ({os.path.basename(logs[net])})" if net in logs else net
        print(f"| {tag} | {cell('ansor-untuned')} | {cell('ansor')} | {cell('onnxruntime')} | {cell('torch')} "
              f"| {ratio('onnxruntime')} | {ratio('torch')} | {over} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        plot(report, logs, args.plot)
    return 0


_STYLE = {"ansor": ("ours tuned, measured", "-", "C0"), "ansor-untuned": ("ours untuned", ":", "grey"),
          "onnxruntime": ("onnxruntime", "--", "C1"), "torch": ("PyTorch eager", "-.", "C3")}


def plot(report: dict, logs: dict, out: str) -> None:
    """One panel per network: the estimated latency history and each system's measured latency."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    from ansor.scheduler_progress import read_latency_history

    nets = list(report["networks"])
    fig, axes = plt.subplots(1, len(nets), figsize=(4 * len(nets), 3.3), squeeze=False)
    for ax, net in zip(axes[0], nets):
        res = report["networks"][net]
        hist_path = logs.get(net, "") + ".latency.tsv"
        if net in logs and os.path.isfile(hist_path):
            rows = [r for r in read_latency_history(hist_path)
                    if r["estimated_latency_ms"] == r["estimated_latency_ms"]]
            ax.plot([r["trials"] for r in rows], [r["estimated_latency_ms"] for r in rows], "-",
                    color="C2", label="ours: estimated (sum of tasks)")
        for system, (label, style, color) in _STYLE.items():
            sec = res.get(system, {}).get("seconds")
            if sec:
                ax.axhline(sec * 1e3, linestyle=style, color=color, label=label)
        ax.set(title=net, xlabel="trials", ylabel="ms per inference", ylim=(0, None))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
