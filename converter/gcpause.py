"""Pausing Python's cyclic garbage collector around work that builds or rewrites a whole program.

A full collection walks every live object; building a program of 100k ops allocates millions of
objects, which triggers collections again and again, each walking the ever larger IR: time per op
then grows with the program. Nothing such work makes needs the cycle collector meanwhile (the
garbage it leaves, e.g. removed ops, is collected when collection resumes).

The IR is cyclic (ops and values refer to each other), so a program that is dropped is freed only
by a full collection. The collections a loader used to trigger as it allocated did that; with them
paused, a process loading one model after another kept several dropped programs alive. So the
objects made while paused are counted, and a block that asks for it (``collect_first``, the
loaders) first runs one full collection once ``COLLECT_AFTER`` of them have been made since the
last: cheaper than the collections it replaces, and small loads seldom pay for it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Objects made while the collector was paused (net of those freed) after which a ``collect_first``
#: block collects first (a program of ~12k ops makes about 100k).
COLLECT_AFTER = 100_000

_made_while_paused = 0


@contextmanager
def paused_gc(*, collect_first: bool = False) -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after, if it was enabled.
    ``collect_first``: first collect (fully) if paused blocks made ``COLLECT_AFTER`` objects since
    the last time (see the module docstring)."""
    global _made_while_paused
    collecting = gc.isenabled()
    if collect_first and collecting and _made_while_paused >= COLLECT_AFTER:
        gc.collect()
        _made_while_paused = 0
    before = gc.get_count()[0]
    gc.disable()
    try:
        yield
    finally:
        _made_while_paused += max(0, gc.get_count()[0] - before)
        if collecting:
            gc.enable()
