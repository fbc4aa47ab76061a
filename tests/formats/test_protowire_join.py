"""Writing payloads into a serialized message without copying them (formats/protowire_join.py).

The oracle is protobuf's own parser (upb), and coremltools' independently generated Core ML
schema (``load_spec``): what we write must parse to the message one gets by setting the fields
through the protobuf API. The shared files check that joining inverts protowire's split.
"""

from __future__ import annotations

import os
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.formats.model_file import read_model_file, write_mlmodel
from converter.formats.proto import Model_pb2, NeuralNetwork_pb2
from converter.formats.protowire import MARKER_FIELD, payload_indices, split_payloads
from converter.formats.protowire_join import joined_segments, mark_payload
from tests.conftest import MODELS

FILES = sorted([*(MODELS / "builder").glob("*.mlmodel"), *(MODELS / "real").glob("*.mlmodel")])
WP = NeuralNetwork_pb2.WeightParams
MODEL = Model_pb2.Model.DESCRIPTOR


def _split(path: Path, take: Callable[[Any, int, int], bool]) -> tuple[bytes, bytes, list[tuple[int, memoryview]]]:
    """(file bytes, skeleton, payloads as (field number, view of the file bytes))."""
    data = path.read_bytes()
    fd = os.open(path, os.O_RDONLY)
    try:
        skeleton, found = split_payloads(fd, len(data), MODEL, take)
    finally:
        os.close(fd)
    view = memoryview(data)
    return data, skeleton, [(number, view[start:start + n]) for number, start, n in found]


def _join(skeleton: bytes, payloads: Any) -> bytes:
    total, segments = joined_segments(skeleton, MODEL, payloads)
    out = b"".join(segments)
    assert len(out) == total
    return out


def test_there_are_shared_files() -> None:
    assert len(FILES) >= 70


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_joining_every_field_back_gives_the_file_message(path: Path) -> None:
    """Every length-delimited non-message field of the file (strings, bytes, packed scalars, in any
    message at any depth, repeated or not) taken out and joined back in: the parsed message is the
    file's. Protobuf equality only: the skeleton's parse and re-serialization moves each marker (an
    unknown field) after its message's known fields, so the payload lands there, not where it was."""
    data, skeleton, payloads = _split(path, lambda d, n, length: True)
    reserialized = Model_pb2.Model.FromString(skeleton).SerializeToString()
    assert Model_pb2.Model.FromString(_join(reserialized, payloads)) == Model_pb2.Model.FromString(data)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_joining_the_weights_back_gives_the_file(path: Path) -> None:
    """The reader's split (WeightParams.floatValue / float16Value, here of any size) joined back: the
    same message always, and the file byte for byte whenever the skeleton survives protobuf's parse
    and re-serialization unchanged (the file is in protobuf's canonical field order and every weight
    field was last in its WeightParams; otherwise the marker, hence the weight, moves to the end)."""
    data, skeleton, payloads = _split(path, lambda d, n, length: d is WP.DESCRIPTOR and n in (1, 2))
    reserialized = Model_pb2.Model.FromString(skeleton).SerializeToString()
    joined = _join(reserialized, payloads)
    assert Model_pb2.Model.FromString(joined) == Model_pb2.Model.FromString(data)
    if reserialized == skeleton:
        assert joined == data


def test_most_shared_files_round_trip_byte_for_byte() -> None:
    """The byte-equality branch above is not vacuous (68 of the 76 files at the time of writing)."""
    identical = 0
    for path in FILES:
        _, skeleton, _ = _split(path, lambda d, n, length: d is WP.DESCRIPTOR and n in (1, 2))
        identical += Model_pb2.Model.FromString(skeleton).SerializeToString() == skeleton
    assert identical >= 60


# -- a model built from scratch -----------------------------------------------------------------------

def _three_layer_model(arrays: list[np.ndarray]) -> tuple[Model_pb2.Model, list[tuple[int, np.ndarray]]]:
    """Model -> neuralNetwork -> 3 layers (convolution, innerProduct, convolution), each weight marked."""
    model = Model_pb2.Model(specificationVersion=4)
    payloads: list[tuple[int, np.ndarray]] = []
    for i, arr in enumerate(arrays):
        layer = model.neuralNetwork.layers.add(name=f"layer{i}", input=[f"x{i}"], output=[f"x{i + 1}"])
        params = layer.innerProduct if i == 1 else layer.convolution
        params.weights.isUpdatable = i == 2  # a field besides the marker
        mark_payload(params.weights, len(payloads))
        payloads.append((1 if arr.dtype == np.float32 else 2, arr))
    return model, payloads


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
            rng.standard_normal((10, 16)).astype(np.float16),
            np.array([np.nan, -0.0, np.inf, 1e-45, -3.5], dtype=np.float32)]  # bit patterns that must survive


def _weights_of(model: Any) -> list[Any]:
    return [layer.innerProduct.weights if i == 1 else layer.convolution.weights
            for i, layer in enumerate(model.neuralNetwork.layers)]


def test_markers_survive_serialization_at_depth_and_in_repeated_fields() -> None:
    model, _ = _three_layer_model(_arrays())
    parsed = Model_pb2.Model.FromString(model.SerializeToString())
    assert [payload_indices(w) for w in _weights_of(parsed)] == [[0], [1], [2]]


def test_written_weights_are_the_arrays_bit_for_bit(tmp_path: Path) -> None:
    arrays = _arrays()
    model, payloads = _three_layer_model(arrays)
    path = tmp_path / "m.mlmodel"
    write_mlmodel(path, model, payloads=payloads)
    assert not list(tmp_path.glob(".*.tmp"))

    def check(weights: list[Any]) -> None:
        for w, arr in zip(weights, arrays, strict=True):
            if arr.dtype == np.float32:
                got = np.array(w.floatValue, dtype=np.float32)
                assert not w.float16Value
            else:
                got = np.frombuffer(w.float16Value, dtype=np.float16)
                assert not w.floatValue
            assert got.tobytes() == arr.tobytes()
        assert [w.isUpdatable for w in weights] == [False, False, True]

    parsed = Model_pb2.Model.FromString(path.read_bytes())
    check(_weights_of(parsed))
    assert not any(payload_indices(w) for w in _weights_of(parsed))  # no marker is left
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from coremltools.models.utils import load_spec
    spec = load_spec(str(path))  # coremltools' own generated schema
    check(_weights_of(spec))
    assert [layer.name for layer in spec.neuralNetwork.layers] == ["layer0", "layer1", "layer2"]


def test_without_payloads_the_file_is_the_serialized_message(tmp_path: Path) -> None:
    model = Model_pb2.Model(specificationVersion=4)
    model.neuralNetwork.layers.add(name="a").innerProduct.weights.floatValue.extend([1.0, 2.0])
    write_mlmodel(tmp_path / "m.mlmodel", model)
    assert (tmp_path / "m.mlmodel").read_bytes() == model.SerializeToString()


# -- sizes at varint boundaries, markers anywhere in their message --------------------------------------

def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _varint(value: int) -> bytes:  # the base-128 encoding, as the protobuf encoding guide gives it
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _key(number, 2) + _varint(len(body)) + body


_SIZES = [0, 1, 127, 128, 16383, 16384, 1 << 21]
# (WeightParams field, numpy dtype its bytes hold)
_KINDS = {1: np.float32, 2: np.float16, 30: np.uint8, 31: np.int8}


@st.composite
def _placements(draw: Any) -> list[tuple[int, str, int, int, int]]:
    """Payloads: (layer, "weights"/"bias", field, byte size, position of the marker among the
    WeightParams' other fields), at most one per WeightParams."""
    slots = draw(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["weights", "bias"])),
                          min_size=1, max_size=4, unique=True))
    out = []
    for layer, slot in slots:
        field = draw(st.sampled_from(sorted(_KINDS)))
        size = draw(st.sampled_from(_SIZES))
        size -= size % np.dtype(_KINDS[field]).itemsize
        out.append((layer, slot, field, size, draw(st.integers(0, 2))))
    return out


def _field_number(message: Any, name: str) -> int:
    return message.DESCRIPTOR.fields_by_name[name].number


@settings(max_examples=40, deadline=None)
@given(placements=_placements(), data=st.data())
def test_joined_message_is_the_message_with_the_fields_set(placements: list[tuple[int, str, int, int, int]],
                                                           data: st.DataObject) -> None:
    """A skeleton encoded by hand (markers before, between or after the other fields of their
    WeightParams; layers' fields in a drawn order), joined: protobuf parses it to the message built
    by setting the same fields through its API."""
    rng = np.random.default_rng(len(placements))
    # random bits, but no NaN in floatValue (protobuf's equality compares floats by value)
    buffers = [rng.standard_normal(size // 4).astype(np.float32) if field == 1 else
               np.frombuffer(rng.bytes(size), dtype=_KINDS[field]) for _, _, field, size, _ in placements]
    payloads = [(field, buf) for (_, _, field, _, _), buf in zip(placements, buffers, strict=True)]
    order = data.draw(st.permutations(list(range(len(payloads)))))  # payload indices need not follow file order
    index_of = {p: i for i, p in enumerate(order)}
    payloads = [payloads[order[i]] for i in range(len(order))]

    expected = Model_pb2.Model(specificationVersion=4)
    layers_wire = b""
    for layer in range(3):
        ip = expected.neuralNetwork.layers.add(name=f"l{layer}").innerProduct
        ip.inputChannels, ip.outputChannels = 7, 300
        ip_fields = [_key(_field_number(ip, "inputChannels"), 0) + _varint(7),
                     _key(_field_number(ip, "outputChannels"), 0) + _varint(300)]
        for slot in ("weights", "bias"):
            wp = getattr(ip, slot)
            wp.isUpdatable = True
            wp.quantization.numberOfBits = 8
            others = [_key(50, 0) + _varint(1), _len_field(40, _key(1, 0) + _varint(8))]
            for p, (lay, s, field, _, position) in enumerate(placements):
                if (lay, s) == (layer, slot):
                    others.insert(position, _key(MARKER_FIELD, 0) + _varint(index_of[p]))
                    if field == 1:
                        wp.floatValue.extend(buffers[p].tolist())
                    else:
                        setattr(wp, WP.DESCRIPTOR.fields_by_number[field].name, buffers[p].tobytes())
            ip_fields.append(_len_field(_field_number(ip, slot), b"".join(others)))
        ip_fields = data.draw(st.permutations(ip_fields))
        layer_wire = _len_field(1, f"l{layer}".encode()) + _len_field(
            _field_number(expected.neuralNetwork.layers[0], "innerProduct"), b"".join(ip_fields))
        layers_wire += _len_field(_field_number(expected.neuralNetwork, "layers"), layer_wire)
    skeleton = _key(1, 0) + _varint(4) + _len_field(_field_number(expected, "neuralNetwork"), layers_wire)

    total, segments = joined_segments(skeleton, MODEL, payloads)
    views = [np.frombuffer(s, np.uint8) for s in segments if isinstance(s, memoryview)]
    for buf in buffers:  # each payload is in the segments as a view of the caller's array, not a copy
        assert buf.nbytes == 0 or any(np.shares_memory(v, buf) for v in views)
    joined = b"".join(segments)
    assert len(joined) == total
    assert Model_pb2.Model.FromString(joined) == expected


# -- memory -------------------------------------------------------------------------------------------

def test_a_64_mb_weight_is_written_without_a_copy(tmp_path: Path) -> None:
    weight = np.arange(16 << 20, dtype=np.float32)  # 64 MiB
    model = Model_pb2.Model(specificationVersion=4)
    layer = model.neuralNetwork.layers.add(name="fc", input=["x"], output=["y"])
    layer.innerProduct.inputChannels, layer.innerProduct.outputChannels = 1 << 12, 1 << 12
    mark_payload(layer.innerProduct.weights, 0)

    tracemalloc.start()
    try:
        write_mlmodel(tmp_path / "big.mlmodel", model, payloads=[(1, weight)])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        copy = weight.tobytes()  # the measurement sees a copy when there is one
        _, copy_peak = tracemalloc.get_traced_memory()
        del copy
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, f"writing allocated {peak} bytes at peak"
    assert copy_peak >= weight.nbytes

    mf = read_model_file(tmp_path / "big.mlmodel")  # weights come back as a view of the file
    (number, view), = mf.payloads
    assert number == 1 and view == memoryview(weight).cast("B")


# -- errors -------------------------------------------------------------------------------------------

def _one_marked(index: int = 0, **fields: Any) -> bytes:
    model = Model_pb2.Model(specificationVersion=4)
    wp = model.neuralNetwork.layers.add(name="a").innerProduct.weights
    for name, value in fields.items():
        setattr(wp, name, value)
    mark_payload(wp, index)
    return model.SerializeToString()


@pytest.mark.parametrize(("skeleton", "payloads", "message"), [
    (_one_marked(3), [(1, np.zeros(2, np.float32))], "names payload 3, but there are 1 payloads"),
    (_one_marked(), [(3, b"xy")], "payload 0: field number 3 is not a field of CoreML.Specification.WeightParams"),
    (_one_marked(), [(50, b"\x01")], "payload 0: field number 50 is not a length-delimited field"),
    (_one_marked(), [(1, b"abc")], "holds 4-byte items, and 3 bytes is not a whole number of them"),
    (_one_marked(float16Value=b"ab"), [(2, b"cd")], "payload 0: CoreML.Specification.WeightParams field 2 is set"),
    (_one_marked(), [(1, np.zeros((4, 4), np.float32)[:, 0])], "payload 0 is not a C-contiguous buffer"),
    (_one_marked(), [(2, memoryview(b"abcd")[::2])], "payload 0 is not a C-contiguous buffer"),
    (_one_marked(), [(1, np.zeros(4, ">f4"))], "payload 0 is big-endian"),
])
def test_bad_payloads_are_refused_by_name(skeleton: bytes, payloads: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        joined_segments(skeleton, MODEL, payloads)


def test_a_refused_payload_leaves_nothing_behind(tmp_path: Path) -> None:
    model = Model_pb2.Model(specificationVersion=4)
    mark_payload(model.neuralNetwork.layers.add(name="a").innerProduct.weights, 1)
    (tmp_path / "m.mlmodel").write_bytes(b"old")
    with pytest.raises(ValueError, match="names payload 1"):
        write_mlmodel(tmp_path / "m.mlmodel", model, payloads=[(1, b"")])
    assert (tmp_path / "m.mlmodel").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mlmodel"]


def test_two_markers_for_one_field_are_refused() -> None:
    model = Model_pb2.Model(specificationVersion=4)
    wp = model.neuralNetwork.layers.add(name="a").innerProduct.weights
    mark_payload(wp, 0)
    mark_payload(wp, 1)
    with pytest.raises(ValueError, match="payloads 0 and 1 are both field 2"):
        joined_segments(model.SerializeToString(), MODEL, [(2, b"a"), (2, b"b")])


def test_payloads_of_any_shape_are_their_bytes() -> None:
    """A multi-dimensional array is written as its bytes in C order; an empty one (zeros in its
    shape, which memoryview.cast refuses) as an empty field."""
    model = Model_pb2.Model(specificationVersion=4)
    for i in range(2):
        mark_payload(model.neuralNetwork.layers.add(name=f"l{i}").innerProduct.weights, i)
    square = np.arange(6, dtype=np.float16).reshape(2, 3)
    empty = np.zeros((2, 0, 3), np.float32)
    parsed = Model_pb2.Model.FromString(_join(model.SerializeToString(), [(2, square), (1, empty)]))
    first, second = (layer.innerProduct.weights for layer in parsed.neuralNetwork.layers)
    assert first.float16Value == square.tobytes()
    assert len(second.floatValue) == 0 and not payload_indices(second)


# -- walking only the messages that can hold a payload ------------------------------------------------

def _is_weight(d: Any, n: int, length: int) -> bool:
    return d is WP.DESCRIPTOR and n in (1, 2)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_walking_only_weight_containers_splits_the_same(path: Path) -> None:
    """``within=(WeightParams,)`` skips the messages that cannot hold one: same skeleton, same payloads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        assert split_payloads(fd, size, MODEL, _is_weight, within=(WP.DESCRIPTOR,)) == split_payloads(
            fd, size, MODEL, _is_weight)
    finally:
        os.close(fd)


def test_a_mil_program_of_many_fields_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A MIL program holds no WeightParams, so the reader's walk does not enter it: one with more than
    MAX_FIELDS fields (a program of ~100k ops) is split, not refused when too large to parse whole
    (before, a file above 64 MB of that many fields was "not a Core ML model")."""
    from converter.formats import model_file
    from converter.formats.protowire import MAX_FIELDS

    model = Model_pb2.Model(specificationVersion=6)
    fn = model.mlProgram.functions["main"]
    fn.opset = "CoreML5"
    fn.block_specializations["CoreML5"].outputs.extend(f"v{i}" for i in range(MAX_FIELDS + 1))
    path = tmp_path / "big.mlmodel"
    path.write_bytes(model.SerializeToString())
    monkeypatch.setattr(model_file, "_PARSE_WHOLE_MAX_BYTES", 0)  # stands for a file too large to parse whole
    assert read_model_file(path).model == model
