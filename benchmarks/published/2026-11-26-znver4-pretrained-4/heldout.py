"""Per held-out task pairwise/top5% for several models on one records file."""
import sys, collections
sys.path.insert(0, __import__("os").path.abspath(__file__).rsplit("/benchmarks/", 1)[0])
import numpy as np
from cost_model.lgbm_model import LGBModel, lines_with_states
from cost_model.evaluate import pairwise_accuracy, topk_recall
models = {p.split("/")[-1]: LGBModel.load(p) for p in sys.argv[1].split(",")}
keep = sys.argv[3].split("|")
by = collections.defaultdict(list)
for line, s, c in lines_with_states(sys.argv[2], None):
    desc = f"{line.task.get('workload')}{tuple(line.task.get('args', []))}"
    if np.isfinite(c) and any(desc.startswith(k) for k in keep):
        by[desc].append((s, c))
res = collections.defaultdict(list)
for desc, sc in by.items():
    costs = np.array([c for _, c in sc]); true = costs.min() / costs
    row = f"{desc[:50]:50s} n={len(sc)}"
    for name, m in models.items():
        pred = np.asarray(m.predict(None, [s for s, _ in sc]), float)
        pa, tk = pairwise_accuracy(pred, true), topk_recall(pred, true)
        # cost of the model's top-1 and median of top-5 relative to best
        o = np.argsort(-pred)
        r1 = costs.min() / costs[o[0]]; r5 = costs.min() / np.median(costs[o[:5]])
        res[name].append((pa, tk, r1, r5))
        row += f" | {name} pw {pa:.3f} top5% {tk:.2f} top1 {r1:.2f} top5med {r5:.2f}"
    print(row)
for name, v in res.items():
    v = np.array(v); print(name, "mean pw %.3f top5%% %.2f top1 %.2f top5med %.2f" % tuple(v.mean(0)))
