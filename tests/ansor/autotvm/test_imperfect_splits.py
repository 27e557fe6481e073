"""Template knobs on odd and prime extents: tiles that need not divide, and their tail strategy."""
from __future__ import annotations

import random

import numpy as np
import pytest

from ansor import autotvm
from ansor.autotvm.knob_spaces import SplitSpace
from ansor.autotvm.templates import split_policy
from compute import reference
from sketch.transform_steps import SplitStep
from tests.util import assert_matches_reference


def test_a_prime_extent_gets_tiles_that_do_not_divide_it():
    exact = SplitSpace("t", 97, 3)
    assert {e.size[1:] for e in exact.entities} <= {(1, 1), (97, 1), (1, 97)}
    sp = SplitSpace("t", 97, 3, policy="imperfect")
    inner = {e.size[1:] for e in sp.entities}
    assert (4, 16) in inner and (6, 8) in inner
    assert all(np.prod(x) <= 97 for x in inner)
    assert all(e.size[0] == -(-97 // int(np.prod(e.size[1:]))) for e in sp.entities)


@pytest.mark.parametrize("extent", [64, 128, 1024, 56])
def test_multiples_of_eight_keep_the_exact_space(extent):
    assert split_policy(extent) == "factors"
    assert split_policy(extent + 1) == "imperfect"


def _configs(task, n, seed=0):
    rng = random.Random(seed)
    return [task.config(rng.randrange(len(task.space))) for _ in range(n)]


@pytest.mark.parametrize("workload,args", [("matmul", (31, 17, 97)), ("dense", (7, 17, 13)),
                                           ("conv2d_nhwc", (1, 7, 7, 3, 17, 3, 3, 1, 1))])
def test_template_configs_on_odd_shapes_match_the_reference(workload, args):
    import ansor
    task = autotvm.create_task(workload, args)
    dag = task.dag
    inputs = reference.random_inputs(dag.tensors, 0)
    tails = set()
    for cfg in _configs(task, 8):
        state = task.instantiate(cfg)
        for st in state.steps:
            if isinstance(st, SplitStep):
                divides = st.extent % int(np.prod(st.lengths)) == 0
                assert divides == (st.tail == "guard") or st.tail == "peel"
                tails.add(st.tail)
        assert_matches_reference(ansor.build(state), dag, inputs, 1e-4, 1e-4, str(cfg))
    assert tails - {"guard"}  # some split did not divide: a tail strategy was used
