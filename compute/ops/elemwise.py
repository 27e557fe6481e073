"""Elementwise, broadcast and layout (injective) operators: add, multiply, transpose, reshape.

These are the stages the auto-scheduler inlines or fuses into their neighbours, so they are written
with the plainest indexing that is correct: bare axes where shapes agree (so the DAG analysis sees
an elementwise access), constant 0 for a broadcast dimension, and floordiv/floormod of the
flattened index only where a reshape really regroups dimensions.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .. import te
from ..expr import Expr, IterVar, const
from ..tensor import Tensor
from ._common import check_tensor, with_axis_names
from .nn import axis_names

__all__ = ["add", "broadcast_shape", "multiply", "reshape", "transpose"]


def broadcast_shape(op: str, shape_a: Sequence[int], shape_b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcasting rule: align trailing dimensions; each pair equal or one of them 1."""
    rank = max(len(shape_a), len(shape_b))
    pa = (1,) * (rank - len(shape_a)) + tuple(shape_a)
    pb = (1,) * (rank - len(shape_b)) + tuple(shape_b)
    out = []
    for d, (x, y) in enumerate(zip(pa, pb)):
        if x != y and 1 not in (x, y):
            raise ValueError(f"{op}: shapes {list(shape_a)} and {list(shape_b)} cannot be broadcast "
                             f"together (dimension {d - rank}: {x} vs {y})")
        out.append(max(x, y))
    return tuple(out)


def _broadcast_index(t: Tensor, idx: Sequence[IterVar], out_shape: Sequence[int]) -> tuple:
    off = len(out_shape) - t.ndim
    return tuple(const(0) if n == 1 and out_shape[d + off] != 1 else idx[d + off]
                 for d, n in enumerate(t.shape))


def _binary(op: str, a: Tensor | float | int, b: Tensor | float | int,
            fn: Callable[[Expr, Expr], Expr], name: str) -> Tensor:
    for v in (a, b):
        if not isinstance(v, Tensor) and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"{op}: operands must be Tensors or Python numbers, got {v!r}")
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        ta, tb = a, b
        if ta.dtype != tb.dtype:
            raise ValueError(f"{op}: dtypes differ ({ta.name!r}: {ta.dtype}, {tb.name!r}: "
                             f"{tb.dtype}); cast one of them first")
        shape = broadcast_shape(op, ta.shape, tb.shape)
        tag = "elemwise" if ta.shape == tb.shape else "broadcast"

        def body(*i: IterVar) -> Expr:
            return fn(ta[_broadcast_index(ta, i, shape)], tb[_broadcast_index(tb, i, shape)])
    elif isinstance(a, Tensor) or isinstance(b, Tensor):
        t = a if isinstance(a, Tensor) else b
        assert isinstance(t, Tensor)
        tensor_first = t is a
        c = const(b if tensor_first else a, t.dtype)  # type: ignore[arg-type]
        shape, tag = t.shape, "elemwise"

        def body(*i: IterVar) -> Expr:
            return fn(t[i], c) if tensor_first else fn(c, t[i])
    else:
        raise TypeError(f"{op}: at least one operand must be a Tensor, got {a!r} and {b!r}")
    return te.compute(shape, with_axis_names(body, axis_names(len(shape))), name=name, tag=tag)


def add(a: Tensor | float | int, b: Tensor | float | int, name: str = "add") -> Tensor:
    """a + b with numpy broadcasting (equal ranks, or the shorter shape aligned to the trailing
    dimensions; an extent of 1 broadcasts). One operand may be a Python number."""
    return _binary("add", a, b, lambda x, y: x + y, name)


def multiply(a: Tensor | float | int, b: Tensor | float | int, name: str = "multiply") -> Tensor:
    """a * b with numpy broadcasting (see ``add``). One operand may be a Python number."""
    return _binary("multiply", a, b, lambda x, y: x * y, name)


def transpose(x: Tensor, axes: Sequence[int] | None = None, name: str = "transpose") -> Tensor:
    """Permute the dimensions: output dimension ``d`` is input dimension ``axes[d]`` (numpy's
    convention; negative entries count from the end; ``None`` reverses the dimensions)."""
    check_tensor(x, "transpose")
    n = x.ndim
    if axes is None:
        perm = tuple(range(n - 1, -1, -1))
    else:
        try:
            raw = tuple(axes)
        except TypeError:
            raise TypeError(f"transpose: axes must be a sequence of ints, got {axes!r}") from None
        if any(isinstance(v, bool) or not isinstance(v, int) for v in raw):
            raise TypeError(f"transpose: axes must be ints, got {axes!r}")
        perm = tuple(v % n if -n <= v < n else v for v in raw)
        if sorted(perm) != list(range(n)):
            raise ValueError(f"transpose: axes {list(raw)} is not a permutation of the {n} dimensions "
                             f"of shape {list(x.shape)}")
    shape = tuple(x.shape[p] for p in perm)

    def body(*i: IterVar) -> Expr:
        src: list[Expr | None] = [None] * n
        for d, p in enumerate(perm):
            src[p] = i[d]
        return x[tuple(src)]

    return te.compute(shape, with_axis_names(body, axis_names(n)), name=name, tag="injective",
                      attrs={"axes": list(perm)})


def _aligned_groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """The finest pairing of ``src``'s and ``dst``'s non-unit dimensions into consecutive groups
    of equal products (the row-major boundaries the two shapes share): ``(input dims, output
    dims)`` per group. Both shapes hold the same number of elements."""
    a = [d for d, n in enumerate(src) if n != 1]
    b = [d for d, n in enumerate(dst) if n != 1]
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(a):
        ins, outs = [a[i]], [b[j]]
        pa, pb = src[a[i]], dst[b[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                ins.append(a[i])
                pa *= src[a[i]]
                i += 1
            else:
                outs.append(b[j])
                pb *= dst[b[j]]
                j += 1
        groups.append((ins, outs))
    return groups


def reshape(x: Tensor, newshape: int | Sequence[int], name: str = "reshape") -> Tensor:
    """The same elements in row-major order with a new shape; one extent may be -1 (inferred).

    The dimensions pair up in groups of equal size (``_aligned_groups``: (128, 768) -> (128, 12,
    64) is 128 -> 128 and 768 -> 12 x 64), and only within a group is the output index flattened
    and split again over the input's dimensions with floordiv/floormod: a reshape that splits or
    merges dimensions indexes its input affinely, so its loops vectorize and an inlined reshape
    costs a reader no division.
    """
    check_tensor(x, "reshape")
    if isinstance(newshape, int) and not isinstance(newshape, bool):
        newshape = (newshape,)
    try:
        req = tuple(newshape)
    except TypeError:
        raise TypeError(f"reshape: newshape must be an int or a sequence of ints, got {newshape!r}") from None
    if not req or any(isinstance(v, bool) or not isinstance(v, int) for v in req):
        raise TypeError(f"reshape: newshape must be a non-empty sequence of ints, got {newshape!r}")
    size = 1
    for v in x.shape:
        size *= v
    if req.count(-1) > 1:
        raise ValueError(f"reshape: at most one extent may be -1, got {list(req)}")
    if any(v == 0 or v < -1 for v in req):
        raise ValueError(f"reshape: extents must be positive (or one -1), got {list(req)}")
    known = 1
    for v in req:
        if v != -1:
            known *= v
    if -1 in req and size % known:
        raise ValueError(f"reshape: cannot reshape {list(x.shape)} ({size} elements) into "
                         f"{list(req)}: {size} is not divisible by {known}")
    shape = tuple(size // known if v == -1 else v for v in req)
    if -1 not in req and known != size:
        raise ValueError(f"reshape: cannot reshape {list(x.shape)} ({size} elements) into "
                         f"{list(req)} ({known} elements)")
    groups = _aligned_groups(tuple(x.shape), shape)

    def body(*i: IterVar) -> Expr:
        src: list[Expr | int] = [0] * x.ndim  # unit input dimensions stay 0
        for ins, outs in groups:
            flat: Expr | None = None  # the group's output index, row-major over its dimensions
            for d in outs:
                flat = i[d] if flat is None else flat * shape[d] + i[d]
            assert flat is not None
            if len(ins) == 1:
                src[ins[0]] = flat
                continue
            stride = 1
            for k in range(len(ins) - 1, -1, -1):
                d = ins[k]
                q = flat if stride == 1 else flat // stride
                # The group's first input index needs no modulo: it is already below its extent.
                src[d] = q if k == 0 else q % x.shape[d]
                stride *= x.shape[d]
        return x[tuple(src)]

    return te.compute(shape, with_axis_names(body, axis_names(len(shape))), name=name, tag="injective")
