"""The numpy evaluation engine of the reference evaluator: one compute over a broadcast grid.

``compute.reference`` is the public oracle (whole DAGs, checked inputs); this module evaluates one
operation at a time from the values of its producers, and draws the random inputs every checker
uses. It knows nothing of ``ComputeDAG`` (a list of operations in topological order is enough), so
``compute.access_bounds``, which the DAG calls to check its reads, can evaluate with it.

The semantics (machine arithmetic, float64 intrinsics and sums, out-of-bounds masks) are described
in ``compute.reference``.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from . import dtype as dt
from . import expr as E
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

# Largest number of grid points evaluated at once (a float32 grid of this size is 32 MB).
CHUNK_ELEMS = 1 << 23

_Value = tuple[np.ndarray, "np.ndarray | None"]  # (value, out-of-bounds mask or None = all in bounds)


def evaluate_ops(ops: Sequence[Operation], values: dict[Operation, np.ndarray],
                 chunk_elems: int = CHUNK_ELEMS) -> dict[Operation, np.ndarray]:
    """Evaluate every compute of ``ops`` (topologically ordered) into ``values``, which holds the
    placeholders' arrays on entry; returns ``values``. An out-of-bounds read is an IndexError."""
    with np.errstate(all="ignore"):  # wrap-around, division by zero and NaNs are user semantics
        for op in ops:
            if isinstance(op, ComputeOp):
                values[op] = eval_compute(op, values, chunk_elems)
    return values


def random_arrays(tensors: Sequence[Tensor], seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the placeholders among ``tensors`` (a DAG's arguments), in order.

    Floats are uniform in [-1, 1); integers are small so that sums and products of a few of them
    neither overflow nor hide index bugs behind repeated values.
    """
    rng = np.random.default_rng(seed)
    out = []
    for t in tensors:
        if not isinstance(t.op, PlaceholderOp):
            continue
        d, shape = t.dtype, t.shape
        if dt.is_float(d):
            # Drawn in the target dtype: 2*u - 1 is then exact and stays below 1.0, whereas rounding
            # a float64 draw to float32 could produce exactly 1.0.
            u = rng.random(shape, dtype=np.dtype(d))
            arr = (2 * u - 1).astype(d)
        elif d == "bool":
            arr = rng.integers(0, 2, shape).astype(bool)
        elif dt.is_signed(d):
            arr = rng.integers(-8, 8, shape, dtype=np.dtype(d))
        else:
            arr = rng.integers(0, 16, shape, dtype=np.dtype(d))
        # np.require, not ascontiguousarray: that one makes a scalar argument (shape ()) 1-D.
        out.append(np.require(arr, requirements="C"))
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64, absolute error about 1e-15 everywhere (scipy is not a dependency).

    |x| < 2.5: erf(x) = 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (2n+1)!!, a series of positive
    terms, so no cancellation. Above: 1 - erfc(x) with erfc from its continued fraction, which
    converges fast there; erfc is below 1e-3 so its small relative error is negligible absolutely.
    """
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    small = ax < 2.5
    xs = np.where(small, ax, 0.0)
    x2 = xs * xs
    term = xs.copy()
    total = xs.copy()
    for n in range(1, 200):
        term = term * (2.0 * x2) / (2 * n + 1)
        total += term
        if not np.any(term > 1e-17 * total):
            break
    series = (2.0 / math.sqrt(math.pi)) * np.exp(-x2) * total
    # NaN must survive, and huge values are clamped where erfc has long underflowed to zero.
    xl = np.where(small, 2.5, np.minimum(ax, 30.0))
    f = xl.copy()
    for k in range(40, 0, -1):
        f = xl + (k / 2.0) / f
    tail = 1.0 - np.exp(-xl * xl) / (math.sqrt(math.pi) * f)
    return np.copysign(np.where(small, series, tail), x)


# ---- one compute --------------------------------------------------------------------------------

def plan_blocks(extents: list[int], split_order: list[int], limit: int) -> list[int]:
    """Block size per grid dimension so that a block has at most ``limit`` points (or one row)."""
    blocks = list(extents)
    size = math.prod(extents)
    for d in split_order:
        if size <= limit:
            break
        other = size // extents[d]
        blocks[d] = max(1, min(extents[d], limit // other)) if other else extents[d]
        size = other * blocks[d]
    return blocks


def ranges(extent: int, block: int) -> list[tuple[int, int]]:
    return [(s, min(s + block, extent)) for s in range(0, extent, block)]


def eval_compute(op: ComputeOp, values: dict[Operation, np.ndarray], limit: int) -> np.ndarray:
    body = op.body
    red = body if isinstance(body, E.Reduce) else None
    axes: list[E.IterVar] = list(op.axes) + (list(red.axes) if red is not None else [])
    ns = len(op.axes)
    extents = [a.extent for a in axes]
    # Reduce axes are split first: that only adds Python iterations of the accumulation loop, while
    # splitting spatial axes would also shrink the vectorised rows.
    blocks = plan_blocks(extents, list(range(ns, len(axes))) + list(range(ns)), limit)
    out = np.empty(op.shape, dtype=op.dtype)
    sp_ranges = [ranges(e, b) for e, b in zip(extents[:ns], blocks[:ns])]
    rd_ranges = [ranges(e, b) for e, b in zip(extents[ns:], blocks[ns:])]
    for sp in itertools.product(*sp_ranges):
        sp_shape = tuple(b - a for a, b in sp)
        acc = None
        for rd in itertools.product(*rd_ranges):
            box = list(sp) + list(rd)
            part = _eval_box(op, axes, box, values)
            if red is None:
                acc = part
            elif acc is None:
                acc = part
            elif red.combiner == "sum":
                acc = acc + part
            elif red.combiner == "max":
                acc = np.maximum(acc, part)
            else:
                acc = np.minimum(acc, part)
        assert acc is not None
        out[tuple(slice(a, b) for a, b in sp)] = np.broadcast_to(acc, sp_shape).astype(op.dtype, copy=False)
    return out


def _eval_box(op: ComputeOp, axes: list[E.IterVar], box: list[tuple[int, int]],
              values: dict[Operation, np.ndarray]) -> np.ndarray:
    """Evaluate the body over one sub-box of the grid; reductions are folded over their part."""
    nd = len(axes)
    env: dict[int, np.ndarray] = {}
    for d, (a, (s, e)) in enumerate(zip(axes, box)):
        shape = [1] * nd
        shape[d] = e - s
        env[id(a)] = np.arange(a.lo + s, a.lo + e, dtype=np.dtype(a.dtype)).reshape(shape)
    ev = Evaluator(env, values)
    grid = tuple(e - s for s, e in box)
    body = op.body
    if not isinstance(body, E.Reduce):
        val, oob = ev.eval(body)
        if oob is not None and np.any(oob):
            _raise_oob(op, body, axes, box, oob, values)
        return np.asarray(val)
    src, oob = ev.eval(body.source)
    src = np.broadcast_to(src, grid)
    ident = np.asarray(E.reduce_identity(body.combiner, body.dtype).value, dtype=body.dtype)
    if body.where is not None:
        cond, oob_w = ev.eval(body.where)
        if oob is not None:
            oob = oob & cond
        oob = _or(oob, oob_w)
        src = np.where(cond, src, ident)
        src = np.broadcast_to(src, grid)
    if oob is not None and np.any(oob):
        _raise_oob(op, body, axes, box, oob, values)
    rdims = tuple(range(len(op.axes), nd))
    if body.combiner == "sum":
        # float32 sums accumulate in float64: the oracle should be more accurate than the kernels
        # it checks, whose own float32 accumulation error is what the test tolerance absorbs.
        # Integer sums stay in their dtype so that they wrap exactly like the machine code.
        acc_dtype = np.float64 if dt.is_float(body.dtype) else np.dtype(body.dtype)
        return np.sum(src, axis=rdims, dtype=acc_dtype)
    if body.combiner == "max":
        return np.max(src, axis=rdims)
    return np.min(src, axis=rdims)


def _or(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _raise_oob(op: ComputeOp, body: E.Expr, axes: list[E.IterVar], box: list[tuple[int, int]],
               oob: np.ndarray, values: dict[Operation, np.ndarray]) -> None:
    grid = tuple(e - s for s, e in box)
    pos = np.unravel_index(int(np.argmax(np.broadcast_to(oob, grid))), grid)
    point = {id(a): np.asarray(a.lo + s + int(p), dtype=np.dtype(a.dtype))
             for a, (s, _), p in zip(axes, box, pos)}
    where_txt = ", ".join(f"{a.name}={int(point[id(a)])}" for a in axes)
    ev = Evaluator(point, values)
    roots = [body.source, body.where] if isinstance(body, E.Reduce) else [body]
    culprit = None
    for r in roots:
        if r is None:
            continue
        ev.eval(r)
        culprit = ev.find_oob(r)
        if culprit is not None:
            break
    if culprit is None:  # pragma: no cover - the vectorised and the point evaluation disagree
        raise IndexError(f"compute {op.name!r} reads out of bounds at {where_txt}")
    load, idx = culprit
    t = load.tensor
    raise IndexError(
        f"compute {op.name!r} reads tensor {t.name!r} out of bounds: {t.name}{list(idx)} is outside "
        f"shape {list(t.shape)} (access `{load}` at {where_txt})"
    )


class Evaluator:
    """Evaluates expressions over one grid; every result is memoised per node (nodes are interned)."""

    def __init__(self, env: dict[int, np.ndarray], values: dict[Operation, np.ndarray]):
        self.env = env
        self.values = values
        self.memo: dict[int, _Value] = {}
        self.load_idx: dict[int, list[np.ndarray]] = {}  # unclipped indices, for error reports

    def eval(self, e: E.Expr) -> _Value:
        r = self.memo.get(id(e))
        if r is None:
            # Operands first, from an explicit stack (any depth): each node's own evaluation then
            # finds them memoised. A select's arms and a load's indices are its own operands too.
            stack = [e]
            while stack:
                n = stack[-1]
                if id(n) in self.memo:
                    stack.pop()
                    continue
                pending = [c for c in n.children() if id(c) not in self.memo]
                if pending:
                    stack.extend(reversed(pending))
                    continue
                stack.pop()
                self.memo[id(n)] = self._eval(n)
            r = self.memo[id(e)]
        return r

    def _eval(self, e: E.Expr) -> _Value:
        if isinstance(e, E.Const):
            return _const(e), None
        if isinstance(e, E.Var):
            v = self.env.get(id(e))
            if v is None:
                raise ValueError(f"free variable {e.name!r} in a compute body")
            return v, None
        if isinstance(e, E.TensorLoad):
            return self._load(e)
        if isinstance(e, E.Select):
            c, mc = self.eval(e.cond)
            t, mt = self.eval(e.true_value)
            f, mf = self.eval(e.false_value)
            m = None
            if mt is not None or mf is not None:
                m = np.where(c, False if mt is None else mt, False if mf is None else mf)
            return np.where(c, t, f), _or(m, mc)
        if isinstance(e, E.Reduce):
            raise ValueError("a reduction nested inside an expression")  # rejected by te.compute
        kids = [self.eval(c) for c in e.children()]
        mask = None
        for _, m in kids:
            mask = _or(mask, m)
        args = [v for v, _ in kids]
        if isinstance(e, E.Binary):
            return _binary(e.op, args[0], args[1]), mask
        if isinstance(e, E.Compare):
            return _COMPARE[e.op](args[0], args[1]), mask
        if isinstance(e, E.Unary):
            return (np.negative(args[0]) if e.op == "neg" else np.logical_not(args[0])), mask
        if isinstance(e, E.Call):
            return _call(e.name, e.dtype, args), mask
        if isinstance(e, E.Cast):
            return _cast(args[0], e.value.dtype, e.dtype), mask
        raise TypeError(f"the reference evaluator does not know {type(e).__name__}")

    def _load(self, e: E.TensorLoad) -> _Value:
        t = e.tensor
        arr = self.values[t.op]
        mask = None
        idx = []
        raw = []
        for i, n in zip(e.indices, t.shape):
            v, m = self.eval(i)
            mask = _or(mask, m)
            v = np.asarray(v)
            if v.dtype.itemsize < 4:
                v = v.astype(np.int64)  # so that clipping bounds fit the index dtype
            raw.append(v)
            if v.size and (v.min() < 0 or v.max() >= n):
                mask = _or(mask, (v < 0) | (v >= n))
                v = np.clip(v, 0, n - 1)
            idx.append(v)
        self.load_idx[id(e)] = raw
        return arr[tuple(idx)], mask

    def find_oob(self, e: E.Expr) -> tuple[E.TensorLoad, list[int]] | None:
        """Below a node whose (point) mask is set, the load that is really out of bounds.

        A depth-first search (children left to right, a select only into the arm it takes), from
        an explicit stack so that any depth works."""
        stack: list[tuple[E.Expr, bool]] = [(e, False)]  # (node, its children found nothing)
        while stack:
            n, after = stack.pop()
            if after:
                return n, [int(v) for v in self.load_idx[id(n)]]  # type: ignore[return-value]
            if self.memo[id(n)][1] is None or not np.any(self.memo[id(n)][1]):
                continue
            if isinstance(n, E.Select):
                taken = n.true_value if bool(self.memo[id(n.cond)][0]) else n.false_value
                stack.extend(((taken, False), (n.cond, False)))
                continue
            if isinstance(n, E.TensorLoad):
                stack.append((n, True))
            stack.extend((c, False) for c in reversed(n.children()))
        return None


# ---- scalar semantics ---------------------------------------------------------------------------

def _const(c: E.Const) -> np.ndarray:
    v = c.value
    if dt.is_int(c.dtype):
        # te.const does not wrap literals (e.g. 200 next to an int8 value); C conversion does.
        lo, hi = E.int_range(c.dtype)
        v = (int(v) - lo) % (hi - lo + 1) + lo
    return np.asarray(v, dtype=np.dtype(c.dtype))


_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}
_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "floordiv": np.floor_divide, "floormod": np.remainder, "min": np.minimum,
          "max": np.maximum, "and": np.logical_and, "or": np.logical_or}


def _binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # numpy's floor_divide / remainder have Python's floor semantics for ints and floats alike, and
    # arithmetic on same-dtype integer arrays wraps in two's complement: both what the DSL means.
    return _ARITH[op](a, b)


def _call(name: str, dtype: str, args: list[np.ndarray]) -> np.ndarray:
    x = args[0]
    if name == "abs":
        return np.abs(x)
    if name == "floor":
        return np.floor(x)
    if name == "ceil":
        return np.ceil(x)
    if name == "trunc":
        return np.trunc(x)
    if name == "round":
        # Half away from zero (C's roundf), not numpy's half-to-even. x - trunc(x) is exact.
        t = np.trunc(x)
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(dtype, copy=False)
    # Transcendentals in float64, rounded once to the dtype: a more accurate oracle.
    y = np.asarray(x, dtype=np.float64)
    if name == "exp":
        r = np.exp(y)
    elif name == "log":
        r = np.log(y)
    elif name == "sqrt":
        r = np.sqrt(y)
    elif name == "rsqrt":
        r = 1.0 / np.sqrt(y)
    elif name == "tanh":
        r = np.tanh(y)
    elif name == "sigmoid":
        r = 1.0 / (1.0 + np.exp(-y))
    elif name == "erf":
        r = erf(y)
    elif name == "pow":
        r = np.power(y, np.asarray(args[1], dtype=np.float64))
    else:  # pragma: no cover - E.call validates names
        raise ValueError(f"unknown math function {name!r}")
    return r.astype(dtype)


def _cast(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    x = np.asarray(x)
    if dst == "bool":
        return x != 0
    if dt.is_float(src) and dt.is_int(dst) and dt.bits(dst) < 32:
        # Out-of-range float->int is undefined in C; x86 code converts to 32 bits and truncates
        # the bit pattern, so do the same instead of numpy's platform-dependent answer.
        return x.astype(np.int32).astype(dst)
    # astype truncates floats toward zero, wraps integers and maps bools to 0/1, as C does.
    return x.astype(dst)
