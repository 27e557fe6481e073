"""Does a search change pay? Tune the same rows with the default search and with one variant
(``SearchParams`` overrides), same seeds and budget, then time both bests and numpy alternately.

For each workload and seed, ``--trials`` trials with the defaults go to
``OUT/logs/default/NAME-sSEED.json`` and with the variant to ``OUT/logs/variant/...`` (resumed
like the suite's logs); then ``--rounds`` rounds time our two bests and numpy, each in a fresh
process with the suite's method (``ansor.bench.timing``), the order rotating every round, every
output checked against the reference first. Medians over rounds go to ``OUT/ablation.json`` and a
table to ``OUT/ablation.md`` (variant / default time: < 1 means the variant found faster code).

    python benchmarks/search_ablation.py --variant pack_inputs=false --workloads gemm_1024,conv2d
    python benchmarks/search_ablation.py --variant imperfect_split_prob=0,awkward_imperfect_split_prob=0 \\
        --set odd --workloads gemm_541_773_1009 --seeds 1,2,3
"""
from __future__ import annotations

import argparse
import dataclasses
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
from sketch.search_params import SearchParams  # noqa: E402


def parse_variant(text: str) -> dict:
    """``name=value,...`` over SearchParams' fields, values typed like the field's default."""
    fields = {f.name: f for f in dataclasses.fields(SearchParams)}
    defaults = SearchParams()
    out: dict = {}
    for item in filter(None, text.split(",")):
        name, _, raw = item.partition("=")
        name = name.strip()
        if name not in fields:
            raise SystemExit(f"--variant: SearchParams has no field {name!r}; fields: {', '.join(fields)}")
        cur = getattr(defaults, name)
        if isinstance(cur, bool):
            if raw.lower() not in ("true", "false", "1", "0"):
                raise SystemExit(f"--variant: {name} takes true or false, got {raw!r}")
            out[name] = raw.lower() in ("true", "1")
        elif isinstance(cur, int) or (cur is None and str(fields[name].type) == "int | None"):
            out[name] = int(raw)  # an optional count (None: scaled or the machine's) given
        elif isinstance(cur, float):
            out[name] = float(raw)
        else:
            raise SystemExit(f"--variant: {name} cannot be set from the command line")
    SearchParams(**out)  # checks the values
    return out


def job(extra: dict, threads: int) -> dict:
    return timing.run_fresh(["-m", "ansor.bench.workers", json.dumps(extra)], threads,
                            timeout=3600, env=timing.worker_env())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", required=True, help="SearchParams overrides: name=value,...")
    ap.add_argument("--set", choices=sorted(SETS), default="suite")
    ap.add_argument("--workloads", required=True, help="comma-separated rows of the set")
    ap.add_argument("--seeds", default="1", help="comma-separated tuning seeds (default 1)")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--per-round", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds (default 5)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ablation"))
    ns = ap.parse_args(argv)
    variant = parse_variant(ns.variant)
    rows = parse_workloads(ns.workloads, SETS[ns.set])
    seeds = [int(s) for s in ns.seeds.split(",")]
    out = Path(ns.out)
    configs = {"default": {}, "variant": variant}
    info = timing.machine_info()
    results = []
    with tempfile.TemporaryDirectory(prefix="ansor-ablation-") as tmp:
        for wl in rows:
            ref = Path(tmp) / f"{wl.name}.npy"
            r = job({"job": "ref", "workload": wl.workload, "args": list(wl.args), "ref": str(ref)}, ns.threads)
            if "error" in r:
                print(f"{wl.name}: reference failed: {r['error']}", file=sys.stderr)
                continue
            flop = r["flop"]
            for seed in seeds:
                logs = {}
                for cfg, params in configs.items():
                    log = out / "logs" / cfg / f"{wl.name}-s{seed}.json"
                    log.parent.mkdir(parents=True, exist_ok=True)
                    logs[cfg] = str(log)
                    print(f"{wl.name} seed {seed}: tuning ({cfg})", file=sys.stderr, flush=True)
                    t = job({"job": "tune", "system": "ours", "workload": wl.workload, "args": list(wl.args),
                             "log": str(log), "trials": ns.trials, "per_round": ns.per_round, "seed": seed,
                             "search_params": params}, ns.threads)
                    if "error" in t:
                        print(f"  tuning failed: {t['error']}", file=sys.stderr)
                systems = [("default", "ours", logs["default"]), ("variant", "ours", logs["variant"]),
                           ("numpy", "numpy", None)]
                times: dict = {name: [] for name, _, _ in systems}
                blas = None
                for rnd in range(ns.rounds):
                    order = systems[rnd % 3:] + systems[:rnd % 3]
                    for name, system, log in order:
                        res = job({"job": "time", "system": system, "workload": wl.workload,
                                   "args": list(wl.args), "log": log, "ref": str(ref),
                                   "timing": {}}, ns.threads)
                        if "seconds" in res:
                            times[name].append(res["seconds"])
                            blas = res.get("blas", blas)
                        else:
                            print(f"  {name}: {res.get('error') or res.get('skipped')}", file=sys.stderr)
                med = {k: (statistics.median(v) if v else None) for k, v in times.items()}
                row = {"workload": wl.name, "label": wl.label, "seed": seed, "flop": flop,
                       "seconds": med, "rounds": times, "blas": blas}
                results.append(row)
                print(f"{wl.name} seed {seed}: " + ", ".join(
                    f"{k} {v * 1e3:.3f} ms" for k, v in med.items() if v), file=sys.stderr, flush=True)
    out.mkdir(parents=True, exist_ok=True)
    report = {**info, "variant": variant, "trials": ns.trials, "per_round": ns.per_round,
              "threads": ns.threads, "rounds": ns.rounds, "results": results}
    (out / "ablation.json").write_text(json.dumps(report, indent=1))
    lines = [f"Variant: `{ns.variant}` against the default search; {ns.trials} trials per run; "
             f"{info['cpu']} (LLVM CPU `{info['llvm_cpu']}`), {ns.threads} threads, {info['date']}.", "",
             "| workload | seed | default ms | variant ms | variant / default | numpy ms | default vs numpy | variant vs numpy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    ms, ratio = fmt_ms, fmt_ratio
    for r in results:
        s = r["seconds"]
        lines.append(f"| {r['label']} | {r['seed']} | {ms(s['default'])} | {ms(s['variant'])} | "
                     f"{ratio(s['variant'], s['default'])} | {ms(s['numpy'])} | "
                     f"{ratio(s['numpy'], s['default'])} | {ratio(s['numpy'], s['variant'])} |")
    write_markdown(out / "ablation.md", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
