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

#: Objects made in one paused block after which they are moved to the oldest generation at its end
#: (`_age_young_objects`) rather than walked by the next young-generation collection.
AGE_AFTER = 10_000


@contextmanager
def paused_gc(*, collect_first: bool = False) -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after, if it was enabled.
    ``collect_first`` (a loader's block, whose objects are the program it returns): first collect
    (fully) if paused blocks made ``COLLECT_AFTER`` objects since the last time (see the module
    docstring), and at the end move what the block made to the oldest generation
    (`_age_young_objects`). Other blocks (passes) leave garbage that the young-generation
    collection after them frees."""
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
        made = max(0, gc.get_count()[0] - before)
        _made_while_paused += made
        if collecting:
            if collect_first and made >= AGE_AFTER and gc.get_freeze_count() == 0:
                _age_young_objects()
            gc.enable()


def _age_young_objects() -> None:
    """Move every object the collector tracks into its oldest generation, in constant time.

    Re-enabled after a block that made N objects, the collector would walk all N at the next
    allocation (a young-generation collection: a tenth of the load time of a 100k-op program),
    only to find them alive: they are the program just built. ``freeze`` moves every tracked
    object to the permanent generation and ``unfreeze`` moves them all into the oldest one; both
    splice lists. A later full collection still looks at them, so a dropped program is freed as
    before. Skipped when the caller froze objects of its own (``unfreeze`` would thaw them)."""
    gc.freeze()
    gc.unfreeze()
