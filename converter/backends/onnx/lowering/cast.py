"""``cast`` with MIL's conversion rules (converter/ir/ops/elementwise_unary.py ``convert``).

ONNX ``Cast`` agrees with MIL except from a float to an integer type, where MIL truncates toward
zero, maps NaN to 0 and saturates out-of-range values (infinities included) to the type's bounds,
while ONNX leaves NaN and out-of-range values undefined (onnxruntime on x86 gives INT_MIN). That
conversion is written as: float32 (fp16 widened exactly), NaN replaced by 0, ``Clip`` to the bounds
representable in float32, ``Cast``, then ``Where`` for the upper bound that float32 cannot hold
(2**31 - 1).
"""

from __future__ import annotations

import numpy as np

from ....ir.core import Op
from ....ir.types import DType, dtype
from ..emitter import OnnxEmitter, onnx_type
from .registry import lowering


def float_to_int(e: OnnxEmitter, x: str, to: DType, out: str | None = None) -> str:
    """``x`` (float32 or float16) converted to integer dtype ``to`` as MIL's cast does."""
    lo, hi = to.value_range()
    x32 = e.cast(x, "fp32")
    hi32 = np.float32(hi)
    hi_in = hi32 if float(hi32) <= hi else np.nextafter(hi32, np.float32(-np.inf))
    # NaN -> 0 before the Cast (a float Where: onnxruntime has no Where for 16-bit integers)
    y = e.node("Where", [e.node("IsNaN", [x32]), e.scalar(0.0, "fp32"), x32])
    clipped = e.node("Clip", [y, e.scalar(np.float32(lo), "fp32"), e.scalar(hi_in, "fp32")])
    if float(hi_in) == hi:
        return e.cast(clipped, to) if out is None else e.node("Cast", [clipped], [out], to=onnx_type(to))
    # float32 cannot hold hi (2**31 - 1): values from float32(hi) = 2**31 up give hi exactly
    big = e.node("GreaterOrEqual", [x32, e.scalar(hi32, "fp32")])
    return e.node("Where", [big, e.scalar(hi, to), e.cast(clipped, to)], [out] if out is not None else 1)


@lowering("cast", note="Cast; from a float to an integer type: Clip, Cast, and Where for NaN and the upper bound "
                       "(MIL truncates, saturates, NaN -> 0)")
def _cast(e: OnnxEmitter, op: Op) -> None:
    src = e.dtype(op.inputs["x"])
    to = dtype(str(np.asarray(e.const_param(op, "dtype")).reshape(()).item()))
    x = e.input(op)
    if src.is_float and to.is_int:
        float_to_int(e, x, to, e.out(op))
        return
    e.node("Cast", [x], [e.out(op)], to=onnx_type(to))

