"""quantize(dequantize(q)) with the same parameters -> q.

    %f = dequantize(input=%q: int8/uint8, scale=%s, zero_point=%z?, axis=a?)
    %r = quantize(input=%f, scale=%s, zero_point=%z?, axis=a?, output_dtype=dtype(%q))    ->    %q

Exact: with ``k = q - z`` an integer, |k| <= 255, dequantize gives ``fl(s * k)`` and quantize
``rint(fl(fl(s * k) / s)) + z``; two roundings move ``s * k / s`` by at most about
``2 * 255 * 2^-11`` (fp16; ``2^-24`` for fp32), far below the 0.5 that would change ``rint``, so
the result is ``k + z = q`` (then clipped to q's range, which holds it). The same scale, zero point
(an absent one is 0), axis and dtype are required, and ``|s| * 255`` must stay finite in the float
dtype (else dequantize overflows to inf and quantize clips), and so must ``1 / |s|``: runtimes
(torch, and likely Core ML) quantize by multiplying with the reciprocal, which for a tiny scale is
inf (the argument above holds for ``fl(fl(s * k) * fl(1 / s))`` too: three roundings).

The other order, ``dequantize(quantize(x))``, is NOT ``x``: it rounds ``x`` to the quantization
grid and clips it to the range (that is what fake-quantization is for), so it is never removed.
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.shapes import ShapeError, normalize_axis
from ...ir.types import TensorType
from ..rewrite import Match, const, op, optional, rule, var
from ._common import param


def _zero_point(m: Match, name: str) -> np.ndarray:
    return np.zeros(1, np.int64) if name not in m else np.asarray(m.value(name), np.int64).reshape(-1)


def _axis(op_, rank: int) -> int | None:
    a = param(op_, "axis")
    if a is None:
        return None
    try:
        return normalize_axis(int(np.asarray(a).reshape(-1)[0]), rank)
    except ShapeError:
        return None


def _check(m: Match) -> str | None:
    q = m["q"].type
    if not isinstance(q, TensorType) or q.shape is None:
        return "the rank of the quantized value is unknown"
    out_dtype = str(np.asarray(param(m.root, "output_dtype")).reshape(-1)[0])
    if out_dtype != q.dtype.name:
        return f"quantizes to {out_dtype}, the dequantized value was {q.dtype.name}"
    s1, s2 = np.asarray(m.value("s1")), np.asarray(m.value("s2"))
    if s1.shape != s2.shape or not np.array_equal(s1, s2):
        return "the scales differ"
    z1, z2 = _zero_point(m, "z1"), _zero_point(m, "z2")
    n = max(z1.size, z2.size)
    if {z1.size, z2.size} - {1, n} or not np.array_equal(np.broadcast_to(z1, (n,)), np.broadcast_to(z2, (n,))):
        return "the zero points differ"
    vector = s1.size > 1 or z1.size > 1 or z2.size > 1
    if vector and _axis(m.op("dq"), len(q.shape)) != _axis(m.root, len(q.shape)):
        return "the axes of the per-channel parameters differ"
    dq = m.op("dq").outputs[0].type
    fmax = float(np.finfo(dq.dtype.storage).max) if isinstance(dq, TensorType) else 0.0
    magnitudes = np.abs(s1.astype(np.float64)).reshape(-1)
    name = dq.dtype.name if isinstance(dq, TensorType) else "the float type"
    if not float(magnitudes.max()) * 255.0 < fmax / 2:
        return f"|scale| * 255 = {float(magnitudes.max()) * 255.0:g} overflows {name}"
    if not 1.0 / float(magnitudes.min()) < fmax / 2:
        return f"1 / |scale| = {1.0 / float(magnitudes.min()):g} overflows {name} (a runtime may multiply by it)"
    return None


@rule(op.quantize(input=op.dequantize("dq", input=var("q"), scale=const("s1"), zero_point=optional(const("z1"))),
                  scale=const("s2"), zero_point=optional(const("z2"))), check=_check)
def quantize_of_dequantize(b: Builder, m: Match):
    """``quantize(dequantize(q, s, z), s, z) -> q`` (module docstring: exact; the other order is not)."""
    return m["q"]


RULES = [quantize_of_dequantize]
