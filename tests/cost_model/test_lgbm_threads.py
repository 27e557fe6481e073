"""LightGBM's thread count comes from data (a parameter or the task's HardwareParams), never from
the cost model asking the machine."""
from __future__ import annotations

import pytest

import ansor
from compute.ops import workloads as W
from cost_model.lgbm_model import SINGLE_THREAD_ROWS, LGBModel
from sketch.hardware import HardwareParams

BIG = SINGLE_THREAD_ROWS + 1


def _task(cores: int) -> ansor.SearchTask:
    return ansor.SearchTask(tensors=W.relu(4, 8), hardware_params=HardwareParams(num_cores=cores))


def test_threads_follow_the_task_machine_unless_given():
    m = LGBModel(seed=0)
    assert m._threads(BIG) == 0  # no task seen yet: LightGBM's own default
    m.predict(_task(16), [])
    assert (m._threads(BIG), m._threads(10)) == (16, 1)  # small batches stay on one thread
    given = LGBModel(seed=0, num_threads=3)
    given.predict(_task(16), [])
    assert given._threads(BIG) == 3


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_bad_thread_count_is_named(bad):
    with pytest.raises(ValueError, match="num_threads"):
        LGBModel(num_threads=bad)
