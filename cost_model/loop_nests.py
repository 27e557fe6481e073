"""The loop nest around each store statement of a state, for the features: the chain of loops it is
computed inside (its attach target's loops, recursively) then its own, with their extents and
annotations, how the statement's root iterators move per loop (``coef``) and over it (``span``),
and the region of its buffer that one iteration of its attach point writes.
"""
from __future__ import annotations

import math

import numpy as np

from sketch.loop_state import State, iterator_extents
from sketch.stage import Stage

from .stage_analysis import StageInfo

# ---- per-state loop nests -----------------------------------------------------------------------

class Nest:
    """The loops around one stage's statement, outermost first, and how its root iterators move."""

    __slots__ = ("ext", "ann", "red", "coef", "span", "n_enc", "own_ext", "region", "useful",
                 "tested")

    def __init__(self, ext, ann, red, coef, span, n_enc, own_ext, region, useful, tested=0.0):
        self.ext = ext          # np.ndarray (L,) loop extents
        self.ann = ann          # list[str] annotation per loop
        self.red = red          # list[bool] reduce loop?
        self.coef = coef        # (roots, L): root iterator change per loop step
        self.span = span        # (roots, L): root iterator range while the loop runs
        self.n_enc = n_enc      # loops belonging to the attach chain
        self.own_ext = own_ext  # per persistent iterator id of the stage
        self.region = region    # extents of the stage's spatial axes (its buffer if local)
        self.useful = useful    # iterations that do real work (without guard waste)
        self.tested = tested    # share of the iterations that run guard tests (tail strategies)


def _iter_maps(stage: Stage, ext: list[int], n_root: int) -> tuple[list[list[float]], list[list[float]]]:
    """Per persistent iterator: its step (coef) and range (span) in root-iterator units. Plain
    lists: a stage has a dozen iterators over a few root axes, too small for numpy to pay."""
    n = len(stage.iters)
    coef: list[list[float] | None] = [None] * n
    span: list[list[float] | None] = [None] * n
    for r in range(n_root):
        v = [0.0] * n_root
        v[r] = 1.0
        coef[r] = v
        s = [0.0] * n_root
        s[r] = 1.0 * (ext[r] - 1)
        span[r] = s
    for rel in stage.relations:
        if hasattr(rel, "children"):
            pc = coef[rel.parent]
            ps = span[rel.parent]
            stride = 1.0
            for c in reversed(rel.children):
                coef[c] = [x * stride for x in pc]
                m = stride * (ext[c] - 1)
                span[c] = [min(x * m, y) for x, y in zip(pc, ps)]
                stride *= ext[c]
        else:
            coef[rel.child] = coef[rel.parents[-1]]
            acc = span[rel.parents[0]]
            for q in rel.parents[1:]:
                acc = [a + b for a, b in zip(acc, span[q])]
            span[rel.child] = acc
    return coef, span  # type: ignore[return-value]


def tested_share(stage: Stage, ext: list[int]) -> float:
    """The share of a stage's iterations that run guard tests, by the tail strategy of each split
    whose parts overshoot its extent: all of them for "guard", the partial tiles' share (one outer
    iteration in ceil(extent / tile)) for "peel", none for a "shift" that fits."""
    keep = 1.0
    for rel in stage.relations:
        if not hasattr(rel, "children"):
            continue
        parent = ext[rel.parent]
        outer = ext[rel.children[0]]
        tile = math.prod(ext[c] for c in rel.children[1:])
        if outer * tile <= parent:
            continue
        tail = getattr(rel, "tail", "guard")
        if tail == "guard" or (tail == "shift" and tile > parent):
            return 1.0
        if tail in ("peel", "pad"):  # a pad at root (no local tile to fill) peels
            keep *= 1.0 - 1.0 / outer
    return 1.0 - keep


# (split/fuse relations, root extents, leaves) -> _own_loops' value. Stages with the same loop
# structure recur across a search's states (a mutation changes one or two stages; replays copy
# the others), and the key is a few small tuples to hash where the value is a few hundred
# Python operations.
_OWN_LOOPS: dict[tuple, tuple] = {}
_OWN_LOOPS_MAX = 1 << 15


def _own_loops(s: Stage, root_ext: list[int]) -> tuple:
    """A stage's own loops given its root extents: every iterator's extent, the leaves' coef and
    span matrices (root iterators x leaves), the leaves' extents and the tested share. The
    arrays are shared between the nests that ask for the same key: read only."""
    key = (s.relations, tuple(root_ext), s.leaves, s.n_root, len(s.iters))
    got = _OWN_LOOPS.get(key)
    if got is None:
        n_root = s.n_root
        ext = iterator_extents(s, root_ext)
        ic, isp = _iter_maps(s, ext, n_root)
        leaves = s.leaves
        own_coef = np.array([ic[l] for l in leaves]).T.reshape(n_root, len(leaves))
        own_span = np.array([isp[l] for l in leaves]).T.reshape(n_root, len(leaves))
        own = np.array([ext[l] for l in leaves], dtype=float)
        for a in (own_coef, own_span, own):
            a.setflags(write=False)
        if len(_OWN_LOOPS) >= _OWN_LOOPS_MAX:
            _OWN_LOOPS.clear()
        got = _OWN_LOOPS[key] = (tuple(ext), own_coef, own_span, own, tested_share(s, ext))
    return got


def statement_nests(state: State, infos: dict[int, StageInfo]) -> dict[int, Nest]:
    stages = state.stages
    nests: dict[int, Nest] = {}
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
            # floor: a block index (j // v) over a tile of S + 1 aligned points spans S // v + 1
            # blocks, as lowering finds (sketch.bound.const_upper); integral spans are unchanged
            region = [int(min(op.shape[d], 1 + math.floor(inner[d] + 1e-9))) for d in range(n_sp)]
            enc_coef = acc.coef @ rn.coef[:, :n_enc]
            enc_span = a @ rn.span[:, :n_enc]
            enc_ext, enc_ann, enc_red = rn.ext[:n_enc], rn.ann[:n_enc], rn.red[:n_enc]
            # The target's partial tiles clamp this stage's region (tests), unless the stage pads:
            # then it computes whole tiles and only the target's copy-out tests.
            pads = any(getattr(r, "tail", "guard") == "pad" for r in s.relations)
            enc_tested = 0.0 if pads else tn.tested
        else:
            enc_tested = 0.0
            n_enc = 0
            region = list(op.shape)
            enc_coef = enc_span = np.zeros((n_sp, 0))
            enc_ext, enc_ann, enc_red = np.zeros(0), [], []
        root_ext = region + [ax.extent for ax in op.reduce_axes]
        ext, own_coef, own_span, own, own_tested = _own_loops(s, root_ext)
        leaves = s.leaves
        if n_enc:
            full_coef = np.zeros((n_root, n_enc + len(leaves)))
            full_span = np.zeros_like(full_coef)
            full_coef[:n_sp, :n_enc] = enc_coef
            full_span[:n_sp, :n_enc] = enc_span
            full_coef[:, n_enc:] = own_coef
            full_span[:, n_enc:] = own_span
            loop_ext = np.concatenate([enc_ext, own])
        else:  # at root: the stage's own loops are the whole nest (shared, read-only arrays)
            full_coef, full_span, loop_ext = own_coef, own_span, own
        useful = float(math.prod(enc_ext.tolist())) * math.prod(root_ext)
        iters = s.iters
        nests[k] = Nest(loop_ext, list(enc_ann) + [iters[l].annotation for l in leaves],
                        list(enc_red) + [iters[l].kind == "reduce" for l in leaves],
                        full_coef, full_span, n_enc, ext, region, useful,
                        1.0 - (1.0 - enc_tested) * (1.0 - own_tested))
    return nests
