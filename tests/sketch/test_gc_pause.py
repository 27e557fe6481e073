"""The search's collector pause: thresholds and frozen objects restored, nesting, errors."""
import gc
import threading

import pytest

from sketch.gc_pause import YOUNG_THRESHOLD, fewer_collections


def test_pause_sets_and_restores_the_collector():
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with fewer_collections():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0  # what was alive on entry is left out of collections
        with fewer_collections():  # nested: still paused, and the inner exit restores nothing
            pass
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_pause_restores_after_an_error():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with fewer_collections():
            raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_pause_collects_cycles_made_inside():
    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        assert gc.collect() >= 2  # an explicit collection still finds the cycle


def test_pause_leaves_a_programs_own_freeze_alone():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with fewer_collections():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_overlapping_threads_restore_once_the_last_leaves():
    before = gc.get_threshold()
    inside, release = threading.Event(), threading.Event()

    def worker():
        with fewer_collections():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=worker)
    with fewer_collections():
        t.start()
        inside.wait(10)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the thread is still inside
    release.set()
    t.join(10)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
