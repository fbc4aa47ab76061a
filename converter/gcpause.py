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
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; re-enable it after, if it was enabled."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
