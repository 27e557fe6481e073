"""Random step sequences for property tests: any step the State API offers, with random arguments.

Steps that do not apply are dropped (the search does the same), so what comes out is a valid state
reached by a random path through the schedule space, including non-divisible splits, fusion,
compute_at at arbitrary consumer loops, inlining, cache_write, cache_read, pack (a blocked,
zero-padded copy of any input along any dimension, by any split's innermost length), rfactor and
annotations.
"""
from __future__ import annotations

import random

from compute.tensor import ComputeOp
from sketch.loop_state import InvalidStepError, State
from sketch.transform_steps import SplitStep
from sketch.stage import SPLIT_TAILS

# The kinds the record tests' fixtures were written with (their expected counts depend on the
# random stream); every other test draws from STEP_KINDS, which adds packing and follow-split tails.
BASE_STEP_KINDS = ("split", "split", "split", "reorder", "fuse", "compute_at", "compute_at", "inline",
                   "root", "cache_write", "cache_read", "rfactor", "annotate", "annotate", "pragma",
                   "follow_split")
STEP_KINDS = BASE_STEP_KINDS + ("pack",)


def _compute_stages(s: State) -> list[int]:
    return [k for k, st in enumerate(s.stages)
            if isinstance(st.op, ComputeOp) and st.compute_at != "inline"]


def _lengths(rng: random.Random, extent: int) -> list[int]:
    n = rng.choice([1, 1, 2, 3])
    out = []
    for _ in range(n):
        if rng.random() < 0.7:
            divs = [d for d in range(1, extent + 1) if extent % d == 0]
            out.append(rng.choice(divs))
        else:
            out.append(rng.randint(1, max(1, min(extent, 9))))  # often non-divisible
    return out


def random_step(s: State, rng: random.Random, kinds: tuple[str, ...] = STEP_KINDS) -> State:
    """Apply one random step of ``kinds``; raises InvalidStepError when it does not apply."""
    kind = rng.choice(kinds)
    cands = _compute_stages(s)
    if not cands:
        raise InvalidStepError("no compute stage")
    sid = rng.choice(cands)
    st = s.stages[sid]
    n = len(st.leaves)
    if kind == "split":
        p = rng.randrange(n)
        # Every tail strategy; "shift" on a reduction stage is refused (InvalidStepError).
        return s.split(sid, p, _lengths(rng, st.leaf_iters[p].extent), rng.random() < 0.8,
                       tail=rng.choice(SPLIT_TAILS))
    if kind == "reorder":
        order = list(range(n))
        rng.shuffle(order)
        return s.reorder(sid, order)
    if kind == "fuse":
        a = rng.randrange(n)
        b = min(n, a + rng.randint(2, 3))
        return s.fuse(sid, list(range(a, b)))
    if kind == "compute_at":
        consumers = s.consumers(sid)
        if not consumers:
            raise InvalidStepError("no consumer")
        t = rng.choice(consumers)
        if s.stages[t].compute_at == "inline":
            raise InvalidStepError("inlined consumer")
        return s.compute_at(sid, t, rng.randrange(len(s.stages[t].leaves)))
    if kind == "inline":
        return s.compute_inline(sid)
    if kind == "root":
        return s.compute_root(sid)
    if kind == "cache_write":
        return s.cache_write(sid)
    if kind == "cache_read":
        consumers = s.consumers(sid)
        if not consumers:
            raise InvalidStepError("no consumer")
        return s.cache_read(sid, "local", rng.sample(consumers, rng.randint(1, len(consumers))))
    if kind == "rfactor":
        reds = [p for p, it in enumerate(st.leaf_iters) if it.kind == "reduce"]
        if not reds:
            raise InvalidStepError("no reduce loop")
        return s.rfactor(sid, rng.choice(reds), rng.randint(0, len(st.op.axes)))
    if kind == "annotate":
        return s.annotate(sid, rng.randrange(n), rng.choice(["parallel", "vectorize", "unroll"]))
    if kind == "pragma":
        return s.pragma(sid, 0, f"auto_unroll_max_step${rng.choice([0, 16, 64, 512])}")
    if kind == "follow_split":
        splits = [k for k, step in enumerate(s.steps) if isinstance(step, SplitStep)]
        if not splits:
            raise InvalidStepError("no split to follow")
        src_id = rng.choice(splits)
        n_split = rng.randint(1, len(s.steps[src_id].lengths))
        tail = rng.choice(("auto",) + SPLIT_TAILS) if "pack" in kinds else "auto"
        return s.follow_split(sid, rng.randrange(n), src_id, n_split, tail)
    if kind == "pack":
        producers = [p for p in range(len(s.stages)) if sid in s.consumers(p)]
        splits = [k for k, step in enumerate(s.steps) if isinstance(step, SplitStep)]
        if not producers or not splits:
            raise InvalidStepError("nothing to pack by")
        p = rng.choice(producers)
        dim = rng.randrange(len(s.stages[p].op.output.shape))
        return s.pack(p, sid, dim, rng.choice(splits))
    raise AssertionError(kind)


def random_state(s: State, rng: random.Random, n_steps: int,
                 kinds: tuple[str, ...] = STEP_KINDS) -> State:
    for _ in range(n_steps):
        try:
            s = random_step(s, rng, kinds)
        except InvalidStepError:
            pass
    return s
