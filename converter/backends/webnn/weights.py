"""model.bin: every constant of the graph, each at a 16-byte aligned offset, written as it comes.

The file is written streaming (a constant is appended when the emitter first needs it and never
held again), so converting a model costs about one copy of its largest weight, not of all of them.
Identical constants are stored once. Only constants whose dtype and byte size equal an earlier
one's are compared: first three 64-byte samples, and only when those agree the whole bytes (the
earlier constant read back from the file), so distinct weights cost a few dozen bytes' comparison,
never a hash or a second pass over their data. model.js reads each constant as a typed-array view of
the fetched ArrayBuffer, which is why offsets are aligned (16 covers every element size WebNN has).
"""

from __future__ import annotations

import os
from typing import BinaryIO

import numpy as np

ALIGNMENT = 16


_SAMPLE = 64


def _sample(view: memoryview) -> bytes:
    n = view.nbytes
    if n <= 3 * _SAMPLE:
        return bytes(view)
    mid = n // 2
    return bytes(view[:_SAMPLE]) + bytes(view[mid:mid + _SAMPLE]) + bytes(view[-_SAMPLE:])


class WeightFile:
    """Appends arrays to an open binary file; `add` returns the offset of the array's bytes."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.size = 0
        self.count = 0
        # (dtype, bytes) -> [(offset, sample)] of the constants written
        self._by_size: dict[tuple[str, int], list[tuple[int, bytes]]] = {}

    def add(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        view = memoryview(data).cast("B") if data.size else memoryview(b"")
        key = (data.dtype.str, view.nbytes)
        sample = _sample(view)
        for offset, earlier in self._by_size.get(key, ()):
            if earlier == sample and self._bytes_at(offset, view.nbytes) == view:
                return offset
        offset = self.size
        self._f.write(view)
        self.size += view.nbytes
        pad = -self.size % ALIGNMENT
        if pad:
            self._f.write(b"\0" * pad)
            self.size += pad
        self._by_size.setdefault(key, []).append((offset, sample))
        self.count += 1
        return offset

    def _bytes_at(self, offset: int, nbytes: int) -> bytes:
        self._f.flush()
        return os.pread(self._f.fileno(), nbytes, offset)
