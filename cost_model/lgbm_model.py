"""The learned cost model: gradient-boosted trees (LightGBM) over per-statement program features.

A program's predicted score is the *sum* of its statements' predictions ("pack-sum", as in Ansor):
a kernel's time is roughly the sum of its loop nests' times, so each tree leaf learns a share of a
statement's contribution. The label is the normalised throughput of each measured program within
its task (the task's best cost / this cost; failed measurements 0), so scores of different tasks
share one scale and a model trained on some tasks ranks programs of another. The loss is the
squared error of the sum, weighted by the label (plus a floor) so that the fast programs, the ones
the search must tell apart, matter most. LightGBM cannot express a loss over groups of rows, so the
objective is a custom one that sums each program's rows.

Training data is kept per task and the model is retrained from all of it after each round, unless
the new samples are fewer than ``retrain_ratio`` of the last training set (Ansor's throttle).
``save``/``load`` keep the trees with the feature schema version; ``update_from_file`` learns from
existing record files (of any task), which warms up the model for a new task.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Sequence

import numpy as np

from compute.compute_dag import ComputeDAG
from compute.workload_registry import make_workload
from measure.cost_floor import implausible_for_dag
from measure.measure import MAX_FLOAT, MeasureInput, MeasureResult
from measure.record import LineWarner, iter_lines
from sketch.contracts import TaskLike
from sketch.loop_state import State
from sketch.replay import replay

from .cost_model import CostModel
from .feature import FEATURE_NAMES, FEATURE_VERSION, NUM_FEATURES, get_per_store_features
from .model_file import (MAX_LEAVES, MAX_TREES, MODEL_FORMAT, CostModelFileError, lgb_feature_names,
                         read_model_file)

logger = logging.getLogger("ansor.cost_model")


@dataclass(frozen=True)
class LGBParams:
    """Every knob of the learned model (defaults tuned on held-out GEMM and conv2d records).

    Frozen: derive variants with ``dataclasses.replace``.
    """

    num_boost_round: int = 200  # trees per training
    learning_rate: float = 0.1
    num_leaves: int = 31
    min_data_in_leaf: int = 5  # statements
    min_sum_hessian_in_leaf: float = 0.05  # the hessian of a row is its program's weight
    feature_fraction: float = 0.85  # features sampled per tree
    bagging_fraction: float = 0.9  # rows sampled per bagging round ...
    bagging_freq: int = 4  # ... every this many trees
    lambda_l2: float = 1.0
    weight_floor: float = 0.1  # weight = max(label, floor): slow and failed programs still count
    retrain_ratio: float = 0.2  # retrain when new samples >= this share of the last training set
    min_train_samples: int = 8  # programs needed before the first training

    def __post_init__(self) -> None:
        # Bounds LightGBM can take (32-bit ints) in a time tuning can afford: a model file's
        # parameters are input, and a billion rounds would be a hang.
        if not (1 <= self.num_boost_round <= MAX_TREES and 2 <= self.num_leaves <= MAX_LEAVES
                and 0 < self.learning_rate <= 1e3):
            raise ValueError(f"LGBParams: num_boost_round 1 to {MAX_TREES}, num_leaves 2 to "
                             f"{MAX_LEAVES}, learning_rate in (0, 1000]")
        for name in ("min_data_in_leaf", "bagging_freq", "min_train_samples"):
            if not 0 <= getattr(self, name) < 2 ** 31:
                raise ValueError(f"LGBParams.{name} must be in [0, 2**31), got {getattr(self, name)}")
        for name in ("min_sum_hessian_in_leaf", "lambda_l2"):
            if not 0 <= getattr(self, name) < float("inf"):
                raise ValueError(f"LGBParams.{name} must be finite and >= 0, got {getattr(self, name)}")
        for name in ("feature_fraction", "bagging_fraction"):
            v = getattr(self, name)
            if not 0.0 < v <= 1.0:
                raise ValueError(f"LGBParams.{name} must be in (0, 1], got {v}")
        if not (0 <= self.retrain_ratio < float("inf") and 0 <= self.weight_floor < float("inf")):
            raise ValueError("LGBParams: retrain_ratio and weight_floor must be finite and >= 0")


class _TaskData:
    """Measured programs of one task: feature matrices and costs (inf = failed)."""

    __slots__ = ("feats", "costs", "keys")

    def __init__(self) -> None:
        self.feats: list[np.ndarray] = []
        self.costs: list[float] = []
        self.keys: set[str] = set()

    def labels(self) -> np.ndarray:
        c = np.asarray(self.costs, dtype=float)
        ok = np.isfinite(c) & (c > 0)
        if not ok.any():
            return np.zeros(len(c))
        best = c[ok].min()
        return np.where(ok, best / np.where(ok, c, 1.0), 0.0)


def _cost_of(result: Any) -> float:
    if not getattr(result, "ok", False) or not result.costs:
        return float("inf")
    c = float(result.mean_cost)
    return c if 0.0 < c < MAX_FLOAT else float("inf")  # MAX_FLOAT: a failed measurement


# Below this many rows LightGBM is faster on one thread: its OpenMP regions are too short to pay
# for the fork/join, and on a busy 2-core machine spin-waiting threads made a 0.5 s training 16 s.
SINGLE_THREAD_ROWS = 50_000


def _num_threads(rows: int, cores: int | None) -> int:
    """LightGBM's thread count for ``rows`` rows; ``cores`` None = LightGBM's own default (0: the
    OpenMP default), used only before the model has seen a task."""
    if rows < SINGLE_THREAD_ROWS:
        return 1
    return 0 if cores is None else cores


class LGBModel(CostModel):
    """LightGBM pack-sum model. ``predict`` before any training returns random scores (seeded),
    so the first round explores as the random model does.

    ``num_threads``: LightGBM threads on large batches; None = the ``num_cores`` of the
    ``hardware_params`` of the last task given to ``update``/``predict`` (the model never asks the
    machine itself)."""

    def __init__(self, params: LGBParams | None = None, seed: int | None = None,
                 num_threads: int | None = None):
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                        or num_threads < 1):
            raise ValueError(f"LGBModel num_threads must be a positive integer or None, got {num_threads!r}")
        self.params = params if params is not None else LGBParams()
        self.seed = seed
        self.num_threads = num_threads
        self._task_cores: int | None = None  # from the tasks seen, when num_threads is None
        self.rng = np.random.default_rng(seed)
        self.booster: Any = None
        self.base_booster: Any = None  # loaded from a file: new training continues from it
        self.data: dict[str, _TaskData] = {}
        self.last_train_size = 0
        self.train_seconds = 0.0  # total, for the tuner's statistics
        self.num_trainings = 0
        # Where a loaded model came from (``cost_model.pretrained.Provenance`` fields as a dict,
        # checked on load); saved again with the model. Empty for a model trained here.
        self.provenance: dict = {}
        self.pretrained_from: str | None = None  # the file of a pre-trained start, if any

    # ---- learning ------------------------------------------------------------------------------
    def num_samples(self) -> int:
        return sum(len(d.costs) for d in self.data.values())

    def add(self, workload_key: str, state: Any, cost: float) -> bool:
        d = self.data.get(workload_key)
        if d is None:
            d = self.data[workload_key] = _TaskData()
        key = state.canonical_key()
        if key in d.keys:
            return False
        rows, _ = get_per_store_features([state])
        d.keys.add(key)
        d.feats.append(rows)
        d.costs.append(cost)
        return True

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates; retrains unless too little new data came in. A
        training LightGBM refuses (nothing to split on: every feature constant, or a loaded
        model's ``min_data_in_leaf`` above the rows held) is logged and skipped: the model keeps
        the trees it has and tries again with more data, and the tuning goes on."""
        from lightgbm.basic import LightGBMError  # noqa: PLC0415 - slow to import; train() needs it

        for inp, res in zip(inputs, results):
            self._see(inp.task)
            self.add(inp.task.workload_key, inp.state, _cost_of(res))
        try:
            self._maybe_train()
        except LightGBMError as err:
            why = str(err).strip().splitlines()[0] if str(err).strip() else "no reason given"
            logger.warning("cost model: LightGBM cannot train on these %d programs (%s); keeping "
                           "the trees it has", self.num_samples(), why[:200])

    def update_from_file(self, path: str | os.PathLike, workload_keys: Iterable[str] | None = None) -> int:
        """Learn from a record file (every task in it, or only ``workload_keys``); returns the
        number of records added. Records whose workload is not registered here, or whose steps do
        not replay, are skipped (with the record module's warnings)."""
        added = 0
        for key, state, cost in samples_from_file(path, workload_keys):
            added += self.add(key, state, cost)
        self._maybe_train(force=added > 0)
        return added

    def update_from_records(self, records: Iterable[tuple[MeasureInput, MeasureResult]]) -> int:
        """Learn from ``(MeasureInput, MeasureResult)`` pairs, as the records layer reads them
        (``ansor.records.load_records``), training once at the end; returns the number added."""
        added = 0
        for inp, res in records:
            added += self.add(inp.task.workload_key, inp.state, _cost_of(res))
        self._maybe_train(force=added > 0)
        return added

    def _see(self, task: Any) -> None:
        hw = getattr(task, "hardware_params", None)
        cores = getattr(hw, "num_cores", None)
        if isinstance(cores, int):
            self._task_cores = cores

    def _threads(self, rows: int) -> int:
        return _num_threads(rows, self.num_threads if self.num_threads is not None else self._task_cores)

    def _maybe_train(self, force: bool = False) -> None:
        n = self.num_samples()
        if n < self.params.min_train_samples:
            return
        new = n - self.last_train_size
        if not force and self.booster is not None and new < self.params.retrain_ratio * self.last_train_size:
            logger.debug("cost model: %d new samples, retraining skipped", new)
            return
        if new <= 0 and self.booster is not None:
            return
        self.train()

    def _dataset(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        feats, groups, labels = [], [], []
        for d in self.data.values():
            lab = d.labels()
            for m, y in zip(d.feats, lab):
                feats.append(m)
                groups.append(m.shape[0])
                labels.append(y)
        rows = np.concatenate(feats) if feats else np.zeros((0, NUM_FEATURES))
        g = np.asarray(groups, dtype=np.int64)
        y = np.asarray(labels, dtype=float)
        w = np.maximum(y, self.params.weight_floor)
        return rows, g, y, w

    def train(self) -> None:
        """Fit the trees on every sample held (called by ``update``; public for tools)."""
        import lightgbm as lgb

        t0 = time.perf_counter()
        rows, groups, y, w = self._dataset()
        keep = groups > 0
        rows_owner = np.repeat(np.arange(len(groups)), groups)
        if not keep.any() or len(rows) == 0:
            return
        n_prog = len(groups)

        def pack_sum_objective(preds: np.ndarray, _data: Any) -> tuple[np.ndarray, np.ndarray]:
            sums = np.bincount(rows_owner, weights=preds, minlength=n_prog)
            resid = (sums - y) * w
            return resid[rows_owner], w[rows_owner]

        p = self.params
        lgb_params = {
            "objective": pack_sum_objective,
            "learning_rate": p.learning_rate,
            "num_leaves": p.num_leaves,
            "min_data_in_leaf": p.min_data_in_leaf,
            "min_sum_hessian_in_leaf": p.min_sum_hessian_in_leaf,
            "feature_fraction": p.feature_fraction,
            "bagging_fraction": p.bagging_fraction,
            "bagging_freq": p.bagging_freq,
            "lambda_l2": p.lambda_l2,
            "num_threads": self._threads(len(rows)),
            "seed": 0 if self.seed is None else int(self.seed),
            "deterministic": True,
            "verbosity": -1,
        }
        ds = lgb.Dataset(rows, label=np.zeros(len(rows)), feature_name=lgb_feature_names(),
                         free_raw_data=False, params={"verbosity": -1})
        if self.base_booster is not None:  # new trees fit what the loaded ones got wrong
            ds.set_init_score(self.base_booster.predict(rows, raw_score=True))
        self.booster = lgb.train(lgb_params, ds, num_boost_round=p.num_boost_round)
        self.last_train_size = self.num_samples()
        dt_ = time.perf_counter() - t0
        self.train_seconds += dt_
        self.num_trainings += 1
        logger.info("cost model: trained on %d programs (%d statements) of %d task(s) in %.2f s",
                    n_prog, len(rows), len(self.data), dt_)

    # ---- predicting ----------------------------------------------------------------------------
    def _raw(self, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows))
        if self.base_booster is not None:
            out += self.base_booster.predict(rows, raw_score=True, num_threads=self._threads(len(rows)))
        if self.booster is not None:
            out += self.booster.predict(rows, raw_score=True, num_threads=self._threads(len(rows)))
        return out

    def predict(self, task: TaskLike, states: Sequence[State]) -> np.ndarray:
        """Predicted normalised throughput per state (higher is faster); NaN for a state whose
        features could not be computed (the search drops it)."""
        self._see(task)
        rows, group = get_per_store_features(states)
        if self.booster is None and self.base_booster is None:
            out = self.rng.uniform(0.0, 1.0, size=len(states))
        else:
            owner = np.repeat(np.arange(len(states)), group)
            out = np.bincount(owner, weights=self._raw(rows), minlength=len(states))
        return np.where(group > 0, out, np.nan)

    # ---- persistence ---------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, provenance: dict | None = None) -> None:
        """Write the trees, the feature schema version and the parameters as one JSON file;
        ``provenance`` (machine, date, tasks: ``cost_model.pretrained``) is stored beside them."""
        if self.booster is None and self.base_booster is None:
            raise ValueError("the cost model has not been trained: nothing to save")
        import lightgbm as lgb

        booster = self.booster
        if self.base_booster is not None:
            # Loaded trees plus trees trained since: store both; loading adds them back up.
            parts = [self.base_booster.model_to_string()] + (
                [booster.model_to_string()] if booster is not None else [])
        else:
            parts = [booster.model_to_string()]
        doc = {"format": MODEL_FORMAT, "feature_version": FEATURE_VERSION,
               "feature_names": FEATURE_NAMES, "params": asdict(self.params),
               "lightgbm": lgb.__version__, "num_samples": self.num_samples(), "boosters": parts}
        prov = provenance if provenance is not None else self.provenance
        if prov:
            doc["provenance"] = prov
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike, seed: int | None = None) -> "LGBModel":
        """A model whose predictions start from the saved trees; training on new data adds trees
        on top of them (so what was learned on other tasks is kept). The file is untrusted input:
        ``cost_model.model_file`` checks all of it before LightGBM parses anything
        (CostModelFileError naming the file and the field)."""
        import lightgbm as lgb

        checked = read_model_file(path)
        model = cls(_params_from_file(checked.params, checked.path), seed)
        try:
            boosters = [lgb.Booster(model_str=s) for s in checked.boosters]
        except lgb.basic.LightGBMError as e:  # not expected after the checks; still the file's fault
            raise CostModelFileError(f"{checked.path}: LightGBM refuses a booster "
                                     f"({str(e).strip()[:200]})") from None
        model.base_booster = boosters[0] if len(boosters) == 1 else _Sum(boosters)
        model.provenance = checked.provenance
        return model


def _params_from_file(raw: dict, path: str) -> LGBParams:
    """The stored parameters (unknown names ignored), each of its field's type and in its range."""
    kw: dict[str, Any] = {}
    for f in fields(LGBParams):
        if f.name not in raw:
            continue
        v = raw[f.name]
        is_int = isinstance(f.default, int)
        if isinstance(v, bool) or not isinstance(v, int if is_int else (int, float)):
            raise CostModelFileError(f"{path}: params.{f.name} must be "
                                     f"{'an integer' if is_int else 'a number'}, not a {type(v).__name__}")
        kw[f.name] = v
    try:
        return LGBParams(**kw)
    except ValueError as e:
        raise CostModelFileError(f"{path}: params: {e}") from None


class _Sum:
    """Several boosters whose raw predictions add up (a loaded model plus trees trained on it)."""

    def __init__(self, boosters: list[Any]):
        self.boosters = boosters

    def predict(self, rows: np.ndarray, raw_score: bool = True, num_threads: int = 0) -> np.ndarray:
        return sum(b.predict(rows, raw_score=True, num_threads=num_threads) for b in self.boosters)

    def model_to_string(self) -> str:  # pragma: no cover - saved as separate parts instead
        raise NotImplementedError


def samples_from_file(path: str | os.PathLike, workload_keys: Iterable[str] | None
                       ) -> Iterable[tuple[str, Any, float]]:
    """(workload key, state, cost) of every record that can be rebuilt in this process."""
    for line, state, cost in lines_with_states(path, workload_keys):
        yield line.workload_key, state, cost


def lines_with_states(path: str | os.PathLike, workload_keys: Iterable[str] | None
                      ) -> Iterable[tuple[Any, Any, float]]:
    """(record line, state, cost) of every record that can be rebuilt in this process; a line
    that cannot is skipped with a warning naming the file and line."""
    wanted = None if workload_keys is None else set(workload_keys)
    path = os.fspath(path)
    warner = LineWarner(path)
    # Keyed by the key a line claims *and* its task as written: a hostile line claiming another
    # workload's key must not lend its computation to that workload's honest lines.
    dags: dict[tuple[str, str], Any] = {}
    for line in iter_lines(path, warner):
        if wanted is not None and line.workload_key not in wanted:
            continue
        cache_key = (line.workload_key, json.dumps(line.task, sort_keys=True))
        dag = dags.get(cache_key)
        if dag is None:
            try:
                t = line.task
                if "workload" in t:
                    dag = ComputeDAG(make_workload(t["workload"], t.get("args", [])))
                else:
                    dag = ComputeDAG.from_json(t["dag"])
                dag.check_bounds()  # as every reader of records does (SearchTask.from_json)
                if dag.workload_key != line.workload_key:
                    dag = (f"its task has key {dag.workload_key}, the record says {line.workload_key}: "
                           "the computation changed since the record was written, or the line lies")
            except Exception as e:  # noqa: BLE001 - an unknown workload skips its records
                dag = f"cannot rebuild the task: {type(e).__name__}: {e}"[:300]
            dags[cache_key] = dag
        if isinstance(dag, str):
            warner(line.lineno, dag)
            continue
        why = implausible_for_dag(line.result.costs, dag) if line.result.ok else None
        if why is not None:  # faster than any CPU runs this DAG: not a training target
            warner(line.lineno, why)
            continue
        try:
            state = replay(dag, line.steps, verbatim=False)
        except Exception as e:  # noqa: BLE001 - steps from a file may fail in any way
            warner(line.lineno, f"its steps do not replay: {type(e).__name__}: {str(e)[:200]}")
            continue
        yield line, state, _cost_of(line.result)
    warner.finish()
