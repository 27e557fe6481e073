"""Knob spaces: the list of choices of one knob (split, plain value, reorder, annotate).

Each ``define_*`` of a ``ConfigSpace`` (``space.py``) builds one of these from its policy,
candidates and filter, checking them with an error naming the knob; a space also picks the
knob's fallback choice and turns a choice into numbers for the cost model. The chosen values
themselves are in ``knob_entities.py``.
"""
from __future__ import annotations

import itertools
import json
import math
from typing import Any, Callable, Iterable, Sequence

from sketch.loop_state import ANNOTATIONS

from .knob_entities import AnnotateEntity, KnobEntity, ReorderEntity, SplitEntity

SPLIT_POLICIES = ("factors", "power2", "imperfect", "candidate")
# Inner sizes the "imperfect" policy adds to the exact factorisations: register-tile rows and
# vector-sized column blocks, which need not divide the extent (issue 18).
IMPERFECT_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256)
REORDER_POLICIES = ("all", "identity", "candidate")
ANNOTATE_POLICIES = ("try_unroll", "try_vec", "try_unroll_vec", "candidate")
# "all" enumerates every permutation: beyond this many axes that is a space of >40k orders for a
# single knob, almost certainly a mistake (give a candidate list instead).
MAX_REORDER_AXES = 8
# A split without a fallback defaults to inner parts of this size: a vector of float32 on AVX2
# and a short unrolled loop - moderate tiling that is rarely terrible.
DEFAULT_INNER_FACTOR = 8
# Annotation codes for features: order matters (the model sees the code as a number).
_ANN_CODES = {"none": 0, "unroll": 1, "vectorize": 2, "parallel": 3}
_ANN_ALIASES = {"vec": "vectorize", "": "none", None: "none"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _prod(xs: Iterable[int]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


# ---- knob spaces --------------------------------------------------------------------------------

class KnobSpace:
    """The choices of one knob. Subclasses fill ``entities`` and ``kind``."""

    kind: str = "?"

    def __init__(self, name: str, entities: list, fallback_index: int = 0):
        if not entities:
            raise ValueError(f"knob {name!r} has no choice left (check its policy, filter or "
                             "candidates)")
        self.name = name
        self.entities = entities
        self.fallback_index = fallback_index
        self._index: dict | None = None

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, i: int) -> Any:
        return self.entities[i]

    def index_of(self, entity_or_json: Any) -> int:
        """The index of a choice given as an entity or its JSON form; ValueError if absent."""
        if self._index is None:
            self._index = {json.dumps(e.to_json()): k for k, e in enumerate(self.entities)}
        v = entity_or_json.to_json() if hasattr(entity_or_json, "to_json") else entity_or_json
        try:
            return self._index[json.dumps(v)]
        except (KeyError, TypeError):
            raise ValueError(f"knob {self.name!r} has no choice {v!r}") from None

    def feature(self, k: int) -> list[float]:
        """Numbers describing choice ``k`` for the cost model (the same length for every k)."""
        return self.feature_json(self.entities[k].to_json())

    def feature_json(self, value: Any) -> list[float]:
        """The features of a choice given in JSON form - possibly one of another space of the
        same template (another workload's shapes), for transfer; ValueError if it cannot
        describe a choice of this knob."""
        raise NotImplementedError

    def describe(self) -> list:
        """What identifies the knob's definition (for the space signature)."""
        return [self.kind, self.name, [e.to_json() for e in self.entities]]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self)} choices)"


class SplitSpace(KnobSpace):
    """The ways to split one axis of ``extent`` into ``num_outputs`` parts.

    * ``"factors"``: every ordered factorisation (parts multiply to exactly the extent).
    * ``"power2"``: inner parts powers of two (their product at most the extent), outer derived.
    * ``"imperfect"``: the exact factorisations plus inner parts from ``IMPERFECT_SIZES`` whose
      product is at most the extent (the partial tile is shifted or peeled when applied).
    * ``"candidate"``: exactly the given size lists (outermost may be -1 or None: derived).

    ``max_factor`` bounds every inner part; ``filter(SplitEntity) -> bool`` drops choices.
    """

    kind = "split"

    def __init__(self, name: str, extent: int, num_outputs: int, policy: str = "factors",
                 candidate: Sequence[Sequence[int | None]] | None = None,
                 max_factor: int | None = None,
                 filter: Callable[[SplitEntity], bool] | None = None,  # noqa: A002 - TVM's name
                 fallback: Sequence[int | None] | None = None):
        if not _is_int(num_outputs) or num_outputs < 1:
            raise ValueError(f"split knob {name!r}: num_outputs must be an integer >= 1, got "
                             f"{num_outputs!r}")
        if policy not in SPLIT_POLICIES:
            raise ValueError(f"split knob {name!r}: unknown policy {policy!r}; use one of "
                             f"{', '.join(SPLIT_POLICIES)}")
        if policy == "candidate" and candidate is None:
            raise ValueError(f"split knob {name!r}: policy 'candidate' needs "
                             "candidate=[[...], ...]")
        if policy != "candidate" and candidate is not None:
            raise ValueError(f"split knob {name!r}: candidate= is only used with policy "
                             f"'candidate' (got policy {policy!r})")
        if max_factor is not None and (not _is_int(max_factor) or max_factor < 1):
            raise ValueError(f"split knob {name!r}: max_factor must be a positive integer, got "
                             f"{max_factor!r}")
        self.extent, self.num_outputs, self.policy = extent, num_outputs, policy
        inner_lists: Iterable[tuple[int, ...]]
        if policy == "factors":
            inner_lists = self._factorisations(extent, num_outputs - 1)
        elif policy == "power2":
            inner_lists = self._powers_of_two(extent, num_outputs - 1)
        elif policy == "imperfect":
            inner_lists = itertools.chain(self._factorisations(extent, num_outputs - 1),
                                          self._imperfect(extent, num_outputs - 1))
        else:
            inner_lists = [self._check_candidate(name, extent, num_outputs, c) for c in candidate]
        entities, seen = [], set()
        for inner in inner_lists:
            if max_factor is not None and any(s > max_factor for s in inner):
                continue
            ent = SplitEntity((math.ceil(extent / _prod(inner)),) + tuple(inner))
            if ent.size in seen or (filter is not None and not filter(ent)):
                continue
            seen.add(ent.size)
            entities.append(ent)
        super().__init__(name, entities)
        self.fallback_index = self._nearest(fallback) if entities else 0

    @staticmethod
    def _factorisations(extent: int, n_inner: int) -> Iterable[tuple[int, ...]]:
        """Inner parts (outer first) whose product divides ``extent``, lexicographic."""
        if n_inner == 0:
            yield ()
            return
        divisors = [d for d in range(1, extent + 1) if extent % d == 0]

        def rec(rest: int, k: int) -> Iterable[tuple[int, ...]]:
            if k == 0:
                yield ()
                return
            for d in divisors:
                if d > rest:
                    break
                if rest % d == 0:
                    for tail in rec(rest // d, k - 1):
                        yield (d,) + tail

        yield from rec(extent, n_inner)

    @staticmethod
    def _imperfect(extent: int, n_inner: int) -> Iterable[tuple[int, ...]]:
        sizes = [v for v in IMPERFECT_SIZES if v <= extent]
        for inner in itertools.product(sizes, repeat=n_inner):
            if _prod(inner) <= extent:
                yield inner

    @staticmethod
    def _powers_of_two(extent: int, n_inner: int) -> Iterable[tuple[int, ...]]:
        powers = [1 << p for p in range(extent.bit_length()) if (1 << p) <= extent]
        for inner in itertools.product(powers, repeat=n_inner):
            if _prod(inner) <= extent:
                yield inner

    @staticmethod
    def _check_candidate(name: str, extent: int, n: int, cand: Any) -> tuple[int, ...]:
        if not isinstance(cand, (list, tuple)) or len(cand) != n:
            raise ValueError(f"split knob {name!r}: candidate {cand!r} must be a list of "
                             f"{n} sizes (num_outputs)")
        inner = tuple(cand[1:])
        if not all(_is_int(s) and s >= 1 for s in inner):
            raise ValueError(f"split knob {name!r}: candidate {list(cand)}: sizes must be positive "
                             "integers (only the outermost may be -1/None: derived)")
        if _prod(inner) > extent:
            raise ValueError(f"split knob {name!r}: candidate {list(cand)}: inner sizes multiply "
                             f"to {_prod(inner)}, more than the extent {extent}")
        outer, derived = cand[0], math.ceil(extent / _prod(inner))
        if outer not in (-1, None) and not (_is_int(outer) and outer == derived):
            raise ValueError(f"split knob {name!r}: candidate {list(cand)}: the outermost size "
                             f"must be -1 (derived) or {derived}")
        return inner

    def _nearest(self, target: Sequence[int | None] | None) -> int:
        """The choice closest (in log scale, inner parts) to ``target`` sizes."""
        if target is None:
            want = [DEFAULT_INNER_FACTOR] * (self.num_outputs - 1)
        else:
            if len(target) != self.num_outputs:
                raise ValueError(f"split knob {self.name!r}: fallback {list(target)} must have "
                                 f"{self.num_outputs} sizes")
            want = [max(1, int(t)) for t in target[1:]]

        def dist(k: int) -> tuple[float, int]:
            size = self.entities[k].size[1:]
            return (sum(abs(math.log2(s) - math.log2(w)) for s, w in zip(size, want)), k)

        return min(range(len(self.entities)), key=dist)

    def feature_json(self, value: Any) -> list[float]:
        if not isinstance(value, list) or len(value) != self.num_outputs or not all(
                _is_int(v) and v >= 1 for v in value):
            raise ValueError(f"split knob {self.name!r}: {value!r} is not a list of "
                             f"{self.num_outputs} positive sizes")
        return [math.log2(v) for v in value]

    def describe(self) -> list:
        return [self.kind, self.name, self.extent, self.num_outputs, super().describe()[2]]


class OptionSpace(KnobSpace):
    """A plain knob: one value out of a list (``define_knob``)."""

    kind = "knob"

    def __init__(self, name: str, values: Sequence[Any], fallback: Any = None,
                 has_fallback: bool = False):
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise TypeError(f"knob {name!r}: values must be a list, got {type(values).__name__}")
        if not values:
            raise ValueError(f"knob {name!r}: values must not be empty")
        for v in values:
            try:
                json.dumps(v, allow_nan=False)
            except (TypeError, ValueError):
                raise TypeError(f"knob {name!r}: value {v!r} is not JSON-serialisable (records "
                                "store it)") from None
        ents = [KnobEntity(v) for v in values]
        if len(set(ents)) != len(ents):
            raise ValueError(f"knob {name!r}: values {list(values)} contain duplicates")
        super().__init__(name, ents)
        self.values = list(values)
        if has_fallback:
            if KnobEntity(fallback) not in ents:
                raise ValueError(f"knob {name!r}: fallback {fallback!r} is not one of "
                                 f"{list(values)}")
            self.fallback_index = ents.index(KnobEntity(fallback))

    def feature_json(self, value: Any) -> list[float]:
        if isinstance(value, bool):
            return [float(value)]
        if isinstance(value, (int, float)) and math.isfinite(value):
            # Log scale: unroll depths and tile sizes matter by their order of magnitude.
            return [math.copysign(math.log2(1 + abs(value)), value)]
        return [float(self.index_of(value))]  # other values: their position in the list


class ReorderSpace(KnobSpace):
    """Orders of a group of ``n`` loops: every permutation ("all"), only the given one
    ("identity"), or the given permutations ("candidate")."""

    kind = "reorder"

    def __init__(self, name: str, n: int, policy: str = "all",
                 candidate: Sequence[Sequence[int]] | None = None,
                 fallback: Sequence[int] | None = None):
        if policy not in REORDER_POLICIES:
            raise ValueError(f"reorder knob {name!r}: unknown policy {policy!r}; use one of "
                             f"{', '.join(REORDER_POLICIES)}")
        if n < 1:
            raise ValueError(f"reorder knob {name!r}: needs at least one axis")
        if policy == "all":
            if n > MAX_REORDER_AXES:
                raise ValueError(f"reorder knob {name!r}: {n} axes give {math.factorial(n)} "
                                 f"orders; give policy='candidate' with the orders worth trying")
            perms = list(itertools.permutations(range(n)))
        elif policy == "identity":
            perms = [tuple(range(n))]
        else:
            if candidate is None:
                raise ValueError(f"reorder knob {name!r}: policy 'candidate' needs candidate=")
            perms = []
            for c in candidate:
                if sorted(c) != list(range(n)):
                    raise ValueError(f"reorder knob {name!r}: candidate {list(c)} is not a "
                                     f"permutation of 0..{n - 1}")
                perms.append(tuple(c))
        ents = [ReorderEntity(p) for p in dict.fromkeys(perms)]
        super().__init__(name, ents)
        self.n = n
        if fallback is not None:
            self.fallback_index = self.index_of(list(fallback))

    def feature_json(self, value: Any) -> list[float]:
        if not isinstance(value, list) or sorted(value) != list(range(self.n)):
            raise ValueError(f"reorder knob {self.name!r}: {value!r} is not a permutation of "
                             f"0..{self.n - 1}")
        return [float(p) for p in value]


class AnnotateSpace(KnobSpace):
    """Annotations of a group of loops: "try_unroll" (each loop unrolled or not), "try_vec"
    (the last loop vectorized or not), "try_unroll_vec" (each unrolled or not, the last also
    possibly vectorized) or "candidate" (the given lists)."""

    kind = "annotate"

    def __init__(self, name: str, n: int, policy: str,
                 candidate: Sequence[Sequence[str]] | None = None,
                 fallback: Sequence[str] | None = None):
        if policy not in ANNOTATE_POLICIES:
            raise ValueError(f"annotate knob {name!r}: unknown policy {policy!r}; use one of "
                             f"{', '.join(ANNOTATE_POLICIES)}")
        if n < 1:
            raise ValueError(f"annotate knob {name!r}: needs at least one axis")
        if policy == "try_unroll":
            lists = list(itertools.product(("none", "unroll"), repeat=n))
        elif policy == "try_vec":
            lists = [("none",) * n, ("none",) * (n - 1) + ("vectorize",)]
        elif policy == "try_unroll_vec":
            lists = [head + (last,) for head in itertools.product(("none", "unroll"), repeat=n - 1)
                     for last in ("none", "unroll", "vectorize")]
        else:
            if candidate is None:
                raise ValueError(f"annotate knob {name!r}: policy 'candidate' needs candidate=")
            lists = [self._check(name, n, c) for c in candidate]
        super().__init__(name, [AnnotateEntity(a) for a in dict.fromkeys(lists)])
        self.n = n
        if fallback is not None:
            self.fallback_index = self.index_of(list(self._check(name, n, fallback)))

    @staticmethod
    def _check(name: str, n: int, anns: Any) -> tuple[str, ...]:
        if not isinstance(anns, (list, tuple)) or len(anns) != n:
            raise ValueError(f"annotate knob {name!r}: {anns!r} must list {n} annotations")
        out = []
        for a in anns:
            a = _ANN_ALIASES.get(a, a)
            if a not in ANNOTATIONS:
                raise ValueError(f"annotate knob {name!r}: unknown annotation {a!r}; use one of "
                                 f"{', '.join(ANNOTATIONS)}")
            out.append(a)
        return tuple(out)

    def feature_json(self, value: Any) -> list[float]:
        return [float(_ANN_CODES[a]) for a in self._check(self.name, self.n, value)]
