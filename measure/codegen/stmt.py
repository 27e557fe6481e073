"""Statements: sequences, stores, conditionals, allocations and loops (serial, unrolled, or
handed to vectorisation / parallel outlining), and the unrolling limit applied before emission."""
from __future__ import annotations

from typing import Callable

from compute import dtype as dt
from compute import expr as E
from compute import loop_ir as L

from .emitter import Emitter
from .names import MAX_SYMBOL_LEN, _hint
from .values import _Val, _mem_ty

ALLOCA_LIMIT_BYTES = 64 * 1024
# Full unrolling beyond this many copies of the loop body's statements buys nothing and can make
# LLVM take seconds (a 9 x 209 unrolled nest took 11 s); such loops stay loops.
MAX_UNROLLED_COPIES = 512
FALLBACK_MARK = "vectorized loop emitted as scalar fallback:"
SERIAL_LOOP_COPIES = 16  # what a kept loop weighs: LLVM makes vector, remainder and check copies


class Statements(Emitter):
    """Statement and loop emission."""

    def stmt(self, s: L.Stmt) -> None:
        if isinstance(s, L.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, L.Store):
            self.memo = {}
            self._store(s)
            self.memo = {}
        elif isinstance(s, L.IfThenElse):
            self._if(s)
        elif isinstance(s, L.Allocate):
            self._allocate(s)
        elif isinstance(s, L.For):
            self._for(s)
        else:
            raise TypeError(f"unknown statement {type(s).__name__}")

    def _if(self, s: L.IfThenElse) -> None:
        self.memo = {}
        c = self.value(s.cond)
        self.memo = {}
        if c.lanes is not None:
            # Lane-dependent guard (the tail of a non-divisible split): both sides run on all
            # lanes with their loads and stores masked, so inactive lanes touch no memory.
            assert self.vec is not None
            outer = self.vec.mask
            not_c = self.binop("xor", c, _Val("true", "i1"))
            for body, m in ((s.then_case, c), (s.else_case, not_c)):
                if body is None:
                    continue
                if outer is not None:
                    m = self.binop("and", m, _Val(outer, "i1", m.lanes))
                self.vec.mask = m.ref
                self.stmt(body)
            self.vec.mask = outer
            return
        lt, lm = self.label("then"), self.label("endif")
        le = self.label("else") if s.else_case is not None else lm
        self.do(f"br i1 {c.ref}, label %{lt}, label %{le}")
        self.block(lt)
        self.stmt(s.then_case)
        self.br(lm)
        if s.else_case is not None:
            self.block(le)
            self.stmt(s.else_case)
            self.br(lm)
        self.block(lm)

    def _allocate(self, s: L.Allocate) -> None:
        b = s.buffer
        nbytes = max(b.nbytes, 1)
        elem = _mem_ty(b.dtype)
        name = f"%buf{b.uid}_{self._n + 1}"
        self._n += 1
        if nbytes <= ALLOCA_LIMIT_BYTES:
            align = 64 if nbytes >= 64 else max(dt.nbytes(b.dtype), 1)
            self.entry.append(f"  {name} = alloca {elem}, i64 {b.size}, align {align}")
        else:
            padded = (nbytes + 63) // 64 * 64  # aligned_alloc wants a multiple of the alignment
            self.mod.declare("aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
            self.mod.declare("free", "declare void @free(ptr) nounwind")
            # Cached across calls (codegen.workspace): a fresh allocation per call page-faults.
            slots = self.mod.workspaces.site()
            self.entry.append(self.mod.workspaces.take(name, slots, padded))
            self.exit.insert(0, self.mod.workspaces.give(slots, name))
        prev = self.buffers.get(b.uid)
        self.buffers[b.uid] = (b, name)
        self.stmt(s.body)
        if prev is None:
            del self.buffers[b.uid]
        else:
            self.buffers[b.uid] = prev

    def _for(self, s: L.For) -> None:
        if s.kind == "parallel":
            self._parallel(s)
        elif s.kind == "vectorized":
            if self.vec is None and self._can_vectorize(s):
                self._vectorize(s)
            else:
                # No forced vectorize.enable: O3's loop vectorizer still tries, and forcing it
                # only adds "loop not vectorized" warnings on stderr when it cannot. The comment
                # keeps the fallback visible in kernel.llvm_ir.
                self.do(f"; {FALLBACK_MARK} {_hint(s.var.name, MAX_SYMBOL_LEN)}")
                self.counted_loop(s.var, "0", str(s.extent), lambda: self.stmt(s.body), None)
        else:
            bound = _trip_bound(s) if self.vec is None else None
            if bound is not None:
                self._bounded_for(s, *bound)
                return
            md = self.mod.loop_md('!"llvm.loop.unroll.full"') if s.kind == "unrolled" else None
            self.counted_loop(s.var, "0", str(s.extent), lambda: self.stmt(s.body), md)

    def _bounded_for(self, s: L.For, offset: E.Expr | None, limit: E.Expr, body: L.Stmt) -> None:
        """``for v in range(n): if offset + v < limit: body`` as ``for v in range(min(n, limit -
        offset)): body``: the tail of a split reduction (``k.0*8 + k.1 < 31``) then runs without a
        test per iteration, and its accumulators stay in registers as in the full tiles."""
        self.memo = {}
        lim = self.wide(limit)
        if offset is not None:
            lim = self.binop("sub", lim, self.wide(offset))
        self.memo = {}
        short = self.cmp("icmp slt", lim, _Val(str(s.extent), "i64"))
        end = self.select(short, lim, _Val(str(s.extent), "i64"))
        some = self.cmp("icmp sgt", end, _Val("0", "i64"))
        run, done = self.label("tail"), self.label("endtail")
        self.do(f"br i1 {some.ref}, label %{run}, label %{done}")
        self.block(run)
        self.counted_loop(s.var, "0", end.ref, lambda: self.stmt(body), None)
        self.br(done)
        self.block(done)

    def counted_loop(self, var: E.Var, start: str, end: str, body: Callable[[], None],
                     md: str | None) -> None:
        """``for var in [start, end)``; the caller guarantees ``start < end`` (bottom-tested)."""
        pre = self.cur
        hdr = self.label(f"for_{_hint(var.name)}_")
        ext = self.label("endfor")
        self.br(hdr)
        self.block(hdr)
        iv = self.fresh(_hint(var.name) + "_")
        slot = len(self.lines)
        self.lines.append(None)  # the phi, filled once the latch is known
        if self.vec is not None:
            raise AssertionError("loops inside vector emission")
        prev = self.env.get(id(var))
        self.env[id(var)] = (var, iv)
        self.memo = {}
        body()
        self.memo = {}
        if prev is None:
            del self.env[id(var)]
        else:
            self.env[id(var)] = prev
        nxt = self.ins(f"add nuw nsw i64 {iv}, 1")
        c = self.ins(f"icmp slt i64 {nxt}, {end}")
        tail = f", !llvm.loop {md}" if md else ""
        self.do(f"br i1 {c}, label %{hdr}, label %{ext}{tail}")
        self.lines[slot] = f"  {iv} = phi i64 [ {start}, %{pre} ], [ {nxt}, %{self.cur} ]"
        self.block(ext)


def _trip_bound(s: L.For) -> tuple[E.Expr | None, E.Expr, L.Stmt] | None:
    """``(offset, limit, body)`` when the loop's whole body is ``if offset + v < limit and rest:
    inner`` (``offset`` and ``limit`` free of the loop variable ``v``); ``body`` is the guarded
    statement with the other conditions kept. None otherwise."""
    b = s.body
    if not (isinstance(b, L.IfThenElse) and b.else_case is None):
        return None
    v = s.var

    def free_of_v(e: E.Expr) -> bool:
        return all(x is not v for x in E.free_vars(e))

    parts = E.conjuncts(b.cond)
    for k, a in enumerate(parts):
        if not (isinstance(a, E.Compare) and a.op == "lt" and free_of_v(a.b)):
            continue
        lhs = a.a
        if lhs is v:
            offset = None
        elif isinstance(lhs, E.Binary) and lhs.op == "add" and lhs.b is v and free_of_v(lhs.a):
            offset = lhs.a
        elif isinstance(lhs, E.Binary) and lhs.op == "add" and lhs.a is v and free_of_v(lhs.b):
            offset = lhs.b
        else:
            continue
        if v.dtype != a.b.dtype or (offset is not None and offset.dtype != v.dtype):
            continue
        rest = E.conjunction(parts[:k] + parts[k + 1:])
        body: L.Stmt = b.then_case if rest is None else L.IfThenElse(rest, b.then_case)
        return offset, a.b, body
    return None


def limit_unrolling(stmt: L.Stmt) -> L.Stmt:
    """Demote ``unrolled`` loops to serial where unrolling would exceed MAX_UNROLLED_COPIES
    statement copies, deciding innermost first (inner unrolling is the valuable part)."""

    def go(s: L.Stmt) -> tuple[L.Stmt, int]:
        if isinstance(s, L.For):
            body, n = go(s.body)
            kind = s.kind
            if kind == "unrolled":
                if s.extent * n <= MAX_UNROLLED_COPIES:
                    n *= s.extent
                else:
                    kind = "serial"
            if kind in ("serial", "parallel"):
                n += SERIAL_LOOP_COPIES
            if body is s.body and kind == s.kind:
                return s, n
            return L.For(s.var, s.extent, kind, body, s.annotations), n
        if isinstance(s, L.Seq):
            parts = [go(x) for x in s.stmts]
            new = tuple(p for p, _ in parts)
            same = all(a is b for a, b in zip(new, s.stmts))
            return (s if same else L.Seq(new)), sum(n for _, n in parts)
        if isinstance(s, L.IfThenElse):
            t, nt = go(s.then_case)
            e, ne = (None, 0) if s.else_case is None else go(s.else_case)
            same = t is s.then_case and e is s.else_case
            return (s if same else L.IfThenElse(s.cond, t, e)), nt + ne
        if isinstance(s, L.Allocate):
            b, n = go(s.body)
            return (s if b is s.body else L.Allocate(s.buffer, b)), n
        return s, 1

    return go(stmt)[0]


def written_buffers(func: L.PrimFunc) -> set[int]:
    """uids of the buffers that ``func`` stores to."""
    return {s.buffer.uid for s in L.walk(func.body) if isinstance(s, L.Store)}
