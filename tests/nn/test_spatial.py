"""Spatial NeuralNetwork layers (converter/frontends/neuralnetwork/layers/spatial.py) against
independent expectations: onnxmltools + onnxruntime for the classic layers it converts faithfully,
torch for convolutions and interpolation, and numpy written here from the spec's formulas. Every
model also goes through a MIL program and coremltools' MIL proto loader (tests/nn/common.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.errors import ConverterError, FormatError, UnsupportedError
from tests.nn_models.coverage import oracle_checks

from .common import compare_with_oracle, convert_run, flexible, load_spec, onnx_oracle
from .spatial_util import Model, border, close, weights

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "convolution",
    "convolution3d",
    "crop",
    "cropResize",
    "globalPooling3d",
    "padding",
    "pooling",
    "pooling3d",
    "reorganizeData",
    "resizeBilinear",
    "slidingWindows",
    "upsample",
}

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """The same random data for a test however tests are ordered or distributed."""
    global RNG
    RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# References written from the spec's formulas


def same_pads(n: int, k: int, s: int, top_left_heavy: bool) -> tuple[int, int]:
    """SamePadding: total = max(0, (ceil(n / s) - 1) * s + K - n), split as the asymmetry mode says."""
    total = max(0, (math.ceil(n / s) - 1) * s + k - n)
    small = total // 2
    return (total - small, small) if top_left_heavy else (small, total - small)


def conv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides, dilations, groups: int,
             pads: list[tuple[int, int]]) -> np.ndarray:
    """Zero padding (asymmetric amounts allowed), then torch's convolution."""
    n_sp = x.ndim - 2
    flat = [v for pair in reversed(pads) for v in pair]
    xp = F.pad(torch.from_numpy(x), flat)
    conv = F.conv2d if n_sp == 2 else F.conv3d
    y = conv(xp, torch.from_numpy(w), None if b is None else torch.from_numpy(b), stride=tuple(strides),
             dilation=tuple(dilations), groups=groups)
    return y.numpy()


def deconv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides, dilations, groups: int,
               before: list[int], out: list[int]) -> np.ndarray:
    """torch's full transposed convolution (weights [C_in, C_out / groups, *K]), then the spec's output
    window: ``out`` positions from ``before``, zeros past the full result, bias everywhere."""
    tconv = F.conv_transpose2d if x.ndim == 4 else F.conv_transpose3d
    full = tconv(torch.from_numpy(x), torch.from_numpy(w), stride=tuple(strides), dilation=tuple(dilations),
                 groups=groups).numpy()
    y = np.zeros(full.shape[:2] + tuple(out), np.float32)
    src = tuple(slice(bf, min(bf + o, f)) for bf, o, f in zip(before, out, full.shape[2:]))
    dst = tuple(slice(0, max(min(bf + o, f) - bf, 0)) for bf, o, f in zip(before, out, full.shape[2:]))
    y[(Ellipsis, *dst)] = full[(Ellipsis, *src)]
    if b is not None:
        y += b.reshape((-1,) + (1,) * len(out))
    return y


def pool_ref(x: np.ndarray, kind: str, kernel, strides, pads: list[tuple[int, int]], *, exclude: bool,
             out: list[int] | None = None) -> np.ndarray:
    """Pooling of ``[N, C, *spatial]`` with windows starting at ``i * stride - before``.

    MAX and L2 see only input pixels; AVERAGE divides by the window's pixels inside the input
    (exclude) or inside the padded extent ``[-before, n + after)`` (Caffe's rule: the explicit
    padding counts, an overhang past it does not).
    """
    sizes = x.shape[2:]
    if out is None:
        out = [(n + b + a - k) // s + 1 for n, k, s, (b, a) in zip(sizes, kernel, strides, pads)]
    y = np.zeros(x.shape[:2] + tuple(out), np.float64)
    for idx in np.ndindex(*out):
        starts = [i * s - b for i, s, (b, _) in zip(idx, strides, pads)]
        inside = tuple(slice(max(st, 0), min(st + k, n)) for st, k, n in zip(starts, kernel, sizes))
        win = x[(Ellipsis, *inside)].astype(np.float64).reshape(x.shape[:2] + (-1,))
        if kind == "MAX":
            v = win.max(-1)
        elif kind == "L2":
            v = np.sqrt((win * win).sum(-1))
        else:
            if exclude:
                count = win.shape[-1]
            else:
                count = math.prod(min(st + k, n + a) - max(st, -b)
                                  for st, k, n, (b, a) in zip(starts, kernel, sizes, pads))
            v = win.sum(-1) / count
        y[(Ellipsis, *idx)] = v
    return y.astype(np.float32)


def lerp(x: np.ndarray, axis: int, pos: np.ndarray) -> np.ndarray:
    """Linear interpolation along ``axis`` at positions in [0, size - 1]."""
    n = x.shape[axis]
    lo = np.clip(np.floor(pos), 0, n - 1).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    frac = (pos - lo).reshape((-1,) + (1,) * (x.ndim - 1 - axis % x.ndim))
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


def sampling_grid(method: str, size: int, n: int) -> np.ndarray:
    """SamplingMode.Method grids over [0, X - 1] (X = ``size``) for N = ``n`` points."""
    x = float(size)
    if method == "STRICT_ALIGN_ENDPOINTS_MODE":
        return np.linspace(0, x - 1, n)
    if method == "ALIGN_ENDPOINTS_MODE":
        return np.array([(x - 1) / 2]) if n == 1 else np.linspace(0, x - 1, n)
    if method == "UPSAMPLE_MODE":
        return np.minimum(x - 1, np.linspace(0, x - x / n, n))
    spacing = max(1.0, x - 1) / n  # ROI_ALIGN_MODE
    start = 0.5 * spacing
    return np.minimum(x - 1, np.linspace(start, start + (n - 1) * spacing, n))


def upsample_grid(mode: str, xin: int, xout: int) -> np.ndarray:
    """LinearUpsampleMode grids."""
    i = np.arange(xout, dtype=np.float64)
    if mode == "DEFAULT":
        spacing = (xin - xin / xout) / (xout - 1)
        return np.minimum(xin - 1, np.maximum(0, i * spacing))
    if mode == "ALIGN_CORNERS_TRUE":
        return np.minimum(xin - 1, np.maximum(0, i * (xin - 1) / (xout - 1)))
    spacing = xin / xout
    return np.minimum(xin - 1, np.maximum(0, i * spacing + 0.5 * spacing - 0.5))


# ---------------------------------------------------------------------------------------------
# Convolution


def conv_layer(m: Model, w: np.ndarray, b: np.ndarray | None, *, groups: int = 1, strides=(1, 1), dilations=(1, 1),
               valid: list | None = None, same: str | None = None, deconv: bool = False,
               output_shape: list[int] | None = None, inputs=("x",)) -> None:
    p = m.layer("convolution", list(inputs), ["y"])
    p.outputChannels = w.shape[1] * groups if deconv else w.shape[0]
    p.kernelChannels = w.shape[0] if deconv else w.shape[1]
    p.nGroups = groups
    p.kernelSize.extend(w.shape[2:])
    p.stride.extend(strides)
    p.dilationFactor.extend(dilations)
    p.isDeconvolution = deconv
    if same is not None:
        p.same.asymmetryMode = m.nn.SamePadding.SamePaddingMode.Value(same)
    else:
        p.valid.SetInParent()
        if valid:
            border(p.valid.paddingAmounts, valid)
    if len(inputs) == 1:
        weights(p.weights, w)
    if b is not None:
        p.hasBias = True
        weights(p.bias, b)
    if output_shape:
        p.outputShape.extend(output_shape)


CONV_CASES = {
    "valid": dict(k=(3, 3)),
    "valid_amounts_strided": dict(k=(3, 2), strides=(2, 1), valid=[(1, 2), (0, 1)]),
    "same_bottom_right": dict(k=(4, 3), strides=(2, 3), same="BOTTOM_RIGHT_HEAVY"),
    "same_top_left": dict(k=(4, 3), strides=(2, 3), same="TOP_LEFT_HEAVY"),
    # onnxruntime rejects dilation with auto_pad SAME_*: the torch reference alone checks this one
    "same_top_left_dilated": dict(k=(2, 3), dilations=(3, 2), same="TOP_LEFT_HEAVY", onnx=False),
    "grouped_dilated": dict(k=(3, 3), groups=2, dilations=(2, 1), valid=[(2, 2), (1, 1)]),
    "depthwise": dict(k=(3, 3), groups=4, c_out=8, same="BOTTOM_RIGHT_HEAVY", bias=False),
}


def _conv_case(case: dict) -> tuple[np.ndarray, np.ndarray | None, dict, list[tuple[int, int]]]:
    groups = case.get("groups", 1)
    c_in, c_out = 4, case.get("c_out", 6)
    w = rand(c_out, c_in // groups, *case["k"])
    b = rand(c_out) if case.get("bias", True) else None
    kw = {k: case[k] for k in ("strides", "dilations", "valid", "same", "groups") if k in case}
    return w, b, kw, case.get("valid") or [(0, 0), (0, 0)]


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_convolution_rank5_matches_onnxruntime_and_spec(case, tmp_path):
    w, b, kw, valid = _conv_case(CONV_CASES[case])
    m = Model({"x": (4, 9, 11)}, ["y"])
    conv_layer(m, w, b, **kw)
    x = rand(4, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    if CONV_CASES[case].get("onnx", True):
        close(y, onnx_oracle(m.spec, {"x": x})["y"])
    strides, dilations = kw.get("strides", (1, 1)), kw.get("dilations", (1, 1))
    if "same" in kw:
        eff = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], dilations)]
        pads = [same_pads(n, k, s, kw["same"] == "TOP_LEFT_HEAVY") for n, k, s in zip((9, 11), eff, strides)]
    else:
        pads = valid
    close(y, conv_ref(x[None], w, b, strides, dilations, kw.get("groups", 1), pads))


@pytest.mark.parametrize("case", ["valid_amounts_strided", "same_top_left", "grouped_dilated"])
def test_convolution_nd_leading_axes_are_batch(case, tmp_path):
    """A rank-5 ND input [S, B, C, H, W]: every leading axis is batch."""
    w, b, kw, valid = _conv_case(CONV_CASES[case])
    m = Model({"x": (2, 3, 4, 9, 11)}, ["y"], nd=True)
    conv_layer(m, w, b, **kw)
    x = rand(2, 3, 4, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    strides, dilations = kw.get("strides", (1, 1)), kw.get("dilations", (1, 1))
    if "same" in kw:
        pads = [same_pads(n, k, s, True) for n, k, s in zip((9, 11), w.shape[2:], strides)]
    else:
        pads = valid
    expected = conv_ref(x.reshape(6, 4, 9, 11), w, b, strides, dilations, kw.get("groups", 1), pads)
    assert y.shape == (2, 3) + expected.shape[1:]
    close(y, expected.reshape(y.shape))


def test_convolution_weights_as_second_input(tmp_path):
    """Spec 4+: the second input is the weight blob [C_out, C_in / groups, kH, kW]."""
    w, b = rand(6, 2, 3, 2), rand(6)
    m = Model({"x": (1, 4, 8, 7), "w": (6, 2, 3, 2)}, ["y"], nd=True)
    conv_layer(m, w, b, groups=2, strides=(2, 1), same="BOTTOM_RIGHT_HEAVY", inputs=("x", "w"))
    x = rand(1, 4, 8, 7)
    y = convert_run(m.spec, {"x": x, "w": w}, tmp_path)["y"]
    pads = [same_pads(n, k, s, False) for n, k, s in zip((8, 7), (3, 2), (2, 1))]
    close(y, conv_ref(x, w, b, (2, 1), (1, 1), 2, pads))
    w2 = rand(6, 2, 3, 2)  # a different run-time weight
    y2 = convert_run(m.spec, {"x": x, "w": w2}, tmp_path)["y"]
    close(y2, conv_ref(x, w2, b, (2, 1), (1, 1), 2, pads))


def test_convolution_flexible_spatial_size(tmp_path):
    """Flexible H and W: 'same' padding (both modes, stride 1 for TOP_LEFT_HEAVY) and valid amounts."""
    w1, w2, w3 = rand(4, 3, 3, 3), rand(4, 4, 2, 4), rand(5, 4, 3, 3)
    m = Model({"x": (1, 3, 8, 8)}, ["y"], nd=True)
    flexible(m.spec, "x", [1, 3, 4, 4], [1, 3, 20, 20])
    p = m.layer("convolution", ["x"], ["a"], name="c1")
    p.outputChannels, p.kernelChannels = 4, 3
    p.kernelSize.extend([3, 3])
    p.stride.extend([2, 2])
    p.same.asymmetryMode = 0
    weights(p.weights, w1)
    p = m.layer("convolution", ["a"], ["b"], name="c2")
    p.outputChannels, p.kernelChannels = 4, 4
    p.kernelSize.extend([2, 4])
    p.same.asymmetryMode = 1
    weights(p.weights, w2)
    p = m.layer("convolution", ["b"], ["y"], name="c3")
    p.outputChannels, p.kernelChannels = 5, 4
    border(p.valid.paddingAmounts, [(1, 0), (0, 2)])
    weights(p.weights, w3)
    for h, w in ((7, 9), (12, 5)):
        x = rand(1, 3, h, w)
        y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
        a = conv_ref(x, w1, None, (2, 2), (1, 1), 1, [same_pads(n, 3, 2, False) for n in (h, w)])
        bb = conv_ref(a, w2, None, (1, 1), (1, 1), 1,
                      [same_pads(n, k, 1, True) for n, k in zip(a.shape[2:], (2, 4))])
        close(y, conv_ref(bb, w3, None, (1, 1), (1, 1), 1, [(1, 0), (0, 2)]))


def test_convolution_top_left_heavy_strided_flexible_is_unsupported(tmp_path):
    m = Model({"x": (1, 3, 8, 8)}, ["y"], nd=True)
    flexible(m.spec, "x", [1, 3, 4, 4], [1, 3, 20, 20])
    conv_layer(m, rand(4, 3, 3, 3), None, strides=(2, 2), same="TOP_LEFT_HEAVY")
    with pytest.raises(UnsupportedError, match="TOP_LEFT_HEAVY"):
        load_spec(m.spec, tmp_path)


# Deconvolution: the output size is outputShape, or valid: (D - 1) * s + K - (before + after),
# same: D * s; the crop at the start is the valid before-amount, or for same the before share of
# max(full - out, 0) (TOP_LEFT_HEAVY: the larger half); past the full result the output is zeros.
DECONV_CASES = {
    "valid": dict(k=(3, 3), strides=(2, 2)),
    "valid_amounts": dict(k=(4, 3), strides=(2, 3), valid=[(1, 2), (0, 1)]),
    "same_bottom_right": dict(k=(3, 4), strides=(2, 2), same="BOTTOM_RIGHT_HEAVY"),
    "same_top_left": dict(k=(3, 4), strides=(2, 2), same="TOP_LEFT_HEAVY"),
    "same_kernel_below_stride": dict(k=(2, 1), strides=(3, 2), same="TOP_LEFT_HEAVY"),
    "output_shape_valid": dict(k=(3, 3), strides=(2, 2), valid=[(1, 1), (1, 1)], out=[12, 13]),
    "output_shape_same": dict(k=(4, 3), strides=(2, 2), same="TOP_LEFT_HEAVY", out=[11, 14]),
    "grouped": dict(k=(3, 2), strides=(1, 2), groups=2, valid=[(0, 1), (1, 0)]),
}


def _deconv_window(case: dict, sizes: tuple[int, ...]) -> tuple[list[int], list[int]]:
    before, out = [], []
    for i, n in enumerate(sizes):
        k, s = case["k"][i], case["strides"][i]
        full = (n - 1) * s + k
        if "out" in case:
            o = case["out"][i]
        elif "same" in case:
            o = n * s
        else:
            o = full - sum(case.get("valid", [(0, 0)] * 2)[i])
        if "same" in case:
            total = max(full - o, 0)
            bf = total - total // 2 if case["same"] == "TOP_LEFT_HEAVY" else total // 2
        else:
            bf = case.get("valid", [(0, 0)] * 2)[i][0]
        before.append(bf)
        out.append(o)
    return before, out


@pytest.mark.parametrize("nd", [False, True], ids=["rank5", "nd"])
@pytest.mark.parametrize("case", DECONV_CASES, ids=list(DECONV_CASES))
def test_deconvolution_output_shape_rules(case, nd, tmp_path):
    c = DECONV_CASES[case]
    groups = c.get("groups", 1)
    w, b = rand(4, 6 // groups, *c["k"]), rand(6)
    m = Model({"x": (4, 5, 6) if not nd else (2, 4, 5, 6)}, ["y"], nd=nd)
    conv_layer(m, w, b, groups=groups, strides=c["strides"], valid=c.get("valid"), same=c.get("same"), deconv=True,
               output_shape=c.get("out"))
    x = rand(4, 5, 6) if not nd else rand(2, 4, 5, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    before, out = _deconv_window(c, (5, 6))
    close(y, deconv_ref(x if nd else x[None], w, b, c["strides"], (1, 1), groups, before, out))
    if not nd and case in DECONV_ONNX_AGREES:
        close(y, onnx_oracle(m.spec, {"x": x})["y"])


# onnxruntime's ConvTranspose, as onnxmltools sets it up, agrees except where the spec decides
# otherwise: 'same' with kernel < stride gives the full (D - 1) * s + K, not D * s; and with
# output_shape it ignores explicit pads, splitting the difference itself.
DECONV_ONNX_AGREES = {"valid", "valid_amounts", "same_bottom_right", "same_top_left", "output_shape_same", "grouped"}


def test_deconvolution_ignores_dilation_as_the_spec_says(tmp_path):
    w = rand(3, 2, 3, 3)
    m = Model({"x": (3, 4, 4)}, ["y"])
    conv_layer(m, w, None, strides=(2, 2), dilations=(2, 2), deconv=True)
    prog = load_spec(m.spec, tmp_path)
    assert any("dilationFactor" in n for n in prog.meta["notes"])
    x = rand(3, 4, 4)
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], deconv_ref(x[None], w, None, (2, 2), (1, 1), 1, [0, 0], [9, 9]))


def test_deconvolution_flexible_valid_and_same(tmp_path):
    w1, w2 = rand(3, 4, 3, 3), rand(4, 2, 4, 4)
    m = Model({"x": (1, 3, 5, 5)}, ["y"], nd=True)
    flexible(m.spec, "x", [1, 3, 2, 2], [1, 3, 9, 9])
    conv_layer(m, w1, None, strides=(2, 2), valid=[(1, 0), (0, 1)], deconv=True)
    m.builder.nn_spec.layers[0].output[0] = "a"
    p = m.layer("convolution", ["a"], ["y"], name="L2")
    p.outputChannels, p.kernelChannels, p.isDeconvolution = 2, 4, True
    p.kernelSize.extend([4, 4])
    p.stride.extend([2, 2])
    p.same.asymmetryMode = 1
    weights(p.weights, w2)
    for h, w in ((3, 4), (6, 2)):
        x = rand(1, 3, h, w)
        a = deconv_ref(x, w1, None, (2, 2), (1, 1), 1, [1, 0], [(h - 1) * 2 + 2, (w - 1) * 2 + 2])
        expected = deconv_ref(a, w2, None, (2, 2), (1, 1), 1, [1, 1], [a.shape[2] * 2, a.shape[3] * 2])
        close(convert_run(m.spec, {"x": x}, tmp_path)["y"], expected)


# ---------------------------------------------------------------------------------------------
# Convolution 3-D


CONV3D_CASES = {
    "custom": dict(pad="CUSTOM", custom=[(1, 0), (0, 2), (1, 1)], strides=(1, 2, 1)),
    "valid_dilated": dict(pad="VALID", dilations=(2, 1, 2)),
    "same_strided": dict(pad="SAME", strides=(2, 2, 3)),
    "grouped": dict(pad="CUSTOM", custom=[(0, 1), (1, 1), (2, 0)], groups=2),
}


def conv3d_layer(m: Model, w: np.ndarray, b: np.ndarray | None, c_in: int, c_out: int, *, groups=1,
                 strides=(1, 1, 1), dilations=(1, 1, 1), pad="VALID", custom=None, deconv=False,
                 output_shape=None) -> None:
    p = m.layer("convolution3d", ["x"], ["y"])
    p.inputChannels, p.outputChannels, p.nGroups = c_in, c_out, groups
    p.kernelDepth, p.kernelHeight, p.kernelWidth = w.shape[2:]
    p.strideDepth, p.strideHeight, p.strideWidth = strides
    p.dilationDepth, p.dilationHeight, p.dilationWidth = dilations
    p.paddingType = m.nn.Convolution3DLayerParams.PaddingType.Value(pad)
    if custom:
        ((p.customPaddingFront, p.customPaddingBack), (p.customPaddingTop, p.customPaddingBottom),
         (p.customPaddingLeft, p.customPaddingRight)) = custom
    p.isDeconvolution = deconv
    if output_shape:
        p.outputShape.extend(output_shape)
    weights(p.weights, w)
    if b is not None:
        p.hasBias = True
        weights(p.bias, b)


@pytest.mark.parametrize("case", CONV3D_CASES, ids=list(CONV3D_CASES))
def test_convolution3d_matches_torch(case, tmp_path):
    c = CONV3D_CASES[case]
    groups, strides, dilations = c.get("groups", 1), c.get("strides", (1, 1, 1)), c.get("dilations", (1, 1, 1))
    w, b = rand(6, 4 // groups, 3, 2, 3), rand(6)
    m = Model({"x": (2, 4, 6, 7, 8)}, ["y"], nd=True, spec_version=5)
    conv3d_layer(m, w, b, 4, 6, groups=groups, strides=strides, dilations=dilations, pad=c["pad"],
                 custom=c.get("custom"))
    x = rand(2, 4, 6, 7, 8)
    if c["pad"] == "SAME":  # ceil(D / s) outputs; an odd total puts the extra unit at the back
        pads = [same_pads(n, k, s, False) for n, k, s in zip((6, 7, 8), w.shape[2:], strides)]
    else:
        pads = c.get("custom") or [(0, 0)] * 3
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], conv_ref(x, w, b, strides, dilations, groups, pads))


def test_convolution3d_same_example_from_the_spec(tmp_path):
    """The spec's example: [1, 3, 3, 8, 8], stride 2, kernel 3, 2 outputs, same -> [1, 2, 2, 4, 4] with
    padding [1, 1, 0, 1, 0, 1]."""
    w = rand(2, 3, 3, 3, 3)
    m = Model({"x": (1, 3, 3, 8, 8)}, ["y"], nd=True, spec_version=5)
    conv3d_layer(m, w, None, 3, 2, strides=(2, 2, 2), pad="SAME")
    x = rand(1, 3, 3, 8, 8)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    assert y.shape == (1, 2, 2, 4, 4)
    close(y, conv_ref(x, w, None, (2, 2, 2), (1, 1, 1), 1, [(1, 1), (0, 1), (0, 1)]))


DECONV3D_CASES = {
    "valid": dict(pad="VALID", strides=(2, 1, 2)),
    "custom": dict(pad="CUSTOM", custom=[(1, 0), (0, 1), (1, 1)], strides=(2, 2, 1)),
    "same": dict(pad="SAME", strides=(2, 3, 2)),
    "output_shape": dict(pad="CUSTOM", custom=[(1, 1), (0, 0), (1, 0)], strides=(2, 2, 2), out=[8, 10, 9]),
    "grouped_dilated": dict(pad="VALID", groups=2, dilations=(1, 2, 1)),
}


@pytest.mark.parametrize("case", DECONV3D_CASES, ids=list(DECONV3D_CASES))
def test_deconvolution3d_matches_torch(case, tmp_path):
    c = DECONV3D_CASES[case]
    groups, strides, dilations = c.get("groups", 1), c["strides"] if "strides" in c else (1, 1, 1), \
        c.get("dilations", (1, 1, 1))
    k = (3, 2, 3)
    w, b = rand(4, 6 // groups, *k), rand(6)  # stored [C_in, C_out / groups, kD, kH, kW]
    m = Model({"x": (1, 4, 3, 4, 5)}, ["y"], nd=True, spec_version=5)
    conv3d_layer(m, w, b, 4, 6, groups=groups, strides=strides, dilations=dilations, pad=c["pad"],
                 custom=c.get("custom"), deconv=True, output_shape=c.get("out"))
    x = rand(1, 4, 3, 4, 5)
    before, out = [], []
    for i, n in enumerate((3, 4, 5)):
        keff, s = (k[i] - 1) * dilations[i] + 1, strides[i]
        full = (n - 1) * s + keff
        custom = (c.get("custom") or [(0, 0)] * 3)[i]
        o = c["out"][i] if "out" in c else n * s if c["pad"] == "SAME" else full - sum(custom)
        before.append(max(full - o, 0) // 2 if c["pad"] == "SAME" else custom[0])
        out.append(o)
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], deconv_ref(x, w, b, strides, dilations, groups, before, out))


# ---------------------------------------------------------------------------------------------
# Pooling


def pool_layer(m: Model, kind: str, kernel=(3, 3), strides=(1, 1), *, valid=None, same=None, last_pixel=None,
               exclude=False, global_=False, inputs=("x",)) -> None:
    p = m.layer("pooling", list(inputs), ["y"])
    p.type = m.nn.PoolingLayerParams.PoolingType.Value(kind)
    p.kernelSize.extend(kernel)
    p.stride.extend(strides)
    if same is not None:
        p.same.asymmetryMode = m.nn.SamePadding.SamePaddingMode.Value(same)
    elif last_pixel is not None:
        p.includeLastPixel.paddingAmounts.extend(last_pixel)
    else:
        p.valid.SetInParent()
        if valid:
            border(p.valid.paddingAmounts, valid)
    p.avgPoolExcludePadding = exclude
    p.globalPooling = global_


POOL_CASES = {
    "valid": dict(kernel=(3, 2), strides=(2, 1)),
    "valid_amounts": dict(kernel=(3, 3), strides=(2, 2), valid=[(1, 2), (0, 1)]),
    "same_bottom_right": dict(kernel=(4, 3), strides=(2, 3), same="BOTTOM_RIGHT_HEAVY"),
    "same_top_left": dict(kernel=(4, 3), strides=(2, 3), same="TOP_LEFT_HEAVY"),
}


# (type, avgPoolExcludePadding): the flag only changes average pooling
POOL_KINDS = [("MAX", False), ("AVERAGE", False), ("AVERAGE", True), ("L2", False)]
POOL_KIND_IDS = ["max", "average", "average_exclude_pad", "l2"]


@pytest.mark.parametrize("kind, exclude", POOL_KINDS, ids=POOL_KIND_IDS)
@pytest.mark.parametrize("case", POOL_CASES, ids=list(POOL_CASES))
def test_pooling_matches_onnxruntime_and_spec(case, kind, exclude, tmp_path):
    c = POOL_CASES[case]
    m = Model({"x": (3, 9, 10)}, ["y"])
    pool_layer(m, kind, c["kernel"], c["strides"], valid=c.get("valid"), same=c.get("same"), exclude=exclude)
    x = rand(3, 9, 10)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    if "same" in c:
        tlh = c["same"] == "TOP_LEFT_HEAVY"
        pads = [same_pads(n, k, s, tlh) for n, k, s in zip((9, 10), c["kernel"], c["strides"])]
        out = [math.ceil(n / s) for n, s in zip((9, 10), c["strides"])]
    else:
        pads, out = c.get("valid") or [(0, 0), (0, 0)], None
    close(y, pool_ref(x[None], kind, c["kernel"], c["strides"], pads, exclude=exclude, out=out))
    if kind != "AVERAGE" or exclude:  # onnxmltools writes an invalid AveragePool (ceil_mode at opset 7) otherwise
        close(y, onnx_oracle(m.spec, {"x": x})["y"])


@pytest.mark.parametrize("nd", [False, True], ids=["rank5", "nd"])
@pytest.mark.parametrize("kind", ["MAX", "AVERAGE", "L2"])
def test_global_pooling(kind, nd, tmp_path):
    shape = (2, 3, 5, 6) if nd else (3, 5, 6)
    m = Model({"x": shape}, ["y"], nd=nd)
    pool_layer(m, kind, (2, 2), valid=[(1, 1), (1, 1)], global_=True)  # kernel and padding are ignored
    x = rand(*shape)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    expected = {"MAX": x.max(axis=(-2, -1), keepdims=True), "AVERAGE": x.mean(axis=(-2, -1), keepdims=True),
                "L2": np.sqrt((x * x).sum(axis=(-2, -1), keepdims=True))}[kind]
    close(y, expected)
    if not nd:
        close(y, onnx_oracle(m.spec, {"x": x})["y"])


def include_last_pixel_out(n: int, k: int, s: int, pad: int, any_pad: bool) -> int:
    """PoolingLayerParams: H_out = ceil((H_in + 2 * pad - K) / s) + 1, less 1 when any axis is padded
    and the last window starts at or after H_in + pad."""
    out = math.ceil((n + 2 * pad - k) / s) + 1
    if any_pad and (out - 1) * s >= n + pad:
        out -= 1
    return out


LAST_PIXEL_CASES = {
    "no_padding": dict(kernel=(3, 3), strides=(2, 2), pads=(0, 0)),
    "padded": dict(kernel=(3, 2), strides=(2, 2), pads=(1, 1)),
    "padded_drop": dict(kernel=(2, 3), strides=(2, 3), pads=(1, 2)),
    "one_axis_padded": dict(kernel=(2, 3), strides=(3, 2), pads=(0, 1)),
}


@pytest.mark.parametrize("kind, exclude", POOL_KINDS, ids=POOL_KIND_IDS)
@pytest.mark.parametrize("case", LAST_PIXEL_CASES, ids=list(LAST_PIXEL_CASES))
def test_pooling_include_last_pixel(case, kind, exclude, tmp_path):
    """ValidCompletePadding (ceil-mode pooling) against the spec's output-size formula and Caffe's
    window rule. onnxmltools agrees for MAX where it applies the drop condition per axis; it
    divides averages by the whole kernel area, overhang included, which the spec does not say."""
    c = LAST_PIXEL_CASES[case]
    sizes = (9, 10)
    m = Model({"x": (3, *sizes)}, ["y"])
    pool_layer(m, kind, c["kernel"], c["strides"], last_pixel=list(c["pads"]), exclude=exclude)
    x = rand(3, *sizes)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    any_pad = any(c["pads"])
    out = [include_last_pixel_out(n, k, s, p, any_pad)
           for n, k, s, p in zip(sizes, c["kernel"], c["strides"], c["pads"])]
    pads = [(p, p) for p in c["pads"]]
    close(y, pool_ref(x[None], kind, c["kernel"], c["strides"], pads, exclude=exclude, out=out))
    if kind == "MAX" and case != "one_axis_padded":
        close(y, onnx_oracle(m.spec, {"x": x})["y"])


def test_pooling_one_axis_padded_drop_rule(tmp_path):
    """Only W is padded, yet H loses its last window: (out - 1) * s >= H_in + 0 with stride 3 > kernel 2."""
    m = Model({"x": (1, 6, 6)}, ["y"])
    pool_layer(m, "MAX", (2, 2), (3, 2), last_pixel=[0, 1])
    x = rand(1, 6, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    assert y.shape == (1, 2, 4)  # H: ceil((6 - 2) / 3) + 1 = 3, dropped to 2; W: ceil(6 / 2) + 1 = 4
    close(y, pool_ref(x[None], "MAX", (2, 2), (3, 2), [(0, 0), (1, 1)], exclude=False, out=[2, 4]))


def test_pooling_nd_rank5_and_flexible(tmp_path):
    m = Model({"x": (2, 2, 3, 8, 8)}, ["y"], nd=True)
    flexible(m.spec, "x", [1, 1, 3, 4, 4], [3, 3, 3, 16, 16])
    pool_layer(m, "AVERAGE", (3, 3), (2, 2), same="BOTTOM_RIGHT_HEAVY", exclude=True)
    for shape in ((2, 2, 3, 8, 8), (3, 1, 3, 7, 11)):
        x = rand(*shape)
        y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
        pads = [same_pads(n, 3, 2, False) for n in shape[-2:]]
        out = [math.ceil(n / 2) for n in shape[-2:]]
        ref = pool_ref(x.reshape(-1, *shape[2:]), "AVERAGE", (3, 3), (2, 2), pads, exclude=True, out=out)
        close(y, ref.reshape(shape[:2] + ref.shape[1:]))


def pool3d_layer(m: Model, kind: str, kernel, strides, pad: str, custom=None, exclude=False) -> None:
    p = m.layer("pooling3d", ["x"], ["y"])
    p.type = m.nn.Pooling3DLayerParams.PoolingType3D.Value(kind)
    p.kernelDepth, p.kernelHeight, p.kernelWidth = kernel
    p.strideDepth, p.strideHeight, p.strideWidth = strides
    p.paddingType = m.nn.Pooling3DLayerParams.Pooling3DPaddingType.Value(pad)
    if custom:
        ((p.customPaddingFront, p.customPaddingBack), (p.customPaddingTop, p.customPaddingBottom),
         (p.customPaddingLeft, p.customPaddingRight)) = custom
    p.countExcludePadding = exclude


@pytest.mark.parametrize("kind, exclude", POOL_KINDS[:3], ids=POOL_KIND_IDS[:3])
@pytest.mark.parametrize("pad", ["CUSTOM", "VALID", "SAME"])
def test_pooling3d(pad, kind, exclude, tmp_path):
    kernel, strides = (2, 3, 2), (1, 2, 2)
    custom = [(1, 0), (1, 2), (0, 1)] if pad == "CUSTOM" else None
    m = Model({"x": (2, 3, 4, 7, 6)}, ["y"], nd=True, spec_version=5)
    pool3d_layer(m, kind, kernel, strides, pad, custom, exclude)
    x = rand(2, 3, 4, 7, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    out = None
    if pad == "SAME":  # ceil(D / stride) outputs, the odd padding unit at the back/bottom/right
        pads = [same_pads(n, k, s, False) for n, k, s in zip((4, 7, 6), kernel, strides)]
        out = [math.ceil(n / s) for n, s in zip((4, 7, 6), strides)]
    else:
        pads = custom or [(0, 0)] * 3
    close(y, pool_ref(x, kind, kernel, strides, pads, exclude=exclude, out=out))


@pytest.mark.parametrize("kind", ["MAX", "AVERAGE"])
def test_global_pooling3d(kind, tmp_path):
    m = Model({"x": (2, 3, 4, 5, 6)}, ["y"], nd=True, spec_version=5)
    m.layer("globalPooling3d", ["x"], ["y"]).type = m.nn.GlobalPooling3DLayerParams.GlobalPoolingType3D.Value(kind)
    x = rand(2, 3, 4, 5, 6)
    reduce = np.max if kind == "MAX" else np.mean
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], reduce(x, axis=(2, 3, 4), keepdims=True))


# ---------------------------------------------------------------------------------------------
# Padding and cropping


def pad_layer(m: Model, kind: str, pads, value: float = 0.0, inputs=("x",)) -> None:
    p = m.layer("padding", list(inputs), ["y"])
    getattr(p, kind).SetInParent()
    if kind == "constant":
        p.constant.value = value
    border(p.paddingAmounts, pads)


SPEC_PAD_EXAMPLE = {
    "constant": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 1, 2, 3, 4], [0, 0, 5, 6, 7, 8], [0, 0, 9, 10, 11, 12]],
    "reflection": [[11, 10, 9, 10, 11, 12], [7, 6, 5, 6, 7, 8], [3, 2, 1, 2, 3, 4], [7, 6, 5, 6, 7, 8],
                   [11, 10, 9, 10, 11, 12]],
    "replication": [[1, 1, 1, 2, 3, 4], [1, 1, 1, 2, 3, 4], [1, 1, 1, 2, 3, 4], [5, 5, 5, 6, 7, 8],
                    [9, 9, 9, 10, 11, 12]],
}


@pytest.mark.parametrize("kind", ["constant", "reflection", "replication"])
def test_padding_example_from_the_spec(kind, tmp_path):
    m = Model({"x": (1, 3, 4)}, ["y"])
    pad_layer(m, kind, [(2, 0), (2, 0)])
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 3, 4)
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], np.array(SPEC_PAD_EXAMPLE[kind])[None])


@pytest.mark.parametrize("kind", [
    pytest.param("constant", marks=oracle_checks("padding.constant")),
    pytest.param("reflection", marks=oracle_checks("padding.reflection")),
    pytest.param("replication", marks=oracle_checks("padding.replication")),
])
def test_padding_matches_onnxruntime(kind, tmp_path):
    """Top 1, bottom 3, left 4, right 2: every amount distinct (a swap of any two moves the image)."""
    m = Model({"x": (3, 5, 6)}, ["y"])
    pad_layer(m, kind, [(1, 3), (4, 2)], value=2.5)
    x = rand(3, 5, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    np_mode = {"constant": "constant", "reflection": "reflect", "replication": "edge"}[kind]
    extra = {"constant_values": 2.5} if kind == "constant" else {}
    close(y, np.pad(x, [(0, 0), (1, 3), (4, 2)], mode=np_mode, **extra))
    close(y, onnx_oracle(m.spec, {"x": x})["y"])


def test_padding_nd_rank2_and_rank4(tmp_path):
    m = Model({"x": (4, 5), "z": (2, 3, 4, 5)}, ["y", "w"], nd=True)
    pad_layer(m, "reflection", [(2, 1), (0, 3)])
    p = m.layer("padding", ["z"], ["w"], name="L2")
    p.constant.value = -1.0
    border(p.paddingAmounts, [(0, 1), (2, 0)])
    x, z = rand(4, 5), rand(2, 3, 4, 5)
    out = convert_run(m.spec, {"x": x, "z": z}, tmp_path)
    close(out["y"], np.pad(x, [(2, 1), (0, 3)], mode="reflect"))
    close(out["w"], np.pad(z, [(0, 0), (0, 0), (0, 1), (2, 0)], constant_values=-1.0))


@oracle_checks("crop")
def test_crop_amounts_matches_onnxruntime(tmp_path):
    """Top 1, bottom 2, left 3, right 0: every amount distinct."""
    m = Model({"x": (3, 8, 9)}, ["y"])
    border(m.layer("crop", ["x"], ["y"]).cropAmounts, [(1, 2), (3, 0)])
    x = rand(3, 8, 9)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    close(y, x[:, 1:6, 3:9])
    close(y, onnx_oracle(m.spec, {"x": x})["y"])


@oracle_checks("crop")
def test_crop_reference_input_with_offset(tmp_path):
    """y = x1[:, offset[0]:offset[0] + H_out, offset[1]:offset[1] + W_out], H_out/W_out from x2; offsets
    [2, 3] and reference sizes [4, 5] distinct."""
    m = Model({"x": (3, 8, 9), "r": (3, 4, 5)}, ["y"])
    m.layer("crop", ["x", "r"], ["y"]).offset.extend([2, 3])
    x, r = rand(3, 8, 9), rand(3, 4, 5)
    y = convert_run(m.spec, {"x": x, "r": r}, tmp_path)["y"]
    close(y, x[:, 2:6, 3:8])
    close(y, onnx_oracle(m.spec, {"x": x, "r": r})["y"])


def test_crop_reference_input_flexible(tmp_path):
    m = Model({"x": (1, 2, 8, 9), "r": (1, 2, 4, 5)}, ["y"], nd=True)
    flexible(m.spec, "x", [1, 2, 6, 6], [1, 2, 12, 12])
    flexible(m.spec, "r", [1, 2, 1, 1], [1, 2, 6, 6])
    m.layer("crop", ["x", "r"], ["y"]).offset.extend([1, 2])
    for xs, rs in (((9, 8), (3, 6)), ((12, 10), (6, 1))):
        x, r = rand(1, 2, *xs), rand(1, 2, *rs)
        close(convert_run(m.spec, {"x": x, "r": r}, tmp_path)["y"], x[..., 1:1 + rs[0], 2:2 + rs[1]])


# ---------------------------------------------------------------------------------------------
# Resampling


def upsample_layer(m: Model, mode: str, factors, linear: str = "DEFAULT", fractional: bool = False) -> None:
    p = m.layer("upsample", ["x"], ["y"])
    (p.fractionalScalingFactor if fractional else p.scalingFactor).extend(factors)
    p.mode = m.nn.UpsampleLayerParams.InterpolationMode.Value(mode)
    p.linearUpsampleMode = m.nn.UpsampleLayerParams.LinearUpsampleMode.Value(linear)


@pytest.mark.parametrize("nd", [pytest.param(False, id="rank5", marks=oracle_checks("upsample.mode=NN")),
                                pytest.param(True, id="nd")])
def test_upsample_nearest_neighbour(nd, tmp_path):
    """Factors [2, 3] on a 4 x 5 image (onnxruntime for the rank-5 network, which onnxmltools converts)."""
    shape = (2, 3, 4, 5) if nd else (3, 4, 5)
    m = Model({"x": shape}, ["y"], nd=nd)
    upsample_layer(m, "NN", [2, 3])
    x = rand(*shape)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    close(y, x.repeat(2, axis=-2).repeat(3, axis=-1))
    if not nd:
        close(y, onnx_oracle(m.spec, {"x": x})["y"])


@pytest.mark.parametrize("factors", [(2, 3), (1.5, 2.25), (0.6, 1.7)], ids=["integer", "fractional", "shrink"])
@pytest.mark.parametrize("linear", ["ALIGN_CORNERS_TRUE", "ALIGN_CORNERS_FALSE"])
def test_upsample_bilinear_matches_torch(linear, factors, tmp_path):
    """torch's bilinear interpolate samples as LinearUpsampleMode says: align_corners=True spacing
    (in - 1) / (out - 1); False half-pixel with spacing in / out (recompute_scale_factor), clamped."""
    fractional = any(f != int(f) for f in factors)
    m = Model({"x": (3, 5, 6)}, ["y"], spec_version=5)
    upsample_layer(m, "BILINEAR", factors, linear, fractional)
    x = rand(3, 5, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    ref = F.interpolate(torch.from_numpy(x[None]), scale_factor=factors, mode="bilinear",
                        align_corners=linear == "ALIGN_CORNERS_TRUE", recompute_scale_factor=True).numpy()
    close(y, ref)
    grids = [upsample_grid(linear, n, int(math.floor(n * np.float32(f)))) for n, f in zip((5, 6), factors)]
    close(y, lerp(lerp(x.astype(np.float64), 1, grids[0]), 2, grids[1]))


@pytest.mark.parametrize("factors", [(2, 3), (1.5, 2.5)], ids=["integer", "fractional"])
def test_upsample_bilinear_default_mode(factors, tmp_path):
    """DEFAULT: spacing = (Xin - Xin / Xout) / (Xout - 1), i.e. samples i * Xin / Xout."""
    fractional = any(f != int(f) for f in factors)
    m = Model({"x": (2, 4, 5)}, ["y"], spec_version=5)
    upsample_layer(m, "BILINEAR", factors, "DEFAULT", fractional)
    x = rand(2, 4, 5)
    grids = [upsample_grid("DEFAULT", n, int(math.floor(n * f))) for n, f in zip((4, 5), factors)]
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], lerp(lerp(x.astype(np.float64), 1, grids[0]), 2, grids[1]))


def test_upsample_flexible_size(tmp_path):
    m = Model({"x": (1, 2, 4, 4)}, ["y"], nd=True, spec_version=5)
    flexible(m.spec, "x", [1, 2, 2, 2], [1, 2, 8, 8])
    upsample_layer(m, "BILINEAR", [2, 3], "ALIGN_CORNERS_FALSE")
    x = rand(1, 2, 3, 7)
    ref = F.interpolate(torch.from_numpy(x), scale_factor=(2, 3), mode="bilinear", align_corners=False).numpy()
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], ref)


def test_upsample_fractional_nearest_is_unsupported(tmp_path):
    m = Model({"x": (1, 4, 4)}, ["y"])
    upsample_layer(m, "NN", [1.5, 2.0], fractional=True)
    with pytest.raises(UnsupportedError, match="fractional"):
        load_spec(m.spec, tmp_path)


SAMPLING = ["STRICT_ALIGN_ENDPOINTS_MODE", "ALIGN_ENDPOINTS_MODE", "UPSAMPLE_MODE", "ROI_ALIGN_MODE"]


@pytest.mark.parametrize("target", [(7, 9), (3, 2), (1, 1)], ids=["up", "down", "one"])
@pytest.mark.parametrize("method", SAMPLING)
def test_resize_bilinear(method, target, tmp_path):
    m = Model({"x": (2, 5, 4)}, ["y"])
    p = m.layer("resizeBilinear", ["x"], ["y"])
    p.targetSize.extend(target)
    p.mode.samplingMethod = m.nn.SamplingMode.Method.Value(method)
    x = rand(2, 5, 4)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    ref = lerp(lerp(x.astype(np.float64), 1, sampling_grid(method, 5, target[0])), 2,
               sampling_grid(method, 4, target[1]))
    close(y, ref)


def test_resize_bilinear_nd_leading_axes(tmp_path):
    m = Model({"x": (2, 3, 2, 5, 4)}, ["y"], nd=True)
    p = m.layer("resizeBilinear", ["x"], ["y"])
    p.targetSize.extend([8, 3])
    p.mode.samplingMethod = 1
    x = rand(2, 3, 2, 5, 4)
    ref = lerp(lerp(x.astype(np.float64), 3, sampling_grid("ALIGN_ENDPOINTS_MODE", 5, 8)), 4,
               sampling_grid("ALIGN_ENDPOINTS_MODE", 4, 3))
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], ref)


BOX_MODES = ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"]


def crop_resize_ref(x: np.ndarray, boxes: np.ndarray, target, method: str, box_mode: str, normalized: bool,
                    scale: float) -> np.ndarray:
    """Each box as (h1, w1, h2, w2) pixels; the SamplingMode grid over [h1, h2] (X - 1 = h2 - h1)."""
    h, w = x.shape[-2:]
    out = []
    for box in boxes.astype(np.float64):
        if "WIDTH_FIRST" in box_mode:
            box = box[[1, 0, 3, 2]]
        if box_mode.startswith("CENTER"):
            box = np.concatenate([box[:2] - box[2:] / 2, box[:2] + box[2:] / 2])
        if normalized:
            box = box * [h - 1, w - 1, h - 1, w - 1]
        box = box * scale
        gh = box[0] + sampling_grid(method, box[2] - box[0] + 1, target[0])
        gw = box[1] + sampling_grid(method, box[3] - box[1] + 1, target[1])
        out.append(lerp(lerp(x.astype(np.float64), x.ndim - 2, gh), x.ndim - 1, gw))
    return np.stack(out)


@pytest.mark.parametrize("normalized", [False, True], ids=["pixels", "normalized"])
@pytest.mark.parametrize("box_mode", BOX_MODES)
@pytest.mark.parametrize("method", SAMPLING)
def test_crop_resize_boxes_on_every_image(method, box_mode, normalized, tmp_path):
    """[N, 1, 4, 1, 1] boxes: every box on every image of [1, B, C, H, W] -> [N, B, C, h, w]."""
    corners = np.array([[1.0, 2.0, 6.0, 8.0], [0.0, 0.0, 7.0, 9.0], [2.5, 1.5, 4.0, 7.25]])  # h1, w1, h2, w2
    scale = 0.5 if not normalized else 1.0
    corners = corners * 2 if scale == 0.5 else corners / [7, 9, 7, 9]
    boxes = corners.copy()
    if box_mode.startswith("CENTER"):
        boxes = np.concatenate([(corners[:, :2] + corners[:, 2:]) / 2, corners[:, 2:] - corners[:, :2]], axis=1)
    if "WIDTH_FIRST" in box_mode:
        boxes = boxes[:, [1, 0, 3, 2]]
    m = Model({"x": (2, 8, 10), "roi": (4, 1, 1)}, ["y"], nd=True)
    m.builder.spec.description.input[0].type.multiArrayType.ClearField("shape")
    m.builder.spec.description.input[0].type.multiArrayType.shape.extend([1, 2, 2, 8, 10])
    m.builder.spec.description.input[1].type.multiArrayType.ClearField("shape")
    m.builder.spec.description.input[1].type.multiArrayType.shape.extend([3, 1, 4, 1, 1])
    p = m.layer("cropResize", ["x", "roi"], ["y"])
    p.targetSize.extend([4, 5])
    p.normalizedCoordinates = normalized
    p.mode.samplingMethod = m.nn.SamplingMode.Method.Value(method)
    p.boxIndicesMode.boxMode = m.nn.BoxCoordinatesMode.Coordinates.Value(box_mode)
    p.spatialScale = scale
    x = rand(1, 2, 2, 8, 10)
    y = convert_run(m.spec, {"x": x, "roi": boxes.reshape(3, 1, 4, 1, 1).astype(np.float32)}, tmp_path)["y"]
    assert y.shape == (3, 2, 2, 4, 5)
    close(y, crop_resize_ref(x[0], boxes, (4, 5), method, box_mode, normalized, scale), atol=2e-5)


@pytest.mark.parametrize("batch", [1, 3])
def test_crop_resize_boxes_with_image_index(batch, tmp_path):
    """[N, 1, 5, 1, 1]: the first coordinate picks the image -> [N, 1, C, h, w]. (coremltools' MIL type
    inference of crop_resize says [N, B, C, h, w] whatever the box format, against the op's own
    documentation and this layer's spec, so its loader only reads the B = 1 program.)"""
    m = Model({"x": (1, batch, 2, 6, 7), "roi": (2, 1, 5, 1, 1)}, ["y"], nd=True)
    p = m.layer("cropResize", ["x", "roi"], ["y"])
    p.targetSize.extend([3, 4])
    p.spatialScale = 1.0
    p.mode.samplingMethod = m.nn.SamplingMode.ROI_ALIGN_MODE
    x = rand(1, batch, 2, 6, 7)
    rois = np.array([[batch - 1, 0.5, 1, 4, 6], [0, 1, 0, 5, 3]], np.float32)
    y = convert_run(m.spec, {"x": x, "roi": rois.reshape(2, 1, 5, 1, 1)}, tmp_path, coremltools_loads=batch == 1)["y"]
    assert y.shape == (2, 1, 2, 3, 4)
    for i, r in enumerate(rois):
        ref = crop_resize_ref(x[0, int(r[0])], r[None, 1:], (3, 4), "ROI_ALIGN_MODE", "CORNERS_HEIGHT_FIRST", False,
                              1.0)
        close(y[i, 0], ref[0])


# ---------------------------------------------------------------------------------------------
# Rearrangement


def reorganize_layer(m: Model, mode: str, block: int) -> None:
    p = m.layer("reorganizeData", ["x"], ["y"])
    p.mode = m.nn.ReorganizeDataLayerParams.ReorganizationType.Value(mode)
    p.blockSize = block


SPEC_D2S = [[[1, 5, 2, 6], [9, 13, 10, 14]], [[3, 7, 4, 8], [11, 15, 12, 16]]]
SPEC_SHUFFLE = [[[1, 3, 2, 4], [5, 7, 6, 8]], [[9, 11, 10, 12], [13, 15, 14, 16]]]


@pytest.mark.parametrize("nd", [False, True], ids=["rank5", "nd_rank3"])
@pytest.mark.parametrize("mode", ["DEPTH_TO_SPACE", "PIXEL_SHUFFLE", "SPACE_TO_DEPTH"])
def test_reorganize_example_from_the_spec(mode, nd, tmp_path):
    """The spec's [C=8, H=1, W=2] example (and SPACE_TO_DEPTH as DEPTH_TO_SPACE with in and out swapped)."""
    block_in = np.arange(1, 17, dtype=np.float32).reshape(8, 1, 2)
    x = np.array(SPEC_D2S, np.float32) if mode == "SPACE_TO_DEPTH" else block_in
    m = Model({"x": x.shape}, ["y"], nd=nd, spec_version=5)
    reorganize_layer(m, mode, 2)
    expected = {"DEPTH_TO_SPACE": SPEC_D2S, "PIXEL_SHUFFLE": SPEC_SHUFFLE, "SPACE_TO_DEPTH": block_in}[mode]
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], np.array(expected))


@pytest.mark.parametrize("mode", [
    pytest.param("DEPTH_TO_SPACE", marks=oracle_checks("reorganizeData.mode=DEPTH_TO_SPACE")),
    pytest.param("SPACE_TO_DEPTH", marks=oracle_checks("reorganizeData.mode=SPACE_TO_DEPTH")),
])
def test_reorganize_matches_onnxruntime(mode, tmp_path):
    """Block 3, two channels out (so the channel order shows) and a 2 x 3 / 6 x 9 image."""
    shape = (18, 2, 3) if mode == "DEPTH_TO_SPACE" else (2, 6, 9)
    m = Model({"x": shape}, ["y"])
    reorganize_layer(m, mode, 3)
    x = rand(*shape)
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], onnx_oracle(m.spec, {"x": x})["y"])


@oracle_checks("reorganizeData.mode=PIXEL_SHUFFLE")
def test_reorganize_pixel_shuffle_nd_matches_torch(tmp_path):
    m = Model({"x": (2, 3, 18, 2, 3)}, ["y"], nd=True, spec_version=5)
    reorganize_layer(m, "PIXEL_SHUFFLE", 3)
    x = rand(2, 3, 18, 2, 3)
    ref = F.pixel_shuffle(torch.from_numpy(x.reshape(6, 18, 2, 3)), 3).numpy().reshape(2, 3, 2, 6, 9)
    compare_with_oracle(convert_run(m.spec, {"x": x}, tmp_path)["y"], ref, oracle="torch", rtol=1e-5, atol=1e-5,
                        atol_scaled=True)


@pytest.mark.parametrize("axis, size, step", [(0, 3, 2), (1, 4, 1), (-1, 2, 3)])
def test_sliding_windows(axis, size, step, tmp_path):
    m = Model({"x": (7, 6, 8)}, ["y"], nd=True)
    p = m.layer("slidingWindows", ["x"], ["y"])
    p.axis, p.windowSize, p.step = axis, size, step
    x = rand(7, 6, 8)
    ax = axis % 3
    count = (x.shape[ax] - size) // step + 1
    windows = [np.take(x, range(i * step, i * step + size), axis=ax) for i in range(count)]
    close(convert_run(m.spec, {"x": x}, tmp_path)["y"], np.stack(windows, axis=ax))


def test_rank5_network_with_flexible_image_size(tmp_path):
    """A legacy network on a flexible [C, H, W] input: convolution, pooling, upsample, crop and padding
    keep working on [1, 1, C, H, W] whose H and W are only known at run time."""
    m = Model({"x": (3, 8, 8)}, ["y"])
    ranges = m.spec.description.input[0].type.multiArrayType.shapeRange
    for lo, hi in ((3, 3), (6, 20), (6, 20)):
        r = ranges.sizeRanges.add()
        r.lowerBound, r.upperBound = lo, hi
    w = rand(4, 3, 3, 3)
    conv_layer(m, w, None, strides=(2, 2), same="BOTTOM_RIGHT_HEAVY")
    m.builder.nn_spec.layers[0].output[0] = "a"
    p = m.layer("pooling", ["a"], ["b"], name="pool")
    p.type, p.globalPooling = 0, False
    p.kernelSize.extend([2, 2])
    p.includeLastPixel.paddingAmounts.extend([1, 1])
    p = m.layer("upsample", ["b"], ["c"], name="up")
    p.scalingFactor.extend([2, 3])
    border(m.layer("crop", ["c"], ["d"], name="crop").cropAmounts, [(1, 0), (0, 2)])
    pad_layer(m, "replication", [(0, 2), (1, 1)], inputs=("d",))
    for h, wd in ((7, 9), (12, 6)):
        x = rand(3, h, wd)
        a = conv_ref(x[None], w, None, (2, 2), (1, 1), 1, [same_pads(n, 3, 2, False) for n in (h, wd)])
        out = [include_last_pixel_out(n, 2, 1, 1, True) for n in a.shape[2:]]
        b = pool_ref(a, "MAX", (2, 2), (1, 1), [(1, 1), (1, 1)], exclude=False, out=out)
        c = b.repeat(2, axis=2).repeat(3, axis=3)[:, :, 1:, :-2]
        close(convert_run(m.spec, {"x": x}, tmp_path)["y"], np.pad(c, [(0, 0), (0, 0), (0, 2), (1, 1)], mode="edge"))


# ---------------------------------------------------------------------------------------------
# Malformed layers


def _malformed_models() -> dict[str, Model]:
    models = {}
    m = Model({"x": (3, 6, 6)}, ["y"])
    p = m.layer("convolution", ["x"], ["y"], name="bad_conv")
    p.outputChannels, p.kernelChannels = 4, 3
    p.kernelSize.extend([3, 3])
    weights(p.weights, np.zeros(4 * 3 * 3 * 2))
    models["weights_wrong_size"] = m
    m = Model({"x": (3, 6, 6)}, ["y"])
    p = m.layer("convolution", ["x"], ["y"], name="bad_conv")
    p.outputChannels, p.kernelChannels = 4, 2
    p.kernelSize.extend([3, 3])
    weights(p.weights, np.zeros(4 * 2 * 3 * 3))
    models["kernel_channels"] = m
    m = Model({"x": (1, 3, 6, 6), "w": (4, 3, 3, 3)}, ["y"], nd=True)
    conv_layer(m, rand(3, 4, 3, 3), None, deconv=True, inputs=("x", "w"))
    m.builder.nn_spec.layers[0].name = "bad_conv"
    models["deconv_weight_input"] = m
    m = Model({"x": (3, 6, 6)}, ["y"])
    p = m.layer("pooling", ["x"], ["y"], name="bad_conv")
    border(p.valid.paddingAmounts, [(1, 1), (1, 1), (1, 1)])
    models["three_border_amounts"] = m
    m = Model({"x": (3, 8, 8), "r": (3, 6, 6)}, ["y"])
    m.layer("crop", ["x", "r"], ["y"], name="bad_conv").offset.extend([3, 0])
    models["crop_does_not_fit"] = m
    m = Model({"x": (3, 8, 8)}, ["y"])
    p = m.layer("upsample", ["x"], ["y"], name="bad_conv")
    p.scalingFactor.extend([2, 2])
    p.fractionalScalingFactor.extend([1.5, 1.5])
    models["both_scaling_factors"] = m
    m = Model({"x": (1, 3, 3, 4, 4)}, ["y"], nd=True)
    conv3d_layer(m, rand(2, 3, 2, 2, 2), None, 3, 2)
    m.builder.nn_spec.layers[0].name = "bad_conv"
    m.builder.nn_spec.layers[0].convolution3d.strideHeight = 0
    models["conv3d_zero_stride"] = m
    return models


@pytest.mark.parametrize("case", list(_malformed_models()))
def test_malformed_layers_name_the_layer(case, tmp_path):
    with pytest.raises(FormatError) as info:
        load_spec(_malformed_models()[case].spec, tmp_path)
    assert "bad_conv" in str(info.value)


def test_window_that_does_not_fit_names_the_layer(tmp_path):
    m = Model({"x": (3, 2, 2)}, ["y"])
    p = m.layer("pooling", ["x"], ["y"], name="too_big")
    p.kernelSize.extend([3, 3])
    p.valid.SetInParent()
    with pytest.raises(ConverterError, match="too_big"):
        load_spec(m.spec, tmp_path)


@pytest.mark.parametrize("nbits", [16, 8], ids=["fp16", "linear8"])
def test_convolution_and_deconvolution_with_compressed_weights(nbits, tmp_path):
    """fp16 and 8-bit linear (per output channel: axis 1 of a deconvolution's [C_in, C_out / groups, ..])
    weights, quantized by coremltools; onnxmltools reads them dequantized by coremltools (fp16 values
    are widened here: coremltools' dequantizer mistakes them for a lookup table)."""
    from coremltools.models.neural_network import quantization_utils as qu

    m = Model({"x": (4, 6, 7)}, ["y"])
    p = m.layer("convolution", ["x"], ["a"], name="conv")
    p.outputChannels, p.kernelChannels, p.nGroups = 6, 2, 2
    p.kernelSize.extend([3, 3])
    p.same.asymmetryMode = 0
    weights(p.weights, rand(6, 2, 3, 3))
    p.hasBias = True
    weights(p.bias, rand(6))
    p = m.layer("convolution", ["a"], ["y"], name="deconv")
    p.outputChannels, p.kernelChannels, p.nGroups, p.isDeconvolution = 4, 6, 2, True
    p.kernelSize.extend([2, 3])
    p.stride.extend([2, 1])
    p.valid.SetInParent()
    weights(p.weights, rand(6, 2, 2, 3))
    selector = qu.AdvancedQuantizedLayerSelector(minimum_conv_kernel_channels=1, minimum_conv_weight_count=1)
    qu._quantize_nn_spec(m.spec.neuralNetwork, nbits, "_linear_quantization", selector=selector)
    encoding = m.spec.neuralNetwork.layers[1].convolution.weights
    assert (len(encoding.float16Value) > 0) if nbits == 16 else encoding.HasField("quantization")
    x = rand(4, 6, 7)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    if nbits == 16:
        for layer in m.spec.neuralNetwork.layers:
            for wp in (layer.convolution.weights, layer.convolution.bias):
                if len(wp.float16Value):
                    wp.floatValue.extend(np.frombuffer(wp.float16Value, np.float16).astype(np.float32).tolist())
                    wp.ClearField("float16Value")
    close(y, onnx_oracle(m.spec, {"x": x})["y"], atol=1e-4)
