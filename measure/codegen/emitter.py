"""The state of one LLVM function being emitted and its instruction-level helpers.

``Emitter`` holds what every part of the emission of one function shares (the instruction list,
the fresh-name counter, the current block, loop variables and buffer pointers in scope, the
vector context) and writes single instructions. The concepts that emit through it (index
analysis, expressions, arithmetic, memory access, loops, statements, vectorisation, parallel
outlining) are separate objects, each handed this emitter and the other collaborators it needs
(``function`` wires them); none derives from it.
"""
from __future__ import annotations

from compute import dtype as dt
from compute import expr as E
from compute import loop_ir as L

from .. import intrinsics as I
from .module import _Module
from .values import _SCALAR_TY, _Val, _VecCtx


class Emitter:
    """Function state and single-instruction emission (SSA names, blocks, typed operations)."""

    def __init__(self, mod: _Module, in_parallel: bool):
        self.mod = mod
        self.in_parallel = in_parallel
        self.entry: list[str] = []  # allocas and heap allocations, hoisted to the entry block
        self.exit: list[str] = []  # frees, run before the single `ret`
        self.lines: list[str | None] = []
        self.cur = "entry"
        self._n = 0
        self.env: dict[int, tuple[E.Var, str]] = {}  # loop var -> i64 ref
        self.buffers: dict[int, tuple[L.Buffer, str]] = {}  # buffer uid -> ptr ref
        self.vec: _VecCtx | None = None  # set while a vectorized loop body is emitted

    def fresh(self, hint: str = "t") -> str:
        self._n += 1
        return f"%{hint}{self._n}"

    def label(self, hint: str) -> str:
        self._n += 1
        return f"{hint}{self._n}"

    def ins(self, text: str, hint: str = "t") -> str:
        name = self.fresh(hint)
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def br(self, target_label: str) -> None:
        self.do(f"br label %{target_label}")

    def block(self, lbl: str) -> None:
        self.lines.append(f"{lbl}:")
        self.cur = lbl

    def finish(self, header: str) -> str:
        body = [ln for ln in self.lines if ln is not None]
        return "\n".join([header, "entry:"] + self.entry + body + self.exit + ["  ret void", "}", ""])

    def splat(self, v: _Val, lanes: int | None) -> _Val:
        if lanes is None or v.lanes == lanes:
            return v
        assert v.lanes is None, "lane count mismatch"
        if not v.ref.startswith("%"):  # constants splat for free
            return _Val(f"splat ({v.st} {v.ref})", v.st, lanes)
        one = self.ins(f"insertelement <1 x {v.st}> poison, {v.st} {v.ref}, i64 0")
        r = self.ins(f"shufflevector <1 x {v.st}> {one}, <1 x {v.st}> poison, <{lanes} x i32> zeroinitializer")
        return _Val(r, v.st, lanes)

    def unify(self, *vals: _Val) -> list[_Val]:
        lanes = next((v.lanes for v in vals if v.lanes), None)
        return [self.splat(v, lanes) for v in vals]

    def binop(self, op: str, a: _Val, b: _Val, st: str | None = None) -> _Val:
        a, b = self.unify(a, b)
        r = self.ins(f"{op} {a.ty} {a.ref}, {b.ref}")
        return _Val(r, st or a.st, a.lanes)

    def cmp(self, op: str, a: _Val, b: _Val) -> _Val:
        return self.binop(op, a, b, "i1")

    def select(self, c: _Val, a: _Val, b: _Val) -> _Val:
        lanes = c.lanes or a.lanes or b.lanes
        a, b = self.splat(a, lanes), self.splat(b, lanes)
        r = self.ins(f"select {c.ty} {c.ref}, {a.ty} {a.ref}, {b.ty} {b.ref}")
        return _Val(r, a.st, a.lanes)

    def conv(self, op: str, v: _Val, st: str) -> _Val:
        r = self.ins(f"{op} {v.ty} {v.ref} to {I.vec_type(st, v.lanes)}")
        return _Val(r, st, v.lanes)

    def intr(self, name: str, args: list[_Val], flags: str = "", extra: str = "") -> _Val:
        args = self.unify(*args)
        a0 = args[0]
        sfx = I.intrinsic_suffix(a0.st, a0.lanes)
        arg_s = ", ".join(f"{a.ty} {a.ref}" for a in args) + extra
        r = self.ins(f"call {flags + ' ' if flags else ''}{a0.ty} @llvm.{name}.{sfx}({arg_s})")
        return _Val(r, a0.st, a0.lanes)

    def const(self, value: object, dtype: str) -> _Val:
        st = _SCALAR_TY[dtype]
        if dt.is_float(dtype):
            return _Val(I.float_literal(float(value), dtype), st)  # type: ignore[arg-type]
        if dtype == "bool":
            return _Val("true" if value else "false", "i1")
        iv = int(value)  # type: ignore[call-overload]
        if st == "i8" and iv > 127:  # uint8 constants: same bits, written as the signed i8
            iv -= 256
        return _Val(str(iv), st)
