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
are inlined, so they are computed once per (DAG, inline pattern) and cached. A statement's row
is a pure function of its loop nest, that analysis and the buffers it reads. The search scores a
whole generation at once, so its statements are computed together: grouped by stage and loop
count across the states, each group's rows are numpy expressions over a leading batch axis
(``_statement_rows``), a row the same arithmetic whatever batch it is in.

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
from typing import Sequence

import numpy as np

from compute import dtype as dt
from sketch.loop_state import Memo, State

from .feature_schema import (ANNOT_BASE, BUF_BASE, CACHE_LINE, CURVE_POINTS, FEATURE_DOCS,
                             FEATURE_NAMES, FEATURE_VERSION, NB, NUM_BUFFERS, NUM_FEATURES,
                             OP_FEATURES, POS, TAIL_BASE)
from .loop_nests import Nest, statement_nests
from .stage_analysis import StageInfo, stage_infos

__all__ = ["FEATURE_DOCS", "FEATURE_NAMES", "FEATURE_VERSION", "NUM_FEATURES", "dump_features",
           "get_per_store_features", "state_features"]

logger = logging.getLogger("ansor.features")

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


_CURVE_GRIDS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _curve_grid(L: int) -> tuple[np.ndarray, np.ndarray]:
    """The arithmetic-intensity curve's sample points over L loop levels and the levels' positions
    (the same arrays for every statement with L loops; read only)."""
    got = _CURVE_GRIDS.get(L)
    if got is None:
        got = _CURVE_GRIDS[L] = (np.linspace(0, L - 1, CURVE_POINTS), np.arange(L))
        for a in got:
            a.setflags(write=False)
    return got


class _Item:
    """One statement to featurise: the state, the stage, and what its row reads."""

    __slots__ = ("state", "k", "info", "nest", "nests", "buffer_of", "params")

    def __init__(self, state: State, k: int, info: StageInfo, nest: Nest, nests: dict[int, Nest],
                 buffer_of: dict[int, tuple[tuple[int, ...], int, bool]], params: set[int]) -> None:
        self.state, self.k, self.info, self.nest = state, k, info, nest
        self.nests, self.buffer_of, self.params = nests, buffer_of, params


def _scalar_features(row: np.ndarray, it: _Item) -> float:
    """The per-statement entries that are a few Python operations each (annotations, allocation,
    nest summary), written into ``row``; returns the statement's iteration count."""
    s = it.state.stages[it.k]
    nest, info = it.nest, it.info
    ext = nest.ext
    L = len(ext)
    # Extents are whole numbers whose products stay far below 2**53, so math.prod of the list is
    # exactly np.prod of the array (and a fraction of its cost on these short arrays).
    extl = ext.tolist()
    iters = float(math.prod(extl)) if L else 1.0

    # -- vectorize / unroll / parallel --
    unrolled = [i for i, a in enumerate(nest.ann) if a == "unroll"]
    if s.auto_unroll_max_step > 0:  # lowering unrolls the innermost serial loops that fit
        prod = 1.0
        for i in range(L - 1, nest.n_enc - 1, -1):
            prod *= extl[i]
            if prod > s.auto_unroll_max_step:
                break
            if nest.ann[i] == "none" and i not in unrolled:
                unrolled.append(i)
    for kind, idx in (("vec", [i for i, a in enumerate(nest.ann) if a == "vectorize"]),
                      ("unroll", sorted(unrolled)),
                      ("parallel", [i for i, a in enumerate(nest.ann) if a == "parallel"])):
        b = ANNOT_BASE[kind]
        if idx:
            row[b] = len(idx)
            row[b + 1] = float(math.prod(extl[i] for i in idx))
            row[b + 2] = extl[idx[-1]]
        row[b + 3 + POS[_position(idx, nest.red)]] = 1.0

    # -- allocation, nest summary (after the curve) --
    t = TAIL_BASE + CURVE_POINTS
    written_shape, written_eb, written_local = it.buffer_of[it.k]
    if written_local or it.k not in it.params:
        size = math.prod(written_shape) * written_eb
        outer = float(math.prod(extl[: nest.n_enc])) if nest.n_enc else 1.0
        row[t], row[t + 1], row[t + 2] = size, size * outer, outer
    row[t + 3] = float(math.prod(extl[nest.n_enc:])) if L > nest.n_enc else 1.0
    row[t + 4] = iters
    row[t + 5] = L
    row[t + 6] = s.auto_unroll_max_step
    row[t + 7] = 1.0 if info.is_reduce else 0.0
    row[t + 8] = iters / max(nest.useful, 1.0)
    row[t + 9] = nest.tested
    return iters


SET_SPAN = 4096  # bytes one way of an L1 data cache spans (64 sets x 64 B on every x86 core we run)
_SET_PROBE = 64  # iterations of a loop examined for collisions (register tiles are far smaller)


def _set_rows(step_bytes: np.ndarray, ext: np.ndarray, red: np.ndarray) -> np.ndarray:
    """For each (statement, buffer): the most iterations of one loop inside the innermost
    reduction loop (a register tile's rows or columns, live together across every reduction step)
    whose accesses fall in the same L1 set. Rows 4 KiB apart all land in one set and evict each
    other once there are more of them than the cache has ways; strides and reuse cannot show it.
    A statement without a reduction loop (a copy, a pack, an elementwise stage) is judged by its
    innermost loop, whose iterations (a vector's lanes) run together: a pack that transposes a
    tile reads each lane from another row, 4 KiB apart when the rows hold 1024 floats.

    ``step_bytes``: (B, nb, L) bytes the access moves per iteration of each loop; ``ext``: (B, L)
    extents; ``red``: (B, L) which loops are reductions. Returns (B, nb), at least 1."""
    B, nb, L = step_bytes.shape
    out = np.ones((B, nb))
    last_red = np.where(red.any(axis=1), (L - 1) - np.argmax(red[:, ::-1], axis=1), L - 2)
    inside = np.arange(L)[None, :] > last_red[:, None]  # (B, L)
    step = np.abs(step_bytes)
    cand = inside[:, None, :] & (ext > 1)[:, None, :] & (step >= CACHE_LINE)
    xi, bi, li = np.nonzero(cand)
    if not len(xi):
        return out
    n = np.minimum(ext[xi, li], _SET_PROBE).astype(np.int64)
    i = np.arange(_SET_PROBE, dtype=np.int64)
    sets = ((i[None, :] * step[xi, bi, li].astype(np.int64)[:, None]) % SET_SPAN) // CACHE_LINE
    sets += (np.arange(len(xi)) * (SET_SPAN // CACHE_LINE))[:, None]
    counts = np.bincount(sets[i[None, :] < n[:, None]], minlength=len(xi) * (SET_SPAN // CACHE_LINE))
    per = counts.reshape(len(xi), -1).max(axis=1)
    np.maximum.at(out, (xi, bi), per)
    return out


def _statement_rows(items: Sequence[_Item]) -> np.ndarray:
    """The rows of statements of one stage (same ``k``, same static analysis, same loop count),
    computed together: the buffer and curve entries are numpy expressions over a leading batch
    axis, each the same arithmetic, in the same order, as for a single row, so a row does not
    depend on the batch it was computed in."""
    B = len(items)
    info, k = items[0].info, items[0].k
    L = len(items[0].nest.ext)
    rows = np.zeros((B, NUM_FEATURES))
    iters = np.array([_scalar_features(rows[i], it) for i, it in enumerate(items)])
    rows[:, : len(OP_FEATURES)] = info.ops[None, :] * iters[:, None]

    # -- buffers: every access at once, dims right-aligned and padded with size-1 dims --
    acc = info.accesses(k)
    nb, D = acc.a.shape[0], acc.a.shape[1]
    shape = np.ones((B, nb, D))
    eb = np.empty((B, nb))
    cut = np.zeros((B, nb), dtype=np.int64)
    for i, it in enumerate(items):
        for b, p in enumerate(acc.producers):
            shp, e, local = it.buffer_of[p]
            if shp:
                shape[i, b, D - len(shp):] = shp
            eb[i, b] = e
            if local:
                # A temporary computed inside this nest is refilled each iteration of the loops
                # outside its attach point: those loops neither move its (local) index nor reuse it.
                cut[i, b] = min(it.nests[p].n_enc, L)
    R = items[0].nest.coef.shape[0]
    ext = np.array([it.nest.ext for it in items], dtype=float).reshape(B, L)
    ncoef = np.array([it.nest.coef for it in items]).reshape(B, 1, R, L)
    nspan = np.array([it.nest.span for it in items]).reshape(B, 1, R, L)
    live = (np.arange(L)[None, None, :] >= cut[:, :, None]).astype(float)  # (B, nb, L)
    coef = (acc.a[None] @ ncoef) * live[:, :, None, :]  # (B, nb, D, L)
    span = (acc.abs_a[None] @ nspan) * live[:, :, None, :]
    # extent of each index touched inside loop level l (loops l..L-1), for l = 0..L
    cum = np.zeros((B, nb, D, L + 1))
    cum[..., :L] = np.cumsum(span[..., ::-1], axis=3)[..., ::-1]
    box = np.minimum(shape[..., None], 1.0 + cum)
    uniq = np.prod(box, axis=2)  # (B, nb, L+1) elements
    last = box[:, :, -1, :]
    lines_lv = uniq / last * np.ceil(last * eb[:, :, None] / CACHE_LINE)
    strides = np.ones((B, nb, D))
    strides[..., :-1] = np.cumprod(shape[..., :0:-1], axis=2)[..., ::-1]
    lstride = np.einsum("xbd,xbdl->xbl", strides, coef)  # (B, nb, L) elements per step of each loop
    uniq_bytes = uniq * eb[:, :, None]
    total_uniq = uniq_bytes.sum(axis=1)  # (B, L+1) bytes the statement touches inside each level

    v = np.zeros((B, nb, NB))
    rw = acc.is_write & info.is_reduce
    v[:, np.arange(nb), np.where(rw, 2, np.where(acc.is_write, 1, 0))] = 1.0
    nacc = acc.count * np.where(rw, 2, 1)
    v[:, :, 3] = iters[:, None] * eb * nacc
    v[:, :, 4] = uniq_bytes[:, :, 0]
    if L:
        inner = ext[:, -1:]
        v[:, :, 5] = (iters[:, None] / inner) * np.maximum(
            1.0, np.ceil(inner * np.abs(lstride[:, :, -1]) * eb / CACHE_LINE)) * nacc
    else:
        v[:, :, 5] = iters[:, None] * nacc
    v[:, :, 6] = lines_lv[:, :, 0]
    moving = np.any(coef != 0.0, axis=2)  # (B, nb, L)
    carried = ~moving & (ext > 1)[:, None, :] & (live > 0)
    has = carried.any(axis=2)
    inner_prod = np.ones((B, L + 1))
    if L:
        inner_prod[:, :L] = np.cumprod(ext[:, ::-1], axis=1)[:, ::-1]  # iterations inside each level
        reuse_at = (L - 1) - np.argmax(carried[:, :, ::-1], axis=2)
        xi, bi = np.nonzero(has)
        r = reuse_at[xi, bi]
        v[xi, bi, 7] = 1.0
        v[xi, bi, 10] = inner_prod[xi, r + 1]
        v[xi, bi, 11] = total_uniq[xi, r + 1]
        v[xi, bi, 12] = ext[xi, r]
        nz = lstride != 0.0
        last_nz = (L - 1) - np.argmax(nz[:, :, ::-1], axis=2)
        picked = np.take_along_axis(lstride, last_nz[:, :, None], axis=2)[:, :, 0]
        v[:, :, 17] = np.where(nz.any(axis=2), np.abs(picked), 0.0)
        red = np.array([it.nest.red for it in items], dtype=bool).reshape(B, L)
        v[:, :, 18] = _set_rows(lstride * eb[:, :, None], ext, red)
    lone_rw = ~has & rw[None, :]
    v[lone_rw, 8] = 1.0
    v[lone_rw, 10] = 1.0
    v[lone_rw, 11] = eb[lone_rw]
    v[lone_rw, 12] = 2.0
    v[~has & ~rw[None, :], 9] = 1.0
    ct = np.maximum(v[:, :, 12], 1.0)
    v[:, :, 13:17] = v[:, :, 3:7] / ct[:, :, None]
    order = np.lexsort((-v[:, :, 4], -v[:, :, 3]), axis=-1)[:, :NUM_BUFFERS]
    top = np.take_along_axis(v, order[:, :, None], axis=1)
    rows[:, BUF_BASE: BUF_BASE + order.shape[1] * NB] = top.reshape(B, -1)

    # -- arithmetic intensity curve --
    if L:
        ai = info.flops * inner_prod[:, :L] / np.maximum(total_uniq[:, :L], 1.0)
        xs, positions = _curve_grid(L)
        for i in range(B):
            rows[i, TAIL_BASE: TAIL_BASE + CURVE_POINTS] = np.interp(xs, positions, ai[i])
    return rows


_PARAMS: Memo[set[int]] = Memo("features.params")  # stages that write kernel arguments
FEATURES: Memo[np.ndarray] = Memo("features")  # state_features


def _param_stage_ids(state: State) -> set[int]:
    return state.memo(_PARAMS, _param_stage_ids_of)


def _param_stage_ids_of(state: State) -> set[int]:
    outs = {id(t.op) for t in state.dag.tensors}
    return {k for k, s in enumerate(state.stages) if any(id(o) in outs for o in s.produced_ops)}


def _buffers(state: State, nests: dict[int, Nest],
             params: set[int]) -> dict[int, tuple[tuple[int, ...], int, bool]]:
    """Per non-inlined stage: the shape of the buffer it writes, its element bytes, and whether
    it is a local temporary (computed at a loop, not a kernel argument: its region's shape)."""
    buffer_of: dict[int, tuple[tuple[int, ...], int, bool]] = {}
    for k, s in enumerate(state.stages):
        if s.compute_at == "inline":
            continue
        eb = dt.nbytes(s.op.output.dtype) if hasattr(s.op, "output") else 4
        if k in nests and s.compute_at == "iter" and k not in params:
            buffer_of[k] = (tuple(nests[k].region), eb, True)
        else:
            buffer_of[k] = (tuple(s.op.shape), eb, False)
    return buffer_of


def _feature_matrices(states: Sequence[State]) -> list[np.ndarray | Exception]:
    """The feature matrix of each state (or the error that kept it from having one), its rows
    computed in batches, one per (stage analysis, stage, loop count) across all the states."""
    out: list[np.ndarray | Exception] = [np.zeros(0)] * len(states)
    slots: list[list] = [[] for _ in states]
    batches: dict[tuple, list[tuple[_Item, int, int]]] = {}  # -> (statement, state, row)
    for i, state in enumerate(states):
        try:
            infos = stage_infos(state)
            nests = statement_nests(state, infos)
            params = _param_stage_ids(state)
            buffer_of = _buffers(state, nests, params)
        except _FEATURE_ERRORS as e:
            out[i] = e
            continue
        keys = sorted(nests)
        slots[i] = [None] * len(keys)
        for j, k in enumerate(keys):
            info, nest = infos[k], nests[k]
            batches.setdefault((id(info), k, len(nest.ext)), []).append(
                (_Item(state, k, info, nest, nests, buffer_of, params), i, j))
    for group in batches.values():
        try:
            mats = list(_statement_rows([item for item, _, _ in group]))
        except _FEATURE_ERRORS:
            mats = []  # one bad statement: compute them one by one
            for item, i, _ in group:
                try:
                    mats.append(_statement_rows([item])[0])
                except _FEATURE_ERRORS as e:
                    mats.append(None)
                    out[i] = e
        for (_, i, j), row in zip(group, mats):
            slots[i][j] = row
    for i, rows in enumerate(slots):
        if not isinstance(out[i], Exception):
            out[i] = _slog(np.array(rows).reshape(len(rows), NUM_FEATURES))
    return out


_FEATURE_ERRORS = (ValueError, KeyError, IndexError, ZeroDivisionError)


def _state_rows(state: State) -> np.ndarray:
    """The feature matrix of ``state`` (raises what kept it from having one)."""
    (m,) = _feature_matrices([state])
    if isinstance(m, Exception):
        raise m
    return m


def state_features(state: State) -> np.ndarray:
    """The (statements x NUM_FEATURES) matrix of one state, cached on the state."""
    return state.memo(FEATURES, _state_rows)


def get_per_store_features(states: Sequence[State]) -> tuple[np.ndarray, np.ndarray]:
    """Features of many states: ``(rows, group)`` with ``rows`` stacked (sum of statements x
    NUM_FEATURES) and ``group[i]`` the number of rows of state ``i`` (0 when its features could
    not be computed: the model then rejects the state). The states not yet featurised are
    featurised together (``_feature_matrices``) and each keeps its matrix."""
    todo = list({id(s): s for s in states if s.memoized(FEATURES) is None}.values())
    for s, m in zip(todo, _feature_matrices(todo)):
        if isinstance(m, Exception):
            logger.debug("no features for a state: %s", m)
            m = np.zeros((0, NUM_FEATURES))
        s.memo(FEATURES, lambda _, m=m: m)
    mats = [s.memoized(FEATURES) for s in states]
    group = np.array([m.shape[0] for m in mats], dtype=np.int64)
    rows = np.concatenate(mats) if mats else np.zeros((0, NUM_FEATURES))
    return rows, group


def dump_features(state: State, nonzero_only: bool = True) -> str:
    """Readable listing of a state's features (debugging): one block per statement, one line per
    feature with its (log-scaled) value and meaning."""
    m = state_features(state)
    names = [state.stages[k].name for k in sorted(statement_nests(state, stage_infos(state)))]
    out = [f"features ({FEATURE_VERSION}, {NUM_FEATURES} per statement, sign*log2(1+|x|))"]
    for r, name in zip(m, names):
        out.append(f"statement {name}:")
        for (n, doc), v in zip(FEATURE_DOCS, r):
            if v != 0.0 or not nonzero_only:
                out.append(f"  {n:<28} {v:9.3f}  # {doc}")
    return "\n".join(out)
