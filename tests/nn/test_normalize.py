"""NeuralNetwork layers of layers/linear.py and layers/normalize.py against independent expectations.

Every model is converted, run, saved as MIL, loaded and run again (bit-identical outputs), and
read by coremltools' MIL loader (tests/nn/common.py). Expectations come from
onnxmltools + onnxruntime where it converts a layer correctly, else from the spec's formula written
here in numpy or torch. Where the oracle disagrees with the spec the disagreement is asserted next
to the formula: embedding bias (broadcast to the wrong shape), l2normalize (over C only), reduce
LOGSUM (log(sum x) instead of sum(log(x + eps))), softmax of [C, H, W] (over W).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from converter.formats.proto import NeuralNetwork_pb2
from tests.nn_models.coverage import oracle_checks

from .common import (
    assert_load_error,
    builder,
    compare_with_oracle,
    convert_and_run,
    flexible,
    load_spec,
    onnx_oracle,
    op_types,
    quiet_coremltools,
)
from .normalize_util import close, last_layer

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "batchedMatmul",
    "batchnorm",
    "embedding",
    "embeddingND",
    "innerProduct",
    "l2normalize",
    "layerNormalization",
    "lrn",
    "mvn",
    "reduce",
    "reduceL1",
    "reduceL2",
    "reduceLogSum",
    "reduceLogSumExp",
    "reduceMax",
    "reduceMean",
    "reduceMin",
    "reduceProd",
    "reduceSum",
    "reduceSumSquare",
    "softmax",
    "softmaxND",
}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def fp16_spec(spec):
    """``spec`` with every float weight stored as fp16 (coremltools' own utility)."""
    from coremltools.models.utils import _convert_neural_network_spec_weights_to_fp16

    quiet_coremltools()
    return _convert_neural_network_spec_weights_to_fp16(spec)


# =============================================================================================
# innerProduct


@pytest.mark.parametrize("has_bias", [True, False])
def test_inner_product_rank5_matches_onnx(tmp_path, rng, has_bias):
    b = builder({"x": (6,)})
    w = rng.standard_normal((4, 6)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    b.add_inner_product("ip", w, bias if has_bias else None, 6, 4, has_bias, "x", "y")
    x = rng.standard_normal(6)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")
    close(outs["y"], (w @ x + (bias if has_bias else 0)).reshape(4, 1, 1))


def test_inner_product_rank5_flattens_chw(tmp_path, rng):
    # [Seq, Batch, C, H, W] -> (Seq * Batch, C * H * W) rows; onnxmltools only takes [N, C, 1, 1]
    b = builder({"x": (2, 3, 4)})
    w = rng.standard_normal((5, 24)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    b.add_inner_product("ip", w, bias, 24, 5, True, "x", "y")
    x = rng.standard_normal((2, 3, 4))
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], (w @ x.reshape(-1) + bias).reshape(5, 1, 1))


def _inner_product_expected(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """The N-D spec's reshaping rules, written out per rank."""
    rank = x.ndim
    if rank <= 3:
        return x @ w.T + bias
    if rank == 4:
        y = x.reshape(x.shape[0], -1) @ w.T + bias
        return y.reshape(y.shape + (1, 1))
    y = x.reshape(x.shape[0], x.shape[1], -1) @ w.T + bias
    return y.reshape(y.shape + (1, 1))


@pytest.mark.parametrize("shape", [(24,), (5, 24), (2, 3, 24), (5, 2, 3, 4), (5, 6, 2, 3, 4)], ids=str)
def test_inner_product_nd_ranks(tmp_path, rng, shape):
    b = builder({"x": shape}, nd=True)
    w = rng.standard_normal((7, 24)).astype(np.float32)
    bias = rng.standard_normal(7).astype(np.float32)
    b.add_inner_product("ip", w, bias, 24, 7, True, "x", "y")
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], _inner_product_expected(x, w, bias))


def test_inner_product_flexible_leading_axes(tmp_path, rng):
    b = builder({"x": (2, 3, 2, 3, 4)}, nd=True)
    w = rng.standard_normal((5, 24)).astype(np.float32)
    b.add_inner_product("ip", w, None, 24, 5, False, "x", "y")
    flexible(b.spec, "x", [1, 1, 2, 3, 4], [8, -1, 2, 3, 4])
    import converter

    prog = load_spec(b.spec, tmp_path)
    assert not all(isinstance(d, int) for d in prog.main.inputs[0].type.shape)
    for shape in [(1, 4, 2, 3, 4), (3, 2, 2, 3, 4)]:
        x = rng.standard_normal(shape)
        close(converter.run(prog, {"x": x})["y"], _inner_product_expected(x, w, np.zeros(5)))
    outs, _ = convert_and_run(b.spec, {"x": np.ones((2, 3, 2, 3, 4))}, tmp_path)
    assert outs["y"].shape == (2, 3, 5, 1, 1)


def test_inner_product_quantized_weights_keep_compression(tmp_path, rng):
    # 8-bit linear quantization per output channel with integral zero points: constexpr weights
    # (the compression is kept for tensors of >= 2048 elements: 64 x 48 here)
    cout, cin = 64, 48
    codes = rng.integers(0, 256, (cout, cin)).astype(np.uint8)
    scale = (2.0 ** -rng.integers(3, 7, cout)).astype(np.float32)  # exact zero points -bias / scale
    zero = rng.integers(100, 150, cout)
    qbias = (-zero * scale).astype(np.float32)
    b = builder({"x": (cin,)})
    b.add_inner_product("ip", codes.tobytes(), None, cin, cout, False, "x", "y", is_quantized_weight=True,
                        quantization_type="linear", nbits=8, quant_scale=scale, quant_bias=qbias)
    x = rng.standard_normal(cin)
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    assert "constexpr_affine_dequantize" in op_types(prog)
    w = codes.astype(np.float32) * scale[:, None] + qbias[:, None]
    close(outs["y"], (w @ x).reshape(cout, 1, 1), rtol=1e-4, atol=1e-4)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size", rtol=1e-4, atol=1e-4)


def test_inner_product_fp16_weights(tmp_path, rng):
    w = rng.standard_normal((4, 6))
    bias = rng.standard_normal(4)
    b = builder({"x": (6,)})
    b.add_inner_product("ip", w, bias, 6, 4, True, "x", "y")
    x = rng.standard_normal(6)
    outs, _ = convert_and_run(fp16_spec(b.spec), {"x": x}, tmp_path)
    w16, b16 = (v.astype(np.float16).astype(np.float64) for v in (w, bias))
    close(outs["y"], (w16 @ x + b16).reshape(4, 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(24,), (5, 24), (2, 3, 24), (5, 2, 3, 4), (5, 6, 2, 3, 4)], ids=str)
@pytest.mark.parametrize("has_bias", [True, False])
def test_inner_product_int8_dynamic_quantize(tmp_path, rng, shape, has_bias):
    # coremltools' device test of the same layer compares with the dequantized-weight product
    w = rng.uniform(-1, 1, (23, 24))
    w_max = np.abs(w).max()
    q = (127.0 * w / w_max).astype(np.int8)
    scale = w_max / 127.0
    bias = rng.standard_normal(23)
    b = builder({"x": shape}, nd=True)
    b.add_inner_product("ip", q.tobytes(), bias if has_bias else None, 24, 23, has_bias, "x", "y",
                        int_8_dynamic_quantize=True, is_quantized_weight=True, quantization_type="linear",
                        nbits=8, quant_scale=np.array([scale]))
    assert last_layer(b).innerProduct.int8DynamicQuantize
    x = rng.standard_normal(shape)
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    wd = q.astype(np.float32) * np.float32(scale)
    close(outs["y"], _inner_product_expected(x, wd, bias if has_bias else np.zeros(23)), rtol=1e-4, atol=1e-4)
    assert any("int8DynamicQuantize" in note for note in prog.meta["notes"])


# =============================================================================================
# batchedMatmul

# (a, b, output) shapes of coremltools' device test: a 1-D operand keeps its added axis
_MATMUL_SHAPES = [
    ((10,), (10,), (1, 1)),
    ((4, 10), (10,), (4, 1)),
    ((10,), (10, 3), (1, 3)),
    ((10,), (2, 10, 3), (2, 1, 3)),
    ((2, 3), (3, 4), (2, 4)),
    ((1, 3, 4), (3, 2, 4, 5), (3, 2, 3, 5)),
    ((1, 3, 1, 2, 3), (1, 4, 3, 2), (1, 3, 4, 2, 2)),
    ((2, 3, 1, 3, 4), (2, 1, 2, 4, 5), (2, 3, 2, 3, 5)),
]


@pytest.mark.parametrize("a_shape,b_shape,out_shape", _MATMUL_SHAPES, ids=str)
def test_batched_matmul_two_inputs(tmp_path, rng, a_shape, b_shape, out_shape):
    b = builder({"a": a_shape, "b": b_shape}, nd=True)
    b.add_batched_mat_mul("mm", ["a", "b"], "y")
    a, bb = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    outs, _ = convert_and_run(b.spec, {"a": a, "b": bb}, tmp_path)
    close(outs["y"], np.matmul(a, bb).reshape(out_shape))


def test_malformed_batched_matmul_shapes(tmp_path):
    """An IR op refusing the layer's inputs: a FormatError naming the layer and its kind."""
    b = builder({"a": (2, 3), "b": (4, 5)}, nd=True)
    b.add_batched_mat_mul("bad_mm", ["a", "b"], "y")
    assert_load_error(b.spec, tmp_path, "bad_mm", ["layer batchedMatmul", "3 != 4", "(in matmul 'bad_mm')"])


@pytest.mark.parametrize("transpose_a,transpose_b", itertools.product([False, True], repeat=2))
def test_batched_matmul_transposes(tmp_path, rng, transpose_a, transpose_b):
    a_shape, b_shape = (2, 3, 4), (4, 5)
    a_shape = a_shape[:-2] + a_shape[-2:][::-1] if transpose_a else a_shape
    b_shape = b_shape[::-1] if transpose_b else b_shape
    b = builder({"a": a_shape, "b": b_shape}, nd=True)
    b.add_batched_mat_mul("mm", ["a", "b"], "y", transpose_a=transpose_a, transpose_b=transpose_b)
    a, bb = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    outs, _ = convert_and_run(b.spec, {"a": a, "b": bb}, tmp_path)
    close(outs["y"], np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a, bb.T if transpose_b else bb))


def test_batched_matmul_transpose_of_a_vector_changes_nothing(tmp_path, rng):
    b = builder({"a": (4,), "b": (4, 5)}, nd=True)
    b.add_batched_mat_mul("mm", ["a", "b"], "y", transpose_a=True)
    a, bb = rng.standard_normal(4), rng.standard_normal((4, 5))
    outs, _ = convert_and_run(b.spec, {"a": a, "b": bb}, tmp_path)
    close(outs["y"], (a @ bb).reshape(1, 5))


@pytest.mark.parametrize("shape", [(11,), (5, 11), (2, 3, 11), (4, 1, 11), (12, 5, 8, 11), (2, 3, 1, 5, 11)], ids=str)
@pytest.mark.parametrize("has_bias", [True, False])
def test_batched_matmul_weight_matrix(tmp_path, rng, shape, has_bias):
    # W is the (X1, X2) matrix of the spec; the builder stores it transposed, as Core ML reads it
    w = rng.standard_normal((11, 23))
    bias = rng.standard_normal(23)
    b = builder({"x": shape}, nd=True)
    b.add_batched_mat_mul("mm", ["x"], "y", weight_matrix_rows=11, weight_matrix_columns=23, W=w,
                          bias=bias if has_bias else None)
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x @ w + (bias if has_bias else 0))


def test_batched_matmul_weight_matrix_ignores_transposes(tmp_path, rng):
    w = rng.standard_normal((3, 4))
    b = builder({"x": (2, 3)}, nd=True)
    b.add_batched_mat_mul("mm", ["x"], "y", weight_matrix_rows=3, weight_matrix_columns=4, W=w)
    last_layer(b).batchedMatmul.transposeA = True
    last_layer(b).batchedMatmul.transposeB = True
    x = rng.standard_normal((2, 3))
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x @ w)
    assert any("transposeA/transposeB" in note for note in prog.meta["notes"])


def test_batched_matmul_int8_dynamic_quantize(tmp_path, rng):
    w = rng.uniform(-10, 10, (11, 23))
    w_max = np.abs(w).max()
    q = (127.0 * w / w_max).astype(np.int8)
    bias = rng.standard_normal(23)
    b = builder({"x": (2, 3, 11)}, nd=True)
    b.add_batched_mat_mul("mm", ["x"], "y", weight_matrix_rows=11, weight_matrix_columns=23,
                          int_8_dynamic_quantize=True, is_quantized_weight=True, quantization_type="linear", nbits=8,
                          W=q.tobytes(), bias=bias, quant_scale=np.array([w_max / 127.0]))
    x = rng.standard_normal((2, 3, 11))
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x @ (q.astype(np.float32) * np.float32(w_max / 127.0)) + bias, rtol=1e-4, atol=1e-4)
    assert any("int8DynamicQuantize" in note for note in prog.meta["notes"])


# =============================================================================================
# embedding, embeddingND


def test_embedding_rank5_matches_onnx(tmp_path, rng):
    w = rng.standard_normal((5, 7)).astype(np.float32)  # [outputChannels, inputDim]
    b = builder({"x": (1,)})
    b.add_embedding("emb", w, None, 7, 5, False, "x", "y")
    for index in (0, 3, 6):
        x = np.array([float(index)])
        outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
        close(outs["y"], w[:, index].reshape(5, 1, 1))
        close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")


def test_embedding_bias_follows_the_spec_not_onnxmltools(tmp_path, rng):
    w = rng.standard_normal((5, 7)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    b = builder({"x": (1,)})
    b.add_embedding("emb", w, bias, 7, 5, True, "x", "y")
    x = np.array([4.0])
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    want = (w[:, 4] + bias).reshape(5, 1, 1)
    close(outs["y"], want)
    theirs = onnx_oracle(b.spec, {"x": x})["y"]
    assert theirs.size != want.size  # onnxmltools broadcasts the bias to [1, 5, 5]


@pytest.mark.parametrize("shape", [(4, 1, 1, 1), (2, 3, 1, 1, 1)], ids=str)
def test_embedding_nd_network(tmp_path, rng, shape):
    w = rng.standard_normal((5, 7)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    b = builder({"x": shape}, nd=True)
    b.add_embedding("emb", w, bias, 7, 5, True, "x", "y")
    x = rng.integers(0, 7, shape).astype(np.float32)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    rows = w.T[x.reshape(shape[:-3]).astype(int)] + bias
    close(outs["y"], rows.reshape(shape[:-3] + (5, 1, 1)))


def test_embedding_quantized_7bit(tmp_path, rng):
    # coremltools' device test of a 7-bit linearly quantized embedding, per-channel scale and bias
    from coremltools.models.neural_network.quantization_utils import _convert_array_to_nbit_quantized_bytes

    codes = rng.integers(0, 128, (2, 3))
    scale, qbias = np.array([[2.0], [5.0]]), np.array([[-2.0], [-10.0]])
    bias = np.array([1.0, 2.0])
    b = builder({"x": (4, 1, 1, 1)}, nd=True)
    b.add_embedding("emb", _convert_array_to_nbit_quantized_bytes(codes.flatten(), 7).tobytes(), bias, 3, 2, True,
                    "x", "y", is_quantized_weight=True, quantization_type="linear", nbits=7,
                    quant_scale=scale.flatten(), quant_bias=qbias.flatten())
    x = np.array([2.0, 2.0, 1.0, 0.0]).reshape(4, 1, 1, 1)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    w = codes * scale + qbias
    close(outs["y"], (w[:, [2, 2, 1, 0]].T + bias).reshape(4, 2, 1, 1))


@pytest.mark.parametrize("shape", [(5, 1), (2, 3, 1), (4, 1, 1), (12, 5, 8, 1), (2, 3, 1, 5, 1)], ids=str)
@pytest.mark.parametrize("has_bias", [True, False])
def test_embedding_nd(tmp_path, rng, shape, has_bias):
    w = rng.standard_normal((19, 10))  # [embeddingSize, vocabSize]
    bias = rng.standard_normal(19)
    b = builder({"x": shape}, nd=True)
    b.add_embedding_nd("emb", "x", "y", vocab_size=10, embedding_size=19, W=w, b=bias if has_bias else None)
    x = rng.integers(0, 10, shape).astype(np.float32)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], np.take(w.T, np.squeeze(x, -1).astype(int), axis=0) + (bias if has_bias else 0))


def test_embedding_nd_fp16_weights(tmp_path, rng):
    w = rng.standard_normal((6, 10))
    b = builder({"x": (3, 1)}, nd=True)
    b.add_embedding_nd("emb", "x", "y", vocab_size=10, embedding_size=6, W=w)
    spec = fp16_spec(b.spec)
    x = np.array([[9.0], [0.0], [4.0]])
    outs, prog = convert_and_run(spec, {"x": x}, tmp_path)
    assert any(op.type == "const" and op.attributes["val"].dtype == np.float16 for op in prog.walk())
    close(outs["y"], w.astype(np.float16).astype(np.float64).T[[9, 0, 4]])


# =============================================================================================
# batchnorm


def _bn_params(rng: np.random.Generator, c: int) -> tuple[np.ndarray, ...]:
    return (rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c), rng.uniform(0.5, 2.0, c))


def _bn(x: np.ndarray, gamma, beta, mean, var, eps: float) -> np.ndarray:
    shape = (-1,) + (1,) * 2
    return gamma.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) + beta.reshape(shape)


def _standardized(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    c = x - x.mean(axes, keepdims=True)
    return c / np.sqrt((c * c).mean(axes, keepdims=True) + eps)


def test_batchnorm_rank5_matches_onnx(tmp_path, rng):
    gamma, beta, mean, var = _bn_params(rng, 3)
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bn", 3, gamma, beta, mean, var, "x", "y", epsilon=1e-3)
    x = rng.standard_normal((3, 4, 5))
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    assert "batch_norm" in op_types(prog)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")
    close(outs["y"], _bn(x, gamma, beta, mean, var, 1e-3))


def test_batchnorm_instance_normalization_matches_onnx(tmp_path, rng):
    gamma, beta, mean, var = _bn_params(rng, 3)
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bn", 3, gamma, beta, mean, var, "x", "y", epsilon=1e-3)
    # set here: the builder would leave mean/variance empty, which onnxmltools' reader cannot take
    last_layer(b).batchnorm.computeMeanVar = last_layer(b).batchnorm.instanceNormalization = True
    x = rng.standard_normal((3, 4, 5))
    outs, prog = convert_and_run(b.spec, {"x": x}, tmp_path)
    assert "instance_norm" in op_types(prog)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")
    g, bt = gamma.reshape(3, 1, 1), beta.reshape(3, 1, 1)
    close(outs["y"], g * _standardized(x, (1, 2), 1e-3) + bt)


def test_batchnorm_computed_statistics_need_no_mean_or_variance(tmp_path, rng):
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bn", 3, gamma, beta, None, None, "x", "y", compute_mean_var=True, instance_normalization=True)
    assert not last_layer(b).batchnorm.mean.floatValue
    x = rng.standard_normal((3, 4, 5))
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], gamma.reshape(3, 1, 1) * _standardized(x, (1, 2), 1e-5) + beta.reshape(3, 1, 1), rtol=1e-4)


def test_batchnorm_flexible_sequence_axis(tmp_path, rng):
    import converter

    gamma, beta, mean, var = _bn_params(rng, 3)
    b = builder({"x": (2, 1, 3, 4, 5)}, nd=True)
    b.add_batchnorm("bn", 3, gamma, beta, mean, var, "x", "y", epsilon=1e-3)
    flexible(b.spec, "x", [1, 1, 3, 4, 5], [-1, 1, 3, 4, 5])
    prog = load_spec(b.spec, tmp_path)
    for seq in (1, 3):
        x = rng.standard_normal((seq, 1, 3, 4, 5))
        close(converter.run(prog, {"x": x})["y"], _bn(x, gamma, beta, mean, var, 1e-3))
    convert_and_run(b.spec, {"x": rng.standard_normal((2, 1, 3, 4, 5))}, tmp_path)


def test_batchnorm_epsilon_defaults_to_1e_5(tmp_path, rng):
    gamma, beta, mean, _ = _bn_params(rng, 3)
    var = np.full(3, 1e-5)  # the default epsilon doubles it: halves the variance term's weight
    b = builder({"x": (3, 2, 2)})
    b.add_batchnorm("bn", 3, gamma, beta, mean, var, "x", "y", epsilon=0.0)
    assert last_layer(b).batchnorm.epsilon == 0
    x = rng.standard_normal((3, 2, 2)) * 1e-3
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], _bn(x, gamma, beta, mean, var, 1e-5), rtol=1e-4)


# (input shape, statistics): N-D inputs of each rank and the three sources of mean / variance;
# rank 5 with a non-unit axis 0 takes the elementwise form, the others MIL's batch_norm/instance_norm
_BN_CASES = list(itertools.product([(3, 4, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5), (2, 2, 3, 4, 5), (2, 1, 2, 3, 2, 2)],
                                   ["given", "instance", "batch"]))


@pytest.mark.parametrize("shape,stats", _BN_CASES, ids=str)
def test_batchnorm_nd(tmp_path, rng, shape, stats):
    c = shape[-3]
    gamma, beta, mean, var = _bn_params(rng, c)
    b = builder({"x": shape}, nd=True)
    b.add_batchnorm("bn", c, gamma, beta, mean, var, "x", "y", epsilon=1e-2)
    layer = last_layer(b).batchnorm
    layer.computeMeanVar = stats != "given"
    layer.instanceNormalization = stats == "instance"
    x = rng.standard_normal(shape) * 3 + 1
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    g, bt = gamma.reshape(-1, 1, 1), beta.reshape(-1, 1, 1)
    if stats == "given":
        want = _bn(x, gamma, beta, mean, var, 1e-2)
    elif stats == "instance":
        want = g * _standardized(x, (-2, -1), 1e-2) + bt
    else:  # per channel over every other axis: the whole batch
        axes = tuple(i for i in range(len(shape)) if i != len(shape) - 3)
        want = g * _standardized(x, axes, 1e-2) + bt
    close(outs["y"], want, rtol=1e-4, atol=1e-5)


def test_batchnorm_fp16_parameters(tmp_path, rng):
    gamma, beta, mean, var = _bn_params(rng, 3)
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bn", 3, gamma, beta, mean, var, "x", "y", epsilon=1e-3)
    x = rng.standard_normal((3, 4, 5))
    outs, _ = convert_and_run(fp16_spec(b.spec), {"x": x}, tmp_path)
    h = [p.astype(np.float16).astype(np.float64) for p in (gamma, beta, mean, var)]
    close(outs["y"], _bn(x, *h, 1e-3), rtol=1e-4, atol=1e-4)


# =============================================================================================
# mvn, l2normalize, softmax, lrn, layerNormalization


@pytest.mark.parametrize("across,normalize", itertools.product([False, True], repeat=2))
def test_mvn_rank5_matches_onnx(tmp_path, rng, across, normalize):
    # onnxruntime divides by std + 1e-9 whatever the layer says: use that epsilon here
    b = builder({"x": (3, 4, 5)})
    b.add_mvn("mvn", "x", "y", across_channels=across, normalize_variance=normalize, epsilon=1e-9)
    x = rng.standard_normal((3, 4, 5)) * 2 + 1
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size", rtol=1e-4)


@pytest.mark.parametrize("across,normalize,eps", [(False, True, 0.5), (True, True, 0.0), (True, False, 0.3),
                                                   (False, False, 0.0)])
def test_mvn_nd(tmp_path, rng, across, normalize, eps):
    b = builder({"x": (2, 3, 4, 5)}, nd=True)
    b.add_mvn("mvn", "x", "y", across_channels=across, normalize_variance=normalize, epsilon=eps)
    x = rng.standard_normal((2, 3, 4, 5)) * 0.5
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    axes = (1, 2, 3) if across else (2, 3)
    centered = x - x.mean(axes, keepdims=True)
    if normalize:
        centered = centered / (np.sqrt((centered**2).mean(axes, keepdims=True)) + (eps or 1e-6))
    close(outs["y"], centered, rtol=1e-4)


def test_l2normalize_vector_matches_onnx(tmp_path, rng):
    b = builder({"x": (6,)})
    b.add_l2_normalize("l2", "x", "y", epsilon=1e-6)
    x = rng.standard_normal(6)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")


def test_l2normalize_over_chw_not_onnxmltools_channels(tmp_path, rng):
    b = builder({"x": (3, 4, 5)})
    b.add_l2_normalize("l2", "x", "y", epsilon=1e-6)
    x = rng.standard_normal((3, 4, 5))
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x / np.sqrt((x**2).sum() + 1e-6))
    per_channel = x / np.sqrt((x**2).sum(0, keepdims=True))  # what onnxmltools computes
    close(onnx_oracle(b.spec, {"x": x})["y"], per_channel, match="size")


@pytest.mark.parametrize("eps", [0.0, 0.01])
def test_l2normalize_nd_batch_and_epsilon(tmp_path, rng, eps):
    b = builder({"x": (2, 3, 2, 2)}, nd=True)
    b.add_l2_normalize("l2", "x", "y", epsilon=eps)
    x = rng.standard_normal((2, 3, 2, 2)) * 0.01
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x / np.sqrt((x**2).sum((1, 2, 3), keepdims=True) + (eps or 1e-6)), rtol=1e-4)


def test_softmax_vector_matches_onnx(tmp_path, rng):
    b = builder({"x": (6,)})
    b.add_softmax("sm", "x", "y")
    x = rng.standard_normal(6)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")


@pytest.mark.parametrize("shape,nd", [((3, 4, 5), False), ((3, 4, 5), True), ((2, 3, 4, 5), True)], ids=str)
def test_softmax_over_channels(tmp_path, rng, shape, nd):
    b = builder({"x": shape}, nd=nd)
    b.add_softmax("sm", "x", "y")
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], torch.softmax(torch.from_numpy(x), dim=-3).numpy())


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_softmax_nd_every_axis(tmp_path, rng, rank):
    shape = tuple(rng.integers(2, 5, rank))
    x = rng.standard_normal(shape)
    for axis in range(-rank, rank):
        b = builder({"x": shape}, nd=True)
        b.add_softmax_nd("sm", "x", "y", axis=axis)
        outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
        close(outs["y"], torch.softmax(torch.from_numpy(x), dim=axis).numpy())


def _lrn(x: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    t = torch.from_numpy(x.reshape((-1,) + x.shape[-3:]))
    return torch.nn.functional.local_response_norm(t, size, alpha, beta, k).numpy().reshape(x.shape)


@oracle_checks("lrn")
@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_rank5_matches_onnx(tmp_path, rng, size):
    # onnxruntime only takes odd sizes (even ones place the window differently in ONNX); alpha,
    # beta and k distinct and none at a default (k 1), so reading one for another changes y
    b = builder({"x": (6, 4, 5)})
    b.add_lrn("lrn", "x", "y", alpha=0.3, beta=0.75, local_size=size, k=2.0)
    x = rng.standard_normal((6, 4, 5)) * 2
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size")
    compare_with_oracle(outs["y"], _lrn(x, size, 0.3, 0.75, 2.0), oracle="torch", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,nd,size,k", [((6, 4, 5), False, 4, 0.0), ((2, 6, 3, 3), True, 2, 1.5),
                                              ((5, 3, 3), True, 3, 0.0), ((2, 1, 6, 3, 3), True, 6, 0.7)], ids=str)
def test_lrn_even_sizes_and_default_k(tmp_path, rng, shape, nd, size, k):
    # alpha is divided by localSize (MIL's local_response_norm, torch); k = 0 means 1
    b = builder({"x": shape}, nd=nd)
    b.add_lrn("lrn", "x", "y", alpha=0.5, beta=0.6, local_size=size, k=k)
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], _lrn(x, size, 0.5, 0.6, k or 1.0))


@oracle_checks("layerNormalization")
@pytest.mark.parametrize("shape,norm_rank,eps", [((5,), 1, 0.3), ((3, 4), 1, 1e-3), ((3, 4), 2, 0.05),
                                                  ((2, 3, 4, 5), 2, 0.5), ((2, 3, 4, 5), 4, 1e-3),
                                                  ((2, 2, 3, 2, 3), 3, 0.1)], ids=str)
def test_layer_normalization(tmp_path, rng, shape, norm_rank, eps):
    """torch's layer_norm: gamma and beta per element of normalizedShape (distinct values, so a
    swap of the two or of two sizes of normalizedShape changes y), eps large enough to matter."""
    norm = shape[-norm_rank:]
    gamma, beta = rng.standard_normal(norm), rng.standard_normal(norm)
    b = builder({"x": shape}, nd=True)
    b.add_layer_normalization("ln", "x", "y", normalized_shape=list(norm), gamma=gamma, beta=beta, eps=eps)
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), norm, torch.from_numpy(gamma),
                                          torch.from_numpy(beta), eps=float(np.float32(eps)))
    compare_with_oracle(outs["y"], want.numpy(), oracle="torch", rtol=1e-4, atol=1e-5)


# =============================================================================================
# reduce (legacy) and the N-D reductions

_ONNX_MODES = ["sum", "avg", "prod", "sumsquare", "L1", "L2", "max", "min"]
_AXES = {"CHW": (0, 1, 2), "HW": (1, 2), "C": (0,), "H": (1,), "W": (2,)}


@oracle_checks("reduce.mode=SUM", "reduce.mode=AVG", "reduce.mode=PROD", "reduce.mode=SUMSQUARE", "reduce.mode=L1",
               "reduce.mode=L2", "reduce.mode=MAX", "reduce.mode=MIN", "reduce.axis=CHW", "reduce.axis=HW",
               "reduce.axis=C", "reduce.axis=H", "reduce.axis=W")
def test_reduce_rank5_matches_onnx(tmp_path, rng):
    """Every mode onnxmltools converts, over every axis; signed inputs (L1 differs from SUM, MIN
    from the smallest magnitude); [C, H, W] sizes distinct (a wrong axis changes the shape)."""
    x = rng.uniform(0.5, 1.5, (3, 4, 5)) * rng.choice([-1.0, 1.0], (3, 4, 5))
    for mode, axis in itertools.product(_ONNX_MODES, _AXES):
        b = builder({"x": (3, 4, 5)})
        b.add_reduce("r", "x", "y", axis=axis, mode=mode)
        outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
        close(outs["y"], onnx_oracle(b.spec, {"x": x})["y"], match="size", rtol=1e-5)
        assert outs["y"].shape == tuple(1 if i in _AXES[axis] else d for i, d in enumerate(x.shape))


@pytest.mark.parametrize("axis", list(_AXES))
@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_reduce_logsum_is_sum_of_logs(tmp_path, rng, axis, eps):
    b = builder({"x": (3, 4, 5)})
    b.add_reduce("r", "x", "y", axis=axis, mode="logsum", epsilon=eps)
    x = rng.uniform(0.5, 1.5, (3, 4, 5))
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], np.log(x + (eps or 1e-6)).sum(_AXES[axis], keepdims=True), rtol=1e-5)
    theirs = onnx_oracle(b.spec, {"x": x})["y"]  # onnxmltools maps LOGSUM to ONNX ReduceLogSum
    close(theirs, np.log(x.sum(_AXES[axis], keepdims=True)), match="size")


@pytest.mark.parametrize("axis", ["C", "H", "W"])
def test_reduce_argmax_gives_float_indices(tmp_path, rng, axis):
    b = builder({"x": (3, 4, 5)})
    b.add_reduce("r", "x", "y", axis=axis, mode="argmax")
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties: the first maximum wins
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    assert outs["y"].dtype == np.float32
    a = _AXES[axis][0]
    close(outs["y"], np.expand_dims(np.argmax(x, a), a))


@pytest.mark.parametrize("shape,axis,mode", [((4, 5), "HW", "avg"), ((2, 3, 4, 5), "C", "max"),
                                             ((2, 3, 4, 5), "CHW", "L2"), ((2, 3, 4, 5), "W", "argmax")], ids=str)
def test_reduce_nd_network(tmp_path, rng, shape, axis, mode):
    b = builder({"x": shape}, nd=True)
    b.add_reduce("r", "x", "y", axis=axis, mode=mode)
    x = rng.standard_normal(shape)
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    axes = {"CHW": (-3, -2, -1), "HW": (-2, -1), "C": (-3,), "H": (-2,), "W": (-1,)}[axis]
    fn = {"avg": np.mean, "max": np.max, "L2": lambda v, axis, keepdims: np.sqrt((v**2).sum(axis, keepdims=keepdims)),
          "argmax": lambda v, axis, keepdims: np.expand_dims(np.argmax(v, axis[0]), axis[0])}[mode]
    close(outs["y"], fn(x, axis=axes, keepdims=True))


def _logsumexp(x, axis, keepdims):
    return np.log(np.exp(x).sum(axis=axis, keepdims=keepdims))


_ND_KINDS = {
    "reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_mean": np.mean, "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_l1": lambda x, axis, keepdims: np.abs(x).sum(axis=axis, keepdims=keepdims),
    "reduce_l2": lambda x, axis, keepdims: np.sqrt((x * x).sum(axis=axis, keepdims=keepdims)),
    "reduce_sumsquare": lambda x, axis, keepdims: (x * x).sum(axis=axis, keepdims=keepdims),
    "reduce_logsum": lambda x, axis, keepdims: np.log(x.sum(axis=axis, keepdims=keepdims)),
    "reduce_logsumexp": _logsumexp,
}


@pytest.mark.parametrize("kind", list(_ND_KINDS))
def test_reduce_nd_kinds(tmp_path, rng, kind):
    x = rng.uniform(0.5, 1.5, (2, 3, 4))
    cases = [((0,), True, False), ((-1, 1), False, False), ((2, 0, 1), False, False), (None, True, True),
             (None, False, True)]
    for axes, keep, reduce_all in cases:
        b = builder({"x": x.shape}, nd=True)
        getattr(b, f"add_{kind}")("r", "x", "y", axes=axes, keepdims=keep, reduce_all=reduce_all)
        outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
        want = np.asarray(_ND_KINDS[kind](x, axis=None if reduce_all else axes, keepdims=keep))
        close(outs["y"], want.reshape(1) if want.ndim == 0 else want, rtol=1e-5)


def test_reduce_nd_axes_ignored_with_reduce_all(tmp_path, rng):
    b = builder({"x": (2, 3)}, nd=True)
    b.add_reduce_max("r", "x", "y", axes=[0], keepdims=True)
    last_layer(b).reduceMax.reduceAll = True
    x = rng.standard_normal((2, 3))
    outs, _ = convert_and_run(b.spec, {"x": x}, tmp_path)
    close(outs["y"], x.max(keepdims=True))


# =============================================================================================
# malformed layers: a FormatError naming the layer


def test_malformed_inner_product_weight_count(tmp_path, rng):
    b = builder({"x": (6,)})
    b.add_inner_product("bad_ip", rng.standard_normal((4, 6)), None, 6, 4, False, "x", "y")
    del last_layer(b).innerProduct.weights.floatValue[-1]
    assert_load_error(b.spec, tmp_path, "bad_ip", "holds 23 values")


def test_malformed_inner_product_input_size(tmp_path, rng):
    b = builder({"x": (5,)})
    b.add_inner_product("bad_ip", rng.standard_normal((4, 6)), None, 6, 4, False, "x", "y")
    assert_load_error(b.spec, tmp_path, "bad_ip", "inputChannels is 6")


def test_malformed_int8_dynamic_quantize_needs_int8_weights(tmp_path, rng):
    b = builder({"x": (6,)}, nd=True)
    b.add_inner_product("bad_ip", rng.standard_normal((4, 6)), None, 6, 4, False, "x", "y")
    last_layer(b).innerProduct.int8DynamicQuantize = True
    assert_load_error(b.spec, tmp_path, "bad_ip", "int8RawValue")


def test_malformed_batched_matmul_bias_with_two_inputs(tmp_path):
    b = builder({"a": (2, 3), "b": (3, 4)}, nd=True)
    b.add_batched_mat_mul("bad_mm", ["a", "b"], "y")
    last_layer(b).batchedMatmul.hasBias = True
    assert_load_error(b.spec, tmp_path, "bad_mm", "bias")


def test_malformed_embedding_input_shape(tmp_path, rng):
    b = builder({"x": (3, 2)}, nd=True)
    b.add_embedding_nd("bad_emb", "x", "y", vocab_size=4, embedding_size=2, W=rng.standard_normal((2, 4)))
    assert_load_error(b.spec, tmp_path, "bad_emb", "last axis must be 1")


def test_malformed_batchnorm_channels(tmp_path, rng):
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bad_bn", 4, *_bn_params(rng, 4), "x", "y")
    assert_load_error(b.spec, tmp_path, "bad_bn", "channels")


def test_malformed_batchnorm_missing_variance(tmp_path, rng):
    b = builder({"x": (3, 4, 5)})
    b.add_batchnorm("bad_bn", 3, *_bn_params(rng, 3), "x", "y")
    last_layer(b).batchnorm.ClearField("variance")
    assert_load_error(b.spec, tmp_path, "bad_bn", "variance")


def test_malformed_softmax_needs_rank_3(tmp_path):
    b = builder({"x": (2, 3)}, nd=True)
    b.add_softmax("bad_sm", "x", "y")
    assert_load_error(b.spec, tmp_path, "bad_sm", "rank >= 3")


def test_malformed_softmax_nd_axis(tmp_path):
    b = builder({"x": (2, 3)}, nd=True)
    b.add_softmax_nd("bad_sm", "x", "y", axis=2)
    assert_load_error(b.spec, tmp_path, "bad_sm", "axis 2")


def test_malformed_lrn_local_size(tmp_path):
    b = builder({"x": (3, 4, 5)})
    b.add_lrn("bad_lrn", "x", "y", alpha=1.0, beta=0.5, local_size=0)
    assert_load_error(b.spec, tmp_path, "bad_lrn", "localSize")


def test_malformed_layer_normalization_shape(tmp_path, rng):
    b = builder({"x": (2, 3)}, nd=True)
    b.add_layer_normalization("bad_ln", "x", "y", normalized_shape=[4], gamma=np.ones(4), beta=np.zeros(4))
    assert_load_error(b.spec, tmp_path, "bad_ln", "normalizedShape")


def test_malformed_reduce_argmax_over_two_axes(tmp_path):
    b = builder({"x": (3, 4, 5)})
    b.add_reduce("bad_r", "x", "y", axis="HW", mode="sum")
    last_layer(b).reduce.mode = NeuralNetwork_pb2.ReduceLayerParams.ARGMAX
    assert_load_error(b.spec, tmp_path, "bad_r", "ARGMAX")


@pytest.mark.parametrize("axes,words", [([], "axes is empty"), ([3], "out of range"), ([1, -2], "repeat")])
def test_malformed_reduce_nd_axes(tmp_path, axes, words):
    b = builder({"x": (2, 3, 4)}, nd=True)
    b.add_reduce_sum("bad_r", "x", "y", axes=[0])
    layer = last_layer(b).reduceSum
    del layer.axes[:]
    layer.axes.extend(axes)
    assert_load_error(b.spec, tmp_path, "bad_r", words)
