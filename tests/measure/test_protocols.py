"""The builder and runner contracts (``measure.protocols``) and their ownership
(``measure.measurers``): the local and Dask classes meet the contracts without one being a broken
subclass of the other, a Dask pair stands in wherever the tuners take a builder and runner, and
``Measurers`` closes what it created and never what it was given."""
from __future__ import annotations

import pytest

from measure.builder import LocalBuilder
from measure.measurers import Measurers, check_measurers
from measure.protocols import Builder, Runner
from measure.runner import LocalRunner


@pytest.fixture(scope="module")
def dask_pair():
    """A DaskBuilder and DaskRunner on an in-process scheduler with no worker (nothing here
    builds or measures on it)."""
    distributed = pytest.importorskip("distributed")
    from measure.dask_builder import DaskBuilder
    from measure.dask_runner import DaskRunner

    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None)
    b, r = DaskBuilder(cluster), DaskRunner(cluster)
    try:
        yield b, r
    finally:
        b.close()
        r.close()
        cluster.close()


def test_the_local_classes_meet_the_contracts():
    b, r = LocalBuilder(n_parallel=1), LocalRunner()
    assert isinstance(b, Builder) and isinstance(r, Runner)
    assert not isinstance(b, Runner) and not isinstance(r, Builder)
    assert b._pool is None and r._pool is None  # checking started nothing


def test_the_dask_classes_meet_the_contracts_and_are_not_local_subclasses(dask_pair):
    b, r = dask_pair
    assert isinstance(b, Builder) and isinstance(r, Runner)
    assert not isinstance(b, LocalBuilder) and not isinstance(r, LocalRunner)


def test_every_public_member_of_a_dask_builder_and_runner_can_be_read(dask_pair):
    # A DaskBuilder used to inherit LocalBuilder's ``pool`` and make it raise: a member a caller
    # of the parent could use broke on the child. None of theirs raises now.
    for obj in dask_pair:
        for name in dir(obj):
            if not name.startswith("_"):
                getattr(obj, name)


def test_a_dask_pair_stands_in_where_the_tuners_take_a_builder_and_runner(dask_pair):
    from ansor.autotvm import measure_option
    from ansor.tuning import TuningOptions, _runner_settings

    b, r = dask_pair
    assert TuningOptions(builder=b, runner=r).builder is b
    assert measure_option(b, r).runner is r
    # The default schedule's measurement changes the runner's settings for a while.
    before = r.settings()
    with _runner_settings(r, number=1, repeat=1, min_repeat_ms=0.0, warmup_ms=0.0,
                          timeout=max(r.timeout, 60.0), check_correctness=False):
        assert r.settings()["number"] == 1 and r.settings()["timeout"] >= 60.0
    assert r.settings() == before
    assert b.build([]) == []
    with Measurers(b, r) as m:
        assert (m.builder, m.runner) == (b, r)
    assert b.cluster is not None and r.cluster is not None  # given: left open


class _Fake:
    """Meets both contracts; counts ``close`` calls."""

    timeout = 1.0
    number = repeat = 1
    min_repeat_ms = warmup_ms = 0.0
    check_correctness = False

    def __init__(self, fail: bool = False):
        self.closed = 0
        self.fail = fail

    def build(self, inputs, verbose=0):
        return []

    def run(self, inputs, build_results, verbose=0):
        return []

    def close(self):
        self.closed += 1
        if self.fail:
            raise RuntimeError("close failed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_measurers_leave_given_ones_open():
    b, r = _Fake(), _Fake()
    with Measurers(b, r) as m:
        assert m.builder is b and m.runner is r
    assert b.closed == r.closed == 0


def test_measurers_close_the_local_ones_they_created_once(monkeypatch):
    closed: list[str] = []
    monkeypatch.setattr(LocalBuilder, "close", lambda self: closed.append("builder"))
    monkeypatch.setattr(LocalRunner, "close", lambda self: closed.append("runner"))
    given = _Fake()
    m = Measurers("local", given)
    assert isinstance(m.builder, LocalBuilder) and m.runner is given
    m.close()
    m.close()
    assert closed == ["builder"] and given.closed == 0
    with Measurers() as m:
        assert isinstance(m.runner, LocalRunner)
    assert closed == ["builder", "builder", "runner"]


def test_measurers_close_the_runner_even_if_closing_the_builder_fails(monkeypatch):
    closed: list[str] = []
    monkeypatch.setattr(LocalRunner, "close", lambda self: closed.append("runner"))

    def fail(self):
        raise RuntimeError("close failed")

    monkeypatch.setattr(LocalBuilder, "close", fail)
    with pytest.raises(RuntimeError, match="close failed"):
        Measurers().close()
    assert closed == ["runner"]


@pytest.mark.parametrize("builder, runner, bad", [
    ("remote", "local", "builder"), ("local", LocalBuilder, "runner"),
    (LocalRunner(), "local", "builder"), ("local", object(), "runner")])
def test_anything_else_is_refused_with_the_option_named(builder, runner, bad):
    with pytest.raises(ValueError, match=f"TuningOptions.{bad} must be 'local' or a"):
        check_measurers("TuningOptions.", builder, runner)
    with pytest.raises(ValueError, match=f"^{bad} must be"):
        Measurers(builder, runner)


def test_the_program_measurer_leaves_closing_to_the_owner():
    from ansor.measurer import ProgramMeasurer

    b, r = _Fake(), _Fake()
    ProgramMeasurer(b, r).close()
    assert b.closed == r.closed == 0
