"""Memory access: buffer addresses, loads and stores as scalar, vector, masked or gather/scatter
operations, chosen by how the address depends on the lane (index analysis).

Addresses are index expressions, and an index may itself load (``A[B[i]]``): the expression
emitter calls ``load`` and hands it its own ``wide`` to emit the indices, so this module needs
no expression emitter of its own (no cycle between the two objects)."""
from __future__ import annotations

from typing import Callable

from compute import dtype as dt
from compute import expr as E
from compute import expr_analysis as EA
from compute import loop_ir as L

from .. import intrinsics as I
from .affine import IndexAnalysis
from .emitter import Emitter
from .values import _Val, _mem_ty

# Emits an integer index expression as i64 (the expression emitter's ``wide``).
Wide = Callable[[E.Expr], _Val]


class MemoryAccess:
    """Loads and stores in ``fn``'s current (vector, masked) context."""

    def __init__(self, fn: Emitter, index: IndexAnalysis):
        self.fn = fn
        self.index = index

    def _ptr(self, buf: L.Buffer) -> str:
        hit = self.fn.buffers.get(buf.uid)
        if hit is None:
            raise ValueError(f"buffer {buf.name} is accessed outside its Allocate scope and is not "
                             "a parameter of the function")
        return hit[1]

    def _flatten(self, buf: L.Buffer, indices: tuple[E.Expr, ...], wide: Wide) -> _Val:
        """Row-major element offset (i64; a vector if an index depends on the lane)."""
        fn = self.fn
        off: _Val | None = None
        for idx, stride in zip(indices, buf.strides):
            if isinstance(idx, E.Const) and idx.value == 0:
                continue
            term = wide(idx)
            if term.ref == "0":
                continue
            if stride != 1:
                term = fn.binop("mul nsw", term, _Val(str(stride), "i64"))
            off = term if off is None else fn.binop("add nsw", off, term)
        return off if off is not None else _Val("0", "i64")

    def _access(self, buf: L.Buffer, indices: tuple[E.Expr, ...], wide: Wide):
        """(kind, ptr) for an access in the current context. kind: 'scalar' (uniform address),
        ('strided', c) with ptr the first lane's address, or 'gather' with a vector of pointers."""
        fn, vec = self.fn, self.fn.vec
        elem = _mem_ty(buf.dtype)
        base = self._ptr(buf)
        # Under a mask some lanes' addresses may be out of bounds: no `inbounds` (it would make
        # them poison), the masked intrinsic simply never touches those lanes.
        ib = "inbounds " if vec is None or vec.mask is None else ""
        if vec is None or not any(self.index.varies(i) for i in indices):
            off = self._flatten(buf, indices, wide)
            return "scalar", fn.ins(f"getelementptr {ib}{elem}, ptr {base}, i64 {off.ref}")
        coeffs = [self.index.lin(i) for i in indices]
        if all(c is not None for c in coeffs):
            c = sum(k * s for k, s in zip(coeffs, buf.strides))  # type: ignore[misc]
            sub = {vec.var: vec.base_var}
            first = tuple(EA.substitute(i, sub) for i in indices)
            fn.vec = None  # the first lane's address is a scalar computation
            try:
                off = self._flatten(buf, first, wide)
            finally:
                fn.vec = vec
            p = fn.ins(f"getelementptr {ib}{elem}, ptr {base}, i64 {off.ref}")
            if c == 0:
                return "scalar", p
            return ("strided", c), p
        n = vec.lanes
        off = fn.splat(self._flatten(buf, indices, wide), n)
        ptrs = fn.ins(f"getelementptr {ib}{elem}, ptr {base}, <{n} x i64> {off.ref}")
        return "gather", ptrs

    def _lane_ptrs(self, p: str, elem: str, stride: int, n: int) -> str:
        offs = "<" + ", ".join(f"i64 {stride * k}" for k in range(n)) + ">"
        vec = self.fn.vec
        ib = "inbounds " if vec is None or vec.mask is None else ""
        return self.fn.ins(f"getelementptr {ib}{elem}, ptr {p}, <{n} x i64> {offs}")

    def load(self, e: L.BufferLoad, wide: Wide) -> _Val:
        """The value ``e`` reads, its indices emitted by ``wide``; under a lane mask only the
        active lanes touch memory."""
        fn, vec = self.fn, self.fn.vec
        buf = e.buffer
        elem = _mem_ty(buf.dtype)
        align = dt.nbytes(buf.dtype)
        kind, p = self._access(buf, e.indices, wide)
        mask = vec.mask if vec else None
        if kind == "scalar" and mask is None:
            r = _Val(fn.ins(f"load {elem}, ptr {p}, align {align}"), elem)
        else:
            assert vec is not None
            n = vec.lanes
            vt = f"<{n} x {elem}>"
            sfx = I.intrinsic_suffix(elem, n)
            m = mask or "splat (i1 true)"
            if kind == "scalar":
                # A uniform address that only some lanes read: it is in bounds iff any lane is
                # active, so load it once under that single-bit mask.
                anyl = fn.ins(f"call i1 @llvm.vector.reduce.or.v{n}i1(<{n} x i1> {m})")
                m1 = fn.ins(f"insertelement <1 x i1> poison, i1 {anyl}, i64 0")
                one = fn.ins(f"call <1 x {elem}> @llvm.masked.load.v1{I.intrinsic_suffix(elem, None)}.p0("
                               f"ptr align {align} {p}, <1 x i1> {m1}, <1 x {elem}> zeroinitializer)")
                r = _Val(fn.ins(f"extractelement <1 x {elem}> {one}, i64 0"), elem)
            elif kind == "gather":
                r = _Val(fn.ins(f"call {vt} @llvm.masked.gather.{sfx}.v{n}p0(<{n} x ptr> align {align} {p}, "
                                  f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
            elif kind[1] == 1:
                if mask is None:
                    r = _Val(fn.ins(f"load {vt}, ptr {p}, align {align}"), elem, n)
                else:
                    r = _Val(fn.ins(f"call {vt} @llvm.masked.load.{sfx}.p0(ptr align {align} {p}, "
                                      f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
            else:
                ptrs = self._lane_ptrs(p, elem, kind[1], n)
                r = _Val(fn.ins(f"call {vt} @llvm.masked.gather.{sfx}.v{n}p0(<{n} x ptr> align {align} {ptrs}, "
                                  f"<{n} x i1> {m}, {vt} zeroinitializer)"), elem, n)
        if buf.dtype == "bool":
            return fn.cmp("icmp ne", r, _Val("0", "i8"))
        return r

    def store(self, s: L.Store, v: _Val, wide: Wide) -> None:
        """Write ``v`` (the emitted value of ``s``) where ``s`` stores, its indices emitted by
        ``wide``; under a lane mask only the active lanes are written."""
        fn, vec = self.fn, self.fn.vec
        buf = s.buffer
        elem = _mem_ty(buf.dtype)
        align = dt.nbytes(buf.dtype)
        if buf.dtype == "bool":
            v = fn.conv("zext", v, "i8")
        kind, p = self._access(buf, s.indices, wide)
        if kind == "scalar":
            assert v.lanes is None, "a lane-invariant store must not reach vector emission"
            fn.do(f"store {elem} {v.ref}, ptr {p}, align {align}")
            return
        assert vec is not None and kind != "gather"
        n = vec.lanes
        v = fn.splat(v, n)
        mask = vec.mask
        if kind[1] == 1 and mask is None:
            fn.do(f"store {v.ty} {v.ref}, ptr {p}, align {align}")
        elif kind[1] == 1:
            fn.do(f"call void @llvm.masked.store.{I.intrinsic_suffix(elem, n)}.p0({v.ty} {v.ref}, "
                    f"ptr align {align} {p}, <{n} x i1> {mask})")
        else:
            ptrs = self._lane_ptrs(p, elem, kind[1], n)
            fn.do(f"call void @llvm.masked.scatter.{I.intrinsic_suffix(elem, n)}.v{n}p0({v.ty} {v.ref}, "
                    f"<{n} x ptr> align {align} {ptrs}, <{n} x i1> {mask or 'splat (i1 true)'})")
