"""The layout of the feature vector: every entry's name and meaning, and where each group starts.

One row per store statement (``cost_model.feature``); ``FEATURE_NAMES`` / ``FEATURE_DOCS`` list the
entries in order with a one-line comment, ``FEATURE_VERSION`` changes whenever the meaning of any
entry does (it is stored with every saved model), and the ``*_BASE`` offsets say where the
computation counts, annotations, per-buffer blocks and the tail begin.
"""
from __future__ import annotations

from sketch.hardware import CACHE_LINE_BYTES

FEATURE_VERSION = "ansor-py-features-5"  # 2: tested_share (split tails); 3: block-index regions floored
# (packs); 4: set_rows (register-tile rows per L1 set); 5: set_rows of stages without a reduction
# (their innermost loop)
CACHE_LINE = CACHE_LINE_BYTES  # fixed, not this machine's: a saved model was fitted on it
NUM_BUFFERS = 5  # buffers described per statement, most bytes first
CURVE_POINTS = 10

# ---- the schema ------------------------------------------------------------------------------------

OP_FEATURES = [
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
    ("set_rows", "most iterations of one loop inside the innermost reduction loop (without one: of "
     "the innermost loop) whose accesses share an L1 set (64 B lines, 4 KiB per way): a register "
     "tile's rows, or a transposing pack's lanes, 4 KiB apart all collide"),
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
        ("tested_share", "share of iterations that run guard tests (tail strategies: guard all, "
         "peel the partial tiles, shift none)"),
    ]
)

FEATURE_DOCS: list[tuple[str, str]] = (
    OP_FEATURES + _ANNOT_FEATURES
    + [(f"B{b}.{n}", c) for b in range(NUM_BUFFERS) for n, c in _BUFFER_FEATURES]
    + _TAIL_FEATURES
)
FEATURE_NAMES: list[str] = [n for n, _ in FEATURE_DOCS]
NUM_FEATURES = len(FEATURE_NAMES)

OPS = {n: i for i, (n, _) in enumerate(OP_FEATURES)}
ANNOT_BASE = {"vec": len(OP_FEATURES), "unroll": len(OP_FEATURES) + 11,
               "parallel": len(OP_FEATURES) + 22}
POS = {"none": 0, "inner_spatial": 1, "middle_spatial": 2, "outer_spatial": 3, "inner_reduce": 4,
        "middle_reduce": 5, "outer_reduce": 6, "mixed": 7}
BUF_BASE = len(OP_FEATURES) + len(_ANNOT_FEATURES)
NB = len(_BUFFER_FEATURES)
TAIL_BASE = BUF_BASE + NUM_BUFFERS * NB
assert TAIL_BASE + len(_TAIL_FEATURES) == NUM_FEATURES
