"""Pausing Python's cyclic garbage collector around work that builds or rewrites a whole program.

A full collection walks every live object; building a program of 100k ops allocates millions of
objects, which triggers collections again and again, each walking the ever larger IR: time per op
then grows with the program. Nothing such work makes needs the cycle collector meanwhile (the
garbage it leaves, e.g. removed ops, is collected when collection resumes).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc(*, long_lived: bool = False) -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after, if it was enabled.

    ``long_lived``: what the block made is expected to live on (a loaded program), so it joins the
    oldest generation instead of being collected as young objects first: that collection, at the
    first allocation after the block, would walk every object made once more (at 100k ops about a
    tenth of the load time) to find almost nothing. Garbage the block made waits for the next full
    collection. Only when the block succeeds. (``gc.freeze`` then ``gc.unfreeze`` moves every tracked object to the oldest
    generation without walking them.)
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
        if long_lived:  # not when the block failed: its garbage is collected as usual
            gc.freeze()
            gc.unfreeze()
    finally:
        if collecting:
            gc.enable()
