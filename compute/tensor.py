"""Tensors and the operations that produce them: placeholders (inputs) and computes.

A compute is a function from its output index to a scalar expression over other tensors, exactly
as in TVM's tensor expressions. All shapes are static integers: the auto-scheduler specialises
every program to its shapes, and static extents are what make tiling decisions meaningful.
"""
from __future__ import annotations

import inspect
import numbers
from typing import Any, Callable, Sequence

from . import dtype as dt
from . import expr as E
from .names import check_attrs, check_name, check_tag, is_valid_name


class Operation:
    """Base of PlaceholderOp and ComputeOp. Compared by identity."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def output(self) -> "Tensor":
        return self._output  # type: ignore[attr-defined]

    @property
    def input_tensors(self) -> list["Tensor"]:
        return []


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self._output = Tensor(self)

    def __repr__(self) -> str:
        return f"placeholder({self.name}, {list(self.shape)}, {self.dtype})"


class ComputeOp(Operation):
    def __init__(self, name: str, axes: tuple[E.IterVar, ...], body: E.Expr, tag: str,
                 attrs: dict[str, Any]):
        self.name = name
        self.axes = axes
        self.shape = tuple(a.extent for a in axes)
        self.body = body
        self.dtype = body.dtype
        self.tag = tag
        self.attrs = dict(attrs)
        self._output = Tensor(self)
        self._inputs: list[Tensor] | None = None

    @property
    def reduce_axes(self) -> tuple[E.IterVar, ...]:
        return self.body.axes if isinstance(self.body, E.Reduce) else ()

    @property
    def input_tensors(self) -> list["Tensor"]:
        if self._inputs is None:
            seen: dict[int, Tensor] = {}
            for n in E.post_order(self.body):
                if isinstance(n, E.TensorLoad):
                    seen.setdefault(id(n.tensor), n.tensor)
            self._inputs = list(seen.values())
        return self._inputs

    def __repr__(self) -> str:
        return f"compute({self.name}, {list(self.shape)}, {self.dtype})"


class Tensor:
    """The output of an operation. Index it (``A[i, j]``) to use its values in a compute."""

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices: Any) -> E.Expr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(
                f"tensor {self.name!r} has {self.ndim} dimension(s) (shape {list(self.shape)}) "
                f"but was indexed with {len(indices)} index(es)"
            )
        idx = []
        for pos, i in enumerate(indices):
            if isinstance(i, slice):
                raise TypeError(f"tensor {self.name!r}: slices are not supported as index {pos}; "
                                "use one expression per dimension")
            if isinstance(i, bool) or isinstance(i, float):
                raise TypeError(f"tensor {self.name!r}: index {pos} is {i!r}, which is not an integer")
            if isinstance(i, int):
                if not -(1 << 31) <= i < (1 << 31):
                    raise IndexError(f"tensor {self.name!r}: index {pos} = {i} is out of range")
                e = E.const(i, "int32")
            elif isinstance(i, E.Expr):
                e = i
            else:
                raise TypeError(f"tensor {self.name!r}: index {pos} is {i!r} "
                                f"(type {type(i).__name__}), which is not an integer expression")
            if not dt.is_int(e.dtype):
                raise TypeError(f"tensor {self.name!r}: index {pos} `{e}` has dtype {e.dtype}; "
                                "indices must be integers (use te.cast(..., 'int32'))")
            if isinstance(e, E.Const) and not 0 <= e.value < self.shape[pos]:
                raise IndexError(f"tensor {self.name!r}: constant index {pos} = {e.value} is outside "
                                 f"[0, {self.shape[pos]})")
            idx.append(e)
        return E.TensorLoad._make(self.dtype, self, tuple(idx))

    def __call__(self, *indices: Any) -> E.Expr:
        return self[indices]

    def __bool__(self) -> bool:
        raise TypeError(f"tensor {self.name!r} has no truth value")

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(self.shape)}, dtype={self.dtype})"

    # Tensors are deliberately not expressions: `A + 1` is a mistake the user should hear about.
    def _not_expr(self, *_: object) -> E.Expr:
        raise TypeError(f"tensor {self.name!r} used as a value; index it (e.g. {self.name}[i, j]) or "
                        "use an operator from ansor.ops")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _not_expr  # type: ignore
    __hash__ = object.__hash__


def _check_shape(shape: Any, who: str) -> tuple[int, ...]:
    # Any integer type counts (numpy's too: shapes are often computed with numpy) and becomes a
    # plain int; bools (numbers.Integral in Python, not in numpy) and floats do not.
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shp = tuple(shape)
    except TypeError:
        raise TypeError(f"{who}: shape must be a tuple of positive integers, got {shape!r}") from None
    out = []
    for d in shp:
        if isinstance(d, E.Const):
            d = d.value
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise TypeError(f"{who}: shape {shape!r} has a non-integer extent {d!r}")
        d = int(d)
        if d <= 0:
            raise ValueError(f"{who}: shape {shape!r} has a non-positive extent {d}")
        if d >= 1 << 31:
            raise ValueError(f"{who}: extent {d} does not fit in int32")
        out.append(d)
    return tuple(out)


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given static shape and dtype."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"placeholder name must be a non-empty string, got {name!r}")
    check_name(name, "placeholder name")
    return PlaceholderOp(name, _check_shape(shape, f"placeholder {name!r}"), dt.canonical(dtype)).output


def reduce_axis(dom: tuple[int, int] | Sequence[int], name: str = "k") -> E.IterVar:
    """A reduction axis over ``range(lo, hi)``; use it inside te.sum / te.max / te.min."""
    try:
        lo, hi = dom
    except (TypeError, ValueError):
        raise TypeError(f"reduce_axis {name!r}: domain must be (lo, hi), got {dom!r}") from None
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
        raise TypeError(f"reduce_axis {name!r}: bounds must be integers, got {dom!r}")
    if hi <= lo:
        raise ValueError(f"reduce_axis {name!r}: empty domain ({lo}, {hi})")
    check_name(name, "reduce_axis name")
    return E.iter_var(name, lo, hi - lo, "reduce")


def _arity(fcompute: Callable, n: int, name: str) -> list[str]:
    try:
        sig = inspect.signature(fcompute)
    except (TypeError, ValueError):
        return [f"i{d}" for d in range(n)]
    params = list(sig.parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(n)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not (len(required) <= n <= len(positional)):
        raise TypeError(
            f"compute {name!r}: the function takes {len(positional)} index argument(s) "
            f"({', '.join(p.name for p in positional) or 'none'}) but the shape has {n} dimension(s)"
        )
    # Axis names only label loops; a parameter name outside the name rule (a non-ASCII
    # identifier) becomes a positional one rather than an error.
    return [p.name if is_valid_name(p.name) else f"i{d}" for d, p in enumerate(positional[:n])]


def compute(shape: Sequence[int], fcompute: Callable[..., Any], name: str = "compute",
            tag: str = "", attrs: dict[str, Any] | None = None) -> Tensor:
    """A tensor whose element at each index is ``fcompute(*index)``."""
    check_name(name, "compute name")
    check_tag(tag, f"compute {name!r}: tag")
    if attrs is not None:
        check_attrs(attrs, f"compute {name!r}: attrs")
    if not callable(fcompute):
        raise TypeError(f"compute {name!r}: fcompute must be callable, got {fcompute!r}")
    shp = _check_shape(shape, f"compute {name!r}")
    names = _arity(fcompute, len(shp), name)
    axes = tuple(E.iter_var(n, 0, ext, "spatial") for n, ext in zip(names, shp))
    try:
        body = fcompute(*axes)
    except TypeError as err:
        raise TypeError(f"compute {name!r}: {err}") from err
    if isinstance(body, Tensor):
        raise TypeError(f"compute {name!r}: the function returned tensor {body.name!r}, not an "
                        "element; index it")
    if isinstance(body, (list, tuple)):
        raise TypeError(f"compute {name!r}: multiple outputs are not supported")
    body = E.as_expr(body)
    _validate_body(name, axes, body)
    return ComputeOp(name, axes, body, tag, attrs or {}).output


def _validate_body(name: str, axes: tuple[E.IterVar, ...], body: E.Expr) -> None:
    own = {id(a) for a in axes}
    nodes = E.post_order(body)
    reduces = [n for n in nodes if isinstance(n, E.Reduce)]
    if reduces and not (len(reduces) == 1 and body is reduces[0]):
        raise ValueError(
            f"compute {name!r}: a reduction (te.sum/max/min) must be the whole body of the compute, "
            "not part of a larger expression; put it in its own compute and combine in another"
        )
    bound = {id(a) for r in reduces for a in r.axes}
    if reduces:
        r = reduces[0]
        for a in r.axes:
            if a.extent <= 0:
                raise ValueError(f"compute {name!r}: reduce axis {a.name} is empty")
    seen_vars = {id(n): n for n in nodes if isinstance(n, E.Var)}
    for v in seen_vars.values():
        if isinstance(v, E.IterVar) and v.kind == "reduce":
            if id(v) not in bound:
                raise ValueError(
                    f"compute {name!r}: reduce axis {v.name!r} is used outside a reducer "
                    "(te.sum/max/min) or not listed in its axis argument"
                )
        elif id(v) not in own:
            raise ValueError(
                f"compute {name!r}: variable {v.name!r} does not belong to this compute "
                "(an axis of another compute leaked in?)"
            )
    for n in nodes:
        if isinstance(n, E.TensorLoad) and isinstance(n.tensor.op, ComputeOp) and n.tensor.op.body is None:
            raise ValueError(f"compute {name!r}: reads an unfinished compute")
