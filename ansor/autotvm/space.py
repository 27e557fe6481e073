"""Configuration spaces: the knobs a template exposes and one point of their product.

A template declares its knobs on a ``ConfigSpace`` (``define_split``, ``define_knob``,
``define_reorder``, ``define_annotate``); each knob is a short list of choices (``KnobSpace``), and
the space is their product, indexed in mixed radix: ``space[i]`` is the ``ConfigEntity`` whose
choice for the first-defined knob is ``i % len(knob0)``, for the second ``(i // len(knob0)) %
len(knob1)``, and so on. An index is therefore a compact, stable name for a configuration (what
the tuners search over and what the records store), as long as the template defines the same
knobs in the same order.

The same template function runs in two modes. Given a ``ConfigSpace`` it *collects*: every
``define_*`` adds a knob, and ``cfg[name]`` hands back a default choice so the template can run to
the end (which checks that it builds a state at all). Given a ``ConfigEntity`` it *applies*: the
``define_*`` calls only check that the knob exists, and ``cfg[name]`` is the chosen value, whose
``apply`` performs the schedule steps (``cfg["tile_x"].apply(state, stage, axis)``).

``ConfigSpace.fallback()`` is the configuration used when nothing was tuned: each knob's
``fallback`` if the template gave one (the nearest valid choice), else a moderate default.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
from typing import Any, Callable, Iterable, Sequence

from sketch.loop_state import ANNOTATIONS, Iterator, State

__all__ = ["AnnotateEntity", "AnnotateSpace", "ConfigEntity", "ConfigSpace", "KnobEntity",
           "KnobSpace", "OptionSpace", "ReorderEntity", "ReorderSpace", "SplitEntity",
           "SplitSpace", "UnknownKnobError"]

SPLIT_POLICIES = ("factors", "power2", "candidate")
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


class UnknownKnobError(KeyError):
    """A knob name that the space does not define (the message lists the ones it does)."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _prod(xs: Iterable[int]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def _extent_of(axis: Any, name: str) -> int:
    """A loop extent from an Iterator (its static extent) or an int."""
    if isinstance(axis, Iterator):
        return axis.extent
    if _is_int(axis) and axis >= 1:
        return axis
    raise TypeError(f"knob {name!r}: the axis must be an Iterator or a positive int extent, got "
                    f"{axis!r}")


def _stage_and_positions(state: State, stage: Any, axes: Sequence[Any]) -> tuple[int, list[int]]:
    sid = state.stage_index(stage)
    st = state.stages[sid]
    return sid, [st.position(a) for a in axes]


# ---- chosen values ------------------------------------------------------------------------------

class SplitEntity:
    """The chosen split of one axis: ``size`` lists the parts' extents, outermost first. The
    outermost is derived (``ceil(extent / product of the others)``), so with the "power2" and
    "candidate" policies the parts may multiply past the extent (the split is then guarded)."""

    __slots__ = ("size",)

    def __init__(self, size: Sequence[int]):
        self.size = tuple(int(s) for s in size)

    def apply(self, state: State, stage: Any, axis: Any) -> tuple[State, list[Iterator]]:
        """Split ``axis`` of ``stage`` into ``len(size)`` loops; returns the new state and the
        new loops (outermost first), ready for ``reorder``, ``fuse``, ``compute_at``..."""
        sid = state.stage_index(stage)
        pos = state.stages[sid].position(axis)
        if len(self.size) > 1:
            state = state.split(sid, pos, list(self.size[1:]))
        leaves = state.stages[sid].leaf_iters
        return state, leaves[pos:pos + len(self.size)]

    def to_json(self) -> list[int]:
        return list(self.size)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SplitEntity) and other.size == self.size

    def __hash__(self) -> int:
        return hash(("SP", self.size))

    def __repr__(self) -> str:
        return f"SP{list(self.size)}"


class KnobEntity:
    """The chosen value of a plain knob: ``val``."""

    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = val

    @property
    def value(self) -> Any:
        return self.val

    def to_json(self) -> Any:
        return self.val

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KnobEntity) and type(other.val) is type(self.val) \
            and other.val == self.val

    def __hash__(self) -> int:
        return hash(("OT", repr(self.val)))

    def __repr__(self) -> str:
        return f"OT({self.val!r})"


class ReorderEntity:
    """The chosen order of a group of loops: ``perm[k]`` is the index (in the list given to
    ``apply``) of the loop that goes ``k``-th."""

    __slots__ = ("perm",)

    def __init__(self, perm: Sequence[int]):
        self.perm = tuple(int(p) for p in perm)

    def apply(self, state: State, stage: Any, axes: Sequence[Any]) -> tuple[State, list[Iterator]]:
        """Reorder ``axes`` among themselves: they keep the positions the group occupies in the
        loop order (other loops stay where they are) and fill them in ``perm`` order. Returns
        the new state and the axes in their new order."""
        if len(axes) != len(self.perm):
            raise ValueError(f"reorder knob of {len(self.perm)} axes applied to {len(axes)} axes")
        sid, pos = _stage_and_positions(state, stage, axes)
        st = state.stages[sid]
        slots = sorted(pos)
        order = list(range(len(st.leaves)))
        for slot, k in zip(slots, self.perm):
            order[slot] = pos[k]
        if order != list(range(len(st.leaves))):  # no step for an order that changes nothing
            state = state.reorder(sid, order)
        leaves = state.stages[sid].leaf_iters
        return state, [leaves[s] for s in slots]

    def to_json(self) -> list[int]:
        return list(self.perm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReorderEntity) and other.perm == self.perm

    def __hash__(self) -> int:
        return hash(("RE", self.perm))

    def __repr__(self) -> str:
        return f"RE{list(self.perm)}"


class AnnotateEntity:
    """The chosen annotation of each loop of a group ("none", "unroll", "vectorize",
    "parallel")."""

    __slots__ = ("anns",)

    def __init__(self, anns: Sequence[str]):
        self.anns = tuple(anns)

    def apply(self, state: State, stage: Any, axes: Sequence[Any]) -> State:
        if len(axes) != len(self.anns):
            raise ValueError(f"annotate knob of {len(self.anns)} axes applied to {len(axes)} axes")
        sid = state.stage_index(stage)
        # Positions first: annotating replaces the Iterator object, but not the others' positions.
        pos = [state.stages[sid].position(a) for a in axes]
        for p, ann in zip(pos, self.anns):
            if ann != "none":
                state = state.annotate(sid, p, ann)
        return state

    def to_json(self) -> list[str]:
        return list(self.anns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnnotateEntity) and other.anns == self.anns

    def __hash__(self) -> int:
        return hash(("AN", self.anns))

    def __repr__(self) -> str:
        return f"AN{list(self.anns)}"


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


# ---- the space and its points ------------------------------------------------------------------

class _Definitions:
    """The ``define_*`` methods, shared by the collecting space and the applying entity."""

    def define_split(self, name: str, axis: Iterator | int, num_outputs: int = 2,
                     policy: str = "factors",
                     candidate: Sequence[Sequence[int | None]] | None = None,
                     max_factor: int | None = None,
                     filter: Callable[[SplitEntity], bool] | None = None,  # noqa: A002
                     fallback: Sequence[int | None] | None = None) -> None:
        """Split ``axis`` (an Iterator, or an extent) into ``num_outputs`` parts; see
        ``SplitSpace`` for the policies."""
        self._define(name, lambda: SplitSpace(name, _extent_of(axis, name), num_outputs, policy,
                                              candidate, max_factor, filter, fallback))

    def define_knob(self, name: str, values: Sequence[Any], fallback: Any = ...) -> None:
        """A plain knob taking one of ``values`` (ints, floats, bools, strings, ...)."""
        self._define(name, lambda: OptionSpace(name, values, None if fallback is ... else fallback,
                                               fallback is not ...))

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       candidate: Sequence[Sequence[int]] | None = None,
                       fallback: Sequence[int] | None = None) -> None:
        """The order of ``axes`` (loops of one stage); apply with ``cfg[name].apply(state,
        stage, axes)``."""
        self._define(name, lambda: ReorderSpace(name, len(axes), policy, candidate, fallback))

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str,
                        candidate: Sequence[Sequence[str]] | None = None,
                        fallback: Sequence[str] | None = None) -> None:
        """Annotations of ``axes``; apply with ``cfg[name].apply(state, stage, axes)``."""
        self._define(name, lambda: AnnotateSpace(name, len(axes), policy, candidate, fallback))

    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:  # pragma: no cover
        raise NotImplementedError


class ConfigSpace(_Definitions):
    """All knobs of a template, in definition order; ``len(space)`` configurations, ``space[i]``
    the i-th (mixed radix, first knob fastest), ``space["name"]`` the knob's default choice
    while the template is being collected."""

    is_fallback = False

    def __init__(self) -> None:
        self.space_map: dict[str, KnobSpace] = {}
        self._signature: str | None = None
        self._tables: list[list[list[float]]] | None = None

    # ---- collection ----
    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a knob name must be a non-empty string, got {name!r}")
        if name in self.space_map:
            raise ValueError(f"knob {name!r} is defined twice")
        self.space_map[name] = make()
        self._signature = None
        self._tables = None

    # ---- size and indexing ----
    def __len__(self) -> int:
        return _prod(len(s) for s in self.space_map.values())

    @property
    def knob_names(self) -> list[str]:
        return list(self.space_map)

    @property
    def radix(self) -> list[int]:
        """The number of choices of each knob, in definition order."""
        return [len(s) for s in self.space_map.values()]

    def _check_index(self, index: Any) -> int:
        if not _is_int(index):
            raise TypeError(f"a configuration index must be an int, got {type(index).__name__} "
                            f"{index!r}")
        n = len(self)
        if not 0 <= index < n:
            raise IndexError(f"configuration index {index} out of range: the space has {n} "
                             f"configurations (0..{n - 1})")
        return index

    def digits(self, index: int) -> list[int]:
        """The choice index of each knob for configuration ``index``."""
        t = self._check_index(index)
        out = []
        for s in self.space_map.values():
            t, d = divmod(t, len(s))
            out.append(d)
        return out

    def index_of_digits(self, digits: Sequence[int]) -> int:
        """The configuration index of per-knob choices (the inverse of ``digits``)."""
        if len(digits) != len(self.space_map):
            raise ValueError(f"{len(digits)} knob choices given, the space has "
                             f"{len(self.space_map)} knobs")
        index, stride = 0, 1
        for d, s in zip(digits, self.space_map.values()):
            if not _is_int(int(d)) or not 0 <= int(d) < len(s):
                raise IndexError(f"knob {s.name!r}: choice {d} out of range 0..{len(s) - 1}")
            index += int(d) * stride
            stride *= len(s)
        return index

    def get(self, index: int) -> "ConfigEntity":
        """The configuration with this index (IndexError naming the range when out of it)."""
        digits = self.digits(index)
        return ConfigEntity(self, index, {name: s[d] for (name, s), d in
                                          zip(self.space_map.items(), digits)})

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            space = self._knob(key)
            return space[space.fallback_index]
        return self.get(key)

    def __iter__(self):
        raise TypeError("iterate over range(len(space)) and use space[i]: a space can hold "
                        "millions of configurations")

    def _knob(self, name: str) -> KnobSpace:
        try:
            return self.space_map[name]
        except KeyError:
            known = ", ".join(self.space_map) or "none"
            raise UnknownKnobError(f"unknown knob {name!r}; this space defines: {known}") from None

    # ---- defaults, serialisation, features ----
    def fallback(self) -> "ConfigEntity":
        """The configuration to use when nothing was tuned: every knob's fallback choice."""
        cfg = self.get(self.index_of_digits([s.fallback_index for s in self.space_map.values()]))
        cfg.is_fallback = True
        return cfg

    def from_json(self, knobs: dict) -> "ConfigEntity":
        """The configuration whose knobs have these JSON values (as records store them);
        ValueError naming the knob when one does not fit this space."""
        if not isinstance(knobs, dict):
            raise TypeError(f"knob values must be a dict, got {type(knobs).__name__}")
        extra = set(knobs) - set(self.space_map)
        if extra:
            raise UnknownKnobError(f"unknown knob(s) {sorted(extra)}; this space defines: "
                                   f"{', '.join(self.space_map)}")
        missing = [n for n in self.space_map if n not in knobs]
        if missing:
            raise ValueError(f"knob value(s) missing for {missing}")
        return self.get(self.index_of_digits([s.index_of(knobs[n]) for n, s in
                                              self.space_map.items()]))

    @property
    def signature(self) -> str:
        """A short hash of the knobs' definitions: equal signatures, equal indices."""
        if self._signature is None:
            desc = json.dumps([s.describe() for s in self.space_map.values()], sort_keys=True,
                              default=repr)
            self._signature = hashlib.sha256(desc.encode()).hexdigest()[:16]
        return self._signature

    def feature_tables(self) -> list[list[list[float]]]:
        """Per knob, the feature vector of each choice (cached: the model tuner indexes these
        tables with many candidate digit vectors at once)."""
        if self._tables is None:
            self._tables = [[s.feature(k) for k in range(len(s))] for s in self.space_map.values()]
        return self._tables

    def features_json(self, knobs: dict) -> list[float]:
        """The features of a configuration given by its knobs' JSON values (as records store
        them), which may come from another space of the same template; ValueError naming the
        knob that does not fit."""
        if not isinstance(knobs, dict):
            raise TypeError(f"knob values must be a dict, got {type(knobs).__name__}")
        out: list[float] = []
        for name, sp in self.space_map.items():
            if name not in knobs:
                raise ValueError(f"knob value missing for {name!r}")
            out.extend(sp.feature_json(knobs[name]))
        return out

    def features(self, index: int) -> list[float]:
        """The numbers describing configuration ``index`` for the cost model."""
        out: list[float] = []
        for table, d in zip(self.feature_tables(), self.digits(index)):
            out.extend(table[d])
        return out

    def __repr__(self) -> str:
        knobs = ", ".join(f"{n}:{len(s)}" for n, s in self.space_map.items())
        return f"ConfigSpace({len(self)} configurations; {knobs})"


class ConfigEntity(_Definitions):
    """One configuration: ``index`` in its space and the chosen value of every knob
    (``cfg["tile_x"]``). Its ``define_*`` methods only check that the knob exists, so the same
    template function that collected the space applies a configuration of it."""

    def __init__(self, space: ConfigSpace, index: int, entity_map: dict[str, Any]):
        self.space = space
        self.index = index
        self._entity_map = entity_map
        self.is_fallback = False

    def _define(self, name: str, make: Callable[[], KnobSpace]) -> None:
        if name not in self._entity_map:
            known = ", ".join(self._entity_map) or "none"
            raise UnknownKnobError(f"the template defines knob {name!r}, which is not in this "
                                   f"configuration's space ({known}): the template changed since "
                                   "the space was collected")

    def __getitem__(self, name: str) -> Any:
        try:
            return self._entity_map[name]
        except (KeyError, TypeError):
            known = ", ".join(self._entity_map) or "none"
            raise UnknownKnobError(f"unknown knob {name!r}; this configuration has: {known}") \
                from None

    def __contains__(self, name: object) -> bool:
        return name in self._entity_map

    @property
    def knobs(self) -> dict[str, Any]:
        return dict(self._entity_map)

    def to_json(self) -> dict:
        """``{"index": i, "knobs": {name: value}}``: the knob values make the record readable and
        let a model learn from configurations of other spaces of the same template."""
        return {"index": self.index, "knobs": {n: e.to_json() for n, e in self._entity_map.items()}}

    def features(self) -> list[float]:
        return self.space.features(self.index)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigEntity) and other.space is self.space \
            and other.index == self.index

    def __hash__(self) -> int:
        return hash(self.index)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{n}={e!r}" for n, e in self._entity_map.items())
        fb = " fallback" if self.is_fallback else ""
        return f"ConfigEntity({self.index}{fb}: {knobs})"
