"""Legacy rank-5 NeuralNetwork models (target iOS11 / iOS12, specification versions 1-3).

Programs built here are written with ``target="iOS11"``/``"iOS12"``, read back with our
NeuralNetwork frontend (which gives the layers rank-5 semantics for spec <= 3) and run. Oracles:
torch.nn.functional (conv2d, conv_transpose2d, pooling, interpolate, batch_norm, softmax, linear)
and numpy formulas written here from the ops' definitions; onnxruntime on onnxmltools' ONNX form
of the emitted model (an implementation of the legacy layers by other people) where onnxmltools
converts it (not the elementwise test's model: it fails on it; not argmax: onnxruntime rejects
its ArgMax node). The shared
builder models (spec <= 3) are converted too: their outputs through the rank-5 model match the
source model's (a round trip, not an oracle); the recurrent and flexible-shape ones are in
test_rank5_recurrent.py.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter.errors import ConversionWarning, UnsupportedError
from converter.formats import description as desc
from converter.formats.model_file import read_model_file
from converter.formats.proto import NeuralNetwork_pb2 as nn
from converter.ir.builder import new_program
from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, fp16, fp32, int32, string

from .helpers import assert_close, layer_kinds

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "models" / "builder"
RNG = np.random.default_rng(7)


def _rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _write(prog, path: Path, **options) -> tuple[object, list[str]]:
    """Convert ``prog`` (no pass pipeline: the lowering is under test); the model and its warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        converter.convert(prog, to="neuralnetwork", out=path, passes=options.pop("passes", "none"), overwrite=True,
                          **options)
    return read_model_file(path).model, [str(w.message) for w in caught if issubclass(w.category, ConversionWarning)]


def _run(path: Path, feeds: dict) -> dict:
    return converter.run(converter.load(path), feeds)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, np.float32))


def _onnxruntime_agrees(path: Path, feeds: dict, ours: dict, names: list[str], bound: float = 1e-5) -> None:
    """onnxruntime on onnxmltools' ONNX form of the model at ``path`` gives ``ours`` for ``names``
    (an implementation of the legacy layers we did not write; /work/shared/reference notes)."""
    from tests.oracles import onnxmltools_oracle

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = onnxmltools_oracle.run(onnxmltools_oracle.to_onnx(path.read_bytes()), feeds)
    for name in names:
        assert_close(ours[name], np.asarray(theirs[name]).reshape(np.shape(ours[name])), bound)


def _declared(model, kind: str = "input") -> dict[str, list[int]]:
    feats = model.description.input if kind == "input" else model.description.output
    return {f.name: list(f.type.multiArrayType.shape) for f in feats if f.type.WhichOneof("Type") == "multiArrayType"}


# ---------------------------------------------------------------------------------------------
# a CNN classifier


W1, B1 = _rand(4, 3, 3, 3, scale=0.5), _rand(4)
W2, B2 = _rand(6, 2, 2, 3, scale=0.5), _rand(6)
BN_MEAN, BN_VAR = _rand(6), np.abs(_rand(6)) + 0.5
BN_GAMMA, BN_BETA = _rand(6), _rand(6)
FC_W, FC_B = _rand(5, 6), _rand(5)
LABELS = ["ant", "bee", "cat", "dog", "eel"]


def _cnn_classifier():
    """conv (same, bias) -> relu -> max_pool 2x2/2 -> grouped conv (custom pads, strides (2, 1),
    dilations (1, 2)) -> batch_norm -> leaky_relu -> avg_pool 3x3/1 (custom pads, padding excluded)
    -> mean over H, W -> linear -> softmax -> classify."""

    def body(b, x):
        y = b.conv(x=x, weight=W1, bias=B1, pad_type="same", name="conv1")
        y = b.relu(x=y, name="relu1")
        y = b.max_pool(x=y, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="pool1")
        y = b.conv(x=y, weight=W2, bias=B2, strides=[2, 1], dilations=[1, 2], groups=2, pad_type="custom",
                   pad=[1, 0, 2, 1], name="conv2")
        y = b.batch_norm(x=y, mean=BN_MEAN, variance=BN_VAR, gamma=BN_GAMMA, beta=BN_BETA,
                         epsilon=np.float32(1e-3), name="bn")
        y = b.leaky_relu(x=y, alpha=np.float32(0.2), name="lrelu")
        y = b.avg_pool(x=y, kernel_sizes=[3, 3], strides=[1, 1], pad_type="custom", pad=[1, 1, 0, 2],
                       exclude_padding_from_average=True, name="pool2")
        y = b.reduce_mean(x=y, axes=[2, 3], keep_dims=False, name="gap")
        y = b.linear(x=y, weight=FC_W, bias=FC_B, name="fc")
        p = b.softmax(x=y, axis=-1, name="probs_vec")
        label, probs = b.classify(probabilities=p, classes=ListValue(
            TensorType(string, ()), [np.array(s) for s in LABELS], False), name="classify")
        label.name, probs.name = "label", "probs"
        return [label, probs]

    return new_program([("image", TensorType(fp32, (1, 3, 12, 10)))], body)


def _cnn_torch(x: np.ndarray) -> np.ndarray:
    y = F.relu(F.conv2d(_t(x), _t(W1), _t(B1), padding=1))
    y = F.max_pool2d(y, 2, 2)
    y = F.pad(y, (2, 1, 1, 0))  # (left, right, top, bottom)
    y = F.conv2d(y, _t(W2), _t(B2), stride=(2, 1), dilation=(1, 2), groups=2)
    y = F.batch_norm(y, _t(BN_MEAN), _t(BN_VAR), _t(BN_GAMMA), _t(BN_BETA), training=False, eps=1e-3)
    y = F.leaky_relu(y, 0.2)
    # padding excluded from the average: sum over the window of the zero-padded map / count of real cells
    padded = F.pad(y, (0, 2, 1, 1))
    ones = F.pad(torch.ones_like(y), (0, 2, 1, 1))
    y = F.avg_pool2d(padded, 3, 1) / F.avg_pool2d(ones, 3, 1)
    y = y.mean(dim=(2, 3))
    return F.softmax(F.linear(y, _t(FC_W), _t(FC_B)), dim=-1).numpy()


def test_cnn_classifier_for_ios11_is_a_version_1_rank5_classifier(tmp_path: Path) -> None:
    out = tmp_path / "cnn.mlmodel"
    model, warned = _write(_cnn_classifier(), out, target="iOS11")
    assert model.specificationVersion == 1
    net = model.neuralNetworkClassifier
    assert model.WhichOneof("Type") == "neuralNetworkClassifier"
    assert net.arrayInputShapeMapping == nn.RANK5_ARRAY_MAPPING
    assert net.imageInputShapeMapping == nn.RANK5_IMAGE_MAPPING
    assert dict(layer_kinds(out)) == {"convolution": 2, "activation": 2, "pooling": 3, "batchnorm": 1,
                                      "innerProduct": 1, "softmax": 1}
    gap = [layer for layer in net.layers if layer.WhichOneof("layer") == "pooling"][-1].pooling
    assert gap.globalPooling and gap.type == nn.PoolingLayerParams.AVERAGE
    assert list(net.stringClassLabels.vector) == LABELS
    # the program's [1, 3, 12, 10] input is declared [3, 12, 10] (rank-5 features have no batch axis)
    assert _declared(model) == {"image": [3, 12, 10]}
    assert any("'image' of shape [1, 3, 12, 10] is declared [3, 12, 10]" in w for w in warned)
    x = _rand(1, 3, 12, 10)
    got = _run(out, {"image": x[0]})
    want = _cnn_torch(x)[0]
    assert_close([got["probs"][k] for k in LABELS], want, 1e-5)
    assert got["label"] == LABELS[int(np.argmax(want))]


def test_the_cnn_agrees_with_onnxruntime_through_onnxmltools(tmp_path: Path) -> None:
    """Independent implementation of the legacy layers: onnxmltools' ONNX form, run by onnxruntime."""

    def body(b, x):  # the classifier's layers without classify (onnxmltools' ZipMap is not needed)
        y = b.conv(x=x, weight=W1, bias=B1, pad_type="same", name="conv1")
        y = b.max_pool(x=b.relu(x=y, name="relu1"), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid",
                       name="pool1")
        y = b.conv(x=y, weight=W2, bias=B2, strides=[2, 1], groups=2, pad_type="custom", pad=[1, 0, 2, 1],
                   name="conv2")
        y = b.batch_norm(x=y, mean=BN_MEAN, variance=BN_VAR, gamma=BN_GAMMA, beta=BN_BETA,
                         epsilon=np.float32(1e-3), name="bn")
        y = b.reduce_max(x=b.sigmoid(x=y, name="sig"), axes=[-2, -1], keep_dims=True, name="gmp")
        y = b.reshape(x=y, shape=[1, 6], name="flat")
        return [b.softmax(x=b.linear(x=y, weight=FC_W, bias=FC_B, name="fc"), axis=-1, name="probs")]

    out = tmp_path / "cnn.mlmodel"
    model, _ = _write(new_program([("image", TensorType(fp32, (1, 3, 12, 10)))], body), out, target="iOS12")
    assert model.specificationVersion == 1
    x = _rand(1, 3, 12, 10)
    feeds = {"image": x[0]}
    _onnxruntime_agrees(out, feeds, _run(out, feeds), ["probs"])


# ---------------------------------------------------------------------------------------------
# an MLP regressor


M1, M2, M3 = _rand(16, 7, scale=0.4), _rand(8, 16, scale=0.4), _rand(8, 2, scale=0.4)
MB1 = _rand(16)


def test_mlp_regressor_for_ios12_keeps_vector_features(tmp_path: Path) -> None:
    """[1, 7] -> linear -> tanh -> linear (no bias) -> elu -> matmul (constant [8, 2]) -> x * 1.5 - 0.25:
    innerProduct layers on [C, 1, 1] blobs; the input is declared [7], the output [2]."""

    def body(b, x):
        y = b.tanh(x=b.linear(x=x, weight=M1, bias=MB1, name="fc1"), name="t")
        y = b.elu(x=b.linear(x=y, weight=M2, name="fc2"), alpha=np.float32(0.7), name="e")
        y = b.matmul(x=y, y=M3, name="fc3")
        return [b.sub(x=b.mul(x=y, y=np.float32(1.5), name="scaled"), y=np.float32(0.25), name="target")]

    out = tmp_path / "mlp.mlmodel"
    model, warned = _write(new_program([("features", TensorType(fp32, (1, 7)))], body), out, target="iOS12")
    assert model.specificationVersion == 1 and model.WhichOneof("Type") == "neuralNetwork"
    assert dict(layer_kinds(out)) == {"innerProduct": 3, "activation": 2, "multiply": 1, "add": 1}
    assert _declared(model) == {"features": [7]} and _declared(model, "output") == {"target": [2]}
    assert len(warned) == 2  # input and output lose their batch axis
    x = _rand(1, 7)
    outputs = _run(out, {"features": x[0]})
    _onnxruntime_agrees(out, {"features": x[0]}, outputs, ["target"])
    got = outputs["target"]
    h = np.tanh(x @ M1.T + MB1) @ M2.T
    h = np.where(h > 0, h, 0.7 * (np.exp(h) - 1))
    assert_close(got, ((h @ M3) * 1.5 - 0.25)[0], 1e-5)


# ---------------------------------------------------------------------------------------------
# the version rules: 1, 2 with fp16 weights, 3 with resizeBilinear


def test_fp16_weights_stay_fp16_and_need_version_2(tmp_path: Path) -> None:
    w16, b16 = _rand(3, 2, 3, 3).astype(np.float16), _rand(3).astype(np.float16)

    def body(b, x):
        y = b.conv(x=b.cast(x=x, dtype="fp16", name="x16"), weight=w16, bias=b16, pad_type="valid", name="conv")
        return [b.cast(x=b.relu(x=y, name="r"), dtype="fp32", name="y")]

    prog = new_program([("x", TensorType(fp32, (1, 2, 6, 5)))], body)
    out = tmp_path / "fp16.mlmodel"
    model, _ = _write(prog, out, target="iOS12")
    assert model.specificationVersion == 2  # float16Value weights: iOS 11.2
    conv = model.neuralNetwork.layers[0].convolution
    assert np.frombuffer(conv.weights.float16Value, "<f2").tolist() == w16.reshape(-1).tolist()
    with pytest.raises(UnsupportedError, match=r"fp16 weights \(float16Value\) \(version 2\)"):
        _write(prog, tmp_path / "v1.mlmodel", spec_version=1)
    assert not (tmp_path / "v1.mlmodel").exists()
    x = _rand(1, 2, 6, 5)
    want = F.relu(F.conv2d(_t(x), _t(w16.astype(np.float32)), _t(b16.astype(np.float32)))).numpy()
    assert_close(_run(out, {"x": x[0]})["y"], want[0], 1e-5)


def test_resize_bilinear_needs_version_3_and_upsample_version_1(tmp_path: Path) -> None:
    def body(b, x):
        up = b.upsample_nearest_neighbor(x=x, scale_factor_height=np.float32(2), scale_factor_width=np.float32(3),
                                         name="up")
        rs = b.resize_bilinear(x=x, target_size_height=7, target_size_width=5, sampling_mode="STRICT_ALIGN_CORNERS",
                               name="rs")
        return [up, rs]

    prog = new_program([("x", TensorType(fp32, (1, 2, 4, 3)))], body)
    out = tmp_path / "resize.mlmodel"
    model, _ = _write(prog, out, target="iOS12")
    assert model.specificationVersion == 3
    assert dict(layer_kinds(out)) == {"upsample": 1, "resizeBilinear": 1}
    with pytest.raises(UnsupportedError, match=r"layer resizeBilinear \(version 3\)"):
        _write(prog, tmp_path / "v2.mlmodel", target="iOS11")
    x = _rand(1, 2, 4, 3)
    got = _run(out, {"x": x[0]})
    assert_close(got["up"], F.interpolate(_t(x), scale_factor=(2, 3), mode="nearest").numpy()[0], 1e-6)
    want = F.interpolate(_t(x), size=(7, 5), mode="bilinear", align_corners=True).numpy()[0]
    assert_close(got["rs"], want, 1e-5)
    only_up = new_program([("x", TensorType(fp32, (1, 2, 4, 3)))], lambda b, x: [b.upsample_nearest_neighbor(
        x=x, scale_factor_height=np.float32(2), scale_factor_width=np.float32(1), name="up")])
    model, _ = _write(only_up, tmp_path / "up.mlmodel", spec_version=3)
    assert model.specificationVersion == 1  # the lowest version with every layer, not the floor asked


# ---------------------------------------------------------------------------------------------
# elementwise forms, activations, deconvolution, concat, flatten


SCALE_C = np.array([0.5, -2.0, 3.0], np.float32).reshape(1, 3, 1, 1)
BIAS_CHW = _rand(1, 3, 4, 5)
PRELU = np.array([0.1, -0.3, 0.7], np.float32)


def test_elementwise_with_constants_and_activations(tmp_path: Path) -> None:
    """Each output pins one lowering's parameters with distinct, asymmetric values."""

    def body(b, x, z):
        return [
            b.mul(x=x, y=SCALE_C, name="per_channel"),              # scale [C]
            b.add(x=x, y=BIAS_CHW, name="per_element"),             # bias [C, H, W]
            b.sub(x=np.float32(2.5), y=x, name="const_minus_x"),    # scale -1 with bias
            b.real_div(x=x, y=np.float32(4), name="div"),           # multiply 0.25
            b.sub(x=x, y=z, name="diff"),                           # multiply -1 + add
            b.maximum(x=x, y=z, name="hi"),
            b.minimum(x=x, y=z, name="lo"),
            b.prelu(x=x, alpha=PRELU, name="prelu"),
            b.scaled_tanh(x=x, alpha=np.float32(2), beta=np.float32(0.5), name="stanh"),
            b.sigmoid_hard(x=x, alpha=np.float32(0.3), beta=np.float32(0.4), name="hsig"),
            b.linear_activation(x=x, alpha=np.float32(-1.5), beta=np.float32(0.25), name="lin"),
            b.softplus(x=x, name="splus"),
            b.rsqrt(x=b.abs(x=x, name="absx"), epsilon=np.float32(0.5), name="rs"),
            b.softmax(x=x, axis=1, name="chan_softmax"),
        ]

    shape = (1, 3, 4, 5)
    prog = new_program([("x", TensorType(fp32, shape)), ("z", TensorType(fp32, shape))], body)
    out = tmp_path / "ew.mlmodel"
    model, _ = _write(prog, out, target="iOS11")
    assert model.specificationVersion == 1
    assert dict(layer_kinds(out)) == {"scale": 2, "bias": 1, "multiply": 2, "add": 1, "max": 1, "min": 1,
                                      "activation": 5, "unary": 2, "softmax": 1}
    x, z = _rand(*shape), _rand(*shape)
    got = _run(out, {"x": x[0], "z": z[0]})
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = {
        "per_channel": x * SCALE_C, "per_element": x + BIAS_CHW, "const_minus_x": 2.5 - x, "div": x / 4,
        "diff": x - z, "hi": np.maximum(x, z), "lo": np.minimum(x, z),
        "prelu": np.where(x > 0, x, PRELU.reshape(1, 3, 1, 1) * x), "stanh": 2 * np.tanh(0.5 * x),
        "hsig": np.clip(0.3 * x + 0.4, 0, 1), "lin": -1.5 * x + 0.25, "splus": np.log1p(np.exp(x)),
        "rs": 1 / np.sqrt(np.abs(x) + 0.5), "chan_softmax": e / e.sum(axis=1, keepdims=True),
    }
    for name, value in want.items():
        assert_close(got[name], value[0], 1e-5)


BIAS_HW = _rand(1, 1, 4, 5)


def test_clip_silu_lrn_padding_reductions_and_window_forms(tmp_path: Path) -> None:
    """The decomposed forms (clip as THRESHOLD / THRESHOLD / multiply, silu as sigmoid * x), lrn,
    padding, the ``reduce`` layer over C / W / H, W, same_lower (TOP_LEFT_HEAVY) and a [1, H, W] bias."""

    def body(b, x):
        return [
            b.clip(x=x, alpha=np.float32(-0.5), beta=np.float32(0.75), name="clipped"),
            b.relu6(x=b.mul(x=x, y=np.float32(4), name="x4"), name="r6"),
            b.silu(x=x, name="swish"),
            b.local_response_norm(x=x, size=3, alpha=np.float32(0.4), beta=np.float32(0.6), k=np.float32(1.5),
                                  name="lrn"),
            b.pad(x=x, pad=[2, 0, 1, 3], mode="reflect", name="reflected"),
            b.pad(x=x, pad=[0, 1, 2, 0], mode="constant", constant_val=np.float32(-2), name="padded"),
            b.reduce_sum(x=x, axes=[1], keep_dims=True, name="sum_c"),
            b.reduce_max(x=x, axes=[-1], keep_dims=False, name="max_w"),
            b.reduce_min(x=x, axes=[2], keep_dims=True, name="min_h"),
            b.reduce_l2_norm(x=x, axes=[2, 3], keep_dims=True, name="l2_hw"),
            b.avg_pool(x=x, kernel_sizes=[2, 3], strides=[2, 2], pad_type="same",
                       exclude_padding_from_average=False, name="avg_same"),
            b.max_pool(x=x, kernel_sizes=[2, 2], strides=[1, 2], pad_type="same_lower", name="max_lower"),
            b.add(x=x, y=BIAS_HW, name="hw_bias"),
        ]

    shape = (1, 3, 4, 5)
    prog = new_program([("x", TensorType(fp32, shape))], body, opset="iOS16")
    out = tmp_path / "misc.mlmodel"
    model, _ = _write(prog, out, target="iOS11")
    assert model.specificationVersion == 1
    # max_w: the reduce layer writes [3, 4, 1]; the [1, 3, 4] output is declared [C, H, W] = [1, 3, 4]
    assert dict(layer_kinds(out)) == {"unary": 4, "multiply": 4, "activation": 1, "lrn": 1, "padding": 2,
                                      "reduce": 4, "pooling": 2, "bias": 1, "reshape": 1}
    assert _declared(model, "output")["max_w"] == [1, 3, 4]
    x = _rand(*shape, scale=2)
    got = _run(out, {"x": x[0]})
    _onnxruntime_agrees(out, {"x": x[0]}, got, list(got))
    sq = np.pad(x * x, [(0, 0), (1, 1), (0, 0), (0, 0)])
    window = sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]
    tx = _t(x)
    # avg_pool 'same', kernel (2, 3), strides 2: H pads (0, 0), W pads (1, 1); padding counted
    avg = F.avg_pool2d(F.pad(tx, (1, 1, 0, 0)), (2, 3), 2).numpy()
    # max_pool same_lower, kernel 2, strides (1, 2): H total 1 -> (1, 0); W total 1 -> (1, 0)
    mx = F.max_pool2d(F.pad(tx, (1, 0, 1, 0), value=-np.inf), 2, (1, 2)).numpy()
    want = {
        "clipped": np.clip(x, -0.5, 0.75), "r6": np.clip(4 * x, 0, 6), "swish": x / (1 + np.exp(-x)),
        "lrn": x / (1.5 + 0.4 / 3 * window) ** 0.6,
        "reflected": np.pad(x, [(0, 0), (0, 0), (2, 0), (1, 3)], mode="reflect"),
        "padded": np.pad(x, [(0, 0), (0, 0), (0, 1), (2, 0)], constant_values=-2),
        "sum_c": x.sum(axis=1, keepdims=True), "max_w": x.max(axis=-1), "min_h": x.min(axis=2, keepdims=True),
        "l2_hw": np.sqrt((x * x).sum(axis=(2, 3), keepdims=True)), "avg_same": avg, "max_lower": mx,
        "hw_bias": x + BIAS_HW,
    }
    for name, value in want.items():
        assert_close(got[name], value[0], 1e-5)


DW, DB = _rand(2, 2, 3, 2, scale=0.5), _rand(4)  # [C_in, C_out / groups, kH, kW], 2 groups
CW = _rand(2, 2, 2, 2)
LW = _rand(4, 6 * 6 * 3)


def test_deconvolution_concat_and_flatten_to_dense(tmp_path: Path) -> None:
    """conv_transpose (2 groups, stride 2, custom pads) of x [1, 2, 3, 2] -> [1, 4, 6, 3], concat
    along C with a conv of u -> [1, 6, 6, 3] -> reshape to [1, 108] -> linear: a flatten layer
    (CHANNEL_FIRST) feeds innerProduct."""

    def body(b, x, u):
        d = b.conv_transpose(x=x, weight=DW, bias=DB, strides=[2, 2], groups=2, pad_type="custom",
                             pad=[1, 0, 0, 1], name="deconv")
        c = b.conv(x=u, weight=CW, pad_type="valid", name="c")
        j = b.concat(values=[d, c], axis=1, name="joined")
        flat = b.reshape(x=j, shape=[1, -1], name="flat")
        return [j, b.linear(x=flat, weight=LW, name="dense")]

    x, u = _rand(1, 2, 3, 2), _rand(1, 2, 7, 4)
    prog = new_program([("x", TensorType(fp32, x.shape)), ("u", TensorType(fp32, u.shape))], body)
    out = tmp_path / "deconv.mlmodel"
    model, _ = _write(prog, out, target="iOS12")
    assert model.specificationVersion == 1
    assert dict(layer_kinds(out)) == {"convolution": 2, "concat": 1, "flatten": 1, "innerProduct": 1}
    deconv = model.neuralNetwork.layers[0].convolution
    assert deconv.isDeconvolution and not deconv.outputShape  # the padding amounts place the crop
    assert [(a.startEdgeSize, a.endEdgeSize) for a in deconv.valid.paddingAmounts.borderAmounts] == [(1, 0), (0, 1)]
    # the full (3 - 1) * 2 + 3 = 7 by (2 - 1) * 2 + 2 = 4 result, cropped by the pads (top 1, right 1)
    d = F.conv_transpose2d(_t(x), _t(DW), _t(DB), stride=2, groups=2)[:, :, 1:, :-1]
    j = torch.cat([d, F.conv2d(_t(u), _t(CW))], dim=1).numpy()
    got = _run(out, {"x": x[0], "u": u[0]})
    _onnxruntime_agrees(out, {"x": x[0], "u": u[0]}, got, ["dense"])  # (onnxmltools drops "joined")
    assert_close(got["joined"], j[0], 1e-5)
    assert_close(got["dense"], (j.reshape(1, -1) @ LW.T)[0], 1e-5)


SE1, SE2 = _rand(2, 4), _rand(4, 2)


def test_squeeze_excitation_gate_broadcasts_over_h_and_w(tmp_path: Path) -> None:
    """x * sigmoid(fc(relu(fc(mean_hw(x))))) with the [1, C, 1, 1] gate second, and a [1, 1, H, W]
    map added first: multiply / add layers broadcasting the smaller blob (its shape [C, 1, 1] /
    [1, H, W]), the [C, H, W] input first."""

    def body(b, x, m):
        g = b.reduce_mean(x=x, axes=[2, 3], keep_dims=False, name="squeeze")
        g = b.sigmoid(x=b.linear(x=b.relu(x=b.linear(x=g, weight=SE1, name="fc1"), name="r"), weight=SE2,
                                 name="fc2"), name="gate")
        gated = b.mul(x=x, y=b.reshape(x=g, shape=[1, 4, 1, 1], name="gate4"), name="gated")
        return [b.add(x=m, y=gated, name="y")]

    prog = new_program([("x", TensorType(fp32, (1, 4, 3, 5))), ("m", TensorType(fp32, (1, 1, 3, 5)))], body)
    out = tmp_path / "se.mlmodel"
    model, _ = _write(prog, out, target="iOS12")
    assert model.specificationVersion == 1
    layers = {layer.name: layer for layer in model.neuralNetwork.layers}
    assert list(layers["gated"].input) == ["x", "gate"] and list(layers["y"].input)[1] == "m"
    x, m = _rand(1, 4, 3, 5), _rand(1, 1, 3, 5)
    got = _run(out, {"x": x[0], "m": m[0]})
    _onnxruntime_agrees(out, {"x": x[0], "m": m[0]}, got, ["y"])
    h = np.maximum(x.mean(axis=(2, 3)) @ SE1.T, 0) @ SE2.T
    want = m + x * (1 / (1 + np.exp(-h))).reshape(1, 4, 1, 1)
    assert_close(got["y"], want[0], 1e-5)


PW = _rand(3, 60)


def test_permute_ceil_mode_pooling_argmax_and_bilinear_upsample(tmp_path: Path) -> None:
    """transpose of C, H, W -> permute; ceil_mode pooling -> includeLastPixel; argmax along C ->
    reduce ARGMAX, its int32 [4, 5] result declared [4, 5]; resize_bilinear DEFAULT by integer
    factors -> upsample BILINEAR (version 1, not resizeBilinear's 3)."""

    def body(b, x):
        hwc = b.transpose(x=x, perm=[0, 2, 3, 1], name="hwc")
        dense = b.linear(x=b.reshape(x=hwc, shape=[1, 60], name="flat_hwc"), weight=PW, name="dense")
        mx = b.max_pool(x=x, kernel_sizes=[3, 2], strides=[2, 2], pad_type="valid", ceil_mode=True, name="mx")
        av = b.avg_pool(x=x, kernel_sizes=[3, 3], strides=[2, 2], pad_type="custom", pad=[1, 1, 1, 1],
                        ceil_mode=True, exclude_padding_from_average=False, name="av")
        idx = b.reduce_argmax(x=x, axis=1, keep_dims=False, name="idx")
        up = b.resize_bilinear(x=x, target_size_height=8, target_size_width=15, sampling_mode="DEFAULT", name="up")
        return [dense, mx, av, b.reshape(x=idx, shape=[4, 5], name="classes"), up]

    prog = new_program([("x", TensorType(fp32, (1, 3, 4, 5)))], body)
    out = tmp_path / "misc2.mlmodel"
    model, _ = _write(prog, out, target="iOS11")
    assert model.specificationVersion == 1
    assert dict(layer_kinds(out)) == {"permute": 1, "flatten": 1, "innerProduct": 1, "pooling": 2, "reduce": 1,
                                      "upsample": 1}
    assert _declared(model, "output")["classes"] == [4, 5]
    pools = [layer.pooling for layer in model.neuralNetwork.layers if layer.WhichOneof("layer") == "pooling"]
    assert [list(p.includeLastPixel.paddingAmounts) for p in pools] == [[0, 0], [1, 1]]
    x = _rand(1, 3, 4, 5)
    got = _run(out, {"x": x[0]})
    assert_close(got["dense"], (x.transpose(0, 2, 3, 1).reshape(1, 60) @ PW.T)[0], 1e-5)
    assert_close(got["mx"], F.max_pool2d(_t(x), (3, 2), 2, ceil_mode=True).numpy()[0], 1e-6)
    want_av = F.avg_pool2d(_t(x), 3, 2, padding=1, ceil_mode=True, count_include_pad=True).numpy()
    assert_close(got["av"], want_av[0], 1e-6)
    assert got["classes"].dtype == np.int32 and got["classes"].tolist() == np.argmax(x[0], axis=0).tolist()

    def default_grid(n: int, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.minimum(np.arange(m) * n / m, n - 1)  # DEFAULT: i * in / out from 0
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, n - 1), pos - lo

    (h0, h1, fh), (w0, w1, fw) = default_grid(4, 8), default_grid(5, 15)
    rows = x[0][:, h0] * (1 - fh)[:, None] + x[0][:, h1] * fh[:, None]
    assert_close(got["up"], rows[:, :, w0] * (1 - fw) + rows[:, :, w1] * fw, 1e-5)


# ---------------------------------------------------------------------------------------------
# refusal


def test_every_op_needing_version_4_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    def body(b, x, w):
        t = b.matmul(x=x, y=x, name="xx")
        c = b.conv(x=x, weight=w, pad_type="valid", name="dyn_conv")
        s = b.softmax(x=b.relu(x=x, name="fine"), axis=-1, name="row_softmax")
        return [t, c, s]

    prog = new_program([("x", TensorType(fp32, (1, 2, 4, 4))), ("w", TensorType(fp32, (3, 2, 1, 1)))], body)
    out = tmp_path / "bad.mlmodel"
    with pytest.raises(UnsupportedError) as info:
        _write(prog, out, target="iOS12")
    message = str(info.value)
    assert "3 ops and 1 feature have no legacy rank-5 form" in message and "version 4" in message
    assert "input 'w': 'w' of shape [3, 2, 1, 1] has a batch axis > 1" in message
    assert "matmul 'xx': matmul of a run-time or batched right operand" in message
    assert "conv 'dyn_conv': conv with a run-time weight" in message
    assert "softmax 'row_softmax': softmax along axis -1 of shape [1, 2, 4, 4]" in message
    assert "'fine'" not in message
    assert not out.exists()
    batched = new_program([("x", TensorType(fp32, (2, 3)))], lambda b, x: [b.relu(x=x, name="r")])
    with pytest.raises(UnsupportedError, match=r"input 'x': 'x' of shape \[2, 3\] has a batch axis > 1"):
        _write(batched, tmp_path / "batched.mlmodel", target="iOS11")
    # the ND backend still writes both (version 4)
    model, _ = _write(batched, tmp_path / "nd.mlmodel", target="iOS13")
    assert model.specificationVersion == 4


def test_fp16_features_are_refused_with_their_version_and_no_warning(tmp_path: Path) -> None:
    prog = new_program([("x", TensorType(fp16, (1, 3)))], lambda b, x: [b.relu(x=x, name="y")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        with pytest.raises(UnsupportedError, match=r"input 'x' of type tensor<fp16, \[1, 3\]> \(version 7\)"):
            converter.convert(prog, to="neuralnetwork", out=tmp_path / "f16.mlmodel", target="iOS12")
    assert not [w for w in caught if issubclass(w.category, ConversionWarning)]  # no note: nothing written


# ---------------------------------------------------------------------------------------------
# embedding (a row of a constant table)

TABLE = _rand(6, 4)  # [V, E], V != E


def test_a_row_of_a_constant_table_is_an_embedding_layer(tmp_path: Path) -> None:
    """gather(table, argmax(x)): the index is >= 0 by construction, so the legacy embedding layer
    (weights [outputChannels, inputDim] = the table transposed). Oracle: numpy."""

    def body(b, x):
        return [b.gather(x=TABLE, indices=b.reduce_argmax(x=x, axis=-1), axis=0, name="y")]

    out = tmp_path / "emb.mlmodel"
    model, _ = _write(new_program([("x", TensorType(fp32, (1, 6)))], body), out, target="iOS12")
    assert model.specificationVersion == 1
    assert dict(layer_kinds(out)) == {"reduce": 1, "embedding": 1}
    (layer,) = [la.embedding for la in model.neuralNetwork.layers if la.WhichOneof("layer") == "embedding"]
    assert (layer.inputDim, layer.outputChannels, layer.hasBias) == (6, 4, False)
    assert list(layer.weights.floatValue) == TABLE.T.reshape(-1).tolist()
    for row in range(6):
        x = np.roll(np.linspace(-1, 0.5, 6, dtype=np.float32), row - 5)  # the maximum at ``row``
        outputs = _run(out, {"x": x})
        assert_close(outputs["y"], TABLE[row], 1e-6)


def test_the_embedding_layer_agrees_with_onnxruntime(tmp_path: Path) -> None:
    """An iOS17 gather (negative indices are out of range there, as for the layer) of a float index
    feature cast to int32: one embedding layer. Oracles: numpy and onnxruntime on onnxmltools' ONNX
    form of the model (its embedding converter mishandles a bias: none here)."""

    def body(b, i):
        return [b.gather(x=TABLE, indices=b.cast(x=i, dtype="int32"), axis=0, name="y")]

    out = tmp_path / "emb.mlmodel"
    _write(new_program([("i", TensorType(fp32, (1,)))], body, opset="iOS17"), out, target="iOS12")
    assert dict(layer_kinds(out)) == {"embedding": 1}
    for row in range(6):
        feeds = {"i": np.float32([row])}
        outputs = _run(out, feeds)
        assert_close(outputs["y"], TABLE[row], 1e-6)
        _onnxruntime_agrees(out, feeds, outputs, ["y"])


def test_an_fp16_embedding_table_stays_fp16(tmp_path: Path) -> None:
    t16 = TABLE.astype(np.float16)

    def body(b, x):
        table = b.cast(x=b.const(t16, "fp16"), dtype="fp32")
        return [b.gather(x=table, indices=b.reduce_argmax(x=x, axis=-1), axis=0, name="y")]

    out = tmp_path / "emb16.mlmodel"
    model, _ = _write(new_program([("x", TensorType(fp32, (1, 6)))], body), out, target="iOS12")
    assert model.specificationVersion == 2  # float16Value
    (layer,) = [la.embedding for la in model.neuralNetwork.layers if la.WhichOneof("layer") == "embedding"]
    assert np.frombuffer(layer.weights.float16Value, "<f2").tolist() == t16.T.reshape(-1).tolist()
    x = np.float32([0.1, 0.9, -0.3, 0.2, 0.0, 0.5])
    assert_close(_run(out, {"x": x})["y"], t16.astype(np.float64)[1], 1e-6)


def test_several_indices_or_possibly_negative_ones_have_no_embedding_form(tmp_path: Path) -> None:
    def body(b, x, i):
        many = b.gather(x=TABLE, indices=b.reduce_argmax(x=x, axis=-1), axis=0, name="many")
        return [many, b.gather(x=TABLE, indices=i, axis=0, name="signed")]

    prog = new_program([("x", TensorType(fp32, (1, 3, 6))), ("i", TensorType(int32, (1,)))], body)
    with pytest.raises(UnsupportedError) as info:
        _write(prog, tmp_path / "no.mlmodel", target="iOS12")
    message = str(info.value)
    assert "gather 'many'" in message and "Seq/Batch" in message
    assert "gather 'signed'" in message and "known to be >= 0" in message


# ---------------------------------------------------------------------------------------------
# the shared builder models of specification version <= 3


CONVERTED = {  # model -> the version of the rank-5 model written for target iOS12
    "cnn_conv_pool_fc": 1, "cnn_conv_pool_fc_fp16": 1, "cnn_conv_pool_fc_int8_linear": 1,
    "cnn_conv_pool_fc_int8_symmetric": 1, "cnn_conv_pool_fc_lut2": 1, "cnn_conv_pool_fc_lut4": 1,
    "regressor_mlp": 1, "pipeline_two_nn": 1, "image_classifier_preprocessed": 1,
}
# the builder models with recurrent layers or flexible shapes: test_rank5_recurrent.py


def _feeds(prog, seed: int = 0) -> dict:
    """Random feeds in the declared form: arrays in [-1, 1], images as H x W x 3 (or H x W) uint8."""
    rng = np.random.default_rng(seed)
    feeds: dict = {}
    for v in prog.main.inputs:
        shape = [int(d) for d in v.type.shape]
        info = prog.main.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        if ft is not None and desc.feature_kind(ft) == "imageType":
            hw = tuple(shape[-2:]) + ((3,) if shape[-3] == 3 else ())
            feeds[v.name] = rng.integers(0, 256, hw, dtype=np.uint8)
        else:
            feeds[v.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return feeds


def _same_outputs(want: dict, got: dict) -> None:
    for key, value in want.items():
        if isinstance(value, dict):
            assert got[key].keys() == value.keys()
            assert_close([got[key][k] for k in value], list(value.values()), 1e-5)
        elif np.asarray(value).dtype.kind in "fc":
            assert_close(got[key], value, 1e-5)
        else:
            assert np.array_equal(got[key], value)


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_shared_builder_model_converts_to_rank5(name: str, tmp_path: Path) -> None:
    src = SHARED / f"{name}.mlmodel"
    if not src.exists():
        pytest.skip("shared models not present")
    out = tmp_path / f"{name}.mlmodel"
    converter.convert(src, to="neuralnetwork", out=out, target="iOS12", overwrite=True)  # default pipeline
    model = read_model_file(out).model
    assert model.specificationVersion == CONVERTED[name]
    original = read_model_file(src).model
    assert [f.name for f in model.description.input] == [f.name for f in original.description.input]
    assert [f.name for f in model.description.output] == [f.name for f in original.description.output]
    source = converter.load(src)
    for mine in model.description.input:  # the interface is the source's, as the frontend recorded it
        recorded = desc.feature_from_bytes(source.main.input_info[mine.name].feature_type)
        assert mine.type == recorded
    feeds = _feeds(source)
    _same_outputs(converter.run(source, feeds), _run(out, feeds))


REAL = SHARED.parent / "real"
REAL_CONVERTED = {  # real models -> (the version of the rank-5 model, the layer kinds that matter)
    "c3284a54_MNIST": (1, {"permute", "flatten", "innerProduct"}),  # Keras CHANNEL_LAST flatten
    "68e94b94_keras2coreml_Dense_ImageNet_small": (1, {"permute", "flatten"}),
    "7485461f_SqueezeNetFP16": (1, {"pooling", "concat"}),  # ceil-mode pooling (includeLastPixel)
    # one category index per embedding layer (the frontend marks its indices as in range)
    **{name: (1, {"embedding", "permute"}) for name in (
        "0c1c0adf_s4tf_house_simplified_trained_model", "1655a77a_s4tf_house_simplified_trained_model",
        "39fbeb97_coreml_simplified_no_train")},
}


@pytest.mark.parametrize("name", sorted(REAL_CONVERTED))
def test_real_models_convert_to_rank5(name: str, tmp_path: Path) -> None:
    """A round trip (source vs rank-5 model, both run by us): the layers the legacy forms need."""
    src = REAL / f"{name}.mlmodel"
    if not src.exists():
        pytest.skip("shared models not present")
    out = tmp_path / f"{name}.mlmodel"
    converter.convert(src, to="neuralnetwork", out=out, target="iOS12", overwrite=True)
    version, kinds = REAL_CONVERTED[name]
    assert read_model_file(out).model.specificationVersion == version
    assert kinds <= set(layer_kinds(out))
    source = converter.load(src)
    feeds = _feeds(source)
    _same_outputs(converter.run(source, feeds), _run(out, feeds))
