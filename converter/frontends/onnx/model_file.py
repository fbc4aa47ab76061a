"""Reading an ONNX model: the protobuf, its external data, its initializers, its inferred types.

Initializers are numpy views where the data allows. A model file is read without its large
``raw_data`` fields (converter/formats/protowire.py takes them out before protobuf parses the
rest), which become views of the mapped file: nothing is copied or read until used. External data
is a ``np.memmap`` of the data file. ``raw_data`` of a model given as bytes or a message is an
``np.frombuffer`` view of the bytes protobuf hands out. Typed fields (``float_data`` ...) and bf16
need a copy.
The caller's ``ModelProto`` is never modified: shape inference works on a copy that holds only the
small initializers (large ones are declared as typed graph inputs instead, so a big model is not
serialized twice).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from ...errors import FormatError, UnsupportedError
from ...limits import MAX_DIMENSION, MAX_RANK

#: Initializers up to this size stay in the model given to shape inference (its data propagation
#: reads shape-like constants); larger ones are declared as typed inputs.
INFERENCE_INLINE_BYTES = 1 << 16

_RAW_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "<f4", TensorProto.DOUBLE: "<f8", TensorProto.FLOAT16: "<f2", TensorProto.INT64: "<i8",
    TensorProto.INT32: "<i4", TensorProto.INT16: "<i2", TensorProto.INT8: "i1", TensorProto.UINT64: "<u8",
    TensorProto.UINT32: "<u4", TensorProto.UINT16: "<u2", TensorProto.UINT8: "u1", TensorProto.BOOL: "?",
}


#: raw_data fields at least this large stay in the file (mapped) when a model is read from a path.
MAPPED_MIN_BYTES = INFERENCE_INLINE_BYTES
_RAW_DATA = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number


@dataclass
class ModelSource:
    model: onnx.ModelProto
    label: str  # the file name, or "<bytes>" / "<ModelProto>", for messages
    base_dir: Path | None  # where external data files are looked up
    payloads: list[memoryview] | None = None  # raw_data left in the mapped file, by marker index

    def mapped_raw_data(self, t: onnx.TensorProto) -> memoryview | None:
        """The raw_data of ``t`` when it was left in the mapped file."""
        if not self.payloads:
            return None
        from ...formats.protowire import payload_indices

        idx = payload_indices(t)
        return self.payloads[idx[0]] if idx and idx[0] < len(self.payloads) else None


def read_model(source: Any, base_dir: str | os.PathLike | None = None) -> ModelSource:
    """Parse a path, bytes or ``onnx.ModelProto`` (the message is used as it is, never modified)."""
    if isinstance(source, onnx.ModelProto):
        return _checked(ModelSource(source, "<ModelProto>", Path(base_dir) if base_dir is not None else None))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _checked(ModelSource(_parse(bytes(source), "<bytes>"), "<bytes>",
                                    Path(base_dir) if base_dir is not None else None))
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        model, payloads = _read_file(path)
        return _checked(ModelSource(model, str(path), Path(base_dir) if base_dir is not None else path.parent,
                                    payloads))
    raise UnsupportedError(f"cannot load a {type(source).__name__} as an ONNX model: give a path, bytes or an "
                           "onnx.ModelProto")


def _checked(src: ModelSource) -> ModelSource:
    """``src``, once every text field of its model is text: onnx.proto is proto2, whose string
    fields may hold any bytes, and protobuf hands out those that are not UTF-8 as ``bytes``
    (a value or op name of bytes would break everything downstream)."""
    where = _first_non_text(src.model, "model")
    if where is not None:
        raise FormatError(f"{where} is not valid UTF-8 text", file=src.label)
    return src


def _first_non_text(msg: Any, path: str) -> str | None:
    """The path of the first string field of ``msg`` (nested messages included) holding bytes."""
    for where, fd, values in _set_fields(msg, path):
        if fd.type == fd.TYPE_STRING:
            for i, x in enumerate(values):
                if not isinstance(x, str):
                    return where + (f"[{i}]" if _repeated(fd) else "")
    return None


def _set_fields(msg: Any, path: str) -> Iterator[tuple[str, Any, Sequence[Any]]]:
    """(path, descriptor, values) of every set field of ``msg`` and of the messages nested in it,
    depth first; a singular field's value as a one-element list."""
    for fd, val in msg.ListFields():
        where = f"{path}.{fd.name}"
        values = val if _repeated(fd) else (val,)
        yield where, fd, values
        if fd.type == fd.TYPE_MESSAGE:
            for i, sub in enumerate(values):
                yield from _set_fields(sub, where + (f"[{i}]" if _repeated(fd) else ""))


def _repeated(fd: Any) -> bool:
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED


def _is_large_raw_data(descriptor: object, number: int, length: int) -> bool:
    return descriptor is onnx.TensorProto.DESCRIPTOR and number == _RAW_DATA and length >= MAPPED_MIN_BYTES


def _read_file(path: Path) -> tuple[onnx.ModelProto, list[memoryview]]:
    """The model in ``path`` with its large raw_data left in the file, mapped (a malformed file
    the walk cannot split is parsed whole, so that protobuf says what is wrong)."""
    from ...formats.files import open_regular
    from ...formats.protowire import WireError, split_payloads
    from ...limits import MAX_MODEL_FILE_BYTES

    label = str(path)
    try:
        with open_regular(path, max_bytes=MAX_MODEL_FILE_BYTES, what="ONNX model file") as f:
            size = os.fstat(f.fileno()).st_size
            try:
                skeleton, found = split_payloads(f.fileno(), size, onnx.ModelProto.DESCRIPTOR, _is_large_raw_data,
                                                 within=(onnx.TensorProto.DESCRIPTOR,))
            except WireError:
                return _parse(f.read(), label), []
            model = _parse(skeleton, label)
            if not found:
                return model, []
            view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            return model, [view[start:start + n] for _, start, n in found]
    except OSError as e:
        raise FormatError(f"cannot read the file: {e.strerror or e}", file=label) from None


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise FormatError(f"not an ONNX model (protobuf parse failed: {e})", file=label) from None
    if not m.HasField("graph"):
        raise FormatError("the ONNX model has no graph", file=label)
    return m


def tensor_array(t: onnx.TensorProto, src: ModelSource) -> np.ndarray:
    """The tensor's data as numpy, in its ONNX dtype (a view where possible, see module doc)."""
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims):
        raise FormatError(f"tensor '{t.name}' has a negative dimension {list(dims)}", file=src.label)
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if t.data_type == TensorProto.STRING:
        raise UnsupportedError(f"tensor '{t.name}' holds strings, which the IR's operations cannot take",
                               file=src.label)
    if t.data_location == TensorProto.EXTERNAL:
        return _external(t, dims, count, src)
    raw = _RAW_DTYPES.get(t.data_type)
    mapped = src.mapped_raw_data(t)
    if raw is not None and (mapped is not None or t.HasField("raw_data")):
        buf = mapped if mapped is not None else t.raw_data
        want = count * np.dtype(raw).itemsize
        if len(buf) != want:
            raise FormatError(f"tensor '{t.name}' has {len(buf)} bytes of raw data, its shape {list(dims)} needs "
                              f"{want}", file=src.label)
        return np.frombuffer(buf, dtype=raw).reshape(dims)
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds for malformed tensors
        raise FormatError(f"tensor '{t.name}' cannot be read: {e}", file=src.label) from None
    if arr.size != count:
        raise FormatError(f"tensor '{t.name}' holds {arr.size} values, its shape {list(dims)} needs {count}",
                          file=src.label)
    return arr.reshape(dims)


def _external(t: onnx.TensorProto, dims: tuple[int, ...], count: int, src: ModelSource) -> np.ndarray:
    info = {e.key: e.value for e in t.external_data}
    raw = _RAW_DTYPES.get(t.data_type)
    if raw is None:
        raise UnsupportedError(f"tensor '{t.name}': external data of type "
                               f"{TensorProto.DataType.Name(t.data_type)} is not supported", file=src.label)
    if src.base_dir is None:
        raise FormatError(f"tensor '{t.name}' keeps its data in the external file '{info.get('location')}': load "
                          "the model from its path (or give base_dir)", file=src.label)
    location = info.get("location", "")
    rel = Path(location)
    if not location or rel.is_absolute() or ".." in rel.parts:
        raise FormatError(f"tensor '{t.name}': external data location '{location}' must be a relative path "
                          "inside the model's folder", file=src.label)
    path = src.base_dir / rel
    try:
        offset = int(info.get("offset", 0))
        nbytes = count * np.dtype(raw).itemsize
        length = int(info.get("length", nbytes))
    except ValueError:
        raise FormatError(f"tensor '{t.name}': bad external data offset/length", file=src.label) from None
    if length != nbytes or offset < 0:
        raise FormatError(f"tensor '{t.name}': external data length {length} at offset {offset}, its shape "
                          f"{list(dims)} needs {nbytes} bytes", file=src.label)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise FormatError(f"tensor '{t.name}': cannot read external data file '{location}': {e.strerror or e}",
                          file=src.label) from None
    if offset + nbytes > size:
        raise FormatError(f"tensor '{t.name}': external data file '{location}' has {size} bytes, the tensor needs "
                          f"{nbytes} at offset {offset}", file=src.label)
    if nbytes == 0:
        return np.zeros(dims, dtype=raw)
    return np.memmap(path, dtype=raw, mode="r", offset=offset, shape=dims)


def _copy_fields(src: Any, dst: Any, skip: str) -> None:
    """Copy every set field of message ``src`` into ``dst`` except ``skip`` (no deep copy of it)."""
    for fd, val in src.ListFields():
        if fd.name == skip:
            continue
        if _repeated(fd):
            getattr(dst, fd.name).extend(val)
        elif fd.message_type:
            getattr(dst, fd.name).CopyFrom(val)
        else:
            setattr(dst, fd.name, val)


def inferred_types(src: ModelSource) -> onnx.GraphProto:
    """The main graph after onnx's shape inference (strict, with data propagation), with inputs,
    outputs and value_info typed where onnx could infer them."""
    m = src.model
    slim = onnx.ModelProto()
    _copy_fields(m, slim, skip="graph")
    g = slim.graph
    _copy_fields(m.graph, g, skip="initializer")
    inputs = {i.name for i in g.input}
    for t in m.graph.initializer:
        if (t.data_location != TensorProto.EXTERNAL and t.ByteSize() <= INFERENCE_INLINE_BYTES
                and src.mapped_raw_data(t) is None):
            g.initializer.append(t)
        elif t.name not in inputs:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    _check_declared_sizes(slim.graph, src.label)
    try:
        inferred = onnx.shape_inference.infer_shapes(slim, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FormatError(f"ONNX shape inference failed: {msg}", file=src.label) from None
    except Exception as e:  # noqa: BLE001 - onnx's C++ layer raises plain RuntimeError/ValueError too
        raise FormatError(f"ONNX shape inference failed: {type(e).__name__}: {e}", file=src.label) from None
    return inferred.graph


#: Operands whose length onnx's shape inference turns into a rank (a result of that many dims),
#: by op type and operand index: Expand's shape, Unsqueeze's axes, Pad's pads ...
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Expand": (1,), "Reshape": (1,), "ConstantOfShape": (0,), "Unsqueeze": (1,), "Squeeze": (1,), "Tile": (1,),
    "Resize": (1, 2, 3), "Upsample": (1,), "Pad": (1,), "Slice": (1, 2, 3, 4), "CenterCropPad": (1,),
}


def _check_declared_sizes(graph: onnx.GraphProto, label: str) -> None:
    """Refuse, before onnx's shape inference sees them, sizes it would allocate for: a declared
    dim over `limits.MAX_DIMENSION` anywhere, and a declared length over twice `limits.MAX_RANK`
    of an operand whose length becomes a rank (``Expand``'s shape of declared length 2^63 - 1 made
    onnx's C++ inference run out of memory; found by fuzzing). The IR refuses such shapes anyway."""
    declared: dict[str, list[int]] = {}
    for what, vis in (("input", graph.input), ("output", graph.output), ("value", graph.value_info)):
        for vi in vis:
            dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else ()
            sizes = [d.dim_value for d in dims if d.HasField("dim_value")]
            bad = next((d for d in sizes if not 0 <= d <= MAX_DIMENSION), None)
            if bad is not None:
                raise FormatError(f"{what} '{vi.name}' declares a dimension of {bad} (at most {MAX_DIMENSION})", file=label)
            if len(dims) == 1 and len(sizes) == 1:
                declared[vi.name] = sizes
    for t in graph.initializer:
        bad = next((d for d in t.dims if not 0 <= d <= MAX_DIMENSION), None)
        if bad is not None:
            raise FormatError(f"initializer '{t.name}' has a dimension of {bad} (at most {MAX_DIMENSION})", file=label)
        if len(t.dims) == 1:
            declared[t.name] = list(t.dims)
    for n in graph.node:
        for i in SHAPE_OPERANDS.get(n.op_type, ()):
            name = n.input[i] if i < len(n.input) else ""
            if name in declared and declared[name][0] > 2 * MAX_RANK:
                raise UnsupportedError(f"{n.op_type} '{n.name or n.output[0]}': operand '{name}' declares "
                                       f"{declared[name][0]} entries, so a rank over {MAX_RANK}", file=label)


def external_data_locations(model: onnx.ModelProto) -> list[str]:
    """Every external data file the model's tensors name (their ``location``, sorted, each once),
    wherever the tensors are: initializers, sparse initializers, tensor attributes, subgraphs and
    functions. A migration's fingerprint counts these files too."""
    return sorted({e.value for _, fd, values in _set_fields(model, "model") if fd.message_type is _TENSOR
                   for t in values if t.data_location == TensorProto.EXTERNAL
                   for e in t.external_data if e.key == "location" and e.value})


_TENSOR = TensorProto.DESCRIPTOR
