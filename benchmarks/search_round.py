"""Search speed: seconds of one search round (sample, evolve, rank, pick candidates), by phase.

One round of ``SketchPolicy.generate_measure_candidates`` with no measurement: the search's own
cost. Workloads: the quick start's GEMM 512^3 (32 candidates a round, as ``ansor tune`` takes),
conv2d NHWC 56x56x64->64 3x3 and the fused conv2d + bias + relu of the same shape (64 candidates).
The cost model is the learned one (``LGBModel``) trained on 256 sampled programs of the task with
synthetic costs (a function of their features times a little noise from a CRC of the canonical
key: deterministic, and it grows all 200 trees, so prediction costs what a trained model's does;
labels that ignore the features stop LightGBM after one tree); ``--model random`` uses the
random model instead.

Each run is a fresh process (seed = run index) and reports wall and process-CPU seconds of the
round and of its phases, measured by wrapping the functions the round calls:

- ``sample``: random annotation of the sketches (``sample_state``) during initial sampling;
- ``sample_lower_check``: the lowering filter on the initial samples (``lowers_cached``);
- ``features``: feature extraction of the states the model scores (``get_per_store_features``);
- ``model``: the LightGBM prediction on those features;
- ``mutate``: mutations and the replays they do;
- ``evo_lower_check``: the lowering filter on the children (``lowers_cached``);
- ``select_lower``: the full lowering of the chosen candidates (``lowers``);
- ``other``: the rest (canonical keys, deduplication, parent selection, sorting).

It also prints a fingerprint of the chosen candidates (a hash of their canonical keys in order),
so a change meant as a pure speed-up can show that it proposes the same candidates.

``--trees A B`` runs the same rounds on two source trees (e.g. an export of an older commit and
this one), alternating between them, so a change's effect is measured in one run on one machine.

Usage: ``python benchmarks/search_round.py [--repeats 3] [--population 2048] [--trees OLD NEW]
[--workloads gemm_512 ...] [--model lgbm|random]``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # imported by path (a test) rather than run as a script
    sys.path.insert(0, HERE)
from tree_runs import check_trees, run_in_tree  # noqa: E402 - needs HERE on sys.path
# label -> (registered workload, args, candidates per round)
WORKLOADS = {"gemm_512": ("matmul", (512, 512, 512), 32),
             "conv2d_56x56x64": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1), 64),
             "conv2d_bias_relu": ("conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1), 64),
             "gemm_1024": ("matmul", (1024, 1024, 1024), 64)}
DEFAULT_WORKLOADS = ("gemm_512", "conv2d_56x56x64", "conv2d_bias_relu")
PHASES = ("sample", "sample_lower_check", "features", "model", "mutate", "evo_lower_check",
          "select_lower", "other")


class _Clock:
    """Wall and CPU seconds accumulated per phase by wrapped functions (not re-entrant per
    phase: a wrapped call inside another wrapped call is counted in both, so wrap disjoint ones)."""

    def __init__(self) -> None:
        self.wall = {p: 0.0 for p in PHASES}
        self.cpu = {p: 0.0 for p in PHASES}

    def wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                self.wall[phase] += time.perf_counter() - w
                self.cpu[phase] += time.process_time() - c
        return timed


def _trained_model(task: Any, seed: int) -> Any:
    import zlib
    from cost_model import LGBModel
    from cost_model.feature import state_features
    from sketch.search_policy import SearchParams, SketchPolicy

    model = LGBModel(seed=0)
    pol = SketchPolicy(task, model, SearchParams(population_size=256), seed=1000 + seed)
    for s in pol.sample_initial_population(256):
        f = state_features(s)  # a cost that depends on the features grows the full 200 trees
        noise = 1.0 + (zlib.crc32(s.canonical_key().encode()) % 100) / 1000
        model.add(task.workload_key, s, 1e-3 * (1.0 + float(f.sum()) % 10.0) * noise)
    model.train()
    return model


def time_round(name: str, args: tuple, population: int, seed: int, num: int = 64,
               model: str = "lgbm") -> dict:
    """Wall and CPU seconds of one round on the source tree this process imports, by phase."""
    import hashlib
    import ansor
    import cost_model.lgbm_model as lgbm_mod
    import sketch.init_population as init_mod
    import sketch.search_policy as policy_mod
    from cost_model import RandomModel
    from sketch.search_policy import SearchParams, SketchPolicy

    task = ansor.SearchTask(func=name, args=tuple(args))  # a list when called through JSON
    cm = _trained_model(task, seed) if model == "lgbm" else RandomModel(seed)
    policy = SketchPolicy(task, cm, SearchParams(population_size=population), seed=seed)
    clock = _Clock()
    init_mod.sample_state = clock.wrap("sample", init_mod.sample_state)
    init_mod.lowers_cached = clock.wrap("sample_lower_check", init_mod.lowers_cached)
    lgbm_mod.get_per_store_features = clock.wrap("features", lgbm_mod.get_per_store_features)
    if hasattr(cm, "_raw"):
        cm._raw = clock.wrap("model", cm._raw)
    policy_mod.mutate = clock.wrap("mutate", policy_mod.mutate)
    policy_mod.lowers_cached = clock.wrap("evo_lower_check", policy_mod.lowers_cached)
    policy_mod.lowers = clock.wrap("select_lower", policy_mod.lowers)
    w, c = time.perf_counter(), time.process_time()
    chosen = policy.generate_measure_candidates(num, set(), [])
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    clock.wall["other"] = wall - sum(clock.wall.values())
    clock.cpu["other"] = cpu - sum(clock.cpu.values())
    digest = hashlib.sha256("\n".join(s.canonical_key() for s in chosen).encode()).hexdigest()[:16]
    return {"wall_s": wall, "cpu_s": cpu, "phase_wall_s": clock.wall, "phase_cpu_s": clock.cpu,
            "candidates": len(chosen), "fingerprint": digest}


def _median_phases(runs: list[dict], key: str) -> dict:
    return {p: statistics.median(r[key][p] for r in runs) for p in PHASES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--population", type=int, default=2048)
    ap.add_argument("--workloads", nargs="+", default=list(DEFAULT_WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--model", choices=("lgbm", "random"), default="lgbm")
    ap.add_argument("--trees", nargs=2, metavar=("A", "B"), default=None,
                    help="two source trees to compare, alternating, in fresh processes")
    ns = ap.parse_args(argv)
    trees = check_trees(ns.trees or [os.path.dirname(HERE)])
    out: dict = {}
    for label in ns.workloads:
        name, args, num = WORKLOADS[label]
        runs: dict[str, list[dict]] = {t: [] for t in trees}
        for r in range(ns.repeats):
            for t in trees:  # alternate, so drift in machine speed hits both alike
                runs[t].append(run_in_tree(t, "search_round", "time_round",
                                           [name, list(args), ns.population, r, num, ns.model]))
        out[label] = {}
        for t, v in runs.items():
            res = {"runs": v, "median_wall_s": statistics.median(x["wall_s"] for x in v),
                   "median_cpu_s": statistics.median(x["cpu_s"] for x in v),
                   "median_phase_wall_s": _median_phases(v, "phase_wall_s"),
                   "median_phase_cpu_s": _median_phases(v, "phase_cpu_s"),
                   "fingerprints": [x["fingerprint"] for x in v]}
            out[label][t] = res
            phases = ", ".join(f"{p} {res['median_phase_cpu_s'][p]:.2f}" for p in PHASES)
            print(f"{label} [{t}]: wall median {res['median_wall_s']:.2f} s, cpu median "
                  f"{res['median_cpu_s']:.2f} s (cpu {', '.join('%.2f' % x['cpu_s'] for x in v)}); "
                  f"phases (cpu): {phases}; fingerprints {' '.join(res['fingerprints'])}",
                  flush=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
