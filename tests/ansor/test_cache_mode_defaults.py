"""Who times in which mode when nobody says: the task scheduler's own runner times in network mode
(a network's kernels run with weights the rest of the network evicted and the input just
written), a single task's warm."""
from __future__ import annotations

import pytest

from ansor.search_task import SearchTask
from ansor.task_scheduler import TaskScheduler
from ansor.tuning import TuningOptions
from cost_model import RandomModel
from measure import measurers
from tests.ansor.sched_fakes import SMALL_PARAMS, FakeBuilder, FakeRunner


@pytest.fixture
def made(monkeypatch):
    modes: list[str] = []

    class Spy(FakeRunner):
        def __init__(self, cache: str = "warm"):
            super().__init__()
            self.cache = cache
            modes.append(cache)

    monkeypatch.setattr(measurers, "LocalRunner", Spy)
    return modes


def _options() -> TuningOptions:
    return TuningOptions(num_measure_trials=2, num_measures_per_round=2, builder=FakeBuilder(),
                         verbose=0, search_params=SMALL_PARAMS, seed=0)


def test_the_schedulers_own_runner_times_in_network_mode(made):
    TaskScheduler([SearchTask(func="matmul", args=(8, 8, 8))], cost_model=RandomModel(0)).tune(_options())
    assert made == ["network"]


def test_a_single_tasks_own_runner_times_warm(made):
    SearchTask(func="matmul", args=(8, 8, 8)).tune(_options(), cost_model=RandomModel(0))
    assert made == ["warm"]
