"""Expression nodes of the tensor-expression language.

Nodes are immutable and *interned*: building the same expression twice returns the same object, so
structural equality is identity (``a is b``) and hashing is ``id``-based. This keeps the analyses,
bound inference and feature extraction, which compare and memoise expressions constantly, cheap.

``==`` and ``!=`` on expressions build comparison nodes (as in TVM); their truth value is structural
identity, so expressions still work as dict keys and in ``in`` tests. Every other expression refuses
``bool()``, because a Python ``if`` on a symbolic value is always a bug in user code.
"""
from __future__ import annotations

import math
import struct
import weakref
from itertools import count
from typing import Iterable, Sequence

from . import dtype as dt
from .expr_walk import fold, post_order, rewrite  # noqa: F401 - re-exported: E.fold, E.rewrite, E.post_order
from .int_arith import _fold_int, _wrap_int, int_range  # int_range re-exported as E.int_range
from .printer import CMP, PREC, SYM, UNARY_PREC, Pieces, const_text, expr_str, join

_INTERN: "weakref.WeakValueDictionary[tuple, Expr]" = weakref.WeakValueDictionary()
_UID = count()


def _key_part(x: object) -> object:
    if isinstance(x, Expr):
        return id(x)  # the node keeps its children alive, so the id stays valid while it is cached
    if isinstance(x, tuple):
        return tuple(_key_part(y) for y in x)
    if isinstance(x, float):
        return ("f", struct.pack("<d", x))  # tells -0.0 from 0.0 and keeps NaN equal to itself
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return ("o", id(x))  # tensors and buffers: identity


class Expr:
    """Base class of all expression nodes. Use the factory functions, never the constructors."""

    __slots__ = ("dtype", "__weakref__")
    dtype: str

    @classmethod
    def _make(cls, dtype: str, *fields: object) -> "Expr":
        key = (cls, dtype) + tuple(_key_part(f) for f in fields)
        node = _INTERN.get(key)
        if node is None:
            node = object.__new__(cls)
            object.__setattr__(node, "dtype", dtype)
            node._init(*fields)
            _INTERN[key] = node
        return node

    def _init(self, *fields: object) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def children(self) -> tuple["Expr", ...]:
        return ()

    def with_children(self, children: Sequence["Expr"]) -> "Expr":
        return self

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            f"the truth value of the symbolic expression `{self}` is unknown at build time; "
            "use te.if_then_else / te.select for a data-dependent choice"
        )

    def __repr__(self) -> str:
        return expr_str(self)

    def _pieces(self, parent_prec: int) -> Pieces:
        """How this node prints (see ``compute.printer``); every node class says its own."""
        name = getattr(self, "name", None) or type(self).__name__
        return f"<{name}>"

    # ---- Python operators -------------------------------------------------------------------
    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("floormod", self, o)
    def __rmod__(self, o): return binary("floormod", o, self)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return call("abs", self)
    def __pow__(self, o): return call("pow", self, o)
    def __rpow__(self, o): return call("pow", o, self)
    def __lt__(self, o): return compare("lt", self, o)
    def __le__(self, o): return compare("le", self, o)
    def __gt__(self, o): return compare("gt", self, o)
    def __ge__(self, o): return compare("ge", self, o)
    def __eq__(self, o): return compare("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return compare("ne", self, o)  # type: ignore[override]
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __invert__(self): return unary("not", self)


class Const(Expr):
    __slots__ = ("value",)
    value: int | float | bool

    def _init(self, value):
        object.__setattr__(self, "value", value)

    def _pieces(self, parent_prec: int) -> Pieces:
        return const_text(self.value, self.dtype)


class Var(Expr):
    """A symbolic integer variable (loop counter). Each Var is distinct, whatever its name."""

    __slots__ = ("name", "uid")
    name: str
    uid: int

    def _init(self, name, uid):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "uid", uid)

    def _pieces(self, parent_prec: int) -> Pieces:
        return self.name


class IterVar(Var):
    """An axis of a compute: a Var with a domain [lo, lo+extent) and a kind (spatial or reduce)."""

    __slots__ = ("lo", "extent", "kind")
    lo: int
    extent: int
    kind: str

    def _init(self, name, uid, lo, extent, kind):
        Var._init(self, name, uid)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "extent", extent)
        object.__setattr__(self, "kind", kind)


class _TwoOperands(Expr):
    """A node ``op(a, b)``; subclasses differ only in how they rebuild (dtype rules)."""

    __slots__ = ("op", "a", "b")
    op: str
    a: Expr
    b: Expr

    def _init(self, op, a, b):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    def children(self):
        return (self.a, self.b)


class Binary(_TwoOperands):
    """Arithmetic (add sub mul div floordiv floormod min max) or logical (and or) on two values."""

    __slots__ = ()

    def with_children(self, c):
        return binary(self.op, c[0], c[1])

    def _pieces(self, parent_prec: int) -> Pieces:
        if self.op in ("min", "max"):
            return [f"{self.op}(", (self.a, 0), ", ", (self.b, 0), ")"]
        p = PREC[self.op]
        s = [(self.a, p), SYM[self.op], (self.b, p + 1)]
        return ["(", *s, ")"] if p < parent_prec else s


class Compare(_TwoOperands):
    """lt le gt ge eq ne, giving bool."""

    __slots__ = ()

    def with_children(self, c):
        return compare(self.op, c[0], c[1])

    def _pieces(self, parent_prec: int) -> Pieces:
        p = PREC["cmp"]
        s = [(self.a, p + 1), CMP[self.op], (self.b, p + 1)]
        return ["(", *s, ")"] if p < parent_prec else s

    def __bool__(self) -> bool:
        # Structural comparison: this is what makes `expr in list` and dict lookups work.
        if self.op == "eq":
            return self.a is self.b
        if self.op == "ne":
            return self.a is not self.b
        return Expr.__bool__(self)


class Unary(Expr):
    """``neg`` (arithmetic negation) or ``not`` (logical negation)."""

    __slots__ = ("op", "a")
    op: str
    a: Expr

    def _init(self, op, a):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "a", a)

    def children(self):
        return (self.a,)

    def with_children(self, c):
        return unary(self.op, c[0])

    def _pieces(self, parent_prec: int) -> Pieces:
        return ["-" if self.op == "neg" else "!", (self.a, UNARY_PREC)]


class Call(Expr):
    """A math intrinsic: exp log sqrt rsqrt tanh sigmoid erf pow abs floor ceil trunc round."""

    __slots__ = ("name", "args")
    name: str
    args: tuple[Expr, ...]

    def _init(self, name, args):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", args)

    def children(self):
        return self.args

    def with_children(self, c):
        return call(self.name, *c)

    def _pieces(self, parent_prec: int) -> Pieces:
        return [f"{self.name}(", *join([(a, 0) for a in self.args], ", "), ")"]


class Select(Expr):
    __slots__ = ("cond", "true_value", "false_value")
    cond: Expr
    true_value: Expr
    false_value: Expr

    def _init(self, cond, t, f):
        object.__setattr__(self, "cond", cond)
        object.__setattr__(self, "true_value", t)
        object.__setattr__(self, "false_value", f)

    def children(self):
        return (self.cond, self.true_value, self.false_value)

    def with_children(self, c):
        return select(c[0], c[1], c[2])

    def _pieces(self, parent_prec: int) -> Pieces:
        return ["select(", (self.cond, 0), ", ", (self.true_value, 0), ", ", (self.false_value, 0), ")"]


class Cast(Expr):
    __slots__ = ("value",)
    value: Expr

    def _init(self, value):
        object.__setattr__(self, "value", value)

    def children(self):
        return (self.value,)

    def with_children(self, c):
        return cast(c[0], self.dtype)

    def _pieces(self, parent_prec: int) -> Pieces:
        return [f"{self.dtype}(", (self.value, 0), ")"]


class TensorLoad(Expr):
    """``tensor[indices]`` inside a compute body."""

    __slots__ = ("tensor", "indices")
    tensor: object  # compute.tensor.Tensor (kept untyped to avoid an import cycle)
    indices: tuple[Expr, ...]

    def _init(self, tensor, indices):
        object.__setattr__(self, "tensor", tensor)
        object.__setattr__(self, "indices", indices)

    def children(self):
        return self.indices

    def with_children(self, c):
        return TensorLoad._make(self.dtype, self.tensor, tuple(c))

    def _pieces(self, parent_prec: int) -> Pieces:
        name = self.tensor.name  # type: ignore[attr-defined]
        return [f"{name}[", *join([(i, 0) for i in self.indices], ", "), "]"]


class Reduce(Expr):
    """A commutative reduction (sum / max / min) of ``source`` over ``axes`` where ``where`` holds.

    Only allowed as the whole body of a compute, as in TVM: the reduction's init and update then
    map one-to-one onto the stage's loops.
    """

    __slots__ = ("combiner", "source", "axes", "where")
    combiner: str
    source: Expr
    axes: tuple[IterVar, ...]
    where: Expr | None

    def _init(self, combiner, source, axes, where):
        object.__setattr__(self, "combiner", combiner)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "where", where)

    def children(self):
        return (self.source,) if self.where is None else (self.source, self.where)

    def with_children(self, c):
        return Reduce._make(self.dtype, self.combiner, c[0], self.axes, c[1] if len(c) > 1 else None)

    def _pieces(self, parent_prec: int) -> Pieces:
        axes = ", ".join(a.name for a in self.axes)
        w = [] if self.where is None else [", where=", (self.where, 0)]
        return [f"{self.combiner}(", (self.source, 0), f", axis=[{axes}]", *w, ")"]


# ---- constructors ---------------------------------------------------------------------------

ARITH_OPS = frozenset({"add", "sub", "mul", "div", "floordiv", "floormod", "min", "max"})
LOGIC_OPS = frozenset({"and", "or"})
CMP_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
MATH_FUNCS = {  # name -> number of arguments
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1, "pow": 2,
    "abs": 1, "floor": 1, "ceil": 1, "trunc": 1, "round": 1,
}
FLOAT_ONLY_FUNCS = frozenset(MATH_FUNCS) - {"abs"}
_OP_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%"}


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    """A constant. Without ``dtype``: bool -> bool, int -> int32, float -> float32."""
    if isinstance(value, Const):
        return value if dtype is None else cast(value, dtype)  # type: ignore[return-value]
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r} of type {type(value).__name__}")
    dtype = dt.canonical(dtype)
    if dt.is_float(dtype):
        v: int | float | bool = float(value)
    elif dt.is_bool(dtype):
        v = bool(value)
    else:
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"constant {value!r} is not an integer but dtype {dtype} was asked for")
        v = int(value)
        lo, hi = int_range(dtype)
        if not lo <= v <= hi:
            raise ValueError(f"constant {v} does not fit in {dtype} (range {lo}..{hi}); "
                             f"use te.cast({v}, {dtype!r}) to wrap it explicitly")
    return Const._make(dtype, v)  # type: ignore[return-value]


def var(name: str, dtype: str = dt.INDEX_DTYPE) -> Var:
    return Var._make(dt.canonical(dtype), name, next(_UID))  # type: ignore[return-value]


def iter_var(name: str, lo: int, extent: int, kind: str) -> IterVar:
    return IterVar._make(dt.INDEX_DTYPE, name, next(_UID), lo, extent, kind)  # type: ignore[return-value]


def as_expr(x: object, like: str | None = None) -> Expr:
    """Convert a Python scalar to a constant, adopting the dtype ``like`` of the other operand."""
    if isinstance(x, Expr):
        return x
    if hasattr(x, "as_expr"):  # a single-element tensor handle is not an expression
        raise TypeError(f"cannot use tensor {getattr(x, 'name', x)!r} as a value; index it first")
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, int):
        if like is not None and like != "bool":
            return const(x, like)
        return const(x, "int32")
    if isinstance(x, float):
        if like is not None and dt.is_float(like):
            return const(x, like)
        if like is not None and (dt.is_int(like) or like == "bool"):
            raise TypeError(
                f"cannot mix the float literal {x!r} with a {like} expression; "
                f"use te.cast(expr, 'float32') or an integer literal"
            )
        return const(x, "float32")
    if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "shape", None) == ():
        return const(x.item(), dt.canonical(x.dtype))  # numpy scalar
    raise TypeError(f"cannot use {x!r} (type {type(x).__name__}) in a tensor expression")


def _coerce_pair(a: object, b: object, what: str) -> tuple[Expr, Expr]:
    a_like = a.dtype if isinstance(a, Expr) else None
    b_like = b.dtype if isinstance(b, Expr) else None
    ea = as_expr(a, b_like)
    eb = as_expr(b, a_like)
    if ea.dtype != eb.dtype:
        # Widening between the two index types is the one implicit conversion: shapes are int32
        # but users legitimately mix in int64 index arithmetic. Everything else needs a cast.
        if {ea.dtype, eb.dtype} == {"int32", "int64"}:
            ea, eb = cast(ea, "int64"), cast(eb, "int64")
        else:
            raise TypeError(
                f"{what}: operands have different dtypes {ea.dtype} and {eb.dtype} "
                f"(`{ea}` and `{eb}`); insert te.cast to make them match"
            )
    return ea, eb


def binary(op: str, a: object, b: object) -> Expr:
    if op not in ARITH_OPS and op not in LOGIC_OPS:
        raise ValueError(f"unknown binary operator {op!r}")
    ea, eb = _coerce_pair(a, b, f"operator {_OP_SYMBOL.get(op, op)}")
    d = ea.dtype
    if op in LOGIC_OPS:
        if d != "bool":
            raise TypeError(f"logical {op} needs bool operands, got {d} (`{ea}`, `{eb}`)")
    elif d == "bool":
        raise TypeError(f"arithmetic {op} on bool operands (`{ea}`, `{eb}`); cast to a number first")
    elif op == "div" and not dt.is_float(d):
        raise TypeError(
            f"true division `/` of {d} values (`{ea}` / `{eb}`); use `//` (te.floordiv) for "
            "integers or cast to float"
        )
    # Integer folding keeps the index arithmetic that splitting and fusing generate readable and
    # lets bound inference see constants. Floats are never folded: float32 rounding must match.
    if dt.is_int(d):
        ca = ea.value if isinstance(ea, Const) else None
        cb = eb.value if isinstance(eb, Const) else None
        if ca is not None and cb is not None:
            r = _fold_int(op, ca, cb)  # type: ignore[arg-type]
            if r is not None:
                return const(_wrap_int(r, d), d)
        if op == "add":
            if ca == 0:
                return eb
            if cb == 0:
                return ea
        elif op == "sub" and cb == 0:
            return ea
        elif op == "mul":
            if ca == 1:
                return eb
            if cb == 1:
                return ea
            if ca == 0 or cb == 0:
                return const(0, d)
        elif op == "floordiv" and cb == 1:
            return ea
        elif op == "floormod" and cb == 1:
            return const(0, d)
    elif d == "bool":
        ca = ea.value if isinstance(ea, Const) else None
        cb = eb.value if isinstance(eb, Const) else None
        if op == "and":
            if ca is True:
                return eb
            if cb is True:
                return ea
            if ca is False or cb is False:
                return const(False)
        else:
            if ca is False:
                return eb
            if cb is False:
                return ea
            if ca is True or cb is True:
                return const(True)
    return Binary._make("bool" if op in LOGIC_OPS else d, op, ea, eb)


def compare(op: str, a: object, b: object) -> Expr:
    if op not in CMP_OPS:
        raise ValueError(f"unknown comparison {op!r}")
    ea, eb = _coerce_pair(a, b, f"comparison {op}")
    if isinstance(ea, Const) and isinstance(eb, Const) and not dt.is_float(ea.dtype):
        x, y = ea.value, eb.value
        r = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[op]
        return const(bool(r))
    return Compare._make("bool", op, ea, eb)


def unary(op: str, a: object) -> Expr:
    ea = as_expr(a)
    if op == "neg":
        if ea.dtype == "bool":
            raise TypeError(f"negation of a bool expression `{ea}`; use ~ for logical not")
        if isinstance(ea, Const) and dt.is_int(ea.dtype):
            return const(_wrap_int(-ea.value, ea.dtype), ea.dtype)  # type: ignore[operator]
    elif op == "not":
        if ea.dtype != "bool":
            raise TypeError(f"logical not needs a bool operand, got {ea.dtype} (`{ea}`)")
        if isinstance(ea, Const):
            return const(not ea.value)
    else:
        raise ValueError(f"unknown unary operator {op!r}")
    return Unary._make(ea.dtype, op, ea)


def call(name: str, *args: object) -> Expr:
    if name not in MATH_FUNCS:
        raise ValueError(f"unknown math function {name!r}; known: {', '.join(sorted(MATH_FUNCS))}")
    if len(args) != MATH_FUNCS[name]:
        raise TypeError(f"{name} takes {MATH_FUNCS[name]} argument(s), got {len(args)}")
    if len(args) == 2:
        ea, eb = _coerce_pair(args[0], args[1], name)
        eargs: tuple[Expr, ...] = (ea, eb)
    else:
        eargs = (as_expr(args[0], "float32") if isinstance(args[0], float) else as_expr(args[0]),)
    d = eargs[0].dtype
    if name in FLOAT_ONLY_FUNCS and not dt.is_float(d):
        raise TypeError(f"{name} needs a float argument, got {d} (`{eargs[0]}`); use te.cast")
    if name == "abs" and d == "bool":
        raise TypeError(f"abs of a bool expression `{eargs[0]}`")
    return Call._make(d, name, eargs)


def select(cond: object, true_value: object, false_value: object) -> Expr:
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"select/if_then_else condition must be bool, got {c.dtype} (`{c}`)")
    t, f = _coerce_pair(true_value, false_value, "select")
    if isinstance(c, Const):
        return t if c.value else f
    if t is f:
        return t
    return Select._make(t.dtype, c, t, f)


def cast(value: object, dtype: str) -> Expr:
    dtype = dt.canonical(dtype)
    if isinstance(value, (int, float, bool)) and not isinstance(value, Expr):
        if dt.is_float(dtype):
            return const(float(value), dtype)
        if dtype == "bool":
            return const(bool(value))
        if isinstance(value, float):
            return const(math.trunc(value), dtype)
        return const(_wrap_int(int(value), dtype), dtype)
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    if isinstance(e, Const) and dt.is_int(e.dtype) and dt.is_int(dtype):
        return const(_wrap_int(e.value, dtype), dtype)  # type: ignore[arg-type]
    return Cast._make(dtype, e)


def reduce(combiner: str, source: object, axes: Iterable[IterVar], where: object = None) -> Reduce:
    src = as_expr(source)
    if src.dtype == "bool":
        raise TypeError(f"{combiner} over bool values (`{src}`); cast to a number first")
    ax = tuple(axes)
    for a in ax:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TypeError(f"{combiner}: axis {a!r} is not a reduce_axis")
    if len(set(map(id, ax))) != len(ax):
        raise ValueError(f"{combiner}: the same reduce axis is listed twice")
    if not ax:
        raise ValueError(f"{combiner}: needs at least one reduce axis")
    w = None
    if where is not None:
        w = as_expr(where)
        if w.dtype != "bool":
            raise TypeError(f"{combiner}: `where` must be a bool condition, got {w.dtype} (`{w}`)")
        if isinstance(w, Const) and w.value is True:
            w = None
    return Reduce._make(src.dtype, combiner, src, ax, w)  # type: ignore[return-value]


def reduce_identity(combiner: str, dtype: str) -> Const:
    if combiner == "sum":
        return const(0, dtype) if not dt.is_float(dtype) else const(0.0, dtype)
    if dt.is_float(dtype):
        return const(-math.inf if combiner == "max" else math.inf, dtype)
    info_min, info_max = int_range(dtype)
    return const(info_min if combiner == "max" else info_max, dtype)
