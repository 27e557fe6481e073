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
import json
from typing import Any, Callable, Sequence

from sketch.loop_state import Iterator

# The entities, knob spaces and policy names lived here first: imported (and re-exported) so that
# ``from ansor.autotvm.space import SplitSpace`` and the like keep working.
from .knob_entities import AnnotateEntity, KnobEntity, ReorderEntity, SplitEntity
from .knob_spaces import (ANNOTATE_POLICIES, DEFAULT_INNER_FACTOR,  # noqa: F401
                          MAX_REORDER_AXES, REORDER_POLICIES, SPLIT_POLICIES, AnnotateSpace,
                          KnobSpace, OptionSpace, ReorderSpace, SplitSpace, _is_int, _prod)

__all__ = ["AnnotateEntity", "AnnotateSpace", "ConfigEntity", "ConfigSpace", "KnobEntity",
           "KnobSpace", "OptionSpace", "ReorderEntity", "ReorderSpace", "SplitEntity",
           "SplitSpace", "UnknownKnobError"]


class UnknownKnobError(KeyError):
    """A knob name that the space does not define (the message lists the ones it does)."""

    def __str__(self) -> str:  # KeyError quotes its message; this one is a sentence
        return str(self.args[0]) if self.args else ""


def _extent_of(axis: Any, name: str) -> int:
    """A loop extent from an Iterator (its static extent) or an int."""
    if isinstance(axis, Iterator):
        return axis.extent
    if _is_int(axis) and axis >= 1:
        return axis
    raise TypeError(f"knob {name!r}: the axis must be an Iterator or a positive int extent, got "
                    f"{axis!r}")


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
