"""Buffers that are views of a read-only file mapping (weights read through ``mmap``).

Every page of a mapping that the process reads stays in its resident set until the mapping is
closed, although the kernel could read it again from the page cache at any time. A writer that
streams a model's weights from the source's mapping into a new file would end with every weight
resident at once; `release_mapped_pages` drops what it has written (`atomic_write_segments`), so
a conversion holds about one weight at a time. Only read-only shared mappings (``ACCESS_READ``)
are touched: their pages always equal the file's, so a later read gets the same bytes. Heap
memory, writable and private (copy-on-write) mappings are left alone.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np

#: buffers smaller than this are not worth the system call
RELEASE_MIN_BYTES = 1 << 20


def _mapping_of(buffer: Any) -> mmap.mmap | None:
    """The mmap object ``buffer`` (a memoryview or ndarray) is a view of, or None."""
    obj, seen = buffer, 0
    while obj is not None and seen < 64:  # views of views: a short chain
        if isinstance(obj, mmap.mmap):
            return obj
        if isinstance(obj, memoryview):
            obj = obj.obj
        elif isinstance(obj, np.ndarray):
            obj = obj.base
        else:
            return None
        seen += 1
    return None


def _address(buffer: Any) -> int:
    return int(np.frombuffer(buffer, np.uint8).ctypes.data)


def release_mapped_pages(buffer: Any) -> bool:
    """Drop the pages of ``buffer`` from this process's resident set when it is a view of a
    read-only file mapping (module docstring); whether it did. The bytes stay readable."""
    if not hasattr(mmap.mmap, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return False
    view = memoryview(buffer)
    if view.nbytes < RELEASE_MIN_BYTES or not view.c_contiguous:
        return False
    mm = _mapping_of(view)
    if mm is None or mm.closed:
        return False
    with memoryview(mm) as whole:
        if not whole.readonly:  # ACCESS_WRITE or ACCESS_COPY: pages may differ from the file's
            return False
        start = _address(view.cast("B")) - _address(whole)
    if not 0 <= start <= len(mm) - view.nbytes:
        return False
    aligned = start - start % mmap.PAGESIZE
    try:
        mm.madvise(mmap.MADV_DONTNEED, aligned, start + view.nbytes - aligned)
    except (OSError, ValueError):
        return False
    return True
