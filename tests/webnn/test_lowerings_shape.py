"""Shape and data-movement lowerings in the real browser, both layouts, against numpy indexing written
from the MIL spec (or torch): under nhwc the 4-D operands come from a conv (`conv_stem`), so the op
reads an NHWC operand and must map its axes, pads, reps, begins and strides."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import check_outputs, conv_stem, rand, run_webnn

LAYOUTS = ["nchw", "nhwc"]
X_SHAPE = (1, 3, 4, 5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshapes_transpose_concat_stack_split(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x, x2, u = rand(X_SHAPE, 1), rand((1, 2, 4, 5), 2), rand((1, 3, 1, 5), 3)
    c = rand((1, 3, 4, 2), 4)

    def body(b, x, x2, u):  # noqa: ANN001, ANN202
        s, s2, su = conv_stem(b, x, 3), conv_stem(b, x2, 2), conv_stem(b, u, 3)
        parts = b.split(x=s, split_sizes=[1, 2], axis=1)
        halves = b.split(x=s, num_splits=2, axis=-2)
        cols = b.split(x=s, split_sizes=[2, 3], axis=3)
        return [
            b.reshape(x=s, shape=[1, 3, 20], name="reshape"), b.expand_dims(x=s, axes=[-1], name="expand"),
            b.squeeze(x=su, axes=[2], name="squeeze"), b.flatten2d(x=s, axis=2, name="flatten"),
            b.reshape_like(x=s, ref_tensors=(s2, u), begins=[2, 1], ends=[4, 2], end_masks=[False, False],
                           name="reshape_like"),
            b.transpose(x=s, perm=[0, 2, 3, 1], name="transpose"),
            b.add(x=b.transpose(x=s, perm=[3, 1, 0, 2]), y=1.0, name="transpose_add"),
            b.concat(values=[s, s2], axis=-3, name="concat_c"),
            b.concat(values=[s, c], axis=3, name="concat_w_const"),
            b.concat(values=[s, b.mul(x=s, y=2.0)], axis=1, interleave=True, name="interleave"),
            b.concat(values=[s, s2, s2], axis=-3, interleave=False, name="concat3"),
            b.stack(values=[s, b.mul(x=s, y=-1.0)], axis=2, name="stack2"),
            b.stack(values=[s, s, b.add(x=s, y=1.0)], axis=-1, name="stack_last"),
            b.identity(x=parts[0], name="split0"), b.identity(x=parts[1], name="split1"),
            b.identity(x=halves[0], name="half0"), b.identity(x=halves[1], name="half1"),
            b.identity(x=cols[0], name="col0"), b.identity(x=cols[1], name="col1")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "x2": tensor("fp32", [1, 2, 4, 5]),
                        "u": tensor("fp32", [1, 3, 1, 5])}, body, opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x": x, "x2": x2, "u": u}, tmp_path / "m", layout=layout)
    interleaved = np.empty((1, 6, 4, 5), np.float32)
    interleaved[:, 0::2], interleaved[:, 1::2] = x, 2 * x
    check_outputs(out, {
        "reshape": x.reshape(1, 3, 20), "expand": x[..., None], "squeeze": u[:, :, 0], "flatten": x.reshape(3, 20),
        "reshape_like": x.reshape(4, 5, 3),
        "transpose": x.transpose(0, 2, 3, 1), "transpose_add": x.transpose(3, 1, 0, 2) + 1,
        "concat_c": np.concatenate([x, x2], 1), "concat_w_const": np.concatenate([x, c], 3),
        "interleave": interleaved, "concat3": np.concatenate([x, x2, x2], 1),
        "stack2": np.stack([x, -x], 2), "stack_last": np.stack([x, x, x + 1], -1),
        "split0": x[:, :1], "split1": x[:, 1:], "half0": x[:, :, :2], "half1": x[:, :, 2:],
        "col0": x[..., :2], "col1": x[..., 2:]})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_slices_crop_tile_reverse(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1)

    def body(b, x):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        return [
            b.slice_by_index(x=s, begin=[0, 2, 3, 1], end=[1, 0, 0, 5], stride=[1, -1, -2, 2],
                             begin_mask=[True, False, False, False], end_mask=[True, True, True, False],
                             name="masks_negative_strides"),
            b.slice_by_index(x=s, begin=[0, 1, -2, 0], end=[1, 2, -1, 5], squeeze_mask=[True, False, True, False],
                             name="squeezed"),
            b.slice_by_index(x=s, begin=[0, -2, 1, -4], end=[1, 3, -1, -1], name="negative_bounds"),
            b.slice_by_index(x=s, begin=[0, 0, 1, 4], end=[1, 3, 4, 0], stride=[1, 2, 2, -3], name="strided"),
            b.slice_by_size(x=s, begin=[0, 1, -3, 2], size=[1, 2, 2, -1], name="by_size"),
            b.crop(x=s, crop_height=[1, 0], crop_width=[2, 1], name="crop"),
            b.tile(x=s, reps=[1, 2, 1, 3], name="tile"), b.tile(x=s, reps=[2, 1, 3, 1], name="tile2"),
            b.reverse(x=s, axes=[-1, 1], name="reverse"), b.reverse(x=s, name="reverse_all")]

    prog = new_program({"x": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    check_outputs(out, {
        "masks_negative_strides": x[:, 2::-1, 3::-2, 1:5:2], "squeezed": x[0, 1:2, -2, 0:5],
        "negative_bounds": x[0:1, -2:3, 1:-1, -4:-1], "strided": x[0:1, 0:3:2, 1:4:2, 4:0:-3],
        "by_size": x[0:1, 1:3, 1:3, 2:], "crop": x[:, :, 1:, 2:-1],
        "tile": np.tile(x, (1, 2, 1, 3)), "tile2": np.tile(x, (2, 1, 3, 1)),
        "reverse": x[:, ::-1, :, ::-1], "reverse_all": x[::-1, ::-1, ::-1, ::-1]})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gather_negative_indices_any_axis(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1)
    idx = np.array([2, -1, 0, -4], np.int32)                     # runtime, along W (size 5) and H (size 4)
    ga = np.array([[[[-1, 0, 2, -4, 3]], [[3, -2, 1, 0, -1]], [[0, 0, -4, 3, 2]]]], np.int32)  # [1, 3, 1, 5]

    def body(b, x, idx, ga_rt):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        return [
            b.gather(x=s, indices=np.array([-1, 0, 3, -2], np.int32), axis=-1, name="const_w"),
            b.gather(x=s, indices=np.array([[1, -3], [-1, 0]], np.int32), axis=1, name="const_c_2d"),
            b.gather(x=s, indices=idx, axis=2, name="runtime_h"),
            b.gather(x=s, indices=idx, axis=-1, name="runtime_w"),
            b.gather_along_axis(x=s, indices=ga, axis=2, name="along_const"),
            b.gather_along_axis(x=s, indices=ga_rt, axis=-2, name="along_runtime")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "idx": tensor("int32", [4]), "ga": tensor("int32", [1, 3, 1, 5])},
                       body)
    out = run_webnn(webnn_browser, prog, {"x": x, "idx": idx, "ga": ga}, tmp_path / "m", layout=layout)
    tx = torch.from_numpy(x)
    along = torch.gather(tx, 2, torch.from_numpy(np.where(ga < 0, ga + 4, ga).astype(np.int64))).numpy()
    check_outputs(out, {
        "const_w": x[..., [-1, 0, 3, -2]], "const_c_2d": x[:, [[1, -3], [-1, 0]]],
        "runtime_h": x[:, :, idx], "runtime_w": x[..., idx], "along_const": along, "along_runtime": along})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_modes(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1)

    def body(b, x):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        return [
            b.pad(x=s, pad=[1, 2, 3, 0], mode="constant", constant_val=1.5, name="constant"),
            b.pad(x=s, pad=np.array([0, 1, 2, 0, 1, 3], np.int32), name="zeros"),
            b.pad(x=s, pad=[2, 1, 3, 2], mode="reflect", name="reflect"),
            b.pad(x=s, pad=[1, 0, 2, 1, 3, 2], mode="reflect", name="reflect_c"),
            b.pad(x=s, pad=[0, 1, 2, 3, 1, 4], mode="replicate", name="replicate"),
            b.pad(x=x, pad=[3, 1], mode="replicate", name="replicate_w")]

    prog = new_program({"x": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    tx = torch.from_numpy(x)
    check_outputs(out, {
        "constant": F.pad(tx, (3, 0, 1, 2), value=1.5).numpy(), "zeros": F.pad(tx, (1, 3, 2, 0, 0, 1)).numpy(),
        "reflect": F.pad(tx, (3, 2, 2, 1), mode="reflect").numpy(),
        "reflect_c": np.pad(x, [(0, 0), (1, 0), (2, 1), (3, 2)], mode="reflect"),
        "replicate": F.pad(tx, (1, 4, 2, 3, 0, 1), mode="replicate").numpy(),
        "replicate_w": np.pad(x, [(0, 0), (0, 0), (0, 0), (3, 1)], mode="edge")})


def _depth_to_space_dcr(x: np.ndarray, f: int) -> np.ndarray:
    """MIL depth_to_space: channel (i * f + j) * C' + c goes to block position (i, j) of channel c."""
    n, c, h, w = x.shape
    cc = c // (f * f)
    y = np.empty((n, cc, h * f, w * f), x.dtype)
    for i in range(f):
        for j in range(f):
            for ch in range(cc):
                y[:, ch, i::f, j::f] = x[:, (i * f + j) * cc + ch]
    return y


@pytest.mark.parametrize("layout", LAYOUTS)
def test_space_depth_shuffles_band_part_and_constants(webnn_browser: WebnnBrowser, tmp_path: Path,
                                                     layout: str) -> None:
    x8, x2 = rand((1, 8, 2, 3), 1), rand((1, 2, 4, 6), 2)
    m = rand((2, 4, 5), 3)
    m[0, 0, 4], m[1, 3, 0] = np.nan, np.inf      # outside the bands below: replaced by 0, not multiplied

    def body(b, x8, x2, m):  # noqa: ANN001, ANN202
        s8, s2 = conv_stem(b, x8, 8), conv_stem(b, x2, 2)
        return [
            b.depth_to_space(x=s8, block_size=2, name="d2s"), b.space_to_depth(x=s2, block_size=2, name="s2d"),
            b.pixel_shuffle(x=s8, upscale_factor=2, name="shuffle"),
            b.pixel_unshuffle(x=s2, downscale_factor=np.uint32(2), name="unshuffle"),
            b.band_part(x=m, lower=1, upper=2, name="band"), b.band_part(x=m, lower=-1, upper=0, name="lower_tri"),
            b.band_part(x=m, lower=0, upper=-1, name="upper_tri"),
            b.fill_like(ref_tensor=s8, value=2.5, name="fill_like"),
            b.add(x=b.shape(x=s2), y=0, name="shape_out"), b.fill(shape=[2, 3], value=-1.5, name="fill"),
            b.range_1d(start=1, end=10, step=3, name="range"),
            b.range_1d(start=0.5, end=-1.0, step=-0.5, name="range_f")]

    prog = new_program({"x8": tensor("fp32", [1, 8, 2, 3]), "x2": tensor("fp32", [1, 2, 4, 6]),
                        "m": tensor("fp32", [2, 4, 5])}, body, opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x8": x8, "x2": x2, "m": m}, tmp_path / "m", layout=layout)
    i, j = np.ogrid[:4, :5]
    check_outputs(out, {
        "d2s": _depth_to_space_dcr(x8, 2), "shuffle": F.pixel_shuffle(torch.from_numpy(x8), 2).numpy(),
        "unshuffle": F.pixel_unshuffle(torch.from_numpy(x2), 2).numpy(),
        "band": np.where((i - j <= 1) & (j - i <= 2), m, 0), "lower_tri": np.where(j - i <= 0, m, 0),
        "upper_tri": np.where(i - j <= 0, m, 0),
        "fill_like": np.full((1, 8, 2, 3), 2.5), "shape_out": [1, 2, 4, 6], "fill": np.full((2, 3), -1.5),
        "range": np.arange(1, 10, 3), "range_f": np.arange(0.5, -1.0, -0.5)})
    np.testing.assert_array_equal(_depth_to_space_dcr(out["s2d"], 2), x2)  # space_to_depth is its inverse


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_transpose_read_by_other_ops(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    """transpose writes no call (a layout change): every later op must read the permuted operand right."""
    x = rand(X_SHAPE, 1)
    y = rand((1, 4, 5, 3), 2)

    def body(b, x, y):  # noqa: ANN001, ANN202
        t = b.transpose(x=conv_stem(b, x, 3), perm=[0, 2, 3, 1])               # [1, 4, 5, 3]
        return [b.reshape(x=t, shape=[4, 15], name="reshape"), b.add(x=t, y=y, name="add"),
                b.slice_by_index(x=t, begin=[0, 1, 0, 2], end=[1, 3, 5, 3], squeeze_mask=[True, False, False, True],
                                 name="slice"),
                b.reduce_sum(x=t, axes=[-1], keep_dims=False, name="reduce"), b.softmax(x=t, axis=-1, name="softmax"),
                b.concat(values=[t, y], axis=-1, name="concat"), b.gather(x=t, indices=[2, 0], axis=-1, name="gather"),
                b.matmul(x=t, y=b.transpose(x=y, perm=[0, 1, 3, 2]), name="matmul"),
                b.transpose(x=t, perm=[0, 3, 1, 2], name="back")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "y": tensor("fp32", [1, 4, 5, 3])}, body)
    out = run_webnn(webnn_browser, prog, {"x": x, "y": y}, tmp_path / "m", layout=layout)
    t = x.transpose(0, 2, 3, 1)
    e = np.exp(t)
    check_outputs(out, {"reshape": t.reshape(4, 15), "add": t + y, "slice": t[0, 1:3, :, 2], "reduce": t.sum(-1),
                 "softmax": e / e.sum(-1, keepdims=True), "concat": np.concatenate([t, y], -1),
                 "gather": t[..., [2, 0]], "matmul": t @ y.transpose(0, 1, 3, 2), "back": x}, rtol=1e-5, atol=1e-6)


def test_scalars_negative_squeezed_indices_and_scalar_gathers(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = rand((2, 3), 1)
    a, c, k = np.float32(1.5), np.float32(-2.0), np.array(-2, np.int32)
    prog = new_program({"x": tensor("fp32", [2, 3]), "a": tensor("fp32", []), "c": tensor("fp32", []),
                        "k": tensor("int32", [])}, lambda b, x, a, c, k: [
        b.slice_by_index(x=x, begin=[1, -1], end=[2, 3], squeeze_mask=[True, True], name="last"),
        b.slice_by_index(x=x, begin=[-2, 0], end=[0, 3], squeeze_mask=[True, False], name="row"),
        b.concat(values=[a, c, a], axis=0, name="concat"), b.stack(values=[a, c], axis=0, name="stack"),
        b.gather(x=x, indices=np.int32(-1), axis=1, name="gather_const"),
        b.gather(x=x, indices=k, axis=1, name="gather_runtime")])
    out = run_webnn(webnn_browser, prog, {"x": x, "a": a, "c": c, "k": k}, tmp_path / "m")
    check_outputs(out, {"last": x[1, -1], "row": x[-2], "concat": [a, c, a], "stack": [a, c], "gather_const": x[:, -1],
                 "gather_runtime": x[:, -2]})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ops_made_constant_without_folding(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """shape/fill/range_1d/fill_like are folded before lowering in a normal conversion; with folding off
    their own lowerings (constants computed at conversion time) are the ones under test."""
    import dataclasses

    import converter.backends.webnn as webnn_backend
    from converter.backends.webnn.lowering import LOWERINGS, load_all
    from converter.ir.clone import clone_program

    monkeypatch.setattr(webnn_backend, "_prepare", lambda program, *args, **kw: (clone_program(program)[0], {}))
    load_all()
    lowered: list[str] = []
    for t in ("fill_like", "shape", "fill", "range_1d"):
        def spy(e, op, fn=LOWERINGS[t].fn):  # noqa: ANN001, ANN202
            lowered.append(op.type)
            return fn(e, op)
        monkeypatch.setitem(LOWERINGS, t, dataclasses.replace(LOWERINGS[t], fn=spy))
    x = rand(X_SHAPE, 1)
    prog = new_program({"x": tensor("fp32", X_SHAPE)}, lambda b, x: [
        b.fill_like(ref_tensor=conv_stem(b, x, 3), value=np.float32(2.5), name="fill_like"),
        b.shape(x=conv_stem(b, x, 3), name="shape_out"), b.fill(shape=[2, 3], value=np.float32(-1.5), name="fill"),
        b.range_1d(start=np.int32(1), end=np.int32(10), step=np.int32(3), name="range"),
        b.range_1d(start=np.float32(0.5), end=np.float32(-1.0), step=np.float32(-0.5), name="range_f"),
        b.relu(x=x, name="uses_x")],  # (a graph with no op reading an input refuses that input at dispatch)
        opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    check_outputs(out, {"fill_like": np.full(X_SHAPE, 2.5), "shape_out": list(X_SHAPE), "fill": np.full((2, 3), -1.5),
                 "range": np.arange(1, 10, 3), "range_f": np.arange(0.5, -1.0, -0.5)})
    assert sorted(lowered) == ["fill", "fill_like", "range_1d", "range_1d", "shape"]
