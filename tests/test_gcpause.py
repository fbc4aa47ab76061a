"""converter.gcpause: the collector is paused inside the block and restored after it, and what
earlier paused blocks dropped is collected before a loader's block once enough was made."""

from __future__ import annotations

import gc
import weakref

import pytest

from converter import gcpause
from converter.gcpause import paused_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle, as ops and values make: only the cyclic collector frees it


def test_the_collector_is_paused_and_restored() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc(collect_first=True):
            pass
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()


def test_what_paused_blocks_dropped_is_freed_before_the_next_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process loading model after model: the program it dropped (cyclic) is freed when the
    next load starts, not kept while collection is paused (with gen0 collections far apart)."""
    monkeypatch.setattr(gcpause, "COLLECT_AFTER", 500)
    monkeypatch.setattr(gcpause, "_made_while_paused", 0)
    gc.collect()
    old = gc.get_threshold()
    gc.set_threshold(1_000_000)  # no automatic collection between the blocks
    try:
        with paused_gc(collect_first=True):
            program = [_Node() for _ in range(1000)]
        dropped = weakref.ref(program[0])
        del program
        assert dropped() is not None  # a cycle: still there
        with paused_gc(collect_first=True):
            assert dropped() is None  # collected before the second "load"
    finally:
        gc.set_threshold(*old)


def test_small_blocks_do_not_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpause, "_made_while_paused", 0)
    calls = []
    monkeypatch.setattr(gcpause.gc, "collect", lambda *a: calls.append(a) or 0)
    for _ in range(3):
        with paused_gc(collect_first=True):
            [_Node() for _ in range(10)]
    assert calls == []


def test_a_large_block_leaves_its_objects_in_the_oldest_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a large block made is not walked by the next young-generation collection (moved to
    the oldest generation), yet a dropped program is still freed by a full collection and by
    the next load's collect_first."""
    monkeypatch.setattr(gcpause, "AGE_AFTER", 100)
    monkeypatch.setattr(gcpause, "COLLECT_AFTER", 500)
    monkeypatch.setattr(gcpause, "_made_while_paused", 0)
    gc.collect()
    with paused_gc(collect_first=True):
        program = [_Node() for _ in range(1000)]
    assert gc.get_count()[0] < 100
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert not any(id(n) in young for n in program)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(n) in oldest for n in program)
    dropped = weakref.ref(program[0])
    del program
    with paused_gc(collect_first=True):
        assert dropped() is None


def test_objects_the_caller_froze_stay_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcpause, "AGE_AFTER", 100)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with paused_gc(collect_first=True):
            kept = [_Node() for _ in range(1000)]
        assert gc.get_freeze_count() == frozen
        assert kept
    finally:
        gc.unfreeze()


def test_a_pass_block_leaves_its_garbage_to_the_young_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks without collect_first (passes, which drop the ops they replace) are not aged: their
    cyclic garbage is freed by the next young-generation collection, not kept for a full one."""
    monkeypatch.setattr(gcpause, "AGE_AFTER", 100)
    gc.collect()
    with paused_gc():
        garbage = [_Node() for _ in range(1000)]
        dropped = weakref.ref(garbage[0])
        del garbage
    gc.collect(0)
    assert dropped() is None
