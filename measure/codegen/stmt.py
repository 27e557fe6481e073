"""Statements: sequences, stores, conditionals, allocations and loops (serial, unrolled, or
handed to vectorisation / parallel outlining). The statement emitter is the top of one function's
emitters: it is handed the others (``function`` wires them) and hands its own ``stmt`` to the
vectoriser for a vector body."""
from __future__ import annotations

from compute import dtype as dt
from compute import expr as E
from compute import expr_analysis as EA
from compute import loop_ir as L

from .emitter import Emitter
from .expr import Expressions
from .loops import CountedLoops
from .memory import MemoryAccess
from .names import MAX_SYMBOL_LEN, _hint
from .parallel import ParallelOutliner
from .values import _Val, _mem_ty
from .vectorize import Vectorizer

ALLOCA_LIMIT_BYTES = 64 * 1024
FALLBACK_MARK = "vectorized loop emitted as scalar fallback:"


class Statements:
    """Statement and loop emission into ``fn``."""

    def __init__(self, fn: Emitter, exprs: Expressions, memory: MemoryAccess, loops: CountedLoops,
                 vectorizer: Vectorizer, outliner: ParallelOutliner):
        self.fn = fn
        self.exprs = exprs
        self.memory = memory
        self.loops = loops
        self.vectorizer = vectorizer
        self.outliner = outliner

    def stmt(self, s: L.Stmt) -> None:
        """Emit ``s`` at the current point of ``fn``."""
        if isinstance(s, L.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, L.Store):
            self.exprs.forget()
            self.memory.store(s, self.exprs.stored(s), self.exprs.wide)
            self.exprs.forget()
        elif isinstance(s, L.IfThenElse):
            self._if(s)
        elif isinstance(s, L.Allocate):
            self._allocate(s)
        elif isinstance(s, L.For):
            self._for(s)
        else:
            raise TypeError(f"unknown statement {type(s).__name__}")

    def loop(self, var: E.Var, start: str, end: str, body: L.Stmt) -> None:
        """``for var in [start, end): body`` as a counted serial loop (``parallel.Body``)."""
        self.loops.counted(var, start, end, lambda: self.stmt(body), None)

    def _if(self, s: L.IfThenElse) -> None:
        fn = self.fn
        self.exprs.forget()
        c = self.exprs.value(s.cond)
        self.exprs.forget()
        if c.lanes is not None:
            # Lane-dependent guard (the tail of a non-divisible split): both sides run on all
            # lanes with their loads and stores masked, so inactive lanes touch no memory.
            vec = fn.vec
            assert vec is not None
            outer = vec.mask
            not_c = fn.binop("xor", c, _Val("true", "i1"))
            for body, m in ((s.then_case, c), (s.else_case, not_c)):
                if body is None:
                    continue
                if outer is not None:
                    m = fn.binop("and", m, _Val(outer, "i1", m.lanes))
                vec.mask = m.ref
                self.stmt(body)
            vec.mask = outer
            return
        lt, lm = fn.label("then"), fn.label("endif")
        le = fn.label("else") if s.else_case is not None else lm
        fn.do(f"br i1 {c.ref}, label %{lt}, label %{le}")
        fn.block(lt)
        self.stmt(s.then_case)
        fn.br(lm)
        if s.else_case is not None:
            fn.block(le)
            self.stmt(s.else_case)
            fn.br(lm)
        fn.block(lm)

    def _allocate(self, s: L.Allocate) -> None:
        fn, mod = self.fn, self.fn.mod
        b = s.buffer
        nbytes = max(b.nbytes, 1)
        elem = _mem_ty(b.dtype)
        name = fn.fresh(f"buf{b.uid}_")
        if nbytes <= ALLOCA_LIMIT_BYTES:
            align = 64 if nbytes >= 64 else max(dt.nbytes(b.dtype), 1)
            fn.entry.append(f"  {name} = alloca {elem}, i64 {b.size}, align {align}")
        else:
            padded = (nbytes + 63) // 64 * 64  # aligned_alloc wants a multiple of the alignment
            mod.declare("aligned_alloc", "declare noalias ptr @aligned_alloc(i64, i64) nounwind")
            mod.declare("free", "declare void @free(ptr) nounwind")
            # Cached across calls (codegen.workspace): a fresh allocation per call page-faults.
            slots = mod.workspaces.site()
            fn.entry.append(mod.workspaces.take(name, slots, padded))
            fn.exit.insert(0, mod.workspaces.give(slots, name))
        prev = fn.buffers.get(b.uid)
        fn.buffers[b.uid] = (b, name)
        self.stmt(s.body)
        if prev is None:
            del fn.buffers[b.uid]
        else:
            fn.buffers[b.uid] = prev

    def _for(self, s: L.For) -> None:
        if s.kind == "parallel":
            self.outliner.outline(s)
        elif s.kind == "vectorized":
            if self.fn.vec is None and self.vectorizer.can_vectorize(s):
                self.vectorizer.vectorize(s, self.stmt)
            else:
                # No forced vectorize.enable: O3's loop vectorizer still tries, and forcing it
                # only adds "loop not vectorized" warnings on stderr when it cannot. The comment
                # keeps the fallback visible in kernel.llvm_ir.
                self.fn.do(f"; {FALLBACK_MARK} {_hint(s.var.name, MAX_SYMBOL_LEN)}")
                self.loop(s.var, "0", str(s.extent), s.body)
        else:
            bound = _trip_bound(s) if self.fn.vec is None else None
            if bound is not None:
                self._bounded_for(s, *bound)
                return
            md = self.fn.mod.loop_md('!"llvm.loop.unroll.full"') if s.kind == "unrolled" else None
            self.loops.counted(s.var, "0", str(s.extent), lambda: self.stmt(s.body), md)

    def _bounded_for(self, s: L.For, offset: E.Expr | None, limit: E.Expr, body: L.Stmt) -> None:
        """``for v in range(n): if offset + v < limit: body`` as ``for v in range(min(n, limit -
        offset)): body``: the tail of a split reduction (``k.0*8 + k.1 < 31``) then runs without a
        test per iteration, and its accumulators stay in registers as in the full tiles."""
        fn = self.fn
        self.exprs.forget()
        lim = self.exprs.wide(limit)
        if offset is not None:
            lim = fn.binop("sub", lim, self.exprs.wide(offset))
        self.exprs.forget()
        short = fn.cmp("icmp slt", lim, _Val(str(s.extent), "i64"))
        end = fn.select(short, lim, _Val(str(s.extent), "i64"))
        some = fn.cmp("icmp sgt", end, _Val("0", "i64"))
        run, done = fn.label("tail"), fn.label("endtail")
        fn.do(f"br i1 {some.ref}, label %{run}, label %{done}")
        fn.block(run)
        self.loop(s.var, "0", end.ref, body)
        fn.br(done)
        fn.block(done)


def _trip_bound(s: L.For) -> tuple[E.Expr | None, E.Expr, L.Stmt] | None:
    """``(offset, limit, body)`` when the loop's whole body is ``if offset + v < limit and rest:
    inner`` (``offset`` and ``limit`` free of the loop variable ``v``); ``body`` is the guarded
    statement with the other conditions kept. None otherwise."""
    b = s.body
    if not (isinstance(b, L.IfThenElse) and b.else_case is None):
        return None
    v = s.var

    def free_of_v(e: E.Expr) -> bool:
        return all(x is not v for x in EA.free_vars(e))

    parts = EA.conjuncts(b.cond)
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
        rest = EA.conjunction(parts[:k] + parts[k + 1:])
        body: L.Stmt = b.then_case if rest is None else L.IfThenElse(rest, b.then_case)
        return offset, a.b, body
    return None


def written_buffers(func: L.PrimFunc) -> set[int]:
    """uids of the buffers that ``func`` stores to."""
    return {s.buffer.uid for s in L.walk(func.body) if isinstance(s, L.Store)}
