"""Casts between DSL dtypes. Float -> integer is never poison, as LLVM's plain ``fptosi`` is out
of range: it truncates toward zero and saturates (nan -> 0), 8-bit targets go through i32 and
wrap as numpy's ``astype`` does on x86; -> bool is ``!= 0``."""
from __future__ import annotations

from compute import dtype as dt

from .. import intrinsics as I
from .emitter import Emitter
from .values import _SCALAR_TY, _Val


def cast(fn: Emitter, v: _Val, src: str, dst: str) -> _Val:
    """``v`` (of dtype ``src``, already emitted into ``fn``) converted to ``dst``."""
    if src == dst:
        return v
    st = _SCALAR_TY[dst]
    if dst == "bool":
        if dt.is_float(src):
            return fn.cmp("fcmp une", v, _Val(I.float_literal(0.0, src), v.st))
        return fn.cmp("icmp ne", v, _Val("0", v.st))
    if src == "bool":
        if dt.is_float(dst):
            return fn.conv("uitofp", v, st)
        return fn.conv("zext", v, st)
    if dt.is_float(src) and dt.is_float(dst):
        return fn.conv("fpext" if dst == "float64" else "fptrunc", v, st)
    if dt.is_float(src):
        # Truncate toward zero. The saturating form is never poison (nan -> 0, out of range
        # clamps); 8-bit targets go through i32 and wrap, as numpy's astype does on x86.
        wide_st = "i64" if dst == "int64" else "i32"
        sfx = f"{I.intrinsic_suffix(wide_st, v.lanes)}.{I.intrinsic_suffix(v.st, v.lanes)}"
        r = fn.ins(f"call {I.vec_type(wide_st, v.lanes)} @llvm.fptosi.sat.{sfx}({v.ty} {v.ref})")
        w = _Val(r, wide_st, v.lanes)
        return w if wide_st == st else fn.conv("trunc", w, st)
    if dt.is_float(dst):
        return fn.conv("uitofp" if src == "uint8" else "sitofp", v, st)
    sb, db = dt.bits(src), dt.bits(dst)
    if sb == db:
        return v
    if db < sb:
        return fn.conv("trunc", v, st)
    return fn.conv("zext" if src == "uint8" else "sext", v, st)
