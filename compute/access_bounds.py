"""Out-of-bounds reads of a computation, found before any code is built.

The compiled kernels do not check indices (that would cost every load a compare), so a compute
that reads outside a tensor returns garbage or crashes the process. Whether it does is a property
of the *computation*, not of a schedule: every load ``T[e0, e1, ...]`` of a compute body is
executed for every point of the op's iteration domain (spatial and reduce axes) where the
conditions guarding it hold (the select branch it sits in, a reduction's ``where``). So:

- ``analyse(ops)`` bounds each index by interval arithmetic over the axes' ranges, narrowed by the
  guarding conditions of the form ``a*v + b <op> c``. An index proven inside ``[0, extent)`` is
  done. An *unguarded* index whose interval is exact (its ends are attained) and sticks out, or
  that lies wholly outside, is certainly read out of range: ``OutOfBoundsError`` at DAG
  construction, naming the compute, the tensor, the index position, the expression and its range.
  Everything else (``%`` across periods, products of axes, data-dependent indices, guards the
  intervals cannot use) is *unproven*, never rejected on the interval alone: padding reads out of
  range in the branch its select does not take, and that is legal.
- ``check_unproven(dag, accesses)`` decides the unproven ones exactly, once: an index and its
  guards that depend only on axes are evaluated over the grid of the axes they mention (with the
  machine's integer semantics, via the reference evaluator's expression evaluator). An index that
  depends on tensor values (a gather) is in range or not depending on the data: it is decided by
  running the reference evaluator on the random inputs the tuner measures with (which reports any
  read out of range), as is an index over a grid too large to enumerate. Building skips the
  data-dependent ones (the caller's arrays decide them); tuning, which runs on those random
  inputs, does not.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import dtype as dt
from . import expr as E
from . import expr_analysis as EA
from .evaluator import Evaluator, evaluate_ops, plan_blocks, random_arrays, ranges
from .tensor import ComputeOp, Operation, PlaceholderOp
from .errors import InputError

if TYPE_CHECKING:
    from .compute_dag import ComputeDAG

# Grids (the axes one index and its guards use) are evaluated in chunks of at most GRID_CHUNK
# points; one larger than GRID_MAX points (seconds of numpy) is left to one reference run instead.
GRID_CHUNK = 1 << 20
# Distinct guard chains one op's analysis follows before it stops telling them apart.
MAX_CONTEXTS = 4096
GRID_MAX = 1 << 26

_Interval = tuple[int, int, bool, frozenset]  # lo, hi (inclusive), ends attained, axes used


class OutOfBoundsError(IndexError, InputError):
    """A compute reads a tensor outside its shape. An IndexError (like numpy's) and a ValueError
    (the computation is invalid input, as other definition errors are)."""


@dataclass(frozen=True)
class Access:
    """One index of one load that interval arithmetic could not prove in range."""

    op: ComputeOp
    load: E.TensorLoad
    position: int
    guards: tuple[tuple[E.Expr, bool], ...]  # (condition, must be true?) all holding at the read
    interval: tuple[int, int] | None         # sound bounds if known
    # More guards hold than ``guards`` lists (the chain was closed by a guard that reads a tensor
    # or by the cap on chains): only evaluating the whole computation decides this read.
    guards_incomplete: bool = False

    @property
    def data_dependent(self) -> bool:
        """Whether the index or a guard reads a tensor (a gather): its range depends on data."""
        if self.guards_incomplete:
            return True
        exprs = [self.load.indices[self.position]] + [c for c, _ in self.guards]
        return any(isinstance(n, E.TensorLoad) for x in exprs for n in E.post_order(x))

    def describe(self) -> str:
        t = self.load.tensor
        return (f"compute {self.op.name!r} reads tensor {t.name!r}: index {self.position} of "
                f"`{self.load}` is `{self.load.indices[self.position]}`")


# ---- interval arithmetic ------------------------------------------------------------------------

def _interval(e: E.Expr, ranges: dict[int, tuple[int, int]]) -> _Interval | None:
    """Sound [lo, hi] of integer expression ``e`` over ``ranges`` (axis id -> inclusive range).

    ``exact`` means both ends are attained by some point of the ranges: true of sums, differences,
    scalings, floor divisions and in-period modulos of expressions over *disjoint* sets of axes.
    None when unknown: floats, calls, or an intermediate that may wrap around its dtype (the
    machine wraps, intervals would not).
    """
    memo: dict[int, _Interval | None] = {}
    for n in E.post_order(e):
        memo[id(n)] = _node_interval(n, memo, ranges)
    return memo[id(e)]


def _node_interval(n: E.Expr, memo: dict[int, _Interval | None],
                   ranges: dict[int, tuple[int, int]]) -> _Interval | None:
    if not dt.is_int(n.dtype):
        return None
    empty: frozenset = frozenset()
    r: _Interval | None
    if isinstance(n, E.Const):
        r = (int(n.value), int(n.value), True, empty)
    elif isinstance(n, E.Var):
        rg = ranges.get(id(n))
        r = None if rg is None else (rg[0], rg[1], True, frozenset((id(n),)))
    elif isinstance(n, E.TensorLoad):
        lo, hi = E.int_range(n.dtype)  # any value the tensor may hold
        r = (lo, hi, False, empty)
    elif isinstance(n, E.Cast):
        r = memo.get(id(n.value)) if dt.is_int(n.value.dtype) else None
    elif isinstance(n, E.Unary) and n.op == "neg":
        a = memo.get(id(n.a))
        r = None if a is None else (-a[1], -a[0], a[2], a[3])
    elif isinstance(n, E.Select):
        t, f = memo.get(id(n.true_value)), memo.get(id(n.false_value))
        r = None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]), False, t[3] | f[3])
    elif isinstance(n, E.Binary):
        r = _binary_interval(n.op, memo.get(id(n.a)), memo.get(id(n.b)))
    else:
        r = None
    if r is not None:
        lo, hi = E.int_range(n.dtype)
        if r[0] < lo or r[1] > hi:
            return None
    return r


def _binary_interval(op: str, a: _Interval | None, b: _Interval | None) -> _Interval | None:
    if a is None or b is None:
        return None
    vars_ = a[3] | b[3]
    disjoint = not (a[3] & b[3])
    exact = a[2] and b[2] and disjoint
    if op == "add":
        return (a[0] + b[0], a[1] + b[1], exact, vars_)
    if op == "sub":
        return (a[0] - b[1], a[1] - b[0], exact, vars_)
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]), exact, vars_)
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]), exact, vars_)
    if op == "mul":
        p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        # A constant factor keeps the ends where they were; a product of two ranges may not.
        return (min(p), max(p), exact and (a[0] == a[1] or b[0] == b[1]), vars_)
    if op in ("floordiv", "floormod") and b[0] == b[1] and b[0] > 0:
        k = b[0]
        if op == "floordiv":  # monotone: the ends map to the ends
            return (a[0] // k, a[1] // k, a[2], a[3])
        if a[0] // k == a[1] // k:  # the whole range within one period: a shift
            return (a[0] - a[0] // k * k, a[1] - a[0] // k * k, a[2], a[3])
        return (0, k - 1, False, a[3])
    return None


# ---- guards -------------------------------------------------------------------------------------

_NEGATE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def _conjuncts(cond: E.Expr, positive: bool) -> list[tuple[str, E.Expr, E.Expr]]:
    """Comparisons that must all hold when ``cond`` is ``positive`` (others are dropped, which
    only weakens what is known)."""
    out = []
    stack = [(cond, positive)]
    while stack:
        c, pos = stack.pop()
        if isinstance(c, E.Unary) and c.op == "not":
            stack.append((c.a, not pos))
        elif isinstance(c, E.Binary) and c.op == ("and" if pos else "or"):
            stack.append((c.a, pos))
            stack.append((c.b, pos))
        elif isinstance(c, E.Compare):
            out.append((c.op if pos else _NEGATE[c.op], c.a, c.b))
    return out


def _linear(e: E.Expr) -> tuple[dict[int, tuple[E.Var, int]], int] | None:
    """``e`` as sum(coef * var) + const, or None if it is not linear in variables."""
    memo: dict[int, tuple[dict[int, tuple[E.Var, int]], int] | None] = {}
    for n in E.post_order(e):
        r: tuple[dict[int, tuple[E.Var, int]], int] | None = None
        if isinstance(n, E.Const) and dt.is_int(n.dtype):
            r = ({}, int(n.value))
        elif isinstance(n, E.Var):
            r = ({id(n): (n, 1)}, 0)
        elif isinstance(n, E.Cast) and dt.is_int(n.dtype) and dt.is_int(n.value.dtype):
            r = memo.get(id(n.value))
        elif isinstance(n, E.Unary) and n.op == "neg":
            a = memo.get(id(n.a))
            r = None if a is None else ({k: (v, -c) for k, (v, c) in a[0].items()}, -a[1])
        elif isinstance(n, E.Binary) and n.op in ("add", "sub", "mul"):
            a, b = memo.get(id(n.a)), memo.get(id(n.b))
            if a is not None and b is not None:
                if n.op == "mul":
                    # Linear only when one factor is a constant (no variables).
                    k, lin = (a[1], b) if not a[0] else (b[1], a) if not b[0] else (0, None)
                    if lin is not None:
                        r = ({i: (v, c * k) for i, (v, c) in lin[0].items()}, lin[1] * k)
                else:
                    s = 1 if n.op == "add" else -1
                    terms = dict(a[0])
                    for i, (v, c) in b[0].items():
                        terms[i] = (v, terms[i][1] + s * c if i in terms else s * c)
                    r = (terms, a[1] + s * b[1])
        memo[id(n)] = r
    return memo[id(e)]


def _refine(ranges: dict[int, tuple[int, int]], guards: tuple[tuple[E.Expr, bool], ...],
            domain: dict[int, tuple[int, int]] | None = None) -> dict[int, tuple[int, int]] | None:
    """``ranges`` narrowed by the guards' comparisons ``coef*v + k <op> 0`` in one variable;
    None if a guard can never hold (the read never happens). ``domain`` (default ``ranges``) is
    where the wrap-around check of each comparison is made: the op's whole domain."""
    out = dict(ranges)
    domain = ranges if domain is None else domain
    for cond, positive in guards:
        for op, a, b in _conjuncts(cond, positive):
            # The comparison is on machine integers: reason on it only if neither side can wrap.
            if _interval(a, domain) is None or _interval(b, domain) is None:
                continue
            lin = _linear(E.binary("sub", a, b)) if a.dtype == b.dtype else None
            if lin is None:
                continue
            terms = [(v, c) for v, c in lin[0].values() if c != 0]
            if len(terms) != 1 or id(terms[0][0]) not in out:
                continue
            (v, c), k = terms[0], lin[1]
            lo, hi = out[id(v)]
            # c*v + k OP 0 becomes c*v <= m and/or c*v >= m; floor(m/c) is m // c and
            # ceil(m/c) is -(-m // c) for either sign of c.
            if op in ("lt", "le", "eq"):
                m = -k - (1 if op == "lt" else 0)
                if c > 0:
                    hi = min(hi, m // c)
                else:
                    lo = max(lo, -(-m // c))
            if op in ("gt", "ge", "eq"):
                m = -k + (1 if op == "gt" else 0)
                if c > 0:
                    lo = max(lo, -(-m // c))
                else:
                    hi = min(hi, m // c)
            if lo > hi:
                return None
            out[id(v)] = (lo, hi)
    return out


# ---- the static analysis ------------------------------------------------------------------------

def analyse(ops: list[Operation]) -> list[Access]:
    """Reject provably out-of-range reads of ``ops``; return the reads left unproven."""
    unproven: list[Access] = []
    for op in ops:
        if isinstance(op, ComputeOp):
            unproven.extend(_analyse_op(op))
    return unproven


def _analyse_op(op: ComputeOp) -> list[Access]:
    axes = list(op.axes) + list(op.reduce_axes)
    if any(a.extent <= 0 for a in axes):
        return []  # an empty domain reads nothing
    ranges = {id(a): (a.lo, a.lo + a.extent - 1) for a in axes}
    out: list[Access] = []
    # The guards holding at a node form a chain of contexts ``(cond, positive, parent, closed)``,
    # interned so that equal chains are one object: a node is visited once per context, and each
    # context's narrowed ranges are derived once from its parent's. A guard that reads a tensor
    # cannot narrow axis ranges and sends its reads to the reference check anyway, so it *closes*
    # the chain: guards under it are not added. So does the MAX_CONTEXTS-th distinct chain. Without
    # that, selects whose branches share an operand (``select(x > 1, x - 1, x)`` nested n deep)
    # would be visited under 2^n chains.
    root: tuple = ()
    contexts: dict[tuple, tuple] = {}
    narrowed: dict[int, dict[int, tuple[int, int]] | None] = {id(root): ranges}
    reads_data: dict[int, object] = {}

    def under(ctx: tuple, cond: E.Expr, positive: bool) -> tuple:
        if ctx and ctx[3]:
            return ctx
        key: tuple = (id(cond), positive, id(ctx))
        sub = contexts.get(key)
        if sub is None:
            if (E.fold(cond, lambda n, kids: isinstance(n, E.TensorLoad) or any(kids), reads_data)
                    or len(contexts) >= MAX_CONTEXTS):
                # Every closed chain below ``ctx`` is the same for the analysis: one object.
                closed_key = ("closed", id(ctx))
                sub = contexts.get(closed_key)
                if sub is None:
                    sub = contexts[closed_key] = (None, True, ctx, True)
                    narrowed[id(sub)] = narrowed[id(ctx)]
            else:
                sub = (cond, positive, ctx, False)
                parent = narrowed[id(ctx)]
                narrowed[id(sub)] = (None if parent is None
                                     else _refine(parent, ((cond, positive),), ranges))
            contexts[key] = sub
        return sub

    # Explicit stack (expressions may be deep): (node, context of the guards holding there).
    stack: list[tuple[E.Expr, tuple]] = [(op.body, root)]
    seen: set[tuple[int, int]] = set()
    while stack:
        node, ctx = stack.pop()
        key = (id(node), id(ctx))
        if key in seen:
            continue
        seen.add(key)
        if isinstance(node, E.Select):
            stack.append((node.cond, ctx))
            stack.append((node.true_value, under(ctx, node.cond, True)))
            stack.append((node.false_value, under(ctx, node.cond, False)))
            continue
        if isinstance(node, E.Reduce):
            if node.where is not None:
                stack.append((node.where, ctx))
                stack.append((node.source, under(ctx, node.where, True)))
            else:
                stack.append((node.source, ctx))
            continue
        if isinstance(node, E.TensorLoad):
            out.extend(_check_load(op, node, ctx, narrowed[id(ctx)]))
        stack.extend((c, ctx) for c in node.children())
    return out


def _guards_of(ctx: tuple) -> tuple[tuple[E.Expr, bool], ...]:
    """The (condition, must be true?) pairs of a context chain, outermost first."""
    out = []
    while ctx:
        cond, positive, ctx, _ = ctx
        if cond is not None:  # None: the closing marker
            out.append((cond, positive))
    return tuple(reversed(out))


def _check_load(op: ComputeOp, load: E.TensorLoad, ctx: tuple,
                refined: dict[int, tuple[int, int]] | None) -> list[Access]:
    if refined is None:
        return []  # the guards never hold together: this read never happens
    guards = _guards_of(ctx) if ctx else ()
    closed = bool(ctx) and ctx[3]
    out = []
    for pos, (idx, n) in enumerate(zip(load.indices, load.tensor.shape)):
        iv = _interval(idx, refined)
        if iv is not None and 0 <= iv[0] and iv[1] < n:
            continue
        if iv is not None and not guards and (iv[2] or iv[1] < 0 or iv[0] >= n):
            t = load.tensor
            used = [a for a in (*op.axes, *op.reduce_axes) if id(a) in iv[3]]
            over = ", ".join(f"{a.name} in [{a.lo}, {a.lo + a.extent})" for a in used)
            bad = iv[1] if iv[1] >= n else iv[0]  # an end outside the extent: it is read
            shown = ", ".join(str(bad) if k == pos else str(x) for k, x in enumerate(load.indices))
            raise OutOfBoundsError(
                f"compute {op.name!r} reads tensor {t.name!r} out of bounds: {t.name}[{shown}] "
                f"(index {pos} of `{load}` is `{idx}`, which takes the values {iv[0]}..{iv[1]}"
                f"{' for ' + over if over else ''}, but dimension {pos} of {t.name!r} is [0, {n}))")
        out.append(Access(op, load, pos, guards, None if iv is None else (iv[0], iv[1]),
                          closed))
    return out


# ---- the exact check of what the intervals left open ---------------------------------------------

def check_unproven(dag: "ComputeDAG", accesses: list[Access], data_dependent: bool = True) -> None:
    """Raise ``OutOfBoundsError`` if any of ``accesses`` reads out of range (see module doc).

    With ``data_dependent=False`` the accesses whose index depends on tensor values are skipped:
    they can only be decided for given inputs.
    """
    need_reference: list[Access] = []
    for acc in accesses:
        if acc.data_dependent:
            if data_dependent:
                need_reference.append(acc)
        elif not _check_on_grid(acc):
            need_reference.append(acc)
    if need_reference:
        _check_with_reference(dag, need_reference)


def _check_on_grid(acc: Access) -> bool:
    """Decide ``acc`` exactly by evaluating its index and guards over the axes they use, in
    chunks; False if the grid is too large."""
    exprs = [acc.load.indices[acc.position]] + [c for c, _ in acc.guards]
    axes = list(acc.op.axes) + list(acc.op.reduce_axes)
    used_ids = {id(v) for x in exprs for v in EA.free_vars(x)}
    used = [a for a in axes if id(a) in used_ids]
    extents = [a.extent for a in used]
    if math.prod(extents) > GRID_MAX:
        return False
    n = acc.load.tensor.shape[acc.position]
    blocks = plan_blocks(extents, list(range(len(used))), GRID_CHUNK)
    for box in itertools.product(*[ranges(e, b) for e, b in zip(extents, blocks)]):
        env = {}
        for d, (a, (lo, hi)) in enumerate(zip(used, box)):
            shape = [1] * len(used)
            shape[d] = hi - lo
            env[id(a)] = np.arange(a.lo + lo, a.lo + hi, dtype=np.dtype(a.dtype)).reshape(shape)
        ev = Evaluator(env, {})
        grid = tuple(hi - lo for lo, hi in box)
        with np.errstate(all="ignore"):  # the machine's wrap-around is the semantics
            idx = np.broadcast_to(np.asarray(ev.eval(exprs[0])[0]), grid)
            bad = (idx < 0) | (idx >= n)
            for cond, positive in acc.guards:
                c = np.asarray(ev.eval(cond)[0], dtype=bool)
                bad = bad & (c if positive else ~c)
        if np.any(bad):
            at = np.unravel_index(int(np.argmax(bad)), grid)
            point = ", ".join(f"{a.name}={a.lo + lo + int(p)}" for a, (lo, _), p in zip(used, box, at))
            t = acc.load.tensor
            raise OutOfBoundsError(
                f"compute {acc.op.name!r} reads tensor {t.name!r} out of bounds: index "
                f"{acc.position} of `{acc.load}` is `{exprs[0]}` = {int(idx[at])} at "
                f"{point or 'every point'}, but dimension {acc.position} of {t.name!r} is [0, {n})")
    return True


def _check_with_reference(dag: "ComputeDAG", accesses: list[Access]) -> None:
    placeholders = [t.op for t in dag.tensors if isinstance(t.op, PlaceholderOp)]
    values = dict(zip(placeholders, random_arrays(dag.tensors, seed=0)))  # the tuner's inputs
    try:
        evaluate_ops(dag.ops, values)
    except IndexError as err:
        first = accesses[0]
        raise OutOfBoundsError(
            f"{err}; found by evaluating the computation on random inputs (those the tuner "
            f"measures with), because {first.describe()}, which cannot be proven in range "
            "statically") from None
