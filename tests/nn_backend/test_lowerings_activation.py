"""Activation lowerings of the NeuralNetwork backend: the ``activation`` layer's kinds, clip (relu6),
clampedReLU, gelu, silu, softmax / softmaxND and the per-channel prelu / softplus_parametric.

Oracle: numpy formulas written here from the MIL definitions (the IR kernels' docstrings), with
parameter values chosen distinct and asymmetric so that swapping two parameters fails; the
written model is read back by the NeuralNetwork frontend and run. Layer kinds are pinned.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from converter.formats.model_file import read_model_file
from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

f32 = np.float32
# negatives, zeros, values at the parameters below (0.6, 2.5, 6) and around them
X = np.array([[-7.0, -3.0, -1.0, -0.25, 0.0, 0.25], [0.6, 0.59, 1.0, 2.4, 2.5, 2.6], [5.9, 6.0, 6.1, -0.6, 3.0, -26.0]],
             f32)
X64 = X.astype(np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _p(v: float) -> float:
    """A parameter as the fp32 the program holds."""
    return float(f32(v))


def _run(tmp_path: Path, feeds: dict, body) -> tuple[dict, Counter]:
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    return got, layer_kinds(path)


ACTIVATIONS = {
    # id: (builder call, formula, layer kinds)
    "relu": (lambda b, x: b.relu(x=x), lambda x: np.maximum(x, 0), {"activation": 1}),
    "tanh": (lambda b, x: b.tanh(x=x), np.tanh, {"activation": 1}),
    "sigmoid": (lambda b, x: b.sigmoid(x=x), _sigmoid, {"activation": 1}),
    "softsign": (lambda b, x: b.softsign(x=x), lambda x: x / (1 + np.abs(x)), {"activation": 1}),
    "softplus": (lambda b, x: b.softplus(x=x), _softplus, {"activation": 1}),
    "leaky_relu": (lambda b, x: b.leaky_relu(x=x, alpha=f32(0.15)), lambda x: np.where(x >= 0, x, _p(0.15) * x),
                   {"activation": 1}),
    "elu": (lambda b, x: b.elu(x=x, alpha=f32(1.7)), lambda x: np.where(x > 0, x, _p(1.7) * np.expm1(x)),
            {"activation": 1}),
    # x == alpha is kept (MIL), x < alpha is 0
    "thresholded_relu": (lambda b, x: b.thresholded_relu(x=x, alpha=f32(0.6)),
                         lambda x: np.where(x < _p(0.6), 0.0, x), {"activation": 1}),
    "linear_activation": (lambda b, x: b.linear_activation(x=x, alpha=f32(1.5), beta=f32(-0.25)),
                          lambda x: 1.5 * x - 0.25, {"activation": 1}),
    "scaled_tanh": (lambda b, x: b.scaled_tanh(x=x, alpha=f32(2.0), beta=f32(0.5)),
                    lambda x: 2.0 * np.tanh(0.5 * x), {"activation": 1}),
    "sigmoid_hard": (lambda b, x: b.sigmoid_hard(x=x, alpha=f32(0.3), beta=f32(0.6)),
                     lambda x: np.minimum(np.maximum(_p(0.3) * x + _p(0.6), 0), 1), {"activation": 1}),
    "relu6": (lambda b, x: b.relu6(x=x), lambda x: np.minimum(np.maximum(x, 0), 6), {"clip": 1}),
    # min(beta, x) for x >= 0, min(beta, alpha x) for x < 0
    "clamped_relu": (lambda b, x: b.clamped_relu(x=x, alpha=f32(0.1), beta=f32(2.5)),
                     lambda x: np.minimum(np.where(x >= 0, x, _p(0.1) * x), 2.5), {"clampedReLU": 1}),
    # beta < 0: where coremltools' constant folding (relu part + negative part) differs from the formula
    "clamped_relu_negative_beta": (lambda b, x: b.clamped_relu(x=x, alpha=f32(0.1), beta=f32(-0.5)),
                                   lambda x: np.minimum(np.where(x >= 0, x, _p(0.1) * x), -0.5), {"clampedReLU": 1}),
    "gelu_exact": (lambda b, x: b.gelu(x=x, mode="EXACT"),
                   lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), {"gelu": 1}),
    "gelu_tanh": (lambda b, x: b.gelu(x=x, mode="TANH_APPROXIMATION"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))), {"gelu": 1}),
    "gelu_sigmoid": (lambda b, x: b.gelu(x=x, mode="SIGMOID_APPROXIMATION"), lambda x: x * _sigmoid(1.702 * x),
                     {"gelu": 1}),
    "silu": (lambda b, x: b.silu(x=x), lambda x: x * _sigmoid(x), {"activation": 1, "multiply": 1}),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation(tmp_path: Path, name: str) -> None:
    call, formula, kinds = ACTIVATIONS[name]
    got, got_kinds = _run(tmp_path, {"x": X}, lambda b, x: b.identity(x=call(b, x), name="out"))
    assert_close(got["out"], formula(X64))
    assert got_kinds == Counter(kinds)


def test_the_gelu_modes_are_written_as_the_layer_modes(tmp_path: Path) -> None:
    """The three modes differ by less than the value tolerance in places: pin the written enum."""
    from converter.formats.proto import NeuralNetwork_pb2

    modes = ["EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION"]
    path = tmp_path / "m.mlmodel"
    run_nn(program({"x": X}, lambda b, x: [b.gelu(x=x, mode=m, name=m.lower()) for m in modes]), {"x": X}, path)
    layers = read_model_file(path).model.neuralNetwork.layers
    written = [NeuralNetwork_pb2.GeluLayerParams.GeluMode.Name(layer.gelu.mode) for layer in layers]
    assert written == modes


def test_clamped_relu_needs_specification_version_5(tmp_path: Path) -> None:
    path = tmp_path / "m.mlmodel"
    run_nn(program({"x": X}, lambda b, x: b.clamped_relu(x=x, alpha=f32(0.1), beta=f32(2.5), name="out")), {"x": X},
           path)
    assert read_model_file(path).model.specificationVersion == 5


@pytest.mark.parametrize("target, alpha, beta, kinds", [
    ("iOS14", 0.1, 2.5, {"clampedReLU": 1}),
    ("iOS13", 0.1, 2.5, {"activation": 1, "clip": 1}),  # leakyReLU, then clip(-inf, beta)
    ("iOS13", 1.5, -0.5, {"activation": 1, "clip": 1}),  # alpha > 1, beta < 0
    ("iOS13", 0.0, 2.5, {"clip": 1}),  # clip(0, beta)
    ("iOS13", 0.0, -0.5, {"activation": 1, "clip": 1}),  # beta < 0: the negative side is beta, not 0
])
def test_clamped_relu_under_a_version_cap(tmp_path: Path, target: str, alpha: float, beta: float, kinds: dict) -> None:
    """clampedReLU is a version 5 layer: with --target iOS13 (version 4) the op is decomposed into
    version 1 layers. alpha != beta and asymmetric values: swapping them, or a clip on the wrong side,
    fails; the infinities pin the clip's open lower bound."""
    infinities = [np.inf] if alpha == 0 else [-np.inf, np.inf]  # (0 x -inf is NaN)
    x = np.concatenate([X.reshape(-1), f32(infinities)]).astype(f32)
    path = tmp_path / "m.mlmodel"
    got = run_nn(program({"x": x}, lambda b, v: b.clamped_relu(x=v, alpha=f32(alpha), beta=f32(beta), name="out")),
                 {"x": x}, path, target=target)["out"]
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):  # where() computes 0 x inf on the side it drops
        want = np.minimum(_p(beta), np.where(x64 >= 0, x64, _p(alpha) * x64))
    finite = np.isfinite(want)
    assert_close(np.asarray(got)[finite], want[finite])
    assert np.array_equal(np.asarray(got)[~finite], want[~finite])
    assert layer_kinds(path) == Counter(kinds)
    assert read_model_file(path).model.specificationVersion == (5 if target == "iOS14" else 4)


# ---------------------------------------------------------------------------------------------
# softmax

S = np.random.default_rng(3).standard_normal((2, 3, 4, 5)).astype(f32)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape, axis, kind, nd_axis", [
    ((2, 3, 4, 5), -3, "softmax", None),
    ((2, 3, 4, 5), 1, "softmax", None),  # axis 1 of rank 4 is -3
    ((3, 4, 5), 0, "softmax", None),  # axis 0 of rank 3 is -3
    ((2, 3, 4, 5), -1, "softmaxND", -1),
    ((2, 3, 4, 5), 0, "softmaxND", -4),
    ((3, 4, 5), 1, "softmaxND", -2),
    ((4, 5), 0, "softmaxND", -2),  # rank 2: no axis -3
])
def test_softmax_uses_the_legacy_layer_only_on_axis_minus_3(tmp_path: Path, shape, axis: int, kind: str,
                                                             nd_axis: int | None) -> None:
    x_in = S.reshape(-1)[: int(np.prod(shape))].reshape(shape)
    path = tmp_path / "m.mlmodel"
    got = run_nn(program({"x": x_in}, lambda b, x: b.softmax(x=x, axis=axis, name="out")), {"x": x_in}, path)
    assert_close(got["out"], _softmax(x_in.astype(np.float64), axis))
    assert layer_kinds(path) == Counter({kind: 1})
    if nd_axis is not None:
        assert read_model_file(path).model.neuralNetwork.layers[0].softmaxND.axis == nd_axis


# ---------------------------------------------------------------------------------------------
# prelu, softplus_parametric: per channel on axis 1

ALPHA = np.array([0.1, -0.2, 0.35], f32)
BETA = np.array([2.0, 0.7, 1.3], f32)


def _channel_input(rank: int) -> np.ndarray:
    shape = (2, 3) + (2, 3, 2)[: rank - 2]
    x = np.random.default_rng(rank).standard_normal(shape).astype(f32) * 3
    x.reshape(-1)[:3] = 0.0
    return x


def _per_channel(p: np.ndarray, rank: int) -> np.ndarray:
    return p.astype(np.float64).reshape((-1,) + (1,) * (rank - 2))


PER_CHANNEL_KINDS = {
    "prelu": {3: {"expandDims": 1, "activation": 1, "squeeze": 1}, 4: {"activation": 1},
              5: {"activation": 1, "minBroadcastable": 1, "multiplyBroadcastable": 1, "addBroadcastable": 1,
                  "loadConstantND": 2}},
    "softplus_parametric": {3: {"expandDims": 1, "activation": 1, "squeeze": 1}, 4: {"activation": 1},
                            5: {"activation": 1, "multiplyBroadcastable": 2, "loadConstantND": 2}},
}


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_prelu_per_channel_on_axis_1(tmp_path: Path, rank: int) -> None:
    x_in = _channel_input(rank)
    got, kinds = _run(tmp_path, {"x": x_in}, lambda b, x: b.prelu(x=x, alpha=ALPHA, name="out"))
    x64 = x_in.astype(np.float64)
    assert_close(got["out"], np.where(x64 > 0, x64, _per_channel(ALPHA, rank) * x64))
    assert kinds == Counter(PER_CHANNEL_KINDS["prelu"][rank])


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_softplus_parametric_per_channel_on_axis_1(tmp_path: Path, rank: int) -> None:
    x_in = _channel_input(rank)

    def body(b, x):
        return b.softplus_parametric(x=x, alpha=ALPHA, beta=BETA, name="out")

    got, kinds = _run(tmp_path, {"x": x_in}, body)
    x64 = x_in.astype(np.float64)
    assert_close(got["out"], _per_channel(ALPHA, rank) * _softplus(_per_channel(BETA, rank) * x64))
    assert kinds == Counter(PER_CHANNEL_KINDS["softplus_parametric"][rank])


@pytest.mark.parametrize("rank", [3, 5])
def test_uniform_per_channel_parameters_are_one_layer_at_any_rank(tmp_path: Path, rank: int) -> None:
    """One value for every channel: a length-1 parameter, which the layer applies on any axis."""
    x_in = _channel_input(rank)
    alpha, beta = np.full(3, 0.3, f32), np.full(3, 1.6, f32)

    def body(b, x):
        return [b.prelu(x=x, alpha=alpha, name="pr"), b.softplus_parametric(x=x, alpha=alpha, beta=beta, name="sp")]

    got, kinds = _run(tmp_path, {"x": x_in}, body)
    x64 = x_in.astype(np.float64)
    assert_close(got["pr"], np.where(x64 > 0, x64, _p(0.3) * x64))
    assert_close(got["sp"], _p(0.3) * _softplus(_p(1.6) * x64))
    assert kinds == Counter({"activation": 2})


def test_prelu_decomposition_keeps_infinities(tmp_path: Path) -> None:
    """relu(x) + alpha * min(x, 0): +inf stays +inf (x - relu(x) would give NaN)."""
    x_in = _channel_input(5)
    x_in[0, 0, 0, 0, :] = [np.inf, -np.inf]
    got, _ = _run(tmp_path, {"x": x_in}, lambda b, x: b.prelu(x=x, alpha=ALPHA, name="out"))
    np.testing.assert_array_equal(np.asarray(got["out"])[0, 0, 0, 0], [np.inf, -np.inf])
