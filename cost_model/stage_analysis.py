"""Static analysis of one stage's computation for the features: its op counts and the linear maps
of the buffers it reads (``coef[d, l]``: how much index ``d`` moves when root iterator ``l`` steps).

These depend only on which stages are inlined (inlined producers are substituted into the body),
so they are computed once per (DAG, inline pattern) and cached here, not per state.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from compute import expr as E
from sketch.loop_state import State
from sketch.lower import effective_bodies

from .feature_schema import OP_FEATURES, OPS

# ---- static analysis of a stage's computation (cached per DAG and inline pattern) -------------------

class Access:
    """One buffer a stage's statement reads: the producer stage and the index's linear map."""

    __slots__ = ("producer", "coef", "count")

    def __init__(self, producer: int, coef: np.ndarray, count: int):
        self.producer = producer
        self.coef = coef  # (buffer dims, stage root iterators)
        self.count = count


class Accesses:
    """Every buffer a statement touches, stacked: index maps right-aligned in (buffers, dims,
    root iterators); the written buffer first."""

    __slots__ = ("producers", "a", "abs_a", "count", "is_write")

    def __init__(self, k: int, n_sp: int, n_root: int, reads: dict[int, Access]):
        items = [(k, np.eye(n_sp, n_root), 1, True)] + [
            (p, r.coef, r.count, False) for p, r in reads.items() if p != k]
        dims = max(m.shape[0] for _, m, _, _ in items)
        self.producers = [p for p, _, _, _ in items]
        self.a = np.zeros((len(items), max(dims, 1), n_root))
        for b, (_, m, _, _) in enumerate(items):
            if m.shape[0]:
                self.a[b, self.a.shape[1] - m.shape[0]:, :] = m
        self.abs_a = np.abs(self.a)
        self.count = np.array([c for _, _, c, _ in items], dtype=float)
        self.is_write = np.array([w for _, _, _, w in items])


class StageInfo:
    __slots__ = ("ops", "reads", "is_reduce", "flops", "n_sp", "n_root", "_acc")

    def __init__(self, ops: np.ndarray, reads: dict[int, Access], is_reduce: bool, flops: float,
                 n_sp: int, n_root: int):
        self.ops = ops
        self.reads = reads
        self.is_reduce = is_reduce
        self.flops = flops
        self.n_sp = n_sp
        self.n_root = n_root
        self._acc: Accesses | None = None

    def accesses(self, k: int) -> Accesses:
        if self._acc is None:
            self._acc = Accesses(k, self.n_sp, self.n_root, self.reads)
        return self._acc


def _linearize(e: E.Expr, cols: dict[int, int], n: int, memo: dict[int, np.ndarray]) -> np.ndarray:
    """Coefficients of ``e`` in the stage's root iterators. Exact for affine indices; div/mod by a
    constant is approximated by its average slope, anything else by its first operand."""
    return E.fold(e, lambda x, ks: _linearize_node(x, ks, cols, n), memo)  # type: ignore[arg-type,return-value]


def _linearize_node(e: E.Expr, kids: list, cols: dict[int, int], n: int) -> np.ndarray:
    """One node of ``_linearize``, its operands' coefficients (``children()`` order) given."""
    out: np.ndarray
    if isinstance(e, E.Var):
        out = np.zeros(n)
        c = cols.get(id(e))
        if c is not None:
            out[c] = 1.0
    elif isinstance(e, E.Binary):
        a, b = kids
        if e.op == "add":
            out = a + b
        elif e.op == "sub":
            out = a - b
        elif e.op == "mul":
            ca = e.a.value if isinstance(e.a, E.Const) else None
            cb = e.b.value if isinstance(e.b, E.Const) else None
            out = a * float(cb) if cb is not None else (b * float(ca) if ca is not None else a + b)
        elif e.op in ("floordiv", "div") and isinstance(e.b, E.Const) and e.b.value:
            out = a / float(e.b.value)
        else:
            out = a
    elif isinstance(e, E.Cast):
        out = kids[0]
    elif isinstance(e, E.Select):
        out = kids[1]  # the true value
    else:
        out = np.zeros(n)
    return out


def _count_ops(body: E.Expr) -> np.ndarray:
    """Operations per point of the statement, by Ansor's categories (index arithmetic excluded:
    it is strength-reduced by the compiler)."""
    ops = np.zeros(len(OP_FEATURES))
    stack: list[E.Expr] = [body]
    if isinstance(body, E.Reduce):
        src = body.source
        pre = "float_" if body.dtype.startswith("float") else "int_"
        if body.combiner == "sum":
            if isinstance(src, E.Binary) and src.op == "mul":
                ops[OPS[pre + "mad"]] += 1
                stack = [src.a, src.b]
            else:
                ops[OPS[pre + "addsub"]] += 1
                stack = [src]
        else:
            ops[OPS[pre + "cmp"]] += 1
            stack = [src]
        if body.where is not None:
            stack.append(body.where)
            ops[OPS["select_op"]] += 1
    # The walk visits the expression as a tree. Nodes are shared (interned), so instead of
    # following every path, count how many paths reach each distinct node (parents before
    # children, in reverse post-order) and weight its operation by that: linear in the distinct
    # nodes and without recursion, with the tree walk's totals.
    steps: dict[int, tuple[int | None, list[E.Expr]]] = {}
    order: list[E.Expr] = []
    for root in stack:
        work: list[tuple[E.Expr, bool]] = [(root, False)]
        while work:
            x, done = work.pop()
            if done:
                order.append(x)
                continue
            if id(x) in steps:
                continue
            steps[id(x)] = _op_step(x)
            work.append((x, True))
            work.extend((c, False) for c in reversed(steps[id(x)][1]) if id(c) not in steps)
    paths: dict[int, float] = {}
    for root in stack:
        paths[id(root)] = paths.get(id(root), 0.0) + 1.0
    for x in reversed(order):
        m = paths.get(id(x), 0.0)
        feat, kids = steps[id(x)]
        if feat is not None:
            ops[feat] += m
        for c in kids:
            paths[id(c)] = paths.get(id(c), 0.0) + m
    return ops


def _op_step(x: E.Expr) -> tuple[int | None, list[E.Expr]]:
    """The operation feature ``x`` counts (None: none) and the nodes the walk goes on to."""
    if isinstance(x, (E.Const, E.Var, E.TensorLoad)):
        return None, []
    fl = x.dtype.startswith("float")
    pre = "float_" if fl else "int_"
    if isinstance(x, E.Binary):
        if x.op in ("and", "or"):
            return OPS["bool_op"], [x.a, x.b]
        if x.op in ("add", "sub"):
            m = x.a if isinstance(x.a, E.Binary) and x.a.op == "mul" else (
                x.b if isinstance(x.b, E.Binary) and x.b.op == "mul" else None)
            if m is not None:
                other = x.b if m is x.a else x.a
                return OPS[pre + "mad"], [m.a, m.b, other]
            return OPS[pre + "addsub"], [x.a, x.b]
        if x.op == "mul":
            return OPS[pre + "mul"], [x.a, x.b]
        if x.op in ("div", "floordiv", "floormod"):
            return OPS[pre + "divmod"], [x.a, x.b]
        return OPS[pre + "cmp"], [x.a, x.b]  # min / max
    if isinstance(x, E.Compare):
        return OPS[("float_" if x.a.dtype.startswith("float") else "int_") + "cmp"], [x.a, x.b]
    if isinstance(x, E.Call):
        return OPS[pre + "math_func"], list(x.args)
    if isinstance(x, E.Select):
        return OPS["select_op"], [x.cond, x.true_value, x.false_value]
    if isinstance(x, E.Unary):
        return OPS["bool_op" if x.op == "not" else pre + "other_func"], [x.a]
    if isinstance(x, E.Cast):
        return OPS[pre + "other_func"], [x.value]
    return None, list(x.children())


def stage_infos(state: State) -> dict[int, StageInfo]:
    """Per non-inlined compute stage: op counts and read accesses, cached by inline pattern."""
    stages = state.stages
    key = tuple((s.op.name, s.op.shape, s.compute_at == "inline",
                 tuple(a.extent for a in getattr(s.op, "reduce_axes", ()))) for s in stages)
    per_dag = _STATIC_CACHE.setdefault(id(state.dag), (state.dag, {}))[1]
    got = per_dag.get(key)
    if got is not None:
        return got
    producer_of = state.producer_map()
    bodies = effective_bodies(state, producer_of)
    infos: dict[int, StageInfo] = {}
    for k, body in bodies.items():
        s = stages[k]
        if s.compute_at == "inline":
            continue
        op = s.op
        roots = list(op.axes) + list(op.reduce_axes)
        cols = {id(v): i for i, v in enumerate(roots)}
        memo: dict[int, np.ndarray] = {}
        reads: dict[int, Access] = {}
        for n in E.post_order(body):
            if isinstance(n, E.TensorLoad):
                p = producer_of.get(id(n.tensor))
                if p is None:
                    continue
                coef = np.array([_linearize(i, cols, len(roots), memo) for i in n.indices])
                coef = coef.reshape(len(n.indices), len(roots))
                if p in reads:
                    reads[p].count += 1
                else:
                    reads[p] = Access(p, coef, 1)
        ops = _count_ops(body)
        flops = float(ops[:7].sum() + ops[0])  # an FMA is two flops
        infos[k] = StageInfo(ops, reads, isinstance(body, E.Reduce), flops, len(op.axes), len(roots))
    per_dag[key] = infos
    if len(_STATIC_CACHE) > 64:  # DAGs come and go in long sessions; keep the cache bounded
        _STATIC_CACHE.pop(next(iter(_STATIC_CACHE)))
    return infos


_STATIC_CACHE: dict[int, tuple[Any, dict]] = {}
