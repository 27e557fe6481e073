"""Does the pre-trained cost model pay? Per workload and seed: the untrained start tuned for 200
trials (its first 64 records are also the untrained 64-trial figure), the pre-trained start for 64
trials, and the pre-trained model's zero-trial pick (``SearchTask.best_guess``); then every best
and numpy are timed alternately in fresh processes with the suite's method.

Issue 19's bars: pre-trained @64 >= 0.9x untrained @200 (time untrained@200 / time pretrained@64),
and the zero-trial pick >= 0.5x untrained @200, on every row.

    python benchmarks/pretrained_eval.py --workloads gemm_512,conv2d,depthwise_conv2d --seeds 1,2,3

Logs go to ``OUT/logs/{untrained,pretrained,guess}/NAME-sSEED.json`` and are resumed; the table
to ``OUT/pretrained_eval.md`` and ``.json``. ``ANSOR_PRETRAINED_MODEL`` picks the model as for
tuning (default: the shipped one); the untrained runs never load it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ansor.bench import timing  # noqa: E402
from ansor.bench.report import fmt_ms, fmt_ratio, write_markdown  # noqa: E402
from ansor.bench.workloads import SETS, parse_workloads  # noqa: E402
from cost_model.pretrained import pretrained_path  # noqa: E402


def job(extra: dict, threads: int) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.workers", json.dumps(extra)], threads,
                            timeout=3600, env=timing.worker_env())


def first_records(src: Path, dst: Path, n: int) -> None:
    """The first ``n`` records of ``src`` (the untrained run as it stood after ``n`` trials)."""
    lines = src.read_text().splitlines(keepends=True) if src.exists() else []
    dst.write_text("".join(lines[:n]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=sorted(SETS), default="suite")
    ap.add_argument("--workloads", required=True, help="comma-separated rows of the set")
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--short", type=int, default=64, help="the pre-trained start's budget (default 64)")
    ap.add_argument("--long", type=int, default=200, help="the untrained start's budget (default 200)")
    ap.add_argument("--per-round", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (default 3)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pretrained_eval"))
    ns = ap.parse_args(argv)
    rows = parse_workloads(ns.workloads, SETS[ns.set])
    seeds = [int(s) for s in ns.seeds.split(",")]
    out = Path(ns.out)
    model = pretrained_path()
    if model is None:
        raise SystemExit("no pre-trained model to evaluate (ANSOR_PRETRAINED_MODEL=none or none shipped)")
    info = timing.machine_info()
    results = []
    names = ("untrained@long", "untrained@short", "pretrained@short", "guess@0", "numpy")
    with tempfile.TemporaryDirectory(prefix="ansor-pretrained-eval-") as tmp:
        for wl in rows:
            ref = Path(tmp) / f"{wl.name}.npy"
            r = job({"job": "ref", "workload": wl.workload, "args": list(wl.args), "ref": str(ref)}, ns.threads)
            if "error" in r:
                print(f"{wl.name}: reference failed: {r['error']}", file=sys.stderr)
                continue
            for seed in seeds:
                logs = {k: out / "logs" / k.split("@")[0] / f"{wl.name}-s{seed}.json" for k in names[:4]}
                logs["untrained@short"] = out / "logs" / "untrained" / f"{wl.name}-s{seed}-first{ns.short}.json"
                for p in logs.values():
                    p.parent.mkdir(parents=True, exist_ok=True)
                base = {"system": "ours", "workload": wl.workload, "args": list(wl.args), "seed": seed,
                        "per_round": ns.per_round}
                info_row: dict = {}
                print(f"{wl.name} seed {seed}: untrained, {ns.long} trials", file=sys.stderr, flush=True)
                info_row["untrained"] = job({**base, "job": "tune", "log": str(logs["untrained@long"]),
                                             "trials": ns.long, "cost_model": "untrained"}, ns.threads)
                first_records(logs["untrained@long"], logs["untrained@short"], ns.short)
                print(f"{wl.name} seed {seed}: pre-trained, {ns.short} trials", file=sys.stderr, flush=True)
                info_row["pretrained"] = job({**base, "job": "tune", "log": str(logs["pretrained@short"]),
                                              "trials": ns.short}, ns.threads)
                if not logs["guess@0"].exists():
                    info_row["guess"] = job({**base, "job": "guess", "log": str(logs["guess@0"])}, ns.threads)
                systems = [(k, "ours", str(logs[k])) for k in names[:4]] + [("numpy", "numpy", None)]
                times: dict = {k: [] for k in names}
                for rnd in range(ns.rounds):
                    k = rnd % len(systems)
                    for name, system, log in systems[k:] + systems[:k]:
                        res = job({"job": "time", "system": system, "workload": wl.workload,
                                   "args": list(wl.args), "log": log, "ref": str(ref), "timing": {}}, ns.threads)
                        if "seconds" in res:
                            times[name].append(res["seconds"])
                        else:
                            print(f"  {name}: {res.get('error') or res.get('skipped')}", file=sys.stderr)
                med = {k: (statistics.median(v) if v else None) for k, v in times.items()}
                results.append({"workload": wl.name, "label": wl.label, "seed": seed, "seconds": med,
                                "rounds": times, "runs": info_row})
                print(f"{wl.name} seed {seed}: " + ", ".join(
                    f"{k} {v * 1e3:.3f} ms" for k, v in med.items() if v), file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    report = {**info, "model": str(model), "short": ns.short, "long": ns.long, "per_round": ns.per_round,
              "threads": ns.threads, "rounds": ns.rounds, "results": results}
    (out / "pretrained_eval.json").write_text(json.dumps(report, indent=1, default=str))

    ms, ratio = fmt_ms, fmt_ratio
    S, L = ns.short, ns.long
    lines = [f"Pre-trained start ({model.name}) against the untrained one; {info['cpu']} (LLVM CPU "
             f"`{info['llvm_cpu']}`), {ns.threads} threads, {info['date']}; each figure the median of "
             f"{ns.rounds} fresh-process timings. Ratios: time of untrained@{L} / time of the other "
             "(>= 1: as fast or faster).", "",
             f"| workload | seed | untrained@{L} ms | untrained@{S} ms | pretrained@{S} ms | zero-trial guess ms "
             f"| numpy ms | pretrained@{S} vs untrained@{L} | guess vs untrained@{L} | untrained@{S} vs untrained@{L} |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        s = r["seconds"]
        u = s["untrained@long"]
        lines.append(f"| {r['label']} | {r['seed']} | {ms(u)} | {ms(s['untrained@short'])} | "
                     f"{ms(s['pretrained@short'])} | {ms(s['guess@0'])} | {ms(s['numpy'])} | "
                     f"{ratio(u, s['pretrained@short'])} | {ratio(u, s['guess@0'])} | "
                     f"{ratio(u, s['untrained@short'])} |")
    write_markdown(out / "pretrained_eval.md", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
