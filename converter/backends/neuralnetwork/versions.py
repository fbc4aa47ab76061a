"""Specification versions of NeuralNetwork layers, and the device targets that name them.

A layer kind's version is when Core ML introduced it (NeuralNetwork.proto's comments): the layers
numbered below 600 came with Core ML 1 (iOS 11, specification version 1), except
``custom`` (version 2, iOS 11.2) and ``resizeBilinear`` / ``cropResize`` (version 3, iOS 12);
600-1449 are the iOS 13 layers (version 4, with the ND array semantics); 1450 and up came with
iOS 14 (version 5). Some older layers gained parameters later; a lowering that uses one asks for
the version itself (`ModelState.need`).
"""

from __future__ import annotations

from ...errors import UnsupportedError
from ...formats.proto import NeuralNetwork_pb2

#: the device floor each --target names, as a specification version
TARGETS = {"iOS11": 1, "iOS11.2": 2, "iOS12": 3, "iOS13": 4, "iOS14": 5}
#: the lowest version with N-dimensional arrays (EXACT_ARRAY_MAPPING, RANK4_IMAGE_MAPPING) and the ND layers
ND_VERSION = 4
#: the highest version a NeuralNetwork model may need (later versions added no layers)
MAX_VERSION = 5

_EXCEPTIONS = {"custom": 2, "resizeBilinear": 3, "cropResize": 3}
_FIELDS = NeuralNetwork_pb2.NeuralNetworkLayer.DESCRIPTOR.oneofs_by_name["layer"].fields
_NUMBERS = {f.name: f.number for f in _FIELDS}


def layer_version(kind: str) -> int:
    """The specification version that introduced layer ``kind`` (a NeuralNetworkLayer oneof field)."""
    if kind in _EXCEPTIONS:
        return _EXCEPTIONS[kind]
    number = _NUMBERS.get(kind)
    if number is None:
        raise ValueError(f"'{kind}' is not a NeuralNetwork layer kind")
    if number < 600:
        return 1
    return 4 if number < 1450 else 5


def target_version(target: str | None = None, spec_version: int | None = None) -> int | None:
    """The version floor a user asked for (None: no limit)."""
    if target is not None and spec_version is not None:
        raise UnsupportedError("give --target or --spec-version, not both")
    if target is not None:
        version = TARGETS.get(target)
        if version is None:
            raise UnsupportedError(f"unknown NeuralNetwork target '{target}' (one of: {', '.join(TARGETS)})")
        return version
    if spec_version is not None:
        if not isinstance(spec_version, int) or not 1 <= spec_version <= MAX_VERSION:
            raise UnsupportedError(f"--spec-version must be 1 to {MAX_VERSION} for NeuralNetwork models, got "
                                   f"{spec_version!r}")
        return spec_version
    return None
