"""The state of one NeuralNetwork being written as layers.

Lowerings (converter/backends/neuralnetwork/lowering) read IR values through the emitter and append
layers with `NetworkEmitter.layer`; the emitter names blobs and layers, turns constants that a layer
reads as a tensor into ``loadConstantND`` layers on first use, writes weights (`NetworkEmitter.weights`:
fp32 or fp16, left out of the message and spliced in when the file is written, so weights are never
copied twice), and records the lowest specification version every layer used needs.

Blobs are named after the IR values they hold (names are unique in a function); extra blobs a
decomposition needs get fresh names. Nested networks (branch, loop) get a child emitter: their layers
can read the blobs of every enclosing network, as Core ML allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import Message

from ...errors import LoweringError
from ...formats.protowire_join import mark_payload
from ...ir.consteval import RunTimeDependence, compile_time_value
from ...ir.core import Op, Value
from ...ir.types import TensorType, is_static_dim
from ..params import param as _param
from ..params import required_param
from .versions import layer_version

#: weights at least this large are spliced into the file from their arrays (smaller ones are set
#: in the message: the framing would cost more than the copy)
PAYLOAD_MIN_BYTES = 4096
FLOAT_VALUE, FLOAT16_VALUE = 1, 2  # WeightParams field numbers


@dataclass
class ModelState:
    """What every network of one model shares: blob and layer names, weight payloads, the
    specification version the layers need (and why), and whether weights stay fp16."""

    taken_blobs: set[str] = field(default_factory=set)
    taken_layers: set[str] = field(default_factory=set)
    payloads: list[tuple[int, np.ndarray]] = field(default_factory=list)
    preassigned: dict[Value, str] = field(default_factory=dict)  # model outputs: their feature names
    spec_version: int = 1
    version_reasons: dict[int, list[str]] = field(default_factory=dict)
    #: the highest version the user allows (--target / --spec-version), None: any; lowerings with a
    #: one-layer form of a later version and a longer form of an earlier one choose by it
    version_cap: int | None = None
    #: values known to depend on run-time inputs (never compile-time values), remembered across lowerings
    run_time: RunTimeDependence = field(default_factory=RunTimeDependence)

    def need(self, version: int, why: str) -> None:
        if version > 1:
            reasons = self.version_reasons.setdefault(version, [])
            if why not in reasons and len(reasons) < 20:
                reasons.append(why)
        self.spec_version = max(self.spec_version, version)

    @staticmethod
    def _unique(taken: set[str], base: str) -> str:
        name = base or "blob"
        i = 1
        while name in taken:
            name = f"{base}_{i}"
            i += 1
        taken.add(name)
        return name

    def blob_name(self, base: str) -> str:
        return self._unique(self.taken_blobs, base)

    def layer_name(self, base: str) -> str:
        return self._unique(self.taken_layers, base)


class NetworkEmitter:
    """Appends layers to ``network`` (a NeuralNetwork message, or the nested network of a branch or
    loop, whose ``parent`` is the enclosing emitter)."""

    def __init__(self, network: Message, state: ModelState, parent: NetworkEmitter | None = None) -> None:
        self.network = network
        self.state = state
        self.parent = parent
        self._blobs: dict[Value, str] = {}

    # -- blobs -----------------------------------------------------------------------------------

    def child(self, network: Message) -> NetworkEmitter:
        return NetworkEmitter(network, self.state, parent=self)

    def lookup(self, v: Value) -> str | None:
        e: NetworkEmitter | None = self
        while e is not None:
            name = e._blobs.get(v)
            if name is not None:
                return name
            e = e.parent
        return None

    def blob(self, v: Value) -> str:
        """The blob holding ``v``; a constant gets a ``loadConstantND`` layer here on first use."""
        name = self.lookup(v)
        if name is not None:
            return name
        val = self.const(v)
        if val is not None:
            return self.load_constant(v, np.asarray(val))
        raise LoweringError(f"value '{v.name}' is not computed by any layer written before its use")

    def bind(self, v: Value, blob: str) -> None:
        self._blobs[v] = blob

    def define(self, v: Value) -> str:
        """The blob name for an op's result ``v`` (its own name when free), bound to ``v``."""
        name = self.state.preassigned.get(v)
        if name is None or self.lookup(v) is not None:
            name = self.state.blob_name(v.name)
        self._blobs[v] = name
        return name

    def fresh(self, base: str) -> str:
        """A blob name for an intermediate result of a decomposition."""
        return self.state.blob_name(base)

    def reserve(self, names: Sequence[str]) -> None:
        """Names no intermediate blob may take (the model's feature names)."""
        self.state.taken_blobs.update(names)

    # -- constants -------------------------------------------------------------------------------

    def const(self, v: Value | None) -> Any:
        """The value of ``v`` when it is known at conversion time, else None (at once for a value
        computed from run-time inputs: see `RunTimeDependence`)."""
        if v is None or self.state.run_time(v):
            return None
        return compile_time_value(v)

    param = staticmethod(_param)

    @staticmethod
    def const_param(op: Op, key: str) -> Any:
        """Like `param`, but a parameter given as a run-time value is a LoweringError (layers take
        their parameters as fields)."""
        return required_param(op, key, " (a layer parameter)")

    def const_array(self, v: Value, what: str) -> np.ndarray:
        val = self.const(v)
        if val is None:
            raise LoweringError(f"{what} must be known at conversion time (a constant)")
        return np.asarray(val)

    def load_constant(self, v: Value | None, array: np.ndarray, name: str | None = None) -> str:
        """A ``loadConstantND`` layer holding ``array`` (a rank-0 value as shape [1]); its blob."""
        base = name or (v.name if v is not None else "const")
        blob = self.fresh(base) if v is None else self.state.blob_name(base)
        arr = np.asarray(array)
        shape = list(arr.shape) or [1]
        params = self.layer("loadConstantND", base, [], [blob])
        params.shape.extend(int(d) for d in shape)
        self.weights(params.data, arr.reshape(shape))
        if v is not None:
            self._blobs[v] = blob
        return blob

    # -- layers ----------------------------------------------------------------------------------

    def layer(self, kind: str, name: str, inputs: Sequence[str], outputs: Sequence[str]) -> Any:
        """Append a layer of ``kind`` (the NeuralNetworkLayer oneof field) reading and writing these
        blobs; returns its parameter message (set, so even an empty one marks the kind)."""
        layer = self.network.layers.add()
        layer.name = self.state.layer_name(name)
        layer.input.extend(inputs)
        layer.output.extend(outputs)
        params = getattr(layer, kind)
        params.SetInParent()
        self.state.need(layer_version(kind), f"layer {kind}")
        return params

    def weights(self, wp: Message, array: np.ndarray) -> None:
        """Fill WeightParams ``wp`` with ``array``: fp16 arrays as ``float16Value`` (weights stay
        fp16), everything else as fp32 ``floatValue``. Large weights are spliced into the file from
        the array (no copy in the message)."""
        arr = np.asarray(array)
        if arr.dtype == np.float16:
            data = np.ascontiguousarray(arr.astype("<f2", copy=False))
            number = FLOAT16_VALUE
        else:
            data = np.ascontiguousarray(arr.astype("<f4", copy=False))
            number = FLOAT_VALUE
        if data.nbytes >= PAYLOAD_MIN_BYTES:
            mark_payload(wp, len(self.state.payloads))
            self.state.payloads.append((number, data.reshape(-1)))
        elif number == FLOAT16_VALUE:
            wp.float16Value = data.tobytes()
        else:
            wp.floatValue.extend(data.reshape(-1).tolist())


def tensor_type(v: Value) -> TensorType:
    t = v.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"'{v.name}' is a {t}, not a tensor")
    return t


def rank(v: Value) -> int:
    t = tensor_type(v)
    if t.shape is None:
        raise LoweringError(f"'{v.name}' has no known rank")
    return len(t.shape)


def static_shape(v: Value) -> list[int] | None:
    t = tensor_type(v)
    if t.shape is None or not all(is_static_dim(d) for d in t.shape):
        return None
    return [int(d) for d in t.shape]


def op_input(op: Op, name: str) -> Value | None:
    v = op.inputs.get(name)
    return v if isinstance(v, Value) else None
