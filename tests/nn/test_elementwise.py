"""NeuralNetwork elementwise layers (layers/elementwise.py, layers/elementwise_nd.py) against
independent expectations.

Oracles: onnxruntime on onnxmltools' ONNX form of the model for the classic rank-5 layers it
converts (unary, add, multiply, average, max, min, scale, bias, dot, loadConstant); torch for the
spec-4 ND layers (unary math, clip, gelu, comparisons, logical operators, where, the broadcastable
binary operators) and where onnxmltools is wrong (cosine dot); numpy written here from the spec's
formulas for the rest (ND networks of the classic layers, unary modes onnxmltools gets wrong).
Every model is also converted to MIL, loaded again and run (bit-identical outputs), and loaded by
coremltools' MIL proto loader.

Known oracle defects shown here: onnxmltools drops the epsilon of unary RSQRT and INVERSE; its
cosine-similarity dot writes an LpNormalization with an "aixs" attribute (a typo), which
onnxruntime refuses; its add fails with more than two inputs; its unary THRESHOLD is an ONNX Clip
with a double bound, which onnxruntime rejects.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks

from .common import assert_load_error, builder, check_close, compare_with_oracle, convert_and_run, flexible, onnx_oracle
from .elementwise_util import ulp_error

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "acos",
    "acosh",
    "add",
    "addBroadcastable",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "average",
    "bias",
    "ceil",
    "clip",
    "cos",
    "cosh",
    "divideBroadcastable",
    "dot",
    "equal",
    "erf",
    "exp2",
    "floor",
    "floorDivBroadcastable",
    "gelu",
    "greaterEqual",
    "greaterThan",
    "lessEqual",
    "lessThan",
    "loadConstant",
    "loadConstantND",
    "logicalAnd",
    "logicalNot",
    "logicalOr",
    "logicalXor",
    "max",
    "maxBroadcastable",
    "min",
    "minBroadcastable",
    "modBroadcastable",
    "multiply",
    "multiplyBroadcastable",
    "notEqual",
    "powBroadcastable",
    "round",
    "scale",
    "sign",
    "sin",
    "sinh",
    "subtractBroadcastable",
    "tan",
    "tanh",
    "unary",
    "whereBroadcastable",
}

RNG = np.random.default_rng(20240611)


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# ``got`` equals ``want`` (reshaped to ``got``'s shape) within 1e-6
close = functools.partial(check_close, rtol=1e-6, atol=1e-6, match="size")


# ---------------------------------------------------------------------------------------------
# unary


def _unary_spec(x: np.ndarray, mode: str, *, alpha: float = 1.0, shift: float = 0.0, scale: float = 1.0,
                epsilon: float | None = None, nd: bool = False):
    nn = builder({"x": x.shape}, nd=nd)
    nn.add_unary("u", "x", "y", mode, alpha=alpha, shift=shift, scale=scale, epsilon=epsilon)
    return nn.spec


# mode -> (alpha, shift, scale, input range): every parameter that takes part is not its default
_UNARY_ORACLE = {
    "sqrt": (1.0, 0.5, 0.75, (0.2, 3.0)),
    "power": (2.5, 0.5, 0.75, (0.2, 3.0)),
    "exp": (1.0, -0.5, 1.5, (-2.0, 2.0)),
    "log": (1.0, 0.5, 0.75, (0.2, 3.0)),
    "abs": (1.0, -0.5, 0.75, (-2.0, 2.0)),
    "threshold": (0.3, -0.5, 0.75, (-2.0, 2.0)),
}


@pytest.mark.parametrize("mode", [m for m in _UNARY_ORACLE if m != "threshold"])
def test_unary_rank5_against_onnx(mode: str, tmp_path: Path) -> None:
    alpha, shift, scale, (lo, hi) = _UNARY_ORACLE[mode]
    x = rand(3, 4, 5, lo=lo, hi=hi)
    spec = _unary_spec(x, mode, alpha=alpha, shift=shift, scale=scale)
    outs, _ = convert_and_run(spec, {"x": x}, tmp_path)
    close(outs["y"], onnx_oracle(spec, {"x": x})["y"], rtol=2e-6)


def test_unary_threshold_rank5(tmp_path: Path) -> None:
    """max(alpha, x'); onnxmltools writes an invalid ONNX Clip here (a double bound), so numpy."""
    alpha, shift, scale, (lo, hi) = _UNARY_ORACLE["threshold"]
    x = rand(3, 4, 5, lo=lo, hi=hi)
    outs, _ = convert_and_run(_unary_spec(x, "threshold", alpha=alpha, shift=shift, scale=scale), {"x": x}, tmp_path)
    close(outs["y"], np.maximum(alpha, scale * x.astype(np.float64) + shift))


@pytest.mark.parametrize("mode", ["rsqrt", "inverse"])
def test_unary_epsilon_spec_formula_not_onnx(mode: str, tmp_path: Path) -> None:
    """RSQRT: 1 / sqrt(x' + epsilon); INVERSE: 1 / (x' + epsilon), x' = scale x + shift. The
    onnxmltools oracle drops epsilon (shown), so the expectation is the spec's formula."""
    x = rand(3, 4, 5, lo=0.2, hi=3.0)
    eps, shift, scale = 0.25, 0.5, 0.75
    spec = _unary_spec(x, mode, shift=shift, scale=scale, epsilon=eps)
    outs, _ = convert_and_run(spec, {"x": x}, tmp_path)
    xp = scale * x.astype(np.float64) + shift
    f = (lambda v: 1 / np.sqrt(v)) if mode == "rsqrt" else (lambda v: 1 / v)
    close(outs["y"], f(xp + eps), rtol=2e-6)
    oracle = onnx_oracle(spec, {"x": x})["y"]
    close(oracle, f(xp), rtol=2e-6)  # the oracle's known defect: no epsilon
    assert not np.allclose(oracle.reshape(outs["y"].shape), outs["y"])


def test_unary_log_has_no_epsilon(tmp_path: Path) -> None:
    """The spec's LOG is log x (epsilon is in the RSQRT and INVERSE formulas only)."""
    x = np.array([0.0, 1e-30, 0.5, 2.0, -1.0], np.float32)
    outs, _ = convert_and_run(_unary_spec(x, "log", epsilon=0.5, nd=True), {"x": x}, tmp_path)
    with np.errstate(all="ignore"):
        close(outs["y"], np.log(x.astype(np.float64)))


@pytest.mark.parametrize("mode", list(_UNARY_ORACLE) + ["rsqrt", "inverse"])
def test_unary_nd(mode: str, tmp_path: Path) -> None:
    """ND network, rank 2: the same formulas, written out here."""
    alpha, shift, scale, (lo, hi) = _UNARY_ORACLE.get(mode, (1.0, 0.5, 0.75, (0.2, 3.0)))
    x = rand(6, 7, lo=lo, hi=hi)
    eps = 0.125
    outs, _ = convert_and_run(_unary_spec(x, mode, alpha=alpha, shift=shift, scale=scale, epsilon=eps, nd=True),
                              {"x": x}, tmp_path)
    v = scale * x.astype(np.float64) + shift
    want = {"sqrt": np.sqrt, "power": lambda t: t**alpha, "exp": np.exp, "log": np.log, "abs": np.abs,
            "threshold": lambda t: np.maximum(alpha, t), "rsqrt": lambda t: 1 / np.sqrt(t + eps),
            "inverse": lambda t: 1 / (t + eps)}[mode](v)
    assert outs["y"].shape == (6, 7)
    close(outs["y"], want, rtol=2e-6)


def test_unary_scale_zero_is_literal(tmp_path: Path) -> None:
    """scale = 0 (the proto default when a writer leaves it unset) makes x' = shift everywhere,
    as the formula says; the conversion says so in a note."""
    x = rand(2, 3)
    spec = _unary_spec(x, "exp", shift=0.5, scale=1.0, nd=True)
    spec.neuralNetwork.layers[0].unary.scale = 0.0
    outs, prog = convert_and_run(spec, {"x": x}, tmp_path)
    close(outs["y"], np.full((2, 3), np.exp(0.5)))
    assert any("scale is 0" in note for note in prog.meta["notes"])


# ---------------------------------------------------------------------------------------------
# add, multiply, average, max, min


_MERGE_NUMPY = {"ADD": lambda xs: sum(xs[1:], xs[0]), "MULTIPLY": lambda xs: np.prod(np.broadcast_arrays(*xs), 0),
                "AVE": lambda xs: sum(xs[1:], xs[0]) / len(xs), "MAX": lambda xs: np.maximum.reduce(
                    np.broadcast_arrays(*xs)), "MIN": lambda xs: np.minimum.reduce(np.broadcast_arrays(*xs))}


@pytest.mark.parametrize("mode", ["ADD", "MULTIPLY", "AVE", "MAX", "MIN"])
@pytest.mark.parametrize("other", [(3, 4, 5), (3, 1, 1), (1, 4, 5), (1,)], ids=["CHW", "C11", "1HW", "1"])
def test_merge_two_inputs_rank5_against_onnx(mode: str, other: tuple[int, ...], tmp_path: Path) -> None:
    """Two inputs, [C, H, W] with each broadcastable form of the rank-5 spec."""
    nn = builder({"a": (3, 4, 5), "b": other})
    nn.add_elementwise("m", ["a", "b"], "y", mode)
    feeds = {"a": rand(3, 4, 5), "b": rand(*other)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    assert outs["y"].shape == (3, 4, 5)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])


@pytest.mark.parametrize("mode", ["ADD", "MULTIPLY", "AVE", "MAX", "MIN"])
def test_merge_many_inputs_rank5(mode: str, tmp_path: Path) -> None:
    """Four inputs of the four rank-5 forms, [C] a vector over channels ([1, 1, C, 1, 1])."""
    shapes = {"a": (3, 4, 5), "b": (3,), "c": (1, 4, 5), "d": (1,)}
    nn = builder(shapes)
    nn.add_elementwise("m", list(shapes), "y", mode)
    feeds = {k: rand(*s) for k, s in shapes.items()}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    chw = [feeds["a"], feeds["b"].reshape(3, 1, 1), feeds["c"], feeds["d"].reshape(1, 1, 1)]
    close(outs["y"], _MERGE_NUMPY[mode]([v.astype(np.float64) for v in chw]))


@pytest.mark.parametrize("mode", ["ADD", "MULTIPLY", "AVE", "MAX", "MIN"])
def test_merge_many_inputs_nd(mode: str, tmp_path: Path) -> None:
    """ND network: inputs of ranks 4, 3 and 1 broadcast from the last axis."""
    shapes = {"a": (2, 3, 4, 5), "b": (3, 1, 1), "c": (5,)}
    nn = builder(shapes, nd=True)
    nn.add_elementwise("m", list(shapes), "y", mode)
    feeds = {k: rand(*s) for k, s in shapes.items()}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    assert outs["y"].shape == (2, 3, 4, 5)
    close(outs["y"], _MERGE_NUMPY[mode]([v.astype(np.float64) for v in feeds.values()]))


@pytest.mark.parametrize("mode,alpha", [("ADD", 1.75), ("MULTIPLY", -0.5)])
def test_add_multiply_single_input_alpha_against_onnx(mode: str, alpha: float, tmp_path: Path) -> None:
    nn = builder({"x": (3, 4, 5)})
    nn.add_elementwise("m", ["x"], "y", mode, alpha=alpha)
    feeds = {"x": rand(3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])
    close(outs["y"], feeds["x"] + alpha if mode == "ADD" else feeds["x"] * alpha)


@pytest.mark.parametrize("mode", ["AVE", "MAX", "MIN"])
def test_single_input_merge_is_identity(mode: str, tmp_path: Path) -> None:
    nn = builder({"x": (2, 3)}, nd=True)
    nn.add_elementwise("m", ["x"], "y", mode)
    feeds = {"x": rand(2, 3)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    np.testing.assert_array_equal(outs["y"], feeds["x"])


# ---------------------------------------------------------------------------------------------
# scale, bias

_CHW_SHAPES = {"1": (1,), "C": (3,), "1HW": (1, 4, 5), "CHW": (3, 4, 5)}


def _chw(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A [1] / [C] / [1, H, W] / [C, H, W] parameter laid over [C, H, W] (the spec's broadcast)."""
    return values.reshape((shape[0], 1, 1) if len(shape) == 1 else shape).astype(np.float64)


@pytest.mark.parametrize("bias_shape", [None, *_CHW_SHAPES], ids=lambda s: f"bias-{s}")
@pytest.mark.parametrize("scale_shape", list(_CHW_SHAPES), ids=lambda s: f"scale-{s}")
def test_scale_rank5_against_onnx(scale_shape: str, bias_shape: str | None, tmp_path: Path) -> None:
    ss = _CHW_SHAPES[scale_shape]
    sb = _CHW_SHAPES[bias_shape] if bias_shape else None
    w, bb = rand(*ss), (rand(*sb) if sb else None)
    nn = builder({"x": (3, 4, 5)})
    nn.add_scale("s", w, bb, sb is not None, "x", "y", shape_scale=list(ss), shape_bias=list(sb) if sb else None)
    feeds = {"x": rand(3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])
    want = feeds["x"] * _chw(w, ss) + (_chw(bb, sb) if sb else 0.0)
    close(outs["y"], want)


def test_scale_nd_batch_and_fp16(tmp_path: Path) -> None:
    """ND rank 4 [B, C, H, W] (leading axes are batch), fp16 scale and bias ([C] and [1, H, W])."""
    w, bb = rand(3).astype(np.float16), rand(1, 4, 5).astype(np.float16)
    nn = builder({"x": (2, 3, 4, 5)}, nd=True)
    nn.add_scale("s", w, bb, True, "x", "y", shape_scale=[3], shape_bias=[1, 4, 5])
    layer = nn.spec.neuralNetwork.layers[0].scale
    layer.scale.float16Value = w.tobytes()
    layer.bias.float16Value = bb.tobytes()
    del layer.scale.floatValue[:], layer.bias.floatValue[:]
    feeds = {"x": rand(2, 3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    assert outs["y"].shape == (2, 3, 4, 5)
    close(outs["y"], feeds["x"] * _chw(w, (3,)) + _chw(bb, (1, 4, 5)))


@pytest.mark.parametrize("shape", list(_CHW_SHAPES))
def test_bias_rank5_against_onnx(shape: str, tmp_path: Path) -> None:
    sb = _CHW_SHAPES[shape]
    bb = rand(*sb)
    nn = builder({"x": (3, 4, 5)})
    nn.add_bias("b", bb, "x", "y", shape_bias=list(sb))
    feeds = {"x": rand(3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])
    close(outs["y"], feeds["x"] + _chw(bb, sb))


def test_bias_nd_rank5_input(tmp_path: Path) -> None:
    """ND rank 5: the bias binds to the last three axes."""
    bb = rand(3, 4, 5)
    nn = builder({"x": (2, 2, 3, 4, 5)}, nd=True)
    nn.add_bias("b", bb, "x", "y", shape_bias=[3, 4, 5])
    feeds = {"x": rand(2, 2, 3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], feeds["x"] + bb)


def test_bias_linear_quantized(tmp_path: Path) -> None:
    """8-bit linear quantization, one scale for the tensor: w = scale * q + bias (WeightParams).
    The compression is kept (an iOS16 constexpr op, for tensors of >= 2048 elements) and decodes to
    the formula; a small tensor is stored dequantized (compressing it would save nothing)."""
    for shape, compressed in (((16, 16, 16), True), ((3, 4, 5), False)):
        q = RNG.integers(0, 256, int(np.prod(shape))).astype(np.uint8)
        nn = builder({"x": shape}, nd=True)
        nn.add_bias("b", rand(*shape), "x", "y", shape_bias=list(shape))
        wp = nn.spec.neuralNetwork.layers[0].bias.bias
        del wp.floatValue[:]
        wp.rawValue = q.tobytes()
        wp.quantization.numberOfBits = 8
        wp.quantization.linearQuantization.scale.append(0.03125)
        wp.quantization.linearQuantization.bias.append(-2.0)
        feeds = {"x": rand(*shape)}
        outs, prog = convert_and_run(nn.spec, feeds, tmp_path)
        assert prog.main.opset == "iOS16"
        assert any(op.type.startswith("constexpr_") for op in prog.walk()) == compressed
        close(outs["y"], feeds["x"] + (0.03125 * q.astype(np.float64) - 2.0).reshape(shape))


def test_load_constant_nd_lookup_table(tmp_path: Path) -> None:
    """4-bit lookup-table data: w = lut[q], codes packed most significant bits first."""
    q = RNG.integers(0, 16, 30).astype(np.uint8)
    lut = rand(16)
    nn = builder({"x": (2, 3, 5)}, nd=True)
    nn.add_load_constant_nd("k", "k", rand(2, 3, 5), [2, 3, 5])
    wp = nn.spec.neuralNetwork.layers[0].loadConstantND.data
    del wp.floatValue[:]
    wp.rawValue = bytes((hi << 4) | lo for hi, lo in zip(q[0::2], q[1::2]))
    wp.quantization.numberOfBits = 4
    wp.quantization.lookupTableQuantization.floatValue.extend(lut.tolist())
    nn.add_elementwise("m", ["x", "k"], "y", "ADD")
    feeds = {"x": rand(2, 3, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], feeds["x"].astype(np.float64) + lut[q].reshape(2, 3, 5))


def test_flexible_shapes(tmp_path: Path) -> None:
    """Symbolic H and W (a shape range): scale / bias over C, and where with the condition widest,
    run at a size other than the declared default."""
    nn = builder({"x": (3, 4, 5), "c": (2, 3, 4, 5)}, ("y", "w"), nd=True)
    s, bb = rand(3), rand(3)
    nn.add_scale("s", s, bb, True, "x", "y", shape_scale=[3], shape_bias=[3])
    nn.add_where_broadcastable("wh", ["c", "y", "x"], "w")
    for name, rank in (("x", 3), ("c", 4)):
        flexible(nn.spec, name, [1] * (rank - 2) + [1, 1], [2] * (rank - 3) + [3, 8, 8])
    feeds = {"x": rand(3, 2, 7), "c": _small_ints(2, 3, 2, 7)}
    outs, prog = convert_and_run(nn.spec, feeds, tmp_path)
    assert any(not isinstance(d, int) for d in prog.main.inputs[0].type.shape)
    want_y = feeds["x"] * s.reshape(3, 1, 1) + bb.reshape(3, 1, 1)
    close(outs["y"], want_y)
    np.testing.assert_array_equal(outs["w"], np.where(feeds["c"] != 0, outs["y"], feeds["x"]))


# ---------------------------------------------------------------------------------------------
# dot


@oracle_checks("dot")
def test_dot_rank5_against_onnx(tmp_path: Path) -> None:
    """The dot product over C of two [C, 1, 1] inputs: onnxruntime on onnxmltools' ONNX form."""
    nn = builder({"a": (6,), "b": (6,)})
    nn.add_elementwise("d", ["a", "b"], "y", "DOT")
    feeds = {"a": rand(6), "b": rand(6)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])


def _torch_dot(a: np.ndarray, b: np.ndarray, cosine: bool) -> np.ndarray:
    """torch's dot product (or cosine similarity) over axis -3, the axis kept."""
    import torch

    ta, tb = (torch.from_numpy(v.astype(np.float64)) for v in (a, b))
    out = torch.nn.functional.cosine_similarity(ta, tb, dim=-3) if cosine else (ta * tb).sum(dim=-3)
    return out.unsqueeze(-3).numpy()


@oracle_checks("dot")
def test_dot_cosine_rank5_against_torch(tmp_path: Path) -> None:
    """cosineSimilarity: x . y / (|x| |y|) over C. onnxmltools writes its LpNormalization with an
    "aixs" attribute (a typo), which onnxruntime refuses (shown), so torch's cosine_similarity is
    the oracle."""
    nn = builder({"a": (6,), "b": (6,)})
    nn.add_elementwise("d", ["a", "b"], "y", "COS")
    feeds = {"a": rand(6), "b": rand(6)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    want = _torch_dot(feeds["a"].reshape(6, 1, 1), feeds["b"].reshape(6, 1, 1), cosine=True)
    compare_with_oracle(outs["y"], want, oracle="torch", rtol=1e-6, atol=1e-6, match="size")
    with pytest.raises(Exception, match="aixs"):
        onnx_oracle(nn.spec, feeds)


@oracle_checks("dot")
@pytest.mark.parametrize("cosine", [False, True])
def test_dot_nd_batch_against_torch(cosine: bool, tmp_path: Path) -> None:
    """ND [B, C, 1, 1] -> [B, 1, 1, 1]: one product per batch item (a reduction over the wrong
    axis fails)."""
    nn = builder({"a": (4, 6, 1, 1), "b": (4, 6, 1, 1)}, nd=True)
    nn.add_elementwise("d", ["a", "b"], "y", "COS" if cosine else "DOT")
    feeds = {"a": rand(4, 6, 1, 1), "b": rand(4, 6, 1, 1)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    assert outs["y"].shape == (4, 1, 1, 1)
    compare_with_oracle(outs["y"], _torch_dot(feeds["a"], feeds["b"], cosine), oracle="torch", rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# loadConstant, loadConstantND


@oracle_checks("loadConstant")
def test_load_constant_rank5_against_onnx(tmp_path: Path) -> None:
    """The constant ([C, H, W] = [3, 4, 5], all distinct, so a misread shape does not broadcast or
    reorders values) times the input: onnxruntime on onnxmltools' form (an ONNX Constant)."""
    c = rand(3, 4, 5)
    nn = builder({"x": (3, 4, 5)}, ("y", "k"))
    nn.add_load_constant("k", "k", c, [3, 4, 5])
    nn.add_elementwise("m", ["x", "k"], "y", "MULTIPLY")
    feeds = {"x": rand(3, 4, 5)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], onnx_oracle(nn.spec, feeds)["y"])
    np.testing.assert_array_equal(outs["k"], c)


def test_load_constant_is_rank5_in_nd_network(tmp_path: Path) -> None:
    """The output is [1, 1, C, H, W] whatever the network's mapping; fp16 data."""
    c = rand(2, 3, 4).astype(np.float16)
    nn = builder({"x": (1,)}, ("y", "k"), nd=True)
    nn.add_load_constant("k", "k", c.astype(np.float32), [2, 3, 4])
    layer = nn.spec.neuralNetwork.layers[0].loadConstant
    del layer.data.floatValue[:]
    layer.data.float16Value = c.tobytes()
    nn.add_elementwise("m", ["x", "k"], "y", "ADD")
    outs, _ = convert_and_run(nn.spec, {"x": np.ones(1, np.float32)}, tmp_path)
    assert outs["k"].shape == (1, 1, 2, 3, 4)
    np.testing.assert_array_equal(outs["k"], c.astype(np.float32)[None, None])
    close(outs["y"], c.astype(np.float64)[None, None] + 1)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 3, 4)], ids=str)  # distinct dims: a swap fails
def test_load_constant_nd(shape: tuple[int, ...], tmp_path: Path) -> None:
    c = rand(*shape)
    nn = builder({"x": shape}, nd=True)
    nn.add_load_constant_nd("k", "k", c, list(shape))
    nn.add_elementwise("m", ["x", "k"], "y", "ADD")
    feeds = {"x": rand(*shape)}
    outs, _ = convert_and_run(nn.spec, feeds, tmp_path)
    close(outs["y"], feeds["x"].astype(np.float64) + c)


# ---------------------------------------------------------------------------------------------
# spec-4 layers against torch
#
# One ND model per group of layers (each layer on its own inputs and output), run once, each output
# compared with the torch function of the same math in float64 on the same fp32 inputs. Where the
# spec leaves a case open (ties of round, the sign of mod), the rule is coremltools': it maps these
# layers to and from the MIL ops of the same name (round: "0.5 is rounded to 0", and its device
# tests compare round with np.around, ties to even; mod: Python's ``%``, the divisor's sign;
# floor_div: "rounded towards negative infinity"), which torch.round / remainder / floor_divide
# compute too.


def _torch(fn: Callable[..., Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` of ``arrays`` as float64 torch tensors, back as a float64 numpy array (bool -> 0/1)."""
    import torch

    out = fn(*(torch.from_numpy(np.asarray(a, np.float64)) for a in arrays))
    return out.to(torch.float64).numpy()


def _run_group(nn: Any, feeds: dict[str, np.ndarray], tmp: Path) -> dict[str, np.ndarray]:
    outs, _ = convert_and_run(nn.spec, feeds, tmp)
    return outs


_TIES = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, -3.0, 4.0, -0.25, 0.75, 2.49], np.float32)


def _math_unary() -> dict[str, tuple[str, Callable[..., Any], tuple[float, float]]]:
    """layer kind -> (builder call, torch function, input range)."""
    import torch

    return {
        "ceil": ("add_ceil", torch.ceil, (-5, 5)), "floor": ("add_floor", torch.floor, (-5, 5)),
        "sign": ("add_sign", torch.sign, (-5, 5)), "round": ("add_round", torch.round, (-5, 5)),
        "exp2": ("add_exp2", torch.exp2, (-5, 5)), "sin": ("add_sin", torch.sin, (-5, 5)),
        "cos": ("add_cos", torch.cos, (-5, 5)), "tan": ("add_tan", torch.tan, (-1.5, 1.5)),
        "asin": ("add_asin", torch.asin, (-1, 1)), "acos": ("add_acos", torch.acos, (-1, 1)),
        "atan": ("add_atan", torch.atan, (-5, 5)), "sinh": ("add_sinh", torch.sinh, (-5, 5)),
        "cosh": ("add_cosh", torch.cosh, (-5, 5)), "tanh": ("add_tanh", torch.tanh, (-5, 5)),
        "asinh": ("add_asinh", torch.asinh, (-5, 5)), "acosh": ("add_acosh", torch.acosh, (1, 10)),
        "atanh": ("add_atanh", torch.atanh, (-0.99, 0.99)), "erf": ("add_erf", torch.special.erf, (-3, 3)),
    }


@oracle_checks("ceil", "floor", "sign", "round", "exp2", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
               "cosh", "tanh", "asinh", "acosh", "atanh", "erf")
def test_math_unary_against_torch(tmp_path: Path) -> None:
    """The 18 one-input math layers of spec 4, rank 3. The rounding ones (and sign) also see the
    half-way cases, -0.0 and integers: round's ties go to even (see above)."""
    table = _math_unary()
    feeds = {}
    for kind, (_, _, (lo, hi)) in table.items():
        x = rand(2, 3, 6, lo=lo, hi=hi)
        if kind in ("ceil", "floor", "sign", "round"):
            x[0].flat[: _TIES.size] = _TIES
        feeds[f"x_{kind}"] = x
    nn = builder({k: v.shape for k, v in feeds.items()}, [f"y_{k}" for k in table], nd=True)
    for kind, (method, _, _) in table.items():
        getattr(nn, method)(kind, f"x_{kind}", f"y_{kind}")
        assert nn.spec.neuralNetwork.layers[-1].WhichOneof("layer") == kind
    outs = _run_group(nn, feeds, tmp_path)
    for kind, (_, fn, _) in table.items():
        compare_with_oracle(outs[f"y_{kind}"], _torch(fn, feeds[f"x_{kind}"]), oracle="torch", rtol=3e-6, atol=1e-6,
                            err_msg=kind)


def test_math_unary_rank5_network(tmp_path: Path) -> None:
    """A spec-4 layer in a network with the legacy rank-5 mapping."""
    nn = builder({"x": (3, 2, 2)})
    nn.spec.specificationVersion = 4
    nn.add_sin("s", "x", "y")
    x = rand(3, 2, 2)
    outs, _ = convert_and_run(nn.spec, {"x": x}, tmp_path)
    close(outs["y"], np.sin(x.astype(np.float64)))


_HYPERBOLIC_INPUTS = np.concatenate([
    np.array([0.0, -0.0, 1e-30, -1e-30, 1e-7, 3e-4, 0.1, 0.5, 0.999, 1.0, 1.001, 2.0, 10.0, 1e4, 1e10, 1e19, 2e19,
              1e30, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, -5.0, -1e25], np.float32),
    RNG.uniform(-20, 20, 200).astype(np.float32),
    (10.0 ** RNG.uniform(-38, 38, 200)).astype(np.float32),
])


def test_asinh_composition_accuracy(tmp_path: Path) -> None:
    """asinh composed from MIL ops is within a few ulps of float64 arcsinh over the whole fp32
    range (tiny values, overflow of x^2, infinities, NaN, -0)."""
    x = np.concatenate([_HYPERBOLIC_INPUTS, -_HYPERBOLIC_INPUTS[-200:]])
    nn = builder({"x": x.shape}, nd=True)
    nn.add_asinh("h", "x", "y")
    outs, _ = convert_and_run(nn.spec, {"x": x}, tmp_path)
    assert ulp_error(outs["y"], np.arcsinh(x.astype(np.float64))) <= 4


def test_acosh_composition_accuracy(tmp_path: Path) -> None:
    """acosh: a few ulps from 1 (where 1 + tiny matters) to 3.4e38, NaN below 1."""
    near_one = (1.0 + np.arange(1, 50) * np.float32(2**-23)).astype(np.float32)
    x = np.concatenate([np.abs(_HYPERBOLIC_INPUTS) + 1, near_one, np.array([1.0, 0.5, -2.0, np.inf], np.float32)])
    nn = builder({"x": x.shape}, nd=True)
    nn.add_acosh("h", "x", "y")
    outs, _ = convert_and_run(nn.spec, {"x": x}, tmp_path)
    with np.errstate(invalid="ignore"):
        want = np.arccosh(x.astype(np.float64))
    assert ulp_error(outs["y"], want) <= 4


@oracle_checks("clip")
@pytest.mark.parametrize("lo,hi", [(-0.5, 1.25), (1.0, 1.0), (2.0, -1.0)], ids=["normal", "equal", "inverted"])
def test_clip_against_torch(lo: float, hi: float, tmp_path: Path) -> None:
    """The spec: min(max(x, minVal), maxVal), also where minVal >= maxVal (every element is maxVal,
    as torch.clamp documents); NaN stays NaN. Bounds not symmetric, so reading one for the other fails."""
    x = rand(4, 6)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    nn = builder({"x": x.shape}, nd=True)
    nn.add_clip("c", "x", "y", min_value=lo, max_value=hi)
    outs = _run_group(nn, {"x": x}, tmp_path)
    want = _torch(lambda t: t.clamp(min=float(np.float32(lo)), max=float(np.float32(hi))), x)
    compare_with_oracle(outs["y"], want, oracle="torch", rtol=0, atol=0)


_GELU_MODES = ("EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION")


@oracle_checks("gelu.mode=EXACT", "gelu.mode=TANH_APPROXIMATION", "gelu.mode=SIGMOID_APPROXIMATION")
def test_gelu_against_torch(tmp_path: Path) -> None:
    """The three modes, each a layer of one model. torch.nn.functional.gelu computes EXACT
    (approximate="none") and TANH_APPROXIMATION (approximate="tanh"); SIGMOID_APPROXIMATION is the
    spec's x * sigmoid(1.702 x), with torch.sigmoid."""
    import torch

    x = rand(3, 7, lo=-6, hi=6)
    nn = builder({"x": x.shape}, [f"y_{m}" for m in _GELU_MODES], nd=True)
    for mode in _GELU_MODES:
        nn.add_gelu(f"g_{mode}", "x", f"y_{mode}", mode=mode)
    outs = _run_group(nn, {"x": x}, tmp_path)
    oracle = {"EXACT": lambda t: torch.nn.functional.gelu(t),
              "TANH_APPROXIMATION": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
              "SIGMOID_APPROXIMATION": lambda t: t * torch.sigmoid(1.702 * t)}
    for mode in _GELU_MODES:
        compare_with_oracle(outs[f"y_{mode}"], _torch(oracle[mode], x), oracle="torch", rtol=3e-6, atol=1e-6,
                            err_msg=mode)
    # the three modes differ on these inputs by more than the tolerance, so a mode read wrong fails
    assert min(np.abs(outs[f"y_{a}"] - outs[f"y_{b}"]).max() for a in _GELU_MODES for b in _GELU_MODES if a < b) > 1e-4


# ---------------------------------------------------------------------------------------------
# comparisons, logical, where

_COMPARE = {  # layer kind -> (builder call, its extra arguments, torch function name)
    "equal": ("add_equal", {}, "eq"),
    "notEqual": ("add_not_equal", {}, "ne"),
    "lessThan": ("add_less_than", {}, "lt"),
    "lessEqual": ("add_less_than", {"use_less_than_equal": True}, "le"),
    "greaterThan": ("add_greater_than", {}, "gt"),
    "greaterEqual": ("add_greater_than", {"use_greater_than_equal": True}, "ge"),
}
# two shapes that broadcast each one over the other (each wider on some axis)
_BROADCAST_PAIRS = {"a-wider": ((2, 3, 4), (3, 1)), "b-wider": ((3, 1), (2, 3, 4)), "both": ((2, 1, 4), (3, 1))}


def _small_ints(*shape: int) -> np.ndarray:
    """Values from {-1, 0, 1, 2}: comparisons see equal pairs."""
    return RNG.integers(-1, 3, shape).astype(np.float32)


def _halves(*shape: int) -> np.ndarray:
    """Values from {-1, -0.5, ..., 1.5}: comparisons against 0.5 see equal, smaller and larger."""
    return RNG.integers(-2, 4, shape).astype(np.float32) / 2


@oracle_checks("equal", "notEqual", "lessThan", "lessEqual", "greaterThan", "greaterEqual")
@pytest.mark.parametrize("shapes", list(_BROADCAST_PAIRS.values()), ids=list(_BROADCAST_PAIRS))
def test_compare_two_inputs_against_torch(shapes: tuple[tuple[int, ...], ...], tmp_path: Path) -> None:
    """y = x1 op x2, 1.0 / 0.0, numpy broadcasting; each input wider in turn (a swap of the two
    inputs of an asymmetric comparison changes the result)."""
    import torch

    nn = builder({"a": shapes[0], "b": shapes[1]}, [f"y_{k}" for k in _COMPARE], nd=True)
    for kind, (method, extra, _) in _COMPARE.items():
        getattr(nn, method)(kind, ["a", "b"], f"y_{kind}", **extra)
        assert nn.spec.neuralNetwork.layers[-1].WhichOneof("layer") == kind
    feeds = {"a": _small_ints(*shapes[0]), "b": _small_ints(*shapes[1])}
    outs = _run_group(nn, feeds, tmp_path)
    for kind, (_, _, fn) in _COMPARE.items():
        y = outs[f"y_{kind}"]
        assert y.dtype == np.float32, kind
        compare_with_oracle(y, _torch(getattr(torch, fn), feeds["a"], feeds["b"]), oracle="torch", rtol=0, atol=0,
                            err_msg=kind)


@oracle_checks("equal", "notEqual", "lessThan", "lessEqual", "greaterThan", "greaterEqual")
def test_compare_with_alpha_against_torch(tmp_path: Path) -> None:
    """One input: y = x1 op alpha, alpha a different non-default value per layer (0.5, -1, 1.5, ...),
    each met by equal, smaller and larger inputs."""
    import torch

    alphas = dict(zip(_COMPARE, (0.5, -1.0, 1.5, -0.5, 1.0, 0.5)))
    nn = builder({"a": (4, 6)}, [f"y_{k}" for k in _COMPARE], nd=True)
    for kind, (method, extra, _) in _COMPARE.items():
        getattr(nn, method)(kind, ["a"], f"y_{kind}", alpha=alphas[kind], **extra)
        assert nn.spec.neuralNetwork.layers[-1].WhichOneof("layer") == kind
    a = _halves(4, 6)
    a[0, :6] = [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]
    outs = _run_group(nn, {"a": a}, tmp_path)
    for kind, (_, _, fn) in _COMPARE.items():
        want = _torch(lambda t, fn=fn, alpha=alphas[kind]: getattr(torch, fn)(t, alpha), a)
        compare_with_oracle(outs[f"y_{kind}"], want, oracle="torch", rtol=0, atol=0, err_msg=kind)
        assert 0 < want.sum() < want.size, kind  # both outcomes occur


_LOGICAL_VALUES = np.array([0.0, -0.0, 1.0, -3.5, 1e-30, np.nan], np.float32)
_LOGICAL = {"logicalAnd": ("AND", "logical_and"), "logicalOr": ("OR", "logical_or"),
            "logicalXor": ("XOR", "logical_xor")}


@oracle_checks("logicalAnd", "logicalOr", "logicalXor", "logicalNot")
@pytest.mark.parametrize("wide", ["a", "b"])
def test_logical_against_torch(wide: str, tmp_path: Path) -> None:
    """The spec: an input is false where it equals 0.0 (-0.0 too), true elsewhere (NaN too); the
    output is 1.0 / 0.0; broadcasting. torch's logical ops read a float tensor the same way."""
    import torch

    full = np.repeat(_LOGICAL_VALUES, 6).reshape(6, 6)
    row = _LOGICAL_VALUES.reshape(1, 6)
    feeds = {"a": full, "b": row} if wide == "a" else {"a": row, "b": full.T.copy()}
    nn = builder({k: v.shape for k, v in feeds.items()}, [*[f"y_{k}" for k in _LOGICAL], "y_not"], nd=True)
    for kind, (mode, _) in _LOGICAL.items():
        nn.add_logical(kind, ["a", "b"], f"y_{kind}", mode)
        assert nn.spec.neuralNetwork.layers[-1].WhichOneof("layer") == kind
    nn.add_logical("logicalNot", ["b"], "y_not", "NOT")
    outs = _run_group(nn, feeds, tmp_path)
    for kind, (_, fn) in _LOGICAL.items():
        compare_with_oracle(outs[f"y_{kind}"], _torch(getattr(torch, fn), feeds["a"], feeds["b"]), oracle="torch",
                            rtol=0, atol=0, err_msg=kind)
    compare_with_oracle(outs["y_not"], _torch(torch.logical_not, feeds["b"]), oracle="torch", rtol=0, atol=0)


@oracle_checks("whereBroadcastable")
@pytest.mark.parametrize("shapes", [((2, 2, 6), (2, 6), (6,)), ((6,), (2, 1, 6), (3, 1))], ids=["cond-widest", "x-y-widest"])
def test_where_against_torch(shapes: tuple[tuple[int, ...], ...], tmp_path: Path) -> None:
    """Inputs in order condition, x, y: x where the condition is true (nonzero, NaN included),
    else y; all three broadcast, the condition possibly widest. torch.where on the condition as
    torch reads a float tensor as bool; the sign of -0.0 is kept."""
    import torch

    cond = np.resize(_LOGICAL_VALUES, shapes[0])
    x, y = rand(*shapes[1]), rand(*shapes[2])
    x.flat[0] = -0.0
    nn = builder({"c": cond.shape, "a": x.shape, "b": y.shape}, nd=True)
    nn.add_where_broadcastable("w", ["c", "a", "b"], "y")
    outs = _run_group(nn, {"c": cond, "a": x, "b": y}, tmp_path)
    want = _torch(lambda c, a, b: torch.where(c.bool(), a, b), cond, x, y)
    compare_with_oracle(outs["y"], want, oracle="torch", rtol=0, atol=0)
    np.testing.assert_array_equal(np.signbit(outs["y"]), np.signbit(want))


_BINARY = {  # layer kind -> (builder call, torch function name)
    "addBroadcastable": ("add_add_broadcastable", "add"),
    "subtractBroadcastable": ("add_subtract_broadcastable", "sub"),
    "multiplyBroadcastable": ("add_multiply_broadcastable", "mul"),
    "divideBroadcastable": ("add_divide_broadcastable", "div"),
    "floorDivBroadcastable": ("add_floor_div_broadcastable", "floor_divide"),
    "modBroadcastable": ("add_mod_broadcastable", "remainder"),
    "powBroadcastable": ("add_pow_broadcastable", "pow"),
    "maxBroadcastable": ("add_max_broadcastable", "maximum"),
    "minBroadcastable": ("add_min_broadcastable", "minimum"),
}
_BINARY_SHAPES = {"a-wider": ((2, 3, 4, 5), (3, 1, 5)), "b-wider": ((4, 1), (2, 3, 4, 5)),
                  "both": ((2, 1, 4, 5), (3, 1, 5))}


def _quarters(shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    """Multiples of 0.25 in [lo, hi]: exact in fp32, so floor(a / b) cannot land on the other side
    of an integer in fp32 and in float64 (b below is 0.75, 1.25 or 2.5 in magnitude: a / b is an
    integer or at least 0.1 away from one)."""
    return (RNG.integers(int(lo * 4), int(hi * 4) + 1, shape) / 4).astype(np.float32)


@oracle_checks("addBroadcastable", "subtractBroadcastable", "multiplyBroadcastable", "divideBroadcastable",
               "floorDivBroadcastable", "modBroadcastable", "powBroadcastable", "maxBroadcastable",
               "minBroadcastable")
@pytest.mark.parametrize("shapes", list(_BINARY_SHAPES.values()), ids=list(_BINARY_SHAPES))
def test_broadcastable_binary_against_torch(shapes: tuple[tuple[int, ...], ...], tmp_path: Path) -> None:
    """Numpy broadcasting, each input wider in turn; negative dividends and divisors (mod takes the
    divisor's sign, floor division rounds towards -inf), exact multiples included; pow on a
    positive base with exponents of both signs."""
    import torch

    a = _quarters(shapes[0], -4, 4)
    b = RNG.choice(np.array([-2.5, -1.25, -0.75, 0.75, 1.25, 2.5], np.float32), shapes[1])
    a.flat[:4] = [-2.5, 2.5, -3.75, 0.0]  # exact multiples of some divisors, and zero
    base = np.abs(a) + np.float32(0.25)
    nn = builder({"a": a.shape, "b": b.shape, "p": base.shape}, [f"y_{k}" for k in _BINARY], nd=True)
    for kind, (method, _) in _BINARY.items():
        getattr(nn, method)(kind, ["p" if kind == "powBroadcastable" else "a", "b"], f"y_{kind}")
        assert nn.spec.neuralNetwork.layers[-1].WhichOneof("layer") == kind
    feeds = {"a": a, "b": b, "p": base}
    outs = _run_group(nn, feeds, tmp_path)
    for kind, (_, fn) in _BINARY.items():
        first = base if kind == "powBroadcastable" else a
        want = _torch(getattr(torch, fn), first, b)
        assert outs[f"y_{kind}"].shape == want.shape, kind
        compare_with_oracle(outs[f"y_{kind}"], want, oracle="torch", rtol=2e-6, atol=2e-6, err_msg=kind)


# ---------------------------------------------------------------------------------------------
# malformed layers: a FormatError that names the layer


def test_malformed_scale_weight_count(tmp_path: Path) -> None:
    nn = builder({"x": (3, 4, 5)})
    nn.add_scale("bad_scale", rand(3), None, False, "x", "y", shape_scale=[3])
    nn.spec.neuralNetwork.layers[0].scale.scale.floatValue.append(1.0)  # 4 values for [3]
    assert_load_error(nn.spec, tmp_path, "bad_scale", "4 values")


def test_malformed_bias_channels(tmp_path: Path) -> None:
    nn = builder({"x": (3, 4, 5)})
    nn.add_bias("bad_bias", rand(2), "x", "y", shape_bias=[2])
    assert_load_error(nn.spec, tmp_path, "bad_bias", "does not fit")


def test_malformed_scale_shape_rank(tmp_path: Path) -> None:
    nn = builder({"x": (3, 4, 5)})
    nn.add_scale("bad_rank", rand(4, 5), None, False, "x", "y", shape_scale=[4, 5])
    assert_load_error(nn.spec, tmp_path, "bad_rank", "is not [1], [C]")


def test_malformed_load_constant_shape(tmp_path: Path) -> None:
    nn = builder({"x": (4, 5)}, ("y",))
    nn.add_load_constant("bad_const", "k", rand(1, 4, 5), [1, 4, 5])
    del nn.spec.neuralNetwork.layers[0].loadConstant.shape[0]  # [4, 5]
    nn.add_elementwise("m", ["x", "k"], "y", "ADD")
    assert_load_error(nn.spec, tmp_path, "bad_const", "must be [C, H, W]")


def test_malformed_dot_spatial(tmp_path: Path) -> None:
    nn = builder({"a": (3, 2, 2), "b": (3, 2, 2)})
    nn.add_elementwise("bad_dot", ["a", "b"], "y", "DOT")
    assert_load_error(nn.spec, tmp_path, "bad_dot", "last two dimensions are 1")


def test_malformed_add_shapes(tmp_path: Path) -> None:
    nn = builder({"a": (3, 4, 5), "b": (2, 4, 5)})
    nn.add_elementwise("bad_add", ["a", "b"], "y", "ADD")
    assert_load_error(nn.spec, tmp_path, "bad_add", "do not broadcast")


def test_malformed_unary_type(tmp_path: Path) -> None:
    spec = _unary_spec(rand(3), "exp", nd=True)
    spec.neuralNetwork.layers[0].unary.type = 42
    assert_load_error(spec, tmp_path, "u", "unknown unary function type 42")


def test_malformed_compare_inputs(tmp_path: Path) -> None:
    nn = builder({"a": (3,), "b": (3,), "c": (3,)}, nd=True)
    nn.add_equal("bad_eq", ["a", "b"], "y")
    nn.spec.neuralNetwork.layers[0].input.append("c")
    assert_load_error(nn.spec, tmp_path, "bad_eq", "takes 1 to 2 input(s), has 3")
