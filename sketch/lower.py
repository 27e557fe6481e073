"""Lowering: turn a loop State into a loop-IR PrimFunc the LLVM backend compiles.

The steps, in order:
1. *Inline*: substitute the bodies of inlined stages into their readers.
2. *Bound inference*, consumers first: a stage computed at a loop of another stage produces only the
   region its readers touch in one iteration of that loop. The region's start is a symbolic
   expression of the enclosing loop variables; its size is a constant (so the buffer is a small
   fixed-size local array LLVM can keep in registers). See ``bound.py``.
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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compute import expr as E
from compute import loop_ir as L
from compute.tensor import ComputeOp, PlaceholderOp

from .bound import const_upper, simplify, sym_bounds
from .loop_partition import partition_guards
from .stage import InvalidStepError, SplitRel, iterator_extents, iterator_values

if TYPE_CHECKING:
    # For annotations only: printing a State shows the extents lowering infers, so at run time
    # the dependency goes loop_state -> lower; lowering reads the state it gets through its fields.
    from .loop_state import State

_KIND = {"none": "serial", "parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


@dataclass
class _Ctx:
    """Everything lowering knows about one stage."""

    sid: int
    enclosing: list[tuple[E.Var, int, str]] = field(default_factory=list)  # loops around the nest
    ext: list[int] = field(default_factory=list)           # extent of every iterator
    leaf_var: dict[int, E.Var] = field(default_factory=dict)
    axis_value: list[E.Expr] = field(default_factory=list)  # global index of each op axis
    reduce_value: list[E.Expr] = field(default_factory=list)
    local_value: list[E.Expr] = field(default_factory=list)  # index into the (region) buffer
    root_min: list[E.Expr] = field(default_factory=list)
    guards: list[E.Expr] = field(default_factory=list)
    region_checks: list[tuple[int, str, int]] = field(default_factory=list)  # (axis, cmp, bound)
    buffer: L.Buffer | None = None
    region_local: bool = False  # buffer holds only the region (indices minus root_min)
    peels: bool = False  # a split of it (or of a stage it is computed in) has a non-guard tail
    clamp_axes: frozenset[int] = frozenset()  # "pad" axes: computed past the domain, reads clamped


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
                    return E.substitute(body[p], dict(zip(state.stages[p].op.axes, idx)))
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
        self.ctx: dict[int, _Ctx] = {}
        self.var_range: dict[int, tuple[int, int]] = {}
        self.peel_atoms: set[int] = set()  # guards partitioning may hoist (loop_partition.py)

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

    # ---- 2. buffers and bound inference -------------------------------------------------------------
    def _params(self) -> None:
        self.params: list[L.Buffer] = []
        self.param_of: dict[int, L.Buffer] = {}
        by_position = {pos: sid for sid, pos in self.pre.items()}
        for pos, t in enumerate(self.state.dag.tensors):
            sid = by_position.get(pos)
            if sid is not None:  # the copy's output is the argument, the original is not read
                op = self.stages[sid].op
                b = L.Buffer(op.name, op.output.shape, op.output.dtype, "global")
                self.params.append(b)
                self.param_of[id(op)] = b
                continue
            b = L.Buffer(t.name, t.shape, t.dtype, "global")
            self.params.append(b)
            self.param_of[id(t.op)] = b

    def _param_for(self, k: int) -> L.Buffer | None:
        for o in self.stages[k].produced_ops:
            b = self.param_of.get(id(o))
            if b is not None:
                return b
        return None

    def _bounds(self) -> None:
        self.temps: list[L.Buffer] = []
        for k in reversed(range(len(self.stages))):
            s = self.stages[k]
            if s.compute_at == "inline":
                continue
            if k in self.pre:
                self.ctx[k] = _Ctx(k, buffer=self._param_for(k))
                continue
            if isinstance(s.op, PlaceholderOp):
                c = _Ctx(k, buffer=self._param_for(k))
                if c.buffer is None:
                    if self.reads[k] and all(r in self.pre for r, _ in self.reads[k]):
                        continue  # read only by copies given pre-transformed
                    raise InvalidStepError(f"placeholder {s.name} is not a kernel argument")
                self.ctx[k] = c
                continue
            op = s.op
            assert isinstance(op, ComputeOp)
            c = _Ctx(k)
            n_sp = len(op.axes)
            if s.compute_at == "root":
                c.root_min = [E.const(0)] * n_sp
                region = list(op.shape)
            else:
                c.enclosing = self._enclosing(k)
                c.root_min, region = self._region(k, c.enclosing)
            root_ext = region + [a.extent for a in op.reduce_axes]
            c.ext = iterator_extents(s, root_ext)
            for lid in s.leaves:
                v = E.var(s.iters[lid].name)
                c.leaf_var[lid] = v
                self.var_range[id(v)] = (0, c.ext[lid] - 1)
            peel: list[E.Expr] = []
            values, guards = iterator_values(s, c.ext, c.leaf_var, peel)
            self.peel_atoms.update(id(g) for g in peel)
            c.peels = any(isinstance(r, SplitRel) and r.tail != "guard" for r in s.relations) or (
                s.compute_at == "iter" and self.ctx[s.attach[0]].peels)
            c.local_value = [values[d] for d in range(n_sp)]
            c.axis_value = [c.root_min[d] + values[d] for d in range(n_sp)]
            c.reduce_value = [values[n_sp + j] + a.lo for j, a in enumerate(op.reduce_axes)]
            c.guards = list(guards)
            if s.compute_at == "iter":
                # A region rounded up past the domain (or starting before it) must not be computed.
                for d in range(n_sp):
                    lo_max = const_upper(c.root_min[d], self.var_range)
                    lo_min = -const_upper(-c.root_min[d], self.var_range)
                    if lo_max + region[d] > op.shape[d]:
                        c.region_checks.append((d, "lt", op.shape[d]))
                    if lo_min < 0:
                        c.region_checks.append((d, "ge", 0))
            if s.compute_at == "iter" and self._param_for(k) is None:
                pad = self._pad_axes(k)
                if pad:
                    # The local buffer holds the whole tile: computing past the domain is safe, and
                    # only the consumer's copy-out needs the test.
                    c.region_checks = [r for r in c.region_checks if not (r[0] in pad and r[1] == "lt")]
                    c.clamp_axes = pad
            checks = [E.compare(cmp, c.axis_value[d], b) for d, cmp, b in c.region_checks]
            if c.peels:
                self.peel_atoms.update(id(g) for g in checks)
            c.guards += checks
            c.buffer = self._param_for(k)
            if c.buffer is None:
                if s.compute_at == "root":
                    c.buffer = L.Buffer(op.name, op.shape, op.dtype, "global")
                    self.temps.append(c.buffer)
                else:
                    c.buffer = L.Buffer(op.name, region, op.dtype, "local")
                    c.region_local = True
            self.ctx[k] = c

    def _pad_axes(self, k: int) -> frozenset[int]:
        """The spatial axes of stage ``k`` split with the "pad" tail whose reads can be clamped
        cheaply: an index of the vectorized axis must be a block index (``j // v``, one value per
        vector, as a packed input's) - clamping a per-lane index would make a gather."""
        s = self.stages[k]
        op = s.op
        n_sp = len(op.axes)
        pad = {r.parent for r in s.relations
               if isinstance(r, SplitRel) and r.tail == "pad" and r.parent < n_sp}
        if not pad:
            return frozenset()
        vec_roots: set[int] = set()
        vec_ext = 1
        for lid in s.leaves:
            if s.iters[lid].annotation == "vectorize":
                vec_ext = s.iters[lid].extent
                vec_roots |= _root_axes(s, lid)
        loads = [n for n in E.post_order(self.body[k]) if isinstance(n, E.TensorLoad)]
        ok = set()
        for d in pad:
            if d not in vec_roots:
                ok.add(d)
                continue
            axis = op.axes[d]
            if all(_block_index(i, vec_ext) or _in_range(i, x.tensor.shape[dim])
                   for x in loads for dim, i in enumerate(x.indices)
                   if any(v is axis for v in E.free_vars(i))):
                ok.add(d)
        return frozenset(ok)

    def _enclosing(self, k: int) -> list[tuple[E.Var, int, str]]:
        s = self.stages[k]
        assert s.attach is not None
        tid, it_id = s.attach
        t = self.stages[tid]
        if t.compute_at == "inline" or tid not in self.ctx:
            raise InvalidStepError(f"stage {s.name} is computed at {t.name}, which is inlined or not "
                                   "computed after it")
        tc = self.ctx[tid]
        if it_id not in t.leaves:
            raise InvalidStepError(f"stage {s.name} is attached to a loop of {t.name} that no longer exists")
        out = list(tc.enclosing)
        for lid in t.leaves[: t.leaves.index(it_id) + 1]:
            out.append((tc.leaf_var[lid], tc.ext[lid], _KIND[t.iters[lid].annotation]))
        return out

    def _region(self, k: int, enclosing) -> tuple[list[E.Expr], list[int]]:
        s = self.stages[k]
        op = s.op
        fixed_ids = {id(v) for v, _, _ in enclosing}
        sites = self.reads[k]
        if not sites:
            raise InvalidStepError(f"stage {s.name} is computed at a loop but nothing reads it")
        los: list[list[E.Expr]] = [[] for _ in op.shape]
        his: list[list[E.Expr]] = [[] for _ in op.shape]
        for reader, idx in sites:
            rc = self.ctx.get(reader)
            if rc is None or not (self._inside(rc, fixed_ids, reader, k)):
                raise InvalidStepError(
                    f"stage {s.name} is computed at {self.stages[s.attach[0]].name} loop "
                    f"{self.stages[s.attach[0]].iters[s.attach[1]].name}, but its reader "
                    f"{self.stages[reader].name} runs outside that loop")
            rop = self.stages[reader].op
            sub = dict(zip(rop.axes, rc.axis_value))
            sub.update(zip(rop.reduce_axes, rc.reduce_value))
            for d, i in enumerate(idx):
                g = E.substitute(i, sub)
                ranging = {}
                for n in E.post_order(g):
                    if isinstance(n, E.Var) and id(n) not in fixed_ids:
                        r = self.var_range.get(id(n))
                        if r is None:
                            raise InvalidStepError(f"bound inference for {s.name}: unknown loop {n.name}")
                        ranging[id(n)] = r
                lo, hi = sym_bounds(g, ranging, self.var_range)
                los[d].append(lo)
                his[d].append(hi)
        root_min, region = [], []
        for d in range(len(op.shape)):
            ref = los[d][0]
            off_min = min(-const_upper(ref - lo, self.var_range) for lo in los[d])
            off_max = max(const_upper(hi - ref, self.var_range) for hi in his[d])
            lo = ref + off_min
            root_min.append(lo)
            region.append(max(1, min(off_max - off_min + 1, op.shape[d])))
        return root_min, region

    def _inside(self, rc: _Ctx, fixed_ids: set[int], reader: int, k: int) -> bool:
        s = self.stages[k]
        tid = s.attach[0]
        if reader == tid:
            return True
        have = {id(v) for v, _, _ in rc.enclosing}
        return fixed_ids <= have

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
                padded = [bool(clamp) and any(id(v) in clamp for v in E.free_vars(orig))
                          and not _in_range(orig, x.tensor.shape[d])
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
            lv = max((level_of.get(id(v), -1) for v in E.free_vars(g)), default=-1)
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
            kind = _KIND[it.annotation]
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
                loops.append((v, c.ext[lid], _KIND[ann]))
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


# ---- readable loop structure of a state ---------------------------------------------------------

def state_str(state: State) -> str:
    """The loop structure, TVM style: one line per loop, the computation at the innermost level."""
    stages = state.stages
    attached: dict[tuple[int, int], list[int]] = {}
    for k, s in enumerate(stages):
        if s.compute_at == "iter" and s.attach is not None:
            attached.setdefault(tuple(s.attach), []).append(k)  # type: ignore[arg-type]
    # Extents after bound inference (what the loops really run), when the state lowers at all.
    try:
        lw = _Lowering(state, "print")
        lw._effective_bodies()
        lw._params()
        lw._bounds()
        extents = {k: c.ext for k, c in lw.ctx.items() if c.ext}
    except InvalidStepError:
        extents = {}
    lines = []
    ph = [s.name for s in stages if s.is_placeholder]
    if ph:
        lines.append("Placeholder: " + ", ".join(ph))

    def emit(k: int, depth: int) -> None:
        s = stages[k]
        for lid in s.leaves:
            it = s.iters[lid]
            kw = {"none": "for", "parallel": "parallel", "vectorize": "vectorize", "unroll": "unroll"}[it.annotation]
            ext = extents[k][lid] if k in extents else it.extent
            lines.append("  " * depth + f"{kw} {it.name} (0,{ext})")
            depth += 1
            if s.auto_unroll_max_step and lid == s.leaves[0]:
                lines.append("  " * depth + f"pragma auto_unroll_max_step={s.auto_unroll_max_step}")
            for a in attached.get((k, lid), []):
                emit(a, depth)
        lines.append("  " * depth + f"{s.name} = ...")

    for k, s in enumerate(stages):
        if s.is_placeholder or s.compute_at != "root":
            continue
        emit(k, 0)
    inl = [s.name for s in stages if s.compute_at == "inline"]
    if inl:
        lines.append("Inlined: " + ", ".join(inl))
    return "\n".join(lines)


def _root_axes(stage, lid: int) -> set[int]:
    """The root iterators leaf ``lid`` of ``stage`` derives from (through splits and fuses)."""
    out: set[int] = set()
    todo = [lid]
    while todo:
        x = todo.pop()
        parents = None
        for r in stage.relations:
            if isinstance(r, SplitRel) and x in r.children:
                parents = [r.parent]
            elif not isinstance(r, SplitRel) and getattr(r, "child", None) == x:
                parents = list(r.parents)
        if parents is None:
            out.add(x)
        else:
            todo.extend(parents)
    return out


def _in_range(index: E.Expr, extent: int) -> bool:
    """``index`` is ``x % c`` with ``c <= extent``: never out of range (a packed block's lane)."""
    return (isinstance(index, E.Binary) and index.op == "floormod" and isinstance(index.b, E.Const)
            and 0 < int(index.b.value) <= extent)


def _block_index(index: E.Expr, lanes: int) -> bool:
    """``index`` is ``(... axis ...) // c`` with ``c`` a multiple of ``lanes``: one value per
    aligned vector (a packed input's block index)."""
    return (isinstance(index, E.Binary) and index.op == "floordiv" and isinstance(index.b, E.Const)
            and int(index.b.value) % max(1, lanes) == 0)
