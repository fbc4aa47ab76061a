"""State shared by the lowerings of one neural network: blob values, weights, errors, notes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import FormatError, UnsupportedError
from ...formats.proto import NeuralNetwork_pb2
from ...ir.builder import Builder
from ...ir.core import Value
from ...ir.types import TensorType
from ...limits import shape_problem
from . import weights as wmod


@dataclass
class Options:
    """Conversion options. ``keep_compression``: quantized weights stay compressed (constexpr ops,
    iOS16+); otherwise they are stored dequantized."""

    keep_compression: bool = True


@dataclass
class NetworkState:
    """One (sub)network being converted: its blob table and conventions."""

    file: str
    spec_version: int
    rank5: bool  # legacy [Seq, Batch, C, H, W] semantics for arrays (spec <= 3 or RANK5 mapping)
    options: Options
    notes: list[str]
    values: dict[str, Value] = field(default_factory=dict)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)


class LayerContext:
    """What a lowering sees: the layer, its resolved inputs, a builder, weights and errors."""

    def __init__(self, state: NetworkState, layer: NeuralNetwork_pb2.NeuralNetworkLayer, b: Builder,
                 converter: Any) -> None:
        self.state = state
        self.layer = layer
        self.kind = layer.WhichOneof("layer") or ""
        self.params = getattr(layer, self.kind) if self.kind else None
        self.name = layer.name or self.kind
        self.b = b
        self.converter = converter  # the NetworkConverter (for nested networks: branch, loop)
        self.inputs: list[Value] = [self._resolve(n) for n in layer.input]

    # -- conventions -----------------------------------------------------------------------------

    @property
    def rank5(self) -> bool:
        return self.state.rank5

    @property
    def spec_version(self) -> int:
        return self.state.spec_version

    # -- inputs ----------------------------------------------------------------------------------

    def _resolve(self, name: str) -> Value:
        v = self.state.values.get(name)
        if v is None:
            raise self.fail(f"input '{name}' is not produced by any earlier layer or model input")
        return v

    def input(self, i: int = 0) -> Value:
        if i >= len(self.inputs):
            raise self.fail(f"needs at least {i + 1} input(s), has {len(self.inputs)}")
        return self.inputs[i]

    def expect_inputs(self, lo: int, hi: int | None = None) -> None:
        n = len(self.inputs)
        hi = lo if hi is None else hi
        if n < lo or (hi >= 0 and n > hi):
            want = f"{lo}" if lo == hi else (f"{lo} or more" if hi < 0 else f"{lo} to {hi}")
            raise self.fail(f"takes {want} input(s), has {n}")

    def expect_outputs(self, n: int, field: str | None = None) -> None:
        """The layer lists ``n`` outputs (``field``: the parameter that asks for that many)."""
        have = len(self.layer.output)
        if have != n:
            asks = f"{field} asks for" if field else "produces"
            raise self.fail(f"{asks} {n} outputs, the layer lists {have}", field=field)

    def shape(self, v: Value) -> tuple:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise self.unsupported(f"needs an input of known rank, '{v.name}' has type {t}")
        return t.shape

    def rank(self, v: Value) -> int:
        return len(self.shape(v))

    # -- weights ---------------------------------------------------------------------------------

    @property
    def _payloads(self) -> Sequence[tuple[int, memoryview]]:
        """The model file's weights kept out of the parsed message (weights.py reads them)."""
        return self.converter.mf.payloads

    def weight_count(self, wp: NeuralNetwork_pb2.WeightParams, what: str) -> int:
        """How many weights ``wp`` holds (``weights.value_count``: payloads in the file included)."""
        try:
            return wmod.value_count(wp, self._payloads)
        except wmod.WeightError as e:
            raise self.fail(f"{what}: {e}", field=what) from None

    def weight_holds(self, wp: NeuralNetwork_pb2.WeightParams, count: int, what: str) -> bool:
        """Whether ``wp`` holds exactly ``count`` weights (``weights.holds``)."""
        try:
            return wmod.holds(wp, count, self._payloads)
        except wmod.WeightError as e:
            raise self.fail(f"{what}: {e}", field=what) from None

    def weight_encoding(self, wp: NeuralNetwork_pb2.WeightParams, what: str) -> str | None:
        """The field ``wp`` holds its values in (``weights.encoding``)."""
        try:
            return wmod.encoding(wp, self._payloads)
        except wmod.WeightError as e:
            raise self.fail(f"{what}: {e}", field=what) from None

    def weight_data(self, wp: NeuralNetwork_pb2.WeightParams, shape: Sequence[int], what: str,
                    *, axis: int = 0) -> wmod.Weight:
        why = shape_problem(shape)
        if why:
            raise self.fail(f"{what}: shape {[int(s) for s in shape]}: {why}", field=what)
        try:
            return wmod.decode(wp, tuple(int(s) for s in shape), axis=axis, payloads=self._payloads)
        except wmod.WeightError as e:
            raise self.fail(f"{what}: {e}", field=what) from None

    def weight_array(self, wp: NeuralNetwork_pb2.WeightParams, shape: Sequence[int], what: str,
                     *, axis: int = 0) -> np.ndarray:
        """Dense fp32 values (for parameters a lowering must compute with)."""
        return self.weight_data(wp, shape, what, axis=axis).decompressed()

    def weight(self, wp: NeuralNetwork_pb2.WeightParams, shape: Sequence[int], what: str, *, axis: int = 0) -> Value:
        """An fp32 IR value of the weights: a const, fp16 storage + cast, or a constexpr
        decompression op when the options keep compression."""
        w = self.weight_data(wp, shape, what, axis=axis)
        name = f"{self.name}_{what}"
        if w.dense is not None:
            if w.dense.dtype == np.float16:
                stored = self.b.const(w.dense, "fp16", name=f"{name}_fp16")
                return self.b.cast(x=stored, dtype="fp32", name=name)
            return self.b.const(w.dense.astype(np.float32, copy=False), "fp32", name=name)
        from .compression import compressed_weight  # local: only models with quantized weights need it

        return compressed_weight(self, w, name)

    # -- errors and notes ------------------------------------------------------------------------

    def _where(self, field: str | None) -> dict[str, Any]:
        return {"file": self.state.file, "op": self.name, "op_type": f"layer {self.kind}", "field": field}

    def fail(self, message: str, *, field: str | None = None) -> FormatError:
        """A malformed layer (for ``raise``)."""
        return FormatError(message, **self._where(field))

    def unsupported(self, message: str, *, field: str | None = None) -> UnsupportedError:
        """A valid layer the converter cannot express (for ``raise``)."""
        return UnsupportedError(message, **self._where(field))

    def note(self, message: str) -> None:
        self.state.note(message)
