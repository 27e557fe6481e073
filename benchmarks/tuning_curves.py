"""Tuning curves: the learned cost model against the random model, same budget, same seeds.

For each workload, model and seed this runs ``ansor tune`` in a fresh process (64 measurements per
round, Ansor's default) into its own log under ``--log-dir`` - an existing log is resumed, so a
killed run or a longer ``--trials`` only measures what is missing - and reads the curve back from
the log: the best GFLOPS after each measured trial. It prints, per workload, the numbers the cost
model issue asks for:

* each model's best after ``--trials`` (median over seeds) and their ratio;
* how many trials the learned model needed to reach the random model's final best (per seed).

Usage: ``python benchmarks/tuning_curves.py --workloads gemm,conv2d --seeds 0,1,2 --trials 300``
Output: ``--out`` JSON (every curve) and a Markdown table on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

WORKLOADS = {  # short name -> (registered workload, args)
    "gemm": ("matmul", (1024, 1024, 1024)),
    "gemm512": ("matmul", (512, 512, 512)),
    "conv2d": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1)),
    "conv2d_bias_relu": ("conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1)),
}


# Random candidates of a 1024^3 GEMM can take seconds per call; a 10 s timeout spent on each of them
# would double the experiment's length without changing which programs are fast.
RUNNER_TIMEOUT = 3.0
MIN_REPEAT_MS = 50


def curve_from_log(path: str) -> list[float]:
    """Best GFLOPS after each record of the log, in the order measured (0 until one succeeds)."""
    from measure.record import LineWarner, iter_lines

    best, out = 0.0, []
    for line in iter_lines(path, LineWarner(path)):
        if line.is_valid and line.flop:
            best = max(best, line.flop / line.result.mean_cost / 1e9)
        out.append(best)
    return out


def run_tune(name: str, args: tuple, model: str, seed: int, trials: int, log: str,
             per_round: int) -> float:
    done = len(curve_from_log(log)) if os.path.exists(log) else 0
    missing = trials - done
    if missing <= 0:
        return 0.0
    cmd = [sys.executable, "-m", "ansor.cli", "tune", name, "--args", ",".join(map(str, args)),
           "--trials", str(missing), "--per-round", str(per_round), "--seed", str(seed),
           "--cost-model", model, "--log", log, "--timeout", str(RUNNER_TIMEOUT),
           "--min-repeat-ms", str(MIN_REPEAT_MS)]
    t0 = time.monotonic()
    print(f"$ {' '.join(cmd[2:])}", flush=True)
    subprocess.run(cmd, check=True, cwd=os.path.dirname(HERE))
    return time.monotonic() - t0


def trials_to_reach(curve: list[float], target: float) -> int | None:
    for i, v in enumerate(curve):
        if v >= target:
            return i + 1
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="gemm,conv2d")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--models", default="random,learned")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--per-round", type=int, default=64)
    ap.add_argument("--log-dir", default=os.path.join(HERE, "results", "curves"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tuning_curves.json"))
    ns = ap.parse_args(argv)
    seeds = [int(s) for s in ns.seeds.split(",")]
    models = ns.models.split(",")
    os.makedirs(ns.log_dir, exist_ok=True)
    doc: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.node(),
                 "cpu": platform.processor(), "trials": ns.trials, "per_round": ns.per_round,
                 "seeds": seeds, "threads": os.environ.get("ANSOR_NUM_THREADS", "all"),
                 "workloads": {}}
    table = ["| workload | seed | random best GFLOPS | learned best GFLOPS | learned / random | "
             "learned trials to reach random's best |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for wl in ns.workloads.split(","):
        name, args = WORKLOADS[wl]
        entry: dict = {"workload": name, "args": list(args), "runs": {}}
        for model in models:
            for seed in seeds:
                log = os.path.join(ns.log_dir, f"{wl}_{model}_s{seed}.json")
                wall = run_tune(name, args, model, seed, ns.trials, log, ns.per_round)
                curve = curve_from_log(log)[: ns.trials]
                entry["runs"][f"{model}/{seed}"] = {"log": log, "curve": curve, "wall_s": wall}
        rows = []
        for seed in seeds:
            r = entry["runs"].get(f"random/{seed}", {}).get("curve")
            lc = entry["runs"].get(f"learned/{seed}", {}).get("curve")
            if not r or not lc:
                continue
            reach = trials_to_reach(lc, r[-1])
            rows.append((seed, r[-1], lc[-1], lc[-1] / r[-1] if r[-1] else float("nan"), reach))
            table.append(f"| {wl} | {seed} | {r[-1]:.1f} | {lc[-1]:.1f} | {rows[-1][3]:.2f} | "
                         f"{reach if reach is not None else 'not reached'} |")
        if rows:
            med = lambda xs: float(np.median(xs))  # noqa: E731
            reach_all = [r[4] if r[4] is not None else 10 ** 9 for r in rows]
            entry["median"] = {"random_best": med([r[1] for r in rows]),
                               "learned_best": med([r[2] for r in rows]),
                               "ratio": med([r[3] for r in rows]),
                               "learned_trials_to_reach_random_best": med(reach_all)}
            m = entry["median"]
            reach_txt = (f"{m['learned_trials_to_reach_random_best']:.0f}"
                         if m["learned_trials_to_reach_random_best"] < 10 ** 9 else "not reached")
            table.append(f"| {wl} | median | {m['random_best']:.1f} | {m['learned_best']:.1f} | "
                         f"{m['ratio']:.2f} | {reach_txt} |")
            for checkpoint in (64, 128, 200, 300, 500):
                if checkpoint <= ns.trials:
                    entry.setdefault("at", {})[checkpoint] = {
                        model: med([entry["runs"][f"{model}/{s}"]["curve"][checkpoint - 1]
                                    for s in seeds if len(entry["runs"][f"{model}/{s}"]["curve"]) >= checkpoint])
                        for model in models}
        doc["workloads"][wl] = entry
    os.makedirs(os.path.dirname(ns.out), exist_ok=True)
    with open(ns.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("\n".join(table))
    for wl, e in doc["workloads"].items():
        for cp, v in e.get("at", {}).items():
            print(f"{wl} median best GFLOPS after {cp} trials: "
                  + ", ".join(f"{m} {x:.1f}" for m, x in v.items()))
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
