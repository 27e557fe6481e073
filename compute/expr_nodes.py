"""Expression nodes of the tensor-expression language (the node classes; build them with the
constructors of ``compute.expr``, which re-exports everything here).

Nodes are immutable and *interned*: building the same expression twice returns the same object, so
structural equality is identity (``a is b``) and hashing is ``id``-based. This keeps the analyses,
bound inference and feature extraction, which compare and memoise expressions constantly, cheap.

``==`` and ``!=`` on expressions build comparison nodes (as in TVM); their truth value is structural
identity, so expressions still work as dict keys and in ``in`` tests. Every other expression refuses
``bool()``, because a Python ``if`` on a symbolic value is always a bug in user code.
"""
from __future__ import annotations

import struct
import weakref
from itertools import count
from typing import Callable, Sequence

from .printer import CMP, PREC, SYM, UNARY_PREC, Pieces, const_text, expr_str, join


class _Builders:
    """The constructors a node needs (Python's operators, ``with_children``), set by
    ``compute.expr`` when it is imported: the constructors simplify and fold, and need the node
    classes, so they live there and the nodes reach them through this one object (no import
    cycle). Importing ``compute.expr_nodes`` alone gives nodes whose operators are not wired."""

    binary: Callable[..., "Expr"]
    compare: Callable[..., "Expr"]
    unary: Callable[..., "Expr"]
    call: Callable[..., "Expr"]
    select: Callable[..., "Expr"]
    cast: Callable[..., "Expr"]


BUILD = _Builders()

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
    def __add__(self, o): return BUILD.binary("add", self, o)
    def __radd__(self, o): return BUILD.binary("add", o, self)
    def __sub__(self, o): return BUILD.binary("sub", self, o)
    def __rsub__(self, o): return BUILD.binary("sub", o, self)
    def __mul__(self, o): return BUILD.binary("mul", self, o)
    def __rmul__(self, o): return BUILD.binary("mul", o, self)
    def __truediv__(self, o): return BUILD.binary("div", self, o)
    def __rtruediv__(self, o): return BUILD.binary("div", o, self)
    def __floordiv__(self, o): return BUILD.binary("floordiv", self, o)
    def __rfloordiv__(self, o): return BUILD.binary("floordiv", o, self)
    def __mod__(self, o): return BUILD.binary("floormod", self, o)
    def __rmod__(self, o): return BUILD.binary("floormod", o, self)
    def __neg__(self): return BUILD.unary("neg", self)
    def __pos__(self): return self
    def __abs__(self): return BUILD.call("abs", self)
    def __pow__(self, o): return BUILD.call("pow", self, o)
    def __rpow__(self, o): return BUILD.call("pow", o, self)
    def __lt__(self, o): return BUILD.compare("lt", self, o)
    def __le__(self, o): return BUILD.compare("le", self, o)
    def __gt__(self, o): return BUILD.compare("gt", self, o)
    def __ge__(self, o): return BUILD.compare("ge", self, o)
    def __eq__(self, o): return BUILD.compare("eq", self, o)  # type: ignore[override]
    def __ne__(self, o): return BUILD.compare("ne", self, o)  # type: ignore[override]
    def __and__(self, o): return BUILD.binary("and", self, o)
    def __rand__(self, o): return BUILD.binary("and", o, self)
    def __or__(self, o): return BUILD.binary("or", self, o)
    def __ror__(self, o): return BUILD.binary("or", o, self)
    def __invert__(self): return BUILD.unary("not", self)


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
        return BUILD.binary(self.op, c[0], c[1])

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
        return BUILD.compare(self.op, c[0], c[1])

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
        return BUILD.unary(self.op, c[0])

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
        return BUILD.call(self.name, *c)

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
        return BUILD.select(c[0], c[1], c[2])

    def _pieces(self, parent_prec: int) -> Pieces:
        return ["BUILD.select(", (self.cond, 0), ", ", (self.true_value, 0), ", ", (self.false_value, 0), ")"]


class Cast(Expr):
    __slots__ = ("value",)
    value: Expr

    def _init(self, value):
        object.__setattr__(self, "value", value)

    def children(self):
        return (self.value,)

    def with_children(self, c):
        return BUILD.cast(c[0], self.dtype)

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
