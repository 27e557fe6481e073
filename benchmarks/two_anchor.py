"""Issue 45 item 2: two-anchor fusion (a 1x1 conv and the depthwise conv it feeds, the depthwise
and the 1x1 projection after it, as one kernel) against the two separate kernels, per pair of a
network and for the whole network. Indicative on a shared machine; the lead runs it long on a
quiet one.

1. The network is tuned once with ``ansor network tune MODEL --fuse-pairs`` (the separate tasks
   and one task per distinct fused pair, named ``conv1x1+dwconv3x3 1x28x28x144``, sharing
   ``--trials``; the log is resumed, so a second run tunes only what is missing).
2. Per pair: the fused task's best measured time against the sum of the two separate tasks'
   best times (``two_anchor.choose_pairs``), the speed-up and its geometric mean over the pairs
   measured both ways.
3. Unless ``--no-network``: the network compiled with the measured choice (``fuse_pairs="auto"``)
   and with every pair separate (``None``), from the same log, timed alternately in fresh
   processes (``ansor.bench.network_compare``), outputs checked against the graph reference.

    python benchmarks/two_anchor.py --network mobilenet-v2 --trials 2000 --out benchmarks/results/two_anchor

Tables go to ``OUT/two_anchor-NETWORK.md``.
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ansor.bench.timing import machine_info, worker_env  # noqa: E402


def tune(ns: argparse.Namespace, log: Path) -> dict:
    cmd = [sys.executable, "-m", "ansor.cli", "network", "tune", ns.network, "--fuse-pairs",
           "--trials", str(ns.trials), "--per-round", str(ns.per_round), "--population", str(ns.population),
           "--log", str(log), "--rounds", "0", "--no-export", *ns.model_args]
    print(" ".join(cmd[2:]), flush=True)
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True)
    log.with_suffix(".tune.txt").write_text(res.stdout + res.stderr)
    print("\n".join(res.stdout.strip().splitlines()[-12:]), flush=True)
    if res.returncode:
        print(res.stderr[-2000:], file=sys.stderr)
    return {"seconds": round(time.monotonic() - t0, 1), "returncode": res.returncode}


def pair_table(graph, log: Path) -> str:
    from ansor.graph.plan import plan_network  # noqa: PLC0415
    from ansor.graph.two_anchor import choose_pairs, pair_candidates  # noqa: PLC0415

    plan = plan_network(graph)
    graph = plan.graph  # scales folded into their convs (``scale_fold``): the groups' graph
    choices = choose_pairs(graph, plan.groups, pair_candidates(graph, plan.groups), log)
    rows = ["| pair | groups | fused (ms) | separate (ms) | speed-up | runs |", "| --- | --- | ---: | ---: | ---: | --- |"]
    ratios = []
    for c in choices:
        k = c.candidate
        shape = "x".join(map(str, k.occurrence.group.nodes[-1].type.shape))
        both = math.isfinite(c.fused_seconds) and math.isfinite(c.separate_seconds)
        if both:
            ratios.append(c.separate_seconds / c.fused_seconds)
        cells = [f"{x * 1e3:.4f}" if math.isfinite(x) else "-" for x in (c.fused_seconds, c.separate_seconds)]
        rows.append(f"| {'+'.join(k.kinds)} {shape} | {k.producer}, {k.consumer} | {cells[0]} | {cells[1]} | "
                    + (f"{ratios[-1]:.2f}x" if both else "-") + f" | {'fused' if c.fused else 'separate'} |")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
    return ("\n".join(rows) + f"\n\n{len(ratios)} pair(s) measured both ways: geometric mean speed-up "
            f"{geo:.3f}x, best {max(ratios, default=math.nan):.2f}x, worst {min(ratios, default=math.nan):.2f}x; "
            f"{sum(c.fused for c in choices)} run fused (non-overlapping, largest saving first)\n")


def network_times(ns: argparse.Namespace, graph, log: Path) -> str:
    from ansor.bench.network_compare import compare_network  # noqa: PLC0415

    res = compare_network(ns.network, ns.options, threads=ns.threads, rounds=ns.rounds, log=str(log),
                          say=lambda m: print(m, flush=True),
                          variants={"measured choice": {"fuse_pairs": "auto"}, "all separate": {"fuse_pairs": "none"}},
                          peers=("onnxruntime",))
    return latency_table(res, ns, "measured choice", "all separate")


def latency_table(res: dict, ns: argparse.Namespace, ours: str, base: str) -> str:
    """The medians of ``compare_network``, each against onnxruntime, and ``ours`` against ``base``."""
    med = {k: v["seconds"] if v["seconds"] is not None else math.nan for k, v in res.items()}
    ort = med.get("onnxruntime", math.nan)
    return (f"\n{ns.threads} threads, median of {ns.rounds} alternating rounds (fresh processes)\n\n"
            "| compiled | latency (ms) | onnxruntime / it |\n| --- | ---: | ---: |\n"
            + "".join(f"| {k} | {v * 1e3:.3f} | {ort / v:.2f}x |\n" for k, v in med.items())
            + f"\n{ours} against {base}: {med[base] / med[ours]:.3f}x\n"
            + "".join(f"{k}: {v['error']}\n" for k, v in res.items() if "error" in v))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--network", default="mobilenet-v2", help="a zoo network (default mobilenet-v2)")
    ap.add_argument("--image-size", type=int, default=None, help="the CNN's image size (default: the zoo's)")
    ap.add_argument("--trials", type=int, default=2000, help="over every task, separate and fused")
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--population", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-network", action="store_true", help="only the per-pair table")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "two_anchor"))
    ns = ap.parse_args(argv)
    ns.options = {} if ns.image_size is None else {"image_size": ns.image_size}
    ns.model_args = [] if ns.image_size is None else ["--image-size", str(ns.image_size)]
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    from ansor.bench.network_compare import load_graph  # noqa: PLC0415

    tag = ns.network + ("" if ns.image_size is None else f"-{ns.image_size}")
    log = out / f"{tag}-two-anchor.json"
    tuning = tune(ns, log)
    graph = load_graph(ns.network, ns.options)
    info = machine_info()
    md = (f"{info['cpu']} (LLVM CPU `{info['llvm_cpu']}`), {info['date']}\n\n{tag}: tuned with --fuse-pairs, "
          f"{ns.trials} trials ({tuning['seconds'] / 60:.1f} min)\n\n" + pair_table(graph, log))
    if not ns.no_network:
        md += network_times(ns, graph, log)
    (out / f"two_anchor-{tag}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
