"""A/B of the search: 200 trials per (workload, seed, variant); the tuner's best cost."""
import sys, json, time
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4]))
from ansor import SearchTask, TuningOptions
from sketch.search_params import SearchParams
W = {"conv2d_1x1": ("conv2d_nhwc", (1, 56, 56, 64, 256, 1, 1, 1, 0)),
     "depthwise": ("depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 3, 1, 1))}
V = {"share0": dict(lead_family_share=0.0), "share50": dict(lead_family_share=0.5)}
out = sys.argv[1]
for seed in (1, 2, 3):
    for w, (f, a) in W.items():
        for v, kw in V.items():
            log = f"{out}/{w}-{v}-s{seed}.json"
            task = SearchTask(func=f, args=a)
            t0 = time.time()
            res = task.tune(TuningOptions(num_measure_trials=200, num_measures_per_round=64, log_file=log,
                                          seed=seed, verbose=0, search_params=SearchParams(**kw)))
            print(json.dumps({"w": w, "v": v, "seed": seed, "best_ms": res.best_cost * 1e3,
                              "wall": time.time() - t0}), flush=True)
