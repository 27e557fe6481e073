"""A/B of pre-trained models: 200 trials per (workload, seed, model); the tuner's best cost and best@64."""
import sys, json, time, os
sys.path.insert(0, __import__("os").path.abspath(__file__).rsplit("/benchmarks/", 1)[0])
from ansor import SearchTask, TuningOptions
from ansor.records import load_records
W = {"conv2d_1x1": ("conv2d_nhwc", (1, 56, 56, 64, 256, 1, 1, 1, 0)),
     "depthwise": ("depthwise_conv2d_nhwc", (1, 112, 112, 32, 3, 3, 1, 1))}
V = {k: v for k, v in (a.split("=") for a in sys.argv[2].split(","))}
out = sys.argv[1]
for seed in (1, 2, 3):
    for w, (f, a) in W.items():
        for v, path in V.items():
            os.environ["ANSOR_PRETRAINED_MODEL"] = path
            log = f"{out}/{w}-{v}-s{seed}.json"
            task = SearchTask(func=f, args=a)
            t0 = time.time()
            res = task.tune(TuningOptions(num_measure_trials=200, num_measures_per_round=64, log_file=log,
                                          seed=seed, verbose=0))
            costs = [min(r.costs) if r.error_no == 0 and r.costs else 1e9 for _, r in load_records(log)]
            print(json.dumps({"w": w, "v": v, "seed": seed, "best_ms": res.best_cost * 1e3,
                              "best64_ms": min(costs[:64]) * 1e3, "wall": time.time() - t0}), flush=True)
