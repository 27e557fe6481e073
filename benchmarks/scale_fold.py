"""Issue 45: the squeeze-excite scale folded into the projection conv's weight
(``ansor/graph/scale_fold.py``) against the scale as its own kernel, on a network tuned once.

1. Per block: which products are folded, the activation values the separate multiply reads and
   writes, and the weight products computed instead (the rule: fold where the weight is smaller).
2. The network compiled from one log both ways (``compile_network(fold_scales=...)``: the
   projection conv is the same task either way, so one log serves both), with onnxruntime in the
   same alternation of fresh processes (``ansor.bench.network_compare``), outputs checked first.

    python benchmarks/scale_fold.py --network efficientnet-b0 --log LOG --rounds 5 --out DIR

Tables go to ``OUT/scale_fold-NETWORK.md``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from ansor.bench.timing import machine_info  # noqa: E402
from two_anchor import latency_table  # noqa: E402


def block_table(graph) -> str:
    """Per conv reading a per-channel product: folded or kept, and the values each way."""
    from ansor.graph.scale_fold import channel_vector, fold_channel_scales  # noqa: PLC0415

    folded = {n.name for n in fold_channel_scales(graph).nodes if n.op == "conv2d"
              and n.inputs[1] not in graph.constants}
    producers = {n.name: n for n in graph.nodes}
    rows = ["| conv | input | weight | activation values (multiply) | weight products (fold) | |",
            "| --- | --- | --- | ---: | ---: | --- |"]
    moved = kept = 0
    for n in graph.nodes:
        x = n.inputs[0] if n.op == "conv2d" else None
        if x is None or x not in producers or producers[x].op != "mul":
            continue
        xs, ws = graph.type_of(x).shape, graph.type_of(n.inputs[1]).shape
        if xs[1] * xs[2] == 1 or not any(channel_vector(graph.type_of(v).shape, xs[-1])
                                         for v in producers[x].inputs):
            continue  # an activation's own product (SiLU), not a per-channel scale
        act, wts = xs[0] * xs[1] * xs[2] * xs[3], ws[0] * ws[1] * ws[2] * ws[3]
        done = n.name in folded
        moved += act if done else 0
        kept += 0 if done else act
        rows.append(f"| {n.name} | {'x'.join(map(str, xs))} | {'x'.join(map(str, ws))} | {act:,} | {wts:,} | "
                    f"{'folded' if done else 'kept'} |")
    return ("\n".join(rows) + f"\n\nfolded: {moved:,} activation values per inference no longer read and "
            f"written by a multiply kernel; kept: {kept:,}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--network", default="efficientnet-b0")
    ap.add_argument("--log", required=True, help="a tuning log of the network (ansor network tune)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scale_fold"))
    ns = ap.parse_args(argv)
    from ansor import networks  # noqa: PLC0415
    from ansor.bench.network_compare import compare_network  # noqa: PLC0415

    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    md = f"{info['cpu']} (LLVM CPU `{info['llvm_cpu']}`), {info['date']}\n\n" + block_table(networks.get(ns.network))
    res = compare_network(ns.network, {}, threads=ns.threads, rounds=ns.rounds, log=ns.log,
                          say=lambda m: print(m, flush=True),
                          variants={"scales folded": {}, "scales as kernels": {"fold_scales": "none"}},
                          peers=("onnxruntime",))
    md += latency_table(res, ns, "scales folded", "scales as kernels")
    (out / f"scale_fold-{ns.network}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
