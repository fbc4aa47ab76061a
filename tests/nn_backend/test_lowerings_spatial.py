"""pad, crop, block rearrangements and sliding_windows lowered to NeuralNetwork layers, written,
read back by our NN frontend and run. Oracles: torch (F.pad, pixel_shuffle, pixel_unshuffle), the
DEPTH_TO_SPACE example printed in NeuralNetwork.proto (values copied from the spec), and index
formulas written here from the ops' definitions (TF's SpaceToBatchND / BatchToSpaceND on NCHW,
sliding windows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from tests.nn_backend.helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(11)


def _r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _run(tmp_path: Path, feeds: dict, body, opset: str = "iOS15") -> tuple[dict, Path]:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.mlmodel"
    return run_nn(program(feeds, body, opset=opset), feeds, path), path


def _spec(path: Path) -> int:
    return read_model_file(path).model.specificationVersion


# -- pad / crop ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode,torch_mode", [("constant", "constant"), ("reflect", "reflect"),
                                             ("replicate", "replicate")])
def test_pad_of_the_last_two_axes_is_a_padding_layer(tmp_path: Path, mode: str, torch_mode: str) -> None:
    x = _r(2, 3, 5, 6)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.pad(x=x, pad=np.array([1, 3, 4, 2], np.int32), mode=mode,
                                                             constant_val=np.float32(2.5), name="y")])
    kw = {"value": 2.5} if mode == "constant" else {}
    assert_close(got["y"], F.pad(torch.from_numpy(x), (4, 2, 1, 3), mode=torch_mode, **kw).numpy())
    assert layer_kinds(path) == {"padding": 1}


def test_constant_pad_of_more_axes_is_constant_pad(tmp_path: Path) -> None:
    x = _r(2, 3, 4)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.pad(x=x, pad=np.array([2, 0, 1, 3, 0, 1], np.int32),
                                                             mode="constant", constant_val=np.float32(-1.5),
                                                             name="y")])
    assert_close(got["y"], F.pad(torch.from_numpy(x), (0, 1, 1, 3, 2, 0), value=-1.5).numpy())
    assert layer_kinds(path) == {"constantPad": 1}


def test_constant_pad_by_runtime_amounts(tmp_path: Path) -> None:
    x, pad = _r(2, 3), np.array([1, 0, 2, 3], np.int32)
    got, path = _run(tmp_path, {"x": x, "p": pad}, lambda b, x, p: [b.pad(x=x, pad=p, mode="constant",
                                                                          constant_val=np.float32(4.0), name="y")])
    assert_close(got["y"], F.pad(torch.from_numpy(x), (2, 3, 1, 0), value=4.0).numpy())
    assert layer_kinds(path) == {"constantPad": 1}


@pytest.mark.parametrize("shape,pad", [((6,), [3, 1]), ((4, 5), [1, 2, 3, 0])])
def test_reflect_pad_below_rank_3_pads_a_rank_3_view(tmp_path: Path, shape: tuple, pad: list) -> None:
    x = _r(*shape)  # Core ML's padding layer takes rank >= 3
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.pad(x=x, pad=np.array(pad, np.int32), mode="reflect",
                                                             name="y")])
    torch_pad = tuple(v for i in range(len(pad) - 2, -1, -2) for v in pad[i:i + 2])
    want = F.pad(torch.from_numpy(x)[None, None], torch_pad, mode="reflect")[0, 0].numpy()
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"expandDims": 1, "padding": 1, "squeeze": 1}


def test_reflect_pad_of_a_third_axis_is_refused(tmp_path: Path) -> None:
    x = _r(3, 4, 5)
    prog = program({"x": x}, lambda b, x: [b.pad(x=x, pad=np.array([1, 1, 0, 0, 1, 1], np.int32), mode="reflect",
                                                  name="y")])
    with pytest.raises(UnsupportedError, match="pads only H and W"):
        run_nn(prog, {"x": x}, tmp_path / "m.mlmodel")


def test_crop(tmp_path: Path) -> None:
    x = _r(2, 3, 7, 8)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.crop(x=x, crop_height=[1, 2], crop_width=[3, 0], name="y")])
    assert_close(got["y"], x[:, :, 1:-2, 3:])
    assert layer_kinds(path) == {"crop": 1}


# -- block rearrangement ---------------------------------------------------------------------------

# NeuralNetwork.proto, ReorganizeDataLayerParams: input [C=8, H=1, W=2] holding 1..16
_SPEC_IN = np.arange(1, 17, dtype=np.float32).reshape(1, 8, 1, 2)
_SPEC_D2S = np.array([[[1, 5, 2, 6], [9, 13, 10, 14]], [[3, 7, 4, 8], [11, 15, 12, 16]]], np.float32)[None]
_SPEC_SHUFFLE = np.array([[[1, 3, 2, 4], [5, 7, 6, 8]], [[9, 11, 10, 12], [13, 15, 14, 16]]], np.float32)[None]


def test_depth_to_space_and_back_match_the_spec_example(tmp_path: Path) -> None:
    got, path = _run(tmp_path, {"x": _SPEC_IN}, lambda b, x: [b.depth_to_space(x=x, block_size=2, name="y")])
    assert_close(got["y"], _SPEC_D2S)
    assert layer_kinds(path) == {"reorganizeData": 1}
    got, _ = _run(tmp_path, {"x": _SPEC_D2S}, lambda b, x: [b.space_to_depth(x=x, block_size=2, name="y")])
    assert_close(got["y"], _SPEC_IN)


def test_block_size_1_writes_no_reorganize_layer(tmp_path: Path) -> None:
    x = _r(1, 4, 2, 3)  # Core ML refuses blockSize < 2; the op is the identity
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.relu(x=b.depth_to_space(x=x, block_size=1), name="y")])
    assert_close(got["y"], np.maximum(x, 0))
    assert "reorganizeData" not in layer_kinds(path)


def test_pixel_shuffle_matches_the_spec_example_and_torch(tmp_path: Path) -> None:
    got, path = _run(tmp_path, {"x": _SPEC_IN}, lambda b, x: [b.pixel_shuffle(x=x, upscale_factor=2, name="y")])
    assert_close(got["y"], _SPEC_SHUFFLE)
    assert _spec(path) == 5
    x = _r(2, 18, 2, 3)
    got, _ = _run(tmp_path, {"x": x}, lambda b, x: [b.pixel_shuffle(x=x, upscale_factor=3, name="y")])
    assert_close(got["y"], F.pixel_shuffle(torch.from_numpy(x), 3).numpy())


def test_pixel_unshuffle_is_space_to_depth_and_a_channel_gather(tmp_path: Path) -> None:
    x = _r(2, 3, 4, 6)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.pixel_unshuffle(x=x, downscale_factor=np.uint32(2),
                                                                         name="y")], opset="iOS16")
    assert_close(got["y"], F.pixel_unshuffle(torch.from_numpy(x), 2).numpy())
    assert layer_kinds(path) == {"reorganizeData": 1, "loadConstantND": 1, "gather": 1}


def _space_to_batch(x: np.ndarray, block: tuple[int, int], pads: list[list[int]]) -> np.ndarray:
    """TF SpaceToBatchND on NCHW: out[(i_h * bw + i_w) * N + n, c, h, w] = padded[n, c, h * bh + i_h, w * bw + i_w]."""
    xp = np.pad(x, [(0, 0), (0, 0), tuple(pads[0]), tuple(pads[1])])
    n, c, hh, ww = xp.shape
    bh, bw = block
    out = np.zeros((n * bh * bw, c, hh // bh, ww // bw), np.float32)
    for ih in range(bh):
        for iw in range(bw):
            for k in range(n):
                out[(ih * bw + iw) * n + k] = xp[k, :, ih::bh, iw::bw]
    return out


def test_space_to_batch_and_batch_to_space(tmp_path: Path) -> None:
    x = _r(2, 3, 5, 7)
    pads = [[1, 2], [0, 1]]
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.space_to_batch(
        x=x, block_shape=np.array([2, 2], np.int32), paddings=np.array(pads, np.int32), name="y")])
    want = _space_to_batch(x, (2, 2), pads)
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"padding": 1, "transpose": 2, "reorganizeData": 1}
    crops = [[1, 2], [0, 1]]
    got, path = _run(tmp_path, {"x": want}, lambda b, x: [b.batch_to_space(
        x=x, block_shape=np.array([2, 2], np.int32), crops=np.array(crops, np.int32), name="y")])
    assert_close(got["y"], x)  # BatchToSpaceND inverts SpaceToBatchND when crops = paddings
    assert layer_kinds(path) == {"transpose": 2, "reorganizeData": 1, "crop": 1}


def test_unequal_blocks_are_reshapes_and_transposes(tmp_path: Path) -> None:
    x = _r(2, 3, 5, 4)
    pads = [[0, 1], [2, 0]]
    block = np.array([2, 3], np.int32)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.space_to_batch(x=x, block_shape=block,
                                                                        paddings=np.array(pads, np.int32), name="y")])
    want = _space_to_batch(x, (2, 3), pads)
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"padding": 1, "reshapeStatic": 3, "transpose": 2}
    got, path = _run(tmp_path, {"x": want}, lambda b, x: [b.batch_to_space(x=x, block_shape=block,
                                                                           crops=np.array(pads, np.int32), name="y")])
    assert_close(got["y"], x)
    assert layer_kinds(path) == {"reshapeStatic": 3, "transpose": 2, "crop": 1}


def test_sliding_windows(tmp_path: Path) -> None:
    x = _r(2, 11, 3)
    got, path = _run(tmp_path, {"x": x}, lambda b, x: [b.sliding_windows(x=x, axis=1, size=4, stride=3, name="y")])
    m = (11 - 4) // 3 + 1
    want = np.stack([x[:, i * 3:i * 3 + 4, :] for i in range(m)], axis=1)
    assert_close(got["y"], want)
    assert layer_kinds(path) == {"slidingWindows": 1}


def test_ops_json_entries_of_the_family() -> None:
    from converter.backends.neuralnetwork.lowering import neuralnetwork_entry

    assert neuralnetwork_entry("conv")["status"] == "direct"
    assert neuralnetwork_entry("pixel_unshuffle")["status"] == "decomposed"
    for op in ("resample", "affine"):
        entry = neuralnetwork_entry(op)
        assert entry["status"] == "unsupported" and "grid-sample" in entry["reason"]
