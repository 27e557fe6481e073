"""Loop-nest IR: what a schedule lowers to and what the LLVM backend compiles.

The IR is deliberately small. Loops have static extents (shapes are static and bound inference
rounds regions up; a guard handles the tail of a non-divisible split), start at zero, and carry a
kind: serial, parallel (outlined and run on the thread pool), vectorized (the backend emits SIMD
for the whole body over the lanes) or unrolled. Buffers are row-major and indexed with one
expression per dimension, which keeps the access pattern visible to the cost-model features;
the backend flattens. Expressions are the interned nodes of ``compute.expr`` plus ``BufferLoad``.

Invariants the lowering guarantees and the backend relies on:
- every load and store is in bounds on every executed path (guards are explicit ``IfThenElse``);
- a ``parallel`` loop never contains another ``parallel`` loop;
- ``Allocate`` scopes a buffer: it is valid only inside the body.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import Callable, Iterator, Sequence

from . import dtype as dt
from . import expr as E
from .printer import Pieces, join

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled")
_BUF_UID = count()


class Buffer:
    """A row-major array. ``scope`` is 'global' (argument or heap) or 'local' (stack/registers)."""

    __slots__ = ("name", "shape", "dtype", "scope", "uid")

    def __init__(self, name: str, shape: Sequence[int], dtype: str, scope: str = "global"):
        if scope not in ("global", "local"):
            raise ValueError(f"buffer scope must be 'global' or 'local', got {scope!r}")
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dt.canonical(dtype)
        self.scope = scope
        self.uid = next(_BUF_UID)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * dt.nbytes(self.dtype)

    @property
    def strides(self) -> tuple[int, ...]:
        """Row-major strides in elements."""
        out, acc = [], 1
        for s in reversed(self.shape):
            out.append(acc)
            acc *= s
        return tuple(reversed(out))

    def load(self, *indices: object) -> "BufferLoad":
        return buffer_load(self, indices)

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype}, {self.scope})"


class BufferLoad(E.Expr):
    """Read ``buffer[indices]`` (one index per dimension)."""

    __slots__ = ("buffer", "indices")
    buffer: Buffer
    indices: tuple[E.Expr, ...]

    def _init(self, buffer, indices):
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "indices", indices)

    def _pieces(self, parent_prec: int) -> Pieces:
        return [f"{self.buffer.name}[", *join([(i, 0) for i in self.indices], ", "), "]"]  # as a tensor load

    def children(self):
        return self.indices

    def with_children(self, c):
        return BufferLoad._make(self.dtype, self.buffer, tuple(c))


def buffer_load(buffer: Buffer, indices: Sequence[object]) -> BufferLoad:
    idx = tuple(E.as_expr(i) for i in indices)
    if len(idx) != len(buffer.shape):
        raise IndexError(f"buffer {buffer.name} has {len(buffer.shape)} dims, got {len(idx)} indices")
    return BufferLoad._make(buffer.dtype, buffer, idx)  # type: ignore[return-value]


# ---- statements ------------------------------------------------------------------------------

class Stmt:
    __slots__ = ()


@dataclass(frozen=True, eq=False)
class For(Stmt):
    """``for var in range(extent)`` with a loop kind. ``annotations`` carry pragmas for features."""

    var: E.Var
    extent: int
    kind: str
    body: Stmt
    annotations: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in FOR_KINDS:
            raise ValueError(f"unknown loop kind {self.kind!r}")
        if not isinstance(self.extent, int) or self.extent < 1:
            raise ValueError(f"loop {self.var.name}: extent must be a positive int, got {self.extent!r}")


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[E.Expr, ...]
    value: E.Expr

    def __post_init__(self):
        if len(self.indices) != len(self.buffer.shape):
            raise IndexError(f"store to {self.buffer.name}: {len(self.indices)} indices for "
                             f"{len(self.buffer.shape)} dims")
        if self.value.dtype != self.buffer.dtype:
            raise TypeError(f"store to {self.buffer.name} ({self.buffer.dtype}) of a "
                            f"{self.value.dtype} value `{self.value}`")


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    cond: E.Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """``buffer`` exists (uninitialised) while ``body`` runs."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: ``params`` are the argument buffers in call order; ``body`` is the loop nest."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return func_str(self)


def seq(*stmts: Stmt | None) -> Stmt:
    """Flatten nested sequences and drop Nones; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def walk(stmt: Stmt) -> Iterator[Stmt]:
    """Pre-order walk over every statement."""
    stack = [stmt]
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, (For, Allocate)):
            stack.append(s.body)
        elif isinstance(s, Seq):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, IfThenElse):
            if s.else_case is not None:
                stack.append(s.else_case)
            stack.append(s.then_case)


def map_stmt(stmt: Stmt, fn: Callable[[Stmt], Stmt | None]) -> Stmt:
    """Rebuild bottom-up; ``fn`` sees each rebuilt statement and may return a replacement."""
    if isinstance(stmt, For):
        b = map_stmt(stmt.body, fn)
        s: Stmt = stmt if b is stmt.body else For(stmt.var, stmt.extent, stmt.kind, b, stmt.annotations)
    elif isinstance(stmt, Allocate):
        b = map_stmt(stmt.body, fn)
        s = stmt if b is stmt.body else Allocate(stmt.buffer, b)
    elif isinstance(stmt, Seq):
        new = tuple(map_stmt(x, fn) for x in stmt.stmts)
        s = stmt if all(a is b for a, b in zip(new, stmt.stmts)) else Seq(new)
    elif isinstance(stmt, IfThenElse):
        t = map_stmt(stmt.then_case, fn)
        e = None if stmt.else_case is None else map_stmt(stmt.else_case, fn)
        s = stmt if (t is stmt.then_case and e is stmt.else_case) else IfThenElse(stmt.cond, t, e)
    else:
        s = stmt
    r = fn(s)
    return s if r is None else r


# ---- printing --------------------------------------------------------------------------------

def func_str(f: PrimFunc) -> str:
    params = ", ".join(f"{b.dtype}* {b.name}{list(b.shape)}" for b in f.params)
    return f"def {f.name}({params}):\n" + stmt_str(f.body, 1)


def stmt_str(s: Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(s, For):
        ann = "" if s.kind == "serial" else f" {s.kind}"
        extra = "".join(f" {k}={v}" for k, v in s.annotations.items())
        return f"{pad}for {s.var.name} in range({s.extent}){ann}{extra}:\n" + stmt_str(s.body, indent + 1)
    if isinstance(s, Seq):
        return "".join(stmt_str(x, indent) for x in s.stmts)
    if isinstance(s, Store):
        return f"{pad}{s.buffer.name}[{', '.join(map(str, s.indices))}] = {s.value}\n"
    if isinstance(s, IfThenElse):
        out = f"{pad}if {s.cond}:\n" + stmt_str(s.then_case, indent + 1)
        if s.else_case is not None:
            out += f"{pad}else:\n" + stmt_str(s.else_case, indent + 1)
        return out
    if isinstance(s, Allocate):
        b = s.buffer
        return f"{pad}{b.name} = alloc {b.dtype}{list(b.shape)} {b.scope}\n" + stmt_str(s.body, indent)
    return f"{pad}<{type(s).__name__}>\n"
