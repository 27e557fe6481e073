"""Issue 20's comparison: a network tuned with the same trial budget three ways, end to end.

(a) fixed NHWC, tuned and compiled without weight layout rewrite (every kernel copies its packed
    weight on each call); (b) NHWC with weight layout rewrite (the default); (c) (b) plus
    graph-level layout tuning (every conv also tuned in NCHW[x]c, transforms measured, layouts
    solved over the network: ``network tune --layout-tuning``). Each is its own log, tuned from
    scratch by ``ansor network tune`` with ``--trials``; then the three compiled networks and
    onnxruntime are timed alternately, each in a fresh process, every output checked against the
    graph reference first (``ansor.bench.network_compare``), median over ``--rounds``.

    python benchmarks/layout_modes.py resnet-18 --trials 768 --out benchmarks/results/layout_modes

Logs are resumed (a second run tunes only what is missing). The table goes to
``OUT/layout_modes.md`` and ``.json``, with the layouts chosen in (c) and their transform count.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from ansor.bench.network_compare import load_graph  # noqa: E402
from ansor.bench.timing import machine_info, run_fresh, worker_env  # noqa: E402
from ansor.graph import run as reference_run  # noqa: E402

MODES = {"a": ("fixed NHWC, no weight layout rewrite", ["--no-layout-rewrite"], "ansor-no-rewrite", "nhwc"),
         "b": ("NHWC + weight layout rewrite", [], "ansor", "nhwc"),
         "c": ("+ graph-level layout tuning", ["--layout-tuning"], "ansor", "auto")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--trials", type=int, default=768)
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--population", type=int, default=512, help="search population (default 512)")
    ap.add_argument("--image-size", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", default="abc")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "layout_modes"))
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    opts = {"image_size": ns.image_size} if ns.image_size else {}
    tag = Path(ns.model).stem if ns.model.endswith(".onnx") else ns.model.replace("/", "_")
    logs, tuning = {}, {}
    for m in ns.modes:
        label, flags, _, _ = MODES[m]
        logs[m] = out / f"{tag}-{m}.json"
        cmd = [sys.executable, "-m", "ansor.cli", "network", "tune", ns.model, "--trials", str(ns.trials),
               "--per-round", str(ns.per_round), "--population", str(ns.population), "--log", str(logs[m]),
               "--rounds", "0", *flags]
        if ns.image_size:
            cmd += ["--image-size", str(ns.image_size)]
        print(f"({m}) {label}: {' '.join(cmd[2:])}", flush=True)
        t0 = time.monotonic()
        res = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, text=True)
        (out / f"{tag}-{m}.tune.txt").write_text(res.stdout + res.stderr)
        tuning[m] = {"seconds": round(time.monotonic() - t0, 1), "returncode": res.returncode,
                     "tail": res.stdout.strip().splitlines()[-12:]}
        print("\n".join(tuning[m]["tail"]), flush=True)
    graph = load_graph(ns.model, opts)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(t.shape).astype(t.dtype) for n, t in graph.inputs.items()}
    ref = reference_run(graph, feeds)
    systems = [(m, MODES[m][2], str(logs[m]), MODES[m][3]) for m in ns.modes] + [("onnxruntime", "onnxruntime", None, None)]
    times: dict = {name: [] for name, *_ in systems}
    errors: dict = {}
    with tempfile.TemporaryDirectory(prefix="ansor-layout-modes-") as tmp:
        data = Path(tmp) / "data.npz"
        np.savez(data, **{f"in{i}": v for i, v in enumerate(feeds.values())},
                 **{f"out{i}": ref[o] for i, o in enumerate(graph.outputs)})
        onnx_path = ns.model if ns.model.endswith(".onnx") else str(Path(tmp) / "model.onnx")
        if not ns.model.endswith(".onnx"):
            from ansor.graph.onnx_export import export_onnx

            export_onnx(graph, onnx_path)
        for r in range(ns.rounds):
            order = systems if r % 2 == 0 else list(reversed(systems))
            for name, system, log, layouts in order:
                job = {"model": ns.model, "options": opts, "data": str(data), "threads": ns.threads,
                       "log": log, "onnx_path": onnx_path, "timing": {}, "system": system,
                       "layouts": layouts}
                jf = Path(tmp) / f"job-{name}.json"
                jf.write_text(json.dumps(job))
                res = run_fresh(["-m", "ansor.bench.network_compare", str(jf)], ns.threads, env=worker_env())
                if "seconds" in res:
                    times[name].append(res["seconds"])
                else:
                    errors[name] = res.get("error")
                print(f"round {r + 1}: {name} {res.get('seconds', float('nan')) * 1e3:.3f} ms", flush=True)
    med = {k: (statistics.median(v) if v else None) for k, v in times.items()}
    info = machine_info()
    report = {**info, "model": ns.model, "trials": ns.trials, "per_round": ns.per_round,
              "threads": ns.threads, "rounds": ns.rounds, "tuning": tuning, "seconds": med,
              "all": times, "errors": errors}
    (out / f"{tag}-layout_modes.json").write_text(json.dumps(report, indent=1, default=str))
    ort = med.get("onnxruntime")
    lines = [f"{ns.model}: {ns.trials} trials per mode, {info['cpu']} (LLVM CPU `{info['llvm_cpu']}`), "
             f"{ns.threads} threads, {info['date']}, median of {ns.rounds} alternating fresh-process rounds.",
             "", "| mode | latency (ms) | vs onnxruntime | tuning time |", "| --- | ---: | ---: | ---: |"]
    for m in ns.modes:
        v = med.get(m)
        lines.append(f"| ({m}) {MODES[m][0]} | {v * 1e3:.3f} | "
                     f"{(ort / v if v and ort else float('nan')):.2f}x | {tuning[m]['seconds'] / 60:.1f} min |"
                     if v else f"| ({m}) {MODES[m][0]} | - ({errors.get(m)}) | | |")
    if ort:
        lines.append(f"| onnxruntime | {ort * 1e3:.3f} | 1.00x | |")
    md = "\n".join(lines) + "\n"
    (out / f"{tag}-layout_modes.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
