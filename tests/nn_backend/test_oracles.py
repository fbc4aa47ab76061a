"""The NeuralNetwork backend's oracle harness (oracles.py) against known answers, ~5 s:

- `onnxruntime_run` on models built with coremltools' NeuralNetworkBuilder equals formulas written
  here: innerProduct + sigmoid, sigmoid(W x + b); a 1x1 convolution behind a rank-4 input, and an
  innerProduct behind reshapeStatic (the two regressions of harness fixes 9 and 10, both met on
  coremltools' own NeuralNetwork form of ResNets); a model onnxmltools cannot convert (a rank-N
  clip layer) is reported as `Unavailable`, not raised;
- `coremltools_nn` on a conv + relu + softmax program (coremltools' MIL builder, and the same
  network as one of our IR programs, given as a program and as a saved .mlpackage) writes a
  NeuralNetwork .mlmodel that our frontend reads and whose interpreter output equals the formula
  written here (cross-correlation with "same" zero padding, ReLU, softmax over channels); the
  program it is given is left as it was (ct.convert rewrites its argument in place);
- programs with ops above iOS15, which coremltools will not convert to a NeuralNetwork, give an
  `Unavailable` naming the op, and no file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from tests.nn.common import builder, check_close, quiet_coremltools
from tests.nn_backend.oracles import Unavailable, coremltools_nn, onnxruntime_run

RNG = np.random.default_rng(7)
W_FC = RNG.standard_normal((3, 4)).astype(np.float32)
B_FC = RNG.standard_normal(3).astype(np.float32)
W_CONV = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
B_CONV = RNG.standard_normal(4).astype(np.float32)
X_IMAGE = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)


def conv_relu_softmax_formula(x: np.ndarray) -> np.ndarray:
    """y = softmax_C(relu(b + sum_{c,i,j} W[o,c,i,j] x_pad[c, h+i, w+j])), zero padding 1 ("same"
    for a 3x3 kernel at stride 1), in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n c h w i j
    z = np.einsum("nchwij,ocij->nohw", windows, W_CONV.astype(np.float64)) + B_CONV[None, :, None, None]
    r = np.maximum(z, 0)
    e = np.exp(r - r.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _mb_conv_relu_softmax() -> object:
    quiet_coremltools()
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=X_IMAGE.shape)])
    def prog(x):
        y = mb.conv(x=x, weight=W_CONV, bias=B_CONV, pad_type="same")
        return mb.softmax(x=mb.relu(x=y), axis=1, name="y")

    return prog


def _ir_conv_relu_softmax() -> converter.Program:
    from converter.ir.builder import new_program
    from converter.ir.types import tensor

    def body(b, x):
        y = b.conv(x=x, weight=W_CONV, bias=B_CONV, pad_type="same")
        return [b.softmax(x=b.relu(x=y), axis=1)]

    return new_program({"x": tensor("fp32", list(X_IMAGE.shape))}, body)


def _run_nn(path: Path) -> np.ndarray:
    """The one output of our NeuralNetwork frontend + interpreter on ``path`` for X_IMAGE."""
    from converter.formats.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(path.read_bytes())
    assert spec.WhichOneof("Type") == "neuralNetwork"
    assert [layer.WhichOneof("layer") for layer in spec.neuralNetwork.layers] == \
        ["convolution", "activation", "softmax"]
    (out,) = converter.run(converter.load(path), {"x": X_IMAGE}).values()
    return out


# -- onnxruntime_run ---------------------------------------------------------------------------------


def test_onnxruntime_run_equals_the_formula(tmp_path: Path) -> None:
    nn = builder({"x": (4,)})
    nn.add_inner_product("fc", W_FC, B_FC, 4, 3, True, "x", "z")
    nn.add_activation("act", "SIGMOID", "z", "y")
    path = tmp_path / "fc.mlmodel"
    path.write_bytes(nn.spec.SerializeToString())
    x = RNG.standard_normal(4).astype(np.float32)
    want = 1 / (1 + np.exp(-(W_FC.astype(np.float64) @ x + B_FC)))

    got = onnxruntime_run(path, {"x": x})
    assert not isinstance(got, Unavailable), got
    check_close(got["y"], want, rtol=1e-6, atol=1e-6, match="size")
    shaped = onnxruntime_run(path, {"x": x}, like={"y": np.zeros(3, np.float32)})
    assert shaped["y"].shape == (3,) and shaped["y"].oracle == "onnxruntime"
    check_close(shaped["y"], want, rtol=1e-6, atol=1e-6)


def test_onnxruntime_run_feeds_a_rank4_input(tmp_path: Path) -> None:
    """Regression (harness fix 10): onnxmltools declared a [1, C, H, W] input as [N, 1, 1, 1]; the
    conv behind it then failed in onnxruntime."""
    w = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    nn = builder({"x": (1, 3, 4, 4)})
    nn.add_convolution("conv", 3, 2, 1, 1, 1, 1, "valid", 1, w.transpose(2, 3, 1, 0), None, False,
                       input_name="x", output_name="y")  # the builder takes weights as [H, W, C_in, C_out]
    path = tmp_path / "conv.mlmodel"
    path.write_bytes(nn.spec.SerializeToString())
    x = RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)
    got = onnxruntime_run(path, {"x": x})
    assert not isinstance(got, Unavailable), got
    check_close(got["y"], np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x), rtol=1e-6, atol=1e-6)


def test_onnxruntime_run_takes_an_inner_product_after_a_rank_n_layer(tmp_path: Path) -> None:
    """Regression (harness fix 9): reshapeStatic to [1, C] then innerProduct (what coremltools writes
    before a classifier) became a Gemm on a rank-3 input, which onnxruntime rejected."""
    nn = builder({"x": (2, 2)}, nd=True)
    nn.add_reshape_static("flat", "x", "z", [1, 4])
    nn.add_inner_product("fc", W_FC, B_FC, 4, 3, True, "z", "y")
    path = tmp_path / "fc.mlmodel"
    path.write_bytes(nn.spec.SerializeToString())
    x = RNG.standard_normal((2, 2)).astype(np.float32)
    got = onnxruntime_run(path, {"x": x})
    assert not isinstance(got, Unavailable), got
    check_close(got["y"], W_FC.astype(np.float64) @ x.ravel() + B_FC, rtol=1e-6, atol=1e-6, match="size")


def test_onnxruntime_run_reports_a_model_it_cannot_convert(tmp_path: Path) -> None:
    nn = builder({"x": (2, 3)}, nd=True)
    nn.add_clip("clip", "x", "y", min_value=0.0, max_value=1.0)
    path = tmp_path / "clip.mlmodel"
    path.write_bytes(nn.spec.SerializeToString())
    got = onnxruntime_run(path, {"x": np.zeros((2, 3), np.float32)})
    assert isinstance(got, Unavailable)
    assert "onnxmltools cannot convert clip.mlmodel" in got.reason and "clip" in got.reason.split(":", 1)[1]


# -- coremltools_nn ----------------------------------------------------------------------------------


def test_coremltools_nn_of_a_coremltools_program_runs_the_formula(tmp_path: Path) -> None:
    prog = _mb_conv_relu_softmax()
    before = str(prog)
    path = coremltools_nn(prog, tmp_path / "ct.mlmodel")
    assert path == tmp_path / "ct.mlmodel", path
    assert str(prog) == before, "the program given was changed"
    check_close(_run_nn(path), conv_relu_softmax_formula(X_IMAGE), rtol=1e-5, atol=1e-6)


def test_coremltools_nn_of_our_program_and_package_runs_the_formula(tmp_path: Path) -> None:
    prog = _ir_conv_relu_softmax()
    package = converter.save(prog, tmp_path / "ours.mlpackage")
    want = conv_relu_softmax_formula(X_IMAGE)
    for name, source in (("from_ir", prog), ("from_package", package)):
        path = coremltools_nn(source, tmp_path / f"{name}.mlmodel")
        assert isinstance(path, Path), path
        check_close(_run_nn(path), want, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("op", ["reshape", "pixel_unshuffle"])
def test_coremltools_nn_reports_ops_above_ios15(tmp_path: Path, op: str) -> None:
    ct = quiet_coremltools()
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 1, 4, 8))], opset_version=ct.target.iOS17)
    def prog(x):
        if op == "reshape":  # an iOS15 op, but an iOS17 program holds its iOS17 version
            return mb.reshape(x=x, shape=[1, 1, 8, 4])
        return mb.pixel_unshuffle(x=x, downscale_factor=np.uint32(2))  # an iOS16 op

    got = coremltools_nn(prog, tmp_path / "ct.mlmodel")
    assert isinstance(got, Unavailable), got
    assert "coremltools refuses" in got.reason and f"op {op} is only available in opset" in got.reason
    assert list(tmp_path.iterdir()) == []
