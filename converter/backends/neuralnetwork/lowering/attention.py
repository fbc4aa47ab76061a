"""scaled_dot_product_attention (iOS18) -> batchedMatmul, multiply, mask, softmaxND, batchedMatmul.

``softmax(Q K^T / sqrt(E) + mask) V``: the scores are ``batchedMatmul(Q, K, transposeB)`` scaled by a
``multiply`` with ``alpha = 1/sqrt(E)``; a float mask is added (``addBroadcastable``); a bool mask
keeps the scores where it is true and puts -inf elsewhere (``whereBroadcastable``; a constant bool
mask is written as the additive 0 / -inf mask instead); ``softmaxND`` on the last axis; a second
``batchedMatmul`` with V. The layers compute in fp32 (fp16 inputs included). A row whose every key
is masked out gives NaN, as the IR op does.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op
from ....ir.types import is_static_dim
from ..emitter import NetworkEmitter, op_input, tensor_type
from .registry import lowering


@lowering("scaled_dot_product_attention", kind="decomposed",
          note="batchedMatmul(transposeB) + multiply(1/sqrt(E)) [+ addBroadcastable or whereBroadcastable mask] "
               "+ softmaxND(-1) + batchedMatmul")
def _sdpa(e: NetworkEmitter, op: Op) -> None:
    q, k, v = (op.inputs[n] for n in ("query", "key", "value"))
    shape = tensor_type(q).shape
    if shape is None or not is_static_dim(shape[-1]):
        raise LoweringError("the query's embedding size (last dim) must be static: it sets the scale 1/sqrt(E)")
    embed = int(shape[-1])
    name = op.name
    scores = e.fresh(f"{name}_qk")
    e.layer("batchedMatmul", f"{name}_qk", [e.blob(q), e.blob(k)], [scores]).transposeB = True
    scaled = e.fresh(f"{name}_scaled")
    e.layer("multiply", f"{name}_scale", [scores], [scaled]).alpha = float(1.0 / np.sqrt(np.float32(embed)))
    mask = op_input(op, "attn_mask")
    if mask is not None:
        masked = e.fresh(f"{name}_masked")
        m = e.const(mask)
        if tensor_type(mask).dtype.name == "bool" and m is None:
            neg_inf = e.load_constant(None, np.array([-np.inf], np.float32), f"{name}_neg_inf")
            e.layer("whereBroadcastable", f"{name}_mask", [e.blob(mask), scaled, neg_inf], [masked])
        else:
            if m is not None and np.asarray(m).dtype == bool:
                add = e.load_constant(None, np.where(np.asarray(m), 0.0, -np.inf).astype(np.float32), f"{name}_mask")
            else:
                add = e.blob(mask)
            e.layer("addBroadcastable", f"{name}_mask", [scaled, add], [masked])
        scaled = masked
    weights = e.fresh(f"{name}_weights")
    e.layer("softmaxND", f"{name}_softmax", [scaled], [weights]).axis = -1
    e.layer("batchedMatmul", name, [weights, e.blob(v)], [e.define(op.outputs[0])])
