"""conv_quantized: the uint8 weight codes stay codes (a uint8 initializer) and dequantize in the
graph as MIL defines it, ``float32(q) * quant_scale + quant_bias`` per tensor or per output channel
(Cast, Mul, Add: the same two float32 roundings as the IR kernel), then Conv (converter/backends/
onnx/lowering/conv.py). DequantizeLinear is not used: its ``(q - zero_point) * scale`` needs an
integer zero point, which an arbitrary ``quant_bias`` is not. The op's bias is added as its plain
value. As for conv, a weight for an fp16 ``x`` is cast to fp16 (ONNX Conv takes one dtype).
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op
from ..emitter import OnnxEmitter
from ._common import str_param
from .conv import conv_node
from .registry import lowering


@lowering("conv_quantized", kind="decomposed", note="Conv of Cast(uint8 codes) * quant_scale + quant_bias")
def _conv_quantized(e: OnnxEmitter, op: Op) -> None:
    if str_param(e, op, "quantization_type") != "linear":
        raise LoweringError("only 'linear' quantization has its parameters in the op")
    rank = e.rank(op.inputs["weight"])
    per_channel = (-1,) + (1,) * (rank - 1)
    codes = e.cast(e.input(op, "weight"), "fp32")
    scale = np.asarray(e.const_param(op, "quant_scale"), np.float32).reshape(per_channel)
    offset = np.asarray(e.const_param(op, "quant_bias"), np.float32).reshape(per_channel)
    weight = e.node("Add", [e.node("Mul", [codes, e.constant(scale)]), e.constant(offset)])
    dt = e.dtype(op.inputs["x"])
    conv_node(e, op, weight if dt.name == "fp32" else e.cast(weight, dt))
