"""converter.gcpause: the collector is paused inside the block and restored after it."""

from __future__ import annotations

import gc

import pytest

from converter.gcpause import paused_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_the_collector_is_paused_and_restored() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()


def test_long_lived_objects_join_the_oldest_generation() -> None:
    gc.collect()
    with paused_gc(long_lived=True):
        kept = [_Node() for _ in range(2000)]
    assert gc.get_count()[0] < 100  # no young collection pending over what the block made
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(n) in oldest for n in kept[::100])


def test_after_a_failure_the_garbage_is_young_as_usual() -> None:
    gc.collect()  # counts at zero: no collection runs during the test
    with pytest.raises(RuntimeError):
        with paused_gc(long_lived=True):
            made = [_Node() for _ in range(10)]
            raise RuntimeError("load failed")
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert not any(id(n) in oldest for n in made)
