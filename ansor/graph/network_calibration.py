"""The task scheduler's estimate calibrated in the network: each task's records scaled by how
much slower its kernel runs inside the compiled network than its records say.

A candidate is timed alone (network mode: its weights rotated, its activations warm), and no
mode fits every kernel: on MobileNet-V2 (Zen 4, 2026-11-28) the stem ran 0.12 ms in its records
and 0.26 ms in the network, the 56x56x144 depthwise conv 0.07 against 0.17, while most 7x7 and
14x14 layers ran within 10% of theirs; the sum of records sat 19% below the measured network,
and cold or handoff timing moved some kernels closer and others further. What the network does
to a kernel (its input left by a producer that split the work another way, its output written
to memory an earlier kernel evicted, the first kernel after the caller's code) is measured
where it happens instead: the network as it would be compiled now (``network_choice``, the
sidecar written as the final choice writes it) is compiled from the log and profiled
(``NetworkModule.profile``: each kernel's median time in the running network), and each task
that runs in it gets ``factor = in-network seconds per occurrence / best recorded cost``.

A task that does not run in the compiled network (a variant not chosen, a pair not fused, or
the groups a fused pair replaced) takes the factor of the network position it stands for: its
group's, a fused pair's for its two groups and the mean of its two groups' for a pair run
apart; anything else the median factor. Factors are clamped to ``FACTOR_RANGE`` (a profile
glitch must not make a task look free or hopeless) and each step's time is the median of
``PROFILES`` profiles, each the step's mean over its inferences (``median_profile``). Each calibration replaces the last one whole: the shared machines we
measure on drift by 10-20% over minutes (a BERT layer profiled at 10.5, 9.4, 9.5, 10.7 and
10.9 ms within one minute), and a median over earlier calibrations lagged that drift (the
estimate 9.4 ms, the network then measured 10.9).

Where Winograd variants are tuned, the network with each Winograd conv swapped for the direct one
(and each direct conv with a Winograd variant for its best one) is profiled beside it
(``alternative_layouts``), so both ways of a conv have an in-network factor and the variant
choice (``network_choice.choose_network(factors=...)``) weighs them by it: ResNet-50's F(6, 3)
56x56 conv ran 1.58x its record in the network where the direct 56x56 convs ran 1.2-1.4x
theirs (Zen 4, 2026-11-28), so a choice on records alone favoured Winograd.

``NetworkCalibration`` (a scheduler callback) calibrates once every task has a record (after
the warm-up) and again every ``every`` new trials, so the gradient weighs each task by what it
costs in the network; ``calibrate`` is the same step once more after tuning, on the network the
final choice compiles. The estimate printed at the end of a run is therefore a prediction from
factors measured up to a quarter of the budget earlier, and the profile after it says how close
it came.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from ..scheduler_policy import NO_COST
from ..scheduler_progress import TaskSchedulerCallback
from .layouts import NHWC
from .winograd_variant import winograd_m

__all__ = ["ALTERNATIVE", "FACTOR_RANGE", "Calibration", "NetworkCalibration", "alternative_layouts", "calibrate",
           "factors_from_profile", "append_tsv", "median_profile", "network_profiler", "task_factors"]

# Factors outside this range are clamped (a kernel 8x slower in the network than alone is
# beyond anything measured; 0.25x faster would be a record from a slow moment of the machine).
FACTOR_RANGE = (0.25, 8.0)
# Profiles per calibration; each step's time is its median over them.
PROFILES = 3
# The key marking a profile row of the alternative network (``network_profiler``).
ALTERNATIVE = "alternative"


@dataclass(frozen=True)
class Calibration:
    """One calibration: ``factors`` one per scheduler task; ``measured`` workload key -> factor
    of the tasks that ran in the network; ``profile_seconds`` the profiled kernels' sum;
    ``at_trials`` the scheduler's new trials then; ``seconds`` what it took."""

    factors: list[float]
    measured: dict[str, float]
    profile_seconds: float
    at_trials: int
    seconds: float
    records: dict[str, float]  # the best recorded cost (s) each measured factor divides
    keys: tuple[str, ...] = ()  # the scheduler tasks' workload keys, in ``factors``' order
    alternative_seconds: float | None = None  # the alternative network's kernels (``network_profiler``)

    def by_key(self) -> dict[str, float]:
        """Workload key -> factor, for every scheduler task (what ``choose_network`` scales by)."""
        return dict(zip(self.keys, self.factors))


def _clamp(f: float) -> float:
    lo, hi = FACTOR_RANGE
    return min(hi, max(lo, f))


def factors_from_profile(profile: Sequence[dict[str, Any]], costs: dict[str, float]) -> dict[str, float]:
    """Per workload key of a profiled step (``NetworkModule.profile`` rows: ``task``,
    ``seconds``) with a cost in ``costs``: its mean seconds per occurrence in the network over
    that cost, clamped. Steps without a task (transforms, element-wise groups) are skipped."""
    spent: dict[str, list[float]] = {}
    for row in profile:
        key = row.get("task") or ""
        if key and key in costs and costs[key] > 0:
            spent.setdefault(key, []).append(float(row["seconds"]))
    return {k: _clamp(sum(v) / len(v) / costs[k]) for k, v in spent.items()}


def task_factors(keys: Sequence[str], measured: dict[str, float], group_keys: Sequence[Sequence[str]],
                 pair_keys: Sequence[tuple[int, int, str]] = ()) -> list[float]:
    """One factor per scheduler task (``keys``: their workload keys): its measured factor, else
    that of the network position it stands for (module docstring): ``group_keys[g]`` the keys
    of group g's alternatives, ``pair_keys`` ``(producer group, consumer group, fused key)``."""
    default = statistics.median(measured.values()) if measured else 1.0

    def mean(fs: list[float]) -> float | None:
        return sum(fs) / len(fs) if fs else None

    group = [mean([measured[k] for k in ks if k in measured]) for ks in group_keys]
    for a, b, fused in pair_keys:  # groups a fused pair replaced stand for its kernel
        if fused in measured:
            for g in (a, b):
                if group[g] is None:
                    group[g] = measured[fused]
    out: dict[str, float] = dict(measured)
    for g, ks in enumerate(group_keys):
        for k in ks:
            if k not in out and group[g] is not None:
                out[k] = group[g]
    for a, b, fused in pair_keys:  # a pair run apart: the mean of its two groups
        if fused not in out:
            f = mean([x for x in (group[a], group[b]) if x is not None])
            if f is not None:
                out[fused] = f
    return [out.get(k, default) for k in keys]


def calibrate(scheduler: Any, compile_profile: Callable[[], Sequence[dict[str, Any]]],
              group_keys: Sequence[Sequence[str]], pair_keys: Sequence[tuple[int, int, str]] = ()) -> Calibration | None:
    """Profile the network (``compile_profile()``: the compiled network's profile rows) and set
    the scheduler's calibration (``set_calibration``) from it; None, leaving it as it was, when
    some task being tuned has no record yet."""
    keys = [t.workload_key for t in scheduler.tasks]
    best = [scheduler.best_cost(i) for i in range(len(keys))]
    if any(best[i] is None or best[i] >= NO_COST for i in scheduler.tuned_tasks()):
        return None  # a task filtered out of tuning may have no record: it runs untuned, uncosted
    costs = {k: c for k, c in zip(keys, best) if c is not None and c < NO_COST}
    t0 = time.perf_counter()
    rows = compile_profile()
    measured = factors_from_profile(rows, costs)
    factors = task_factors(keys, measured, group_keys, pair_keys)
    scheduler.set_calibration(factors)
    alt = [r for r in rows if r.get(ALTERNATIVE)]
    return Calibration(factors, measured, float(sum(r["seconds"] for r in rows if not r.get(ALTERNATIVE))),
                       scheduler.trials, time.perf_counter() - t0, {k: costs[k] for k in measured},
                       tuple(keys), float(sum(r["seconds"] for r in alt)) if alt else None)


TSV_HEADER = ["trials", "task", "record_ms", "in_network_ms", "factor"]


def append_tsv(path: str | os.PathLike, cal: Calibration, descs: dict[str, str]) -> None:
    """One row per task measured in the network (``TSV_HEADER``; a header first when the file
    is new): which tasks the network slows, calibration after calibration."""
    new = not os.path.exists(path)
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write("\t".join(TSV_HEADER) + "\n")
        for k, factor in sorted(cal.measured.items(), key=lambda kv: -kv[1]):
            rec = cal.records[k]
            f.write(f"{cal.at_trials}\t{descs.get(k, k)}\t{rec * 1e3:.4f}\t{rec * factor * 1e3:.4f}\t{factor:.3f}\n")


class NetworkCalibration(TaskSchedulerCallback):
    """Calibrate the scheduler in the network (``calibrate``) when every task first has a
    record and then every ``every`` new trials (0: only the first time). ``compile_profile``
    builds the network as it would be compiled now and returns its profile; a failure to do so
    is told on ``file`` and leaves the last calibration in place (the run goes on)."""

    def __init__(self, compile_profile: Callable[[], Sequence[dict[str, Any]]],
                 group_keys: Sequence[Sequence[str]], pair_keys: Sequence[tuple[int, int, str]] = (),
                 every: int = 0, file: TextIO | None = None, tsv: str | os.PathLike | None = None):
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"NetworkCalibration every must be an integer >= 0, got {every!r}")
        self.compile_profile = compile_profile
        self.group_keys = [list(ks) for ks in group_keys]
        self.pair_keys = list(pair_keys)
        self.every = every
        self.file = file
        self.tsv = tsv  # each calibration's factors appended there (``append_tsv``), if given
        self.last: Calibration | None = None
        self.failed = 0
        self.tried_at: int | None = None  # the trial count of the last attempt (made or failed)

    def run(self, scheduler: Any, compile_profile: Callable[[], Sequence[dict[str, Any]]] | None = None
            ) -> Calibration | None:
        """One calibration now (of the network ``compile_profile`` profiles, default the one this
        callback was made with); told in one line. None when a task has no record or it failed."""
        before = scheduler.estimated_latency()
        try:
            cal = calibrate(scheduler, compile_profile or self.compile_profile, self.group_keys, self.pair_keys)
        except Exception as err:  # noqa: BLE001 - a compile or profile failure must not end the run
            self.failed += 1
            self.tried_at = scheduler.trials
            print(f"calibration in the network failed ({type(err).__name__}: {err}); the estimate "
                  "keeps its last factors", file=self.file or sys.stderr, flush=True)
            return None
        if cal is None:
            return None
        self.last, self.tried_at = cal, scheduler.trials
        if self.tsv is not None:
            try:
                append_tsv(self.tsv, cal, {t.workload_key: t.desc for t in scheduler.tasks})
            except OSError as err:  # a full disk: the run goes on, the log is what matters
                print(f"calibration: cannot write {self.tsv}: {err}", file=self.file or sys.stderr)
                self.tsv = None
        after = scheduler.estimated_latency()
        slow = sorted(cal.measured.items(), key=lambda kv: -kv[1])[:1]
        alt = ("" if cal.alternative_seconds is None else
               f" (Winograd and direct swapped: {cal.alternative_seconds * 1e3:.3f} ms)")
        print(f"calibrated in the network at trial {cal.at_trials}: kernels {cal.profile_seconds * 1e3:.3f} ms "
              f"in the network{alt}; estimate {_ms(before)} -> {_ms(after)} ms; factors "
              f"{min(cal.factors):.2f}-{max(cal.factors):.2f}"
              + (f" (largest {slow[0][1]:.2f}x)" if slow else "") + f"; took {cal.seconds:.1f} s",
              file=self.file or sys.stdout, flush=True)
        return cal

    def key_factors(self) -> dict[str, float] | None:
        """The last calibration's factor per workload key (None before the first): what the
        graph-level choice scales the variants' records by."""
        return self.last.by_key() if self.last is not None else None

    def post_tune(self, scheduler: Any, task_id: int) -> None:
        if self.tried_at is None or (self.every > 0 and scheduler.trials - self.tried_at >= self.every):
            self.run(scheduler)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def network_profiler(plan: Any, log_file: str | os.PathLike, target: str = "native",
                     choose: Callable[[], Any] | None = None) -> Callable[[], list[dict[str, Any]]]:
    """``compile_profile`` for ``NetworkCalibration``: ``choose()`` (the graph-level choice,
    written to the log's sidecar; a ``network_choice.NetworkChoice`` or None), then ``plan``
    compiled from ``log_file`` as the compile would build it (``fuse_pairs``/``layouts``
    "auto") and profiled. Where the choice runs a conv as Winograd or has Winograd variants it
    did not take, the network with each of those groups swapped (``alternative_layouts``) is
    compiled and profiled too, its rows marked ``ALTERNATIVE``: both ways of each such conv then
    have a factor measured in the network, and the next choice weighs them by it."""
    def run() -> list[dict[str, Any]]:
        from .executor import compile_network  # noqa: PLC0415 - the executor imports much

        choice = choose() if choose is not None else None
        lib = compile_network(plan, log_file=log_file, target=target, verbose=False)
        rows = median_profile(lib)
        alt = alternative_layouts(choice) if choice is not None else None
        if alt is not None:
            other = compile_network(plan, log_file=log_file, target=target, verbose=False, layouts=alt)
            rows += [{**r, ALTERNATIVE: True} for r in median_profile(other)]
        return rows
    return run


def alternative_layouts(choice: Any) -> list[str] | None:
    """The chosen layouts (``choice``: a ``NetworkChoice``) with every Winograd group run direct
    (NHWC) and every direct group that has a Winograd variant with a record run as its best one;
    None when no group has both. Activations stay NHWC either way, so no transform moves."""
    if choice is None or choice.layouts is None or choice.variants is None:
        return None
    out = list(choice.layouts.layouts)
    swapped = False
    for i, (v, costs) in enumerate(zip(choice.variants, choice.layouts.group_costs)):
        cost = dict(zip(v.layouts, costs))
        wino = [(c, n) for n, c in cost.items() if winograd_m(n) is not None and math.isfinite(c)]
        if winograd_m(out[i]) is not None and math.isfinite(cost.get(NHWC, math.inf)):
            out[i], swapped = NHWC, True
        elif out[i] == NHWC and wino:
            out[i], swapped = min(wino)[1], True
    return out if swapped else None


def median_profile(lib: Any, profiles: int = PROFILES) -> list[dict[str, Any]]:
    """``lib.profile(statistic="mean")`` taken ``profiles`` times, each step's seconds the
    median of them. Each profile's step times are means over its inferences, so that they sum to
    what ``benchmark()`` times (a repeat's mean call); per-step medians summed 3-14% lower on a
    shared host (a BERT layer: 9.55 ms profiled, 10.90 ms benchmarked right after)."""
    runs = [lib.profile(statistic="mean") for _ in range(max(1, profiles))]
    return [{**rows[0], "seconds": statistics.median(r["seconds"] for r in rows)} for rows in zip(*runs)]
