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
is a pure function of its loop nest, that analysis and the buffers it reads; most of a search
generation's statements are their parent's unchanged, so rows are kept under those inputs
(``_row_key``, module ``row_cache``) and a recurring statement costs a key, not a row.

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
from .row_cache import cached_row
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


def _statement_row(state: State, k: int, info: StageInfo, nest: Nest, nests: dict[int, Nest],
                   buffer_of: dict[int, tuple[tuple[int, ...], int, bool]]) -> np.ndarray:
    s = state.stages[k]
    row = np.zeros(NUM_FEATURES)
    ext = nest.ext
    L = len(ext)
    # Extents are whole numbers whose products stay far below 2**53, so math.prod of the list is
    # exactly np.prod of the array (and a fraction of its cost on these short arrays).
    extl = ext.tolist()
    iters = float(math.prod(extl)) if L else 1.0
    row[: len(OP_FEATURES)] = info.ops * iters

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
        b = ANNOT_BASE[kind]
        if idx:
            row[b] = len(idx)
            row[b + 1] = float(math.prod(extl[i] for i in idx))
            row[b + 2] = ext[idx[-1]]
        row[b + 3 + POS[_position(idx, nest.red)]] = 1.0

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

    v = np.zeros((nb, NB))
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
    row[BUF_BASE: BUF_BASE + len(order) * NB] = v[order].ravel()

    # -- arithmetic intensity curve, allocation, nest summary --
    t = TAIL_BASE
    if L:
        ai = info.flops * inner_prod[:L] / np.maximum(total_uniq[:L], 1.0)
        xs, positions = _curve_grid(L)
        row[t: t + CURVE_POINTS] = np.interp(xs, positions, ai)
    t += CURVE_POINTS
    written_shape, written_eb, written_local = buffer_of[k]
    if written_local or k not in _param_stage_ids(state):
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
    return row


def _row_key(state: State, k: int, info: StageInfo, nest: Nest, nests: dict[int, Nest],
             buffer_of: dict[int, tuple[tuple[int, ...], int, bool]], params: set[int]) -> tuple:
    """Everything ``_statement_row(state, k, info, nest, nests, buffer_of)`` reads, as a hashable
    key for the row cache (module ``row_cache``): the same key means the same row. Keep the two
    in step: a value the row starts to read must join the key."""
    producers = info.accesses(k).producers
    return (k, id(info), nest.n_enc, nest.useful, nest.tested, tuple(nest.ann), tuple(nest.red),
            nest.ext.dtype.str, nest.ext.tobytes(), nest.coef.shape, nest.coef.tobytes(),
            nest.span.tobytes(), state.stages[k].auto_unroll_max_step, k in params,
            tuple(buffer_of[p] for p in producers), buffer_of[k],
            tuple(nests[p].n_enc if buffer_of[p][2] else -1 for p in producers))


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


def _state_rows(state: State, use_cache: bool = True) -> np.ndarray:
    """The feature matrix of ``state``; ``use_cache=False`` computes every row (tests of the
    row cache compare the two)."""
    infos = stage_infos(state)
    nests = statement_nests(state, infos)
    params = _param_stage_ids(state)
    buffer_of = _buffers(state, nests, params)
    if use_cache:
        rows = [cached_row(state.dag, _row_key(state, k, infos[k], nests[k], nests, buffer_of, params),
                           infos[k], lambda k=k: _statement_row(state, k, infos[k], nests[k], nests, buffer_of))
                for k in sorted(nests)]
    else:
        rows = [_statement_row(state, k, infos[k], nests[k], nests, buffer_of) for k in sorted(nests)]
    return _slog(np.array(rows).reshape(len(rows), NUM_FEATURES))


def state_features(state: State) -> np.ndarray:
    """The (statements x NUM_FEATURES) matrix of one state, cached on the state."""
    return state.memo(FEATURES, _state_rows)


def get_per_store_features(states: Sequence[State]) -> tuple[np.ndarray, np.ndarray]:
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
