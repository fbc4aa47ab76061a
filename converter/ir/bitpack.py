"""Sub-byte packing shared by weight blobs, immediate MIL values and constexpr ops.

MIL's layout: values of ``bits`` bits each, row-major, packed from the least significant bit of
byte 0 upwards (verified against coremltools' blob writer: uint4 [1, 2, 3, 4, 5] -> 21 43 05).
"""

from __future__ import annotations

import numpy as np

SUBBYTE_CHUNK = 1 << 20  # a multiple of 8, so chunks are whole bytes once packed


def pack_subbyte(values: np.ndarray, bits: int) -> np.ndarray:
    """Pack 1-D ``values`` (uint8, or int8 two's complement) into the LSB-first bit stream."""
    v = np.ascontiguousarray(values).view(np.uint8)
    planes = np.empty((v.size, bits), np.uint8)
    for k in range(bits):
        np.bitwise_and(np.right_shift(v, k), 1, out=planes[:, k])
    return np.packbits(planes.reshape(-1), bitorder="little")


def unpack_subbyte(packed: np.ndarray, bits: int, count: int, signed: bool = False) -> np.ndarray:
    """Unpack ``count`` ``bits``-bit elements from the LSB-first bit stream in ``packed`` (uint8).

    Returns a new uint8 array (int8, sign-extended, when ``signed``). Works in bounded chunks, so
    the temporary bit planes never exceed a few MB.
    """
    packed = np.asarray(packed, np.uint8).reshape(-1)
    if packed.size * 8 < count * bits:
        raise ValueError(f"{packed.size} bytes hold fewer than {count} {bits}-bit elements")
    out = np.empty(count, np.uint8)
    for start in range(0, count, SUBBYTE_CHUNK):  # start * bits is a multiple of 8
        n = min(SUBBYTE_CHUNK, count - start)
        b0 = start * bits // 8
        stream = np.unpackbits(packed[b0 : b0 + (n * bits + 7) // 8], bitorder="little")
        planes = stream[: n * bits].reshape(n, bits)
        dst = out[start : start + n]
        dst[:] = planes[:, 0]
        for k in range(1, bits):
            dst |= planes[:, k] << np.uint8(k)
    if signed:  # two's complement sign extension, in place
        half = np.uint8(1 << (bits - 1))
        out ^= half
        out = out.view(np.int8)
        out -= np.int8(half)
    return out
