"""Memory access: buffer addresses, loads and stores as scalar, vector, masked or gather/scatter
operations, and selects whose arms load (run under a lane mask or real control flow, so an
untaken arm's out-of-bounds load never executes)."""
from __future__ import annotations

from compute import dtype as dt
from compute import expr as E
from compute import loop_ir as L

from .. import intrinsics as I
from .emitter import Emitter
from .values import _Val, _mem_ty


def reduction_update(s: L.Store) -> E.Expr | None:
    """The combining operation of a float reduction update ``buf[i] = buf[i] (+|max|min) x``
    (possibly under ``select(where, update, buf[i])``), or None."""
    if not dt.is_float(s.buffer.dtype):
        return None
    e = s.value
    if isinstance(e, E.Select):
        e = e.true_value
    if not (isinstance(e, E.Binary) and e.op in ("add", "max", "min")):
        return None
    acc = e.a
    if isinstance(acc, L.BufferLoad) and acc.buffer is s.buffer and len(acc.indices) == len(
            s.indices) and all(x is y for x, y in zip(acc.indices, s.indices)):
        return e
    return None


class MemoryAccess(Emitter):
    """Loads, stores and lane-masked selects in the current context."""

    def _select(self, e: E.Select) -> _Val:
        c = self.value(e.cond)
        risky = self._contains_load(e.true_value) or self._contains_load(e.false_value)
        if not risky:
            return self.select(c, self.value(e.true_value), self.value(e.false_value))
        if c.lanes is None:
            return self._select_branch(c, e.true_value, e.false_value)
        # Lane-dependent choice: each side's loads run only on the lanes that pick it.
        assert self.vec is not None
        outer = self.vec.mask
        not_c = self.binop("xor", c, _Val("true", "i1"))
        t_mask = c if outer is None else self.binop("and", c, _Val(outer, "i1", c.lanes))
        f_mask = not_c if outer is None else self.binop("and", not_c, _Val(outer, "i1", c.lanes))
        self.vec.mask = t_mask.ref
        t = self.value(e.true_value)
        self.vec.mask = f_mask.ref
        f = self.value(e.false_value)
        self.vec.mask = outer
        return self.select(c, t, f)

    def _select_branch(self, c: _Val, te: E.Expr, fe: E.Expr) -> _Val:
        """Scalar condition with loads on a side: real control flow, so the untaken side's
        (possibly out-of-bounds) loads never execute."""
        lt, lf, lm = self.label("sel_t"), self.label("sel_f"), self.label("sel_m")
        self.do(f"br i1 {c.ref}, label %{lt}, label %{lf}")
        saved = dict(self.memo)
        self.block(lt)
        # In vector code both arms are made vectors: the phi needs one type.
        lanes = self.vec.lanes if self.vec else None
        t = self.splat(self.value(te), lanes)
        t_end = self.cur
        self.br(lm)
        self.memo = dict(saved)
        self.block(lf)
        f = self.splat(self.value(fe), lanes)
        f_end = self.cur
        self.br(lm)
        self.memo = saved
        self.block(lm)
        r = self.ins(f"phi {t.ty} [ {t.ref}, %{t_end} ], [ {f.ref}, %{f_end} ]")
        return _Val(r, t.st, t.lanes)

    def _ptr(self, buf: L.Buffer) -> str:
        hit = self.buffers.get(buf.uid)
        if hit is None:
            raise ValueError(f"buffer {buf.name} is accessed outside its Allocate scope and is not "
                             "a parameter of the function")
        return hit[1]

    def _flatten(self, buf: L.Buffer, indices: tuple[E.Expr, ...]) -> _Val:
        """Row-major element offset (i64; a vector if an index depends on the lane)."""
        off: _Val | None = None
        for idx, stride in zip(indices, buf.strides):
            if isinstance(idx, E.Const) and idx.value == 0:
                continue
            term = self.wide(idx)
            if term.ref == "0":
                continue
            if stride != 1:
                term = self.binop("mul nsw", term, _Val(str(stride), "i64"))
            off = term if off is None else self.binop("add nsw", off, term)
        return off if off is not None else _Val("0", "i64")

    def _access(self, buf: L.Buffer, indices: tuple[E.Expr, ...]):
        """(kind, ptr) for an access in the current context. kind: 'scalar' (uniform address),
        ('strided', c) with ptr the first lane's address, or 'gather' with a vector of pointers."""
        elem = _mem_ty(buf.dtype)
        base = self._ptr(buf)
        # Under a mask some lanes' addresses may be out of bounds: no `inbounds` (it would make
        # them poison), the masked intrinsic simply never touches those lanes.
        ib = "inbounds " if self.vec is None or self.vec.mask is None else ""
        if self.vec is None or not any(self._varies(i) for i in indices):
            off = self._flatten(buf, indices)
            return "scalar", self.ins(f"getelementptr {ib}{elem}, ptr {base}, i64 {off.ref}")
        coeffs = [self._lin(i) for i in indices]
        if all(c is not None for c in coeffs):
            c = sum(k * s for k, s in zip(coeffs, buf.strides))  # type: ignore[misc]
            sub = {self.vec.var: self.vec.base_var}
            first = tuple(E.substitute(i, sub) for i in indices)
            saved, self.vec = self.vec, None  # the first lane's address is a scalar computation
            try:
                off = self._flatten(buf, first)
            finally:
                self.vec = saved
            p = self.ins(f"getelementptr {ib}{elem}, ptr {base}, i64 {off.ref}")
            if c == 0:
                return "scalar", p
            return ("strided", c), p
        n = self.vec.lanes
        off = self.splat(self._flatten(buf, indices), n)
        ptrs = self.ins(f"getelementptr {ib}{elem}, ptr {base}, <{n} x i64> {off.ref}")
        return "gather", ptrs

    def _lane_ptrs(self, p: str, elem: str, stride: int, n: int) -> str:
        offs = "<" + ", ".join(f"i64 {stride * k}" for k in range(n)) + ">"
        ib = "inbounds " if self.vec is None or self.vec.mask is None else ""
        return self.ins(f"getelementptr {ib}{elem}, ptr {p}, <{n} x i64> {offs}")

    def _load(self, e: L.BufferLoad) -> _Val:
        buf = e.buffer
        elem = _mem_ty(buf.dtype)
        align = dt.nbytes(buf.dtype)
        kind, p = self._access(buf, e.indices)
        mask = self.vec.mask if self.vec else None
        if kind == "scalar" and mask is None:
            r = _Val(self.ins(f"load {elem}, ptr {p}, align {align}"), elem)
        else:
            assert self.vec is not None
            n = self.vec.lanes
            vt = f"<{n} x {elem}>"
            sfx = I.intrinsic_suffix(elem, n)
            m = mask or f"splat (i1 true)"
            if kind == "scalar":
                # A uniform address that only some lanes read: it is in bounds iff any lane is
                # active, so load it once under that single-bit mask.
                anyl = self.ins(f"call i1 @llvm.vector.reduce.or.v{n}i1(<{n} x i1> {m})")
                m1 = self.ins(f"insertelement <1 x i1> poison, i1 {anyl}, i64 0")
                one = self.ins(f"call <1 x {elem}> @llvm.masked.load.v1{I.intrinsic_suffix(elem, None)}.p0("
                               f"ptr align {align} {p}, <1 x i1> {m1}, <1 x {elem}> zeroinitializer)")
                r = _Val(self.ins(f"extractelement <1 x {elem}> {one}, i64 0"), elem)
            elif kind == "gather":
                r = _Val(self.ins(f"call {vt} @llvm.masked.gather.{sfx}.v{n}p0(<{n} x ptr> align {align} {p}, "
                                  f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
            elif kind[1] == 1:
                if mask is None:
                    r = _Val(self.ins(f"load {vt}, ptr {p}, align {align}"), elem, n)
                else:
                    r = _Val(self.ins(f"call {vt} @llvm.masked.load.{sfx}.p0(ptr align {align} {p}, "
                                      f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
            else:
                ptrs = self._lane_ptrs(p, elem, kind[1], n)
                r = _Val(self.ins(f"call {vt} @llvm.masked.gather.{sfx}.v{n}p0(<{n} x ptr> align {align} {ptrs}, "
                                  f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
        if buf.dtype == "bool":
            return self.cmp("icmp ne", r, _Val("0", "i8"))
        return r

    def _store(self, s: L.Store) -> None:
        buf = s.buffer
        elem = _mem_ty(buf.dtype)
        align = dt.nbytes(buf.dtype)
        self._reduce_update = reduction_update(s)
        try:
            v = self.value(s.value)
        finally:
            self._reduce_update = None
        if buf.dtype == "bool":
            v = self.conv("zext", v, "i8")
        kind, p = self._access(buf, s.indices)
        if kind == "scalar":
            assert v.lanes is None, "a lane-invariant store must not reach vector emission"
            self.do(f"store {elem} {v.ref}, ptr {p}, align {align}")
            return
        assert self.vec is not None and kind != "gather"
        n = self.vec.lanes
        v = self.splat(v, n)
        mask = self.vec.mask
        if kind[1] == 1 and mask is None:
            self.do(f"store {v.ty} {v.ref}, ptr {p}, align {align}")
        elif kind[1] == 1:
            self.do(f"call void @llvm.masked.store.{I.intrinsic_suffix(elem, n)}.p0({v.ty} {v.ref}, "
                    f"ptr align {align} {p}, <{n} x i1> {mask})")
        else:
            ptrs = self._lane_ptrs(p, elem, kind[1], n)
            self.do(f"call void @llvm.masked.scatter.{I.intrinsic_suffix(elem, n)}.v{n}p0({v.ty} {v.ref}, "
                    f"<{n} x ptr> align {align} {ptrs}, <{n} x i1> {mask or 'splat (i1 true)'})")
