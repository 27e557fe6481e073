"""``ops.reshape`` indexes its input group by group (``_aligned_groups``): splitting or merging
dimensions costs no division, and every reshape still reads the elements numpy's does."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compute import ComputeDAG, ops, te
from compute.ops.elemwise import _aligned_groups
from compute.reference import evaluate


def _dag(src, dst):
    x = te.placeholder(src, name="X")
    return ComputeDAG([x, ops.reshape(x, dst)])


def test_groups_pair_the_shared_boundaries():
    assert _aligned_groups((128, 768), (1, 128, 12, 64)) == [([0], [1]), ([1], [2, 3])]
    assert _aligned_groups((1, 12, 128, 64), (1536, 64)) == [([1, 2], [0]), ([3], [1])]
    assert _aligned_groups((6, 10), (4, 15)) == [([0, 1], [0, 1])]  # no shared boundary inside
    assert _aligned_groups((1, 1), (1,)) == []


def test_splitting_and_merging_need_no_division():
    split = str(_dag((128, 768), (1, 128, 12, 64)))
    assert "//" not in split and "%" not in split, split
    merge = str(_dag((2, 12, 64), (2, 768)))  # the input splits the output index: one div, one mod
    assert merge.count("//") == 1 and merge.count("%") == 1, merge


def _shapes():
    dims = st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=4)
    return dims.flatmap(lambda a: st.tuples(st.just(tuple(a)), st.permutations(
        [f for n in a for f in ([n] if n < 4 else [2, n // 2])]).map(tuple)))


@settings(max_examples=60, deadline=None)
@given(_shapes())
def test_every_reshape_reads_what_numpy_does(shapes):
    src, dst = shapes
    x = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src)
    (got,) = evaluate(_dag(src, dst), [x])
    np.testing.assert_array_equal(got, x.reshape(dst))
