"""model.bin: every constant of the graph, each at a 16-byte aligned offset, written as it comes.

The file is written streaming (a constant is appended when the emitter first needs it and never
held again), so converting a model costs about one copy of its largest weight, not of all of them.
Identical constants are stored once. model.js reads each one as a typed-array view of the
fetched ArrayBuffer, which is why offsets are aligned (16 covers every element size WebNN has).
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO

import numpy as np

ALIGNMENT = 16


class WeightFile:
    """Appends arrays to an open binary file; `add` returns the offset of the array's bytes."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.size = 0
        self._seen: dict[tuple[str, int, bytes], int] = {}
        self.count = 0

    def add(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        view = memoryview(data).cast("B") if data.size else memoryview(b"")
        key = (data.dtype.str, view.nbytes, hashlib.blake2b(view, digest_size=16).digest())
        offset = self._seen.get(key)
        if offset is not None:
            return offset
        offset = self.size
        self._f.write(view)
        self.size += view.nbytes
        pad = -self.size % ALIGNMENT
        if pad:
            self._f.write(b"\0" * pad)
            self.size += pad
        self._seen[key] = offset
        self.count += 1
        return offset
