"""Program features: one fixed-length vector per store statement of a schedule, for the cost model.

The search scores ~10,000 candidate programs per round, so features are computed from the loop
``State`` directly, never by lowering (lowering costs ~5 ms a state). Each non-inlined compute stage
is one store statement; its loop nest is the chain of loops it is computed inside (its attach
target's loops, recursively) followed by its own loops. Everything about memory follows from two
small matrices per access, computed with numpy:

* ``coef[d, l]``: how much index ``d`` of the buffer moves when loop ``l`` steps by one (exact for
  the split trees tiling builds; a fused loop moves like its innermost part);
* ``span[d, l]``: how far index ``d`` ranges while loop ``l`` runs over its extent.

From them come strides, the region touched inside every loop level (bounding box, capped at the
buffer's shape), cache lines, reuse, and the arithmetic-intensity curve. The access indices and op
counts of a stage's computation (with inlined producers substituted) depend only on which stages
are inlined, so they are computed once per (DAG, inline pattern) and cached.

The schema follows Ansor's program features (computation counts; vectorize / unroll / parallel
lengths and positions; per-buffer access for the top five buffers; arithmetic intensity; allocation;
loop-nest summary), values scaled by sign(x) * log2(1 + |x|). ``FEATURE_NAMES`` lists every entry
with a one-line comment; ``FEATURE_VERSION`` changes whenever the meaning of any entry does, and is
stored with every saved model. The reduction's initialisation store is not a separate row: it
writes each output point once, which the update's write access already describes.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Sequence

import numpy as np

from compute import dtype as dt
from compute import expr as E
from compute.tensor import ComputeOp
from sketch.loop_state import Memo
from sketch.loop_state import iterator_extents
from sketch.lower import effective_bodies

logger = logging.getLogger("ansor.features")

FEATURE_VERSION = "ansor-py-features-1"
CACHE_LINE = 64
NUM_BUFFERS = 5  # buffers described per statement, most bytes first
CURVE_POINTS = 10

# ---- the schema ------------------------------------------------------------------------------------

_OP_FEATURES = [
    ("float_mad", "float multiply-adds (a*b+c), over the whole loop nest"),
    ("float_addsub", "float additions and subtractions"),
    ("float_mul", "float multiplications"),
    ("float_divmod", "float divisions"),
    ("float_cmp", "float comparisons, min and max"),
    ("float_math_func", "float math calls (exp, log, tanh, sqrt, ...)"),
    ("float_other_func", "other float operations (casts to float, negation)"),
    ("int_mad", "integer multiply-adds"),
    ("int_addsub", "integer additions and subtractions"),
    ("int_mul", "integer multiplications"),
    ("int_divmod", "integer division and modulo"),
    ("int_cmp", "integer comparisons, min and max"),
    ("int_math_func", "integer math calls (abs)"),
    ("int_other_func", "other integer operations (casts, negation)"),
    ("bool_op", "logical and / or / not"),
    ("select_op", "selects (if-then-else expressions)"),
]
_ANNOT_FEATURES = []
for _kind, _what in (("vec", "vectorized"), ("unroll", "unrolled"), ("parallel", "parallel")):
    _ANNOT_FEATURES += [
        (f"{_kind}_num", f"number of {_what} loops around the statement"),
        (f"{_kind}_prod", f"product of the extents of the {_what} loops"),
        (f"{_kind}_len", f"extent of the innermost {_what} loop"),
    ]
    for _pos in ("none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce",
                 "middle_reduce", "outer_reduce", "mixed"):
        _ANNOT_FEATURES.append((f"{_kind}_pos_{_pos}", f"one-hot: {_what} loop position is {_pos}"))
_BUFFER_FEATURES = [
    ("acc_read", "one-hot access type: read only"),
    ("acc_write", "one-hot access type: write only"),
    ("acc_readwrite", "one-hot access type: read and write (an accumulator)"),
    ("bytes", "bytes accessed over the whole loop nest (with repetition)"),
    ("unique_bytes", "distinct bytes touched over the whole loop nest"),
    ("lines", "cache lines accessed over the whole loop nest (with repetition)"),
    ("unique_lines", "distinct cache lines touched"),
    ("reuse_loop", "one-hot reuse type: carried by a loop the index does not depend on"),
    ("reuse_serial", "one-hot reuse type: read and written by the same statement, no carrying loop"),
    ("reuse_none", "one-hot reuse type: no reuse"),
    ("reuse_dis_iter", "iterations between reuses (product of the loops inside the reusing loop)"),
    ("reuse_dis_bytes", "bytes touched by the statement between reuses"),
    ("reuse_ct", "times each element is reused (extent of the reusing loop)"),
    ("bytes_d_reuse_ct", "bytes / reuse count"),
    ("unique_bytes_d_reuse_ct", "unique bytes / reuse count"),
    ("lines_d_reuse_ct", "lines / reuse count"),
    ("unique_lines_d_reuse_ct", "unique lines / reuse count"),
    ("stride", "elements the index moves per step of the innermost loop that moves it"),
]
_TAIL_FEATURES = (
    [(f"ai_curve_{i}", f"arithmetic intensity (flops / unique bytes) at loop depth {i} of "
      f"{CURVE_POINTS}, outermost first") for i in range(CURVE_POINTS)]
    + [
        ("alloc_size", "bytes of the statement's own buffer when it is a temporary (else 0)"),
        ("alloc_prod", "alloc_size x the number of times it is (re)filled"),
        ("alloc_outer_prod", "product of the loops outside the buffer's allocation"),
        ("alloc_inner_prod", "product of the statement's own loops"),
        ("outer_prod", "product of every loop extent around the statement (iterations)"),
        ("num_loops", "number of loops around the statement"),
        ("auto_unroll_max_step", "the auto_unroll_max_step pragma of the stage"),
        ("is_reduction", "1 if the statement accumulates (a reduction update)"),
        ("pad_waste", "iterations / useful iterations (guards of non-divisible splits)"),
    ]
)

FEATURE_DOCS: list[tuple[str, str]] = (
    _OP_FEATURES + _ANNOT_FEATURES
    + [(f"B{b}.{n}", c) for b in range(NUM_BUFFERS) for n, c in _BUFFER_FEATURES]
    + _TAIL_FEATURES
)
FEATURE_NAMES: list[str] = [n for n, _ in FEATURE_DOCS]
NUM_FEATURES = len(FEATURE_NAMES)

_OPS = {n: i for i, (n, _) in enumerate(_OP_FEATURES)}
_ANNOT_BASE = {"vec": len(_OP_FEATURES), "unroll": len(_OP_FEATURES) + 11,
               "parallel": len(_OP_FEATURES) + 22}
_POS = {"none": 0, "inner_spatial": 1, "middle_spatial": 2, "outer_spatial": 3, "inner_reduce": 4,
        "middle_reduce": 5, "outer_reduce": 6, "mixed": 7}
_BUF_BASE = len(_OP_FEATURES) + len(_ANNOT_FEATURES)
_NB = len(_BUFFER_FEATURES)
_TAIL_BASE = _BUF_BASE + NUM_BUFFERS * _NB
assert _TAIL_BASE + len(_TAIL_FEATURES) == NUM_FEATURES


# ---- static analysis of a stage's computation (cached per DAG and inline pattern) -------------------

class _Access:
    """One buffer a stage's statement reads: the producer stage and the index's linear map."""

    __slots__ = ("producer", "coef", "count")

    def __init__(self, producer: int, coef: np.ndarray, count: int):
        self.producer = producer
        self.coef = coef  # (buffer dims, stage root iterators)
        self.count = count


class _Accesses:
    """Every buffer a statement touches, stacked: index maps right-aligned in (buffers, dims,
    root iterators); the written buffer first."""

    __slots__ = ("producers", "a", "abs_a", "count", "is_write")

    def __init__(self, k: int, n_sp: int, n_root: int, reads: dict[int, _Access]):
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


class _StageInfo:
    __slots__ = ("ops", "reads", "is_reduce", "flops", "n_sp", "n_root", "_acc")

    def __init__(self, ops: np.ndarray, reads: dict[int, _Access], is_reduce: bool, flops: float,
                 n_sp: int, n_root: int):
        self.ops = ops
        self.reads = reads
        self.is_reduce = is_reduce
        self.flops = flops
        self.n_sp = n_sp
        self.n_root = n_root
        self._acc: _Accesses | None = None

    def accesses(self, k: int) -> _Accesses:
        if self._acc is None:
            self._acc = _Accesses(k, self.n_sp, self.n_root, self.reads)
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
    ops = np.zeros(len(_OP_FEATURES))
    stack: list[E.Expr] = [body]
    if isinstance(body, E.Reduce):
        src = body.source
        pre = "float_" if body.dtype.startswith("float") else "int_"
        if body.combiner == "sum":
            if isinstance(src, E.Binary) and src.op == "mul":
                ops[_OPS[pre + "mad"]] += 1
                stack = [src.a, src.b]
            else:
                ops[_OPS[pre + "addsub"]] += 1
                stack = [src]
        else:
            ops[_OPS[pre + "cmp"]] += 1
            stack = [src]
        if body.where is not None:
            stack.append(body.where)
            ops[_OPS["select_op"]] += 1
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
            return _OPS["bool_op"], [x.a, x.b]
        if x.op in ("add", "sub"):
            m = x.a if isinstance(x.a, E.Binary) and x.a.op == "mul" else (
                x.b if isinstance(x.b, E.Binary) and x.b.op == "mul" else None)
            if m is not None:
                other = x.b if m is x.a else x.a
                return _OPS[pre + "mad"], [m.a, m.b, other]
            return _OPS[pre + "addsub"], [x.a, x.b]
        if x.op == "mul":
            return _OPS[pre + "mul"], [x.a, x.b]
        if x.op in ("div", "floordiv", "floormod"):
            return _OPS[pre + "divmod"], [x.a, x.b]
        return _OPS[pre + "cmp"], [x.a, x.b]  # min / max
    if isinstance(x, E.Compare):
        return _OPS[("float_" if x.a.dtype.startswith("float") else "int_") + "cmp"], [x.a, x.b]
    if isinstance(x, E.Call):
        return _OPS[pre + "math_func"], list(x.args)
    if isinstance(x, E.Select):
        return _OPS["select_op"], [x.cond, x.true_value, x.false_value]
    if isinstance(x, E.Unary):
        return _OPS["bool_op" if x.op == "not" else pre + "other_func"], [x.a]
    if isinstance(x, E.Cast):
        return _OPS[pre + "other_func"], [x.value]
    return None, list(x.children())


def _stage_infos(state: Any) -> dict[int, _StageInfo]:
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
    infos: dict[int, _StageInfo] = {}
    for k, body in bodies.items():
        s = stages[k]
        if s.compute_at == "inline":
            continue
        op = s.op
        roots = list(op.axes) + list(op.reduce_axes)
        cols = {id(v): i for i, v in enumerate(roots)}
        memo: dict[int, np.ndarray] = {}
        reads: dict[int, _Access] = {}
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
                    reads[p] = _Access(p, coef, 1)
        ops = _count_ops(body)
        flops = float(ops[:7].sum() + ops[0])  # an FMA is two flops
        infos[k] = _StageInfo(ops, reads, isinstance(body, E.Reduce), flops, len(op.axes), len(roots))
    per_dag[key] = infos
    if len(_STATIC_CACHE) > 64:  # DAGs come and go in long sessions; keep the cache bounded
        _STATIC_CACHE.pop(next(iter(_STATIC_CACHE)))
    return infos


_STATIC_CACHE: dict[int, tuple[Any, dict]] = {}


# ---- per-state loop nests -----------------------------------------------------------------------

class _Nest:
    """The loops around one stage's statement, outermost first, and how its root iterators move."""

    __slots__ = ("ext", "ann", "red", "coef", "span", "n_enc", "own_ext", "region", "useful")

    def __init__(self, ext, ann, red, coef, span, n_enc, own_ext, region, useful):
        self.ext = ext          # np.ndarray (L,) loop extents
        self.ann = ann          # list[str] annotation per loop
        self.red = red          # list[bool] reduce loop?
        self.coef = coef        # (roots, L): root iterator change per loop step
        self.span = span        # (roots, L): root iterator range while the loop runs
        self.n_enc = n_enc      # loops belonging to the attach chain
        self.own_ext = own_ext  # per persistent iterator id of the stage
        self.region = region    # extents of the stage's spatial axes (its buffer if local)
        self.useful = useful    # iterations that do real work (without guard waste)


def _iter_maps(stage: Any, ext: list[int], n_root: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per persistent iterator: its step (coef) and range (span) in root-iterator units."""
    n = len(stage.iters)
    coef: list[np.ndarray | None] = [None] * n
    span: list[np.ndarray | None] = [None] * n
    for r in range(n_root):
        v = np.zeros(n_root)
        v[r] = 1.0
        coef[r] = v
        span[r] = v * (ext[r] - 1)
    for rel in stage.relations:
        if hasattr(rel, "children"):
            pc = coef[rel.parent]
            ps = span[rel.parent]
            stride = 1.0
            for c in reversed(rel.children):
                coef[c] = pc * stride
                span[c] = np.minimum(pc * (stride * (ext[c] - 1)), ps)
                stride *= ext[c]
        else:
            coef[rel.child] = coef[rel.parents[-1]]
            acc = span[rel.parents[0]]
            for q in rel.parents[1:]:
                acc = acc + span[q]
            span[rel.child] = acc
    return coef, span  # type: ignore[return-value]


def _nests(state: Any, infos: dict[int, _StageInfo]) -> dict[int, _Nest]:
    stages = state.stages
    nests: dict[int, _Nest] = {}
    for k in reversed(range(len(stages))):
        if k not in infos:
            continue
        s = stages[k]
        op = s.op
        n_sp = len(op.axes)
        n_root = s.n_root
        if s.compute_at == "iter" and s.attach is not None:
            tid, it_id = s.attach
            tn = nests.get(tid)
            if tn is None or it_id not in stages[tid].leaves:
                raise ValueError(f"stage {s.name}: attach target is not computed before it")
            n_enc = tn.n_enc + stages[tid].leaves.index(it_id) + 1
            # The region comes from a reader's index over the reader's loops inside the attach
            # point; the reader's loops share the attach chain as their prefix.
            reader = tid if k in infos[tid].reads else next(
                (r for r in nests if k in infos[r].reads), tid)
            rn = nests[reader]
            acc = infos[reader].reads.get(k)
            if acc is None:
                raise ValueError(f"stage {s.name} is computed at a loop but nothing reads it")
            a = np.abs(acc.coef)
            inner = (a @ rn.span[:, n_enc:]).sum(axis=1) if rn.span.shape[1] > n_enc else np.zeros(n_sp)
            region = [int(min(op.shape[d], 1 + round(inner[d]))) for d in range(n_sp)]
            enc_coef = acc.coef @ rn.coef[:, :n_enc]
            enc_span = a @ rn.span[:, :n_enc]
            enc_ext, enc_ann, enc_red = rn.ext[:n_enc], rn.ann[:n_enc], rn.red[:n_enc]
        else:
            n_enc = 0
            region = list(op.shape)
            enc_coef = enc_span = np.zeros((n_sp, 0))
            enc_ext, enc_ann, enc_red = np.zeros(0), [], []
        root_ext = region + [ax.extent for ax in op.reduce_axes]
        ext = iterator_extents(s, root_ext)
        ic, isp = _iter_maps(s, ext, n_root)
        leaves = s.leaves
        own_coef = np.array([ic[l] for l in leaves]).T.reshape(n_root, len(leaves))
        own_span = np.array([isp[l] for l in leaves]).T.reshape(n_root, len(leaves))
        full_coef = np.zeros((n_root, n_enc + len(leaves)))
        full_span = np.zeros_like(full_coef)
        full_coef[:n_sp, :n_enc] = enc_coef
        full_span[:n_sp, :n_enc] = enc_span
        full_coef[:, n_enc:] = own_coef
        full_span[:, n_enc:] = own_span
        own = np.array([ext[l] for l in leaves], dtype=float)
        useful = float(np.prod(enc_ext)) * math.prod(root_ext)
        nests[k] = _Nest(np.concatenate([enc_ext, own]), list(enc_ann) + [s.iters[l].annotation for l in leaves],
                         list(enc_red) + [s.iters[l].kind == "reduce" for l in leaves],
                         full_coef, full_span, n_enc, ext, region, useful)
    return nests


# ---- the feature rows -------------------------------------------------------------------------------

def _slog(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log2(1.0 + np.abs(x))


def _position(idx: list[int], red: list[bool]) -> str:
    if not idx:
        return "none"
    kinds = {red[i] for i in idx}
    if len(kinds) > 1:
        return "mixed"
    r = red[idx[0]]
    same = [i for i in range(len(red)) if red[i] == r]
    lo, hi = same[0], same[-1]
    pos = set()
    for i in idx:
        pos.add("inner" if i == hi else ("outer" if i == lo else "middle"))
    if len(pos) > 1:
        return "mixed"
    return f"{pos.pop()}_{'reduce' if r else 'spatial'}"


def _statement_row(state: Any, k: int, info: _StageInfo, nest: _Nest, nests: dict[int, _Nest],
                   buffer_of: dict[int, tuple[tuple[int, ...], int, bool]]) -> np.ndarray:
    s = state.stages[k]
    row = np.zeros(NUM_FEATURES)
    ext = nest.ext
    L = len(ext)
    iters = float(np.prod(ext)) if L else 1.0
    row[: len(_OP_FEATURES)] = info.ops * iters

    # -- vectorize / unroll / parallel --
    unrolled = [i for i, a in enumerate(nest.ann) if a == "unroll"]
    if s.auto_unroll_max_step > 0:  # lowering unrolls the innermost serial loops that fit
        prod = 1.0
        for i in range(L - 1, nest.n_enc - 1, -1):
            prod *= ext[i]
            if prod > s.auto_unroll_max_step:
                break
            if nest.ann[i] == "none" and i not in unrolled:
                unrolled.append(i)
    for kind, idx in (("vec", [i for i, a in enumerate(nest.ann) if a == "vectorize"]),
                      ("unroll", sorted(unrolled)),
                      ("parallel", [i for i, a in enumerate(nest.ann) if a == "parallel"])):
        b = _ANNOT_BASE[kind]
        if idx:
            row[b] = len(idx)
            row[b + 1] = float(np.prod(ext[idx]))
            row[b + 2] = ext[idx[-1]]
        row[b + 3 + _POS[_position(idx, nest.red)]] = 1.0

    # -- buffers: every access at once, dims right-aligned and padded with size-1 dims --
    acc = info.accesses(k)
    nb, D = acc.a.shape[0], acc.a.shape[1]
    shape = np.ones((nb, D))
    eb = np.empty(nb)
    cut = np.zeros(nb, dtype=np.int64)
    for b, p in enumerate(acc.producers):
        shp, e, local = buffer_of[p]
        if shp:
            shape[b, D - len(shp):] = shp
        eb[b] = e
        if local:
            # A temporary computed inside this nest is refilled each iteration of the loops
            # outside its attach point: those loops neither move its (local) index nor reuse it.
            cut[b] = min(nests[p].n_enc, L)
    live = (np.arange(L)[None, :] >= cut[:, None]).astype(float)  # (nb, L)
    coef = (acc.a @ nest.coef) * live[:, None, :]  # (nb, D, L)
    span = (acc.abs_a @ nest.span) * live[:, None, :]
    # extent of each index touched inside loop level l (loops l..L-1), for l = 0..L
    cum = np.zeros((nb, D, L + 1))
    cum[:, :, :L] = np.cumsum(span[:, :, ::-1], axis=2)[:, :, ::-1]
    box = np.minimum(shape[:, :, None], 1.0 + cum)
    uniq = np.prod(box, axis=1)  # (nb, L+1) elements
    last = box[:, -1, :]
    lines_lv = uniq / last * np.ceil(last * eb[:, None] / CACHE_LINE)
    strides = np.ones((nb, D))
    strides[:, :-1] = np.cumprod(shape[:, :0:-1], axis=1)[:, ::-1]
    lstride = np.einsum("bd,bdl->bl", strides, coef)  # (nb, L) elements per step of each loop
    uniq_bytes = uniq * eb[:, None]
    total_uniq = uniq_bytes.sum(axis=0)  # bytes the statement touches inside each level

    v = np.zeros((nb, _NB))
    rw = acc.is_write & info.is_reduce
    v[np.arange(nb), np.where(rw, 2, np.where(acc.is_write, 1, 0))] = 1.0
    nacc = acc.count * np.where(rw, 2, 1)
    v[:, 3] = iters * eb * nacc
    v[:, 4] = uniq_bytes[:, 0]
    if L:
        inner = ext[-1]
        v[:, 5] = (iters / inner) * np.maximum(1.0, np.ceil(inner * np.abs(lstride[:, -1]) * eb / CACHE_LINE)) * nacc
    else:
        v[:, 5] = iters * nacc
    v[:, 6] = lines_lv[:, 0]
    moving = np.any(coef != 0.0, axis=1)  # (nb, L)
    carried = ~moving & (ext > 1)[None, :] & (live > 0)
    has = carried.any(axis=1)
    reuse_at = (L - 1) - np.argmax(carried[:, ::-1], axis=1) if L else np.zeros(nb, dtype=np.int64)
    inner_prod = np.ones(L + 1)
    if L:
        inner_prod[:L] = np.cumprod(ext[::-1])[::-1]  # iterations inside each level
    for b in range(nb):
        if has[b]:
            r = reuse_at[b]
            v[b, 7] = 1.0
            v[b, 10] = inner_prod[r + 1]
            v[b, 11] = total_uniq[r + 1]
            v[b, 12] = ext[r]
        elif rw[b]:
            v[b, 8] = 1.0
            v[b, 10], v[b, 11], v[b, 12] = 1.0, eb[b], 2.0
        else:
            v[b, 9] = 1.0
        nz = np.flatnonzero(lstride[b])
        v[b, 17] = abs(lstride[b, nz[-1]]) if len(nz) else 0.0
    ct = np.maximum(v[:, 12], 1.0)
    v[:, 13:17] = v[:, 3:7] / ct[:, None]
    order = np.lexsort((-v[:, 4], -v[:, 3]))[:NUM_BUFFERS]
    row[_BUF_BASE: _BUF_BASE + len(order) * _NB] = v[order].ravel()

    # -- arithmetic intensity curve, allocation, nest summary --
    t = _TAIL_BASE
    if L:
        ai = info.flops * inner_prod[:L] / np.maximum(total_uniq[:L], 1.0)
        xs = np.linspace(0, L - 1, CURVE_POINTS)
        row[t: t + CURVE_POINTS] = np.interp(xs, np.arange(L), ai)
    t += CURVE_POINTS
    written_shape, written_eb, written_local = buffer_of[k]
    if written_local or k not in _param_stage_ids(state):
        size = math.prod(written_shape) * written_eb
        outer = float(np.prod(ext[: nest.n_enc])) if nest.n_enc else 1.0
        row[t], row[t + 1], row[t + 2] = size, size * outer, outer
    row[t + 3] = float(np.prod(ext[nest.n_enc:])) if L > nest.n_enc else 1.0
    row[t + 4] = iters
    row[t + 5] = L
    row[t + 6] = s.auto_unroll_max_step
    row[t + 7] = 1.0 if info.is_reduce else 0.0
    row[t + 8] = iters / max(nest.useful, 1.0)
    return row


_PARAMS: Memo[set[int]] = Memo("features.params")  # stages that write kernel arguments
FEATURES: Memo[np.ndarray] = Memo("features")  # state_features


def _param_stage_ids(state: Any) -> set[int]:
    return state.memo(_PARAMS, _param_stage_ids_of)


def _param_stage_ids_of(state: Any) -> set[int]:
    outs = {id(t.op) for t in state.dag.tensors}
    return {k for k, s in enumerate(state.stages) if any(id(o) in outs for o in s.produced_ops)}


def _state_rows(state: Any) -> np.ndarray:
    infos = _stage_infos(state)
    nests = _nests(state, infos)
    params = _param_stage_ids(state)
    buffer_of: dict[int, tuple[tuple[int, ...], int, bool]] = {}
    for k, s in enumerate(state.stages):
        if s.compute_at == "inline":
            continue
        eb = dt.nbytes(s.op.output.dtype) if hasattr(s.op, "output") else 4
        if k in nests and s.compute_at == "iter" and k not in params:
            buffer_of[k] = (tuple(nests[k].region), eb, True)
        else:
            buffer_of[k] = (tuple(s.op.shape), eb, False)
    rows = [_statement_row(state, k, infos[k], nests[k], nests, buffer_of) for k in sorted(nests)]
    return _slog(np.array(rows).reshape(len(rows), NUM_FEATURES))


def state_features(state: Any) -> np.ndarray:
    """The (statements x NUM_FEATURES) matrix of one state, cached on the state."""
    return state.memo(FEATURES, _state_rows)


def get_per_store_features(states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Features of many states: ``(rows, group)`` with ``rows`` stacked (sum of statements x
    NUM_FEATURES) and ``group[i]`` the number of rows of state ``i`` (0 when its features could
    not be computed: the model then rejects the state)."""
    mats: list[np.ndarray] = []
    group = np.zeros(len(states), dtype=np.int64)
    for i, s in enumerate(states):
        try:
            m = state_features(s)
        except (ValueError, KeyError, IndexError, ZeroDivisionError) as e:
            logger.debug("no features for a state: %s", e)
            m = s.memo(FEATURES, lambda _: np.zeros((0, NUM_FEATURES)))
        mats.append(m)
        group[i] = m.shape[0]
    rows = np.concatenate(mats) if mats else np.zeros((0, NUM_FEATURES))
    return rows, group


def dump_features(state: Any, nonzero_only: bool = True) -> str:
    """Readable listing of a state's features (debugging): one block per statement, one line per
    feature with its (log-scaled) value and meaning."""
    m = state_features(state)
    names = [state.stages[k].name for k in sorted(_nests(state, _stage_infos(state)))]
    out = [f"features ({FEATURE_VERSION}, {NUM_FEATURES} per statement, sign*log2(1+|x|))"]
    for r, name in zip(m, names):
        out.append(f"statement {name}:")
        for (n, doc), v in zip(FEATURE_DOCS, r):
            if v != 0.0 or not nonzero_only:
                out.append(f"  {n:<28} {v:9.3f}  # {doc}")
    return "\n".join(out)
