"""Search speed: wall seconds of one search round (sample, evolve, rank, pick 64 candidates).

One round of ``SketchPolicy.generate_measure_candidates`` with a population of 2048 and the
random cost model, for GEMM 1024^3 and conv2d NHWC 56x56x64->64 3x3: the search's own cost, with
no measurement. ``--trees A B`` times the same rounds on two source trees (e.g. a checkout of an
older commit and this one), alternating between them in fresh processes, so a refactor's effect
on search speed is measured in one run on one machine.

Usage: ``python benchmarks/search_round.py [--repeats 3] [--population 2048] [--trees OLD NEW]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = {"gemm_1024": ("matmul", (1024, 1024, 1024)),
             "conv2d_56x56x64": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1))}


def time_round(name: str, args: tuple, population: int, seed: int) -> float:
    """Seconds of one round on the source tree this process imports."""
    import ansor
    from cost_model import RandomModel
    from sketch.search_policy import SearchParams, SketchPolicy

    task = ansor.SearchTask(func=name, args=args)
    policy = SketchPolicy(task, RandomModel(seed), SearchParams(population_size=population),
                          seed=seed)
    t0 = time.perf_counter()
    policy.generate_measure_candidates(64, set(), [])
    return time.perf_counter() - t0


def _in_tree(tree: str, name: str, args: tuple, population: int, seed: int) -> float:
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]);"
            "from search_round import time_round;"
            "print(json.dumps(time_round(sys.argv[3], tuple(json.loads(sys.argv[4])), "
            "int(sys.argv[5]), int(sys.argv[6]))))")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    out = subprocess.run([sys.executable, "-c", code, os.path.abspath(tree), HERE, name,
                          json.dumps(list(args)), str(population), str(seed)],
                         capture_output=True, text=True, env=env, check=True, cwd=tree)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--population", type=int, default=2048)
    ap.add_argument("--trees", nargs=2, metavar=("A", "B"), default=None,
                    help="two source trees to compare, alternating, in fresh processes")
    ns = ap.parse_args(argv)
    trees = ns.trees or [os.path.dirname(HERE)]
    out: dict = {}
    for label, (name, args) in WORKLOADS.items():
        times: dict[str, list[float]] = {t: [] for t in trees}
        for r in range(ns.repeats):
            for t in trees:  # alternate, so drift in machine speed hits both alike
                times[t].append(_in_tree(t, name, args, ns.population, r))
        out[label] = {t: {"runs_s": v, "median_s": statistics.median(v)} for t, v in times.items()}
        line = "; ".join(f"{t}: median {statistics.median(v):.2f} s ({', '.join(f'{x:.2f}' for x in v)})"
                         for t, v in times.items())
        print(f"{label}: {line}", flush=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
