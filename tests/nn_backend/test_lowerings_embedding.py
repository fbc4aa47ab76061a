"""gather of rows of a constant table -> one embeddingND layer (lowering/_embedding.py).

Oracle: numpy formulas written here: ``table[indices] (+ bias)``, the table dequantized by the
spec's formulas (affine: ``(q - zero_point) * scale`` per channel; lookup table: ``lut[code]``).
Tables are [V, E] with V != E and per-channel parameters distinct and non-symmetric, so a table
written untransposed, or scales applied along the wrong axis, gives other values (or a layer the
reader refuses). Also pinned: the layer kinds (one embeddingND, no gather / loadConstantND) and
the written WeightParams (quantized rawValue + parameters, float16Value, floatValue) read back
from the file with read_model_file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.formats.model_file import read_model_file
from converter.ir.bitpack import pack_subbyte
from converter.ir.core import INDICES_IN_RANGE
from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(11)
V, E = 7, 5
TABLE = RNG.standard_normal((V, E)).astype(np.float32)
IDX = np.array([[3, 0, 6], [1, 1, 5]], np.int32)  # every row but 2 and 4; a repeat


def _layers(path: Path) -> list[Any]:
    return list(read_model_file(path).model.neuralNetwork.layers)


def _embedding(path: Path) -> Any:
    (layer,) = [la for la in _layers(path) if la.WhichOneof("layer") == "embeddingND"]
    return layer.embeddingND


def _run(tmp_path: Path, body, opset: str = "iOS17", idx: np.ndarray = IDX) -> tuple[np.ndarray, Path]:
    path = tmp_path / "m.mlmodel"
    out = run_nn(program({"idx": idx}, body, opset=opset), {"idx": idx}, path)
    return out["y"], path


def test_dense_table_is_one_embedding_layer(tmp_path: Path) -> None:
    got, path = _run(tmp_path, lambda b, i: b.gather(x=TABLE, indices=i, axis=0, name="y"))
    assert_close(got, TABLE[IDX])
    assert layer_kinds(path) == Counter({"expandDims": 1, "embeddingND": 1})  # indices [2, 3] -> [2, 3, 1]
    p = _embedding(path)
    assert (p.vocabSize, p.embeddingSize, p.hasBias) == (V, E, False)
    np.testing.assert_array_equal(np.asarray(p.weights.floatValue, np.float32), TABLE.T.reshape(-1))  # [E, V]


def test_a_bias_add_becomes_the_layer_bias(tmp_path: Path) -> None:
    bias = np.linspace(-1.0, 2.0, E).astype(np.float32)
    got, path = _run(tmp_path, lambda b, i: b.add(x=bias, y=b.gather(x=TABLE, indices=i, axis=0), name="y"))
    assert_close(got, TABLE[IDX] + bias)
    assert layer_kinds(path) == Counter({"expandDims": 1, "embeddingND": 1})
    p = _embedding(path)
    assert p.hasBias and list(p.bias.floatValue) == pytest.approx(bias.tolist())


def test_index_reshapes_are_absorbed(tmp_path: Path) -> None:
    """float indices [2, 3, 1, 1] -> squeeze -> cast int32 -> gather: one squeeze of the input to
    [2, 3, 1] (the layer's input) instead of the squeeze and an expandDims."""
    idx = IDX.astype(np.float32).reshape(2, 3, 1, 1)

    def body(b, i):
        return b.gather(x=TABLE, indices=b.cast(x=b.squeeze(x=i, axes=[-2, -1]), dtype="int32"), axis=0, name="y")

    got, path = _run(tmp_path, body, idx=idx)
    assert_close(got, TABLE[IDX])
    assert layer_kinds(path) == Counter({"squeeze": 1, "embeddingND": 1})
    (squeeze,) = [la for la in _layers(path) if la.WhichOneof("layer") == "squeeze"]
    assert list(squeeze.squeeze.axes) == [3]


def test_a_table_read_by_other_ops_too_is_loaded_once(tmp_path: Path) -> None:
    """Tied weights: the gather's table is also a matmul's operand; one loadConstantND serves both
    (the gather layer), rather than a second copy in an embeddingND."""
    x = RNG.standard_normal((2, E)).astype(np.float32)
    path = tmp_path / "m.mlmodel"

    def body(b, i, x):
        const = b.const(TABLE, "fp32")
        return [b.gather(x=const, indices=i, axis=0, name="y"), b.matmul(x=x, y=const, transpose_y=True, name="z")]

    got = run_nn(program({"idx": IDX, "x": x}, body, opset="iOS17"), {"idx": IDX, "x": x}, path)
    assert_close(got["y"], TABLE[IDX])
    assert_close(got["z"], x @ TABLE.T)
    kinds = layer_kinds(path)
    assert kinds["loadConstantND"] == 1 and kinds["gather"] == 1 and "embeddingND" not in kinds


# -- when negative indices rule the layer out ------------------------------------------------------


def test_an_ios15_gather_of_a_model_input_keeps_the_gather_layer(tmp_path: Path) -> None:
    """Before iOS17 a negative index counts from the end; embeddingND needs indices in [0, V)."""
    idx = np.array([[-1, 0, -7], [2, -3, 6]], np.int32)
    got, path = _run(tmp_path, lambda b, i: b.gather(x=TABLE, indices=i, axis=0, name="y"), opset="iOS15", idx=idx)
    assert_close(got, TABLE[idx])  # numpy counts from the end too
    assert "embeddingND" not in layer_kinds(path) and layer_kinds(path)["gather"] == 1


def test_provably_non_negative_indices_use_the_layer_at_ios15(tmp_path: Path) -> None:
    x = RNG.standard_normal((4, V)).astype(np.float32)
    path = tmp_path / "m.mlmodel"

    def body(b, x):
        return b.gather(x=TABLE, indices=b.reduce_argmax(x=x, axis=-1), axis=0, name="y")

    got = run_nn(program({"x": x}, body, opset="iOS15"), {"x": x}, path)["y"]
    assert_close(got, TABLE[np.argmax(x, axis=-1)])
    assert layer_kinds(path) == Counter({"argMax": 1, "expandDims": 1, "embeddingND": 1})


def test_a_gather_whose_source_requires_indices_in_range_uses_the_layer(tmp_path: Path) -> None:
    """INDICES_IN_RANGE (set by the NeuralNetwork frontend on its reading of an embedding layer)."""

    def body(b, i):
        y = b.gather(x=TABLE, indices=i, axis=0, name="y")
        y.producer.attributes[INDICES_IN_RANGE] = True
        return y

    got, path = _run(tmp_path, body, opset="iOS15")
    assert_close(got, TABLE[IDX])
    assert layer_kinds(path) == Counter({"expandDims": 1, "embeddingND": 1})


def test_the_attribute_is_never_written_to_an_ml_program(tmp_path: Path) -> None:
    def body(b, i):
        y = b.gather(x=TABLE, indices=i, axis=0, name="y")
        y.producer.attributes[INDICES_IN_RANGE] = True
        return y

    out = tmp_path / "m.mlpackage"
    converter.convert(program({"idx": IDX}, body, opset="iOS15"), to="mlprogram", out=out, passes="none")
    written = b"".join(p.read_bytes() for p in out.rglob("*.mlmodel"))
    assert b"gather" in written and INDICES_IN_RANGE.encode() not in written


# -- weight forms ------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["cast", "transposed", "fp16_gather"])
def test_an_fp16_table_stays_fp16(tmp_path: Path, form: str) -> None:
    """An fp16 constant cast to fp32; transposed: the NeuralNetwork frontend's reading of fp16
    embedding weights, transpose(cast(fp16 [E, V])); fp16_gather: an fp16 program's gather of the
    fp16 table (its result cast to fp32 for the output)."""
    t16 = TABLE.astype(np.float16)

    def body(b, i):
        if form == "fp16_gather":
            return b.cast(x=b.gather(x=b.const(t16, "fp16"), indices=i, axis=0), dtype="fp32", name="y")
        if form == "transposed":
            table = b.transpose(x=b.cast(x=b.const(np.ascontiguousarray(t16.T), "fp16"), dtype="fp32"), perm=[1, 0])
        else:
            table = b.cast(x=b.const(t16, "fp16"), dtype="fp32")
        return b.gather(x=table, indices=i, axis=0, name="y")

    got, path = _run(tmp_path, body)
    assert_close(got, t16.astype(np.float64)[IDX])
    wp = _embedding(path).weights
    assert not wp.floatValue
    np.testing.assert_array_equal(np.frombuffer(wp.float16Value, "<f2"), t16.T.reshape(-1))


def _affine(b, q: np.ndarray, zp: np.ndarray, scale: np.ndarray, axis: int):
    return b.constexpr_affine_dequantize(quantized_data=q, zero_point=zp, scale=scale, axis=np.int32(axis))


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_8bit_per_channel_table_is_written_quantized(tmp_path: Path, dtype: str) -> None:
    """Scales and zero points along the table's axis 1 (E): along the stored rows, as the layer's
    per-channel parameters run. Distinct per channel, so applying them per vocabulary entry fails."""
    lo, hi = (0, 256) if dtype == "uint8" else (-128, 128)
    q = RNG.integers(lo, hi, (V, E)).astype(dtype)
    zp = np.array([3, -9, 0, 17, -2], dtype) if dtype == "int8" else np.array([3, 200, 0, 17, 90], dtype)
    scale = np.array([0.01, 0.05, 0.002, 0.3, 0.07], np.float32)
    table = (q.astype(np.float64) - zp.astype(np.float64)) * scale.astype(np.float64)
    got, path = _run(tmp_path, lambda b, i: b.gather(x=_affine(b, q, zp, scale, 1), indices=i, axis=0, name="y"))
    assert_close(got, table[IDX])
    assert layer_kinds(path) == Counter({"expandDims": 1, "embeddingND": 1})
    wp = _embedding(path).weights
    assert wp.quantization.numberOfBits == 8 and len(wp.rawValue) == V * E and not wp.floatValue
    assert list(wp.quantization.linearQuantization.scale) == pytest.approx(scale.tolist())


def test_8bit_per_vocabulary_entry_scales_are_written_dense(tmp_path: Path) -> None:
    """Scales along axis 0 (V) would run along the stored columns: no NeuralNetwork form; dense."""
    q = RNG.integers(0, 256, (V, E)).astype(np.uint8)
    zp = np.arange(V).astype(np.uint8) * 7
    scale = np.linspace(0.01, 0.2, V).astype(np.float32)
    table = (q.astype(np.float64) - zp[:, None]) * scale[:, None].astype(np.float64)
    got, path = _run(tmp_path, lambda b, i: b.gather(x=_affine(b, q, zp, scale, 0), indices=i, axis=0, name="y"))
    assert_close(got, table[IDX])
    wp = _embedding(path).weights
    assert not wp.HasField("quantization") and len(wp.floatValue) == V * E


def test_a_transposed_8bit_table_is_written_quantized(tmp_path: Path) -> None:
    """The NeuralNetwork frontend's reading: transpose(perm=[1, 0]) of the stored [E, V] weights,
    quantized per stored row (axis 0)."""
    q = RNG.integers(0, 256, (E, V)).astype(np.uint8)
    zp = np.array([3, 200, 0, 17, 90], np.uint8)
    scale = np.array([0.01, 0.05, 0.002, 0.3, 0.07], np.float32)
    table = ((q.astype(np.float64) - zp[:, None]) * scale[:, None].astype(np.float64)).T

    def body(b, i):
        return b.gather(x=b.transpose(x=_affine(b, q, zp, scale, 0), perm=[1, 0]), indices=i, axis=0, name="y")

    got, path = _run(tmp_path, body)
    assert_close(got, table[IDX])
    wp = _embedding(path).weights
    assert wp.quantization.numberOfBits == 8 and len(wp.rawValue) == V * E
    assert list(wp.quantization.linearQuantization.scale) == pytest.approx(scale.tolist())


@pytest.mark.parametrize("nbits", [2, 4, 8])
def test_lookup_table_weights_are_written_quantized(tmp_path: Path, nbits: int) -> None:
    lut = np.linspace(-0.9, 1.3, 1 << nbits).astype(np.float32) ** 3
    codes = RNG.integers(0, 1 << nbits, (V, E)).astype(np.uint8)

    def body(b, i):
        w = b.constexpr_lut_to_dense(indices=pack_subbyte(codes.reshape(-1), nbits), lut=lut,
                                     shape=np.array([V, E], np.uint32))
        return b.gather(x=w, indices=i, axis=0, name="y")

    got, path = _run(tmp_path, body)
    assert_close(got, lut.astype(np.float64)[codes][IDX])
    assert layer_kinds(path) == Counter({"expandDims": 1, "embeddingND": 1})
    wp = _embedding(path).weights
    assert wp.quantization.numberOfBits == nbits and len(wp.rawValue) == -(-V * E * nbits // 8)
    assert list(wp.quantization.lookupTableQuantization.floatValue) == pytest.approx(lut.tolist())


# -- a NeuralNetwork model's embeddingND, read and written again -----------------------------------------


def test_a_quantized_embedding_nd_model_comes_back_as_one_quantized_layer(tmp_path: Path) -> None:
    """coremltools' builder writes a 4-bit LUT embeddingND with a bias (a table of >= 2048 values:
    the NeuralNetwork frontend keeps such weights compressed, as a transposed constexpr); NN -> IR ->
    NN gives one embeddingND layer (no gather: the frontend marks the indices as in range) whose
    weights are the same LUT form."""
    from tests.nn.common import builder, quiet_coremltools

    vocab, size = 64, 40
    lut = np.linspace(-1.0, 0.5, 16).astype(np.float32)
    codes = RNG.integers(0, 16, (size, vocab)).astype(np.uint8)  # [E, V], the layer's layout
    bias = np.linspace(0.5, -0.5, size).astype(np.float32)
    nn = builder({"x": (2, 3, 1)}, nd=True)
    from converter.backends.neuralnetwork.lowering.quant import pack_msb_first

    nn.add_embedding_nd("emb", "x", "y", vocab_size=vocab, embedding_size=size,
                        W=pack_msb_first(codes.reshape(-1), 4).tobytes(), b=bias, is_quantized_weight=True,
                        quantization_type="lut", nbits=4, quant_lut=lut)
    src, out = tmp_path / "src.mlmodel", tmp_path / "out.mlmodel"
    quiet_coremltools().models.MLModel(nn.spec, skip_model_load=True).save(str(src))
    converter.convert(src, to="neuralnetwork", out=out)
    idx = np.array([[63, 0, 17], [40, 40, 5]])
    got = converter.run(converter.load(out), {"x": idx.astype(np.float32).reshape(2, 3, 1)})["y"]
    assert_close(got, lut[codes].T.astype(np.float64)[idx] + bias)
    assert layer_kinds(out) == Counter({"embeddingND": 1})
    p = _embedding(out)
    assert (p.vocabSize, p.embeddingSize, p.hasBias) == (vocab, size, True)
    assert p.weights.quantization.numberOfBits == 4 and len(p.weights.rawValue) == vocab * size // 2
    assert list(p.weights.quantization.lookupTableQuantization.floatValue) == pytest.approx(lut.tolist())
