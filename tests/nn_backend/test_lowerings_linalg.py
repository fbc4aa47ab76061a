"""linear, matmul and einsum lowered to innerProduct / batchedMatmul layers: the written model is
read back by the NeuralNetwork frontend and run; the oracle is torch (F.linear, torch.matmul,
torch.einsum) on the same inputs. Shapes are non-square and values distinct, so a transposed
weight, swapped transpose flags or a dropped bias change the result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(7)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _layers(path: Path) -> list:
    return list(read_model_file(path).model.neuralNetwork.layers)


# ---------------------------------------------------------------------------------------------
# linear


@pytest.mark.parametrize("shape, kind", [((4,), "innerProduct"), ((3, 4), "innerProduct"),
                                         ((2, 3, 4), "innerProduct"), ((2, 1, 3, 4), "batchedMatmul"),
                                         ((2, 2, 1, 3, 4), "batchedMatmul")])
def test_linear_is_one_dense_layer_over_the_last_axis(tmp_path: Path, shape: tuple, kind: str) -> None:
    x, w, b = _rand(*shape), _rand(5, 4), _rand(5)
    prog = program({"x": x}, lambda bb, x: [bb.linear(x=x, weight=w, bias=b, name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, torch.nn.functional.linear(_t(x), _t(w), _t(b)).numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {kind: 1}
    (layer,) = _layers(tmp_path / "m.mlmodel")
    params = getattr(layer, kind)
    assert params.hasBias


def test_linear_without_bias_writes_none(tmp_path: Path) -> None:
    x, w = _rand(3, 4), _rand(6, 4)
    prog = program({"x": x}, lambda bb, x: [bb.linear(x=x, weight=w, name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, torch.nn.functional.linear(_t(x), _t(w)).numpy())
    (layer,) = _layers(tmp_path / "m.mlmodel")
    assert not layer.innerProduct.hasBias and not layer.innerProduct.bias.floatValue


def test_fp16_linear_weights_stay_fp16(tmp_path: Path) -> None:
    x = _rand(2, 4)
    w, b = _rand(3, 4).astype(np.float16), _rand(3).astype(np.float16)
    prog = program({"x": x}, lambda bb, x: [bb.linear(x=x, weight=w, bias=b, name="out")], opset="iOS17")
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, x @ w.astype(np.float32).T + b.astype(np.float32))
    p = _layers(tmp_path / "m.mlmodel")[0].innerProduct
    assert len(p.weights.float16Value) == 2 * w.size and len(p.bias.float16Value) == 2 * b.size
    assert not p.weights.floatValue and not p.bias.floatValue


# ---------------------------------------------------------------------------------------------
# matmul


@pytest.mark.parametrize("tx", [False, True])
@pytest.mark.parametrize("ty", [False, True])
def test_matmul_transposes_and_broadcasts(tmp_path: Path, tx: bool, ty: bool) -> None:
    a = _rand(2, 1, 3, 4)  # [.., M=3, K=4]
    c = _rand(5, 4, 6)  # [.., K=4, N=6]
    x = np.swapaxes(a, -1, -2).copy() if tx else a
    y = np.swapaxes(c, -1, -2).copy() if ty else c
    prog = program({"x": x, "y": y}, lambda b, x, y: [b.matmul(x=x, y=y, transpose_x=tx, transpose_y=ty, name="out")])
    got = run_nn(prog, {"x": x, "y": y}, tmp_path / "m.mlmodel")["out"]
    want = torch.matmul(_t(x).transpose(-1, -2) if tx else _t(x), _t(y).transpose(-1, -2) if ty else _t(y))
    assert got.shape == (2, 5, 3, 6)
    assert_close(got, want.numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchedMatmul": 1}


@pytest.mark.parametrize("xs, ys", [((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((4,), (4,))])
def test_matmul_of_a_vector_drops_its_axis(tmp_path: Path, xs: tuple, ys: tuple) -> None:
    x, y = _rand(*xs), _rand(*ys)
    prog = program({"x": x, "y": y}, lambda b, x, y: [b.matmul(x=x, y=y, name="out")])
    got = run_nn(prog, {"x": x, "y": y}, tmp_path / "m.mlmodel")["out"]
    want = torch.matmul(_t(x), _t(y)).numpy()
    assert got.size == want.size and got.shape == (want.shape or (1,))  # a scalar is [1] in the network
    assert_close(got, want)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchedMatmul": 1, "squeeze": 1}


@pytest.mark.parametrize("ty", [False, True])
@pytest.mark.parametrize("xs", [(3, 4), (4,), (2, 2, 3, 4)])
def test_matmul_with_a_constant_matrix_is_a_weight(tmp_path: Path, ty: bool, xs: tuple) -> None:
    x, m = _rand(*xs), _rand(4, 5)
    y = m.T.copy() if ty else m
    prog = program({"x": x}, lambda b, x: [b.matmul(x=x, y=y, transpose_y=ty, name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    want = torch.matmul(_t(x), _t(m)).numpy()
    assert got.shape == want.shape
    assert_close(got, want)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchedMatmul": 1}
    p = _layers(tmp_path / "m.mlmodel")[0].batchedMatmul
    assert (p.weightMatrixFirstDimension, p.weightMatrixSecondDimension) == (4, 5)


def test_matmul_with_a_constant_and_transpose_x_reads_the_constant_as_an_input(tmp_path: Path) -> None:
    """The one-input batchedMatmul ignores transposeA: transpose_x takes the two-input form."""
    x, m = _rand(4, 3), _rand(4, 5)
    prog = program({"x": x}, lambda b, x: [b.matmul(x=x, y=m, transpose_x=True, name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, (_t(x).T @ _t(m)).numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchedMatmul": 1, "loadConstantND": 1}


def test_a_constant_matrix_read_twice_is_loaded_once(tmp_path: Path) -> None:
    x, m = _rand(3, 4), _rand(4, 4)
    prog = program({"x": x}, lambda b, x: [b.matmul(x=x, y=m, name="p"), b.matmul(x=m, y=x, transpose_y=True, name="q")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")
    assert_close(got["p"], x @ m)
    assert_close(got["q"], m @ x.T)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"batchedMatmul": 2, "loadConstantND": 1}


# ---------------------------------------------------------------------------------------------
# einsum


@pytest.mark.parametrize("equation, xs, ys", [
    ("nchw,nwhu->nchu", (2, 3, 4, 5), (2, 5, 4, 6)),
    ("nchw,nwhu->nchu", (1, 3, 4, 5), (2, 5, 1, 6)),  # N and H broadcast
    ("abcd,adce->abce", (2, 3, 4, 5), (2, 5, 4, 6)),  # the same contraction, other letters
    ("chw,whr->chr", (3, 4, 5), (5, 4, 2)),
    ("chw,whr->chr", (3, 1, 5), (5, 4, 2)),
])
def test_einsum_is_a_batched_matmul_over_h(tmp_path: Path, equation: str, xs: tuple, ys: tuple) -> None:
    x, y = _rand(*xs), _rand(*ys)
    prog = program({"x": x, "y": y}, lambda b, x, y: [b.einsum(values=(x, y), equation=equation, name="out")])
    got = run_nn(prog, {"x": x, "y": y}, tmp_path / "m.mlmodel")["out"]
    want = torch.einsum(equation, _t(x), _t(y))  # torch broadcasts a letter of size 1 too
    assert_close(got, want.numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {"transpose": 3, "batchedMatmul": 1}


def test_einsum_transposes_a_constant_operand_at_conversion(tmp_path: Path) -> None:
    x, y = _rand(3, 4, 5), _rand(5, 4, 2)
    prog = program({"x": x}, lambda b, x: [b.einsum(values=(x, y), equation="chw,whr->chr", name="out")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, torch.einsum("chw,whr->chr", _t(x), _t(y)).numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {"transpose": 2, "loadConstantND": 1, "batchedMatmul": 1}


def test_linear_on_a_symbolic_batch(tmp_path: Path) -> None:
    w, b = _rand(5, 4), _rand(5)
    prog = new_program([("x", TensorType(fp32, (Symbol("n"), 4)))],
                       lambda bb, x: [bb.linear(x=x, weight=w, bias=b, name="out")])
    x = _rand(3, 4)
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")["out"]
    assert_close(got, x @ w.T + b)
    assert layer_kinds(tmp_path / "m.mlmodel") == {"innerProduct": 1}


def test_large_weights_are_written_from_their_arrays(tmp_path: Path) -> None:
    """Weights of 4 KiB or more (spliced into the file from their arrays once the protowire writer
    side is merged; set in the message until then): the linear weight as it is, a matmul
    constant transposed to the layer's [N, K]."""
    x, w, b, m = _rand(2, 60), _rand(40, 60), _rand(40), _rand(60, 48)
    prog = program({"x": x}, lambda bb, x: [bb.linear(x=x, weight=w, bias=b, name="lin"),
                                            bb.matmul(x=x, y=m, name="mm")])
    got = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")
    assert_close(got["lin"], torch.nn.functional.linear(_t(x), _t(w), _t(b)).numpy())
    assert_close(got["mm"], (_t(x) @ _t(m)).numpy())
    assert layer_kinds(tmp_path / "m.mlmodel") == {"innerProduct": 1, "batchedMatmul": 1}
