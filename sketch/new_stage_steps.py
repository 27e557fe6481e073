"""The transform steps that insert a stage: cache_write, cache_read and rfactor.

Each adds a new compute stage next to the one it transforms (a local accumulator, a copy of an
input, a partial reduction) and renumbers the attach targets after it. The other steps, the record
tags and the JSON form are in ``transform_steps``, which re-exports these classes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from compute import expr as E
from compute import expr_analysis as EA
from compute.tensor import ComputeOp

from .pack_ops import pack_ops
from .stage import InvalidStepError, iterator_values, stage_for_op
from .step_base import Step, _check_not_target, _compute_stage, _leaf, _shift_stage_ids, _stage

if TYPE_CHECKING:
    # For annotations only, as in transform_steps (loop_state imports the steps at run time).
    from .loop_state import State


def _unique_name(state: State, base: str) -> str:
    names = {s.op.name for s in state.stages}
    if base not in names:
        return base
    k = 1
    while f"{base}{k}" in names:
        k += 1
    return f"{base}{k}"


@dataclass(frozen=True)
class CacheWriteStep(Step):
    """Compute the stage into a new local stage ``<name>.<scope>``; the stage becomes a copy.

    With the copy computed at a tile of the consumer, the accumulator is a small local buffer that
    LLVM keeps in registers. ``axis_order`` lays the local buffer out in another order than the
    stage's (positions of the stage's axes, outermost first; empty: the stage's own order): an
    NCHW convolution's accumulator with its channels innermost vectorizes across channels when the
    output rows are too short for whole vectors (27 columns waste 5 of every 32 lanes)."""

    tag: ClassVar[str] = "CHW"
    optional_fields: ClassVar[int] = 1
    stage_id: int
    scope_name: str = "local"
    axis_order: tuple[int, ...] = ()

    def to_json(self) -> list:
        rec = super().to_json()
        return rec if self.axis_order else rec[:-1]  # records of the stage's own order stay as before

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "cache_write")
        if st.relations or st.leaves != tuple(range(st.n_root)):
            raise InvalidStepError(f"cache_write on {st.name!r} must come before any split, fuse or "
                                   "reorder of that stage")
        op = st.op
        assert isinstance(op, ComputeOp)
        axes = op.axes
        if self.axis_order:
            order = self.axis_order
            if (not all(type(p) is int for p in order)
                    or sorted(order) != list(range(len(op.axes)))):
                raise InvalidStepError(f"cache_write on {st.name!r}: axis_order {list(order)!r} is not a "
                                       f"permutation of 0..{len(op.axes) - 1}")
            axes = tuple(op.axes[p] for p in order)
        cache = ComputeOp(_unique_name(state, f"{op.name}.{self.scope_name}"), axes, op.body, op.tag, op.attrs)
        copy = ComputeOp(op.name, op.axes, cache.output[tuple(axes)], op.tag, op.attrs)
        stages = list(state.stages)
        _shift_stage_ids(stages, self.stage_id)  # also renumbers this stage's own attach target
        stages[self.stage_id] = stages[self.stage_id].replaced_by(copy)
        stages.insert(self.stage_id, stage_for_op(cache, None))
        # Stages that were attached to the old stage's (root) loops stay attached to the copy.
        return state.with_stages(tuple(stages), self)


@dataclass(frozen=True)
class CacheReadStep(Step):
    """Copy the stage's output into ``<name>.<scope>`` and make the given readers read the copy."""

    tag: ClassVar[str] = "CHR"
    stage_id: int
    scope_name: str
    reader_stage_ids: tuple[int, ...]

    def apply(self, state: State) -> State:
        st = _stage(state, self.stage_id)
        if st.compute_at == "inline":
            raise InvalidStepError(f"cannot cache_read inlined stage {st.name!r}")
        consumers = state.consumers(self.stage_id)
        readers = tuple(self.reader_stage_ids)
        if not readers:
            raise InvalidStepError(f"cache_read of {st.name!r}: no readers given")
        for r in readers:
            if r not in consumers:
                raise InvalidStepError(f"cache_read of {st.name!r}: stage {r} does not read it")
        src = st.op.output
        axes = tuple(E.iter_var(f"ax{d}", 0, n, "spatial") for d, n in enumerate(src.shape))
        cache = ComputeOp(_unique_name(state, f"{st.name}.{self.scope_name}"), axes, src[axes],
                          "cache_read", {})
        olds = {id(o.output) for o in st.produced_ops}
        stages = list(state.stages)
        for r in readers:
            rs = stages[r]
            assert isinstance(rs.op, ComputeOp)
            body = E.rewrite(rs.op.body, lambda e: cache.output[e.indices] if isinstance(e, E.TensorLoad)
                             and id(e.tensor) in olds else None)
            new_op = ComputeOp(rs.op.name, rs.op.axes, body, rs.op.tag, rs.op.attrs)
            stages[r] = replace(rs, op=new_op, aliases=rs.aliases + (rs.op,))
        at = self.stage_id + 1
        _shift_stage_ids(stages, at)
        stages.insert(at, stage_for_op(cache, None))
        return state.with_stages(tuple(stages), self)


@dataclass(frozen=True)
class RfactorStep(Step):
    """Factor a reduction: the reduce loop at ``iter_id`` becomes a spatial axis (at position
    ``factor_iter_id``) of a new stage ``<name>.rf``, and the stage reduces over it. This exposes
    parallelism in reductions whose spatial extent is too small."""

    tag: ClassVar[str] = "RF"
    stage_id: int
    iter_id: int
    factor_iter_id: int

    def apply(self, state: State) -> State:
        st = _compute_stage(state, self.stage_id, "rfactor")
        op = st.op
        assert isinstance(op, ComputeOp)
        body = op.body
        if not isinstance(body, E.Reduce):
            raise InvalidStepError(f"cannot rfactor {st.name!r}: it has no reduction")
        fid, fit = _leaf(st, self.iter_id)
        if fit.kind != "reduce":
            raise InvalidStepError(f"rfactor on {st.name!r}: loop {fit.name} is not a reduction loop")
        _check_not_target(state, self.stage_id, "rfactor")
        n_sp = len(op.axes)
        if not 0 <= self.factor_iter_id <= n_sp:
            raise InvalidStepError(f"rfactor on {st.name!r}: factor position {self.factor_iter_id} "
                                   f"outside 0..{n_sp}")
        reduce_leaves = [i for i in st.leaves if st.iters[i].kind == "reduce"]
        rf_axis = E.iter_var(f"{fit.name}.rf", 0, fit.extent, "spatial")
        new_raxes = {i: E.iter_var(st.iters[i].name, 0, st.iters[i].extent, "reduce")
                     for i in reduce_leaves if i != fid}
        exts = [it.extent for it in st.iters]
        value, guards = iterator_values(st, exts, {fid: rf_axis, **new_raxes})
        sub: dict = {}
        for k, ax in enumerate(op.reduce_axes):
            rid = n_sp + k
            if rid not in value:
                raise InvalidStepError(f"rfactor on {st.name!r}: cannot relate axis {ax.name} to loops")
            sub[ax] = value[rid] + ax.lo
        sp_axes = tuple(E.iter_var(a.name, 0, a.extent, "spatial") for a in op.axes)
        sub.update({a: b for a, b in zip(op.axes, sp_axes)})
        src = EA.substitute(body.source, sub)
        where = None if body.where is None else EA.substitute(body.where, sub)
        for g in guards:
            where = g if where is None else E.binary("and", where, g)
        rf_axes = sp_axes[: self.factor_iter_id] + (rf_axis,) + sp_axes[self.factor_iter_id:]
        others = tuple(new_raxes[i] for i in reduce_leaves if i != fid)
        if others:
            rf_body: E.Expr = E.reduce(body.combiner, src, others, where)
        else:
            rf_body = src if where is None else E.select(where, src, E.reduce_identity(body.combiner, src.dtype))
        rf_op = ComputeOp(_unique_name(state, f"{op.name}.rf"), rf_axes, rf_body, op.tag, op.attrs)
        k_axis = E.iter_var(f"{fit.name}.v", 0, fit.extent, "reduce")
        idx = op.axes[: self.factor_iter_id] + (k_axis,) + op.axes[self.factor_iter_id:]
        new_op = ComputeOp(op.name, op.axes, E.reduce(body.combiner, rf_op.output[idx], (k_axis,)),
                           op.tag, op.attrs)
        stages = list(state.stages)
        _shift_stage_ids(stages, self.stage_id)
        stages[self.stage_id] = replace(stages[self.stage_id].replaced_by(new_op), auto_unroll_max_step=0)
        stages.insert(self.stage_id, stage_for_op(rf_op, None))
        return state.with_stages(tuple(stages), self)


def pack_factor(state: State, src_step_id: int) -> int:
    """The pack's block length: the innermost length of an earlier split of the reader (the
    register tile's width), so a mutation of the tile sizes moves the layout with it."""
    if not 0 <= src_step_id < len(state.steps):
        raise InvalidStepError(f"pack: step {src_step_id} does not exist")
    src = state.steps[src_step_id]
    # By tag: SplitStep lives in transform_steps, which imports this module.
    if src.tag != "SP" or not getattr(src, "inner_to_outer", False):
        raise InvalidStepError(f"pack: step {src_step_id} is not a split by inner lengths")
    return int(src.lengths[-1])


@dataclass(frozen=True)
class PackStep(Step):
    """Copy a tensor the reader reads into a blocked layout, zero-padded: dimension ``dim`` of
    extent n becomes an outer block index first and an inner offset last,
    ``pack[d // v, (other dims), d % v] = src[..., d, ...]`` (0 where ``d >= n``), with v the
    innermost length of split ``src_step_id`` (the reader's register-tile width).

    The reader's tile then walks the packed tensor contiguously: for a GEMM's B this is the
    panel layout BLAS packs into (a K x v strip per register tile instead of rows a whole N
    apart, which alias in the cache when N is a power of two), for a dense weight [N, K] read
    along N it is the transpose the vector loads need, and for a conv's HWIO weight it is the
    blocked O-outer layout. The padding makes the last block whole, so a tile never reads past
    the copy whatever N is."""

    tag: ClassVar[str] = "PK"
    stage_id: int
    reader_stage_id: int
    dim: int
    src_step_id: int

    def apply(self, state: State) -> State:
        st = _stage(state, self.stage_id)
        if st.compute_at == "inline":
            raise InvalidStepError(f"cannot pack inlined stage {st.name!r}")
        if self.reader_stage_id not in state.consumers(self.stage_id):
            raise InvalidStepError(f"pack of {st.name!r}: stage {self.reader_stage_id} does not read it")
        src = st.op.output
        if not 0 <= self.dim < len(src.shape):
            raise InvalidStepError(f"pack of {st.name!r}: dimension {self.dim} outside "
                                   f"0..{len(src.shape) - 1}")
        v = pack_factor(state, self.src_step_id)
        n = src.shape[self.dim]
        if not 1 <= v <= n:
            # A sketch's placeholder split gives 1 (a plain reordering copy) until tile sizes fill.
            raise InvalidStepError(f"pack of {st.name!r}: block length {v} must be between 1 and "
                                   f"the extent {n} of dimension {self.dim}")
        stages = list(state.stages)
        rs = stages[self.reader_stage_id]
        assert isinstance(rs.op, ComputeOp)
        pack, new_op = pack_ops(state.dag, st.op, st.produced_ops, rs.op, self.dim, v,
                                _unique_name(state, f"{st.name}.pack"))
        stages[self.reader_stage_id] = replace(rs, op=new_op, aliases=rs.aliases + (rs.op,))
        at = self.stage_id + 1
        _shift_stage_ids(stages, at)
        stages.insert(at, stage_for_op(pack, None))
        return state.with_stages(tuple(stages), self)
