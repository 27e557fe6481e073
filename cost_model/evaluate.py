"""How well a cost model ranks programs it has not seen: the figures behind ``ansor costmodel eval``.

The search only needs the *order* of candidates to be right, so the two measures are about order:

* pairwise accuracy: of all pairs of held-out programs with different measured throughput, the
  share the model orders the same way (0.5 is chance);
* top-k recall: of the truly best ``top`` share of held-out programs, the share that are among the
  model's best ``top`` share (what decides whether the best candidates get measured).

Held-out means measured later than the training records (``split="chrono"``, what the search
faces: predicting programs it has not yet measured) or a random part (``split="random"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np


def pairwise_accuracy(pred: np.ndarray, true: np.ndarray) -> float:
    """Share of pairs with different true values that ``pred`` orders the same way (ties in
    ``pred`` count half)."""
    pred = np.asarray(pred, dtype=float)
    true = np.asarray(true, dtype=float)
    dt = np.sign(true[:, None] - true[None, :])
    dp = np.sign(pred[:, None] - pred[None, :])
    mask = dt != 0
    if not mask.any():
        return float("nan")
    agree = (dt == dp) & mask
    ties = (dp == 0) & mask
    return float((agree.sum() + 0.5 * ties.sum()) / mask.sum())


def topk_recall(pred: np.ndarray, true: np.ndarray, top: float = 0.05) -> float:
    """Of the true best ``top`` share (at least one program), the share in the predicted best."""
    pred = np.asarray(pred, dtype=float)
    true = np.asarray(true, dtype=float)
    k = max(1, int(round(top * len(true))))
    best_true = set(np.argsort(-true, kind="stable")[:k].tolist())
    best_pred = set(np.argsort(-pred, kind="stable")[:k].tolist())
    return len(best_true & best_pred) / k


@dataclass
class EvalRow:
    workload_key: str
    desc: str
    train: int
    test: int
    pairwise: float
    topk: float
    pairwise_random: float  # the same pairs scored by a random model, for scale
    train_seconds: float


def evaluate_task(samples: Sequence[tuple[Any, float]], make_model: Callable[[], Any],
                  workload_key: str, desc: str = "", train_size: int = 512, split: str = "chrono",
                  seed: int = 0, top: float = 0.05, extra: Sequence[tuple[str, Any, float]] = ()
                  ) -> EvalRow:
    """Train a fresh model on ``train_size`` of one task's ``(state, cost)`` samples (plus
    ``extra`` samples of other tasks) and score it on the rest. Failed measurements (cost inf) are
    trained on but not ranked."""
    import time

    if split not in ("chrono", "random"):
        raise ValueError(f"split must be 'chrono' or 'random', got {split!r}")
    n = len(samples)
    if n <= train_size:
        raise ValueError(f"{desc or workload_key}: {n} records, need more than the {train_size} "
                         "used for training to hold some out")
    order = np.arange(n)
    if split == "random":
        order = np.random.default_rng(seed).permutation(n)
    tr, te = order[:train_size], order[train_size:]
    model = make_model()
    for key, state, cost in extra:
        model.add(key, state, cost)
    for i in tr:
        model.add(workload_key, samples[i][0], samples[i][1])
    t0 = time.perf_counter()
    model.train()
    t_train = time.perf_counter() - t0
    test = [(samples[i][0], samples[i][1]) for i in te if np.isfinite(samples[i][1])]
    if len(test) < 2:
        raise ValueError(f"{desc or workload_key}: fewer than 2 successful held-out records")
    costs = np.array([c for _, c in test])
    true = costs.min() / costs
    pred = np.asarray(model.predict(None, [s for s, _ in test]), dtype=float)
    pred = np.where(np.isnan(pred), -np.inf, pred)
    rnd = np.random.default_rng(seed).uniform(size=len(test))
    return EvalRow(workload_key, desc, len(tr), len(test), pairwise_accuracy(pred, true),
                   topk_recall(pred, true, top), pairwise_accuracy(rnd, true), t_train)


def format_table(rows: Sequence[EvalRow], top: float = 0.05) -> str:
    """The Markdown table ``ansor costmodel eval`` prints."""
    out = [f"| task | train | held out | pairwise accuracy | top-{top:.0%} recall | "
           "random model pairwise | training s |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append(f"| {r.desc or r.workload_key[:12]} | {r.train} | {r.test} | {r.pairwise:.3f} | "
                   f"{r.topk:.2f} | {r.pairwise_random:.3f} | {r.train_seconds:.2f} |")
    return "\n".join(out)
