"""The conv/linear family of fusions as rewrite passes (one module per fusion; see each for the IR
before and after).

``fuse_conv`` belongs to every pipeline; ``fuse_global_pool`` (reduce_mean over the spatial dims ->
global average pooling) only to the targets that prefer the pooling op (webnn, neuralnetwork):
coremltools' MIL keeps reduce_mean.
"""

from __future__ import annotations

from ..rewrite import RewritePass
from . import (
    conv_batchnorm,
    conv_bias,
    conv_scale,
    global_pool,
    matmul_linear,
    matmul_transpose,
    pad_window,
    quant_pair,
)

RULES = [
    *conv_batchnorm.RULES,
    *conv_scale.RULES,
    *conv_bias.RULES,
    *pad_window.RULES,
    *matmul_transpose.RULES,
    *matmul_linear.RULES,
    *quant_pair.RULES,
]

TARGET_RULES = list(global_pool.RULES)


class FuseConvFamily(RewritePass):
    """conv + batch_norm / scale / bias, pad into windows, matmul flags and linear, quant pairs."""

    def __init__(self) -> None:
        super().__init__("fuse_conv", RULES)


class FuseGlobalPool(RewritePass):
    """reduce_mean over all spatial dims -> avg_pool over the whole input (webnn, neuralnetwork)."""

    def __init__(self) -> None:
        super().__init__("fuse_global_pool", TARGET_RULES)
