"""Random ops: random_normal / random_uniform / random_bernoulli -> random*Static (constant shape) or
random*Dynamic (a run-time shape vector); random_categorical -> categoricalDistribution.

(The random*Like layers would read the value whose shape is drawn, but the IR's ``shape`` op is
still lowered on its own: with it, Dynamic is as few layers and leaves no unread blob.)

The parameters and the seed are written as given (MIL's seed -1 = unseeded is also the layers'
convention in coremltools' builder). Core ML's random streams are its own: the distribution, the
shape and the seed carry over, not the values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ir.core import Op
from ..emitter import NetworkEmitter
from ._common import scalar, single
from .registry import lowering

#: IR op -> (layer base name, {IR parameter: layer field})
_FILLS = {
    "random_normal": ("randomNormal", {"mean": "mean", "stddev": "stdDev"}),
    "random_uniform": ("randomUniform", {"low": "minVal", "high": "maxVal"}),
    "random_bernoulli": ("randomBernoulli", {"prob": "prob"}),
}


def _seed(e: NetworkEmitter, op: Op) -> int:
    return int(np.asarray(e.const_param(op, "seed")).reshape(()))


@lowering(*_FILLS, note="random*Static for a constant shape, else random*Dynamic;"
                        " Core ML's random stream, same distribution, shape and seed")
def _fill(e: NetworkEmitter, op: Op) -> None:
    base, fields = _FILLS[op.type]
    shape_v = op.inputs["shape"]
    shape = e.const(shape_v)
    params: Any
    if shape is not None:
        params = single(e, op, f"{base}Static", [])
        params.outputShape.extend(int(d) for d in np.asarray(shape).reshape(-1))
    else:
        params = single(e, op, f"{base}Dynamic", [e.blob(shape_v)])
    params.seed = _seed(e, op)
    for key, field in fields.items():
        setattr(params, field, scalar(e.const_param(op, key), key))


@lowering("random_categorical", note="categoricalDistribution (numSamples = size, isLogits = mode is logits, "
                                     "temperature 1)")
def _categorical(e: NetworkEmitter, op: Op) -> None:
    p = single(e, op, "categoricalDistribution")
    p.numSamples = int(np.asarray(e.const_param(op, "size")).reshape(()))
    p.isLogits = str(np.asarray(e.const_param(op, "mode")).reshape(())) == "logits"
    p.seed = _seed(e, op)
    p.temperature = 1.0
    p.eps = 1e-10  # keeps log(p) finite for probs; coremltools' builder default
