"""conv, conv_transpose and pooling through the ONNX backend under onnxruntime, against torch
(padding, strides, dilations, groups, ceil_mode and the average's divisor pinned with distinct,
asymmetric values) and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import assert_close, only, program, run_both, session

rng = np.random.default_rng(11)


def _r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _torch_pad(x: torch.Tensor, pad: list[int], value: float = 0.0) -> torch.Tensor:
    """MIL pad [b0, e0, b1, e1, ...] (first spatial dim first) as torch's F.pad (last dim first)."""
    pairs = [pad[i:i + 2] for i in range(0, len(pad), 2)]
    return F.pad(x, [p for pair in reversed(pairs) for p in pair], value=value)


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_conv_custom_pad_groups_strides_dilations(dims: int) -> None:
    spatial = (9, 8, 7)[:dims]
    x = _r(2, 4, *spatial)
    w, b = _r(6, 2, *(3, 2, 3)[:dims]), _r(6)
    strides, dilations = [2, 1, 3][:dims], [1, 2, 1][:dims]
    pad = [1, 0, 2, 1, 0, 2][:2 * dims]
    prog = program({"x": x}, lambda bb, x: bb.conv(x=x, weight=w, bias=b, strides=strides, dilations=dilations,
                                                   pad_type="custom", pad=pad, groups=2))
    got, interp = run_both(prog, {"x": x})
    want = CONV[dims](_torch_pad(_t(x), pad), _t(w), _t(b), stride=strides, dilation=dilations, groups=2)
    assert_close(only(got), want.numpy(), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


@pytest.mark.parametrize("pad_type", ["same", "same_lower", "valid"])
def test_conv_same_splits_the_odd_padding_as_mil(pad_type: str) -> None:
    x = _r(1, 2, 7, 6)
    w = _r(3, 2, 4, 3)  # kernel 4: an odd total padding along H with stride 1
    prog = program({"x": x}, lambda bb, x: bb.conv(x=x, weight=w, pad_type=pad_type, strides=[1, 2]),
                   opset="iOS16")
    got, interp = run_both(prog, {"x": x})
    # total pads: H (7-1)*1+4-7 = 3, W (3-1)*2+3-6 = 1; 'same' puts the extra one after, same_lower before
    pad = {"same": [1, 2, 0, 1], "same_lower": [2, 1, 1, 0], "valid": [0, 0, 0, 0]}[pad_type]
    want = F.conv2d(_torch_pad(_t(x), pad), _t(w), stride=[1, 2])
    assert_close(only(got), want.numpy(), 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_conv_same_with_a_symbolic_size_uses_auto_pad() -> None:
    w = _r(3, 2, 3, 4)
    prog = new_program([("x", TensorType(fp32, (1, 2, Symbol("h"), Symbol("w"))))],
                       lambda bb, x: bb.conv(x=x, weight=w, pad_type="same", strides=[2, 1]))
    sess = session(prog)
    for h, wd in ((5, 6), (8, 7)):
        x = _r(1, 2, h, wd)
        th, tw = max((-(-h // 2) - 1) * 2 + 3 - h, 0), max(wd - 1 + 4 - wd, 0)
        want = F.conv2d(_torch_pad(_t(x), [th // 2, th - th // 2, tw // 2, tw - tw // 2]), _t(w), stride=[2, 1])
        assert_close(sess.run(None, {"x": x})[0], want.numpy(), 1e-5)


def _mil_conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, strides: list[int], dilations: list[int],
                        groups: int, crop: list[int], outs: list[int]) -> np.ndarray:
    """MIL's definition: torch's full transposed convolution (no padding), cropped at the start by
    ``crop`` and cut or zero-extended at the end to ``outs``, plus the bias."""
    full = F.conv_transpose2d(_t(x), _t(w), None, stride=strides, dilation=dilations, groups=groups).numpy()
    y = np.zeros(full.shape[:2] + tuple(outs), np.float32)
    part = full[:, :, crop[0]:crop[0] + outs[0], crop[1]:crop[1] + outs[1]]
    y[:, :, :part.shape[2], :part.shape[3]] = part
    return y + (0 if b is None else b.reshape(1, -1, 1, 1))


@pytest.mark.parametrize(("pad_type", "pad", "output_shape", "crop", "outs"), [
    ("valid", None, None, [0, 0], [12, 15]),  # the full result: H (5-1)*2 + 4, W (6-1)*2 + (3-1)*2 + 1
    ("custom", [2, 1, 0, 3], None, [2, 0], [9, 12]),
    ("same", None, None, None, [10, 12]),  # in * stride
    ("valid", None, [1, 4, 13, 16], [0, 0], [13, 16]),  # one longer than the full result: output_padding
    ("valid", None, [1, 4, 14, 18], [0, 0], [14, 18]),  # longer than output_padding may be: Pad, then the bias
    ("same", None, [1, 4, 9, 13], [1, 0], [9, 13]),
])
def test_conv_transpose(pad_type: str, pad: list | None, output_shape: list | None, crop: list, outs: list) -> None:
    x = _r(1, 4, 5, 6)
    w, b = _r(4, 2, 4, 3), _r(4)  # groups 2: 2 x 2 = 4 output channels
    strides, dilations = [2, 2], [1, 2]
    kwargs = {"pad_type": pad_type, "strides": strides, "dilations": dilations, "groups": 2, "bias": b}
    if pad is not None:
        kwargs["pad"] = pad
    if output_shape is not None:
        kwargs["output_shape"] = output_shape
    prog = program({"x": x}, lambda bb, x: bb.conv_transpose(x=x, weight=w, **kwargs))
    got, interp = run_both(prog, {"x": x})
    if pad_type == "same":  # TF's rule: half the excess of the full result (12, 15) before, the odd one after
        crop = [max(12 - outs[0], 0) // 2, max(15 - outs[1], 0) // 2]
    want = _mil_conv_transpose(x, w, b, strides, dilations, 2, crop, outs)
    assert only(got).shape == want.shape
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


# -- pooling ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_max_pool(ceil_mode: bool) -> None:
    x = _r(2, 3, 9, 10)
    prog = program({"x": x}, lambda bb, x: bb.max_pool(x=x, kernel_sizes=[3, 2], strides=[2, 3], pad_type="custom",
                                                       pad=[1, 1, 1, 1], ceil_mode=ceil_mode))
    got, interp = run_both(prog, {"x": x})
    want = F.max_pool2d(_t(x), [3, 2], [2, 3], padding=[1, 1], ceil_mode=ceil_mode).numpy()
    assert only(got).shape == want.shape
    assert_close(only(got), want, 0)
    assert_close(only(got), only(interp), 0)


@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_avg_pool_divisor(exclude: bool, ceil_mode: bool) -> None:
    x = _r(1, 2, 8, 11)
    prog = program({"x": x}, lambda bb, x: bb.avg_pool(x=x, kernel_sizes=[3, 4], strides=[2, 3], pad_type="custom",
                                                       pad=[1, 1, 2, 2], ceil_mode=ceil_mode,
                                                       exclude_padding_from_average=exclude))
    got, interp = run_both(prog, {"x": x})
    want = F.avg_pool2d(_t(x), [3, 4], [2, 3], padding=[1, 2], ceil_mode=ceil_mode,
                        count_include_pad=not exclude).numpy()
    assert only(got).shape == want.shape
    assert_close(only(got), want, 1e-6)
    assert_close(only(got), only(interp), 1e-6)


def test_avg_pool_ceil_mode_without_padding_and_same() -> None:
    x = _r(1, 2, 7, 7)
    prog = program({"x": x}, lambda bb, x: bb.avg_pool(x=x, kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid",
                                                       ceil_mode=True, exclude_padding_from_average=False))
    got, _ = run_both(prog, {"x": x})
    assert_close(only(got), F.avg_pool2d(_t(x), 2, 2, ceil_mode=True).numpy(), 1e-6)
    x = _r(1, 2, 6, 5)
    prog = program({"x": x}, lambda bb, x: bb.avg_pool(x=x, kernel_sizes=[3, 3], strides=[1, 2], pad_type="same",
                                                       exclude_padding_from_average=True))
    got, interp = run_both(prog, {"x": x})
    assert_close(only(got), only(interp), 1e-6)
    # same: H pads (1, 1), W total (3-1)*2+3-5 = 2 -> (1, 1); excluded from the divisor
    ones = F.avg_pool2d(torch.ones(1, 1, 6, 5), [3, 3], [1, 2], padding=[1, 1], count_include_pad=False)
    assert_close(only(got), F.avg_pool2d(_t(x), [3, 3], [1, 2], padding=[1, 1], count_include_pad=False).numpy(),
                 1e-6)
    assert ones.shape[-2:] == only(got).shape[-2:]


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_l2_pool(ceil_mode: bool) -> None:
    x = _r(1, 3, 7, 8)
    prog = program({"x": x}, lambda bb, x: bb.l2_pool(x=x, kernel_sizes=[2, 3], strides=[2, 2], pad_type="custom",
                                                      pad=[1, 1, 0, 0], ceil_mode=ceil_mode))
    got, interp = run_both(prog, {"x": x})
    # sqrt of the sum of squares, padding adding zeros. ceil_mode: H ceil((7+2-2)/2)+1 = 5 windows, the last
    # starting in the right padding (8 >= 7+1) dropped: 4, no overhang; W ceil((8-3)/2)+1 = 4 windows, the last
    # one hanging 1 column over the end (zeros)
    squares = F.pad(_t(x * x), [0, 1 if ceil_mode else 0, 1, 1])
    want = np.sqrt(F.avg_pool2d(squares, [2, 3], [2, 2]).numpy() * 6)
    assert only(got).shape == want.shape
    assert_close(only(got), want, 1e-5)
    assert_close(only(got), only(interp), 1e-5)


def test_global_pools_and_1d_3d() -> None:
    x = _r(2, 3, 5, 6)
    prog = program({"x": x}, lambda bb, x: [bb.avg_pool(x=x, kernel_sizes=[5, 6], strides=[1, 1], pad_type="valid"),
                                            bb.max_pool(x=x, kernel_sizes=[5, 6], strides=[1, 1], pad_type="valid")])
    got, _ = run_both(prog, {"x": x})
    avg, mx = got.values()
    assert_close(avg, x.mean(axis=(2, 3), keepdims=True), 1e-6)
    assert_close(mx, x.max(axis=(2, 3), keepdims=True), 0)
    x1 = _r(2, 3, 9)
    prog = program({"x": x1}, lambda bb, x: bb.max_pool(x=x, kernel_sizes=[3], strides=[2], pad_type="valid"))
    assert_close(only(run_both(prog, {"x": x1})[0]), F.max_pool1d(_t(x1), 3, 2).numpy(), 0)
    x3 = _r(1, 2, 4, 5, 6)
    prog = program({"x": x3}, lambda bb, x: bb.avg_pool(x=x, kernel_sizes=[2, 2, 3], strides=[2, 1, 3],
                                                        pad_type="valid"))
    assert_close(only(run_both(prog, {"x": x3})[0]), F.avg_pool3d(_t(x3), [2, 2, 3], [2, 1, 3]).numpy(), 1e-6)
