"""Stages of a loop state: iterators, the split/fuse relations between them, and their extents.

These are the types and loop facts every part of the schedule IR needs: the transform steps
build new stages, lowering and the cost-model features read them, and ``State`` (``loop_state``)
holds one per operation. Keeping them here, below all of those, is what lets the steps and the
lowering be written without importing ``State``'s module (which imports theirs to offer its
building API and its printing).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Sequence

from compute import expr as E
from compute.tensor import ComputeOp, Operation, PlaceholderOp

ANNOTATIONS = ("none", "parallel", "vectorize", "unroll")
# How a split whose parts do not divide its extent handles the last, partial tile:
# - "guard": every statement inside tests the index (the simplest code; slow inner loops);
# - "peel": the same tests, but lowering hoists them out: a tile whose whole range is inside the
#   extent runs a copy of the nest without them, only partial tiles test (loop_partition.py);
# - "shift": the last tile is shifted inwards to end at the extent, so no test at all and a few
#   points are computed twice; only for stages without a reduction (a recomputed point must be
#   a plain write of the same value).
# - "pad": for a stage computed into a local buffer at a tile of its consumer (a cache_write
#   accumulator): the whole tile is computed, past the extent too, reading clamped indices
#   (a row past M reads row M - 1, a packed block past the last reads the last), and only the
#   consumer's copy-out tests; as "peel" where that does not apply (lowering decides per axis).
SPLIT_TAILS = ("guard", "peel", "shift", "pad")


class InvalidStepError(ValueError):
    """A transform step that does not apply to the state (the search discards such candidates)."""


@dataclass(frozen=True)
class Iterator:
    """A loop of a stage. ``extent`` is the static extent with the stage computed at root."""

    name: str
    extent: int
    kind: str  # "spatial" | "reduce"
    annotation: str = "none"

    def __str__(self) -> str:
        ann = "" if self.annotation == "none" else f" @{self.annotation}"
        return f"{self.name}({self.extent}){ann}"


@dataclass(frozen=True)
class SplitRel:
    parent: int
    children: tuple[int, ...]
    lengths: tuple[int, ...]  # the given lengths (inner parts if inner_to_outer, else outer parts)
    inner_to_outer: bool
    tail: str = "guard"  # SPLIT_TAILS: how a non-divisible split handles its partial tile


@dataclass(frozen=True)
class FuseRel:
    parents: tuple[int, ...]
    child: int


@dataclass(frozen=True)
class Stage:
    op: Operation
    origin: Operation | None  # the DAG operation whose values this stage produces, if any
    iters: tuple[Iterator, ...]  # every iterator ever created; index = persistent id
    leaves: tuple[int, ...]  # current loops, outermost first (persistent ids)
    n_root: int  # iters[:n_root] are the op's axes then its reduce axes
    relations: tuple[SplitRel | FuseRel, ...] = ()
    compute_at: str = "root"  # "root" | "inline" | "iter"
    # Operations this stage's op replaced (cache_write, cache_read, rfactor rebuild ops); readers
    # written against any of them read this stage.
    aliases: tuple[Operation, ...] = ()
    attach: tuple[int, int] | None = None  # (target stage index, target persistent iterator id)
    auto_unroll_max_step: int = 0

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def produced_ops(self) -> tuple[Operation, ...]:
        extra = () if self.origin is None else (self.origin,)
        return (self.op,) + self.aliases + extra

    def replaced_by(self, op: Operation) -> "Stage":
        """A fresh stage computing ``op`` in place of this one (same origin, remembers aliases)."""
        fresh = stage_for_op(op, self.origin)
        return replace(fresh, aliases=self.aliases + (self.op,), compute_at=self.compute_at,
                       attach=self.attach, auto_unroll_max_step=self.auto_unroll_max_step)

    @property
    def leaf_iters(self) -> list[Iterator]:
        return [self.iters[i] for i in self.leaves]

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def position(self, it: "int | str | Iterator") -> int:
        """Position in the current loop order of an iterator given by position, name or object."""
        if type(it) is int and 0 <= it < len(self.leaves):  # replay's case, first
            return it
        if isinstance(it, bool):
            raise InvalidStepError(f"stage {self.name}: bad iterator {it!r}")
        if isinstance(it, int):
            if not 0 <= it < len(self.leaves):
                raise InvalidStepError(
                    f"stage {self.name} has {len(self.leaves)} loop(s); iterator position {it} does "
                    "not exist (was it split or fused away?)"
                )
            return it
        if isinstance(it, Iterator):
            matches = [p for p, i in enumerate(self.leaves) if self.iters[i] is it]
            if not matches:
                raise InvalidStepError(
                    f"iterator {it.name} is not a loop of stage {self.name} any more (it was split or "
                    f"fused away); current loops: {', '.join(x.name for x in self.leaf_iters)}"
                )
            return matches[0]
        if isinstance(it, str):
            for p, i in enumerate(self.leaves):
                if self.iters[i].name == it:
                    return p
            raise InvalidStepError(f"stage {self.name} has no loop named {it!r}; current loops: "
                                   f"{', '.join(x.name for x in self.leaf_iters)}")
        raise InvalidStepError(f"stage {self.name}: cannot use {it!r} as an iterator")


def stage_for_op(op: Operation, origin: Operation | None) -> Stage:
    if isinstance(op, ComputeOp):
        iters = tuple(Iterator(a.name, a.extent, "spatial") for a in op.axes) + tuple(
            Iterator(a.name, a.extent, "reduce") for a in op.reduce_axes)
    else:
        iters = tuple(Iterator(f"ax{d}", n, "spatial") for d, n in enumerate(op.shape))
    return Stage(op=op, origin=origin, iters=iters, leaves=tuple(range(len(iters))),
                 n_root=len(iters))


def split_extents(parent_extent: int, lengths: tuple[int, ...], inner_to_outer: bool) -> list[int]:
    """Extents of the parts of a split, outermost first."""
    derived = -(-parent_extent // math.prod(lengths))  # rounded up
    return [derived, *lengths] if inner_to_outer else [*lengths, derived]


_STAGE_FIELDS = frozenset(f.name for f in fields(Stage))


def replace_stage(stage: Stage, **kw) -> Stage:
    """``dataclasses.replace(stage, **kw)`` without its generic machinery: every step of every
    replay copies a stage this way (150,000 times in a search round), and a Stage is a frozen
    dataclass with plain fields only (no ``__post_init__``, no default factories), so copying its
    fields and setting the changed ones builds exactly the object ``replace`` would."""
    if not _STAGE_FIELDS.issuperset(kw):
        raise TypeError(f"Stage has no field(s) {sorted(set(kw) - _STAGE_FIELDS)}")
    new = object.__new__(Stage)
    d = new.__dict__
    d.update(stage.__dict__)
    d.update(kw)
    return new


def iterator_extents(stage: Stage, root_extents: Sequence[int]) -> list[int]:
    """Extents of every iterator of ``stage`` given its root extents (bound inference may shrink
    them below the static ones): splits derive the remaining part, fuses multiply."""
    ext = [it.extent for it in stage.iters]
    ext[: len(root_extents)] = list(root_extents)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            parent = ext[rel.parent]
            parts = split_extents(parent, rel.lengths, rel.inner_to_outer)
            # A region smaller than the split's tile (a stage computed at its consumer's tile)
            # needs only ceil(parent / stride) values of each part: the parts outside collapse
            # to 1 and the tile is not recomputed under guards. Every value < parent keeps its
            # digits inside the clamped extents, so the mixed-radix mapping stays exact.
            for k in range(len(parts)):
                stride = 1
                for e in parts[k + 1:]:
                    stride *= e
                parts[k] = min(parts[k], -(-parent // stride))
            for c, e in zip(rel.children, parts):
                ext[c] = e
        else:
            p = 1
            for q in rel.parents:
                p *= ext[q]
            ext[rel.child] = p
    return ext


def iterator_values(stage: Stage, extents: Sequence[int], leaf_values: dict[int, "object"],
                    peel_guards: list | None = None):
    """Express iterators through the loops' values, walking split/fuse relations backwards.

    Returns ``(values, guards)``: ``values[i]`` for every iterator reachable from the given
    leaves, and the conditions that must hold for an iteration to be real. A split whose parts
    enumerate more values than the parent has (non-divisible) needs ``value < extent``, at every
    level, not only at the root: an inner part split again would otherwise overflow into the
    next outer value and compute some points twice. A "shift" split instead clamps its outermost
    part's start (``min(outer*L, extent-L) + inner``, L the inner parts' product) and needs no
    guard; the guards of "peel" splits are also appended to ``peel_guards`` when given.
    """
    values: dict[int, E.Expr] = dict(leaf_values)  # type: ignore[arg-type]
    cover: dict[int, int] = {i: extents[i] for i in values}
    guards: list[E.Expr] = []
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel):
            if rel.parent in values or not all(c in values for c in rel.children):
                continue
            v: E.Expr = E.const(0)
            top = 0
            for c in rel.children:
                v = v * extents[c] + values[c]
                top = top * extents[c] + (cover[c] - 1)
            parent_ext = extents[rel.parent]
            inner = math.prod(extents[c] for c in rel.children[1:])
            if (top + 1 > parent_ext and rel.tail == "shift" and inner <= parent_ext
                    and all(cover[c] == extents[c] for c in rel.children[1:])):
                r: E.Expr = E.const(0)
                for c in rel.children[1:]:
                    r = r * extents[c] + values[c]
                start = E.binary("min", values[rel.children[0]] * inner, parent_ext - inner)
                values[rel.parent] = start + r
                cover[rel.parent] = parent_ext
                continue
            values[rel.parent] = v
            cover[rel.parent] = top + 1
            if top + 1 > parent_ext:
                g = E.compare("lt", v, parent_ext)
                guards.append(g)
                if peel_guards is not None and rel.tail != "guard":  # a shift too wide peels
                    peel_guards.append(g)
        else:
            if rel.child not in values:
                continue
            f = values[rel.child]
            stride = 1
            for k, q in enumerate(reversed(rel.parents)):
                outermost = k == len(rel.parents) - 1
                d = f if stride == 1 else E.binary("floordiv", f, stride)
                values[q] = d if outermost else E.binary("floormod", d, extents[q])
                cover[q] = extents[q]
                stride *= extents[q]
    return values, guards
