"""Issue 45 item 1: tuned Winograd vs tuned direct convolution, per ResNet-50 3x3 layer and for
the network. Indicative on a shared machine; the lead runs it long on a quiet one.

* ``--error``: the float32 error table of ``compute.ops.winograd`` (numpy model, seconds).
* layers (default): each ResNet-50 3x3 stride-1 conv (+bias+relu, batch 1) as a one-layer ONNX
  model, tuned by ``ansor network tune --winograd`` (the direct task and one task per offered
  tile size, ``--trials`` in all), then each variant's best measured time from the log:

      python benchmarks/winograd.py --trials 200 --out benchmarks/results/winograd

* ``--network resnet-50``: the network tuned once with ``--winograd`` (``--trials``), then
  compiled with the per-layer choice recorded by the solver and with direct convs only (the same
  log: ``layouts=None``), both timed alternately in fresh processes (``ansor.bench.network_compare``),
  outputs checked against the graph reference first.

Logs are resumed (a second run tunes only what is missing). Tables go to ``OUT/winograd*.md``.
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
if str(ROOT / "benchmarks") not in sys.path:  # imported by path rather than run as a script
    sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402

from ansor.bench.timing import machine_info, worker_env  # noqa: E402
from two_anchor import latency_table  # noqa: E402

# (H = W, CI = CO): the 3x3 stride-1 convs of ResNet-50's four stages (batch 1, 224x224 input)
RESNET50_3X3 = [(56, 64), (28, 128), (14, 256), (7, 512)]


def error_table() -> str:
    """The module docstring's table, measured here (numpy float32 model vs float64 direct)."""
    from compute.ops.winograd import ALLOWED_M, winograd_numpy  # noqa: PLC0415
    from tests.workloads import np_conv_channels_last  # noqa: PLC0415

    rng = np.random.default_rng(0)
    lines = ["| layer | " + " | ".join(f"m = {m}" for m in ALLOWED_M) + " | direct float32 |",
             "| --- |" + " ---: |" * (len(ALLOWED_M) + 1)]
    for hw, c in RESNET50_3X3[1:]:
        x = rng.standard_normal((1, hw, hw, c)).astype(np.float32)
        w = (rng.standard_normal((3, 3, c, c)) * math.sqrt(2 / (9 * c))).astype(np.float32)
        ref = np_conv_channels_last(x.astype(np.float64), w.astype(np.float64), 1, 1)
        scale = np.abs(ref).max()
        errs = [np.abs(winograd_numpy(x, w, m, 1) - ref).max() / scale for m in ALLOWED_M]
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        d32 = sum(xp[:, a:a + hw, b:b + hw] @ w[a, b] for a in range(3) for b in range(3))
        errs.append(np.abs(d32 - ref).max() / scale)
        lines.append(f"| {hw}x{hw}, {c} | " + " | ".join(f"{e:.1e}" for e in errs) + " |")
    return "\n".join(lines) + "\n"


def layer_graph(hw: int, c: int):
    from ansor.graph import GraphBuilder  # noqa: PLC0415

    r = np.random.default_rng(hw)
    b = GraphBuilder(f"resnet50-3x3-{hw}")
    x = b.input("x", (1, hw, hw, c))
    w = b.constant((r.standard_normal((3, 3, c, c)) * math.sqrt(2 / (9 * c))).astype(np.float32), "w")
    bias = b.constant(r.standard_normal(c).astype(np.float32) * 0.1, "b")
    return b.build(b.relu(b.conv2d(x, w, bias=bias, padding=1, name="conv")))


def tune(model: str, log: Path, ns: argparse.Namespace, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "ansor.cli", "network", "tune", model, "--winograd", "--trials",
           str(ns.trials), "--per-round", str(ns.per_round), "--population", str(ns.population),
           "--log", str(log), "--rounds", "0", "--no-export", *extra]
    print(" ".join(cmd[2:]), flush=True)
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True)
    log.with_suffix(".tune.txt").write_text(res.stdout + res.stderr)
    tail = res.stdout.strip().splitlines()[-8:]
    print("\n".join(tail), flush=True)
    return {"seconds": round(time.monotonic() - t0, 1), "returncode": res.returncode}


def layers(ns: argparse.Namespace, out: Path) -> str:
    from ansor.graph.layout_tuning import layout_variants, variant_tasks  # noqa: PLC0415
    from ansor.graph.onnx_export import export_onnx  # noqa: PLC0415
    from ansor.records import best_record  # noqa: PLC0415

    rows = ["| layer (HxW, C) | direct (ms) | winograd2 | winograd4 | winograd6 | best | speed-up |",
            "| --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for hw, c in RESNET50_3X3:
        if ns.layers and hw not in ns.layers:
            continue
        g = layer_graph(hw, c)
        onnx_path = out / f"layer{hw}.onnx"
        export_onnx(g, onnx_path)
        log = out / f"layer{hw}.json"
        tune(str(onnx_path), log, ns, [])
        from ansor.frontend import from_onnx  # noqa: PLC0415

        g = from_onnx(str(onnx_path))
        times: dict[str, float] = {}
        for v in layout_variants(g, blocked=False, winograd=True):
            if v.occurrence.group.nodes[0].op != "conv2d":
                continue
            tasks, _ = variant_tasks(g, [v])
            for lay, t in zip(v.layouts, tasks):
                best = best_record(log, t)
                times[lay] = math.inf if best is None else float(best[1].mean_cost)
        direct = times.get("NHWC", math.inf)
        fastest = min(times, key=times.get)
        cells = [f"{times[k] * 1e3:.3f}" if math.isfinite(times.get(k, math.inf)) else "-"
                 for k in ("NHWC", "winograd2", "winograd4", "winograd6")]
        rows.append(f"| {hw}x{hw}, {c} | " + " | ".join(cells) + f" | {fastest} | "
                    f"{direct / times[fastest]:.2f}x |")
    return "\n".join(rows) + "\n"


def network(ns: argparse.Namespace, out: Path) -> str:
    from ansor.bench.network_compare import compare_network  # noqa: PLC0415

    log = out / f"{ns.network}-winograd.json"
    tuning = tune(ns.network, log, ns, [])
    res = compare_network(ns.network, {}, threads=ns.threads, rounds=ns.rounds, log=str(log),
                          say=lambda m: print(m, flush=True),
                          variants={"per-layer choice": {"layouts": "auto"}, "direct only": {"layouts": "nhwc"}},
                          peers=("onnxruntime",))
    return (f"{ns.network}: tuned with --winograd, {ns.trials} trials ({tuning['seconds'] / 60:.1f} min)\n"
            + latency_table(res, ns, "per-layer choice", "direct only"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--error", action="store_true", help="only print the float32 error table")
    ap.add_argument("--network", default=None, help="a zoo network (resnet-50) tuned and timed both ways")
    ap.add_argument("--layers", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="only these layers, by H (e.g. 14,7; default: all four)")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--population", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "winograd"))
    ns = ap.parse_args(argv)
    if ns.error:
        print(error_table())
        return 0
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    head = f"{info['cpu']} (LLVM CPU `{info['llvm_cpu']}`), {info['date']}\n\n"
    md = head + (network(ns, out) if ns.network else layers(ns, out))
    name = f"winograd-{ns.network}.md" if ns.network else "winograd-layers.md"
    (out / name).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
