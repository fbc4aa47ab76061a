"""Reading a bare .mlmodel keeps its large NeuralNetwork weights in the mapped file
(formats/protowire.py): the parsed message is the file's message without them, and decoding a
weight gives exactly what decoding the fully parsed message gives, as a read-only view of the file.
Checked on every shared .mlmodel (NeuralNetwork or not) and on hand-made wire encodings.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from converter.errors import FormatError
from converter.formats.model_file import read_model_file
from converter.formats.proto import Model_pb2, NeuralNetwork_pb2
from converter.formats.protowire import payload_indices, split_payloads
from converter.frontends.neuralnetwork import weights

from .shared import NN_FILES, REAL, model_id

_FIELDS = {1: "floatValue", 2: "float16Value"}


def _weight_params(msg: Any) -> Iterator[Any]:
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            value = list(value.values()) if fd.message_type.fields_by_name["value"].message_type else []
        for item in value if fd.is_repeated else [value]:
            if fd.message_type.name == "WeightParams":
                yield item
            yield from _weight_params(item)


def _count(wp: Any) -> int:
    return len(wp.floatValue) or len(wp.float16Value) // 2


@pytest.mark.parametrize("path", NN_FILES, ids=model_id)
def test_split_parse_is_the_full_parse_without_the_weights(path: Path) -> None:
    mf = read_model_file(path)
    full = Model_pb2.Model.FromString(path.read_bytes())
    taken = 0
    for mine, theirs in zip(_weight_params(mf.model), _weight_params(full), strict=True):
        for i in payload_indices(mine):
            number, view = mf.payloads[i]
            assert len(view) == len(getattr(theirs, _FIELDS[number])) * (4 if number == 1 else 1)
            n = _count(theirs)
            a = weights.decode(mine, (n,), payloads=mf.payloads).dense
            b = weights.decode(theirs, (n,)).dense
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
            assert not a.flags.writeable and not a.flags.owndata  # a view of the file
            theirs.ClearField(_FIELDS[number])
            taken += 1
    assert taken == len(mf.payloads)
    for m in (mf.model, full):  # the markers (other unknown fields are copied as they are)
        m.DiscardUnknownFields()
    assert mf.model.SerializeToString(deterministic=True) == full.SerializeToString(deterministic=True)


def test_large_weights_are_views_of_the_file() -> None:
    for name, kind in (("7485461f_SqueezeNetFP16.mlmodel", "float16Value"), ("799a4a00_model_cpm.mlmodel", "floatValue")):
        mf = read_model_file(REAL / name)
        assert {_FIELDS[n] for n, _ in mf.payloads} == {kind}
        # most of the file (the rest: small weights of the cpm's 757 layers, structure, labels)
        assert sum(len(v) for _, v in mf.payloads) > 0.8 * (REAL / name).stat().st_size


def _weight_params_bytes(*chunks: bytes) -> bytes:
    """A WeightParams whose floatValue is stored as the given packed chunks, one field each."""
    out = b""
    for c in chunks:
        out += bytes([0x0A]) + _varint(len(c)) + c
    return out


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _split(tmp_path: Path, data: bytes) -> tuple[bytes, list[tuple[int, int, int]]]:
    path = tmp_path / "message.bin"
    path.write_bytes(data)
    with open(path, "rb") as f:
        return split_payloads(f.fileno(), len(data), NeuralNetwork_pb2.WeightParams.DESCRIPTOR, lambda *a: True)


def test_a_field_stored_twice_stays_in_place(tmp_path: Path) -> None:
    """The parser concatenates a repeated field stored in several places: such a field is not taken."""
    floats = np.arange(2048, dtype="<f4").tobytes()
    data = _weight_params_bytes(floats[:4096], floats[4096:])
    skeleton, found = _split(tmp_path, data)
    assert found == [] and skeleton == data
    assert NeuralNetwork_pb2.WeightParams.FromString(skeleton).floatValue == list(np.arange(2048, dtype=np.float32))


def test_a_taken_field_leaves_a_marker(tmp_path: Path) -> None:
    floats = struct.pack("<4f", 1.0, 2.0, 3.0, 4.0)
    skeleton, found = _split(tmp_path, _weight_params_bytes(floats))
    assert found == [(1, 2, 16)]
    wp = NeuralNetwork_pb2.WeightParams.FromString(skeleton)
    assert len(wp.floatValue) == 0 and payload_indices(wp) == [0]


def test_truncated_file_is_a_format_error(tmp_path: Path) -> None:
    src = REAL / "799a4a00_model_cpm.mlmodel"
    cut = tmp_path / "cut.mlmodel"
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    with pytest.raises(FormatError, match="protobuf decoding failed"):
        read_model_file(cut)
