"""Shape and layout ops through the ONNX backend under onnxruntime, against numpy written here
(numpy's slicing and indexing rules are MIL's), and against our interpreter; symbolic sizes where
the lowering has a symbolic path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import only, program, run_both, session

X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) - 50.0


def _exact(prog, feeds, want) -> None:  # noqa: ANN001
    got, interp = run_both(prog, feeds)
    outs = list(got.values())
    wants = want if isinstance(want, list) else [want]
    assert len(outs) == len(wants)
    for g, w, i in zip(outs, wants, interp.values()):
        np.testing.assert_array_equal(g, np.asarray(w).astype(g.dtype))
        assert g.shape == np.asarray(w).shape
        np.testing.assert_array_equal(g, i)


@pytest.mark.parametrize(("target", "opset", "want_shape"), [
    ([6, -1], "iOS15", (6, 20)), ([0, 0, -1, 1], "iOS15", (2, 3, 20, 1)),
    ([0, -1], "iOS17", (4, 30)), ([24, 0], "iOS17", (24, 5)),  # iOS17: a 0 copies the dim aligned from the right
])
def test_reshape(target: list, opset: str, want_shape: tuple) -> None:
    prog = program({"x": X}, lambda b, x: b.reshape(x=x, shape=target), opset=opset)
    _exact(prog, {"x": X}, X.reshape(want_shape))


def test_reshape_with_a_symbolic_batch_and_a_run_time_shape() -> None:
    n = Symbol("n")
    prog = new_program([("x", TensorType(fp32, (n, 3, 4)))], lambda b, x: b.reshape(x=x, shape=[-1, 12]),
                       opset="iOS17")
    sess = session(prog)
    for size in (1, 3):
        x = np.arange(size * 12, dtype=np.float32).reshape(size, 3, 4)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(size, 12))
    prog = new_program([("x", TensorType(fp32, (n, 12)))], lambda b, x: b.reshape(x=x, shape=[-1, 3, 4]))
    sess = session(prog)  # the symbolic size is read from x's shape at run time
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(2, 3, 4))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    s = np.array([6, 0], np.int32)  # a run-time shape; its 0 is right-aligned (iOS17): x's last dim, 4
    prog = program({"x": x, "s": s}, lambda b, x, s: b.reshape(x=x, shape=b.mul(x=s, y=np.array([1, 1], np.int32))),
                   opset="iOS17")
    got, interp = run_both(prog, {"x": x, "s": s})
    np.testing.assert_array_equal(only(got), x.reshape(6, 4))
    np.testing.assert_array_equal(only(got), only(interp))


def test_transpose_squeeze_expand_dims_flatten() -> None:
    _exact(program({"x": X}, lambda b, x: b.transpose(x=x, perm=[2, -1, 0, 1])), {"x": X}, X.transpose(2, 3, 0, 1))
    y = X.reshape(2, 1, 3, 1, 20)
    _exact(program({"y": y}, lambda b, y: b.squeeze(x=y, axes=[1, -2])), {"y": y}, y.reshape(2, 3, 20))
    _exact(program({"y": y}, lambda b, y: b.squeeze(x=y)), {"y": y}, y.reshape(2, 3, 20))
    _exact(program({"x": X}, lambda b, x: b.expand_dims(x=x, axes=[0, -1])), {"x": X}, X[None, ..., None])
    _exact(program({"x": X}, lambda b, x: b.flatten2d(x=x, axis=-2)), {"x": X}, X.reshape(6, 20))


def test_concat_stack_split() -> None:
    a, c = X[:, :2], X[:, 1:]
    _exact(program({"a": a, "c": c}, lambda b, a, c: b.concat(values=(a, c), axis=1)), {"a": a, "c": c},
           np.concatenate([a, c], axis=1))
    a2 = X[:, :2] * 2
    inter = np.stack([a, a2], axis=2).reshape(2, 4, 4, 5)  # one slice from each in turn along axis 1
    _exact(program({"a": a, "a2": a2}, lambda b, a, a2: b.concat(values=(a, a2), axis=1, interleave=True)),
           {"a": a, "a2": a2}, inter)
    _exact(program({"a": a, "a2": a2}, lambda b, a, a2: b.stack(values=(a, a2), axis=-1)), {"a": a, "a2": a2},
           np.stack([a, a2], axis=-1))
    _exact(program({"x": X}, lambda b, x: b.split(x=x, split_sizes=[1, 3, 1], axis=-1)), {"x": X},
           np.split(X, [1, 4], axis=-1))
    _exact(program({"x": X}, lambda b, x: b.split(x=x, num_splits=2, axis=2)), {"x": X}, np.split(X, 2, axis=2))


@pytest.mark.parametrize(("begin", "end", "stride", "masks", "index"), [
    ([0, 1, 1, 0], [2, 3, 4, 5], [1, 1, 2, 1], {}, np.s_[0:2, 1:3, 1:4:2, 0:5]),
    ([1, -1, -1, 4], [0, 0, 0, 0], [1, -1, -2, -1], {"end_mask": [True, True, True, True]},
     np.s_[1:, -1::-1, -1::-2, 4::-1]),
    ([0, 0, -3, 1], [2, 3, -1, -1], [1, 2, 1, 3], {"begin_mask": [True, False, False, False]},
     np.s_[:2, 0:3:2, -3:-1, 1:-1:3]),
    ([1, -1, 0, 2], [2, 3, 4, 5], [1, 1, 1, 1], {"squeeze_mask": [True, True, False, False]},
     np.s_[1, -1, 0:4, 2:5]),
    ([0, 0, 10, -10], [2, 3, -10, 10], [1, 1, -1, 1], {}, np.s_[0:2, 0:3, 10:-10:-1, -10:10]),  # clamping
])
def test_slice_by_index(begin, end, stride, masks, index) -> None:  # noqa: ANN001
    prog = program({"x": X}, lambda b, x: b.slice_by_index(x=x, begin=begin, end=end, stride=stride, **masks))
    _exact(prog, {"x": X}, X[index])


def test_slice_by_index_with_run_time_bounds() -> None:
    begin = np.array([1, -1, 0, 3], np.int32)
    end = np.array([2, 0, 3, 0], np.int32)
    prog = program({"x": X, "bg": begin, "en": end},
                   lambda b, x, bg, en: b.slice_by_index(x=x, begin=bg, end=en, stride=[1, -1, 1, 1],
                                                        end_mask=[False, True, False, True],
                                                        squeeze_mask=[True, False, False, False]))
    _exact(prog, {"x": X, "bg": begin, "en": end}, X[1, -1::-1, 0:3, 3:])


def test_slice_by_size_and_crop() -> None:
    prog = program({"x": X}, lambda b, x: b.slice_by_size(x=x, begin=[1, -3, 0, 2], size=[1, 3, -1, 2]))
    _exact(prog, {"x": X}, X[1:2, -3:, 0:, 2:4])
    prog = program({"x": X}, lambda b, x: b.crop(x=x, crop_height=[1, 2], crop_width=[0, 3]))
    _exact(prog, {"x": X}, X[:, :, 1:-2, 0:-3])


def test_tile_reverse_reverse_sequence() -> None:
    _exact(program({"x": X}, lambda b, x: b.tile(x=x, reps=[1, 2, 1, 3])), {"x": X}, np.tile(X, (1, 2, 1, 3)))
    _exact(program({"x": X}, lambda b, x: b.reverse(x=x, axes=[1, -1])), {"x": X}, X[:, ::-1, :, ::-1])
    lengths = np.array([3, 1, 4], np.int32)
    prog = program({"x": X}, lambda b, x: b.reverse_sequence(x=x, lengths=lengths, seq_axis=2, batch_axis=1))
    want = X.copy()
    for i, n in enumerate(lengths):
        want[:, i, :n] = X[:, i, :n][:, ::-1]
    _exact(prog, {"x": X}, want)


@pytest.mark.parametrize(("mode", "np_mode"), [("constant", "constant"), ("reflect", "reflect"),
                                               ("replicate", "edge")])
def test_pad(mode: str, np_mode: str) -> None:
    kwargs = {"constant_val": 2.5} if mode == "constant" else {}
    prog = program({"x": X}, lambda b, x: b.pad(x=x, pad=[1, 2, 0, 3], mode=mode, **kwargs))
    widths = [(0, 0), (0, 0), (1, 2), (0, 3)]
    want = np.pad(X, widths, mode=np_mode, **({"constant_values": 2.5} if mode == "constant" else {}))
    _exact(prog, {"x": X}, want)


def test_shape_fill_range() -> None:
    _exact(program({"x": X}, lambda b, x: b.shape(x=x)), {"x": X}, np.array(X.shape, np.int32))
    prog = program({"x": X}, lambda b, x: b.fill(shape=b.shape(x=x), value=1.5))
    _exact(prog, {"x": X}, np.full(X.shape, 1.5, np.float32))
    prog = program({"x": X}, lambda b, x: b.fill_like(ref_tensor=x, value=np.int32(7)), opset="iOS16")
    _exact(prog, {"x": X}, np.full(X.shape, 7, np.int32))
    s = np.array([2.0], np.float32)
    prog = program({"s": s}, lambda b, s: b.range_1d(start=b.squeeze(x=s), end=9.0, step=1.5))
    _exact(prog, {"s": s}, np.arange(2.0, 9.0, 1.5, dtype=np.float32))
    i = np.array([10], np.int32)
    prog = program({"i": i}, lambda b, i: b.range_1d(start=np.int32(-2), end=b.squeeze(x=i), step=np.int32(3)))
    _exact(prog, {"i": i}, np.arange(-2, 10, 3, dtype=np.int32))
    h = np.array([2.0], np.float16)  # ONNX Range has no float16
    prog = program({"h": h}, lambda b, h: b.range_1d(start=b.squeeze(x=h), end=np.float16(9.0), step=np.float16(1.5)))
    _exact(prog, {"h": h}, np.arange(2.0, 9.0, 1.5).astype(np.float16))


def test_depth_space_rearrangements_vs_torch() -> None:
    x = np.arange(1 * 8 * 2 * 3, dtype=np.float32).reshape(1, 8, 2, 3)
    prog = program({"x": x}, lambda b, x: b.pixel_shuffle(x=x, upscale_factor=2))
    _exact(prog, {"x": x}, torch.nn.functional.pixel_shuffle(torch.from_numpy(x), 2).numpy())
    # TensorFlow's depth_to_space (DCR): block index major, channel minor
    prog = program({"x": x}, lambda b, x: b.depth_to_space(x=x, block_size=2))
    want = x.reshape(1, 2, 2, 2, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 4, 6)
    _exact(prog, {"x": x}, want)
    y = np.arange(1 * 2 * 4 * 6, dtype=np.float32).reshape(1, 2, 4, 6)
    prog = program({"y": y}, lambda b, y: b.space_to_depth(x=y, block_size=2))
    _exact(prog, {"y": y}, y.reshape(1, 2, 2, 2, 3, 2).transpose(0, 3, 5, 1, 2, 4).reshape(1, 8, 2, 3))
    prog = program({"y": y}, lambda b, y: b.pixel_unshuffle(x=y, downscale_factor=np.uint32(2)), opset="iOS16")
    _exact(prog, {"y": y}, torch.nn.functional.pixel_unshuffle(torch.from_numpy(y), 2).numpy())


def test_sliding_windows() -> None:
    x = np.arange(2 * 9, dtype=np.float32).reshape(2, 9)
    prog = program({"x": x}, lambda b, x: b.sliding_windows(x=x, axis=1, size=3, stride=2))
    _exact(prog, {"x": x}, np.stack([x[:, i:i + 3] for i in range(0, 7, 2)], axis=1))


def test_reshape_like() -> None:
    r1, r2 = np.zeros((6, 7), np.float32), np.zeros((2, 4, 5), np.float32)
    prog = program({"x": X, "r1": r1, "r2": r2},
                   lambda b, x, r1, r2: b.reshape_like(x=x, ref_tensors=(r1, r2), begins=[0, 1], ends=[1, 0],
                                                       end_masks=[False, True]))
    _exact(prog, {"x": X, "r1": r1, "r2": r2}, X.reshape(6, 4, 5))


def test_space_to_batch_and_back() -> None:
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    pads = np.array([[1, 1], [2, 1]], np.int32)
    prog = program({"x": x}, lambda b, x: b.space_to_batch(x=x, block_shape=[2, 4], paddings=pads))
    # TF's SpaceToBatchND on NCHW: output batch (i_h * block_w + i_w) * N + n holds the padded
    # input's pixels (i_h + block_h * y, i_w + block_w * x)
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 1)])
    want = np.zeros((16, 3, 3, 2), np.float32)
    for ih in range(2):
        for iw in range(4):
            for n in range(2):
                want[(ih * 4 + iw) * 2 + n] = padded[n, :, ih::2, iw::4]
    _exact(prog, {"x": x}, want)
    crops = np.array([[1, 1], [2, 1]], np.int32)
    prog = program({"w": want}, lambda b, w: b.batch_to_space(x=w, block_shape=[2, 4], crops=crops))
    _exact(prog, {"w": want}, x)


@pytest.mark.parametrize(("seq_axis", "batch_axis"), [(0, 1), (1, 0)])
def test_reverse_sequence_on_axes_0_and_1(seq_axis: int, batch_axis: int) -> None:
    x = np.arange(4 * 3 * 2, dtype=np.float32).reshape(4, 3, 2) if seq_axis == 0 else \
        np.arange(3 * 4 * 2, dtype=np.float32).reshape(3, 4, 2)
    lengths = np.array([2, 4, 1], np.int32)
    prog = program({"x": x}, lambda b, x: b.reverse_sequence(x=x, lengths=lengths, seq_axis=seq_axis,
                                                             batch_axis=batch_axis))
    xs = np.moveaxis(x, (batch_axis, seq_axis), (0, 1))
    want = xs.copy()
    for i, n in enumerate(lengths):
        want[i, :n] = xs[i, :n][::-1]
    _exact(prog, {"x": x}, np.moveaxis(want, (0, 1), (batch_axis, seq_axis)))


@pytest.mark.parametrize("opset", [17, 18])
def test_split_of_a_symbolic_size_into_equal_pieces(opset: int) -> None:
    n = Symbol("n")
    prog = new_program([("x", TensorType(fp32, (2, n)))], lambda b, x: b.split(x=x, num_splits=2, axis=1))
    sess = session(prog, opset)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for got, want in zip(sess.run(None, {"x": x}), np.split(x, 2, axis=1)):
        np.testing.assert_array_equal(got, want)


def test_reshape_of_symbolic_sizes_into_a_minus_one() -> None:
    n, m = Symbol("n"), Symbol("m")
    prog = new_program([("x", TensorType(fp32, (n, 2, m)))], lambda b, x: b.reshape(x=x, shape=[2, -1, 1]),
                       opset="iOS15")
    sess = session(prog)
    for shape in ((2, 2, 3), (3, 2, 4)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.reshape(2, -1, 1))
