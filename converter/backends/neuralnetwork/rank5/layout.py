"""How IR tensors live in the blobs of a legacy (rank-5) network.

Every blob of a network of specification version <= 3 is ``[Seq, Batch, C, H, W]``; this mode
writes Batch = 1 and Seq = 1 but for sequences (below), so a blob is described by its
``(C, H, W)``: its *layout*. An IR value
fits a blob when its leading axes are 1 (no batch or sequence); its elements in row-major order are
then the blob's elements in ``C, H, W`` order, so reshapes, squeezes and expand_dims of such values
move no data: their result is the same blob (`Rank5Emitter.alias`). The layout matters only where a
layer gives the axes a meaning (convolution's channels, softmax's axis): the lowering asks for the
layout it needs (`Rank5Emitter.get`), and a ``flatten`` (to ``[C*H*W, 1, 1]``) or ``reshape``
(CHANNEL_FIRST, which keeps the element order) layer is written when the blob has another one.

Natural layouts (the simple rule, used for features and constants): IR ``[C]``, ``[1, C]`` ->
``(C, 1, 1)``; ``[C, H, W]``, ``[1, C, H, W]``, ``[1, 1, C, H, W]`` -> ``(C, H, W)``; a scalar ->
``(1, 1, 1)``.

Two kinds of run-time sizes are kept (the rest is written for static shapes):
- Sequences: Core ML feeds a declared ``[C]`` / ``[C, H, W]`` input of a rank-5 network as
  ``[Seq, 1, C, H, W]`` with any Seq (the legacy rank-5 document; our frontend gives such an input
  a symbolic Seq when it reaches a recurrent layer). An IR value ``[S, 1, ..]`` whose symbolic
  leading axis is such a Seq is a *sequence*: its blob is ``[S, 1, C, H, W]``, its layout the
  ``(C, H, W)`` of one step (``Rank5Emitter.seqs`` holds S). Only the lowerings registered
  ``per_step`` (layers that treat Seq like a batch, and the recurrent layers) read sequences.
- A sequence may also have a static Seq: an lstm over a ``[S, 1, I]`` value with a static S > 1
  (a program that moved an axis into Seq) reads a ``permute`` of it (``to_blob_axes``), and an op
  that does not take sequences reads such a sequence through a ``permute`` back into its natural
  layout (``Rank5Emitter.unsequenced``).
- Flexible H and W (a feature's shapeRange / enumeratedShapes / image sizes, specification
  version 3): a layout may hold symbolic H and W where the layer does not need the sizes
  (convolution, pooling, activations); anything that would have to compute with them refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import TensorType, is_static_dim
from ..emitter import NetworkEmitter

Layout = tuple[Any, Any, Any]  # (C, H, W) of a [1, 1, C, H, W] blob (H, W may be symbolic: module docstring)


def dims(v: Value) -> list[Any]:
    """The shape of tensor ``v``, symbolic dims included; a LoweringError for an unknown rank."""
    t = v.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"'{v.name}' is a {t}, not a tensor")
    if t.shape is None:
        raise LoweringError(f"'{v.name}' has unknown rank: rank-5 networks need the rank")
    return list(t.shape)


def shape_text(shape: Sequence[Any]) -> list:
    """A shape for a message: ints, symbols by name."""
    return [int(d) if is_static_dim(d) else str(d) for d in shape]


def is_static(shape: Sequence[Any]) -> bool:
    return all(is_static_dim(d) for d in shape)


def sequence_split(shape: Sequence[Any], seq: Any = None) -> tuple[Any, Layout] | None:
    """``(Seq, layout of one step)`` of an IR shape ``[S, 1, ..]`` whose step ``[1, ..]`` has a
    natural layout, with S symbolic or (``seq`` given) S == ``seq``; None otherwise."""
    shape = list(shape)
    if len(shape) < 2 or shape[1] != 1 or (shape[0] != seq if seq is not None else is_static_dim(shape[0])):
        return None
    layout = natural_layout(shape[1:])
    return None if layout is None else (shape[0], layout)


def static_shape(v: Value) -> list[int]:
    """The static shape of tensor ``v``; a LoweringError (naming why) otherwise."""
    t = v.type
    if not isinstance(t, TensorType):
        raise LoweringError(f"'{v.name}' is a {t}, not a tensor")
    if t.shape is None or not all(is_static_dim(d) for d in t.shape):
        shape = "unknown rank" if t.shape is None else f"shape {[str(d) for d in t.shape]}"
        raise LoweringError(f"'{v.name}' has {shape}: rank-5 networks are written for static shapes")
    return [int(d) for d in t.shape]


def natural_layout(shape: Sequence[int]) -> Layout | None:
    """The layout of an IR shape by the simple rule (module docstring); None when the shape has a
    leading (batch or sequence) axis > 1 or rank > 5."""
    shape = list(shape)
    if len(shape) > 5:
        return None
    if len(shape) <= 2:
        if any(d != 1 for d in shape[:-1]):
            return None
        return (shape[-1] if shape else 1, 1, 1)
    if any(d != 1 for d in shape[:-3]):
        return None
    c, h, w = shape[-3:]
    return (c, h, w)


def spatial_layout(v: Value, what: str, *, flexible: bool = False) -> Layout:
    """``(C, H, W)`` of an IR ``[1, C, H, W]`` value (an op acting on channels and two spatial axes);
    ``flexible``: H and W may be symbolic (a layer that does not compute with them)."""
    shape = dims(v) if flexible else static_shape(v)
    if flexible and not is_static_dim(shape[-3] if len(shape) >= 3 else 1):
        raise LoweringError(f"{what} '{v.name}' has a symbolic channel count: rank-5 layers need C")
    if len(shape) != 4 or shape[0] != 1:
        raise LoweringError(f"{what} '{v.name}' has shape {shape}; rank-5 layers take [1, C, H, W] "
                            f"(batch 1, two spatial axes)")
    return (shape[1], shape[2], shape[3])


def chw_layout(v: Value, what: str) -> Layout:
    """``(C, H, W)`` of an IR ``[.., C, H, W]`` value whose leading axes are 1 (an op on the last
    two or three axes, whatever the rank)."""
    shape = static_shape(v)
    layout = natural_layout(shape)
    if len(shape) < 3 or layout is None:
        raise LoweringError(f"{what} '{v.name}' has shape {shape}; rank-5 layers take [.., C, H, W] with "
                            f"leading axes of size 1")
    return layout


def vector_layout(v: Value, what: str) -> Layout:
    """``(C, 1, 1)`` of an IR ``[C]`` / ``[1, C]`` / ``[1, 1, C]`` value (features of a dense layer)."""
    shape = static_shape(v)
    if not shape or len(shape) > 3 or any(d != 1 for d in shape[:-1]):
        raise LoweringError(f"{what} '{v.name}' has shape {shape}; rank-5 dense layers take [C] or [1, C]")
    return (shape[-1], 1, 1)


def channel_layout(v: Value, axis: int, what: str) -> Layout:
    """The layout in which ``axis`` of ``v`` is the blob's C axis: axis -3 of a rank >= 3 value
    ``[.., C, H, W]``, or the last axis of a vector ``[.., C]`` whose other axes are 1."""
    shape = static_shape(v)
    rank = len(shape)
    a = axis + rank if axis < 0 else axis
    if rank >= 3 and a == rank - 3 and natural_layout(shape) is not None:
        return (shape[-3], shape[-2], shape[-1])
    if rank >= 1 and a == rank - 1 and all(d == 1 for d in shape[:-1]):
        return (shape[-1], 1, 1)
    raise LoweringError(f"{what} along axis {axis} of shape {shape}: rank-5 layers work along C only "
                        f"(axis -3 of [.., C, H, W], or the only axis > 1 of a vector)")


class Rank5Emitter(NetworkEmitter):
    """A `NetworkEmitter` that also knows each blob's layout, writes legacy ``loadConstant``
    layers for constants, and records the version fp16 weights need."""

    def __init__(self, network: Any, state: Any) -> None:
        super().__init__(network, state)
        self.layouts: dict[Value, Layout] = {}
        self.seqs: dict[Value, Any] = {}  # sequences (module docstring): value -> its symbolic Seq
        # values written as a concat along C: their parts' blobs and layouts (a split of such a
        # value reads the parts, and the concat layer is dropped when nothing else reads it)
        self.parts: dict[Value, list[tuple[str, Layout]]] = {}
        self._converted: dict[tuple[str, Layout], str] = {}  # (blob, layout) -> blob already reshaped

    def put(self, v: Value, layout: Layout, seq: Any = None) -> str:
        """The blob name of an op's result ``v``, whose layer writes it in ``layout`` (a sequence
        of ``seq`` steps of that layout when ``seq`` is given)."""
        self.layouts[v] = tuple(int(d) if is_static_dim(d) else d for d in layout)  # type: ignore[assignment]
        if seq is not None:
            self.seqs[v] = seq
        return self.define(v)

    def permuted(self, blob: str, axis: list[int], name: str) -> str:
        """A ``permute`` layer of ``blob`` by ``axis`` (of Seq, C, H, W); its blob."""
        out = self.fresh(name)
        self.layer("permute", name, [blob], [out]).axis.extend(axis)
        return out

    def unsequenced(self, v: Value) -> tuple[str, Layout]:
        """The blob and natural layout of a sequence ``v`` with a static Seq, its steps moved out of
        Seq by a ``permute`` (cached): what an op that does not take sequences reads."""
        shape = static_shape(v)
        layout = natural_layout(shape)
        if layout is None:
            raise LoweringError(f"'{v.name}' of shape {shape} has no rank-5 layout outside a sequence")
        key = (self.get(v, None), ("unsequenced",))  # type: ignore[arg-type]
        if key not in self._converted:
            split = sequence_split(shape, self.seq(v))
            assert split is not None
            step = self.get(v, split[1])
            axis = permutation(blob_axes(shape, True), blob_axes(shape, False))
            self._converted[key] = self.permuted(step, axis, f"{step}_unsequenced")  # type: ignore[index]
        return self._converted[key], layout  # type: ignore[index]

    def seq(self, v: Value) -> Any:
        """The Seq of sequence ``v`` (module docstring); None for a value of one step."""
        return self.seqs.get(v)

    def alias(self, out: Value, v: Value) -> None:
        """``out`` holds the same elements as ``v`` in the same order (a reshape): the same blob. A
        shape with leading axes > 1 is fine here; a layer that gives axes a meaning checks it. A
        sequence stays one when ``out`` keeps its Seq as the leading axis and reshapes its steps."""
        shape = dims(out)
        seq = self.seq(v)
        if seq is not None:
            split = sequence_split(shape, seq)
            step = self.layouts[v]
            if split is None or split[0] != seq or (is_static(split[1]) and is_static(step)
                                                    and int(np.prod(split[1])) != int(np.prod(step))):
                raise LoweringError(f"'{out.name}' of shape {shape_text(shape)} reshapes across the "
                                    f"sequence axis of '{v.name}' (rank-5 blobs keep Seq apart)")
            self.seqs[out] = seq
        elif not is_static(shape) and not is_static(dims(v)) and _symbols(shape) != _symbols(dims(v)):
            raise LoweringError(f"'{out.name}' reshapes flexible sizes")
        blob = self.get(v)
        self.bind(out, blob)
        self.layouts[out] = self.layouts[v]
        if v in self.parts:
            self.parts[out] = self.parts[v]

    def layout(self, v: Value) -> Layout:
        self.get(v)
        return self.layouts[v]

    def get(self, v: Value, want: Layout | None = None) -> str:
        """The blob of ``v`` in layout ``want`` (None: as it is); a constant gets a ``loadConstant``
        layer, a blob of another layout a ``flatten`` or ``reshape`` layer (cached)."""
        if self.lookup(v) is None:
            val = self.const(v)
            if val is None:
                raise LoweringError(f"value '{v.name}' is not computed by any layer written before its use")
            arr = np.asarray(val)
            layout = want or natural_layout(arr.shape)
            if layout is None or int(np.prod(layout)) != arr.size:
                raise LoweringError(f"constant '{v.name}' of shape {list(arr.shape)} has no rank-5 form")
            return self.load_constant(v, arr, layout=layout)
        blob = self.lookup(v)
        assert blob is not None
        have = self.layouts[v]
        if want is None or tuple(want) == have:
            return blob
        if not is_static(want) or not is_static(have):
            raise LoweringError(f"'{v.name}' has flexible sizes {shape_text(have)} and would need a "
                                f"reshape to {shape_text(want)} (a reshape layer needs static sizes)")
        want = tuple(int(d) for d in want)  # type: ignore[assignment]
        if int(np.prod(want)) != int(np.prod(have)):
            raise LoweringError(f"'{v.name}' holds {int(np.prod(have))} elements, {int(np.prod(want))} are needed")
        key = (blob, want)
        if key not in self._converted:
            out = self.fresh(f"{blob}_{'x'.join(str(d) for d in want)}")
            if want[1:] == (1, 1):
                self.layer("flatten", f"{blob}_flatten", [blob], [out]).mode = 0  # CHANNEL_FIRST
            else:
                params = self.layer("reshape", f"{blob}_reshape", [blob], [out])
                params.targetShape.extend(want)  # CHANNEL_FIRST (0): the element order is kept
            self._converted[key] = out
        return self._converted[key]

    def load_constant(self, v: Value | None, array: np.ndarray, name: str | None = None, *,
                      layout: Layout | None = None) -> str:
        """A legacy ``loadConstant`` layer ([C, H, W]) holding ``array``; its blob."""
        arr = np.asarray(array)
        layout = layout or natural_layout(arr.shape) or (arr.size, 1, 1)
        base = name or (v.name if v is not None else "const")
        blob = self.state.blob_name(base)
        params = self.layer("loadConstant", base, [], [blob])
        params.shape.extend(int(d) for d in layout)
        self.weights(params.data, arr.reshape(layout))
        if v is not None:
            self.bind(v, blob)
            self.layouts[v] = layout
        return blob

    def weights(self, wp: Any, array: np.ndarray) -> None:
        super().weights(wp, array)
        if np.asarray(array).dtype == np.float16:
            self.state.need(2, "fp16 weights (float16Value)")

    def rename(self, old: str, new: str) -> None:
        """Give blob ``old`` (written by this network's layers) the name ``new`` everywhere."""
        for layer in self.network.layers:
            for names in (layer.input, layer.output):
                for i, n in enumerate(names):
                    if n == old:
                        names[i] = new
        for v, blob in list(self._blobs.items()):
            if blob == old:
                self._blobs[v] = new
        self._converted = {(new if b == old else b, lay): (new if o == old else o)
                           for (b, lay), o in self._converted.items()}


def blob_axes(shape: Sequence[int], sequence: bool) -> dict[int, int]:
    """Which blob axis (0 Seq, 1 C, 2 H, 3 W) holds each IR axis of size > 1 of a value of
    ``shape`` in its natural layout (one step's for a ``sequence``, its axis 0 being Seq); a
    LoweringError when an axis > 1 has none."""
    axes: dict[int, int] = {}
    offset = 1 if sequence else 0
    if sequence:
        axes[0] = 0
    rest = list(shape[offset:])
    rank = len(rest)
    names = {rank - 3: 1, rank - 2: 2, rank - 1: 3} if rank >= 3 else {rank - 1: 1}
    for i, d in enumerate(rest):
        if d != 1:
            if i not in names:
                raise LoweringError(f"shape {list(shape)} has no rank-5 layout")
            axes[i + offset] = names[i]
    return axes


def permutation(source: dict[int, int], target: dict[int, int]) -> list[int]:
    """The ``permute`` axis (output blob axis i = input blob axis axis[i]) that moves each IR
    axis from its ``source`` blob axis to its ``target`` one (axes of size 1 fill the rest)."""
    axis: list[int | None] = [None] * 4
    for ir_axis, t in target.items():
        axis[t] = source[ir_axis]
    spare = [a for a in range(4) if a not in axis]
    return [a if a is not None else spare.pop(0) for a in axis]


def _symbols(shape: Sequence[Any]) -> list[str]:
    return sorted(str(d) for d in shape if not is_static_dim(d))


def op_value(op: Op, key: str) -> Value | None:
    v = op.inputs.get(key)
    return v if isinstance(v, Value) else None
