"""Reading a bare .mlmodel keeps its large NeuralNetwork weights in the mapped file
(formats/protowire.py): the parsed message is the file's message without them, and decoding a
weight gives exactly what decoding the fully parsed message gives, as a read-only view of the file.
Checked on every shared .mlmodel (NeuralNetwork or not) and on hand-made wire encodings.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from converter.errors import FormatError
from converter.formats.model_file import read_model_file
from converter.formats.proto import Model_pb2, NeuralNetwork_pb2
from converter.formats.protowire import payload_indices, split_payloads
from converter.frontends.neuralnetwork import weights
from converter.frontends.neuralnetwork.weights import iter_weight_params

from .shared import NN_FILES, REAL, model_id

_FIELDS = {1: "floatValue", 2: "float16Value"}


def _count(wp: Any) -> int:
    return len(wp.floatValue) or len(wp.float16Value) // 2


@pytest.mark.parametrize("path", NN_FILES, ids=model_id)
def test_split_parse_is_the_full_parse_without_the_weights(path: Path) -> None:
    mf = read_model_file(path)
    full = Model_pb2.Model.FromString(path.read_bytes())
    taken = 0
    for mine, theirs in zip(iter_weight_params(mf.model), iter_weight_params(full), strict=True):
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


# -- layers whose parameter count is read from the weights (a large one is left in the file) ------


def _activation_model(tmp_path: Path, kind: str, channels: int, fp16: bool) -> tuple[Path, dict[str, np.ndarray]]:
    """A bare .mlmodel of one PReLU / parametricSoftplus over [C, 2, 2] with per-channel parameters
    large enough for the reader to leave in the file."""
    from tests.nn.common import builder

    rng = np.random.default_rng(0)
    params = {"alpha": rng.uniform(0.1, 2.0, channels).astype(np.float32),
              "beta": rng.uniform(0.1, 2.0, channels).astype(np.float32)}
    nn = builder({"x": (channels, 2, 2)})
    if kind == "PRELU":
        nn.add_activation("act", kind, "x", "y", params=params["alpha"])
    else:
        nn.add_activation("act", kind, "x", "y", params=[params["alpha"], params["beta"]])
    if fp16:
        act = getattr(nn.spec.neuralNetwork.layers[0].activation, "PReLU" if kind == "PRELU" else "parametricSoftplus")
        for what in ("alpha", "beta") if kind != "PRELU" else ("alpha",):
            wp = getattr(act, what)
            wp.ClearField("floatValue")
            wp.float16Value = params[what].astype("<f2").tobytes()
            params[what] = params[what].astype(np.float16).astype(np.float32)
    path = tmp_path / f"{kind}.mlmodel"
    path.write_bytes(nn.spec.SerializeToString())
    return path, params


@pytest.mark.parametrize("kind,channels,fp16", [("PRELU", 1024, False), ("PRELU", 2048, True),
                                                ("PARAMETRICSOFTPLUS", 1024, False),
                                                ("PARAMETRICSOFTPLUS", 2048, True)])
def test_per_channel_activation_parameters_left_in_the_file(kind: str, channels: int, fp16: bool,
                                                            tmp_path: Path) -> None:
    import converter

    path, params = _activation_model(tmp_path, kind, channels, fp16)
    assert read_model_file(path).payloads  # the parameters are not in the parsed message
    x = np.random.default_rng(1).standard_normal((channels, 2, 2)).astype(np.float32)
    y = np.asarray(converter.run(converter.load(path), {"x": x})["y"]).reshape(x.shape)
    alpha = params["alpha"].reshape(-1, 1, 1)
    if kind == "PRELU":
        want = np.maximum(x, 0) + alpha * np.minimum(x, 0)
    else:
        want = alpha * np.log1p(np.exp(params["beta"].reshape(-1, 1, 1) * x))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_value_count_includes_the_weights_left_in_the_file(tmp_path: Path) -> None:
    path, _ = _activation_model(tmp_path, "PRELU", 1024, False)
    mf = read_model_file(path)
    wp = mf.model.neuralNetwork.layers[0].activation.PReLU.alpha
    assert len(wp.floatValue) == 0 and payload_indices(wp)
    assert weights.value_count(wp, mf.payloads) == 1024
    assert weights.holds(wp, 1024, mf.payloads) and not weights.holds(wp, 1, mf.payloads)
    assert weights.encoding(wp, mf.payloads) == "floatValue"
    with pytest.raises(weights.WeightError, match="payload 0"):  # the marker, without the file's payloads
        weights.value_count(wp)


@pytest.mark.parametrize("nbits,count", [(8, 5), (4, 5), (4, 6), (3, 7), (1, 1)])
def test_value_count_of_packed_codes(nbits: int, count: int) -> None:
    wp = NeuralNetwork_pb2.WeightParams()
    wp.quantization.numberOfBits = nbits
    wp.quantization.linearQuantization.scale.append(1.0)
    wp.quantization.linearQuantization.bias.append(0.0)
    wp.rawValue = bytes((count * nbits + 7) // 8)
    assert weights.holds(wp, count)
    assert weights.value_count(wp) >= count > weights.value_count(wp) - 8 // nbits
    assert weights.decode(wp, (count,)).decompressed().shape == (count,)
