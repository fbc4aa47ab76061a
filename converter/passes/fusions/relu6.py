"""relu6 from a clip to [0, 6] and from min/max chains.

    %y = clip(x=%x, alpha=0.0, beta=6.0)                        ->    %y = relu6(x=%x)
    %y = minimum(x=maximum(x=%x, y=0.0), y=6.0)                 ->    %y = relu6(x=%x)
    %y = maximum(x=minimum(x=%x, y=6.0), y=0.0)                 ->    %y = relu6(x=%x)
    %y = minimum(x=relu(x=%x), y=6.0)                           ->    %y = relu6(x=%x)

(maximum/minimum in either operand order; ONNX ``Clip(0, 6)``, TF's ``relu6`` lowered by hand,
``torch.clamp(x, 0, 6)``.) Exact: each form computes ``min(max(x, 0), 6)`` elementwise, NaN
propagating, which is relu6's definition; the two orders of max and min agree on every input
(including -0.0 and NaN), so outputs are bit-identical.
"""

from __future__ import annotations

from ...ir.builder import Builder
from ..rewrite import Match, op, rule, var


def _relu6(b: Builder, m: Match):
    return b.relu6(x=m["x"])


@rule(op.clip(x=var("x"), alpha=0.0, beta=6.0))
def relu6_from_clip(b: Builder, m: Match):
    """``clip(x, 0, 6) -> relu6(x)``.

        %y = clip(x=%x, alpha=0.0, beta=6.0)    ->    %y = relu6(x=%x)"""
    return _relu6(b, m)


@rule(op.minimum(x=op.maximum(x=var("x"), y=0.0), y=6.0))
def relu6_from_max_min(b: Builder, m: Match):
    """``min(max(x, 0), 6) -> relu6(x)``.

        %p = maximum(x=%x, y=0.0)
        %y = minimum(x=%p, y=6.0)    ->    %y = relu6(x=%x)"""
    return _relu6(b, m)


@rule(op.maximum(x=op.minimum(x=var("x"), y=6.0), y=0.0))
def relu6_from_min_max(b: Builder, m: Match):
    """``max(min(x, 6), 0) -> relu6(x)``.

        %p = minimum(x=%x, y=6.0)
        %y = maximum(x=%p, y=0.0)    ->    %y = relu6(x=%x)"""
    return _relu6(b, m)


@rule(op.minimum(x=op.relu(x=var("x")), y=6.0))
def relu6_from_relu_min(b: Builder, m: Match):
    """``min(relu(x), 6) -> relu6(x)``.

        %p = relu(x=%x)
        %y = minimum(x=%p, y=6.0)    ->    %y = relu6(x=%x)"""
    return _relu6(b, m)


RULES = [relu6_from_clip, relu6_from_max_min, relu6_from_min_max, relu6_from_relu_min]
