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
