"""quantize / dequantize (iOS17) as float layers, checked against the formulas of the MIL ops
written here: dequantize ``(x - zero_point) * scale``, quantize
``clip(round(x / scale) + zero_point, lo, hi)`` (inputs avoid exact .5 ties: the round layer's tie
rule is unspecified)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .helpers import assert_close, layer_kinds, program, run_nn

X = np.array([[-3.3, -0.2, 0.7, 2.6], [10.1, -12.4, 1.9, 0.06], [40.2, -40.3, 3.3, -7.7]], np.float32)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_dequantize_per_tensor(tmp_path: Path, dtype: str) -> None:
    zp, scale = (np.int8(-3) if dtype == "int8" else np.uint8(100)), np.float32(0.25)

    def body(b, x):
        q = b.quantize(input=x, scale=scale, zero_point=zp, output_dtype=dtype, name="q")
        return [b.dequantize(input=q, scale=np.float32(0.5), zero_point=zp, name="dq")]

    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": X}, body, opset="iOS17"), {"x": X}, path).values()
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    q = np.clip(np.rint(X / 0.25) + float(zp), lo, hi)  # clips on both sides for these values
    assert q.min() == lo and q.max() == hi
    assert_close(got, (q - float(zp)) * 0.5)
    assert layer_kinds(path) == {"divideBroadcastable": 1, "loadConstantND": 1, "round": 1, "add": 2, "clip": 1,
                                 "multiply": 1}


def test_quantize_dequantize_per_axis(tmp_path: Path) -> None:
    scale = np.array([0.5, 0.125, 2.0], np.float32)
    zp = np.array([1, -2, 0], np.int8)
    dq_scale = np.array([0.3, 1.5, -0.7, 2.0], np.float32)
    dq_zp = np.array([3, 0, -1, 5], np.int8)

    def body(b, x):
        q = b.quantize(input=x, scale=scale, zero_point=zp, axis=np.int32(0), output_dtype="int8", name="q")
        return [b.dequantize(input=q, scale=dq_scale, zero_point=dq_zp, axis=np.int32(-1), name="dq")]

    (got,) = run_nn(program({"x": X}, body, opset="iOS17"), {"x": X}, tmp_path / "m.mlmodel").values()
    q = np.clip(np.rint(X / scale[:, None]) + zp[:, None], -128, 127)
    assert_close(got, (q - dq_zp) * dq_scale)


def test_dequantize_without_zero_point_is_one_layer(tmp_path: Path) -> None:
    def body(b, x):
        q = b.quantize(input=x, scale=np.float32(0.1), output_dtype="uint8", name="q")
        return [b.dequantize(input=q, scale=np.float32(0.1), name="dq")]

    x = np.abs(X)
    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": x}, body, opset="iOS17"), {"x": x}, path).values()
    assert_close(got, np.clip(np.rint(x / np.float32(0.1)), 0, 255) * np.float32(0.1))
    assert layer_kinds(path)["multiply"] == 1 and "add" not in layer_kinds(path)


def test_msb_first_packing_is_what_the_frontend_unpacks() -> None:
    from converter.backends.neuralnetwork.lowering.quant import pack_msb_first
    from converter.frontends.neuralnetwork.weights import unpack_msb_first

    rng = np.random.default_rng(3)
    for nbits in range(1, 9):
        codes = rng.integers(0, 1 << nbits, 37).astype(np.uint8)
        packed = pack_msb_first(codes, nbits)
        assert packed.size == -(-37 * nbits // 8)
        np.testing.assert_array_equal(unpack_msb_first(packed.tobytes(), nbits, 37), codes)
    # the layout itself: 2-bit codes 1, 2, 3 -> 01 10 11 00 (most significant bits first)
    assert pack_msb_first(np.array([1, 2, 3], np.uint8), 2).tolist() == [0b01101100]


def test_compressed_recurrent_weights_stay_quantized(tmp_path: Path) -> None:
    """An lstm whose weight_ih is an 8-bit int8 affine dequantization and weight_hh a 4-bit lookup
    table: the layer's gate matrices are quantized WeightParams (rawValue + QuantizationParams),
    and the values are those of the dense weights (recurrence written here)."""
    from converter.formats.model_file import read_model_file
    from converter.ir.bitpack import pack_subbyte

    rng = np.random.default_rng(5)
    s, b, i, h = 4, 2, 3, 5
    q_ih = rng.integers(-128, 128, (4 * h, i)).astype(np.int8)
    zp, scale = np.int8(-7), np.float32(0.02)
    w_ih = (q_ih.astype(np.float32) - np.float32(zp)) * scale
    lut = np.linspace(-0.6, 0.5, 16).astype(np.float32)
    codes = rng.integers(0, 16, (4 * h, h)).astype(np.uint8)
    w_hh = lut[codes]
    x = rng.standard_normal((s, b, i)).astype(np.float32)

    def body(bb, x):
        wi = bb.constexpr_affine_dequantize(quantized_data=q_ih, zero_point=zp, scale=scale, axis=np.int32(0))
        wh = bb.constexpr_lut_to_dense(indices=pack_subbyte(codes.reshape(-1), 4), lut=lut,
                                       shape=np.array(codes.shape, np.uint32))
        zeros = np.zeros((b, h), np.float32)
        return list(bb.lstm(x=x, initial_h=zeros, initial_c=zeros, weight_ih=wi, weight_hh=wh,
                            output_sequence=True, name="lstm"))[:1]

    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": x}, body, opset="iOS16"), {"x": x}, path).values()
    hs, cs, want = np.zeros((b, h), np.float32), np.zeros((b, h), np.float32), []
    for t in range(s):
        gi, gf, go, gz = np.split(x[t] @ w_ih.T + hs @ w_hh.T, 4, axis=-1)
        cs = 1 / (1 + np.exp(-gf)) * cs + 1 / (1 + np.exp(-gi)) * np.tanh(gz)
        hs = 1 / (1 + np.exp(-go)) * np.tanh(cs)
        want.append(hs)
    assert_close(got, np.stack(want))
    (layer,) = [la for la in read_model_file(path).model.neuralNetwork.layers
                if la.WhichOneof("layer") == "uniDirectionalLSTM"]
    wp = layer.uniDirectionalLSTM.weightParams
    for gate in ("inputGate", "forgetGate", "outputGate", "blockInput"):
        w, r = getattr(wp, f"{gate}WeightMatrix"), getattr(wp, f"{gate}RecursionMatrix")
        assert w.quantization.numberOfBits == 8 and len(w.rawValue) == h * i and not w.floatValue
        assert r.quantization.numberOfBits == 4 and len(r.rawValue) == h * h // 2 + (h * h) % 2
        assert list(r.quantization.lookupTableQuantization.floatValue) == pytest.approx(lut.tolist())


def test_prepare_records_per_channel_linear_weights_for_the_layer() -> None:
    """The contract for the layers' lowerings: after the backend's prepare step, a linear op whose
    weight was a per-output-channel 8-bit affine dequantization (uint8 here) carries that form
    (compressed(op, "weight")), whose values are the dequantized weight's; a per-channel form on the
    input axis is not recorded (NeuralNetwork scales run along output channels)."""
    from converter.backends.neuralnetwork import prepare_program
    from converter.backends.neuralnetwork.lowering.quant import compressed

    rng = np.random.default_rng(9)
    q = rng.integers(0, 256, (6, 4)).astype(np.uint8)
    zp, scale = rng.integers(0, 256, 6).astype(np.uint8), rng.uniform(0.01, 0.1, 6).astype(np.float32)
    q_in, zp_in, scale_in = q.T.copy(), zp, scale  # [4, 6]: scales along the input axis 1

    def body(b, x):
        w = b.constexpr_affine_dequantize(quantized_data=q, zero_point=zp, scale=scale, axis=np.int32(0))
        w_in = b.constexpr_affine_dequantize(quantized_data=q_in, zero_point=zp_in, scale=scale_in, axis=np.int32(1))
        return [b.linear(x=x, weight=w, name="fc"), b.linear(x=b.linear(x=x, weight=w, name="fc0"), weight=w_in,
                                                              name="fc_in")]

    prog = prepare_program(program({"x": np.zeros((2, 4), np.float32)}, body, opset="iOS16"))
    ops = {op.name: op for op in prog.main.block.ops}
    form = compressed(ops["fc"], "weight")
    assert form is not None and form.nbits == 8 and form.scale.size == 6
    np.testing.assert_allclose(form.dense(), (q.astype(np.float32) - zp[:, None]) * scale[:, None], rtol=1e-6,
                               atol=1e-7)
    assert compressed(ops["fc_in"], "weight") is None


def test_a_stale_compressed_record_is_not_used() -> None:
    """A record whose values no longer match the op's input (rewritten after recording) is ignored."""
    from converter.backends.neuralnetwork import prepare_program
    from converter.backends.neuralnetwork.lowering.quant import COMPRESSED, QuantizedWeights, compressed

    def body(b, x):
        return [b.linear(x=x, weight=np.ones((3, 2), np.float32), name="fc")]

    prog = prepare_program(program({"x": np.zeros((1, 2), np.float32)}, body))
    (fc,) = [op for op in prog.main.block.ops if op.type == "linear"]
    ones = QuantizedWeights(1, np.ones((3, 2), np.uint8), lut=np.array([0.0, 1.0], np.float32))
    fc.attributes[COMPRESSED] = {"weight": ones}
    assert compressed(fc, "weight") is ones
    fc.attributes[COMPRESSED] = {"weight": QuantizedWeights(1, np.zeros((3, 2), np.uint8), lut=ones.lut)}
    assert compressed(fc, "weight") is None
