"""Pre-training: one model from many tasks' records, judged on whole tasks it never saw.

Why whole tasks: the pre-trained model's job is a *new* task's first round, so the honest test
holds entire tasks out of training (named by workload or pattern) and asks how well it orders
their programs: pairwise accuracy and top-k recall, beside a random model on the same pairs.
``ansor costmodel pretrain`` is the command; the provenance (the records' CPU and toolchain, task
and program counts, the held-out scores) is saved in the model file.
"""
from __future__ import annotations

import fnmatch
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .evaluate import EvalRow, pairwise_accuracy, topk_recall
from .lgbm_model import LGBModel, LGBParams, lines_with_states


def task_name(task: dict, workload_key: str) -> str:
    """``matmul(256, 256, 256)`` for a registered workload, ``dag:<key>`` for a serialised DAG."""
    wl = task.get("workload") if isinstance(task, dict) else None
    if isinstance(wl, str):
        args = task.get("args", [])
        return f"{wl}({', '.join(str(a) for a in args)})" if isinstance(args, list) else wl
    return f"dag:{workload_key[:12]}"


def held_out(name: str, patterns: Sequence[str]) -> bool:
    """Whether a task named ``name`` matches a hold-out pattern: a workload name (``dense``) or
    an fnmatch pattern over the whole name (``conv2d_nhwc(1, 7, *``)."""
    base = name.split("(", 1)[0]
    return any(p == base or fnmatch.fnmatchcase(name, p) for p in patterns)


def split_patterns(text: str) -> list[str]:
    """``"softmax,matmul(100, *)"`` -> ``["softmax", "matmul(100, *)"]``: commas inside
    parentheses belong to the pattern."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        depth += (ch == "(") - (ch == ")")
        cur.append(ch)
    out.append("".join(cur).strip())
    return [p for p in out if p]


@dataclass
class _Task:
    name: str
    states: list = field(default_factory=list)
    costs: list = field(default_factory=list)


@dataclass
class PretrainResult:
    """The trained model, its held-out evaluation and the facts for its provenance."""

    model: LGBModel
    trained_tasks: list[str]
    heldout_rows: list[EvalRow]
    programs: int
    llvm_cpu: str
    toolchain: str
    train_seconds: float

    def provenance(self, **extra: Any) -> dict:
        """The model file's provenance: what the records say, plus ``extra`` host facts."""
        rows = [r for r in self.heldout_rows if np.isfinite(r.pairwise)]
        out: dict = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "llvm_cpu": self.llvm_cpu, "toolchain": self.toolchain,
                     "tasks": len(self.trained_tasks), "programs": self.programs,
                     "task_names": self.trained_tasks[:512],
                     "heldout_tasks": [r.desc for r in self.heldout_rows][:512],
                     "train_seconds": round(self.train_seconds, 1)}
        if rows:
            out["heldout_pairwise"] = float(np.mean([r.pairwise for r in rows]))
            out["heldout_topk"] = float(np.mean([r.topk for r in rows]))
        out.update({k: v for k, v in extra.items() if v is not None})
        return out


def pretrain(logs: Sequence[str | os.PathLike], holdout: Sequence[str] = (), seed: int = 0,
             top: float = 0.05, params: LGBParams | None = None) -> PretrainResult:
    """Train one model on every task of ``logs`` except those ``holdout`` names, then score it
    on the held-out tasks (all their successful programs). ValueError when nothing is left to
    train on."""
    tasks: dict[str, _Task] = {}
    cpus: Counter = Counter()
    toolchains: Counter = Counter()
    for log in logs:
        for line, state, cost in lines_with_states(log, None):
            t = tasks.get(line.workload_key)
            if t is None:
                t = tasks[line.workload_key] = _Task(task_name(line.task, line.workload_key))
            t.states.append(state)
            t.costs.append(cost)
            cpus[str(line.target.get("cpu", "?"))] += 1
            toolchains[f"llvmlite {line.target.get('llvmlite', '?')}, LLVM {line.target.get('llvm', '?')}"] += 1
    train = {k: t for k, t in tasks.items() if not held_out(t.name, holdout)}
    test = {k: t for k, t in tasks.items() if k not in train}
    if not train:
        raise ValueError(f"no task left to train on: {len(tasks)} task(s) in the records, all held out"
                         if tasks else "no usable records")
    model = LGBModel(params, seed)
    for key, t in train.items():
        for s, c in zip(t.states, t.costs):
            model.add(key, s, c)
    if model.num_samples() < model.params.min_train_samples:
        raise ValueError(f"{model.num_samples()} distinct programs to train on; need at least "
                         f"{model.params.min_train_samples}")
    t0 = time.perf_counter()
    model.train()
    seconds = time.perf_counter() - t0
    rows = [_score(model, key, t, top, seed) for key, t in test.items()]
    return PretrainResult(model, sorted(t.name for t in train.values()), rows, model.num_samples(),
                          cpus.most_common(1)[0][0] if cpus else "?",
                          toolchains.most_common(1)[0][0] if toolchains else "?", seconds)


def _score(model: LGBModel, key: str, t: _Task, top: float, seed: int) -> EvalRow:
    ok = [(s, c) for s, c in zip(t.states, t.costs) if np.isfinite(c)]
    if len(ok) < 2:
        nan = float("nan")
        return EvalRow(key, t.name, 0, len(ok), nan, nan, nan, 0.0)
    costs = np.array([c for _, c in ok])
    true = costs.min() / costs
    pred = np.asarray(model.predict(None, [s for s, _ in ok]), dtype=float)
    pred = np.where(np.isnan(pred), -np.inf, pred)
    rnd = np.random.default_rng(seed).uniform(size=len(ok))
    return EvalRow(key, t.name, 0, len(ok), pairwise_accuracy(pred, true), topk_recall(pred, true, top),
                   pairwise_accuracy(rnd, true), 0.0)
