"""The model-based template tuner: a LightGBM model of the knobs, simulated annealing on top.

This is AutoTVM's XGBoost tuner with LightGBM (which the project already depends on) and knob
features only:

* *features* of a configuration are its knob values (``ConfigSpace.features``): every part of
  every split in log2, numeric knobs in log2(1 + v), loop orders and annotations as codes. They
  describe a configuration the same way whatever the workload's shapes, which is what lets a
  model trained on one workload's records guide another's (``load_history``).
* the *model* is refit every ``plan_size`` measurements on everything measured (and the
  history), as a regression of GFLOPS normalised by the best of its workload ("reg") or as a
  ranking (LightGBM's lambdarank, one query per workload, GFLOPS binned to 0..30) ("rank": only
  the order of configurations matters to the search, and it is robust to scale).
* after each fit, *simulated annealing* proposes the next ``plan_size`` configurations: a fixed
  set of points (``num_sa_points``, kept from one plan to the next) random-walks for up to
  ``sa_iters`` steps, each step changing one random knob of each point and accepting a worse
  prediction with probability exp(delta / temperature), the temperature falling linearly from 1
  to 0; the best ``plan_size`` unvisited configurations seen are the plan. The walk stops early
  when the plan has not changed for ``sa_early_stop`` steps.
* about 5% of the picks (``eps_greedy``) are random configurations instead of the plan's, so
  the model keeps seeing parts of the space it does not favour. Until the first fit, every pick
  is random.
"""
from __future__ import annotations

import heapq
import logging
import os
import time
from typing import Any, Sequence

import numpy as np

from .records import ConfigRecord, iter_config_records
from .task import TemplateTask
from .tuner import Tuner

__all__ = ["LGBMTuner", "ModelBasedTuner"]

logger = logging.getLogger("ansor.autotvm")

RANK_LEVELS = 30  # lambdarank's default label gains cover labels 0..30
# A history group (one workload) with fewer records than this teaches the ranking nothing.
MIN_GROUP = 2


class LGBMTuner(Tuner):
    """Model-based tuner (see the module docstring). ``loss_type`` "rank" or "reg";
    ``num_threads`` for LightGBM (1 by default: the data is small, and idle OpenMP threads
    spinning in this process would compete with the kernels being timed)."""

    def __init__(self, task: TemplateTask, loss_type: str = "rank", plan_size: int = 64,
                 num_sa_points: int = 128, sa_iters: int = 500, sa_early_stop: int = 50,
                 eps_greedy: float = 0.05, num_boost_round: int = 100, num_threads: int = 1,
                 seed: int | None = None):
        super().__init__(task, seed)
        if loss_type not in ("rank", "reg"):
            raise ValueError(f"LGBMTuner: unknown loss_type {loss_type!r}; use 'rank' or 'reg'")
        for name, v in (("plan_size", plan_size), ("num_sa_points", num_sa_points),
                        ("sa_iters", sa_iters), ("sa_early_stop", sa_early_stop),
                        ("num_boost_round", num_boost_round), ("num_threads", num_threads)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"LGBMTuner: {name} must be a positive integer, got {v!r}")
        if not 0.0 <= float(eps_greedy) <= 1.0:
            raise ValueError(f"LGBMTuner: eps_greedy must be in [0, 1], got {eps_greedy!r}")
        self.loss_type, self.plan_size = loss_type, plan_size
        self.num_sa_points, self.sa_iters = num_sa_points, sa_iters
        self.sa_early_stop = sa_early_stop
        self.eps_greedy = float(eps_greedy)
        self.num_boost_round, self.num_threads = num_boost_round, num_threads
        self.np_rng = np.random.default_rng(self.rng.randrange(1 << 63))

        self.radix = np.asarray(self.space.radix, dtype=np.int64)
        self.tables = [np.asarray(t, dtype=np.float64) for t in self.space.feature_tables()]
        strides, acc = [], 1
        for n in self.space.radix:
            strides.append(acc)
            acc *= n
        self._strides_py = strides
        # Index arithmetic in int64 when the space fits (always, in practice), else in Python.
        self._strides = np.asarray(strides, dtype=np.int64) if acc < (1 << 62) else None

        self.own_index: list[int] = []
        self.own_score: list[float] = []
        self.history: list[tuple[np.ndarray, np.ndarray]] = []  # (features, GFLOPS) per workload
        self.booster: Any = None
        self.plan: list[int] = []
        self.sa_points: np.ndarray | None = None
        self._fit_size = 0
        self.n_fits = 0
        self.train_seconds = 0.0
        self.sa_seconds = 0.0

    # ---- features ----
    def features_of_digits(self, digits: np.ndarray) -> np.ndarray:
        """Rows of features for rows of per-knob choices."""
        if digits.shape[1] == 0:
            return np.zeros((len(digits), 1))
        return np.hstack([t[digits[:, k]] for k, t in enumerate(self.tables)])

    def _indices(self, digits: np.ndarray) -> list[int]:
        if self._strides is not None:
            return (digits @ self._strides).tolist()
        return [sum(int(d) * s for d, s in zip(row, self._strides_py)) for row in digits]

    def _digits(self, indices: Sequence[int]) -> np.ndarray:
        return np.asarray([self.space.digits(i) for i in indices], dtype=np.int64).reshape(
            len(indices), len(self.radix))

    # ---- the strategy ----
    def next_batch(self, batch_size: int) -> list[int]:
        if not self.plan and self.booster is not None:
            self._make_plan()
        out: list[int] = []
        chosen: set[int] = set()
        while len(out) < batch_size:
            pick = None
            if self.plan and self.rng.random() >= self.eps_greedy:
                while self.plan and pick is None:
                    i = self.plan.pop(0)
                    if i not in self.visited and i not in chosen:
                        pick = i
            if pick is None:
                r = self.sample_unvisited(1, exclude=chosen)
                if not r:
                    break
                pick = r[0]
            chosen.add(pick)
            out.append(pick)
        return out

    def update(self, indices: Sequence[int], scores: Sequence[float]) -> None:
        self.own_index.extend(int(i) for i in indices)
        self.own_score.extend(float(s) for s in scores)
        if len(self.own_index) - self._fit_size >= self.plan_size:
            if self.fit():
                self._make_plan()

    # ---- transfer ----
    def load_history(self, records: Any, min_records: int = 0) -> int:
        """Learn from earlier logs of the same template (any workload shapes): ``records`` is a
        log path, a list of paths, or ``ConfigRecord``s (``records.iter_config_records``).
        Records of other templates, plain records and failed measurements of a workload that
        never succeeded are skipped. Returns the number of records taken; with at least
        ``min_records`` (and something to learn), the model is fit at once, so even the first
        batch follows it."""
        if isinstance(records, (str, os.PathLike)) or (
                isinstance(records, (list, tuple)) and records
                and all(isinstance(r, (str, os.PathLike)) for r in records)):
            records = iter_config_records(records)
        groups: dict[str, tuple[list[list[float]], list[float]]] = {}
        skipped = 0
        for rec in records:
            if not isinstance(rec, ConfigRecord):
                raise TypeError(f"load_history: expected log paths or ConfigRecords, got "
                                f"{type(rec).__name__}")
            if rec.template != self.task.template.name or rec.knobs is None:
                skipped += 1
                continue
            try:
                feats = self.space.features_json(rec.knobs)
            except (ValueError, TypeError, KeyError):
                skipped += 1  # another version of the template: its knobs do not line up
                continue
            xs, ys = groups.setdefault(rec.line.workload_key, ([], []))
            xs.append(feats)
            ys.append(rec.gflops)
        taken = 0
        for xs, ys in groups.values():
            if len(ys) >= MIN_GROUP and max(ys) > 0:
                self.history.append((np.asarray(xs, dtype=np.float64),
                                     np.asarray(ys, dtype=np.float64)))
                taken += len(ys)
        logger.info("%s: history of %d record(s) from %d workload(s); %d skipped",
                    self.task.name, taken, len(groups), skipped)
        if taken and taken >= min_records and self.fit():
            self._make_plan()
        return taken

    # ---- the model ----
    def _groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        out = list(self.history)
        if self.own_index:
            out.append((self.features_of_digits(self._digits(self.own_index)),
                        np.asarray(self.own_score, dtype=np.float64)))
        return [(x, y) for x, y in out if len(y) >= MIN_GROUP and y.max() > 0]

    def fit(self) -> bool:
        """Refit the model on the measurements and history; False when there is nothing to learn
        yet (no successful measurement)."""
        import lightgbm as lgb  # noqa: PLC0415 - slow to import; only model tuners need it

        self._fit_size = len(self.own_index)
        groups = self._groups()
        if not groups:
            return False
        t0 = time.perf_counter()
        x = np.vstack([g[0] for g in groups])
        norm = np.concatenate([g[1] / g[1].max() for g in groups])
        params: dict[str, Any] = {
            "learning_rate": 0.1, "num_leaves": 31, "min_data_in_leaf": 2,
            "min_sum_hessian_in_leaf": 1e-3, "feature_pre_filter": False,
            "num_threads": self.num_threads, "seed": self.rng.randrange(1 << 31),
            "deterministic": True, "force_row_wise": True, "verbosity": -1,
        }
        if self.loss_type == "rank":
            params["objective"] = "lambdarank"
            params["lambdarank_truncation_level"] = max(self.plan_size, 30)
            labels = np.rint(norm * RANK_LEVELS).astype(np.int64)
            ds = lgb.Dataset(x, label=labels, group=[len(g[1]) for g in groups], params=params)
        else:
            params["objective"] = "regression"
            ds = lgb.Dataset(x, label=norm, params=params)
        self.booster = lgb.train(params, ds, num_boost_round=self.num_boost_round)
        self.n_fits += 1
        self.train_seconds += time.perf_counter() - t0
        return True

    def predict(self, digits: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.predict(self.features_of_digits(digits),
                                               num_threads=self.num_threads), dtype=np.float64)

    # ---- simulated annealing ----
    def _make_plan(self) -> None:
        t0 = time.perf_counter()
        n_knobs = len(self.radix)
        P = self.num_sa_points
        if self.sa_points is None or n_knobs == 0:
            points = self.np_rng.integers(0, self.radix, size=(P, n_knobs))
        else:
            points = self.sa_points.copy()
        scores = self.predict(points)
        heap: list[tuple[float, int]] = []  # min-heap of the best plan_size (score, index)
        in_heap: set[int] = set()

        def consider(rows: np.ndarray, preds: np.ndarray) -> bool:
            changed = False
            for idx, p in zip(self._indices(rows), preds.tolist()):
                if idx in self.visited or idx in in_heap:
                    continue
                if len(heap) < self.plan_size:
                    heapq.heappush(heap, (p, idx))
                elif p > heap[0][0]:
                    _, out = heapq.heapreplace(heap, (p, idx))
                    in_heap.discard(out)
                else:
                    continue
                in_heap.add(idx)
                changed = True
            return changed

        consider(points, scores)
        temp, cool = 1.0, 1.0 / self.sa_iters
        unchanged = 0
        rows = np.arange(P)
        for _ in range(self.sa_iters if n_knobs else 0):
            new = points.copy()
            knob = self.np_rng.integers(0, n_knobs, size=P)
            new[rows, knob] = self.np_rng.integers(0, self.radix[knob])
            new_scores = self.predict(new)
            with np.errstate(over="ignore"):
                prob = np.exp(np.minimum((new_scores - scores) / max(temp, 1e-5), 0.0))
            accept = self.np_rng.random(P) < prob
            points[accept] = new[accept]
            scores[accept] = new_scores[accept]
            unchanged = 0 if consider(new, new_scores) else unchanged + 1
            if unchanged >= self.sa_early_stop:
                break
            temp = max(0.0, temp - cool)
        self.sa_points = points
        self.plan = [idx for _, idx in sorted(heap, reverse=True)]
        self.sa_seconds += time.perf_counter() - t0


ModelBasedTuner = LGBMTuner
