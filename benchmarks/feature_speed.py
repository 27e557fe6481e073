"""Feature extraction speed: seconds to featurise a search population of 2048 states.

The target (cost-model issue) is <= 2 s for 2048 GEMM 1024^3 or conv2d NHWC 56x56x64->64 3x3
states on this 2-core machine. Each repeat samples a fresh population (features are cached on the
state, so timing the same states twice would measure the cache) and times
``get_per_store_features`` on it; also timed: LightGBM prediction for the same rows with a model
trained on 256 of them, and the whole ``predict`` the search calls.

Usage: ``python benchmarks/feature_speed.py [--repeats 5] [--population 2048]``; prints JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import ansor  # noqa: E402
from cost_model import LGBModel, RandomModel  # noqa: E402
from cost_model.feature import get_per_store_features  # noqa: E402
from sketch.search_policy import SearchParams, SketchPolicy  # noqa: E402

WORKLOADS = {"gemm_1024": ("matmul", (1024, 1024, 1024)),
             "conv2d_56x56x64": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 3, 1, 1)),
             "conv2d_bias_relu": ("conv2d_bias_relu", (1, 56, 56, 64, 64, 3, 3, 1, 1))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--population", type=int, default=2048)
    ns = ap.parse_args(argv)
    out = {}
    for label, (name, args) in WORKLOADS.items():
        task = ansor.SearchTask(func=name, args=args)
        feats, preds = [], []
        for r in range(ns.repeats):
            pol = SketchPolicy(task, RandomModel(r), SearchParams(population_size=ns.population), seed=r)
            pop = pol.sample_initial_population(ns.population)
            t0 = time.perf_counter()
            rows, group = get_per_store_features(pop)
            feats.append(time.perf_counter() - t0)
            model = LGBModel(seed=0)
            for s in pop[:256]:  # a synthetic label is enough to time prediction
                model.add(task.workload_key, s, 1.0 + (hash(s.canonical_key()) % 100) / 100)
            model.train()
            fresh = pol.sample_initial_population(ns.population)
            t0 = time.perf_counter()
            model.predict(task, fresh)
            preds.append(time.perf_counter() - t0)
        out[label] = {"states": len(pop), "statements": int(group.sum()),
                      "features_s": feats, "features_median_s": statistics.median(feats),
                      "predict_with_features_median_s": statistics.median(preds)}
        print(f"{label}: {len(pop)} states ({int(group.sum())} statements): features median "
              f"{statistics.median(feats):.2f} s (runs {', '.join(f'{x:.2f}' for x in feats)}); "
              f"features + LightGBM predict {statistics.median(preds):.2f} s", flush=True)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
