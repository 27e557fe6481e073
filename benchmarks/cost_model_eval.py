"""Cost-model ranking quality on measured programs: pairwise accuracy and top-5% recall.

Reads record logs (default: the tuning-curve logs of ``tuning_curves.py``), pools each task's
records in the order given, and for each split and seed trains a fresh LightGBM model on 512 of
them and scores the rest (``cost_model.evaluate``; the same as ``ansor costmodel eval``):

* ``random``: 512 records drawn at random, the others held out;
* ``chrono``: the first 512 records, the later ones held out (harder when the later records come
  from a better search than the first: the model must rank programs faster than any it saw).

Usage: ``python benchmarks/cost_model_eval.py [LOG ...] [--seeds 0,1,2] [--train 512]``
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cost_model import LGBModel  # noqa: E402
from cost_model.evaluate import evaluate_task, format_table  # noqa: E402
from cost_model.lgbm_model import samples_from_file  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="*")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--train", type=int, default=512)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cost_model_eval.json"))
    ns = ap.parse_args(argv)
    logs = ns.logs or sorted(glob.glob(os.path.join(HERE, "results", "curves", "*.json")))
    if not logs:
        print("no logs given and none in benchmarks/results/curves (run tuning_curves.py)")
        return 1
    per_task: dict[str, list] = {}
    names: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for log in logs:
            for key, state, cost in samples_from_file(log, None):
                per_task.setdefault(key, []).append((state, cost))
                names.setdefault(key, state.dag.tensors[-1].op.name)
    doc: dict = {"logs": logs, "train": ns.train, "tasks": {}}
    for key, samples in per_task.items():
        if len(samples) <= ns.train:
            print(f"{names[key]}: {len(samples)} records, skipped")
            continue
        for split in ("random", "chrono"):
            rows = [evaluate_task(samples, lambda: LGBModel(seed=0), key, f"{names[key]} ({split}, seed {s})",
                                  train_size=ns.train, split=split, seed=int(s))
                    for s in (ns.seeds.split(",") if split == "random" else ["0"])]
            print(format_table(rows))
            doc["tasks"].setdefault(names[key], {})[split] = {
                "pairwise": [r.pairwise for r in rows], "topk": [r.topk for r in rows],
                "pairwise_median": statistics.median(r.pairwise for r in rows),
                "topk_median": statistics.median(r.topk for r in rows)}
    os.makedirs(os.path.dirname(ns.out), exist_ok=True)
    with open(ns.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
