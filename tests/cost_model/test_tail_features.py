"""The features see a split's tail strategy: the share of iterations that run guard tests."""
from __future__ import annotations

import math

import pytest

from cost_model.feature import FEATURE_NAMES, get_per_store_features
from tests.sketch.test_split_tails import gemm_state

TESTED = FEATURE_NAMES.index("tested_share")
WASTE = FEATURE_NAMES.index("pad_waste")


def _rows(out_tail: str, acc_tail: str, tile=(8, 8), reg=(4, 8, 4)):
    _, s = gemm_state(31, 17, 8, tile, reg, out_tail, acc_tail)
    rows, group = get_per_store_features([s])
    assert group[0] == len(rows) > 0
    return rows


def test_guard_tests_everything_peel_the_partial_tiles_shift_nothing():
    guard = _rows("guard", "guard")[:, TESTED]
    peel = _rows("peel", "guard")[:, TESTED]
    shift = _rows("shift", "guard")[:, TESTED]
    # (rows hold log2(1 + x))
    assert guard.max() == 1.0
    # 31 rows in tiles of 8: 1 partial of 4; 17 columns: 1 partial of 3 -> 1 - (3/4)(2/3) = 0.5
    assert peel.max() == pytest.approx(math.log2(1.5))
    assert shift.max() == 0.0


def test_a_divisible_split_tests_nothing_whatever_its_tail():
    for tail in ("guard", "peel"):
        rows = _rows(tail, tail, tile=(31, 17), reg=(31, 1, 8))
        assert rows[:, TESTED].max() == 0.0
        assert rows[:, WASTE].max() == pytest.approx(1.0)
