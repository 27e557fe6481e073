"""Lowering: turn a loop State into a loop-IR PrimFunc the LLVM backend compiles.

The steps, in order:
1. *Inline*: substitute the bodies of inlined stages into their readers.
2. *Bound inference*, consumers first: a stage computed at a loop of another stage produces only the
   region its readers touch in one iteration of that loop. The region's start is a symbolic
   expression of the enclosing loop variables; its size is a constant (so the buffer is a small
   fixed-size local array LLVM can keep in registers). See ``lower_bounds.py`` and ``bound.py``.
3. *Loop nests*: each stage's loops in its current order, the stages attached to a loop emitted at
   the top of that loop's body, the reduction's initialisation placed just outside its outermost
   reduce loop of extent > 1, and explicit guards wherever a non-divisible split or a clamped
   region would step outside the domain.
4. *Auto-unroll*: the ``auto_unroll_max_step`` pragma marks small inner loop nests unrolled.
5. *Peeling*: the guards of "peel" splits (and the region checks of stages computed inside a
   peeling stage) are hoisted so full tiles run without tests (``loop_partition.py``). A "shift"
   split has no guard: its last tile starts at ``extent - tile`` (``stage.iterator_values``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from compute import expr as E
from compute import expr_analysis as EA
from compute import loop_ir as L
from compute.tensor import ComputeOp

from .bound import simplify
from .loop_partition import partition_guards
from .lower_bounds import KIND, StageBounds, StageCtx, in_range
from .stage import InvalidStepError, iterator_values

if TYPE_CHECKING:
    # For annotations only: printing a State shows the extents lowering infers, so at run time
    # the dependency goes loop_state -> state_print -> lower; lowering reads the state it gets
    # through its fields.
    from .loop_state import State


def lower(state: State, name: str = "default_function",
          pre_transformed: dict[int, int] | None = None) -> L.PrimFunc:
    """Lower ``state`` to a PrimFunc whose params are the DAG's argument tensors in order.

    ``pre_transformed`` maps stage ids of copy stages (a pack) to the argument position of the
    input they copy: each such stage is not computed, its output becomes that argument instead
    (the caller computes it once, outside; ``layout_rewrite`` checks which stages qualify)."""
    return _Lowering(state, name, pre_transformed or {}).run()


def check_lowers(state: State) -> None:
    """Raise what ``lower(state)`` would raise for an invalid schedule, without building its
    program: the loop nests are emitted (every structural check happens there) but the peeled
    tails are not partitioned out, which changes the program's speed, never its validity. The
    search's filter of new structures, at about two thirds of a full lowering's cost."""
    _Lowering(state, "check", {}).run(partition=False)


def inferred_extents(state: State) -> dict[int, list[int]]:
    """Each stage's iterator extents after bound inference (what its loops really run), for the
    stages that have iterators; InvalidStepError if the state does not lower."""
    lw = _Lowering(state, "print")
    lw._effective_bodies()
    lw._params()
    lw._bounds()
    return {k: c.ext for k, c in lw.ctx.items() if c.ext}


def effective_bodies(state: State, producer_of: dict[int, int] | None = None) -> dict[int, E.Expr]:
    """Each compute stage's body with the bodies of inlined stages substituted into it."""
    producer_of = state.producer_map() if producer_of is None else producer_of
    body: dict[int, E.Expr] = {}
    for k, s in enumerate(state.stages):
        if not isinstance(s.op, ComputeOp):
            continue
        memo: dict[int, E.Expr] = {}

        def inline(e: E.Expr) -> E.Expr | None:
            if isinstance(e, E.TensorLoad):
                p = producer_of.get(id(e.tensor))
                if p is not None and state.stages[p].compute_at == "inline":
                    idx = tuple(E.rewrite(i, inline, memo) for i in e.indices)
                    return EA.substitute(body[p], dict(zip(state.stages[p].op.axes, idx)))
            return None

        body[k] = E.rewrite(s.op.body, inline, memo)
    return body


class _Lowering:
    def __init__(self, state: State, name: str, pre_transformed: dict[int, int] | None = None):
        self.state = state
        self.name = name
        self.pre = dict(pre_transformed or {})  # stage id -> argument position it replaces
        self.stages = state.stages
        self.producer_of = state.producer_map()
        # Buffers and bound inference (lower_bounds.py); the nests below read and extend its
        # contexts and the guards loop partitioning may hoist (loop_partition.py).
        self.bounds = StageBounds(state, self.pre)
        self.ctx: dict[int, StageCtx] = self.bounds.ctx
        self.var_range = self.bounds.var_range
        self.peel_atoms = self.bounds.peel_atoms

    # ---- 1. inlining ------------------------------------------------------------------------------
    def _effective_bodies(self) -> None:
        self.body = effective_bodies(self.state, self.producer_of)
        self.reads: dict[int, list[tuple[int, tuple[E.Expr, ...]]]] = {k: [] for k in range(len(self.stages))}
        for k, b in self.body.items():
            if self.stages[k].compute_at == "inline":
                continue
            for n in E.post_order(b):
                if isinstance(n, E.TensorLoad):
                    p = self.producer_of.get(id(n.tensor))
                    if p is None:
                        raise InvalidStepError(f"stage {self.stages[k].name} reads {n.tensor.name}, "
                                               "which no stage produces")
                    self.reads[p].append((k, n.indices))

    # ---- 2. buffers and bound inference (lower_bounds.py) -------------------------------------------
    def _params(self) -> None:
        self.params = self.bounds.make_params()

    def _bounds(self) -> None:
        self.temps = self.bounds.infer(self.body, self.reads)

    # ---- 3. expressions and loop nests ------------------------------------------------------------
    def _lower_expr(self, e: E.Expr, k: int) -> E.Expr:
        c = self.ctx[k]
        op = self.stages[k].op
        mapping = {id(a): v for a, v in zip(op.axes, c.axis_value)}
        mapping.update({id(a): v for a, v in zip(op.reduce_axes, c.reduce_value)})
        clamp = {id(op.axes[d]) for d in c.clamp_axes}
        memo: dict[int, E.Expr] = {}

        def fn(x: E.Expr) -> E.Expr | None:
            if isinstance(x, E.Var):
                return mapping.get(id(x))
            if isinstance(x, E.TensorLoad):
                p = self.producer_of[id(x.tensor)]
                pc = self.ctx[p]
                idx = [E.rewrite(i, fn, memo) for i in x.indices]
                padded = [bool(clamp) and any(id(v) in clamp for v in EA.free_vars(orig))
                          and not in_range(orig, x.tensor.shape[d])
                          for d, orig in enumerate(x.indices)]
                if pc.region_local:
                    idx = [simplify(i - m) for i, m in zip(idx, pc.root_min)]
                    # A padded point reads inside the producer's region buffer: a region filled
                    # at a loop inside the padding stage can lie wholly past the tensor (its
                    # start beyond the last row or block), so clamp to the buffer, not the tensor.
                    idx = [E.binary("max", E.binary("min", i, r - 1), E.const(0)) if p else i
                           for i, r, p in zip(idx, pc.buffer.shape, padded)]
                else:
                    # A padded point reads the last real row / block instead of past the tensor.
                    idx = [E.binary("min", i, x.tensor.shape[d] - 1) if p else i
                           for d, (i, p) in enumerate(zip(idx, padded))]
                return L.buffer_load(pc.buffer, idx)
            return None

        return E.rewrite(e, fn, memo)

    def _store_index(self, k: int, values: list[E.Expr] | None = None) -> tuple[E.Expr, ...]:
        c = self.ctx[k]
        loc = c.local_value if values is None else values
        if c.region_local:
            return tuple(loc)
        return tuple(simplify(m + v) for m, v in zip(c.root_min, loc))

    def _guard(self, conds: list[E.Expr], stmt: L.Stmt) -> L.Stmt:
        cond: E.Expr | None = None
        for g in conds:
            if isinstance(g, E.Const) and g.value:
                continue
            cond = g if cond is None else E.binary("and", cond, g)
        return stmt if cond is None else L.IfThenElse(cond, stmt)

    def _emit(self, k: int) -> L.Stmt:
        s = self.stages[k]
        c = self.ctx[k]
        op = s.op
        assert isinstance(op, ComputeOp)
        body = self.body[k]
        buf = c.buffer
        assert buf is not None
        idx = self._store_index(k)
        init: L.Stmt | None = None
        first_red = next((p for p, lid in enumerate(s.leaves) if s.iters[lid].kind == "reduce"), None)
        if first_red is not None:
            # Reduce loops of extent 1 run once, so the identity store may go past them, inside the
            # spatial loops they enclose: a tile's accumulators then start in registers instead of
            # a zeroed block of memory being reloaded (multi-level tiles with a unit outer reduce
            # split put the whole second spatial level between them).
            first_red = next((p for p in range(first_red, len(s.leaves))
                              if s.iters[s.leaves[p]].kind == "reduce" and c.ext[s.leaves[p]] != 1),
                             first_red)
        if isinstance(body, E.Reduce):
            old = L.buffer_load(buf, idx)
            src = self._lower_expr(body.source, k)
            new = E.binary({"sum": "add", "max": "max", "min": "min"}[body.combiner], old, src)
            if body.where is not None:
                new = E.select(self._lower_expr(body.where, k), new, old)
            inner: L.Stmt = L.Store(buf, idx, new)
            init = self._init(k, body, first_red if first_red is not None else len(s.leaves))
        else:
            inner = L.Store(buf, idx, self._lower_expr(body, k))
        # Each guard goes on the loop that defines its innermost variable: an iteration outside the
        # domain at an outer level then skips its whole subtree instead of testing every point.
        level_of = {id(c.leaf_var[lid]): p for p, lid in enumerate(s.leaves)}
        by_level: dict[int, list[E.Expr]] = {}
        for g in c.guards:
            lv = max((level_of.get(id(v), -1) for v in EA.free_vars(g)), default=-1)
            by_level.setdefault(lv, []).append(g)
        enclosing_parallel = any(kind == "parallel" for _, _, kind in c.enclosing)
        for pos in reversed(range(len(s.leaves))):
            lid = s.leaves[pos]
            parts: list[L.Stmt | None] = []
            allocs: list[L.Buffer] = []
            for a in self.attached.get((k, lid), []):
                parts.append(self._emit(a))
                ab = self.ctx[a].buffer
                if self.ctx[a].region_local and ab is not None:
                    allocs.append(ab)
            if first_red is not None and pos == first_red - 1:
                parts.append(init)
            parts.append(inner)
            content = self._guard(by_level.get(pos, []), L.seq(*parts))
            for ab in reversed(allocs):
                content = L.Allocate(ab, content)
            it = s.iters[lid]
            kind = KIND[it.annotation]
            if kind == "parallel" and enclosing_parallel:
                raise InvalidStepError(f"loop {it.name} of stage {s.name} is parallel inside another "
                                       "parallel loop (nested parallel loops)")
            inner = L.For(c.leaf_var[lid], c.ext[lid], kind, content)
        nest = L.seq(init, inner) if first_red == 0 else inner
        nest = self._guard(by_level.get(-1, []), nest)
        if s.auto_unroll_max_step > 0:
            nest = _auto_unroll(nest, s.auto_unroll_max_step)
        return nest

    def _init(self, k: int, body: E.Reduce, first_red: int) -> L.Stmt:
        """The identity store, inside fresh copies of the spatial loops nested below the reduction."""
        s = self.stages[k]
        c = self.ctx[k]
        leaf_vals: dict[int, E.Expr] = {}
        loops: list[tuple[E.Var, int, str]] = []
        for pos, lid in enumerate(s.leaves):
            it = s.iters[lid]
            if pos < first_red:
                leaf_vals[lid] = c.leaf_var[lid]
            elif it.kind == "spatial":
                v = E.var(it.name + ".init")
                leaf_vals[lid] = v
                ann = it.annotation if it.annotation != "parallel" else "none"
                loops.append((v, c.ext[lid], KIND[ann]))
        peel: list[E.Expr] = []
        values, guards = iterator_values(s, c.ext, leaf_vals, peel)
        n_sp = len(s.op.axes)
        local = [values[d] for d in range(n_sp)]
        stmt: L.Stmt = L.Store(c.buffer, self._store_index(k, local),
                               E.reduce_identity(body.combiner, body.dtype))
        checks = [E.compare(cmp, c.root_min[d] + local[d], b) for d, cmp, b in c.region_checks]
        self.peel_atoms.update(id(g) for g in peel + (checks if c.peels else []))
        conds = guards + checks
        stmt = self._guard(conds, stmt)
        for v, ext, kind in reversed(loops):
            stmt = L.For(v, ext, kind, stmt)
        return stmt

    def run(self, partition: bool = True) -> L.PrimFunc:
        self._effective_bodies()
        self._params()
        self.attached: dict[tuple[int, int], list[int]] = {}
        for k, s in enumerate(self.stages):
            if k in self.pre:
                if s.compute_at == "inline" or not isinstance(s.op, ComputeOp):
                    raise InvalidStepError(f"stage {s.name} cannot be given pre-transformed: it is "
                                           "not a computed stage")
                continue
            if s.compute_at == "iter" and s.attach is not None:
                if s.attach[0] in self.pre:
                    raise InvalidStepError(f"stage {s.name} is computed at {self.stages[s.attach[0]].name}, "
                                           "which is given pre-transformed")
                self.attached.setdefault(tuple(s.attach), []).append(k)  # type: ignore[arg-type]
        self._bounds()
        parts = [self._emit(k) for k, s in enumerate(self.stages)
                 if s.compute_at == "root" and isinstance(s.op, ComputeOp) and k not in self.pre]
        body = L.seq(*parts)
        if partition:
            body = partition_guards(body, self.peel_atoms)
        for b in reversed(self.temps):
            body = L.Allocate(b, body)
        return L.PrimFunc(self.name, tuple(self.params), body)


def _steps(stmt: L.Stmt) -> int:
    if isinstance(stmt, L.For):
        return stmt.extent * _steps(stmt.body)
    if isinstance(stmt, L.Seq):
        return sum(_steps(x) for x in stmt.stmts)
    if isinstance(stmt, L.IfThenElse):
        return _steps(stmt.then_case) + (0 if stmt.else_case is None else _steps(stmt.else_case))
    if isinstance(stmt, L.Allocate):
        return _steps(stmt.body)
    return 1


def _auto_unroll(stmt: L.Stmt, max_step: int) -> L.Stmt:
    def fn(s: L.Stmt) -> L.Stmt | None:
        if isinstance(s, L.For) and s.kind == "serial" and _steps(s) <= max_step:
            return L.For(s.var, s.extent, "unrolled", s.body, s.annotations)
        return None

    return L.map_stmt(stmt, fn)
