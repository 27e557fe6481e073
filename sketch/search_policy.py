"""The sketch search policy: which candidate programs to measure next, for one task.

Each round (``generate_measure_candidates``) follows Ansor: sample a population of complete
schedules from the task's sketches by random annotation, add the best programs measured so far,
evolve the population for a few generations under the cost model (parents drawn in proportion to
their predicted score, children made by mutation), and hand back the model's favourites that have
not been measured yet, with a small random share (epsilon-greedy) so that a wrong model cannot
lock the search out of unexplored regions. The model's best state of each sketch family (the
stage-adding steps: cache write, pack, rfactor) is measured every round as well, so a pre-trained
model's preference for one family cannot hide a family that is faster on this task, and half of the
model's picks come from the family of the fastest program measured so far.

Every knob is in ``SearchParams``; the defaults are the published Ansor CPU parameters, except that
the population scales with the number of states a round measures (2048 at Ansor's 64).
"""
from __future__ import annotations

import logging
import random
import time
from typing import Any, Iterable, Sequence

import numpy as np

from .contracts import CostModelLike, TaskLike
from .gc_pause import fewer_collections
from .hardware import HardwareParams
from .init_population import lowers, lowers_cached, sample_initial_population
from .loop_state import InvalidStepError, State
from .mutation import mutate
from .replay import fit_lengths, replay
from .search_params import SearchParams
from .sketch_rules import generate_sketches

__all__ = ["SearchParams", "SketchPolicy"]  # SearchParams re-exported: its documented import path

logger = logging.getLogger("ansor.search")


class SketchPolicy:
    """The Ansor search for one task.

    ``task``: a ``sketch.contracts.TaskLike`` (``compute_dag`` and ``workload_key``: a
    SearchTask). ``cost_model``: a ``CostModelLike`` (``predict(task, states)``: higher is
    faster; a ``cost_model.CostModel``). ``sketches``: the task's
    sketches (default: ``sketch.sketch_rules.generate_sketches``). ``seed`` makes a round
    reproducible given the same model scores. ``hardware_params``: the machine searched for
    (default: the task's ``hardware_params``); it fills the ``params`` not set explicitly
    (``SearchParams.with_hardware``) and the sketch rules' core count.
    """

    def __init__(self, task: TaskLike, cost_model: CostModelLike, params: SearchParams | None = None,
                 seed: int | None = None, verbose: int = 0,
                 sketches: Sequence[State] | None = None,
                 hardware_params: HardwareParams | None = None):
        hw = hardware_params if hardware_params is not None else getattr(task, "hardware_params", None)
        if not isinstance(hw, HardwareParams):
            raise TypeError("SketchPolicy needs the target machine: pass hardware_params= (a "
                            "sketch.hardware.HardwareParams) or a task that carries one (an "
                            f"ansor.SearchTask does), got {type(hw).__name__}")
        self.task = task
        self.cost_model = cost_model
        self.hardware_params = hw
        self.params = (params if params is not None else SearchParams()).with_hardware(hw)
        self.verbose = verbose
        self.rng = random.Random(seed)
        self.sketches: list[State] = (list(sketches) if sketches is not None
                                      else generate_sketches(task.compute_dag, hardware_params=hw,
                                                             pack_inputs=self.params.pack_inputs))
        if not self.sketches:
            raise ValueError(f"no sketch for task {getattr(task, 'workload_key', task)!r}")
        self.last_round_stats: dict[str, Any] = {}
        self._evo_stats: dict[str, Any] = {}
        self._family_ranked: dict[tuple, list[State]] = {}  # per sketch family, best first

    def _log(self, msg: str, *args: Any) -> None:
        (logger.info if self.verbose else logger.debug)(msg, *args)

    # ---- sampling ----------------------------------------------------------------------------
    def sample_initial_population(self, n: int, stats: dict | None = None) -> list[State]:
        """Up to ``n`` distinct valid states drawn by random annotation of the sketches."""
        return sample_initial_population(self.sketches, n, self.rng, self.params, stats)

    # ---- evolution -----------------------------------------------------------------------------
    def _predict(self, states: Sequence[State]) -> tuple[np.ndarray, np.ndarray]:
        """Scores (finite) and a mask of the states the model rejected (NaN or -inf score: a
        model that cannot featurise a program says so that way)."""
        if not states:
            return np.zeros(0), np.zeros(0, dtype=bool)
        raw = np.asarray(self.cost_model.predict(self.task, list(states)), dtype=float)
        if raw.shape != (len(states),):
            raise ValueError(f"cost model returned {raw.shape} scores for {len(states)} states")
        rejected = np.isnan(raw) | np.isneginf(raw)
        scores = np.where(rejected, 0.0, np.clip(raw, -1e300, 1e300))
        return scores, rejected

    def evolutionary_search(self, init_population: Sequence[State], out_size: int,
                            exclude_keys: set[str] | frozenset[str] = frozenset(),
                            population_size: int | None = None) -> list[State]:
        """Evolve ``init_population`` and return the ``out_size`` best states seen (by model score,
        best first), leaving out any whose canonical key is in ``exclude_keys``.
        ``population_size``: children per generation (default: ``params.population`` for a round
        of ``out_size / candidate_pool_factor`` measurements).

        Each generation is scored with one batched ``predict``; parents are drawn with
        probability proportional to max(score, 0) (uniformly if all are 0), mutated with
        ``mutation_prob`` (else copied), and children are deduplicated.
        """
        p = self.params
        rng = self.rng
        size = (population_size if population_size is not None
                else p.population(max(1, out_size // p.candidate_pool_factor)))
        pop: list[State] = []
        seen: set[str] = set()
        for s in init_population:
            k = s.canonical_key()
            if k not in seen:
                seen.add(k)
                pop.append(s)
        best: dict[str, tuple[float, State]] = {}
        invalid = mutated = 0
        kinds: dict[str, int] = {}
        for gen in range(p.num_generations + 1):
            if not pop:
                break
            scores, rejected = self._predict(pop)
            for s, sc, bad in zip(pop, scores, rejected):
                k = s.canonical_key()
                if bad:
                    best.pop(k, None)
                elif k not in exclude_keys:
                    best[k] = (float(sc), s)
            if gen == p.num_generations:
                break
            weights = np.maximum(scores, 0.0)
            if weights.sum() <= 0:  # no preference: uniform over the states the model accepts
                weights = (~rejected).astype(float) if not rejected.all() else np.ones(len(pop))
            cum = np.cumsum(weights).tolist()
            nxt: list[State] = []
            seen = set()
            budget = size * p.evolution_max_attempts_factor
            attempts = 0
            while len(nxt) < size and attempts < budget:
                batch = min(budget - attempts, 2 * (size - len(nxt)))
                parents = rng.choices(pop, cum_weights=cum, k=batch)
                for parent in parents:
                    attempts += 1
                    if rng.random() < p.mutation_prob:
                        try:
                            child, kind = mutate(parent, rng, p)
                        except InvalidStepError:
                            invalid += 1
                            continue
                        if not lowers_cached(child):
                            invalid += 1
                            continue
                        mutated += 1
                        kinds[kind] = kinds.get(kind, 0) + 1
                    else:
                        child = parent
                    k = child.canonical_key()
                    if k in seen:
                        continue
                    seen.add(k)
                    nxt.append(child)
                    if len(nxt) >= size:
                        break
            self._log("generation %d: %d children of %d parents (best parent score %.4g)",
                      gen + 1, len(nxt), len(pop), float(scores.max()))
            pop = nxt
        self._evo_stats = {"invalid": invalid, "mutated": mutated, "mutations": kinds}
        ranked = sorted(best.values(), key=lambda t: -t[0])
        self._family_ranked = _by_family((s for _, s in ranked), out_size)
        return [s for _, s in ranked[:out_size]]

    # ---- the tuner's entry point -------------------------------------------------------------
    def _reseed(self, best_states: Sequence[State], n: int) -> list[State]:
        """The first ``n`` of ``best_states`` that replay on this task's DAG (records may come
        from another process, whose DAG objects are not ours; a similar task's schedules from
        other shapes, their split lengths fitted to this task's loops: ``replay.fit_lengths``)."""
        out: list[State] = []
        dag = self.task.compute_dag
        for s in best_states:
            if len(out) >= n:
                break
            try:
                r = s if s.dag is dag else replay(dag, s.steps, verbatim=False, split_lengths=fit_lengths)
            except InvalidStepError as e:
                logger.debug("a measured state does not replay on this task: %s", e)
                continue
            if lowers_cached(r):
                out.append(r)
        return out

    def generate_measure_candidates(self, num: int, measured_keys: set[str] | frozenset[str],
                                    best_states: Sequence[State]) -> list[State]:
        """Up to ``num`` distinct states to measure next, none of whose canonical keys is in
        ``measured_keys``, each of which lowers.

        ``best_states``: the best measured states of this task, best first; the first
        ``use_measured_ratio`` of the population (``params.population(num)``) join it, so the
        evolution refines what is known to be fast. The result lists the model's best after
        evolution first, then ``int(eps_greedy * num)`` random initial samples (epsilon-greedy;
        more if the model's list runs short, fewer if unmeasured random ones run out).
        """
        with fewer_collections():  # a fifth of a round's CPU went to the cyclic collector
            return self._generate(num, measured_keys, best_states)

    def _generate(self, num: int, measured_keys: set[str] | frozenset[str],
                  best_states: Sequence[State]) -> list[State]:
        p = self.params
        t0 = time.perf_counter()
        size = p.population(num)
        n_seed = min(len(best_states), int(p.use_measured_ratio * size))
        seeds = self._reseed(best_states, n_seed)
        sample_stats: dict = {}
        fresh = self.sample_initial_population(size - len(seeds), sample_stats)
        t1 = time.perf_counter()
        ranked = self.evolutionary_search(fresh + seeds, num * p.candidate_pool_factor, measured_keys,
                                          population_size=size)
        t2 = time.perf_counter()

        n_random = min(num, int(p.eps_greedy * num))
        taken: set[str] = set()
        lowering_failed = 0

        def take(pool: Sequence[State], limit: int, into: list[State]) -> None:
            nonlocal lowering_failed
            for s in pool:
                if len(into) >= limit:
                    return
                k = s.canonical_key()
                if k in measured_keys or k in taken:
                    continue
                if not lowers(s):
                    lowering_failed += 1
                    continue
                taken.add(k)
                into.append(s)

        best: list[State] = []
        # Every sketch family's best state by the model is measured each round, so a family the
        # model undervalues (it learned from other tasks, or from few samples) still gets
        # measured and the online model learns what it is worth.
        n_model = num - n_random
        heads = [f[0] for f in self._family_ranked.values()][:max(0, min(p.family_quota, n_model))]
        take(heads, len(heads), best)
        # The family of the fastest program measured so far gets a share of the model's picks: a
        # pre-trained model's preference between families comes from other tasks, and on this one
        # the measurements have already said otherwise.
        lead = sketch_family(best_states[0]) if best_states else None
        if lead in self._family_ranked:
            share = len(best) + int(p.lead_family_share * n_model)
            take(self._family_ranked[lead], min(n_model, share), best)
        take(ranked, n_model, best)
        randoms = list(fresh)
        self.rng.shuffle(randoms)
        rand: list[State] = []
        take(randoms, num - len(best), rand)  # the random share, and what the model could not fill
        if len(best) + len(rand) < num:  # few unmeasured random states: more of the model's choice
            take(ranked, num - len(rand), best)
        chosen = best + rand
        t3 = time.perf_counter()
        self.last_round_stats = {
            "sample_seconds": t1 - t0,
            "evolution_seconds": t2 - t1,
            "select_seconds": t3 - t2,
            "total_seconds": t3 - t0,
            "population_size": len(fresh) + len(seeds),
            "measured_seeds": len(seeds),
            "num_candidates": len(chosen),
            "num_random": len(rand),
            "num_families": len(self._family_ranked),
            "invalid": sample_stats.get("invalid", 0) + self._evo_stats.get("invalid", 0)
            + lowering_failed,
            "sample_attempts": sample_stats.get("attempts", 0),
            "mutations": dict(self._evo_stats.get("mutations", {})),
        }
        self._log("round: %d candidates (%d random) from a population of %d (%d measured seeds) "
                  "in %.2f s (sampling %.2f s, evolution %.2f s)", len(chosen), len(rand),
                  len(fresh) + len(seeds), len(seeds), t3 - t0, t1 - t0, t2 - t1)
        return chosen


# Steps that add a stage or change a buffer's layout: states with different sets of them come from
# different sketches (or different packing choices), whatever their numbers.
_FAMILY_TAGS = frozenset({"CHW", "CHR", "RF", "PK"})


def sketch_family(state: State) -> tuple:
    """The stage-adding steps of ``state`` (tag, stage, and for a cache write whether it permutes
    the axes): what a mutation never changes, so it names the sketch a state descends from."""
    return tuple((s.tag, s.stage_id, bool(getattr(s, "axis_order", ())))
                 for s in state.steps if s.tag in _FAMILY_TAGS)


def _by_family(ranked: Iterable[State], limit: int) -> dict[tuple, list[State]]:
    """The first ``limit`` states of each sketch family in ``ranked`` (best first), families in the
    order of their best state."""
    out: dict[tuple, list[State]] = {}
    for s in ranked:
        f = out.setdefault(sketch_family(s), [])
        if len(f) < limit:
            f.append(s)
    return out
