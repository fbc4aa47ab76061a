"""A range check of every number in a layer's parameters, before the layer is lowered.

Integer parameters (sizes, axes, padding, repetitions, ranks) become numpy shapes and int32 MIL
constants: a padAmount of 10^12 or a tile rep of 2^62 would overflow there (a raw OverflowError)
or ask for absurd memory. Rather than a check in each of ~150 lowerings, the layer's parameter
message is walked once, generically (nested parameter messages included, nested networks not:
their layers are checked when they are lowered), and every integer must fit in 32 bits, as the
int32 constants of the MIL ops they become. A few fields legitimately hold any 64-bit value and are handled by their lowering:
``seed`` (refused outside int32 by the random lowerings), ``maxLoopIterations`` (capped),
slice begin/end ids and strides (clamped: a bound past the end of an axis means the end).
Float parameters from which a lowering derives sizes must be finite.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from ...formats.proto import NeuralNetwork_pb2 as nn
from ...limits import MAX_PARAMETER

_INT_TYPES = {FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
              FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
              FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32,
              FieldDescriptor.TYPE_SFIXED64}
_NESTED_NETWORK = nn.NeuralNetwork.DESCRIPTOR

# Integer fields whose lowering accepts any 64-bit value (see the module docstring).
_ANY_INT64 = {
    f"CoreML.Specification.{message}.{name}"
    for message, names in (("SliceStaticLayerParams", ("beginIds", "endIds", "strides")),
                           ("SliceDynamicLayerParams", ("endIds", "strides")),
                           ("LoopLayerParams", ("maxLoopIterations",)))
    for name in names
}
# Float fields a lowering turns into sizes: they must be finite.
_SIZE_FLOATS = {
    "CoreML.Specification.RangeStaticLayerParams.endValue",
    "CoreML.Specification.RangeStaticLayerParams.startValue",
    "CoreML.Specification.RangeStaticLayerParams.stepSizeValue",
    "CoreML.Specification.RangeDynamicLayerParams.startValue",
    "CoreML.Specification.RangeDynamicLayerParams.stepSizeValue",
    "CoreML.Specification.UpsampleLayerParams.fractionalScalingFactor",
}


def _values(fd: FieldDescriptor, value: Any) -> Iterator[tuple[str, Any]]:
    if fd.is_repeated:
        for i, v in enumerate(value):
            yield f"{fd.name}[{i}]", v
    else:
        yield fd.name, value


def parameter_problem(params: Message, path: str) -> tuple[str, str] | None:
    """(field path, what is wrong) for the first parameter of ``params`` out of range, or None."""
    for fd, value in params.ListFields():
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.message_type is _NESTED_NETWORK:
                continue
            for sub_path, sub in _values(fd, value):
                found = parameter_problem(sub, f"{path}.{sub_path}")
                if found:
                    return found
        elif fd.type in _INT_TYPES:
            if fd.full_name in _ANY_INT64 or fd.name == "seed":
                continue
            for sub_path, v in _values(fd, value):
                if not -MAX_PARAMETER <= v <= MAX_PARAMETER:
                    return f"{path}.{sub_path}", f"{v} is out of range (parameters fit in 32 bits: at most " \
                                                 f"{MAX_PARAMETER} in magnitude)"
        elif fd.full_name in _SIZE_FLOATS:
            for sub_path, v in _values(fd, value):
                if not math.isfinite(v):
                    return f"{path}.{sub_path}", f"{v} is not a finite number"
    return None
