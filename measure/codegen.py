"""Loop IR -> textual LLVM IR for the host CPU.

``codegen(func)`` returns a module with one external function
``void @<name>(ptr noalias nocapture %arg0, ...)`` taking the parameter buffers in order. Text is
emitted directly (no llvmlite.ir objects): it is fast and gives full control over vector types,
fast-math flags and loop metadata.

Design, in short:

- Addresses are computed in i64. Integer index expressions built only from loop variables,
  constants and + - * // % min max (and int32/int64 casts) are evaluated in i64 with ``nsw``
  wherever they feed an address or a comparison: the lowering guarantees every access is in
  bounds, so no intermediate overflows, and i64 arithmetic lets SCEV and the vectoriser reason
  about strides. Stored integer values keep their exact (wrapping) dtype semantics.
- ``vectorized`` loops become straight-line SIMD over ``<lanes x T>`` vectors of the loop's
  exact extent (chunks of 64 lanes above 64; the backend legalises odd widths). Per access the
  coefficient of the lane variable in the flattened offset picks the instruction: 1 -> vector
  load/store, 0 -> scalar load + splat, other constants or non-affine offsets -> gather
  (scatter for stores). A lane-dependent ``select`` whose branches load runs those loads under a
  mask (masked load / gather), which makes the padding pattern ``select(i >= 1, A[i-1], 0)``
  safe; a lane-dependent ``if`` (the tail guard of a non-divisible split) runs both sides with
  masked loads and stores. Bodies that cannot be vectorised this way without changing the
  sequential semantics (nested loops, allocations, a store not injective in the lane, or a
  buffer both written and accessed at a different element) become a plain scalar loop:
  correctness first; LLVM's O3 loop vectoriser still gets its chance.
- ``unrolled`` loops carry ``llvm.loop.unroll.full``; ``serial`` ones are plain counted loops.
- ``parallel`` loops are outlined into an internal function taking every live buffer pointer
  (``noalias``) and loop-variable value plus ``[begin, end)``; a trampoline unpacks a closure,
  picks its static chunk from ``omp_get_thread_num``/``omp_get_num_threads`` and calls it; the
  caller runs ``GOMP_parallel(tramp, closure, @__ansor_num_threads, 0)``.
- ``Allocate``: buffers up to 64 KiB become entry-block allocas of the enclosing function (so
  SROA/mem2reg can keep small accumulators in registers, and each parallel worker gets its own);
  larger ones are ``aligned_alloc``'d at function entry and freed at the exit (a padded conv
  input of ~1 MB would overflow a worker thread's stack).
- Float ``fadd``/``fsub``/``fmul`` carry ``contract`` so multiply-add becomes FMA. The one other
  fast-math flag is ``reassoc`` on the combining operation of a reduction update
  (``acc[i] = acc[i] + x``): the order of a sum is unspecified (numpy itself sums pairwise), and
  without it LLVM must keep a reduction over the innermost loop as one scalar chain, bound by
  the add latency (layer_norm's row sums ran 9x slower than PyTorch's). Everything else is exact.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from compute import dtype as dt
from compute import expr as E
from compute import loop_ir as L

from . import intrinsics as I
from . import target

ALLOCA_LIMIT_BYTES = 64 * 1024
# Full unrolling beyond this many copies of the loop body's statements buys nothing and can make
# LLVM take seconds (a 9 x 209 unrolled nest took 11 s); such loops stay loops.
MAX_UNROLLED_COPIES = 512
FALLBACK_MARK = "vectorized loop emitted as scalar fallback:"
SERIAL_LOOP_COPIES = 16  # what a kept loop weighs: LLVM makes vector, remainder and check copies
MAX_VECTOR_LANES = 64
NUM_THREADS_GLOBAL = "__ansor_num_threads"

_SCALAR_TY = {"float32": "float", "float64": "double", "int8": "i8", "uint8": "i8", "int32": "i32",
              "int64": "i64", "bool": "i1"}
_INDEX_DTYPES = ("int32", "int64")


def _mem_ty(dtype: str) -> str:
    return "i8" if dtype == "bool" else _SCALAR_TY[dtype]


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


def sanitize(name: str) -> str:
    """An LLVM identifier made of [A-Za-z0-9_.] that does not start with a digit.

    Names come from users and from record files (untrusted): nothing of a name reaches the IR text
    except through this function, so no name can end a comment, a string or an identifier."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "_"
    return "_" + s if s[0].isdigit() else s


# Value and label names carry a loop's name only as a readable hint; the counter makes them unique.
MAX_HINT_LEN = 32
MAX_SYMBOL_LEN = 64
# Symbols the module itself declares or defines, and C library functions LLVM may emit calls to
# (memset for a zeroing loop, libm for math): a kernel named like one of them would clash with
# that declaration or be called in its place.
_RESERVED_SYMBOLS = frozenset({
    NUM_THREADS_GLOBAL, "aligned_alloc", "free", "malloc", "calloc", "realloc", "posix_memalign",
    "memset", "memcpy", "memmove", "memcmp", "bcmp", "bzero", "abort", "exit", "system",
    "GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads",
    *(f + sfx for f in ("exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "pow",
                        "sqrt", "cbrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
                        "acos", "atan", "atan2", "erf", "erfc", "floor", "ceil", "trunc",
                        "round", "rint", "nearbyint", "fabs", "fma", "fmin", "fmax", "fmod",
                        "ldexp", "frexp", "copysign", "sincos")
      for sfx in ("", "f", "l")),
})
_RESERVED_PREFIXES = ("llvm.", "__", "GOMP_", "omp_", "kmp_")


def _hint(name: str, limit: int = MAX_HINT_LEN) -> str:
    """A short sanitised form of a user name, for value and label names and comments."""
    return sanitize(name)[:limit]


def kernel_symbol(name: str) -> str:
    """The kernel function's symbol for a user-given name: sanitised, bounded, and never one of
    the symbols the module or the C runtime already use."""
    s = sanitize(name)[:MAX_SYMBOL_LEN]
    if s in _RESERVED_SYMBOLS or s.startswith(_RESERVED_PREFIXES):
        s = "kernel_" + s
    return s


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass
class _Val:
    """An SSA value or constant literal: ``ref`` of scalar type ``st``, ``lanes`` None = scalar."""

    ref: str
    st: str
    lanes: int | None = None

    @property
    def ty(self) -> str:
        return I.vec_type(self.st, self.lanes)


@dataclass
class _VecCtx:
    var: E.Var  # the lane variable
    lanes: int
    base_var: E.Var  # stands for the first lane's value in uniform (scalar) expressions
    whole: bool  # the lanes are the whole loop (the first lane is 0), not one chunk of it
    mask: str | None = None  # <lanes x i1> of active lanes inside a masked select branch


class _Module:
    def __init__(self, name: str):
        self.name = name
        self.triple = target.host_triple()
        self.datalayout = target.data_layout()
        self.attr_group = "#0"
        self.attrs = (f'nounwind "target-cpu"="{target.host_cpu_name()}" '
                      f'"target-features"="{target.host_cpu_features()}"')
        self.math = I.MathLibrary(self.attr_group)
        self.functions: list[str] = []
        self.decls: dict[str, str] = {}
        self.metadata: list[str] = []
        self._md = 0
        self._par = 0

    def declare(self, sym: str, text: str) -> None:
        self.decls.setdefault(sym, text)

    def loop_md(self, *props: str) -> str:
        """A distinct loop-id node carrying ``props`` (e.g. '!"llvm.loop.unroll.full"')."""
        ids = []
        for p in props:
            self._md += 1
            self.metadata.append(f"!{self._md} = !{{{p}}}")
            ids.append(f"!{self._md}")
        self._md += 1
        me = f"!{self._md}"
        self.metadata.append(f"{me} = distinct !{{{me}{''.join(', ' + i for i in ids)}}}")
        return me

    def next_parallel_id(self) -> int:
        self._par += 1
        return self._par

    def text(self) -> str:
        out = [f"; ModuleID = '{self.name}'",
               f'target datalayout = "{self.datalayout}"',
               f'target triple = "{self.triple}"', "",
               f"@{NUM_THREADS_GLOBAL} = global i32 0, align 4", ""]
        out += list(self.decls.values())
        out.append("")
        out += self.functions
        out.append(self.math.definitions())
        out.append(f"attributes {self.attr_group} = {{ {self.attrs} }}")
        out += self.metadata
        return "\n".join(out) + "\n"


class _Function:
    """Emits one LLVM function: the kernel itself or an outlined parallel body."""

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
        self.vec: _VecCtx | None = None
        self.memo: dict[tuple, tuple[E.Expr, _Val]] = {}
        self._reduce_update: E.Expr | None = None  # the combining op of the store being emitted
        self._varies_memo: dict[int, tuple[E.Expr, bool]] = {}
        self._load_memo: dict[int, tuple[E.Expr, bool]] = {}
        self._index_memo: dict[int, tuple[E.Expr, bool]] = {}

    # ---- low-level emission ---------------------------------------------------------------
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

    # ---- value helpers ---------------------------------------------------------------------
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

    # ---- expression analyses -----------------------------------------------------------------
    # Each analysis is a fold (``_fold``): iterative, so expressions of any depth are fine.
    def _contains_load(self, e: E.Expr) -> bool:
        return _fold(self._load_memo, e, _children,
                     lambda n, ks: isinstance(n, L.BufferLoad) or any(ks))

    def _varies(self, e: E.Expr) -> bool:
        """Whether ``e`` depends on the current lane variable."""
        if self.vec is None:
            return False
        var = self.vec.var
        return _fold(self._varies_memo, e, _children, lambda n, ks: n is var or any(ks))

    def _is_index(self, e: E.Expr) -> bool:
        """Integer arithmetic over loop variables and constants only (safe to widen to i64)."""
        def operands(n: E.Expr) -> tuple:
            if n.dtype not in _INDEX_DTYPES:
                return ()
            if isinstance(n, E.Binary):
                return (n.a, n.b)
            return (n.value,) if isinstance(n, E.Cast) else ()

        def node(n: E.Expr, ks: list) -> bool:
            if n.dtype not in _INDEX_DTYPES:
                return False
            if isinstance(n, (E.Var, E.Const)):
                return True
            return isinstance(n, (E.Binary, E.Cast)) and all(ks)

        return _fold(self._index_memo, e, operands, node)

    def _lin(self, e: E.Expr) -> int | None:
        """Coefficient of the lane variable in ``e`` if ``e`` is affine in it, else None."""
        assert self.vec is not None
        var = self.vec.var

        def operands(n: E.Expr) -> tuple:
            if n is var or not self._varies(n):
                return ()
            if isinstance(n, E.Binary):
                if n.op in ("add", "sub"):
                    return (n.a, n.b)
                if n.op == "mul" and isinstance(n.b, E.Const):
                    return (n.a,)
                if n.op == "mul" and isinstance(n.a, E.Const):
                    return (n.b,)
                return ()
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return (n.value,)
            return ()

        def node(n: E.Expr, ks: list) -> int | None:
            if not self._varies(n):
                return 0
            if n is var:
                return 1
            if isinstance(n, E.Binary):
                if n.op in ("add", "sub"):
                    a, b = ks
                    if a is None or b is None:
                        return None
                    return a + b if n.op == "add" else a - b
                if n.op == "mul" and (isinstance(n.a, E.Const) or isinstance(n.b, E.Const)):
                    c = int(n.b.value) if isinstance(n.b, E.Const) else int(n.a.value)  # type: ignore[attr-defined]
                    return None if ks[0] is None else ks[0] * c
                if n.op in ("floordiv", "floormod"):
                    return self._lin_floor(n)
                return None
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return ks[0]
            return None

        return _fold({}, e, operands, node)

    def _affine(self, e: E.Expr) -> tuple[dict[int, int], int, bool] | None:
        """``e`` as sum(coeff * var) + const (+ unknown lane-invariant terms, flagged)."""
        def operands(n: E.Expr) -> tuple:
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return (n.value,)
            if isinstance(n, E.Binary) and n.op in ("add", "sub"):
                return (n.a, n.b)
            if isinstance(n, E.Binary) and n.op == "mul":
                if isinstance(n.a, E.Const):
                    return (n.b,)
                if isinstance(n.b, E.Const):
                    return (n.a,)
            return ()

        def node(n: E.Expr, ks: list) -> tuple[dict[int, int], int, bool] | None:
            if isinstance(n, E.Const):
                return {}, int(n.value), False
            if isinstance(n, E.Var):
                return {id(n): 1}, 0, False
            if isinstance(n, E.Cast) and n.dtype in _INDEX_DTYPES and n.value.dtype in _INDEX_DTYPES:
                return ks[0]
            if isinstance(n, E.Binary) and n.op in ("add", "sub"):
                a, b = ks
                if a is None or b is None:
                    return None
                sign = 1 if n.op == "add" else -1
                coeffs = dict(a[0])
                for k, c in b[0].items():
                    coeffs[k] = coeffs.get(k, 0) + sign * c
                return coeffs, a[1] + sign * b[1], a[2] or b[2]
            if isinstance(n, E.Binary) and n.op == "mul" and (isinstance(n.a, E.Const) or isinstance(n.b, E.Const)):
                c = int(n.a.value) if isinstance(n.a, E.Const) else int(n.b.value)  # type: ignore[union-attr]
                r = ks[0]
                if r is None:
                    return None
                return {k: v * c for k, v in r[0].items()}, r[1] * c, r[2]
            if not self._varies(n):
                return {}, 0, True
            return None

        return _fold({}, e, operands, node)

    def _lin_floor(self, e: E.Binary) -> int | None:
        """``(c*v + rest) // d`` and ``% d`` where the lanes never cross a multiple of ``d``:
        ``rest`` is always a multiple of ``g = gcd(d, its coefficients)``, so if the lanes span
        less than ``g`` the quotient is lane-invariant and the remainder advances by ``c``. This is
        the index pattern of a fused-then-split vectorized axis (``floormod(f*16 + v, 64)``)."""
        assert self.vec is not None
        d = e.b
        if not (isinstance(d, E.Const) and int(d.value) > 0 and self.vec.whole):
            return None
        aff = self._affine(e.a)
        if aff is None:
            return None
        coeffs, const, opaque = aff
        cv = coeffs.get(id(self.vec.var), 0)
        if cv < 0 or opaque:
            return None
        g = int(d.value)
        for k, c in coeffs.items():
            if k != id(self.vec.var):
                g = math.gcd(g, c)
        g = math.gcd(g, const)
        if cv * (self.vec.lanes - 1) >= g:
            return None
        return 0 if e.op == "floordiv" else cv

    # ---- expressions ---------------------------------------------------------------------------
    def value(self, e: E.Expr) -> _Val:
        """``e`` in its own dtype (vector if it depends on the lane variable)."""
        return self._emit(e, wide=False)

    def wide(self, e: E.Expr) -> _Val:
        """Integer ``e`` as i64 (index arithmetic in i64; other integers sign/zero-extended)."""
        return self._emit(e, wide=True)

    def _emit(self, e: E.Expr, wide: bool) -> _Val:
        mask = self.vec.mask if self.vec else None
        hit = self.memo.get((id(e), wide, mask))
        if hit is not None and hit[0] is e:
            return hit[1]
        # Emit the operands first, children before parents, from an explicit stack: each node's
        # own emission then finds its operands memoised, so no depth of expression recurses. The
        # order is the one plain recursion would give, so the IR is the same.
        stack = [(e, wide)]
        while stack:
            n, w = stack[-1]
            key = (id(n), w, mask)
            hit = self.memo.get(key)
            if hit is not None and hit[0] is n:
                stack.pop()
                continue
            pending = []
            for c, cw in self._operands(n, w):
                h = self.memo.get((id(c), cw, mask))
                if h is None or h[0] is not c:
                    pending.append((c, cw))
            if pending:
                stack.extend(reversed(pending))
                continue
            stack.pop()
            self.memo[key] = (n, self._emit_node(n, w))
        return self.memo[(id(e), wide, mask)][1]

    def _operands(self, e: E.Expr, wide: bool) -> list[tuple[E.Expr, bool]]:
        """What ``_emit_node(e, wide)`` will ask for, in order, as (operand, wide) pairs. Operands
        emitted under another mask or in their own blocks (a select's arms that contain loads, a
        load's addresses) are left to the node itself."""
        if wide:
            if not self._is_index(e):
                return [(e, False)]
            if isinstance(e, E.Cast):
                return [(e.value, True)]
            if isinstance(e, E.Binary):
                return [(e.a, True), (e.b, True)]
            return []
        if isinstance(e, E.Binary):
            return [(e.a, False), (e.b, False)]
        if isinstance(e, E.Compare):
            w = e.a.dtype in _INDEX_DTYPES and self._is_index(e.a) and self._is_index(e.b)
            return [(e.a, w), (e.b, w)]
        if isinstance(e, (E.Unary, E.Cast)):
            return [(e.children()[0], False)]
        if isinstance(e, E.Call):
            return [(a, False) for a in e.args]
        if isinstance(e, E.Select):
            if self._contains_load(e.true_value) or self._contains_load(e.false_value):
                return [(e.cond, False)]
            return [(e.cond, False), (e.true_value, False), (e.false_value, False)]
        return []

    def _emit_node(self, e: E.Expr, wide: bool) -> _Val:
        if wide:
            if self._is_index(e):
                return self._emit_index(e)
            v = self._emit(e, wide=False)
            if v.st != "i64":
                op = "zext" if e.dtype in ("uint8", "bool") else "sext"
                v = self.conv(op, v, "i64")
            return v
        return self._emit_value(e)

    def _var(self, v: E.Var) -> _Val:
        if self.vec is not None and v is self.vec.var:
            n = self.vec.lanes
            base = self.wide(self.vec.base_var)
            iota = "<" + ", ".join(f"i64 {k}" for k in range(n)) + ">"
            if base.ref.lstrip("-").isdigit():
                b = int(base.ref)
                return _Val("<" + ", ".join(f"i64 {b + k}" for k in range(n)) + ">", "i64", n)
            return self.binop("add nuw nsw", self.splat(base, n), _Val(iota, "i64", n))
        hit = self.env.get(id(v))
        if hit is None:
            raise ValueError(f"variable {v.name} is used outside the loop that defines it")
        return _Val(hit[1], "i64")

    def _emit_index(self, e: E.Expr) -> _Val:
        if isinstance(e, E.Var):
            return self._var(e)
        if isinstance(e, E.Const):
            return _Val(str(int(e.value)), "i64")
        if isinstance(e, E.Cast):
            return self.wide(e.value)
        assert isinstance(e, E.Binary)
        a, b = self.wide(e.a), self.wide(e.b)
        if e.op == "add":
            return self.binop("add nsw", a, b)
        if e.op == "sub":
            return self.binop("sub nsw", a, b)
        if e.op == "mul":
            return self.binop("mul nsw", a, b)
        if e.op in ("floordiv", "floormod"):
            return self._int_floor(e.op, a, b, e.b, signed=True)
        if e.op in ("min", "max"):
            return self.intr("smin" if e.op == "min" else "smax", [a, b])
        raise ValueError(f"unsupported index operator {e.op}")

    def _emit_value(self, e: E.Expr) -> _Val:
        if isinstance(e, E.Const):
            return self.const(e.value, e.dtype)
        if isinstance(e, E.Var):
            v = self._var(e)
            st = _SCALAR_TY[e.dtype]
            return v if st == "i64" else self.conv("trunc", v, st)
        if isinstance(e, L.BufferLoad):
            return self._load(e)
        if isinstance(e, E.Binary):
            return self._binary(e)
        if isinstance(e, E.Compare):
            return self._compare(e)
        if isinstance(e, E.Unary):
            a = self.value(e.a)
            if e.op == "not":
                return self.binop("xor", a, _Val("true", "i1"))
            if dt.is_float(e.dtype):
                r = self.ins(f"fneg {a.ty} {a.ref}")
                return _Val(r, a.st, a.lanes)
            return self.binop("sub", _Val("0", a.st), a)
        if isinstance(e, E.Call):
            return self._call(e)
        if isinstance(e, E.Select):
            return self._select(e)
        if isinstance(e, E.Cast):
            return self._cast(self.value(e.value), e.value.dtype, e.dtype)
        raise TypeError(f"the backend cannot compile {type(e).__name__} nodes (`{e}`); "
                        "TensorLoad and Reduce must be lowered first")

    def _binary(self, e: E.Binary) -> _Val:
        d = e.dtype
        if e.op in ("and", "or"):
            return self.binop(e.op, self.value(e.a), self.value(e.b))
        a, b = self.value(e.a), self.value(e.b)
        if dt.is_float(d):
            re_ = " reassoc" if e is self._reduce_update else ""
            if e.op in ("add", "sub", "mul"):
                return self.binop(f"f{e.op}{re_} contract", a, b)
            if e.op == "div":
                return self.binop("fdiv", a, b)
            if e.op in ("min", "max"):
                # NaN-propagating like np.minimum/np.maximum; the sign of a zero result is free.
                return self.intr("minimum" if e.op == "min" else "maximum", [a, b],
                                 flags="nsz" + re_)
            return self._float_floor(e.op, a, b)
        signed = dt.is_signed(d)
        if e.op in ("add", "sub", "mul"):
            return self.binop(e.op, a, b)  # wraps: no nsw/nuw
        if e.op in ("min", "max"):
            name = ("s" if signed else "u") + e.op
            return self.intr(name, [a, b])
        if e.op in ("floordiv", "floormod"):
            return self._int_floor(e.op, a, b, e.b, signed)
        raise ValueError(f"operator {e.op} is not defined on {d}")

    def _int_floor(self, op: str, a: _Val, b: _Val, b_expr: E.Expr, signed: bool) -> _Val:
        """Floor division / modulo. Division by zero gives 0 (as numpy) instead of trapping, and
        INT_MIN // -1 wraps instead of trapping."""
        st = a.st
        zero = _Val("0", st)
        if isinstance(b_expr, E.Const):
            c = int(b_expr.value)
            if c == 0:
                return self.splat(zero, a.lanes)
            if not signed:
                return self.binop("udiv" if op == "floordiv" else "urem", a, b)
            if c == -1:
                return self.binop("sub", zero, a) if op == "floordiv" else self.splat(zero, a.lanes)
            if _is_pow2(c):
                k = c.bit_length() - 1
                if op == "floordiv":
                    return self.binop("ashr", a, _Val(str(k), st))
                return self.binop("and", a, _Val(str(c - 1), st))
            q = self.binop("sdiv", a, b)
            r = self.binop("srem", a, b)
            fix = self.cmp("icmp slt" if c > 0 else "icmp sgt", r, zero)
            if op == "floordiv":
                return self.binop("sub", q, self.conv("zext", fix, st))
            return self.select(fix, self.binop("add", r, b), r)
        if not signed:
            dz = self.cmp("icmp eq", b, zero)
            safe = self.select(dz, _Val("1", st), b)
            r = self.binop("udiv" if op == "floordiv" else "urem", a, safe)
            return self.select(dz, zero, r)
        dz = self.cmp("icmp eq", b, zero)
        dm1 = self.cmp("icmp eq", b, _Val("-1", st))
        bad = self.binop("or", dz, dm1)
        safe = self.select(bad, _Val("1", st), b)
        q = self.binop("sdiv", a, safe)
        r = self.binop("srem", a, safe)
        # Truncated -> floor: adjust when the remainder is non-zero and its sign differs from b.
        nz = self.cmp("icmp ne", r, zero)
        sign_diff = self.cmp("icmp slt", self.binop("xor", r, safe), zero)
        fix = self.binop("and", nz, sign_diff)
        if op == "floordiv":
            qf = self.binop("sub", q, self.conv("zext", fix, st))
            return self.select(dz, zero, self.select(dm1, self.binop("sub", zero, a), qf))
        rf = self.select(fix, self.binop("add", r, safe), r)
        return self.select(bad, zero, rf)

    def _float_floor(self, op: str, a: _Val, b: _Val) -> _Val:
        """numpy's float floor_divide / remainder (npy_divmod), step for step."""
        st = a.st
        d = "float32" if st == "float" else "float64"
        z = _Val(I.float_literal(0.0, d), st)
        one = _Val(I.float_literal(1.0, d), st)
        a, b = self.unify(a, b)
        mod = self.binop("frem", a, b)
        b_zero = self.cmp("fcmp oeq", b, z)
        mod_nz = self.cmp("fcmp une", mod, z)
        fix = self.binop("and", mod_nz, self.binop("xor", self.cmp("fcmp olt", b, z), self.cmp("fcmp olt", mod, z)))
        if op == "floormod":
            m = self.select(fix, self.binop("fadd", mod, b), mod)
            m = self.select(mod_nz, m, self.intr("copysign", [z, b]))
            return self.select(b_zero, mod, m)
        div = self.binop("fdiv", self.binop("fsub", a, mod), b)
        div = self.select(fix, self.binop("fsub", div, one), div)
        fl = self.intr("floor", [div])
        half = _Val(I.float_literal(0.5, d), st)
        fl = self.select(self.cmp("fcmp ogt", self.binop("fsub", div, fl), half), self.binop("fadd", fl, one), fl)
        quot = self.binop("fdiv", a, b)
        fl = self.select(self.cmp("fcmp une", div, z), fl, self.intr("copysign", [z, quot]))
        return self.select(b_zero, quot, fl)

    def _compare(self, e: E.Compare) -> _Val:
        d = e.a.dtype
        if d in _INDEX_DTYPES and self._is_index(e.a) and self._is_index(e.b):
            a, b = self.wide(e.a), self.wide(e.b)
            signed = True
        else:
            a, b = self.value(e.a), self.value(e.b)
            signed = dt.is_signed(d)
        if dt.is_float(d):
            pred = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}[e.op]
            return self.cmp(f"fcmp {pred}", a, b)
        if e.op in ("eq", "ne"):
            return self.cmp(f"icmp {e.op}", a, b)
        pred = ("s" if signed else "u") + e.op
        return self.cmp(f"icmp {pred}", a, b)

    def _call(self, e: E.Call) -> _Val:
        d = e.dtype
        n = e.name
        if n not in E.MATH_FUNCS:  # the name becomes part of a symbol: only known functions
            raise ValueError(f"unknown math function {n!r}")
        args = [self.value(a) for a in e.args]
        if n == "abs":
            if dt.is_float(d):
                return self.intr("fabs", args)
            if d == "uint8":
                return args[0]
            return self.intr("abs", args, extra=", i1 false")
        if n in ("sqrt", "floor", "ceil", "trunc", "round"):
            return self.intr(n, args)
        if n == "rsqrt":
            s = self.intr("sqrt", args)
            return self.binop("fdiv", _Val(I.float_literal(1.0, d), s.st), s)
        lanes = args[0].lanes
        if len(args) == 2:
            args = self.unify(*args)
            lanes = args[0].lanes
        sym = self.mod.math.call(n, d, lanes)
        ty = args[0].ty
        r = self.ins(f"call {ty} {sym}({', '.join(f'{ty} {a.ref}' for a in args)})")
        return _Val(r, args[0].st, lanes)

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

    def _cast(self, v: _Val, src: str, dst: str) -> _Val:
        if src == dst:
            return v
        st = _SCALAR_TY[dst]
        if dst == "bool":
            if dt.is_float(src):
                return self.cmp("fcmp une", v, _Val(I.float_literal(0.0, src), v.st))
            return self.cmp("icmp ne", v, _Val("0", v.st))
        if src == "bool":
            if dt.is_float(dst):
                return self.conv("uitofp", v, st)
            return self.conv("zext", v, st)
        if dt.is_float(src) and dt.is_float(dst):
            return self.conv("fpext" if dst == "float64" else "fptrunc", v, st)
        if dt.is_float(src):
            # Truncate toward zero. The saturating form is never poison (nan -> 0, out of range
            # clamps); 8-bit targets go through i32 and wrap, as numpy's astype does on x86.
            wide_st = "i64" if dst == "int64" else "i32"
            sfx = f"{I.intrinsic_suffix(wide_st, v.lanes)}.{I.intrinsic_suffix(v.st, v.lanes)}"
            r = self.ins(f"call {I.vec_type(wide_st, v.lanes)} @llvm.fptosi.sat.{sfx}({v.ty} {v.ref})")
            w = _Val(r, wide_st, v.lanes)
            return w if wide_st == st else self.conv("trunc", w, st)
        if dt.is_float(dst):
            return self.conv("uitofp" if src == "uint8" else "sitofp", v, st)
        sb, db = dt.bits(src), dt.bits(dst)
        if sb == db:
            return v
        if db < sb:
            return self.conv("trunc", v, st)
        return self.conv("zext" if src == "uint8" else "sext", v, st)

    # ---- memory ----------------------------------------------------------------------------------
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

    # ---- statements ------------------------------------------------------------------------------
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
            self.entry.append(f"  {name} = call noalias ptr @aligned_alloc(i64 64, i64 {padded})")
            self.exit.insert(0, f"  call void @free(ptr {name})")
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
            md = self.mod.loop_md('!"llvm.loop.unroll.full"') if s.kind == "unrolled" else None
            self.counted_loop(s.var, "0", str(s.extent), lambda: self.stmt(s.body), md)

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

    # ---- vectorisation ---------------------------------------------------------------------------
    def _can_vectorize(self, loop: L.For) -> bool:
        """Whether running each statement for all lanes at once preserves sequential semantics."""
        v = loop.var
        saved = self.vec
        self.vec = _VecCtx(v, loop.extent, v, whole=loop.extent <= MAX_VECTOR_LANES)  # for _lin
        self._varies_memo = {}
        try:
            stores: dict[int, set[tuple[int, ...]]] = {}
            accesses: list[tuple[L.Buffer, tuple[E.Expr, ...]]] = []
            exprs: list[E.Expr] = []
            for st in L.walk(loop.body):
                if isinstance(st, (L.For, L.Allocate)):
                    return False
                if isinstance(st, L.IfThenElse):
                    exprs.append(st.cond)
                elif isinstance(st, L.Store):
                    flat = [self._lin(i) for i in st.indices]
                    if any(c is None for c in flat):
                        return False
                    if sum(c * s for c, s in zip(flat, st.buffer.strides)) == 0:  # type: ignore[misc]
                        return False  # every lane writes the same element: a reduction
                    stores.setdefault(st.buffer.uid, set()).add(tuple(map(id, st.indices)))
                    exprs.append(st.value)
                    exprs.extend(st.indices)
            for e in exprs:
                for n in E.post_order(e):
                    if isinstance(n, L.BufferLoad):
                        accesses.append((n.buffer, n.indices))
            for uid, tuples in stores.items():
                if len(tuples) != 1:
                    return False
                (only,) = tuples
                for b, idx in accesses:
                    if b.uid == uid and tuple(map(id, idx)) != only:
                        return False
            return True
        finally:
            self.vec = saved
            self._varies_memo = {}

    def _vectorize(self, loop: L.For) -> None:
        n = loop.extent
        chunk = n if n <= MAX_VECTOR_LANES else MAX_VECTOR_LANES
        full, rem = divmod(n, chunk)
        base_var = E.var(loop.var.name + "_lane0", loop.var.dtype)
        if full == 1:
            self._vector_body(loop, base_var, "0", chunk, whole=rem == 0)
        elif full > 1:
            k = E.var(loop.var.name + "_chunk", loop.var.dtype)

            def body() -> None:
                base = self.ins(f"mul nuw nsw i64 {self.env[id(k)][1]}, {chunk}")
                self._vector_body(loop, base_var, base, chunk, whole=False)

            self.counted_loop(k, "0", str(full), body, None)
        if rem:
            self._vector_body(loop, base_var, str(full * chunk), rem, whole=False)

    def _vector_body(self, loop: L.For, base_var: E.Var, base: str, lanes: int, whole: bool) -> None:
        self.env[id(base_var)] = (base_var, base)
        self.vec = _VecCtx(loop.var, lanes, base_var, whole)
        self._varies_memo = {}
        self.memo = {}
        try:
            self.stmt(loop.body)
        finally:
            self.vec = None
            self._varies_memo = {}
            self.memo = {}
            del self.env[id(base_var)]

    # ---- parallel loops --------------------------------------------------------------------------
    def _parallel(self, loop: L.For) -> None:
        if self.in_parallel:
            raise ValueError(f"nested parallel loop `{loop.var.name}`: a parallel loop may not contain "
                             "another parallel loop")
        mod = self.mod
        k = mod.next_parallel_id()
        body_sym = f"@{sanitize(mod.name)}.par{k}"
        tramp_sym = f"@{sanitize(mod.name)}.par{k}.tramp"
        bufs = list(self.buffers.values())
        vars_ = list(self.env.values())
        for sym, decl in (("GOMP_parallel", "declare void @GOMP_parallel(ptr, ptr, i32, i32) nounwind"),
                          ("omp_get_thread_num", "declare i32 @omp_get_thread_num() nounwind"),
                          ("omp_get_num_threads", "declare i32 @omp_get_num_threads() nounwind")):
            mod.declare(sym, decl)

        # The body: noalias pointers (distinct allocations), so the inliner turns them into
        # scoped alias metadata and the loop inside keeps its alias information.
        child = _Function(mod, in_parallel=True)
        params = []
        for b, _ in bufs:
            ref = f"%b{b.uid}"
            params.append(f"ptr noalias nocapture {ref}")
            child.buffers[b.uid] = (b, ref)
        for v, _ in vars_:
            ref = f"%v{v.uid}"
            params.append(f"i64 {ref}")
            child.env[id(v)] = (v, ref)
        params += ["i64 %begin", "i64 %end"]
        child.counted_loop(loop.var, "%begin", "%end", lambda: child.stmt(loop.body), None)
        mod.functions.append(child.finish(
            f"define internal void {body_sym}({', '.join(params)}) {mod.attr_group} {{"))

        nslots = max(len(bufs) + len(vars_), 1)
        t = []
        args = []
        for i, (b, _) in enumerate(bufs):
            t.append(f"  %s{i} = getelementptr inbounds [{nslots} x i64], ptr %clo, i64 0, i64 {i}")
            t.append(f"  %p{i} = load ptr, ptr %s{i}, align 8")
            args.append(f"ptr %p{i}")
        for j, _ in enumerate(vars_):
            i = len(bufs) + j
            t.append(f"  %s{i} = getelementptr inbounds [{nslots} x i64], ptr %clo, i64 0, i64 {i}")
            t.append(f"  %p{i} = load i64, ptr %s{i}, align 8")
            args.append(f"i64 %p{i}")
        ext = loop.extent
        t += ["  %tid32 = call i32 @omp_get_thread_num()",
              "  %nt32 = call i32 @omp_get_num_threads()",
              "  %tid = sext i32 %tid32 to i64",
              "  %nt = sext i32 %nt32 to i64",
              f"  %ntm1 = add nsw i64 %nt, {ext - 1}",
              "  %chunk = sdiv i64 %ntm1, %nt",  # ceil(extent / nt)
              "  %begin = mul nsw i64 %tid, %chunk",
              "  %end0 = add nsw i64 %begin, %chunk",
              f"  %end = call i64 @llvm.smin.i64(i64 %end0, i64 {ext})",
              "  %any = icmp slt i64 %begin, %end",
              "  br i1 %any, label %run, label %done",
              "run:",
              f"  call void {body_sym}({', '.join(args + ['i64 %begin', 'i64 %end'])})",
              "  br label %done",
              "done:",
              "  ret void",
              "}", ""]
        mod.functions.append(f"define internal void {tramp_sym}(ptr %clo) {mod.attr_group} {{\n"
                             "entry:\n" + "\n".join(t))

        clo = f"%clo{k}"
        self.entry.append(f"  {clo} = alloca [{nslots} x i64], align 8")
        for i, (b, ref) in enumerate(bufs):
            slot = self.ins(f"getelementptr inbounds [{nslots} x i64], ptr {clo}, i64 0, i64 {i}")
            self.do(f"store ptr {ref}, ptr {slot}, align 8")
        for j, (v, ref) in enumerate(vars_):
            slot = self.ins(f"getelementptr inbounds [{nslots} x i64], ptr {clo}, i64 0, i64 {len(bufs) + j}")
            self.do(f"store i64 {ref}, ptr {slot}, align 8")
        nt = self.ins(f"load i32, ptr @{NUM_THREADS_GLOBAL}, align 4")
        self.do(f"call void @GOMP_parallel(ptr {tramp_sym}, ptr {clo}, i32 {nt}, i32 0)")


def _children(e: E.Expr) -> tuple[E.Expr, ...]:
    return e.children()


def _fold(memo: dict[int, tuple[E.Expr, Any]], e: E.Expr,
          operands: Callable[[E.Expr], Sequence[E.Expr]], fn: Callable[[E.Expr, list], Any]) -> Any:
    """``fn(node, values of operands(node))`` bottom-up from an explicit stack, memoised in ``memo``
    as id -> (node, value) (the node is kept so that a reused id of a dead node never hits)."""
    stack = [e]
    while stack:
        n = stack[-1]
        hit = memo.get(id(n))
        if hit is not None and hit[0] is n:
            stack.pop()
            continue
        ops = operands(n)
        pending = []
        for c in ops:
            h = memo.get(id(c))
            if h is None or h[0] is not c:
                pending.append(c)
        if pending:
            stack.extend(reversed(pending))
            continue
        stack.pop()
        memo[id(n)] = (n, fn(n, [memo[id(c)][1] for c in ops]))
    return memo[id(e)][1]


def codegen(func: L.PrimFunc) -> str:
    """LLVM IR text of a module defining ``void @<kernel_symbol(name)>(ptr, ...)`` for ``func``."""
    name = kernel_symbol(func.name)
    mod = _Module(name)
    fn = _Function(mod, in_parallel=False)
    params = []
    for i, b in enumerate(func.params):
        ref = f"%arg{i}"
        params.append(f"ptr noalias nocapture {ref}")
        if b.uid in fn.buffers:
            raise ValueError(f"buffer {b.name} is passed twice to {func.name}")
        fn.buffers[b.uid] = (b, ref)
    fn.stmt(limit_unrolling(func.body))
    mod.functions.insert(0, fn.finish(f"define void @{name}({', '.join(params)}) {mod.attr_group} {{"))
    return mod.text()


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
