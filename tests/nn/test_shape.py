"""NeuralNetwork shape and indexing layers (layers/shape.py, layers/indexing.py) against
independent expectations.

Oracles: onnxmltools + onnxruntime for the classic rank-5 layers it converts (reshape, flatten,
permute, concat, split, sequenceRepeat, slice), with the two places where it departs from the spec
shown by a formula (reshape CHANNEL_LAST misses its final permute; slice cuts the last element
off every axis it does not slice); numpy written here from the spec text for everything else.
Every model also goes through MIL (our writer and reader, bit-identical outputs) and coremltools'
MIL proto loader (tests/nn/common.py).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from converter.errors import UnsupportedError
from tests.nn.common import (
    assert_load_error,
    builder,
    check_close,
    convert_run,
    flexible,
    load_spec,
    onnx_oracle,
    op_types,
)
from tests.nn.shape_util import layer

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "NonMaximumSuppression",
    "argMax",
    "argMin",
    "argSort",
    "broadcastToDynamic",
    "broadcastToLike",
    "broadcastToStatic",
    "concat",
    "concatND",
    "constantPad",
    "cumSum",
    "expandDims",
    "fillDynamic",
    "fillLike",
    "fillStatic",
    "flatten",
    "flattenTo2D",
    "gather",
    "gatherAlongAxis",
    "gatherND",
    "getShape",
    "loadConstantND",
    "lowerTriangular",
    "matrixBandPart",
    "oneHot",
    "permute",
    "rangeDynamic",
    "rangeStatic",
    "rankPreservingReshape",
    "reshape",
    "reshapeDynamic",
    "reshapeLike",
    "reshapeStatic",
    "reverse",
    "reverseSeq",
    "scatter",
    "scatterAlongAxis",
    "scatterND",
    "sequenceRepeat",
    "slice",
    "sliceBySize",
    "sliceDynamic",
    "sliceStatic",
    "split",
    "splitND",
    "squeeze",
    "stack",
    "tile",
    "topK",
    "transpose",
    "upperTriangular",
    "whereNonZero",
}

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def distinct(*shape: int) -> np.ndarray:
    """Values without ties (sort and top-k orders are then unique)."""
    return (RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.5 - 3).astype(np.float32)


close = functools.partial(check_close, rtol=1e-6, atol=1e-6)  # equal shapes, values within 1e-6


def same(a: np.ndarray, b: np.ndarray) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b.astype(np.float32))


# =============================================================================================
# classic layers (rank-5 networks; ND networks with rank-5 inputs for Seq > 1)


X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3


@pytest.mark.parametrize("target", [(4, 3, 2), (1, 24, 1), (6, 1, 4)])
def test_reshape_channel_first_onnx(tmp_path, target):
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_reshape("r", "x", "y", target, 0)
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    same(y, X.reshape(target))  # the spec: row-major data, new shape
    same(y, onnx_oracle(b.spec, {"x": X})["y"][0])


def test_reshape_channel_last_spec_vs_onnxmltools(tmp_path):
    """CHANNEL_LAST: flatten in [H, W, C] order, reshape to [H_out, W_out, C_out], permute to
    [C_out, H_out, W_out]. onnxmltools omits the final permute (it lays the HWC data straight
    into [C_out, H_out, W_out]): the spec wins."""
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_reshape("r", "x", "y", (4, 3, 2), 1)
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    hwc = X.transpose(1, 2, 0).reshape(-1)
    spec = hwc.reshape(3, 2, 4).transpose(2, 0, 1)  # [H_out, W_out, C_out] -> [C_out, H_out, W_out]
    same(y, spec)
    oracle = onnx_oracle(b.spec, {"x": X})["y"][0]
    same(oracle, hwc.reshape(4, 3, 2))
    assert not np.array_equal(oracle, spec)


@pytest.mark.parametrize("mode", [0, 1])
def test_reshape_sequence_target(tmp_path, mode):
    """4-element targets reshape across Seq: [Seq, 1, C, H, W] -> [Seq_out, 1, C_out, H_out, W_out]
    (an ND network carrying a rank-5 tensor, as the spec-4 text describes)."""
    x = rand(2, 1, 3, 2, 2)
    b = builder([("x", (2, 1, 3, 2, 2))], ["y"], nd=True)
    b.add_reshape("r", "x", "y", (4, 3, 1, 2), mode)
    y = convert_run(b.spec, {"x": x}, tmp_path)["y"]
    if mode == 0:
        want = x.reshape(4, 1, 3, 1, 2)
    else:
        want = x.transpose(0, 1, 3, 4, 2).reshape(4, 1, 1, 2, 3).transpose(0, 1, 4, 2, 3)
    same(y, want)


def test_reshape_each_sequence_step(tmp_path):
    """3-element targets reshape every [C, H, W] of a sequence on its own."""
    x = rand(3, 1, 2, 2, 3)
    b = builder([("x", (3, 1, 2, 2, 3))], ["y", "z"], nd=True)
    b.add_reshape("r", "x", "y", (3, 4, 1), 0)
    b.add_reshape("r2", "x", "z", (3, 4, 1), 1)
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["y"], x.reshape(3, 1, 3, 4, 1))
    want = np.stack([s[0].transpose(1, 2, 0).reshape(4, 1, 3).transpose(2, 0, 1) for s in x])[:, None]
    same(out["z"], want)


@pytest.mark.parametrize("mode", [0, 1])
def test_flatten_onnx(tmp_path, mode):
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_flatten("f", mode, "x", "y")
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    flat = X.reshape(-1) if mode == 0 else X.transpose(1, 2, 0).reshape(-1)
    same(y, flat.reshape(24, 1, 1))
    same(y.reshape(-1), onnx_oracle(b.spec, {"x": X})["y"].reshape(-1))


@pytest.mark.parametrize("mode", [0, 1])
def test_flatten_nd_batch_dims_flexible(tmp_path, mode):
    """Rank 4: the leading dim is batch (flexible here); [B, C*H*W, 1, 1]."""
    x = rand(3, 2, 3, 4)
    b = builder([("x", (1, 2, 3, 4))], ["y"], nd=True)
    b.add_flatten("f", mode, "x", "y")
    flexible(b.spec, "x", [1, 2, 3, 4], [5, 2, 3, 4])
    y = convert_run(b.spec, {"x": x}, tmp_path)["y"]
    flat = x.reshape(3, -1) if mode == 0 else x.transpose(0, 2, 3, 1).reshape(3, -1)
    same(y, flat.reshape(3, 24, 1, 1))


@pytest.mark.parametrize("axis", [(0, 3, 1, 2), (0, 2, 3, 1), (0, 1, 3, 2), (0, 1, 2, 3)])
def test_permute_onnx(tmp_path, axis):
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_permute("p", axis, "x", "y")
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    same(y, X.transpose([a - 1 for a in axis[1:]]))  # C, H, W are 1, 2, 3 of [Seq, C, H, W]
    same(y, onnx_oracle(b.spec, {"x": X})["y"][0])


@pytest.mark.parametrize("axis,perm5", [((3, 1, 2, 0), (4, 1, 2, 3, 0)), ((0, 3, 2, 1), (0, 1, 4, 3, 2)),
                                        ((2, 0, 1, 3), (3, 1, 0, 2, 4))])
def test_permute_sequence_axis(tmp_path, axis, perm5):
    """The spec's examples on [Seq, B, C, H, W]: [3, 1, 2, 0] gives [W, B, C, H, Seq]; B stays."""
    x = rand(2, 1, 3, 4, 5)
    b = builder([("x", x.shape)], ["y"], nd=True)
    b.add_permute("p", axis, "x", "y")
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], x.transpose(perm5))


def test_permute_empty_axis_is_identity(tmp_path):
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_permute("p", (0, 1, 2, 3), "x", "y")
    del layer(b.spec, "p").permute.axis[:]
    same(convert_run(b.spec, {"x": X}, tmp_path)["y"], X)


def test_concat_onnx(tmp_path):
    b = builder([("x", (2, 3, 4)), ("z", (1, 3, 4)), ("w", (3, 3, 4))], ["y"])
    b.add_elementwise("c", ["x", "z", "w"], "y", "CONCAT")
    feeds = {"x": X, "z": rand(1, 3, 4), "w": rand(3, 3, 4)}
    y = convert_run(b.spec, feeds, tmp_path)["y"]
    same(y, np.concatenate([feeds["x"], feeds["z"], feeds["w"]], axis=0))
    same(y, onnx_oracle(b.spec, feeds)["y"][0])


def test_concat_sequence_and_nd(tmp_path):
    """sequenceConcat joins along axis -5; without it an ND rank-4 input joins along -3."""
    b = builder([("a", (2, 1, 3, 1, 1)), ("c", (1, 1, 3, 1, 1)), ("p", (2, 2, 3, 4)), ("q", (2, 1, 3, 4))],
                ["s", "t"], nd=True)
    b.add_elementwise("sc", ["a", "c"], "s", "SEQUENCE_CONCAT")
    b.add_elementwise("cc", ["p", "q"], "t", "CONCAT")
    feeds = {"a": rand(2, 1, 3, 1, 1), "c": rand(1, 1, 3, 1, 1), "p": rand(2, 2, 3, 4), "q": rand(2, 1, 3, 4)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["s"], np.concatenate([feeds["a"], feeds["c"]], axis=0))
    same(out["t"], np.concatenate([feeds["p"], feeds["q"]], axis=1))


@pytest.mark.parametrize("n", [2, 3])
def test_split_onnx(tmp_path, n):
    x = rand(6, 2, 3)
    names = [f"y{i}" for i in range(n)]
    b = builder([("x", (6, 2, 3))], names)
    b.add_split("sp", "x", names)
    out = convert_run(b.spec, {"x": x}, tmp_path)
    oracle = onnx_oracle(b.spec, {"x": x})
    for name, part in zip(names, np.split(x, n, axis=0)):
        same(out[name], part)
        same(out[name], oracle[name][0])


def test_split_nd_rank4(tmp_path):
    x = rand(2, 4, 3, 1)
    b = builder([("x", x.shape)], ["y0", "y1"], nd=True)
    b.add_split("sp", "x", ["y0", "y1"])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["y0"], x[:, :2])
    same(out["y1"], x[:, 2:])


def test_sequence_repeat(tmp_path):
    """The whole sequence is repeated: [s0, s1, s0, s1, s0, s1] (numpy.tile along Seq)."""
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_sequence_repeat("sr", 3, "x", "y")
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    same(y, np.tile(X[None, None], (3, 1, 1, 1, 1)))
    same(y[:, 0], onnx_oracle(b.spec, {"x": X})["y"])
    x = rand(2, 1, 3, 1, 1)
    b = builder([("x", x.shape)], ["y"], nd=True)
    b.add_sequence_repeat("sr", 3, "x", "y")
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], np.concatenate([x, x, x], axis=0))


SLICES = [("channel", 0, -1, 1), ("channel", 1, 2, 1), ("height", 1, 3, 1), ("width", -3, -1, 1),
          ("width", 0, 4, 2), ("width", 1, 100, 2), ("height", -1, 3, 1), ("channel", -2, 2, 1)]


@pytest.mark.parametrize("axis,start,end,stride", SLICES)
def test_slice(tmp_path, axis, start, end, stride):
    """x[start:end:stride] with numpy's reading of negative indices (-1 is N-1, exclusive)."""
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_slice("s", "x", "y", axis, max(start, 0), end, stride)
    layer(b.spec, "s").slice.startIndex = start  # the builder refuses negative starts; the spec allows them
    y = convert_run(b.spec, {"x": X}, tmp_path)["y"]
    ax = {"channel": 0, "height": 1, "width": 2}[axis]
    index = [slice(None)] * 3
    index[ax] = slice(start, end, stride)
    want = X[tuple(index)]
    same(y, want)
    if stride == 1:
        # onnxmltools slices the other two axes with end = -1 (ONNX: stop before the last element)
        cut = [slice(None, -1)] * 3
        cut[ax] = slice(None)
        same(onnx_oracle(b.spec, {"x": X})["y"][0], want[tuple(cut)])


def test_slice_nd_rank2_height(tmp_path):
    x = rand(5, 3)
    b = builder([("x", x.shape)], ["y"], nd=True)
    b.add_slice("s", "x", "y", "height", 1, -1, 2)
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], x[1:-1:2])


# =============================================================================================
# ND: permutations, joins, splits, repeats


def test_transpose(tmp_path):
    x = rand(2, 3, 4, 5)
    b = builder([("x", x.shape)], ["y"], nd=True)
    b.add_transpose("t", [2, 0, 3, 1], "x", "y")
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], x.transpose(2, 0, 3, 1))


def test_tile(tmp_path):
    """reps shorter than the rank get leading 1s; a second input replaces reps."""
    x = rand(2, 3, 2)
    b = builder([("x", x.shape), ("r", (2,))], ["y", "z", "w"], nd=True)
    b.add_tile("t1", "x", "y", [2, 1, 3])
    b.add_tile("t2", "x", "z", [3])
    b.add_tile("t3", ["x", "r"], "w")
    out = convert_run(b.spec, {"x": x, "r": np.array([2, 3], np.float32)}, tmp_path)
    same(out["y"], np.tile(x, (2, 1, 3)))
    same(out["z"], np.tile(x, (1, 1, 3)))
    same(out["w"], np.tile(x, (1, 2, 3)))


def test_stack(tmp_path):
    xs = [rand(2, 4, 2) for _ in range(3)]
    b = builder([(f"x{i}", (2, 4, 2)) for i in range(3)], ["y", "z"], nd=True)
    b.add_stack("s", ["x0", "x1", "x2"], "y", axis=-2)
    b.add_stack("s2", ["x0", "x1"], "z", axis=3)
    out = convert_run(b.spec, {f"x{i}": v for i, v in enumerate(xs)}, tmp_path)
    same(out["y"], np.stack(xs, axis=-2))
    same(out["z"], np.stack(xs[:2], axis=3))


@pytest.mark.parametrize("interleave", [False, True])
def test_concat_nd(tmp_path, interleave):
    """interleave takes x1[0], x2[0], x3[0], x1[1], ... along the axis (equal shapes)."""
    xs = [rand(2, 3, 2) for _ in range(3)]
    b = builder([(f"x{i}", (2, 3, 2)) for i in range(3)], ["y"], nd=True)
    b.add_concat_nd("c", ["x0", "x1", "x2"], "y", axis=-2, interleave=interleave)
    y = convert_run(b.spec, {f"x{i}": v for i, v in enumerate(xs)}, tmp_path)["y"]
    if interleave:
        want = np.empty((2, 9, 2), np.float32)
        for j in range(3):
            for i, v in enumerate(xs):
                want[:, 3 * j + i] = v[:, j]
    else:
        want = np.concatenate(xs, axis=1)
    same(y, want)


def test_split_nd(tmp_path):
    x = rand(6, 3, 6)
    b = builder([("x", x.shape)], ["a0", "a1", "a2", "b0", "b1", "b2"], nd=True)
    b.add_split_nd("s1", "x", ["a0", "a1", "a2"], axis=-1, num_splits=3)
    b.add_split_nd("s2", "x", ["b0", "b1", "b2"], axis=0, split_sizes=[1, 3, 2])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    for i, part in enumerate(np.split(x, 3, axis=-1)):
        same(out[f"a{i}"], part)
    for i, part in enumerate(np.split(x, [1, 4], axis=0)):
        same(out[f"b{i}"], part)


# =============================================================================================
# ND: rank changes and reshapes


def test_squeeze(tmp_path):
    x = rand(1, 3, 1, 4)
    b = builder([("x", x.shape), ("o", (1,)), ("u", (1, 1))], ["y", "z", "w", "v", "t"], nd=True)
    b.add_squeeze("s1", "x", "y", axes=[0, -2])
    b.add_squeeze("s2", "x", "z", squeeze_all=True)
    b.add_squeeze("s3", "x", "w", axes=[2])
    b.add_squeeze("s4", "o", "v", axes=[0])  # rank 1 stays rank 1
    b.add_squeeze("s5", "u", "t", squeeze_all=True)  # nothing left: [1]
    feeds = {"x": x, "o": rand(1), "u": rand(1, 1)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["y"], x.reshape(3, 4))
    same(out["z"], x.reshape(3, 4))
    same(out["w"], x.reshape(1, 3, 4))
    same(out["v"], feeds["o"])
    same(out["t"], feeds["u"].reshape(1))


def test_squeeze_symbolic_axis(tmp_path):
    """A listed axis whose size is flexible is 1 at run time: it is squeezed."""
    x = rand(2, 1, 3)
    b = builder([("x", (2, 1, 3))], ["y"], nd=True)
    b.add_squeeze("s", "x", "y", axes=[1])
    flexible(b.spec, "x", [1, 1, 3], [4, 2, 3])
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], x.reshape(2, 3))


def test_expand_dims(tmp_path):
    x = rand(3, 4)
    b = builder([("x", x.shape)], ["y", "z"], nd=True)
    b.add_expand_dims("e1", "x", "y", axes=[0, -1])
    b.add_expand_dims("e2", "x", "z", axes=[-2, -1])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["y"], x.reshape(1, 3, 4, 1))
    same(out["z"], x.reshape(3, 4, 1, 1))


@pytest.mark.parametrize("shape,axis,want", [((2, 3, 4), 2, (6, 4)), ((2, 3, 4), -1, (6, 4)), ((2, 3, 4), 0, (1, 24)),
                                             ((3,), -1, (1, 3)), ((3,), 1, (3, 1)), ((5, 5, 3), -2, (5, 15))])
def test_flatten_to_2d(tmp_path, shape, axis, want):
    x = rand(*shape)
    b = builder([("x", shape)], ["y"], nd=True)
    b.add_flatten_to_2d("f", "x", "y", axis=axis)
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], x.reshape(want))


def test_reshapes(tmp_path):
    x = rand(2, 3, 4)
    b = builder([("x", x.shape), ("ref", (6, 4)), ("s", (2,))], ["a", "c", "d", "e"], nd=True)
    b.add_reshape_static("rs", "x", "a", [4, -1])
    b.add_reshape_like("rl", ["x", "ref"], "c")
    b.add_reshape_dynamic("rd", ["x", "s"], "d")
    b.add_rank_preserving_reshape("rp", "x", "e", [0, 4, -1])
    out = convert_run(b.spec, {"x": x, "ref": rand(6, 4), "s": np.array([3, 8], np.float32)}, tmp_path)
    same(out["a"], x.reshape(4, 6))
    same(out["c"], x.reshape(6, 4))
    same(out["d"], x.reshape(3, 8))
    same(out["e"], x.reshape(2, 4, 3))


def test_rank_preserving_reshape_spec_examples(tmp_path):
    b = builder([("p", (20, 10)), ("q", (20, 10, 5)), ("r", (10, 3, 5))], ["a", "c", "d"], nd=True)
    b.add_rank_preserving_reshape("r1", "p", "a", [5, -1])
    b.add_rank_preserving_reshape("r2", "q", "c", [0, 2, 25])
    b.add_rank_preserving_reshape("r3", "r", "d", [25, 0, -1])
    feeds = {"p": rand(20, 10), "q": rand(20, 10, 5), "r": rand(10, 3, 5)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["a"], feeds["p"].reshape(5, 40))
    same(out["c"], feeds["q"].reshape(20, 2, 25))
    same(out["d"], feeds["r"].reshape(25, 3, 2))


def test_get_shape(tmp_path):
    b = builder([("x", (2, 3, 4))], ["y"], nd=True)
    b.add_get_shape("g", "x", "y")
    flexible(b.spec, "x", [1, 3, 1], [5, 3, 8])
    same(convert_run(b.spec, {"x": rand(4, 3, 6)}, tmp_path)["y"], np.array([4, 3, 6]))


def test_reshape_like_flexible(tmp_path):
    x = rand(3, 8)
    b = builder([("x", (3, 8)), ("ref", (2, 12))], ["y"], nd=True)
    b.add_reshape_like("rl", ["x", "ref"], "y")
    flexible(b.spec, "ref", [1, 1], [24, 24])
    same(convert_run(b.spec, {"x": x, "ref": rand(4, 6)}, tmp_path)["y"], x.reshape(4, 6))


# =============================================================================================
# ND: generated tensors, broadcasting, padding, ranges


def test_fills(tmp_path):
    b = builder([("x", (2, 3)), ("s", (3,))], ["a", "c", "d"], nd=True)
    b.add_fill_like("fl", "x", "a", value=2.5)
    b.add_fill_static("fs", "c", [2, 1, 3], value=-1.5)
    b.add_fill_dynamic("fd", "s", "d", value=4.0)
    out = convert_run(b.spec, {"x": rand(2, 3), "s": np.array([1, 3, 2], np.float32)}, tmp_path)
    same(out["a"], np.full((2, 3), 2.5))
    same(out["c"], np.full((2, 1, 3), -1.5))
    same(out["d"], np.full((1, 3, 2), 4.0))


def test_fill_like_flexible(tmp_path):
    b = builder([("x", (2, 3))], ["y"], nd=True)
    b.add_fill_like("fl", "x", "y", value=0.25)
    flexible(b.spec, "x", [1, 1], [6, 6])
    same(convert_run(b.spec, {"x": rand(5, 2)}, tmp_path)["y"], np.full((5, 2), 0.25))


def test_broadcast_to(tmp_path):
    x = rand(3, 1)
    b = builder([("x", (3, 1)), ("ref", (2, 3, 4)), ("s", (3,))], ["a", "c", "d"], nd=True)
    b.add_broadcast_to_like("bl", ["x", "ref"], "a")
    b.add_broadcast_to_static("bs", "x", "c", [2, 3, 5])
    b.add_broadcast_to_dynamic("bd", ["x", "s"], "d")
    out = convert_run(b.spec, {"x": x, "ref": rand(2, 3, 4), "s": np.array([4, 3, 2], np.float32)}, tmp_path)
    same(out["a"], np.broadcast_to(x, (2, 3, 4)))
    same(out["c"], np.broadcast_to(x, (2, 3, 5)))
    same(out["d"], np.broadcast_to(x, (4, 3, 2)))


def test_broadcast_to_like_flexible(tmp_path):
    x = rand(1, 4)
    b = builder([("x", (1, 4)), ("ref", (3, 4))], ["y"], nd=True)
    b.add_broadcast_to_like("bl", ["x", "ref"], "y")
    flexible(b.spec, "ref", [1, 4], [8, 4])
    flexible(b.spec, "x", [1, 1], [1, 4])
    same(convert_run(b.spec, {"x": x, "ref": rand(6, 4)}, tmp_path)["y"], np.broadcast_to(x, (6, 4)))


def test_constant_pad(tmp_path):
    """padAmounts: (before, after) per dim; padToGivenOutputSizeMode: the non-zero entry of a
    pair is the wanted size, reached by padding on that side (never shrinking)."""
    x = rand(2, 3)
    b = builder([("x", (2, 3)), ("p", (4,))], ["a", "c", "d", "e"], nd=True)
    b.add_constant_pad("p1", ["x"], "a", value=7.0, pad_amounts=[0, 1, 2, 0])
    b.add_constant_pad("p2", ["x"], "c", value=-1.0, pad_to_given_output_size_mode=True, pad_amounts=[0, 4, 5, 0])
    b.add_constant_pad("p3", ["x"], "d", pad_to_given_output_size_mode=True, pad_amounts=[1, 0, 0, 2])
    b.add_constant_pad("p4", ["x", "p"], "e", value=3.0)
    out = convert_run(b.spec, {"x": x, "p": np.array([1, 0, 0, 2], np.float32)}, tmp_path)
    same(out["a"], np.pad(x, [(0, 1), (2, 0)], constant_values=7.0))
    same(out["c"], np.pad(x, [(0, 2), (2, 0)], constant_values=-1.0))
    same(out["d"], x)
    same(out["e"], np.pad(x, [(1, 0), (0, 2)], constant_values=3.0))


def test_constant_pad_spec_examples(tmp_path):
    b = builder([("p", (20, 10)), ("q", (20, 10, 5))], ["a", "c", "d", "e"], nd=True)
    b.add_constant_pad("p1", ["p"], "a", pad_amounts=[0, 1, 4, 0])
    b.add_constant_pad("p2", ["q"], "c", pad_amounts=[0, 0, 3, 4, 0, 9])
    b.add_constant_pad("p3", ["p"], "d", pad_to_given_output_size_mode=True, pad_amounts=[0, 21, 14, 0])
    b.add_constant_pad("p4", ["q"], "e", pad_to_given_output_size_mode=True, pad_amounts=[0, 0, 17, 0, 0, 14])
    out = convert_run(b.spec, {"p": rand(20, 10), "q": rand(20, 10, 5)}, tmp_path)
    assert [out[k].shape for k in "acde"] == [(21, 14), (20, 17, 14), (21, 14), (20, 17, 14)]


def test_constant_pad_to_size_flexible(tmp_path):
    x = rand(3, 2)
    b = builder([("x", (3, 2))], ["y"], nd=True)
    b.add_constant_pad("p", ["x"], "y", value=1.0, pad_to_given_output_size_mode=True, pad_amounts=[5, 0, 0, 4])
    flexible(b.spec, "x", [1, 1], [8, 8])
    same(convert_run(b.spec, {"x": x}, tmp_path)["y"], np.pad(x, [(2, 0), (0, 2)], constant_values=1.0))


def test_ranges(tmp_path):
    """numpy.arange; rangeDynamic's inputs are end, start, step in that order."""
    b = builder([("e", (1,)), ("s", (1,)), ("t", (1,))], ["a", "c", "d", "f"], nd=True)
    b.add_range_static("rs", "a", end=6.0, start=1.5, step=1.25)
    b.add_range_dynamic("r1", ["e"], "c", start=1.0, step=2.0)
    b.add_range_dynamic("r2", ["e", "s"], "d", step=0.5)
    b.add_range_dynamic("r3", ["e", "s", "t"], "f")
    feeds = {"e": np.array([7.0], np.float32), "s": np.array([2.0], np.float32), "t": np.array([1.5], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    close(out["a"], np.arange(1.5, 6.0, 1.25, dtype=np.float32))
    close(out["c"], np.arange(1.0, 7.0, 2.0, dtype=np.float32))
    close(out["d"], np.arange(2.0, 7.0, 0.5, dtype=np.float32))
    close(out["f"], np.arange(2.0, 7.0, 1.5, dtype=np.float32))


# =============================================================================================
# ND: gathers and scatters


def _scatter_op(mode: str):
    return {"UPDATE": lambda a, u: u, "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
            "MAX": np.maximum, "MIN": np.minimum}[mode]


def scatter_ref(data, indices, updates, axis, mode):
    """output = container; for every position of updates (row-major), the container element at
    indices[...] along ``axis`` is combined with the update (the spec's loop)."""
    out = data.copy()
    idx = indices.astype(np.int64)
    k = idx.ndim
    op = _scatter_op(mode)
    for pos in np.ndindex(updates.shape):
        dest = pos[:axis] + (idx[pos[axis:axis + k]],) + pos[axis + k:]
        out[dest] = op(out[dest], updates[pos])
    return out


def test_gather(tmp_path):
    data = rand(4, 3, 5)
    idx = np.array([[0, -1], [2, 1]], np.float32)
    b = builder([("d", data.shape), ("i", idx.shape)], ["a", "c"], nd=True)
    b.add_gather("g0", ["d", "i"], "a", axis=0)
    b.add_gather("g1", ["d", "i"], "c", axis=-2)
    out = convert_run(b.spec, {"d": data, "i": idx}, tmp_path)
    same(out["a"], np.take(data, idx.astype(int), axis=0))
    same(out["c"], np.take(data, idx.astype(int), axis=1))


@pytest.mark.parametrize("mode", ["UPDATE", "ADD", "SUB", "MUL", "DIV", "MAX", "MIN"])
def test_scatter_modes(tmp_path, mode):
    data = rand(4, 3)
    idx = np.array([1, -1, 1], np.float32)  # a repeated row: modes accumulate, UPDATE keeps the last
    upd = rand(3, 3)
    b = builder([("d", data.shape), ("i", idx.shape), ("u", upd.shape)], ["y"], nd=True)
    b.add_scatter("s", ["d", "i", "u"], "y", axis=0, mode=mode)
    y = convert_run(b.spec, {"d": data, "i": idx, "u": upd}, tmp_path)["y"]
    close(y, scatter_ref(data, idx, upd, 0, mode))


def test_scatter_multi_dim_indices(tmp_path):
    """The spec's example shapes: container (4, 3), indices (5, 2, 3), updates (4, 5, 2, 3),
    axis 1; and indices of rank 2 along the last axis."""
    data = rand(4, 3)
    idx = RNG.integers(-3, 3, (5, 2, 3)).astype(np.float32)
    upd = rand(4, 5, 2, 3)
    b = builder([("d", data.shape), ("i", idx.shape), ("u", upd.shape)], ["y"], nd=True)
    b.add_scatter("s", ["d", "i", "u"], "y", axis=1, mode="ADD")
    close(convert_run(b.spec, {"d": data, "i": idx, "u": upd}, tmp_path)["y"], scatter_ref(data, idx, upd, 1, "ADD"))
    data = rand(3, 4, 5)
    idx = np.array([[4, 0], [2, 4]], np.float32)
    upd = rand(3, 4, 2, 2)
    b = builder([("d", data.shape), ("i", idx.shape), ("u", upd.shape)], ["y"], nd=True)
    b.add_scatter("s", ["d", "i", "u"], "y", axis=-1, mode="UPDATE")
    close(convert_run(b.spec, {"d": data, "i": idx, "u": upd}, tmp_path)["y"],
          scatter_ref(data, idx, upd, 2, "UPDATE"))


def test_gather_nd(tmp_path):
    """output[i, ..., j, :] = params[indices[i, ..., j, :], :] (the spec's example shapes)."""
    cases = [((4, 2, 3, 4), (6, 2)), ((3, 3, 3, 4, 7), (3, 5)), ((5, 3, 2, 5), (2, 7, 3, 2))]
    for pshape, ishape in cases:
        params = rand(*pshape)
        k = ishape[-1]
        idx = np.stack([RNG.integers(0, pshape[j], ishape[:-1]) for j in range(k)], axis=-1).astype(np.float32)
        b = builder([("p", pshape), ("i", ishape)], ["y"], nd=True)
        b.add_gather_nd("g", ["p", "i"], "y")
        y = convert_run(b.spec, {"p": params, "i": idx}, tmp_path)["y"]
        want = np.empty(ishape[:-1] + pshape[k:], np.float32)
        for pos in np.ndindex(ishape[:-1]):
            want[pos] = params[tuple(idx[pos].astype(int))]
        same(y, want)


@pytest.mark.parametrize("mode", ["UPDATE", "ADD", "MUL", "MAX"])
def test_scatter_nd(tmp_path, mode):
    """output[indices[i, ..., j, :], ...] (mode)= updates[i, ..., j, ...] (the spec's examples)."""
    for cshape, ishape in [((3, 2), (4, 2)), ((7, 6), (4, 7, 2, 5, 1))]:
        data = rand(*cshape)
        k = ishape[-1]
        idx = np.stack([RNG.integers(0, cshape[j], ishape[:-1]) for j in range(k)], axis=-1).astype(np.float32)
        upd = rand(*(ishape[:-1] + cshape[k:]))
        b = builder([("d", cshape), ("i", ishape), ("u", upd.shape)], ["y"], nd=True)
        b.add_scatter_nd("s", ["d", "i", "u"], "y", mode=mode)
        y = convert_run(b.spec, {"d": data, "i": idx, "u": upd}, tmp_path)["y"]
        want = data.copy()
        op = _scatter_op(mode)
        for pos in np.ndindex(ishape[:-1]):
            row = tuple(idx[pos].astype(int))
            want[row] = op(want[row], upd[pos])
        close(y, want)


def test_gather_along_axis(tmp_path):
    data = rand(4, 4, 7)
    idx = RNG.integers(-4, 4, (4, 5, 7)).astype(np.float32)
    b = builder([("d", data.shape), ("i", idx.shape)], ["y"], nd=True)
    b.add_gather_along_axis("g", ["d", "i"], "y", axis=1)
    y = convert_run(b.spec, {"d": data, "i": idx}, tmp_path)["y"]
    same(y, np.take_along_axis(data, idx.astype(int) % 4, axis=1))


@pytest.mark.parametrize("mode", ["UPDATE", "ADD", "SUB", "DIV", "MIN"])
def test_scatter_along_axis(tmp_path, mode):
    """output[..., indices[i, j, k], ...] (mode)= updates[i, j, k] along axis (the spec's shapes)."""
    data = rand(2, 5, 6)
    idx = RNG.integers(-5, 5, (2, 2, 6)).astype(np.float32)
    upd = rand(2, 2, 6)
    b = builder([("d", data.shape), ("i", idx.shape), ("u", upd.shape)], ["y"], nd=True)
    b.add_scatter_along_axis("s", ["d", "i", "u"], "y", axis=-2, mode=mode)
    y = convert_run(b.spec, {"d": data, "i": idx, "u": upd}, tmp_path)["y"]
    want = data.copy()
    op = _scatter_op(mode)
    for pos in np.ndindex(idx.shape):
        dest = (pos[0], int(idx[pos]), pos[2])
        want[dest] = op(want[dest], upd[pos])
    close(y, want)


# =============================================================================================
# ND: reversal, non-zero, one-hot, band parts


def test_reverse(tmp_path):
    x = rand(2, 3, 4)
    b = builder([("x", x.shape)], ["y", "z"], nd=True)
    b.add_reverse("r", "x", "y", reverse_dim=[True, False, True])
    b.add_reverse("r2", "x", "z", reverse_dim=[False, False, False])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["y"], x[::-1, :, ::-1])
    same(out["z"], x)


def test_reverse_seq_spec_examples(tmp_path):
    b = builder([("d", (2, 4)), ("l", (2,)), ("e", (2, 3, 2)), ("m", (2,))], ["y", "z"], nd=True)
    b.add_reverse_sequence("r1", ["d", "l"], "y", batch_axis=0, seq_axis=1)
    b.add_reverse_sequence("r2", ["e", "m"], "z", batch_axis=0, seq_axis=1)
    feeds = {"d": np.arange(8, dtype=np.float32).reshape(2, 4), "l": np.array([3, 0], np.float32),
             "e": np.arange(12, dtype=np.float32).reshape(2, 3, 2), "m": np.array([2, 3], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["y"], [[2, 1, 0, 3], [4, 5, 6, 7]])
    same(out["z"], [[[2, 3], [0, 1], [4, 5]], [[10, 11], [8, 9], [6, 7]]])


def test_reverse_seq_batch_after_seq(tmp_path):
    x = rand(5, 3, 2)
    lengths = np.array([5, 1, 3], np.float32)
    b = builder([("x", x.shape), ("l", (3,))], ["y"], nd=True)
    b.add_reverse_sequence("r", ["x", "l"], "y", batch_axis=1, seq_axis=0)
    y = convert_run(b.spec, {"x": x, "l": lengths}, tmp_path)["y"]
    want = x.copy()
    for j, n in enumerate(lengths.astype(int)):
        want[:n, j] = x[:n, j][::-1]
    same(y, want)


def test_where_non_zero(tmp_path):
    b = builder([("x", (3, 3)), ("v", (4,))], ["y", "z"], nd=True)
    b.add_where_nonzero("w", "x", "y")
    b.add_where_nonzero("w2", "v", "z")
    feeds = {"x": np.array([[1, 2, 1], [0, 2, 2], [2, 1, 0]], np.float32), "v": np.array([0, 1, 0, 2], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["y"], [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2], [2, 0], [2, 1]])  # the spec's example
    same(out["z"], [[1], [3]])


def test_one_hot(tmp_path):
    """onValue at the index, offValue elsewhere, all offValue for an index outside [0, size)."""
    idx = np.array([[2, 0, -1], [3, 1, 7]], np.float32)
    b = builder([("i", idx.shape), ("n", (1,))], ["a", "c", "d"], nd=True)
    b.add_one_hot("o1", ["i"], "a", one_hot_vector_size=4, axis=-1, on_value=5.0, off_value=-1.0)
    b.add_one_hot("o2", ["i"], "c", one_hot_vector_size=4, axis=1)
    b.add_one_hot("o3", ["i", "n"], "d", axis=0, on_value=2.0)
    out = convert_run(b.spec, {"i": idx, "n": np.array([3], np.float32)}, tmp_path)

    def ref(size, axis, on, off):
        hot = np.where(idx.astype(int)[..., None] == np.arange(size), on, off).astype(np.float32)
        return np.moveaxis(hot, -1, axis)

    same(out["a"], ref(4, -1, 5.0, -1.0))
    same(out["c"], ref(4, 1, 1.0, 0.0))
    same(out["d"], ref(3, 0, 2.0, 0.0))
    same(out["a"][0, :2], [[-1, -1, 5, -1], [5, -1, -1, -1]])  # the spec's example rows


def test_band_parts(tmp_path):
    x = rand(2, 4, 5)
    x[0, 3, 0] = np.nan  # outside every band below: replaced by 0, not multiplied
    b = builder([("x", x.shape)], ["a", "c", "u0", "u2", "un", "l0", "l1", "ln"], nd=True)
    b.add_matrix_band_part("b1", "x", "a", num_lower=1, num_upper=2)
    b.add_matrix_band_part("b2", "x", "c", num_lower=-1, num_upper=0)
    b.add_upper_triangular("ut0", "x", "u0", k=0)
    b.add_upper_triangular("ut2", "x", "u2", k=2)
    b.add_upper_triangular("utn", "x", "un", k=-1)
    b.add_lower_triangular("lt0", "x", "l0", k=0)
    b.add_lower_triangular("lt1", "x", "l1", k=1)
    b.add_lower_triangular("ltn", "x", "ln", k=-2)
    out = convert_run(b.spec, {"x": x}, tmp_path)
    m = np.arange(4)[:, None]
    n = np.arange(5)[None, :]
    keep = lambda mask: np.where(mask, x, 0).astype(np.float32)  # noqa: E731
    same(out["a"], keep((m - n <= 1) & (n - m <= 2)))
    same(out["c"], keep(n - m <= 0))
    same(out["u0"], keep(np.triu(np.ones((4, 5), bool), 0)))
    same(out["u2"], keep(np.triu(np.ones((4, 5), bool), 2)))
    same(out["un"], keep(np.triu(np.ones((4, 5), bool), -1)))
    same(out["l0"], keep(np.tril(np.ones((4, 5), bool), 0)))
    same(out["l1"], keep(np.tril(np.ones((4, 5), bool), 1)))
    same(out["ln"], keep(np.tril(np.ones((4, 5), bool), -2)))


def test_triangular_flexible(tmp_path):
    x = rand(3, 5)
    b = builder([("x", (3, 5))], ["u", "l"], nd=True)
    b.add_upper_triangular("ut", "x", "u", k=1)
    b.add_lower_triangular("lt", "x", "l", k=-1)
    flexible(b.spec, "x", [1, 1], [6, 6])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["u"], np.triu(x, 1))
    same(out["l"], np.tril(x, -1))


# =============================================================================================
# ND: sorting and arg-reductions


@pytest.mark.parametrize("axis,k,bottom", [(1, 2, False), (1, 3, True), (0, 1, False), (-1, 5, True)])
def test_top_k(tmp_path, axis, k, bottom):
    x = distinct(3, 5)
    b = builder([("x", x.shape)], ["v", "i"], nd=True)
    b.add_topk("t", ["x"], ["v", "i"], k=k, axis=axis, use_bottom_k=bottom)
    out = convert_run(b.spec, {"x": x}, tmp_path)
    order = np.argsort(x if bottom else -x, axis=axis)
    idx = np.take(order, np.arange(k), axis=axis)
    same(out["i"], idx)
    same(out["v"], np.take_along_axis(x, idx, axis=axis))


def test_top_k_dynamic_and_const_k(tmp_path):
    """A second input replaces K: a run-time K (model input), and a constant one."""
    x = distinct(4, 6)
    b = builder([("x", x.shape), ("k", (1,))], ["v", "i", "cv", "ci"], nd=True)
    b.add_topk("t", ["x", "k"], ["v", "i"], axis=-1)
    b.add_load_constant_nd("kc", "kconst", np.array([2.0]), (1,))
    b.add_topk("t2", ["x", "kconst"], ["cv", "ci"], k=5, axis=0, use_bottom_k=True)
    out = convert_run(b.spec, {"x": x, "k": np.array([3], np.float32)}, tmp_path)
    assert {"argsort", "topk"} <= op_types(load_spec(b.spec, tmp_path))  # run-time K: argsort; constant K: topk
    idx = np.argsort(-x, axis=1)[:, :3]
    same(out["i"], idx)
    same(out["v"], np.take_along_axis(x, idx, axis=1))
    idx = np.argsort(x, axis=0)[:2]
    same(out["ci"], idx)
    same(out["cv"], np.take_along_axis(x, idx, axis=0))


def test_top_k_fp16_constant_k(tmp_path):
    """K stored as an fp16 constant (a const and a cast) is still a compile-time K."""
    x = distinct(2, 5)
    b = builder([("x", x.shape)], ["v", "i"], nd=True)
    b.add_load_constant_nd("kc", "kconst", np.array([2.0]), (1,))
    data = layer(b.spec, "kc").loadConstantND.data
    del data.floatValue[:]
    data.float16Value = np.array([2.0], np.float16).tobytes()
    b.add_topk("t", ["x", "kconst"], ["v", "i"], axis=1)
    assert "argsort" not in op_types(load_spec(b.spec, tmp_path))
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["i"], np.argsort(-x, axis=1)[:, :2])


def test_arg_max_min(tmp_path):
    x = distinct(3, 4, 5)
    v = distinct(5)
    b = builder([("x", x.shape), ("v", (5,))], ["a", "c", "d", "e", "f"], nd=True)
    b.add_argmax("m1", "x", "a", axis=-2, keepdims=True)
    b.add_argmax("m2", "x", "c", axis=-2, keepdims=False)
    b.add_argmin("m3", "x", "d", axis=0, keepdims=False)
    b.add_argmin("m4", "x", "e", axis=2, keepdims=True)
    b.add_argmax("m5", "v", "f", axis=0, keepdims=False)  # rank 1 keeps its dim
    out = convert_run(b.spec, {"x": x, "v": v}, tmp_path)
    same(out["a"], np.argmax(x, axis=1)[:, None])
    same(out["c"], np.argmax(x, axis=1))
    same(out["d"], np.argmin(x, axis=0))
    same(out["e"], np.argmin(x, axis=2)[..., None])
    same(out["f"], [np.argmax(v)])


def test_arg_sort(tmp_path):
    b = builder([("x", (2, 3)), ("v", (5,))], ["a", "c", "d", "e"], nd=True)
    b.add_argsort("s1", "x", "a", axis=1)
    b.add_argsort("s2", "x", "c", axis=1, descending=True)
    b.add_argsort("s3", "v", "d", axis=0)
    b.add_argsort("s4", "v", "e", axis=0, descending=True)
    feeds = {"x": np.array([[3, 5, 32], [3, 77, 6]], np.float32),
             "v": np.array([3.1, 5.4, 32.9, 3.2, 77.0], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    same(out["a"], [[0, 1, 2], [0, 2, 1]])  # the spec's examples
    same(out["c"], [[2, 1, 0], [1, 2, 0]])
    same(out["d"], [0, 3, 1, 2, 4])
    same(out["e"], [4, 2, 1, 3, 0])


def test_cum_sum_spec_example(tmp_path):
    b = builder([("x", (3,))], ["a", "c", "d", "e"], nd=True)
    for name, exclusive, reverse in (("a", False, False), ("c", True, False), ("d", False, True), ("e", True, True)):
        b.add_cumsum(f"cs_{name}", ["x"], name, axis=0, reverse=reverse, exclusive=exclusive)
    out = convert_run(b.spec, {"x": np.array([4, 6, 7], np.float32)}, tmp_path)
    same(out["a"], [4, 10, 17])
    same(out["c"], [0, 4, 10])
    same(out["d"], [17, 13, 7])
    same(out["e"], [13, 7, 0])


def test_cum_sum_axes(tmp_path):
    """The axis field (negative counts from the end), and a second input replacing it: at run
    time (a model input) and as a constant."""
    x = rand(2, 3, 4)
    b = builder([("x", x.shape), ("ax", (1,))], ["a", "c", "d"], nd=True)
    b.add_cumsum("c1", ["x"], "a", axis=-2, exclusive=True)
    b.add_cumsum("c2", ["x", "ax"], "c", axis=0, reverse=True)
    b.add_load_constant_nd("axc", "axconst", np.array([2.0]), (1,))
    b.add_cumsum("c3", ["x", "axconst"], "d", axis=0)
    for ax in (1, -3):
        out = convert_run(b.spec, {"x": x, "ax": np.array([ax], np.float32)}, tmp_path)
        close(out["a"], np.cumsum(x, axis=1) - x)
        close(out["c"], np.flip(np.cumsum(np.flip(x, ax), axis=ax), ax))
        close(out["d"], np.cumsum(x, axis=2))


def nms_ref(boxes, scores, iou_thr, score_thr, max_boxes, per_class):
    """The spec: each box scores its best class; boxes under scoreThreshold are rejected; greedy
    in score order, a box is suppressed by a kept box (of its class with perClassSuppression)
    whose IoU exceeds iouThreshold; outputs padded with 0 (boxes, scores) and -1 (indices); no
    survivor gives the best box with count 1. Boxes are (x, y, width, height) around a center."""
    nb, n, c = scores.shape
    out_b = np.zeros((nb, max_boxes, 4), np.float32)
    out_s = np.zeros((nb, max_boxes, c), np.float32)
    out_i = np.full((nb, max_boxes), -1, np.float32)
    count = np.zeros(nb, np.float32)

    def iou(p, q):
        lo = np.maximum(p[:2] - p[2:] / 2, q[:2] - q[2:] / 2)
        hi = np.minimum(p[:2] + p[2:] / 2, q[:2] + q[2:] / 2)
        inter = np.prod(np.clip(hi - lo, 0, None))
        return inter / (np.prod(p[2:]) + np.prod(q[2:]) - inter)

    for bi in range(nb):
        best, cls = scores[bi].max(axis=1), scores[bi].argmax(axis=1)
        keep: list[int] = []
        for i in sorted(range(n), key=lambda j: -best[j]):
            if len(keep) == max_boxes or best[i] < score_thr:
                continue
            if any(iou(boxes[bi, i], boxes[bi, j]) > iou_thr for j in keep if not per_class or cls[j] == cls[i]):
                continue
            keep.append(i)
        keep = keep or [int(np.argmax(best))]
        out_b[bi, :len(keep)] = boxes[bi, keep]
        out_s[bi, :len(keep)] = scores[bi, keep]
        out_i[bi, :len(keep)] = keep
        count[bi] = len(keep)
    return out_b, out_s, out_i, count


NMS_BOXES = np.array([[[0, 0, 2, 2], [0.2, 0, 2, 2], [3, 3, 1, 1], [3.1, 3, 1, 1], [0, 0.1, 2, 2], [6, 6, 1, 1]],
                      [[1, 1, 1, 1], [1, 1, 1, 1], [5, 5, 2, 2], [5, 5.5, 2, 2], [9, 9, 1, 1], [1.2, 1, 1, 1]]],
                     np.float32)
NMS_SCORES = np.array([[[0.9, 0.1], [0.2, 0.8], [0.7, 0.0], [0.6, 0.1], [0.3, 0.5], [0.05, 0.02]],
                       [[0.1, 0.2], [0.3, 0.1], [0.25, 0.05], [0.1, 0.15], [0.02, 0.01], [0.2, 0.3]]], np.float32)


@pytest.mark.parametrize("iou,thr,max_boxes,per_class", [(0.5, 0.0, 4, False), (0.5, 0.0, 6, True),
                                                         (0.3, 0.4, 3, False), (0.5, 0.95, 2, False)])
def test_nms(tmp_path, iou, thr, max_boxes, per_class):
    names = ["ob", "os", "oi", "oc"]
    b = builder([("boxes", NMS_BOXES.shape), ("scores", NMS_SCORES.shape)], names, nd=True)
    b.add_nms("nms", ["boxes", "scores"], names, iou_threshold=iou, score_threshold=thr, max_boxes=max_boxes,
              per_class_suppression=per_class)
    out = convert_run(b.spec, {"boxes": NMS_BOXES, "scores": NMS_SCORES}, tmp_path)
    for name, want in zip(names, nms_ref(NMS_BOXES, NMS_SCORES, iou, thr, max_boxes, per_class)):
        same(out[name], want)


def test_nms_constant_inputs_override(tmp_path):
    """Inputs 3-5 (constants here) replace iouThreshold, scoreThreshold and maxBoxes."""
    names = ["ob", "os", "oi", "oc"]
    b = builder([("boxes", NMS_BOXES.shape), ("scores", NMS_SCORES.shape)], names, nd=True)
    for name, val in (("iou", 0.3), ("thr", 0.25), ("mb", 3.0)):
        b.add_load_constant_nd(name, name, np.array([val]), (1,))
    b.add_nms("nms", ["boxes", "scores", "iou", "thr", "mb"], names, iou_threshold=0.9, score_threshold=0.0,
              max_boxes=6)
    out = convert_run(b.spec, {"boxes": NMS_BOXES, "scores": NMS_SCORES}, tmp_path)
    for name, want in zip(names, nms_ref(NMS_BOXES, NMS_SCORES, 0.3, 0.25, 3, False)):
        same(out[name], want)


# =============================================================================================
# ND: slices


def test_slice_static_spec_examples(tmp_path):
    x = rand(5, 5, 5)
    b = builder([("x", x.shape)], ["a", "c", "d"], nd=True)
    kw = dict(begin_ids=[1, 2, 3], end_ids=[3, -3, 2], strides=[2, 2, 2], begin_masks=[True, False, True],
              end_masks=[False, True, True])
    b.add_slice_static("s1", "x", "a", **kw)
    b.add_slice_static("s2", "x", "c", squeeze_masks=[False, True, False], **kw)
    b.add_slice_static("s3", "x", "d", begin_ids=[-1, 4, 0], end_ids=[0, 0, 5], strides=[-1, -2, 3],
                       begin_masks=[False, False, False], end_masks=[True, False, False])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["a"], x[:3:2, 2::2, ::2])
    same(out["c"], x[:3:2, 2, ::2])
    same(out["d"], x[-1::-1, 4:0:-2, 0:5:3])


def test_slice_static_squeeze_ignores_masks(tmp_path):
    """A squeezed dim takes beginIds[i] even when its begin mask is set; squeezing every dim
    leaves shape [1] (NeuralNetwork tensors have no rank 0)."""
    x = rand(4, 3)
    b = builder([("x", x.shape)], ["a", "c"], nd=True)
    b.add_slice_static("s1", "x", "a", begin_ids=[2, 0], end_ids=[0, 3], strides=[-1, 1], begin_masks=[True, False],
                       end_masks=[False, False], squeeze_masks=[True, False])
    b.add_slice_static("s2", "x", "c", begin_ids=[-1, 1], end_ids=[0, 0], strides=[1, 1], begin_masks=[False, False],
                       end_masks=[False, False], squeeze_masks=[True, True])
    out = convert_run(b.spec, {"x": x}, tmp_path)
    same(out["a"], x[2, 0:3])
    same(out["c"], x[-1, 1].reshape(1))


def test_slice_dynamic_variants(tmp_path):
    """Begin ids from input 2; input 3 replaces endIds; inputs 4-7 (constants) replace strides
    and the masks."""
    x = rand(5, 6)
    b = builder([("x", x.shape), ("b", (2,)), ("e", (2,))], ["a", "c", "d"], nd=True)
    b.add_slice_dynamic("s1", ["x", "b"], "a", end_ids=[4, -1], strides=[1, 2], begin_masks=[False, False],
                        end_masks=[False, True])
    b.add_slice_dynamic("s2", ["x", "b", "e"], "c", end_ids=[0, 0], strides=[2, 1], begin_masks=[False, False],
                        end_masks=[False, False])
    for name, val in (("st", [-1, 1]), ("bm", [0, 1]), ("em", [1, 0]), ("sq", [0, 0])):
        b.add_load_constant_nd(name, name, np.array(val, np.float64), (2,))
    b.add_slice_dynamic("s3", ["x", "b", "e", "st", "bm", "em", "sq"], "d", end_ids=[9, 9], strides=[5, 5],
                        begin_masks=[True, True], end_masks=[True, True])
    out = convert_run(b.spec, {"x": x, "b": np.array([1, 2], np.float32), "e": np.array([4, -1], np.float32)},
                      tmp_path)
    same(out["a"], x[1:4, 2::2])
    same(out["c"], x[1:4:2, 2:-1])
    same(out["d"], x[1::-1, :-1])


def test_slice_dynamic_squeeze(tmp_path):
    x = rand(5, 6)
    b = builder([("x", x.shape), ("b", (2,))], ["a"], nd=True)
    b.add_slice_dynamic("s", ["x", "b"], "a", end_ids=[0, 6], strides=[1, 1], begin_masks=[False, False],
                        end_masks=[False, False], squeeze_masks=[True, False])
    same(convert_run(b.spec, {"x": x, "b": np.array([-2, 1], np.float32)}, tmp_path)["a"], x[-2, 1:6])


def test_slice_by_size(tmp_path):
    x = rand(2, 5, 4)
    b = builder([("x", x.shape), ("b", (1,))], ["a", "c"], nd=True)
    b.add_slice_by_size("s1", ["x", "b"], "a", axis=1, size=3)
    b.add_load_constant_nd("bc", "bconst", np.array([1.0]), (1,))
    b.add_slice_by_size("s2", ["x", "bconst"], "c", axis=-1, size=2)
    out = convert_run(b.spec, {"x": x, "b": np.array([2], np.float32)}, tmp_path)
    same(out["a"], x[:, 2:5, :])
    same(out["c"], x[:, :, 1:3])


# =============================================================================================
# malformed and unsupported layers


def test_malformed_classic(tmp_path):
    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_reshape("bad_reshape", "x", "y", (2, 3, 4), 0)
    layer(b.spec, "bad_reshape").reshape.targetShape.extend([1, 1])  # 5 entries
    assert_load_error(b.spec, tmp_path, "bad_reshape", ["targetShape"])

    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_reshape("bad_count", "x", "y", (5, 1, 1), 0)
    assert_load_error(b.spec, tmp_path, "bad_count", ["24 elements"])

    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_permute("bad_permute", [0, 1, 2, 3], "x", "y")
    layer(b.spec, "bad_permute").permute.axis[:] = [0, 1, 1, 3]
    assert_load_error(b.spec, tmp_path, "bad_permute", ["permutation"])

    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_slice("bad_slice", "x", "y", "width", 0, 2, 1)
    layer(b.spec, "bad_slice").slice.stride = 0
    assert_load_error(b.spec, tmp_path, "bad_slice", ["stride"])

    b = builder([("x", (2, 3, 4))], ["y"])
    b.add_slice("empty_slice", "x", "y", "width", 3, 1, 1)
    assert_load_error(b.spec, tmp_path, "empty_slice", ["empty"])

    b = builder([("x", (6, 3, 4))], ["y0", "y1"])
    b.add_split("bad_split", "x", ["y0", "y1"])
    layer(b.spec, "bad_split").split.nOutputs = 3
    assert_load_error(b.spec, tmp_path, "bad_split", ["nOutputs"])

    b = builder([("x", (5, 3, 4))], ["y0", "y1"])
    b.add_split("uneven_split", "x", ["y0", "y1"])
    assert_load_error(b.spec, tmp_path, "uneven_split", ["5 channels"])


def test_malformed_nd(tmp_path):
    b = builder([("x", (1, 3))], ["y"], nd=True)
    b.add_squeeze("bad_squeeze", "x", "y", axes=[1])
    assert_load_error(b.spec, tmp_path, "bad_squeeze", ["not 1"])

    b = builder([("x", (2, 3))], ["y"], nd=True)
    b.add_constant_pad("bad_pad", ["x"], "y", pad_amounts=[1, 1])
    assert_load_error(b.spec, tmp_path, "bad_pad", ["padAmounts", "4 values"])

    b = builder([("x", (2, 3))], ["v", "i"], nd=True)
    b.add_topk("bad_topk", ["x"], ["v", "i"], k=4, axis=1)
    assert_load_error(b.spec, tmp_path, "bad_topk", ["K"])

    b = builder([("x", (2, 3))], ["y"], nd=True)
    b.add_transpose("bad_transpose", [0, 0], "x", "y")
    assert_load_error(b.spec, tmp_path, "bad_transpose", ["permutation"])

    b = builder([("x", (2, 3)), ("z", (2, 3, 1))], ["y"], nd=True)
    b.add_concat_nd("bad_concat", ["x", "z"], "y", axis=0)
    assert_load_error(b.spec, tmp_path, "bad_concat", ["rank"])

    b = builder([("x", (2, 3))], ["y"], nd=True)
    b.add_broadcast_to_static("bad_broadcast", "x", "y", [4, 3])
    assert_load_error(b.spec, tmp_path, "bad_broadcast", ["broadcast"])

    b = builder([("x", (5, 5))], ["y"], nd=True)
    b.add_slice_static("bad_slice_static", "x", "y", begin_ids=[0], end_ids=[1], strides=[1], begin_masks=[False],
                       end_masks=[False])
    assert_load_error(b.spec, tmp_path, "bad_slice_static", ["beginIds", "rank-2"])


def test_nms_run_time_threshold_is_unsupported(tmp_path):
    names = ["ob", "os", "oi", "oc"]
    b = builder([("boxes", NMS_BOXES.shape), ("scores", NMS_SCORES.shape), ("iou", (1,))], names, nd=True)
    b.add_nms("nms_dynamic", ["boxes", "scores", "iou"], names)
    assert_load_error(b.spec, tmp_path, "nms_dynamic", ["iouThreshold", "constant"], UnsupportedError)
