"""The correctness net: random valid step sequences on every library op match the reference."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ansor
from sketch.loop_state import InvalidStepError
from sketch.lower import lower
from tests.util import assert_matches_reference
from tests.workloads import CASES

from .random_schedules import random_state


def _check(case, seed: int, n_steps: int) -> None:
    dag = ansor.ComputeDAG(case.make())
    state = random_state(dag.init_state(), random.Random(seed), n_steps)
    try:
        lower(state)
    except InvalidStepError:
        return  # a structurally invalid schedule (e.g. nested parallel): the search discards it
    kernel = ansor.build(state)
    assert_matches_reference(kernel, dag, case.make_inputs(seed % 3), case.rtol, case.atol,
                             f"{case.id} seed={seed} steps={[s.to_json() for s in state.steps]}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_random_schedules_per_op(case):
    for seed in range(3):
        _check(case, seed, 12)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=st.sampled_from(CASES), seed=st.integers(0, 10**6), n_steps=st.integers(1, 25))
def test_random_schedules_property(case, seed, n_steps):
    _check(case, seed, n_steps)


def test_pack_read_by_a_padded_consumer_covers_every_row():
    # Found by the property test: the pack of `data` computed inside the padding stage of a max
    # pool read rows -1..17 of a 17-wide tensor; its buffer was cut to 17 rows from -1, so the
    # reads of row 16 went past it (a wrong result, and an out-of-bounds read).
    case = next(c for c in CASES if c.id.startswith("max_pool2d_k3_s1_p1_17"))
    _check(case, 41114, 9)
