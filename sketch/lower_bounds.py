"""Lowering's buffers and bound inference (step 2 of ``lower.py``): what it knows of each stage.

Consumers first, each stage gets a ``StageCtx``: its iterators' extents and variables, the global
index of each axis, the region a stage computed at a loop of another must produce (its start a
symbolic expression of the enclosing loops, its size a constant), the guards of non-divisible
splits and clamped regions, and its buffer. The loop nests are built from these by ``lower.py``;
this is kept apart so each of the two stays one concept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compute import expr as E
from compute import expr_analysis as EA
from compute import loop_ir as L
from compute.tensor import ComputeOp, PlaceholderOp

from .bound import const_upper, sym_bounds
from .stage import InvalidStepError, SplitRel, iterator_extents, iterator_values

if TYPE_CHECKING:
    from .loop_state import State

KIND = {"none": "serial", "parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


@dataclass
class StageCtx:
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


class StageBounds:
    """The buffers and regions of a state's stages: ``make_params`` then ``infer`` fill ``ctx``
    (also ``var_range``, each loop variable's range, and ``peel_atoms``, the guards loop
    partitioning may hoist), which the loop-nest builder then reads and extends."""

    def __init__(self, state: State, pre: dict[int, int]):
        self.state = state
        self.stages = state.stages
        self.pre = pre  # stage id -> argument position it replaces
        self.ctx: dict[int, StageCtx] = {}
        self.var_range: dict[int, tuple[int, int]] = {}
        self.peel_atoms: set[int] = set()  # guards partitioning may hoist (loop_partition.py)

    def make_params(self) -> list[L.Buffer]:
        """The kernel's argument buffers, in the DAG's argument order (a copy stage given
        pre-transformed stands for the input it copies)."""
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
        return self.params

    def _param_for(self, k: int) -> L.Buffer | None:
        for o in self.stages[k].produced_ops:
            b = self.param_of.get(id(o))
            if b is not None:
                return b
        return None

    def infer(self, body: dict[int, E.Expr], reads: dict[int, list[tuple[int, tuple[E.Expr, ...]]]]
              ) -> list[L.Buffer]:
        """Fill ``ctx`` for every stage, consumers first (``body``: the effective bodies;
        ``reads``: per producer, its readers and their indices); returns the global temporaries."""
        self.body = body
        self.reads = reads
        self.temps: list[L.Buffer] = []
        for k in reversed(range(len(self.stages))):
            s = self.stages[k]
            if s.compute_at == "inline":
                continue
            if k in self.pre:
                self.ctx[k] = StageCtx(k, buffer=self._param_for(k))
                continue
            if isinstance(s.op, PlaceholderOp):
                c = StageCtx(k, buffer=self._param_for(k))
                if c.buffer is None:
                    if self.reads[k] and all(r in self.pre for r, _ in self.reads[k]):
                        continue  # read only by copies given pre-transformed
                    raise InvalidStepError(f"placeholder {s.name} is not a kernel argument")
                self.ctx[k] = c
                continue
            op = s.op
            assert isinstance(op, ComputeOp)
            c = StageCtx(k)
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
        return self.temps

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
                vec_roots |= root_axes(s, lid)
        loads = [n for n in E.post_order(self.body[k]) if isinstance(n, E.TensorLoad)]
        ok = set()
        for d in pad:
            if d not in vec_roots:
                ok.add(d)
                continue
            axis = op.axes[d]
            if all(block_index(i, vec_ext) or in_range(i, x.tensor.shape[dim])
                   for x in loads for dim, i in enumerate(x.indices)
                   if any(v is axis for v in EA.free_vars(i))):
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
            out.append((tc.leaf_var[lid], tc.ext[lid], KIND[t.iters[lid].annotation]))
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
                g = EA.substitute(i, sub)
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
            span = off_max - off_min + 1
            # A region wider than the tensor may be cut to the tensor's extent only when it never
            # starts before 0: then [lo, lo + extent) still holds every in-range coordinate read.
            # Starting before 0 (the reads of a padded consumer), the cut would drop the last ones.
            if span > op.shape[d] and -const_upper(-lo, self.var_range) >= 0:
                span = op.shape[d]
            region.append(max(1, span))
        return root_min, region

    def _inside(self, rc: StageCtx, fixed_ids: set[int], reader: int, k: int) -> bool:
        s = self.stages[k]
        tid = s.attach[0]
        if reader == tid:
            return True
        have = {id(v) for v, _, _ in rc.enclosing}
        return fixed_ids <= have


def root_axes(stage, lid: int) -> set[int]:
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


def in_range(index: E.Expr, extent: int) -> bool:
    """``index`` is ``x % c`` with ``c <= extent``: never out of range (a packed block's lane)."""
    return (isinstance(index, E.Binary) and index.op == "floormod" and isinstance(index.b, E.Const)
            and 0 < int(index.b.value) <= extent)


def block_index(index: E.Expr, lanes: int) -> bool:
    """``index`` is ``(... axis ...) // c`` with ``c`` a multiple of ``lanes``: one value per
    aligned vector (a packed input's block index)."""
    return (isinstance(index, E.Binary) and index.op == "floordiv" and isinstance(index.b, E.Const)
            and int(index.b.value) % max(1, lanes) == 0)
