"""The activation and normalization fusions as rewrite passes.

``fuse_activations``: gelu (exact and tanh, each to its own mode), silu, leaky_relu and prelu,
relu6, softplus, softsign. ``fuse_normalizations``: layer_norm and instance_norm from their
decompositions, gamma/beta folded in. Each rule's module says whether it is exact (relu6,
leaky_relu and prelu are, up to the sign of a zero) or changes float rounding (the rest, as
every converter's fusions do).
"""

from __future__ import annotations

from ..rewrite import RewritePass, Rule
from . import gelu, instance_norm, layer_norm, leaky_relu, prelu, relu6, silu, softplus, softsign

ACTIVATION_RULES: list[Rule] = [
    *gelu.RULES, *silu.RULES, *leaky_relu.RULES, *prelu.RULES, *relu6.RULES, *softplus.RULES, *softsign.RULES,
]
#: layer_norm's gamma/beta rules come before instance_norm's: a per-channel parameter is refused
#: by the first (not along the normalized axes) and taken by the second
NORMALIZATION_RULES: list[Rule] = [*layer_norm.RULES, *instance_norm.RULES]


class FuseActivations(RewritePass):
    name = "fuse_activations"

    def __init__(self) -> None:
        super().__init__("fuse_activations", ACTIVATION_RULES)


class FuseNormalizations(RewritePass):
    name = "fuse_normalizations"

    def __init__(self) -> None:
        super().__init__("fuse_normalizations", NORMALIZATION_RULES)
