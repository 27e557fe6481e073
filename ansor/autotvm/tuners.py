"""The model-free tuners: grid search, random search and a genetic algorithm.

They are the baselines of the baseline: grid search walks the space in index order (the first
knob varies fastest), random search draws configurations without repeats, and the genetic
algorithm evolves a population of configurations by their measured GFLOPS. The loop around them
(measurement, records, resume, progress) is ``Tuner.tune``.
"""
from __future__ import annotations

from typing import Sequence

from .task import TemplateTask
from .tuner import Tuner

__all__ = ["GATuner", "GridSearchTuner", "RandomTuner"]


class GridSearchTuner(Tuner):
    """Every configuration in index order (skipping the visited ones)."""

    def __init__(self, task: TemplateTask, seed: int | None = None):
        super().__init__(task, seed)
        self._next = 0

    def next_batch(self, batch_size: int) -> list[int]:
        out: list[int] = []
        size = len(self.space)
        while len(out) < batch_size and self._next < size:
            if self._next not in self.visited:
                out.append(self._next)
            self._next += 1
        return out

    def has_next(self) -> bool:
        return self._next < len(self.space) and super().has_next()


class RandomTuner(Tuner):
    """Uniformly random configurations, never one twice."""

    def next_batch(self, batch_size: int) -> list[int]:
        return self.sample_unvisited(batch_size)


class GATuner(Tuner):
    """A genetic algorithm over the knobs' choices (AutoTVM's GA tuner).

    A configuration's genes are its per-knob choice indices. Each generation has ``pop_size``
    members; the next keeps the ``elite_num`` best (already measured, not measured again) and
    fills up with children: two parents drawn with probability proportional to their GFLOPS,
    a one-point crossover of their genes, each gene then replaced by a random choice with
    probability ``mutation_prob``. Children already measured are redrawn (a few times, then
    replaced by random configurations), so no configuration is measured twice.
    """

    def __init__(self, task: TemplateTask, pop_size: int = 100, elite_num: int = 3,
                 mutation_prob: float = 0.1, seed: int | None = None):
        super().__init__(task, seed)
        if isinstance(pop_size, bool) or not isinstance(pop_size, int) or pop_size < 2:
            raise ValueError(f"GATuner: pop_size must be an integer >= 2, got {pop_size!r}")
        if isinstance(elite_num, bool) or not isinstance(elite_num, int) \
                or not 0 <= elite_num < pop_size:
            raise ValueError(f"GATuner: elite_num must be an integer in 0..pop_size-1, got "
                             f"{elite_num!r}")
        if not 0.0 <= float(mutation_prob) <= 1.0:
            raise ValueError(f"GATuner: mutation_prob must be in [0, 1], got {mutation_prob!r}")
        self.pop_size, self.elite_num = pop_size, elite_num
        self.mutation_prob = float(mutation_prob)
        self.radix = self.space.radix
        self.scores: dict[int, float] = {}  # every measured (or resumed) configuration's GFLOPS
        self.generation: list[int] = []     # the current generation's members
        self.pending: list[int] = []        # members still to be measured
        self.n_generations = 0

    # ---- the strategy ----
    def next_batch(self, batch_size: int) -> list[int]:
        if not self.pending:
            self._next_generation()
        out = []
        while self.pending and len(out) < batch_size:
            i = self.pending.pop(0)
            if i not in self.visited:
                out.append(i)
        return out

    def update(self, indices: Sequence[int], scores: Sequence[float]) -> None:
        for i, s in zip(indices, scores):
            self.scores[i] = float(s)

    # ---- evolution ----
    def _next_generation(self) -> None:
        # Parents: this generation's measured members; at the start (or resumed) the best
        # configurations known so far.
        members = [i for i in self.generation if i in self.scores]
        if not members and self.scores:
            members = sorted(self.scores, key=self.scores.get, reverse=True)[: self.pop_size]
        self.n_generations += 1
        if not members:
            self.generation = self.sample_unvisited(self.pop_size)
            self.pending = list(self.generation)
            return
        ranked = sorted(members, key=lambda i: self.scores[i], reverse=True)
        elites = ranked[: self.elite_num]
        fitness = [self.scores[i] for i in ranked]
        genes = [self.space.digits(i) for i in ranked]
        children: list[int] = []
        taken = set(elites)
        n_children = self.pop_size - len(elites)
        for _ in range(n_children):
            child = None
            for _attempt in range(10):
                a, b = self._pick(fitness), self._pick(fitness)
                cand = self._crossover(genes[a], genes[b])
                self._mutate(cand)
                idx = self.space.index_of_digits(cand)
                if idx not in self.visited and idx not in taken:
                    child = idx
                    break
            if child is None:  # the neighbourhood is used up: explore elsewhere
                extra = self.sample_unvisited(1, exclude=taken)
                if not extra:
                    break
                child = extra[0]
            taken.add(child)
            children.append(child)
        self.generation = elites + children
        self.pending = list(children)

    def _pick(self, fitness: list[float]) -> int:
        total = sum(fitness)
        if total <= 0:
            return self.rng.randrange(len(fitness))
        r = self.rng.random() * total
        acc = 0.0
        for k, f in enumerate(fitness):
            acc += f
            if r < acc:
                return k
        return len(fitness) - 1

    def _crossover(self, a: list[int], b: list[int]) -> list[int]:
        if len(a) < 2:
            return list(a)
        point = self.rng.randrange(1, len(a))
        return list(a[:point]) + list(b[point:])

    def _mutate(self, genes: list[int]) -> None:
        for k, n in enumerate(self.radix):
            if n > 1 and self.rng.random() < self.mutation_prob:
                genes[k] = self.rng.randrange(n)
