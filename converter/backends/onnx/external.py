"""Writing a ModelProto to a ``.onnx`` file: atomically, checked, with ONNX external data when the
model is too large for one protobuf message.

External data: every initializer of at least `MIN_EXTERNAL_BYTES` moves to ``<name>.onnx.data``
beside the model (offsets aligned to `ALIGNMENT`, as onnx's own writer does); the model refers to
it by that relative name. The data file is written first, then the model, each through a temporary
file renamed into place; a failure removes what this call wrote. An existing data file is replaced
only with ``overwrite`` and only when it is the one the model being replaced names.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import onnx
from onnx import TensorProto

from ...errors import ConverterError
from ...formats.atomic import atomic_write_segments, temp_name_beside

MIN_EXTERNAL_BYTES = 1024
ALIGNMENT = 4096


def data_path(model_path: Path) -> Path:
    """Where the external data of ``model_path`` goes: ``<name>.onnx.data`` beside it."""
    return model_path.with_name(model_path.name + ".data")


def _externalize(model: onnx.ModelProto, location: str) -> list[memoryview | bytes]:
    """Move the large initializers' bytes out of ``model`` (which then names ``location``); the
    data file's segments (padding included)."""
    segments: list[memoryview | bytes] = []
    offset = 0
    for t in model.graph.initializer:
        if not t.HasField("raw_data") or len(t.raw_data) < MIN_EXTERNAL_BYTES:
            continue
        pad = -offset % ALIGNMENT
        if pad:
            segments.append(bytes(pad))
            offset += pad
        raw = t.raw_data
        segments.append(raw)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        offset += len(raw)
    return segments


def _relocate(model: onnx.ModelProto, location: str) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t in copy.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    return copy


def _check(model: onnx.ModelProto | bytes, source: str | None, *, beside: Path | None = None) -> None:
    """The full ONNX check (of the model or its serialized bytes); a model with external data is
    checked from a file in ``beside``'s folder."""
    try:
        if beside is None:
            onnx.checker.check_model(model, full_check=True)
            return
        assert isinstance(model, onnx.ModelProto)
        probe = temp_name_beside(beside, "check")
        try:
            probe.write_bytes(model.SerializeToString())
            onnx.checker.check_model(str(probe), full_check=True)
        finally:
            with contextlib.suppress(FileNotFoundError):
                probe.unlink()
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise ConverterError(f"internal error: the ONNX model written is invalid: {err}", file=source) from err


def _names_data(existing_model: Path, data_name: str) -> bool:
    """Whether the ONNX model at ``existing_model`` keeps tensors in the file ``data_name``."""
    try:
        model = onnx.load(str(existing_model), load_external_data=False)
    except Exception:  # noqa: BLE001 - whatever it is, it is not a model naming the file
        return False
    return any(e.key == "location" and e.value == data_name
               for t in model.graph.initializer for e in t.external_data)


def save_model_file(model: onnx.ModelProto, dest: Path, *, overwrite: bool, durable: bool,
                    external_threshold: int, source: str | None = None) -> None:
    """Check ``model`` and write it to ``dest`` (see the module docstring). ``model`` is modified
    when its data goes external."""
    total = sum(t.ByteSize() for t in model.graph.initializer)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if total + (1 << 20) <= external_threshold:
        data = model.SerializeToString()  # once: checked and written
        _check(data, source)
        atomic_write_segments(dest, (data,), durable=durable, overwrite=overwrite)
        return
    data_file = data_path(dest)
    if os.path.lexists(data_file) and not (overwrite and os.path.lexists(dest) and _names_data(dest, data_file.name)):
        raise ConverterError(f"the model's weights go to '{data_file.name}' beside it, which already exists"
                             + ("" if overwrite else "; replace it with --overwrite (overwrite=True in Python)")
                             + (" and is not the data of the model being replaced" if overwrite else ""),
                             file=str(dest))
    segments = _externalize(model, data_file.name)
    tmp_data = temp_name_beside(data_file)
    atomic_write_segments(tmp_data, segments, durable=durable, overwrite=False)
    try:
        _check(_relocate(model, tmp_data.name), source, beside=dest)
        if overwrite:
            os.replace(tmp_data, data_file)
        else:
            _publish(tmp_data, data_file)
        try:
            atomic_write_segments(dest, (model.SerializeToString(),), durable=durable, overwrite=overwrite)
        except BaseException:
            if not overwrite:
                with contextlib.suppress(FileNotFoundError):
                    data_file.unlink()
            raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_data.unlink()


def _publish(tmp: Path, dest: Path) -> None:
    """Link ``tmp`` into place without replacing anything (FileExistsError if ``dest`` appeared)."""
    os.link(tmp, dest)
    tmp.unlink()


__all__ = ["data_path", "save_model_file"]
