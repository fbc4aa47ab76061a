"""Issue 7 for the spatial layers (layers/spatial.py): every (kind, subtype) pair compared against an
oracle we did not write, with parameters that are non-default and mutually distinct.

Oracles: onnxruntime on one-node ONNX graphs built here (Conv, ConvTranspose, MaxPool, AveragePool,
LpPool, GlobalMaxPool, GlobalAveragePool, Resize, RoiAlign), with the Core ML parameters mapped to
the ONNX ones from the spec's text (each mapping says which sentence it follows), and torch
(``F.interpolate``, ``Tensor.unfold``). Every kernel, stride, dilation, per-side padding, target
size and scale differs from its siblings (kh != kw, sh != sw, front/back/top/bottom/left/right
all different, ...) in at least one case, so a lowering that reads one where it should read
another fails here (tools/mutate_nn_lowerings.py checks that). Where two cases are needed to
separate every pair of a layer's integer fields, the comment at the cases says so.

Spec texts quoted below: NeuralNetwork.proto (the annotated spec in /work/shared/spec, and for the
enum comments it strips, apple/coremltools mlmodel/format/NeuralNetwork.proto).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.nn_models.coverage import oracle_checks
from tests.oracles.onnx_oracle import run_onnx_node

from .common import compare_with_oracle, convert_run
from .spatial_util import Model, border, weights

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """The same data for a test however tests are ordered or distributed."""
    global RNG
    RNG = np.random.default_rng(11)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# Results in float32 against float32 oracles: fp32 rounding, relative to the largest magnitude.
_close = functools.partial(compare_with_oracle, rtol=1e-5, atol=1e-5, atol_scaled=True)


def by_onnxruntime(got: np.ndarray, want: np.ndarray, **kw: Any) -> None:
    _close(got, want, oracle="onnxruntime", **kw)


def by_torch(got: np.ndarray, want: torch.Tensor, **kw: Any) -> None:
    _close(got, want.numpy(), oracle="torch", **kw)


def onnx_pads(pads: list[tuple[int, int]]) -> list[int]:
    """ONNX ``pads``: every axis's begin amount, then every axis's end amount."""
    return [b for b, _ in pads] + [a for _, a in pads]


# ---------------------------------------------------------------------------------------------
# 2-D convolution and pooling with TOP_LEFT_HEAVY 'same' padding; L2 pooling
#
# SamePadding: "H_out = int_division_round_up(H_in, stride[0]) [...] If the mode is TOP_LEFT_HEAVY:
# bottomPaddingAmount = floor(totalPaddingHeight / 2), topPaddingAmount = totalPaddingHeight -
# bottomPaddingAmount" (the larger half first). ONNX auto_pad: "SAME_LOWER [...] the extra padding
# is added at the beginning": the same rule, computed by onnxruntime.


def conv2d_layer(m: Model, w: np.ndarray, b: np.ndarray | None, *, groups: int, strides, dilations=(1, 1),
                 same: str | None = None, valid=None, deconv: bool = False) -> None:
    p = m.layer("convolution", ["x"], ["y"])
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
        border(p.valid.paddingAmounts, valid)
    weights(p.weights, w)
    if b is not None:
        p.hasBias = True
        weights(p.bias, b)


def tlh_pads(sizes, kernel, strides) -> list[tuple[int, int]]:
    """The spec's SamePadding amounts, TOP_LEFT_HEAVY: total = max(0, (ceil(D / s) - 1) * s + K - D),
    the larger half before."""
    pads = []
    for n, k, s in zip(sizes, kernel, strides):
        total = max(0, (-(-n // s) - 1) * s + k - n)
        pads.append((total - total // 2, total // 2))
    return pads


@oracle_checks("convolution.same.asymmetryMode=TOP_LEFT_HEAVY")
def test_convolution_top_left_heavy_matches_onnxruntime(tmp_path: Path) -> None:
    """Grouped, kernel [4, 3], stride [2, 3] on 9 x 11: totals 3 and 1, so top 2 / bottom 1 and
    left 1 / right 0 (BOTTOM_RIGHT_HEAVY would give 1 / 2 and 0 / 1)."""
    w, b = rand(6, 2, 4, 3), rand(6)
    m = Model({"x": (2, 4, 9, 11)}, ["y"], nd=True)
    conv2d_layer(m, w, b, groups=2, strides=(2, 3), same="TOP_LEFT_HEAVY")
    x = rand(2, 4, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    want = run_onnx_node("Conv", {"x": x}, dict(auto_pad="SAME_LOWER", kernel_shape=[4, 3], strides=[2, 3], group=2),
                         initializers={"w": w, "b": b})[0]
    assert y.shape == (2, 6, 5, 4)
    by_onnxruntime(y, want)


@oracle_checks("convolution.same.asymmetryMode=TOP_LEFT_HEAVY")
def test_convolution_top_left_heavy_dilated_matches_onnxruntime(tmp_path: Path) -> None:
    """Dilation [3, 2] makes the kernel [2, 3] span [4, 5] (ConvolutionLayerParams: "KernelSize[0] <--
    (kernelSize[0]-1) * dilationFactor[0] + 1"), stride [2, 3]: totals 3 and 3 -> (2, 1), (2, 1).
    onnxruntime refuses dilation with auto_pad, so the spec's amounts are given as explicit pads."""
    w, b = rand(6, 4, 2, 3), rand(6)
    m = Model({"x": (1, 4, 9, 11)}, ["y"], nd=True)
    conv2d_layer(m, w, b, groups=1, strides=(2, 3), dilations=(3, 2), same="TOP_LEFT_HEAVY")
    x = rand(1, 4, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    pads = tlh_pads((9, 11), (4, 5), (2, 3))
    assert pads == [(2, 1), (2, 1)]
    want = run_onnx_node("Conv", {"x": x}, dict(pads=onnx_pads(pads), kernel_shape=[2, 3], strides=[2, 3],
                                                dilations=[3, 2]), initializers={"w": w, "b": b})[0]
    by_onnxruntime(y, want)


@oracle_checks("convolution.same.asymmetryMode=TOP_LEFT_HEAVY")
def test_deconvolution_top_left_heavy_matches_onnxruntime(tmp_path: Path) -> None:
    """SamePadding "With Deconvolution: H_out = H_in * stride[0]": the full result (D - 1) * s + K is cut
    by K - s, the larger half first for TOP_LEFT_HEAVY; ONNX ConvTranspose, auto_pad SAME_LOWER: output
    input * strides, "pads[start_i] = total_padding[i] - (total_padding[i]/2)". Kernel [4, 3], stride
    [3, 2]: one unit cut at the top and one at the left (BOTTOM_RIGHT_HEAVY: at the bottom and right)."""
    w, b = rand(4, 3, 4, 3), rand(6)  # [C_in, C_out / groups, kH, kW]
    m = Model({"x": (1, 4, 5, 6)}, ["y"], nd=True)
    conv2d_layer(m, w, b, groups=2, strides=(3, 2), same="TOP_LEFT_HEAVY", deconv=True)
    x = rand(1, 4, 5, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    want = run_onnx_node("ConvTranspose", {"x": x}, dict(auto_pad="SAME_LOWER", kernel_shape=[4, 3], strides=[3, 2],
                                                         group=2), initializers={"w": w, "b": b})[0]
    assert y.shape == (1, 6, 15, 12)
    by_onnxruntime(y, want)


def pool2d_layer(m: Model, kind: str, kernel, strides, *, same: str | None = None, valid=None,
                 exclude: bool = False) -> None:
    p = m.layer("pooling", ["x"], ["y"])
    p.type = m.nn.PoolingLayerParams.PoolingType.Value(kind)
    p.kernelSize.extend(kernel)
    p.stride.extend(strides)
    if same is not None:
        p.same.asymmetryMode = m.nn.SamePadding.SamePaddingMode.Value(same)
    else:
        border(p.valid.paddingAmounts, valid)
    p.avgPoolExcludePadding = exclude


def onnx_pool(kind: str, x: np.ndarray, exclude: bool = False, **attrs: Any) -> np.ndarray:
    """MAX -> MaxPool; AVERAGE -> AveragePool, count_include_pad unless avgPoolExcludePadding ("If true,
    padded values are excluded from the count (denominator) when computing average pooling"); L2 ->
    LpPool with p = 2 (the padded zeros add nothing to the sum of squares)."""
    if kind == "MAX":
        return run_onnx_node("MaxPool", {"x": x}, attrs)[0]
    if kind == "AVERAGE":
        return run_onnx_node("AveragePool", {"x": x}, {**attrs, "count_include_pad": int(not exclude)})[0]
    return run_onnx_node("LpPool", {"x": x}, {**attrs, "p": 2})[0]


POOL_TYPES = [("MAX", False), ("AVERAGE", False), ("AVERAGE", True), ("L2", False)]


@oracle_checks("pooling.same.asymmetryMode=TOP_LEFT_HEAVY")
@pytest.mark.parametrize("kind, exclude", POOL_TYPES, ids=["max", "average", "average_exclude_pad", "l2"])
def test_pooling_top_left_heavy_matches_onnxruntime(kind: str, exclude: bool, tmp_path: Path) -> None:
    """Kernel [4, 3], stride [2, 3] on 9 x 11: pads top 2 / bottom 1, left 1 / right 0."""
    m = Model({"x": (2, 3, 9, 11)}, ["y"], nd=True)
    pool2d_layer(m, kind, (4, 3), (2, 3), same="TOP_LEFT_HEAVY", exclude=exclude)
    x = rand(2, 3, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    assert y.shape == (2, 3, 5, 4)
    by_onnxruntime(y, onnx_pool(kind, x, exclude, auto_pad="SAME_LOWER", kernel_shape=[4, 3], strides=[2, 3]))


L2_CASES = {
    # ValidPadding amounts top 1, bottom 2, left 0, right 3 (each below the kernel, as onnxruntime needs)
    "valid_amounts": dict(kernel=(3, 4), strides=(2, 1), valid=[(1, 2), (0, 3)]),
    "same_bottom_right": dict(kernel=(3, 4), strides=(3, 2), same="BOTTOM_RIGHT_HEAVY"),
}


@oracle_checks("pooling.type=L2")
@pytest.mark.parametrize("case", L2_CASES)
def test_l2_pooling_matches_onnxruntime(case: str, tmp_path: Path) -> None:
    """PoolingType L2 (the square root of the window's sum of squares) = ONNX LpPool, p = 2; the 'same'
    case uses ONNX's SAME_UPPER ("the extra padding is added at the end"), which is BOTTOM_RIGHT_HEAVY."""
    c = L2_CASES[case]
    m = Model({"x": (2, 3, 9, 11)}, ["y"], nd=True)
    pool2d_layer(m, "L2", c["kernel"], c["strides"], same=c.get("same"), valid=c.get("valid"))
    x = rand(2, 3, 9, 11)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    pads = {"auto_pad": "SAME_UPPER"} if "same" in c else {"pads": onnx_pads(c["valid"])}
    by_onnxruntime(y, onnx_pool("L2", x, kernel_shape=list(c["kernel"]), strides=list(c["strides"]), **pads))


# ---------------------------------------------------------------------------------------------
# 3-D convolution, 3-D pooling, global 3-D pooling
#
# Convolution3DLayerParams.PaddingType: "CUSTOM padding will add the custom padding values specified
# below to their respective dimensions, e.g., `customPaddingFront` number of zeros will be added to
# one side of the input's depth dimension and `customPaddingBack` [...] to the other side [...]
# VALID padding adds no padding to any dimension [...] SAME padding adds enough padding to each
# dimension such that the output of the convolution has size Ceiling(inputShape / stride). Padding
# is added evenly to both sides of each dimension unless the total padding to add is odd, in which
# case it is added to the back/bottom/right side" -- ONNX pads [front, top, left, back, bottom,
# right], or auto_pad SAME_UPPER. Pooling3DLayerParams says the same of its padding fields, and of
# countExcludePadding: "If true, exclude zeros from padding in Average pooling".


def pads3d(p: Any) -> list[tuple[int, int]]:
    return [(p.customPaddingFront, p.customPaddingBack), (p.customPaddingTop, p.customPaddingBottom),
            (p.customPaddingLeft, p.customPaddingRight)]


def set_pads3d(p: Any, pads: list[tuple[int, int]]) -> None:
    ((p.customPaddingFront, p.customPaddingBack), (p.customPaddingTop, p.customPaddingBottom),
     (p.customPaddingLeft, p.customPaddingRight)) = pads


# The 18 integer fields of Convolution3DLayerParams: within "custom" every kernel, stride, dilation
# and padding triple/sextet is distinct; the pairs "custom" leaves equal (e.g. kernelWidth and
# inputChannels, both 4) differ in "valid" or "same" (checked by test_conv3d_cases_separate_fields).
CONV3D_CASES = {
    "custom": dict(pad="CUSTOM", c_in=4, c_out=6, groups=2, kernel=(3, 2, 4), strides=(2, 3, 1), dilations=(1, 2, 3),
                   custom=[(1, 0), (3, 5), (4, 2)], size=(5, 6, 7)),
    "valid": dict(pad="VALID", c_in=6, c_out=3, groups=3, kernel=(2, 1, 3), strides=(3, 2, 1), dilations=(2, 1, 3),
                  size=(6, 5, 9)),
    # totals 1, 3 and 1: the odd unit at the back, bottom and right
    "same": dict(pad="SAME", c_in=2, c_out=4, groups=1, kernel=(2, 4, 3), strides=(3, 1, 2), dilations=(1, 1, 1),
                 size=(4, 5, 6)),
    # dilated 'same' (onnxruntime refuses dilation with auto_pad: the spec's amounts as explicit pads)
    "same_dilated": dict(pad="SAME", c_in=4, c_out=2, groups=2, kernel=(2, 3, 2), strides=(1, 2, 3),
                         dilations=(3, 1, 2), size=(5, 7, 8)),
}

_CONV3D_FIELDS = ("outputChannels", "inputChannels", "nGroups", "kernelDepth", "kernelHeight", "kernelWidth",
                  "strideDepth", "strideHeight", "strideWidth", "dilationDepth", "dilationHeight", "dilationWidth",
                  "customPaddingFront", "customPaddingBack", "customPaddingTop", "customPaddingBottom",
                  "customPaddingLeft", "customPaddingRight")


def _conv3d_values(c: dict) -> tuple[int, ...]:
    pads = [v for pair in c.get("custom", [(0, 0)] * 3) for v in pair]
    return (c["c_out"], c["c_in"], c["groups"], *c["kernel"], *c["strides"], *c["dilations"], *pads)


def test_conv3d_cases_separate_fields() -> None:
    """Every two integer fields of Convolution3DLayerParams differ in some case."""
    values = [_conv3d_values(c) for c in CONV3D_CASES.values()]
    same = [(a, b) for i, a in enumerate(_CONV3D_FIELDS) for j, b in enumerate(_CONV3D_FIELDS)
            if i < j and all(v[i] == v[j] for v in values)]
    assert same == []


def same_upper_pads(sizes, kernel, strides) -> list[tuple[int, int]]:
    """Convolution3D SAME: output ceil(D / s), total max(0, (out - 1) * s + K - D), the odd unit after."""
    pads = []
    for n, k, s in zip(sizes, kernel, strides):
        total = max(0, (-(-n // s) - 1) * s + k - n)
        pads.append((total // 2, total - total // 2))
    return pads


@oracle_checks("convolution3d.paddingType=CUSTOM", "convolution3d.paddingType=VALID",
               "convolution3d.paddingType=SAME")
def test_convolution3d_matches_onnxruntime(tmp_path: Path) -> None:
    """One model holding every case of CONV3D_CASES, each on its own input."""
    feeds, wants = {}, {}
    names = list(CONV3D_CASES)
    m = Model({f"x_{n}": (2, CONV3D_CASES[n]["c_in"], *CONV3D_CASES[n]["size"]) for n in names},
              [f"y_{n}" for n in names], nd=True, spec_version=5)
    for n in names:
        c = CONV3D_CASES[n]
        w, b = rand(c["c_out"], c["c_in"] // c["groups"], *c["kernel"]), rand(c["c_out"])
        p = m.layer("convolution3d", [f"x_{n}"], [f"y_{n}"], name=n)
        p.inputChannels, p.outputChannels, p.nGroups = c["c_in"], c["c_out"], c["groups"]
        p.kernelDepth, p.kernelHeight, p.kernelWidth = c["kernel"]
        p.strideDepth, p.strideHeight, p.strideWidth = c["strides"]
        p.dilationDepth, p.dilationHeight, p.dilationWidth = c["dilations"]
        p.paddingType = m.nn.Convolution3DLayerParams.PaddingType.Value(c["pad"])
        if "custom" in c:
            set_pads3d(p, c["custom"])
        weights(p.weights, w)
        p.hasBias = True
        weights(p.bias, b)
        x = feeds[f"x_{n}"] = rand(2, c["c_in"], *c["size"])
        attrs: dict[str, Any] = dict(kernel_shape=list(c["kernel"]), strides=list(c["strides"]),
                                     dilations=list(c["dilations"]), group=c["groups"])
        if c["pad"] == "SAME" and c["dilations"] == (1, 1, 1):
            attrs["auto_pad"] = "SAME_UPPER"
        elif c["pad"] == "SAME":
            eff = [(k - 1) * d + 1 for k, d in zip(c["kernel"], c["dilations"])]
            attrs["pads"] = onnx_pads(same_upper_pads(c["size"], eff, c["strides"]))
        else:
            attrs["pads"] = onnx_pads(pads3d(p))
        wants[n] = run_onnx_node("Conv", {"x": x}, attrs, initializers={"w": w, "b": b})[0]
    outs = convert_run(m.spec, feeds, tmp_path)
    for n in names:
        if CONV3D_CASES[n]["pad"] == "SAME":
            assert outs[f"y_{n}"].shape[2:] == tuple(-(-d // s) for d, s in zip(CONV3D_CASES[n]["size"],
                                                                                 CONV3D_CASES[n]["strides"]))
        by_onnxruntime(outs[f"y_{n}"], wants[n], err_msg=n)


# The 12 integer fields of Pooling3DLayerParams: "custom" has distinct kernels, strides and six
# distinct pads (each below its kernel, as onnxruntime requires); the pairs it leaves equal
# (kernelDepth and strideWidth, both 2, ...) differ in "valid" or "same".
POOL3D_CASES = {
    "custom": dict(pad="CUSTOM", kernel=(2, 4, 6), strides=(3, 1, 2), custom=[(1, 0), (3, 2), (5, 4)]),
    "valid": dict(pad="VALID", kernel=(3, 2, 4), strides=(1, 3, 2)),
    # totals 3, 2 and 1 on 5 x 6 x 7: the odd units at the back and right
    "same": dict(pad="SAME", kernel=(4, 3, 2), strides=(2, 1, 3)),
}
POOL3D_SIZE = (5, 6, 7)
_POOL3D_FIELDS = ("kernelDepth", "kernelHeight", "kernelWidth", "strideDepth", "strideHeight", "strideWidth",
                  "customPaddingFront", "customPaddingBack", "customPaddingTop", "customPaddingBottom",
                  "customPaddingLeft", "customPaddingRight")


def test_pool3d_cases_separate_fields() -> None:
    """Every two integer fields of Pooling3DLayerParams differ in some case."""
    values = [(*c["kernel"], *c["strides"], *[v for pair in c.get("custom", [(0, 0)] * 3) for v in pair])
              for c in POOL3D_CASES.values()]
    same = [(a, b) for i, a in enumerate(_POOL3D_FIELDS) for j, b in enumerate(_POOL3D_FIELDS)
            if i < j and all(v[i] == v[j] for v in values)]
    assert same == []


@oracle_checks("pooling3d.paddingType=CUSTOM", "pooling3d.paddingType=VALID", "pooling3d.paddingType=SAME")
@pytest.mark.parametrize("kind, exclude", [
    pytest.param("MAX", False, id="max", marks=oracle_checks("pooling3d.type=MAX")),
    pytest.param("AVERAGE", False, id="average", marks=oracle_checks("pooling3d.type=AVERAGE")),
    pytest.param("AVERAGE", True, id="average_exclude_pad", marks=oracle_checks("pooling3d.type=AVERAGE")),
])
def test_pooling3d_matches_onnxruntime(kind: str, exclude: bool, tmp_path: Path) -> None:
    """One model holding every case of POOL3D_CASES, on one [2, 3, 5, 6, 7] input."""
    names = list(POOL3D_CASES)
    m = Model({"x": (2, 3, *POOL3D_SIZE)}, [f"y_{n}" for n in names], nd=True, spec_version=5)
    x = rand(2, 3, *POOL3D_SIZE)
    wants = {}
    for n in names:
        c = POOL3D_CASES[n]
        p = m.layer("pooling3d", ["x"], [f"y_{n}"], name=n)
        p.type = m.nn.Pooling3DLayerParams.PoolingType3D.Value(kind)
        p.kernelDepth, p.kernelHeight, p.kernelWidth = c["kernel"]
        p.strideDepth, p.strideHeight, p.strideWidth = c["strides"]
        p.paddingType = m.nn.Pooling3DLayerParams.Pooling3DPaddingType.Value(c["pad"])
        if "custom" in c:
            set_pads3d(p, c["custom"])
        p.countExcludePadding = exclude
        pads = {"auto_pad": "SAME_UPPER"} if c["pad"] == "SAME" else {"pads": onnx_pads(pads3d(p))}
        wants[n] = onnx_pool(kind, x, exclude, kernel_shape=list(c["kernel"]), strides=list(c["strides"]), **pads)
    outs = convert_run(m.spec, {"x": x}, tmp_path)
    for n in names:
        by_onnxruntime(outs[f"y_{n}"], wants[n], err_msg=n)


@pytest.mark.parametrize("kind", [
    pytest.param("MAX", marks=oracle_checks("globalPooling3d.type=MAX")),
    pytest.param("AVERAGE", marks=oracle_checks("globalPooling3d.type=AVERAGE")),
])
def test_global_pooling3d_matches_onnxruntime(kind: str, tmp_path: Path) -> None:
    """MAX / AVERAGE over depth, height and width -> ONNX GlobalMaxPool / GlobalAveragePool."""
    m = Model({"x": (2, 3, 4, 5, 6)}, ["y"], nd=True, spec_version=5)
    m.layer("globalPooling3d", ["x"], ["y"]).type = m.nn.GlobalPooling3DLayerParams.GlobalPoolingType3D.Value(kind)
    x = rand(2, 3, 4, 5, 6)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    op = {"MAX": "GlobalMaxPool", "AVERAGE": "GlobalAveragePool"}[kind]
    by_onnxruntime(y, run_onnx_node(op, {"x": x})[0])


# ---------------------------------------------------------------------------------------------
# Bilinear upsampling
#
# LinearUpsampleMode: "ALIGN_CORNERS_TRUE: spacing = (Xin-1) / (Xout-1), grid_point[i] = min(Xin-1,
# max(0, i * spacing)) [...] ALIGN_CORNERS_FALSE: spacing = Xin / Xout, grid_point[i] = min(Xin-1,
# max(0, i * spacing + 0.5 * spacing - 0.5))" -- torch's bilinear interpolate with align_corners
# True / False; with recompute_scale_factor its spacing is Xin / Xout of the floored output size.


@pytest.mark.parametrize("factors", [(2, 3), (1.5, 2.25), (0.6, 1.75)], ids=["integer", "fractional", "shrink"])
@pytest.mark.parametrize("linear", [
    pytest.param("ALIGN_CORNERS_TRUE", marks=oracle_checks("upsample.linearUpsampleMode=ALIGN_CORNERS_TRUE")),
    pytest.param("ALIGN_CORNERS_FALSE", marks=oracle_checks("upsample.linearUpsampleMode=ALIGN_CORNERS_FALSE")),
])
def test_upsample_bilinear_matches_torch(linear: str, factors: tuple[float, float], tmp_path: Path) -> None:
    """Integer factors [2, 3] (scalingFactor) and fractional ones (fractionalScalingFactor), one shrinking."""
    fractional = any(f != int(f) for f in factors)
    m = Model({"x": (2, 3, 5, 7)}, ["y"], nd=True, spec_version=5)
    p = m.layer("upsample", ["x"], ["y"])
    (p.fractionalScalingFactor if fractional else p.scalingFactor).extend(factors)
    p.mode = m.nn.UpsampleLayerParams.BILINEAR
    p.linearUpsampleMode = m.nn.UpsampleLayerParams.LinearUpsampleMode.Value(linear)
    x = rand(2, 3, 5, 7)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    assert y.shape[2:] == tuple(int(np.floor(n * np.float32(f))) for n, f in zip((5, 7), factors))
    by_torch(y, torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=factors, mode="bilinear",
                                                align_corners=linear == "ALIGN_CORNERS_TRUE",
                                                recompute_scale_factor=True))


# ---------------------------------------------------------------------------------------------
# resizeBilinear and cropResize: SamplingMode grids
#
# SamplingMode.Method, on an interval [0, X-1] sampled at N points:
#   STRICT_ALIGN_ENDPOINTS_MODE: "start = 0, end = X-1, grid points = numpy.linspace(start, end)"
#   ALIGN_ENDPOINTS_MODE: "if N == 1: start = end = (X-1)/2; otherwise, start = 0, end = X-1"
#   UPSAMPLE_MODE: "start = 0, end = X - X/N, grid points = min(X-1, numpy.linspace(start, end))"
#   ROI_ALIGN_MODE: "spacing = max(1, X-1)/N, start = 0.5 * spacing, end = start + (N-1) * spacing,
#                    grid points = min(X-1, numpy.linspace(start, end))"
# ONNX Resize (linear), per axis x_original(i):
#   align_corners: i * (X-1) / (N-1), and onnxruntime takes 0 for N = 1 (numpy.linspace's one point)
#     -> STRICT_ALIGN_ENDPOINTS, and ALIGN_ENDPOINTS for N > 1;
#   half_pixel: (i + 0.5) * X / N - 0.5, which is (X-1)/2 for N = 1 -> ALIGN_ENDPOINTS for N = 1;
#   asymmetric: i * X / N, clamped to the last pixel -> UPSAMPLE_MODE;
#   tf_crop_and_resize with roi [start, end] (fractions of X-1): linspace(start, end) * (X-1), the
#     midpoint for N = 1 -> a box's STRICT / ALIGN_ENDPOINTS grid (STRICT N = 1: start = end).
# ONNX RoiAlign (coordinate_transformation_mode output_half_pixel, sampling_ratio 1, avg): bin
# max(box extent, 1) / N, one sample at the middle of each bin -> ROI_ALIGN_MODE over the box.
# Bilinear interpolation is separable: two 1-D Resize nodes, one per axis, give each axis its mode.

SAMPLING = ["STRICT_ALIGN_ENDPOINTS_MODE", "ALIGN_ENDPOINTS_MODE", "UPSAMPLE_MODE", "ROI_ALIGN_MODE"]
_EMPTY = np.zeros(0, np.float32)


def onnx_resize(x: np.ndarray, sizes, modes: list[str]) -> np.ndarray:
    """ONNX Resize (linear) of the last two axes of [N, C, H, W] to ``sizes``, one node per axis."""
    for axis, (n, mode) in enumerate(zip(sizes, modes)):
        target = list(x.shape)
        target[2 + axis] = n
        x = run_onnx_node("Resize", {"x": x}, dict(mode="linear", coordinate_transformation_mode=mode),
                          initializers={"roi": _EMPTY, "scales": _EMPTY, "sizes": np.array(target, np.int64)},
                          input_order=["x", "roi", "scales", "sizes"])[0]
    return x


def onnx_roi_align(x: np.ndarray, boxes: np.ndarray, batch: np.ndarray, size, scale: float = 1.0) -> np.ndarray:
    """ONNX RoiAlign of ``boxes`` [K, 4] (x1, y1, x2, y2) on images ``batch`` [K]: [K, C, h, w]."""
    return run_onnx_node("RoiAlign", {"x": x, "rois": boxes.astype(np.float32), "batch": batch.astype(np.int64)},
                         dict(mode="avg", output_height=size[0], output_width=size[1], sampling_ratio=1,
                              spatial_scale=float(scale), coordinate_transformation_mode="output_half_pixel"))[0]


def resize_oracle(method: str, x: np.ndarray, target) -> np.ndarray:
    """resizeBilinear of [N, C, H, W] to ``target`` by onnxruntime, with the mapping above."""
    if method == "ROI_ALIGN_MODE":
        h, w = x.shape[-2:]
        whole = np.tile([0, 0, w - 1, h - 1], (x.shape[0], 1))
        return onnx_roi_align(x, whole, np.arange(x.shape[0]), target)
    mode = {"STRICT_ALIGN_ENDPOINTS_MODE": lambda n: "align_corners",
            "ALIGN_ENDPOINTS_MODE": lambda n: "align_corners" if n > 1 else "half_pixel",
            "UPSAMPLE_MODE": lambda n: "asymmetric"}[method]
    return onnx_resize(x, target, [mode(n) for n in target])


@pytest.mark.parametrize("target", [(3, 6), (1, 5), (7, 1)], ids=["down_up", "one_row", "one_column"])
@pytest.mark.parametrize("method", [
    pytest.param("STRICT_ALIGN_ENDPOINTS_MODE",
                 marks=oracle_checks("resizeBilinear.mode.samplingMethod=STRICT_ALIGN_ENDPOINTS_MODE")),
    pytest.param("ALIGN_ENDPOINTS_MODE", marks=oracle_checks("resizeBilinear.mode.samplingMethod=ALIGN_ENDPOINTS_MODE")),
    pytest.param("UPSAMPLE_MODE", marks=oracle_checks("resizeBilinear.mode.samplingMethod=UPSAMPLE_MODE")),
    pytest.param("ROI_ALIGN_MODE", marks=oracle_checks("resizeBilinear.mode.samplingMethod=ROI_ALIGN_MODE")),
])
def test_resize_bilinear_matches_onnxruntime(method: str, target: tuple[int, int], tmp_path: Path) -> None:
    """targetSize [H_out, W_out] on a 5 x 4 image, including one output row or column, where
    STRICT_ALIGN_ENDPOINTS (the first pixel) and ALIGN_ENDPOINTS (the middle) part."""
    m = Model({"x": (2, 3, 5, 4)}, ["y"], nd=True)
    p = m.layer("resizeBilinear", ["x"], ["y"])
    p.targetSize.extend(target)
    p.mode.samplingMethod = m.nn.SamplingMode.Method.Value(method)
    x = rand(2, 3, 5, 4)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    by_onnxruntime(y, resize_oracle(method, x, target))


BOX_MODES = ["CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST", "CENTER_SIZE_WIDTH_FIRST"]
CROP_IMAGE = (2, 2, 7, 9)  # [Batch, C, H, W]; the layer's input is [1, Batch, C, H, W]
# Boxes as pixel corners (h_start, w_start, h_end, w_end) after scaling, at least a pixel high and wide
# (a thinner box: test_crop_resize_roi_align_thin_box). UPSAMPLE_MODE's boxes have integer corners, so
# that a crop of whole pixels resized with ONNX's asymmetric mode is its oracle.
BOXES = np.array([[1.0, 2.5, 5.5, 7.0], [0.5, 0.0, 6.0, 8.0], [2.25, 1.5, 3.75, 6.25]])
INTEGER_BOXES = np.array([[1.0, 2.0, 5.0, 7.0], [0.0, 0.0, 6.0, 8.0], [2.0, 1.0, 4.0, 6.0]])
SPATIAL_SCALE = 0.5  # pixel coordinates are given doubled


def encode_boxes(corners: np.ndarray, box_mode: str, normalized: bool) -> np.ndarray:
    """Corners in the layer's convention. BoxCoordinatesMode: CORNERS_HEIGHT_FIRST "[h_start, w_start,
    h_end, w_end]", CORNERS_WIDTH_FIRST "[w_start, h_start, w_end, h_end]", CENTER_SIZE_HEIGHT_FIRST
    "[h_center, w_center, box_height, box_width]", CENTER_SIZE_WIDTH_FIRST "[w_center, h_center,
    box_width, box_height]"; normalizedCoordinates: "scaled by (H_in - 1), (W_in - 1)", else
    divided by spatialScale ("Additional spatial scale that multiplies the bounding box coordinates")."""
    h, w = CROP_IMAGE[2:]
    c = corners / [h - 1, w - 1, h - 1, w - 1] if normalized else corners / SPATIAL_SCALE
    if box_mode.startswith("CENTER_SIZE"):
        c = np.concatenate([(c[:, :2] + c[:, 2:]) / 2, c[:, 2:] - c[:, :2]], axis=1)
    if box_mode.endswith("WIDTH_FIRST"):
        c = c[:, [1, 0, 3, 2]]
    return c


def crop_resize_oracle(method: str, images: np.ndarray, corners: np.ndarray, target) -> np.ndarray:
    """[N, Batch, C, h, w]: every box on every image."""
    b, h, w = images.shape[0], *images.shape[2:]
    if method == "ROI_ALIGN_MODE":
        rois = np.repeat(corners[:, [1, 0, 3, 2]], b, axis=0)  # (x1, y1, x2, y2), box-major
        out = onnx_roi_align(images, rois, np.tile(np.arange(b), len(corners)), target)
        return out.reshape(len(corners), b, *out.shape[1:])
    crops = []
    for h1, w1, h2, w2 in corners:
        if method == "UPSAMPLE_MODE":
            crop = images[:, :, int(h1):int(h2) + 1, int(w1):int(w2) + 1]
            crops.append(onnx_resize(crop, target, ["asymmetric", "asymmetric"]))
            continue
        start, end = [h1 / (h - 1), w1 / (w - 1)], [h2 / (h - 1), w2 / (w - 1)]
        if method == "STRICT_ALIGN_ENDPOINTS_MODE":  # linspace(start, end, 1) is start
            end = [e if n > 1 else s for s, e, n in zip(start, end, target)]
        roi = np.array([0, 0, *start, 1, 1, *end], np.float32)  # batch and channel axes kept whole
        sizes = np.array([b, images.shape[1], *target], np.int64)
        crops.append(run_onnx_node("Resize", {"x": images}, dict(mode="linear",
                                                                 coordinate_transformation_mode="tf_crop_and_resize"),
                                   initializers={"roi": roi, "scales": _EMPTY, "sizes": sizes},
                                   input_order=["x", "roi", "scales", "sizes"])[0])
    return np.stack(crops)


def crop_resize_layer(m: Model, roi: str, out: str, method: str, box_mode: str, normalized: bool, target) -> None:
    p = m.layer("cropResize", ["x", roi], [out], name=out)
    p.targetSize.extend(target)
    p.normalizedCoordinates = normalized
    p.mode.samplingMethod = m.nn.SamplingMode.Method.Value(method)
    p.boxIndicesMode.boxMode = m.nn.BoxCoordinatesMode.Coordinates.Value(box_mode)
    p.spatialScale = 1.0 if normalized else SPATIAL_SCALE


@oracle_checks("cropResize.boxIndicesMode.boxMode=CORNERS_HEIGHT_FIRST",
               "cropResize.boxIndicesMode.boxMode=CORNERS_WIDTH_FIRST",
               "cropResize.boxIndicesMode.boxMode=CENTER_SIZE_HEIGHT_FIRST",
               "cropResize.boxIndicesMode.boxMode=CENTER_SIZE_WIDTH_FIRST")
@pytest.mark.parametrize("method", [
    pytest.param("STRICT_ALIGN_ENDPOINTS_MODE",
                 marks=oracle_checks("cropResize.mode.samplingMethod=STRICT_ALIGN_ENDPOINTS_MODE")),
    pytest.param("ALIGN_ENDPOINTS_MODE", marks=oracle_checks("cropResize.mode.samplingMethod=ALIGN_ENDPOINTS_MODE")),
    pytest.param("UPSAMPLE_MODE", marks=oracle_checks("cropResize.mode.samplingMethod=UPSAMPLE_MODE")),
    pytest.param("ROI_ALIGN_MODE", marks=oracle_checks("cropResize.mode.samplingMethod=ROI_ALIGN_MODE")),
])
def test_crop_resize_matches_onnxruntime(method: str, tmp_path: Path) -> None:
    """One model with a layer per box coordinates mode, each given the same three [N, 1, 4, 1, 1] boxes
    in its convention, on both images of [1, 2, 2, 7, 9], target [3, 5]; coordinates in pixels
    (spatialScale 0.5) or normalized, alternately."""
    corners = INTEGER_BOXES if method == "UPSAMPLE_MODE" else BOXES
    b, c, h, w = CROP_IMAGE
    inputs = {"x": (1, b, c, h, w), **{f"roi_{bm}": (len(corners), 1, 4, 1, 1) for bm in BOX_MODES}}
    m = Model(inputs, [f"y_{bm}" for bm in BOX_MODES], nd=True)
    images = rand(*CROP_IMAGE)
    feeds = {"x": images[None]}
    for i, box_mode in enumerate(BOX_MODES):
        normalized = (SAMPLING.index(method) + i) % 2 == 1
        crop_resize_layer(m, f"roi_{box_mode}", f"y_{box_mode}", method, box_mode, normalized, (3, 5))
        feeds[f"roi_{box_mode}"] = encode_boxes(corners, box_mode, normalized).reshape(-1, 1, 4, 1, 1).astype(np.float32)
    outs = convert_run(m.spec, feeds, tmp_path)
    want = crop_resize_oracle(method, images, corners, (3, 5))
    for box_mode in BOX_MODES:
        assert outs[f"y_{box_mode}"].shape == (len(corners), b, c, 3, 5)
        by_onnxruntime(outs[f"y_{box_mode}"], want, atol=2e-5, err_msg=box_mode)


@pytest.mark.parametrize("target", [(1, 4), (3, 1)], ids=["one_row", "one_column"])
@pytest.mark.parametrize("method", [
    pytest.param("STRICT_ALIGN_ENDPOINTS_MODE",
                 marks=oracle_checks("cropResize.mode.samplingMethod=STRICT_ALIGN_ENDPOINTS_MODE")),
    pytest.param("ALIGN_ENDPOINTS_MODE", marks=oracle_checks("cropResize.mode.samplingMethod=ALIGN_ENDPOINTS_MODE")),
])
def test_crop_resize_single_sample_axis(method: str, target: tuple[int, int], tmp_path: Path) -> None:
    """One output row or column: STRICT_ALIGN_ENDPOINTS samples the box's start, ALIGN_ENDPOINTS its
    middle."""
    m = Model({"x": (1, *CROP_IMAGE), "roi": (len(BOXES), 1, 4, 1, 1)}, ["y"], nd=True)
    crop_resize_layer(m, "roi", "y", method, "CORNERS_HEIGHT_FIRST", False, target)
    images = rand(*CROP_IMAGE)
    rois = encode_boxes(BOXES, "CORNERS_HEIGHT_FIRST", False).reshape(len(BOXES), 1, 4, 1, 1).astype(np.float32)
    y = convert_run(m.spec, {"x": images[None], "roi": rois}, tmp_path)["y"]
    by_onnxruntime(y, crop_resize_oracle(method, images, BOXES, target), atol=2e-5)


@oracle_checks("cropResize.mode.samplingMethod=ROI_ALIGN_MODE", "cropResize.boxIndicesMode.boxMode=CORNERS_WIDTH_FIRST")
def test_crop_resize_with_image_index_matches_onnxruntime(tmp_path: Path) -> None:
    """[N, 1, 5, 1, 1] boxes: "The first element of the axis=-3 specifies the input batch id from which to
    extract the RoI" -> [N, 1, C, h, w]; ONNX RoiAlign's batch_indices, its spatial_scale the layer's."""
    corners = BOXES[[0, 2, 1]]
    image_of = np.array([1, 0, 1])
    m = Model({"x": (1, *CROP_IMAGE), "roi": (len(corners), 1, 5, 1, 1)}, ["y"], nd=True)
    crop_resize_layer(m, "roi", "y", "ROI_ALIGN_MODE", "CORNERS_WIDTH_FIRST", False, (4, 3))
    images = rand(*CROP_IMAGE)
    given = np.concatenate([image_of[:, None], encode_boxes(corners, "CORNERS_WIDTH_FIRST", False)], axis=1)
    y = convert_run(m.spec, {"x": images[None], "roi": given.reshape(-1, 1, 5, 1, 1).astype(np.float32)},
                    tmp_path, coremltools_loads=False)["y"]
    assert y.shape == (3, 1, 2, 4, 3)
    want = onnx_roi_align(images, given[:, 1:], image_of, (4, 3), scale=SPATIAL_SCALE)
    by_onnxruntime(y, want[:, None], atol=2e-5)


def spec_lerp(x: np.ndarray, axis: int, positions: np.ndarray) -> np.ndarray:
    """Linear interpolation of ``x`` along ``axis`` at ``positions`` within [0, size - 1]."""
    lo = np.floor(positions).astype(int)
    hi = np.minimum(lo + 1, x.shape[axis] - 1)
    frac = (positions - lo).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return np.take(x, lo, axis=axis) * (1 - frac) + np.take(x, hi, axis=axis) * frac


@oracle_checks("cropResize.mode.samplingMethod=ROI_ALIGN_MODE")
def test_crop_resize_roi_align_thin_box(tmp_path: Path) -> None:
    """A box 0.5 pixel high, 3 rows: ROI_ALIGN_MODE's "spacing = max(1, X-1)/N [...] grid points =
    min(X-1, numpy.linspace(start, end))" over the box, X - 1 = 0.5: rows at 1/6, then clamped to the
    box's end 0.5 (twice). onnxruntime's RoiAlign (like Caffe2's, which coremltools' RoI Align stress
    test compared Core ML with) also steps by 1/3 but does not clamp to the box: its last two rows
    fall below it. Whether Core ML clamps there is not known (no runtime here); the converter
    follows the spec's words, and this pins that choice (and the max(1, X-1) step)."""
    corners = np.array([[2.25, 1.5, 2.75, 6.25]])
    m = Model({"x": (1, *CROP_IMAGE), "roi": (1, 1, 4, 1, 1)}, ["y"], nd=True)
    crop_resize_layer(m, "roi", "y", "ROI_ALIGN_MODE", "CORNERS_HEIGHT_FIRST", False, (3, 4))
    images = rand(*CROP_IMAGE)
    rois = encode_boxes(corners, "CORNERS_HEIGHT_FIRST", False).reshape(1, 1, 4, 1, 1).astype(np.float32)
    y = convert_run(m.spec, {"x": images[None], "roi": rois}, tmp_path)["y"]
    grids = []
    for start, end, n in ((2.25, 2.75, 3), (1.5, 6.25, 4)):
        spacing = max(1.0, end - start) / n
        grids.append(start + np.minimum(end - start, 0.5 * spacing + spacing * np.arange(n)))
    assert np.allclose(grids[0], [2.25 + 1 / 6, 2.75, 2.75])
    want = spec_lerp(spec_lerp(images.astype(np.float64), 2, grids[0]), 3, grids[1])
    compare_with_oracle(y, want[None], oracle="spec formula", rtol=1e-5, atol=1e-5, atol_scaled=True)
    roi_align = onnx_roi_align(images, corners[:, [1, 0, 3, 2]].repeat(2, axis=0), np.arange(2), (3, 4))
    np.testing.assert_allclose(y[0, :, :, 0], roi_align[:, :, 0], rtol=1e-5, atol=1e-5)  # the first row agrees
    assert not np.allclose(y[0, :, :, 1:], roi_align[:, :, 1:], atol=1e-3)  # the clamped rows do not


# ---------------------------------------------------------------------------------------------
# slidingWindows and PIXEL_SHUFFLE


@oracle_checks("slidingWindows")
@pytest.mark.parametrize("axis, size, step", [(1, 3, 2), (-1, 2, 3), (0, 4, 1)])
def test_sliding_windows_matches_torch(axis: int, size: int, step: int, tmp_path: Path) -> None:
    """SlidingWindowsLayerParams: "all windows of size windowSize separated by step along the dimension
    axis", (.., L, ..) -> (.., M, W, ..) with M = (L - W) / step + 1 (rounded down: L - W = 5 and 7
    are not multiples of step 2 and 3 here) -- torch's Tensor.unfold, whose window axis comes last."""
    m = Model({"x": (5, 8, 9)}, ["y"], nd=True)
    p = m.layer("slidingWindows", ["x"], ["y"])
    p.axis, p.windowSize, p.step = axis, size, step
    x = rand(5, 8, 9)
    y = convert_run(m.spec, {"x": x}, tmp_path)["y"]
    ax = axis % 3
    by_torch(y, torch.from_numpy(x).unfold(ax, size, step).movedim(-1, ax + 1))


@oracle_checks("reorganizeData.mode=PIXEL_SHUFFLE")
@pytest.mark.parametrize("block", [2, 3])
def test_pixel_shuffle_matches_torch(block: int, tmp_path: Path) -> None:
    """PIXEL_SHUFFLE, as the spec's example shows, takes the block offset as the inner part of the
    channel index -- torch's pixel_shuffle. Two output channels and a 2 x 3 image, so channel and
    block order both show."""
    m = Model({"x": (2, 2 * block * block, 2, 3)}, ["y"], nd=True, spec_version=5)
    p = m.layer("reorganizeData", ["x"], ["y"])
    p.mode = m.nn.ReorganizeDataLayerParams.PIXEL_SHUFFLE
    p.blockSize = block
    x = rand(2, 2 * block * block, 2, 3)
    by_torch(convert_run(m.spec, {"x": x}, tmp_path)["y"], torch.nn.functional.pixel_shuffle(torch.from_numpy(x),
                                                                                          block))


def test_onnx_resize_grids_follow_the_spec() -> None:
    """The mapping above, checked on an index ramp: each ONNX mode samples the spec's grid."""
    ramp = np.arange(5, dtype=np.float32)[None, None, :, None]
    grids = {
        ("align_corners", 3): np.linspace(0, 4, 3), ("align_corners", 1): np.linspace(0, 4, 1),
        ("half_pixel", 1): np.array([2.0]), ("asymmetric", 3): np.minimum(4, np.linspace(0, 5 - 5 / 3, 3)),
        ("asymmetric", 7): np.minimum(4, np.linspace(0, 5 - 5 / 7, 7)),
    }
    for (mode, n), grid in grids.items():
        got = onnx_resize(ramp, (n, 1), [mode, "asymmetric"])
        np.testing.assert_allclose(got.reshape(-1), grid, rtol=0, atol=1e-6, err_msg=f"{mode} {n}")
    roi = onnx_roi_align(np.broadcast_to(ramp, (1, 1, 5, 2)).copy(), np.array([[0, 0, 1, 4]]), np.array([0]), (3, 1))
    spacing = max(1, 5 - 1) / 3
    np.testing.assert_allclose(roi.reshape(-1), np.minimum(4, 0.5 * spacing + spacing * np.arange(3)), atol=1e-6)
