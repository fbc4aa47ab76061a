"""Reductions reduce_sum ... reduce_log_sum_exp as the N-D ``reduce*`` layers (spec 4).

``axes`` go to the layer as given (negative ones count from the end there too), ``keep_dims`` to
``keepDims``, no axes (None) to ``reduceAll``. A reduction to a scalar has shape [1] in the network
(NeuralNetwork tensors have no rank 0). An empty axes list reduces nothing (the layers refuse it):
the op is then the identity or its elementwise part (abs, square, log).

Integer inputs: NN blobs are fp32. The IR's mean, l2 norm, log-sum and log-sum-exp of an int32
tensor are truncated toward zero; that truncation is written after the layer (sign * floor(|r|)).
"""

from __future__ import annotations

import numpy as np

from ....formats.proto import NeuralNetwork_pb2
from ....ir.core import Op
from ..emitter import NetworkEmitter, tensor_type
from .registry import lowering

_LAYERS = {
    "reduce_sum": "reduceSum", "reduce_mean": "reduceMean", "reduce_max": "reduceMax", "reduce_min": "reduceMin",
    "reduce_prod": "reduceProd", "reduce_l1_norm": "reduceL1", "reduce_l2_norm": "reduceL2",
    "reduce_sum_square": "reduceSumSquare", "reduce_log_sum": "reduceLogSum", "reduce_log_sum_exp": "reduceLogSumExp",
}
_REAL_VALUED = frozenset({"reduce_mean", "reduce_l2_norm", "reduce_log_sum", "reduce_log_sum_exp"})
#: what a reduction over no axes leaves of each op (None: x itself)
_OVER_NOTHING = {"reduce_l1_norm": ("ABS", 0.0), "reduce_l2_norm": ("ABS", 0.0),
                 "reduce_sum_square": ("POWER", 2.0), "reduce_log_sum": ("LOG", 0.0)}

_Unary = NeuralNetwork_pb2.UnaryFunctionLayerParams


def _unary(e: NetworkEmitter, name: str, src: str, kind: str, alpha: float, dst: str) -> None:
    params = e.layer("unary", name, [src], [dst])
    params.type = _Unary.Operation.Value(kind)
    params.scale = 1.0  # f(scale * x + shift)
    params.alpha = alpha


@lowering(*_LAYERS, note="reduce* layer with axes/keepDims/reduceAll")
def _reduce(e: NetworkEmitter, op: Op) -> None:
    x, out = op.inputs["x"], op.outputs[0]
    axes = e.const_param(op, "axes")
    keep = bool(e.const_param(op, "keep_dims"))
    src = e.blob(x)
    if axes is not None and np.asarray(axes).size == 0:
        rest = _OVER_NOTHING.get(op.type)
        if rest is None:
            e.bind(out, src)
        else:
            _unary(e, op.name, src, rest[0], rest[1], e.define(out))
        return
    truncate = op.type in _REAL_VALUED and tensor_type(x).dtype.name.startswith(("int", "uint"))
    dst = e.fresh(f"{op.name}_real") if truncate else e.define(out)
    params = e.layer(_LAYERS[op.type], op.name, [src], [dst])
    params.keepDims = keep
    if axes is None:
        params.reduceAll = True
    else:
        params.axes.extend(int(a) for a in np.asarray(axes).reshape(-1))
    if truncate:
        _truncate_toward_zero(e, op.name, dst, e.define(out))


def _truncate_toward_zero(e: NetworkEmitter, name: str, src: str, dst: str) -> None:
    """``sign(r) * floor(|r|)``: the IR's int32 result of a real-valued reduction."""
    magnitude, whole, sign = e.fresh(f"{name}_abs"), e.fresh(f"{name}_floor"), e.fresh(f"{name}_sign")
    _unary(e, f"{name}_abs", src, "ABS", 0.0, magnitude)
    e.layer("floor", f"{name}_floor", [magnitude], [whole])
    e.layer("sign", f"{name}_sign", [src], [sign])
    e.layer("multiplyBroadcastable", f"{name}_trunc", [whole, sign], [dst])
