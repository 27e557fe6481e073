"""Rank measured programs of logs with pre-trained models: pairwise, top-5%, per-family picks."""
import sys, glob, collections
sys.path.insert(0, __import__("os").path.abspath(__file__).rsplit("/benchmarks/", 1)[0])
import numpy as np
from cost_model.lgbm_model import LGBModel, samples_from_file
from cost_model.evaluate import pairwise_accuracy, topk_recall
from sketch.search_policy import sketch_family
models = {p.split("/")[-1]: LGBModel.load(p) for p in sys.argv[1].split(",")}
for pat in sys.argv[2:]:
    samples = []
    for f in sorted(glob.glob(pat)):
        samples += [(s, c) for _, s, c in samples_from_file(f, None) if np.isfinite(c)]
    costs = np.array([c for _, c in samples]); true = costs.min() / costs
    states = [s for s, _ in samples]
    fam = [sketch_family(s) for s in states]
    print(f"## {pat}: {len(samples)} programs, best {costs.min()*1e3:.4f} ms")
    for name, m in models.items():
        pred = np.asarray(m.predict(None, states), float)
        line = f"  {name:20s} pairwise {pairwise_accuracy(pred, true):.3f} top5% {topk_recall(pred, true):.2f} |"
        by = collections.defaultdict(list)
        for i, f in enumerate(fam):
            by[f].append(i)
        for f, idx in sorted(by.items(), key=lambda kv: costs[kv[1]].min()):
            idx = np.array(idx)
            top = idx[np.argsort(-pred[idx])[:5]]
            line += f" {f}: best {costs[idx].min()*1e3:.3f} top5pred med {np.median(costs[top])*1e3:.3f} (n={len(idx)});"
        print(line)
