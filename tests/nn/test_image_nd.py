"""Image inputs of ND networks (spec >= 4), under both NeuralNetworkImageShapeMapping values.

The layers see an image as [1, C, H, W] (RANK4_IMAGE_MAPPING) or [1, 1, C, H, W]
(RANK5_IMAGE_MAPPING), C in the model's colour order after the scaler preprocessing; a transpose
naming fewer axes permutes the trailing ones (coremltools' builder writes [1, 2, 0] to get HWC);
a multiArray output comes out in its declared shape. See converter/frontends/neuralnetwork/io.py.

Models: built with coremltools' NeuralNetworkBuilder and its own image utilities
(``make_image_input``, ``rename_feature``), as in coremltools' tests
test_multiarray_to_image_input_util* / test_rename_image_input, whose expected values (from Core ML
on a Mac) the single-pixel cases repeat. Oracle: the spec's scaler formula written below
(Y[c] = channelScale * X[c] + bias of that channel, channels in the model's colour order) and the
transpose as numpy. Every model also goes through MIL (same outputs, coremltools' loader accepts it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from converter.formats.proto import NeuralNetwork_pb2

from .common import builder, check_close, convert_and_run, quiet_coremltools

KINDS_COVERED = {"transpose", "activation"}

H, W = 4, 5
SCALE, RED, GREEN, BLUE = 0.5, -5.0, -6.0, -2.5


def _image_model(layers: Any, out_shape: tuple[int, ...], *, in_shape: tuple[int, ...] = (3, H, W),
                 image_format: str = "NCHW", bgr: bool = False, rank5: bool = False, rename: str | None = None,
                 scale: float = SCALE, biases: tuple[float, float, float] = (RED, GREEN, BLUE)) -> Any:
    """An ND network (spec 4) on multiArray input ``data`` of ``in_shape`` (``layers(builder)`` adds
    its layers, producing ``out``, declared ``out_shape``), made an image input by coremltools'
    ``make_image_input``; ``rank5``: imageInputShapeMapping RANK5_IMAGE_MAPPING instead of the
    builder's RANK4; ``rename``: the image input renamed with coremltools' ``rename_feature``."""
    quiet_coremltools()
    from coremltools.models import MLModel
    from coremltools.models.neural_network.utils import make_image_input
    from coremltools.models.utils import rename_feature

    b = builder({"data": in_shape}, ["out"], nd=True)
    layers(b)
    b.spec.description.output[0].type.multiArrayType.shape.extend(out_shape)
    red, green, blue = biases
    spec = make_image_input(MLModel(b.spec, skip_model_load=True), "data", is_bgr=bgr, red_bias=red,
                            green_bias=green, blue_bias=blue, scale=scale, image_format=image_format).get_spec()
    if rank5:
        spec.neuralNetwork.imageInputShapeMapping = NeuralNetwork_pb2.RANK5_IMAGE_MAPPING
    if rename:
        rename_feature(spec, "data", rename)
    return spec


def _network_chw(pixels: np.ndarray, *, bgr: bool, scale: float = SCALE,
                 biases: tuple[float, float, float] = (RED, GREEN, BLUE)) -> np.ndarray:
    """The spec's scaler on an H x W x 3 RGB image, as the [C, H, W] the layers see: channels in
    BGR order for a BGR model (blueBias first), else RGB (redBias first)."""
    red, green, blue = biases
    rgb = pixels.astype(np.float64)
    if bgr:
        channels, bias = rgb[..., ::-1], np.array([blue, green, red])
    else:
        channels, bias = rgb, np.array([red, green, blue])
    return (scale * channels + bias).transpose(2, 0, 1)


def _pixels(seed: int, h: int = H, w: int = W) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _transpose(axes: list[int]) -> Any:
    return lambda b: b.add_transpose("to_hwc", axes, "data", "out")


@pytest.mark.parametrize("rank5", [False, True], ids=["RANK4_IMAGE_MAPPING", "RANK5_IMAGE_MAPPING"])
@pytest.mark.parametrize("bgr", [False, True], ids=["RGB", "BGR"])
def test_transpose_1_2_0_of_an_image_is_hwc(tmp_path: Path, rank5: bool, bgr: bool) -> None:
    """transpose [1, 2, 0] of a 3-channel image: H x W x 3 in the model's colour order, scaled and
    biased; the output has the declared rank 3."""
    spec = _image_model(_transpose([1, 2, 0]), (H, W, 3), bgr=bgr, rank5=rank5)
    pixels = _pixels(int(rank5) * 2 + int(bgr))
    (out, _) = convert_and_run(spec, {"data": pixels}, tmp_path)
    assert out["out"].shape == (H, W, 3)
    check_close(out["out"], _network_chw(pixels, bgr=bgr).transpose(1, 2, 0), rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("rank5,axes,out_shape", [
    (False, [0, 2, 3, 1], (1, H, W, 3)),         # every axis of [1, C, H, W] named
    (True, [0, 1, 3, 4, 2], (H, W, 3)),          # every axis of [1, 1, C, H, W]; declared rank 3
    (True, [2, 0, 1], (W, 3, H)),                # the trailing [C, H, W] of [1, 1, C, H, W]
], ids=["rank4-all-axes", "rank5-all-axes", "rank5-three-axes"])
def test_transposes_of_both_mappings(tmp_path: Path, rank5: bool, axes: list[int], out_shape: tuple) -> None:
    spec = _image_model(_transpose(axes), out_shape, rank5=rank5)
    pixels = _pixels(7)
    (out, _) = convert_and_run(spec, {"data": pixels}, tmp_path)
    chw = _network_chw(pixels, bgr=False)
    full = chw[None, None] if rank5 else chw[None]
    want = (chw.transpose(axes) if len(axes) == 3 else full.transpose(axes)).reshape(out_shape)
    assert out["out"].shape == out_shape
    check_close(out["out"], want, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("rank5", [False, True], ids=["RANK4_IMAGE_MAPPING", "RANK5_IMAGE_MAPPING"])
def test_multiarray_made_an_image_keeps_the_declared_output_rank(tmp_path: Path, rank5: bool) -> None:
    """coremltools' test_multiarray_to_image_input_util: [C, H, W] -> linear -> out declared
    (3, 1, 1); Core ML gives (3, 1, 1) = [35, 14, 47.5] for the pixel (4, 2, 5), scale 10 and biases
    (-5, -6, -2.5). Also a 4 x 5 image, BGR."""
    linear = lambda b: b.add_activation("linear", "LINEAR", "data", "out")  # noqa: E731
    spec = _image_model(linear, (3, 1, 1), in_shape=(3, 1, 1), rank5=rank5, scale=10.0)
    (out, _) = convert_and_run(spec, {"data": np.array([4, 2, 5], np.uint8).reshape(1, 1, 3)}, tmp_path)
    assert out["out"].shape == (3, 1, 1)
    check_close(out["out"].reshape(-1), [35.0, 14.0, 47.5], rtol=0, atol=1e-5)

    spec = _image_model(linear, (3, H, W), rank5=rank5, bgr=True)
    pixels = _pixels(11)
    (out, _) = convert_and_run(spec, {"data": pixels}, tmp_path)
    assert out["out"].shape == (3, H, W)
    check_close(out["out"], _network_chw(pixels, bgr=True), rtol=1e-6, atol=1e-4)


def test_hwc_array_made_an_image_gets_the_builders_transpose(tmp_path: Path) -> None:
    """coremltools' test_multiarray_to_image_input_util_HWC_format: an [H, W, C] input made an
    image with image_format NHWC gets a transpose [1, 2, 0] after it; out is declared (H, W, C)."""
    linear = lambda b: b.add_activation("linear", "LINEAR", "data", "out")  # noqa: E731
    spec = _image_model(linear, (H, W, 3), in_shape=(H, W, 3), image_format="NHWC")
    assert [layer.WhichOneof("layer") for layer in spec.neuralNetwork.layers] == ["transpose", "activation"]
    pixels = _pixels(13)
    (out, _) = convert_and_run(spec, {"data": pixels}, tmp_path)
    assert out["out"].shape == (H, W, 3)
    check_close(out["out"], _network_chw(pixels, bgr=False).transpose(1, 2, 0), rtol=1e-6, atol=1e-4)


def test_transpose_elimination_single_pixel(tmp_path: Path) -> None:
    """coremltools' test_multiarray_to_image_input_util_transpose_elimination: make_image_input
    removes the model's transpose [2, 0, 1] (HWC -> CHW); Core ML gives the declared (1, 1, 3) =
    [35, 14, 47.5]."""
    def layers(b: Any) -> None:
        # named as in coremltools' test: its elimination rewires readers of the *layer* name
        b.add_transpose("transpose", [2, 0, 1], "data", "transpose")
        b.add_activation("linear", "LINEAR", "transpose", "out")

    spec = _image_model(layers, (1, 1, 3), in_shape=(1, 1, 3), image_format="NHWC", scale=10.0)
    assert [layer.WhichOneof("layer") for layer in spec.neuralNetwork.layers] == ["activation"]
    (out, _) = convert_and_run(spec, {"data": np.array([4, 2, 5], np.uint8).reshape(1, 1, 3)}, tmp_path)
    assert out["out"].shape == (1, 1, 3)
    check_close(out["out"].reshape(-1), [35.0, 14.0, 47.5], rtol=0, atol=1e-5)


def test_renamed_image_input(tmp_path: Path) -> None:
    """coremltools' test_rename_image_input: scale 2, no bias; Core ML gives (3, 1, 1) = [8, 10, 12]
    for the pixel (4, 5, 6) fed under the new name."""
    linear = lambda b: b.add_activation("linear", "LINEAR", "data", "out")  # noqa: E731
    spec = _image_model(linear, (3, 1, 1), in_shape=(3, 1, 1), rename="new_input_name", scale=2.0,
                        biases=(0.0, 0.0, 0.0))
    assert spec.neuralNetwork.preprocessing[0].featureName == "new_input_name"
    (out, prog) = convert_and_run(spec, {"new_input_name": np.array([4, 5, 6], np.uint8).reshape(1, 1, 3)}, tmp_path)
    assert [v.name for v in prog.main.inputs] == ["new_input_name"]
    assert out["out"].shape == (3, 1, 1)
    check_close(out["out"].reshape(-1), [8.0, 10.0, 12.0], rtol=0, atol=0)
