"""Run-time quantization (iOS17): quantize and dequantize as float arithmetic.

NeuralNetwork blobs hold fp32, integer IR values included (as integral floats), so:

- ``dequantize`` = ``(x - zero_point) * scale``: ``add`` (alpha = -zero_point; left out for a zero
  zero point) and ``multiply`` (alpha = scale) for per-tensor parameters;
  ``addBroadcastable`` / ``multiplyBroadcastable`` with constants shaped along ``axis`` otherwise.
- ``quantize`` = ``clip(round(x / scale) + zero_point, lo, hi)`` with [lo, hi] the int8 / uint8
  range: ``divideBroadcastable`` (a true division, as the IR op; multiplying by 1/scale can round a
  value to the other side of a .5), ``round``, ``add``/``addBroadcastable``, ``clip``. Where results
  can differ: the IR rounds halves to even and quantizes NaN to the zero point; the proto does not
  say how the ``round`` layer breaks ties, and ``clip`` of NaN is unspecified.

Compile-time weight compression (constexpr_* ops) is expanded before lowering (see the backend's
prepare step), so those ops never reach this table.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..emitter import NetworkEmitter, op_input, rank
from .registry import lowering

_RANGES = {"int8": (-128.0, 127.0), "uint8": (0.0, 255.0)}


def _along_axis(e: NetworkEmitter, op: Op, key: str, x: Value) -> np.ndarray | None:
    """Parameter ``key`` as fp32, shaped to broadcast along ``axis`` of ``x`` (a scalar stays 0-d)."""
    v = op_input(op, key)
    if v is None:
        return None
    arr = np.asarray(e.const_array(v, f"'{key}'"), np.float32)
    if arr.ndim == 0:
        return arr
    r = rank(x)
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(()))
    axis = axis + r if axis < 0 else axis
    return arr.reshape((-1,) + (1,) * (r - 1 - axis))


def _binary(e: NetworkEmitter, op: Op, kind: str, blob: str, param: np.ndarray, tag: str, out: str | None) -> str:
    """``blob`` op ``param``: a scalar as the layer's ``alpha`` (add / multiply), else a broadcastable
    layer over a constant; the result into ``out`` (or a fresh blob)."""
    dst = out or e.fresh(f"{op.name}_{tag}")
    if param.ndim == 0 and kind in ("add", "multiply"):
        e.layer(kind, f"{op.name}_{tag}", [blob], [dst]).alpha = float(param)
    else:
        const = e.load_constant(None, param, f"{op.name}_{tag}_const")
        e.layer(f"{kind}Broadcastable", f"{op.name}_{tag}", [blob, const], [dst])
    return dst


@lowering("dequantize", kind="decomposed", note="(x - zero_point) * scale with add/multiply layers")
def _dequantize(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["input"]
    scale, zp = _along_axis(e, op, "scale", x), _along_axis(e, op, "zero_point", x)
    assert scale is not None  # required
    blob = e.blob(x)
    if zp is not None and np.any(zp):
        blob = _binary(e, op, "add", blob, -zp, "shifted", None)
    _binary(e, op, "multiply", blob, scale, "scaled", e.define(op.outputs[0]))


@lowering("quantize", kind="decomposed", note="clip(round(x / scale) + zero_point) with divideBroadcastable, "
                                              "round, add, clip; the round layer's tie rule is unspecified "
                                              "(the IR rounds halves to even)")
def _quantize(e: NetworkEmitter, op: Op) -> None:
    x = op.inputs["input"]
    scale, zp = _along_axis(e, op, "scale", x), _along_axis(e, op, "zero_point", x)
    assert scale is not None
    dtype = str(np.asarray(e.const_param(op, "output_dtype")).reshape(()))
    if dtype not in _RANGES:
        raise LoweringError(f"output_dtype '{dtype}' is not int8 or uint8")
    lo, hi = _RANGES[dtype]
    divided = _binary(e, op, "divide", e.blob(x), scale, "divided", None)
    rounded = e.fresh(f"{op.name}_rounded")
    e.layer("round", f"{op.name}_round", [divided], [rounded])
    if zp is not None and np.any(zp):
        rounded = _binary(e, op, "add", rounded, zp, "shifted", None)
    p = e.layer("clip", op.name, [rounded], [e.define(op.outputs[0])])
    p.minVal, p.maxVal = lo, hi
