"""batch_norm, instance_norm, layer_norm, l2_norm and local_response_norm lowered to batchnorm /
layerNormalization / l2normalize / lrn layers (or their decompositions): the written model is read
back by the NeuralNetwork frontend and run; the oracle is torch.nn.functional (batch_norm,
instance_norm, layer_norm, local_response_norm) or the formula written here from the op's
definition (l2_norm: x / sqrt(sum(x**2) + eps) over the last three axes, which torch's normalize,
a max() clamp, is not).

Inputs have small variances (about 1e-3) and epsilons are 1e-3 or 2e-3, so an epsilon dropped,
replaced by a default, or added to the standard deviation instead of the variance fails. Per
channel parameters are distinct and non-symmetric."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(11)
C = 3


def _small(*shape: int) -> np.ndarray:
    """Values with a per-slice variance near 1e-3 around a non-zero mean."""
    return (0.5 + 0.03 * RNG.standard_normal(shape)).astype(np.float32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _layers(path: Path) -> list:
    return list(read_model_file(path).model.neuralNetwork.layers)


MEAN = np.array([0.49, 0.52, 0.47], np.float32)
VAR = np.array([0.8e-3, 1.3e-3, 2.1e-3], np.float32)
GAMMA = np.array([1.5, -0.7, 2.2], np.float32)
BETA = np.array([0.1, -0.3, 0.25], np.float32)


# ---------------------------------------------------------------------------------------------
# batch_norm


@pytest.mark.parametrize("shape, extra", [((2, C, 4, 5), {}), ((2, C, 5), {"expandDims": 1, "squeeze": 1}),
                                          ((2, C, 2, 3, 4), {"reshapeStatic": 2})])
def test_batch_norm_is_one_batchnorm_layer(tmp_path: Path, shape: tuple, extra: dict) -> None:
    x = _small(*shape)
    prog = program({"x": x}, lambda b, x: [b.batch_norm(x=x, mean=MEAN, variance=VAR, gamma=GAMMA, beta=BETA,
                                                        epsilon=np.float32(1e-3), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.batch_norm(_t(x), _t(MEAN), _t(VAR), _t(GAMMA), _t(BETA), training=False, eps=1e-3)
    assert_close(got, want.numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchnorm": 1, **extra}


def test_batch_norm_with_epsilon_zero_is_not_read_as_the_default(tmp_path: Path) -> None:
    """The NN frontend (and the spec's silence) reads epsilon 0 as 1e-5; 0 is written as 2**-126."""
    x = _small(2, C, 4, 5)
    prog = program({"x": x}, lambda b, x: [b.batch_norm(x=x, mean=MEAN, variance=VAR, epsilon=np.float32(0),
                                                        name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.batch_norm(_t(x), _t(MEAN), _t(VAR), training=False, eps=0.0)
    assert_close(got, want.numpy(), 1e-4)
    assert _layers(tmp_path / "m.mlmodel")[0].batchnorm.epsilon == np.finfo(np.float32).tiny


def test_fp16_batch_norm_parameters_stay_fp16_with_defaults_in_fp16(tmp_path: Path) -> None:
    """Core ML's validator rejects a batchnorm mixing fp16 and fp32 parameters: the default gamma
    and beta are written in the precision of the given mean and variance."""
    x = _small(2, C, 4, 5).astype(np.float16)
    mean, var = MEAN.astype(np.float16), VAR.astype(np.float16)
    prog = program({"x": x}, lambda b, x: [b.batch_norm(x=x, mean=mean, variance=var, epsilon=np.float16(1e-3),
                                                        name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.batch_norm(_t(x.astype(np.float32)), _t(mean.astype(np.float32)), _t(var.astype(np.float32)),
                        training=False, eps=float(np.float16(1e-3)))
    assert_close(got, want.numpy(), 2e-2)
    p = _layers(tmp_path / "m.mlmodel")[0].batchnorm
    for field in (p.gamma, p.beta, p.mean, p.variance):
        assert len(field.float16Value) == 2 * C and not field.floatValue


def test_batch_norm_of_rank_5_with_two_symbolic_dims_is_a_scale_and_a_shift(tmp_path: Path) -> None:
    prog = new_program([("x", TensorType(fp32, (Symbol("n"), C, Symbol("d"), 3, 4)))],
                       lambda b, x: [b.batch_norm(x=x, mean=MEAN, variance=VAR, gamma=GAMMA, beta=BETA,
                                                  epsilon=np.float32(2e-3), name="out")])
    x = _small(2, C, 2, 3, 4)
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.batch_norm(_t(x), _t(MEAN), _t(VAR), _t(GAMMA), _t(BETA), training=False, eps=2e-3)
    assert_close(got, want.numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"multiplyBroadcastable": 1, "addBroadcastable": 1,
                                                   "loadConstantND": 2}


# ---------------------------------------------------------------------------------------------
# instance_norm


@pytest.mark.parametrize("shape, extra", [((2, C, 4, 5), {}), ((2, C, 6), {"expandDims": 1, "squeeze": 1}),
                                          ((2, C, 2, 3, 4), {"reshapeStatic": 2})])
def test_instance_norm_is_one_batchnorm_with_instance_statistics(tmp_path: Path, shape: tuple, extra: dict) -> None:
    x = _small(*shape)
    prog = program({"x": x}, lambda b, x: [b.instance_norm(x=x, gamma=GAMMA, beta=BETA, epsilon=np.float32(1e-3),
                                                           name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.instance_norm(_t(x), weight=_t(GAMMA), bias=_t(BETA), eps=1e-3)
    assert_close(got, want.numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchnorm": 1, **extra}
    layer = next(la for la in _layers(tmp_path / "m.mlmodel") if la.WhichOneof("layer") == "batchnorm")
    assert layer.batchnorm.computeMeanVar and layer.batchnorm.instanceNormalization


def test_instance_norm_with_symbolic_dims_uses_reductions(tmp_path: Path) -> None:
    prog = new_program([("x", TensorType(fp32, (Symbol("n"), C, Symbol("d"), 3, 4)))],
                       lambda b, x: [b.instance_norm(x=x, gamma=GAMMA, beta=BETA, epsilon=np.float32(1e-3),
                                                     name="out")])
    x = _small(2, C, 2, 3, 4)
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.instance_norm(_t(x), weight=_t(GAMMA), bias=_t(BETA), eps=1e-3)
    assert_close(got, want.numpy(), 1e-4)
    kinds = layer_kinds(tmp_path / "m.mlmodel")
    assert kinds["reduceMean"] == 2 and kinds["unary"] == 1 and "batchnorm" not in kinds


def test_instance_norm_without_gamma_beta_writes_no_scale(tmp_path: Path) -> None:
    prog = new_program([("x", TensorType(fp32, (Symbol("n"), C, Symbol("d"), 3, 4)))],
                       lambda b, x: [b.instance_norm(x=x, epsilon=np.float32(2e-3), name="out")])
    x = _small(2, C, 2, 3, 4)
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, F.instance_norm(_t(x), eps=2e-3).numpy(), 1e-4)
    assert "loadConstantND" not in layer_kinds(tmp_path / "m.mlmodel")


# ---------------------------------------------------------------------------------------------
# layer_norm


@pytest.mark.parametrize("axes", [[-1], [2, 3], [-3, -2, -1], None])
def test_trailing_layer_norm_is_one_layer(tmp_path: Path, axes: list | None) -> None:
    x = _small(2, 3, 4, 5)
    rank = x.ndim
    norm = x.shape[rank - (len(axes) if axes else rank):]
    gamma = (1 + np.arange(np.prod(norm), dtype=np.float32).reshape(norm) / 7)
    beta = (np.arange(np.prod(norm), dtype=np.float32).reshape(norm) / 11 - 0.4)
    kw = {} if axes is None else {"axes": axes}
    prog = program({"x": x}, lambda b, x: [b.layer_norm(x=x, gamma=gamma, beta=beta, epsilon=np.float32(1e-3),
                                                        name="out", **kw)])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.layer_norm(_t(x), norm, _t(gamma), _t(beta), eps=1e-3)
    assert_close(got, want.numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"layerNormalization": 1}
    assert list(_layers(tmp_path / "m.mlmodel")[0].layerNormalization.normalizedShape) == list(norm)


@pytest.mark.parametrize("axes", [[1], [1, 3], [0, -2]])
def test_layer_norm_over_inner_axes_moves_them_last(tmp_path: Path, axes: list) -> None:
    x = _small(2, 3, 4, 5)
    pos = sorted(a % 4 for a in axes)
    norm = tuple(x.shape[a] for a in pos)
    gamma = 1 + np.arange(np.prod(norm), dtype=np.float32).reshape(norm) / 5
    beta = np.arange(np.prod(norm), dtype=np.float32).reshape(norm) / 13 - 0.2
    prog = program({"x": x}, lambda b, x: [b.layer_norm(x=x, axes=axes, gamma=gamma, beta=beta,
                                                        epsilon=np.float32(1e-3), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    # torch normalizes trailing axes: move the normalized ones last (in order), then back
    perm = [i for i in range(4) if i not in pos] + pos
    moved = F.layer_norm(_t(x).permute(*perm), norm, _t(gamma), _t(beta), eps=1e-3)
    want = moved.permute(*np.argsort(perm).tolist())
    assert_close(got, want.numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"transpose": 2, "layerNormalization": 1}


def test_layer_norm_with_epsilon_zero_keeps_it(tmp_path: Path) -> None:
    x = _small(3, 6)
    prog = program({"x": x}, lambda b, x: [b.layer_norm(x=x, axes=[-1], epsilon=np.float32(0), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, F.layer_norm(_t(x), (6,), eps=0.0).numpy(), 1e-4)


def test_layer_norm_over_symbolic_dims_uses_reductions(tmp_path: Path) -> None:
    prog = new_program([("x", TensorType(fp32, (2, Symbol("s"), 5)))],
                       lambda b, x: [b.layer_norm(x=x, axes=[1], epsilon=np.float32(1e-3), name="out")])
    x = _small(2, 4, 5)
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.layer_norm(_t(x).transpose(1, 2), (4,), eps=1e-3).transpose(1, 2)
    assert_close(got, want.numpy(), 1e-4)
    kinds = layer_kinds(tmp_path / "m.mlmodel")
    assert kinds["reduceMean"] == 2 and "layerNormalization" not in kinds


def test_layer_norm_over_no_axes_is_beta(tmp_path: Path) -> None:
    """Every element is its own mean: 0 / sqrt(eps) * gamma + beta (NaN where x is infinite)."""
    x = _small(2, 3)
    x[0, 1] = np.inf
    gamma, beta = np.float32(2.0), np.float32(0.75)
    prog = program({"x": x}, lambda b, x: [b.layer_norm(x=x, axes=np.zeros(0, np.int32), gamma=gamma, beta=beta,
                                                        epsilon=np.float32(1e-3), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = np.full(x.shape, 0.75, np.float32)
    want[0, 1] = np.nan
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# l2_norm


def _l2_formula(x: np.ndarray, eps: float) -> np.ndarray:
    """MIL l2_norm: x / sqrt(sum(x**2) + epsilon) over the last three axes."""
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.sum(x64 * x64, axis=(-3, -2, -1), keepdims=True) + eps)


@pytest.mark.parametrize("shape", [(3, 4, 2), (2, 3, 4, 2), (2, 2, 3, 1, 2)])
@pytest.mark.parametrize("eps", [2e-3, 0.0])
def test_l2_norm_is_l2normalize(tmp_path: Path, shape: tuple, eps: float) -> None:
    x = (0.01 * RNG.standard_normal(shape)).astype(np.float32)  # sum of squares near 1e-3
    prog = program({"x": x}, lambda b, x: [b.l2_norm(x=x, epsilon=np.float32(eps), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, _l2_formula(x, eps), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"l2normalize": 1}


# ---------------------------------------------------------------------------------------------
# local_response_norm


@pytest.mark.parametrize("size", [3, 4])
@pytest.mark.parametrize("shape", [(2, 6, 3, 2), (6, 2, 3)])
def test_local_response_norm_is_lrn(tmp_path: Path, size: int, shape: tuple) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    alpha, beta, k = 0.3, 0.6, 1.7
    prog = program({"x": x}, lambda b, x: [b.local_response_norm(x=x, size=np.int32(size), alpha=np.float32(alpha),
                                                                 beta=np.float32(beta), k=np.float32(k), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    xt = _t(x) if x.ndim == 4 else _t(x)[None]  # torch: channels at axis 1 (= -3 here)
    want = F.local_response_norm(xt, size, alpha=alpha, beta=beta, k=k)
    assert_close(got, want.numpy().reshape(x.shape), 1e-5)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"lrn": 1}


def test_local_response_norm_with_k_zero_is_not_read_as_one(tmp_path: Path) -> None:
    x = RNG.standard_normal((1, 5, 2, 2)).astype(np.float32)
    prog = program({"x": x}, lambda b, x: [b.local_response_norm(x=x, size=np.int32(3), alpha=np.float32(0.5),
                                                                 beta=np.float32(0.5), k=np.float32(0), name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = F.local_response_norm(_t(x), 3, alpha=0.5, beta=0.5, k=0.0)
    assert_close(got, want.numpy(), 1e-5)


@pytest.mark.parametrize("dims", [(Symbol("n"), C, 2, 3, 4), (2, C, 2, Symbol("h"), 4)])
def test_rank_5_norms_with_one_symbolic_dim_reshape_with_minus_one(tmp_path: Path, dims: tuple) -> None:
    x = _small(2, C, 2, 3, 4)
    prog = new_program([("x", TensorType(fp32, dims))], lambda b, x: [
        b.batch_norm(x=x, mean=MEAN, variance=VAR, gamma=GAMMA, beta=BETA, epsilon=np.float32(1e-3), name="bn"),
        b.instance_norm(x=x, gamma=GAMMA, beta=BETA, epsilon=np.float32(2e-3), name="inorm")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")
    bn = F.batch_norm(_t(x), _t(MEAN), _t(VAR), _t(GAMMA), _t(BETA), training=False, eps=1e-3)
    assert_close(got["bn"], bn.numpy(), 1e-4)
    assert_close(got["inorm"], F.instance_norm(_t(x), weight=_t(GAMMA), bias=_t(BETA), eps=2e-3).numpy(), 1e-4)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchnorm": 2, "reshapeStatic": 4}
    targets = [list(la.reshapeStatic.targetShape) for la in _layers(tmp_path / "m.mlmodel")
               if la.WhichOneof("layer") == "reshapeStatic"]
    assert all(t.count(-1) == 1 for t in targets)


def test_a_negative_lrn_k_is_refused_with_the_op_named(tmp_path: Path) -> None:
    """Core ML's validator rejects lrn layers with k < 0 (the IR op allows it)."""
    import converter
    from converter.errors import UnsupportedError

    x = RNG.standard_normal((1, 4, 2, 2)).astype(np.float32)
    prog = program({"x": x}, lambda b, x: [b.local_response_norm(x=x, size=np.int32(3), k=np.float32(-0.5),
                                                                 name="out")])
    with pytest.raises(UnsupportedError, match=r"local_response_norm 'out': k must be >= 0"):
        converter.convert(prog, to="neuralnetwork", out=tmp_path / "m.mlmodel", passes="none")
    assert not (tmp_path / "m.mlmodel").exists()
