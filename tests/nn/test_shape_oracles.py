"""Shape layers (layers/shape.py) pinned by oracles we did not write: torch ops, onnxruntime, and
formulas written here from the spec's text (each test quotes the sentence it implements).

Every parameter takes non-default values distinct from each other (dims, reps, pad amounts per
side and axis, split sizes, range start/end/step, fill values), so reading one parameter for
another changes a result. Every model also goes through MIL (``convert_run``: same outputs, and
coremltools' MIL loader accepts the package).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks
from tests.oracles.onnx_oracle import run_onnx_node

from .common import builder, compare_with_oracle, convert_run, flexible
from .shape_util import layer

torch = pytest.importorskip("torch")

# Layer kinds of this module's models (tests/nn_models/coverage.py)
KINDS_COVERED = {
    "broadcastToDynamic", "broadcastToLike", "broadcastToStatic", "constantPad", "fillDynamic", "fillLike",
    "fillStatic", "flattenTo2D", "getShape", "permute", "rangeDynamic", "rangeStatic", "rankPreservingReshape",
    "reshape", "reshapeDynamic", "reshapeLike", "sequenceRepeat", "split", "splitND", "stack", "tile",
}

RNG = np.random.default_rng(23)


def distinct(*shape: int) -> np.ndarray:
    """Values without repeats: any element moved to another place changes the tensor."""
    return (RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.25 - 2).astype(np.float32)


def t(x: np.ndarray) -> Any:
    return torch.from_numpy(np.ascontiguousarray(x))


def exact(got: Any, want: Any, oracle: str, what: str = "") -> None:
    """Shape layers move values: equal shapes and bit-equal values."""
    want = want.numpy() if hasattr(want, "numpy") else np.asarray(want)
    compare_with_oracle(np.asarray(got), want.astype(np.float32), oracle=oracle, rtol=0, atol=0, err_msg=what)


# -- classic (rank-5) layers ----------------------------------------------------------------------


@oracle_checks("reshape.mode=CHANNEL_LAST", "reshape.mode=CHANNEL_FIRST")
def test_reshape_channel_last(tmp_path: Path):
    """The spec: "CHANNEL_FIRST is equivalent to flattening the input to [Seq, 1, C * H * W, 1, 1]
    in channel first order and then reshaping it to the target shape ... CHANNEL_LAST is
    equivalent to flattening the input to [Seq, 1, H * W * C, 1, 1] in channel last order,
    reshaping it to [Seq_out, 1, H_out, W_out, C_out] ..., and then permuting it to [C_out, H_out,
    W_out]". Written with torch's permute and reshape; 3-element targets keep Seq, 4-element ones
    give Seq_out. Dims all distinct, so swapping two target entries changes the result."""
    x = distinct(2, 1, 2, 3, 5)  # [Seq, 1, C, H, W]
    targets = [(5, 3, 2), (3, 2, 5), (2, 5, 3), (1, 30, 1), (4, 3, 5, 1), (3, 1, 4, 5)]
    b = builder([("x", x.shape)], [f"y{i}" for i in range(2 * len(targets))], nd=True)
    for i, target in enumerate(targets):
        b.add_reshape(f"first{i}", "x", f"y{2 * i}", target, 0)
        b.add_reshape(f"last{i}", "x", f"y{2 * i + 1}", target, 1)
    out = convert_run(b.spec, {"x": x}, tmp_path)
    for i, target in enumerate(targets):
        seq_out, (c, h, w) = (x.shape[0], target) if len(target) == 3 else (target[0], target[1:])
        first = t(x).reshape(seq_out, 1, c, h, w)
        last = t(x).permute(0, 1, 3, 4, 2).reshape(seq_out, 1, h, w, c).permute(0, 1, 4, 2, 3)
        exact(out[f"y{2 * i}"], first, "torch", f"CHANNEL_FIRST {target}")
        exact(out[f"y{2 * i + 1}"], last, "torch", f"CHANNEL_LAST {target}")


SPEC_PERMUTE_EXAMPLES = {(0, 3, 1, 2): "Seq B W C H", (3, 1, 2, 0): "W B C H Seq", (0, 3, 2, 1): "Seq B W H C",
                         (0, 1, 2, 3): "Seq B C H W"}


@oracle_checks("permute")
def test_permute_every_order(tmp_path: Path):
    """The spec: "Assume input shape is [Seq, B, C, H, W]: If axis is set to [0, 3, 1, 2], then the
    output has shape [Seq, B, W, C, H]; [3, 1, 2, 0] ... [W, B, C, H, Seq]; [0, 3, 2, 1] ... [Seq,
    B, W, H, C]"; "dimensions at axis=1 or axis=-4 is unchanged". So axis names Seq, C, H, W as 0,
    1, 2, 3, B stays second. All 24 orders on distinct dims, the examples' shapes checked by name."""
    names = dict(zip(("Seq", "B", "C", "H", "W"), (2, 1, 3, 4, 5)))
    x = distinct(*names.values())
    orders = list(itertools.permutations(range(4)))
    b = builder([("x", x.shape)], [f"y{i}" for i in range(len(orders))], nd=True)
    for i, axis in enumerate(orders):
        b.add_permute(f"p{i}", axis, "x", f"y{i}")
    out = convert_run(b.spec, {"x": x}, tmp_path)
    seq_chw = ("Seq", "C", "H", "W")
    for i, axis in enumerate(orders):
        order = [seq_chw[axis[0]], "B"] + [seq_chw[a] for a in axis[1:]]
        if axis in SPEC_PERMUTE_EXAMPLES:
            assert " ".join(order) == SPEC_PERMUTE_EXAMPLES[axis]
        want = t(x).permute(*[list(names).index(n) for n in order])
        assert out[f"y{i}"].shape == tuple(names[n] for n in order)
        exact(out[f"y{i}"], want, "torch", f"axis {axis}")


@oracle_checks("split")
@pytest.mark.parametrize("shape, n", [((6, 2, 3), 3), ((2, 1, 8, 3, 1), 4), ((4, 10, 1, 2), 2)])
def test_split_channels(shape: tuple[int, ...], n: int, tmp_path: Path):
    """The spec: "A layer that uniformly splits across axis = -3 to produce a specified number of
    outputs ... For input that is of shape [C, H, W], output shapes will be [C/nOutputs, H, W]".
    torch.chunk along -3; nOutputs set (the builder leaves it 0)."""
    x = distinct(*shape)
    names = [f"y{i}" for i in range(n)]
    b = builder([("x", shape)], names, nd=len(shape) != 3)
    b.add_split("sp", "x", names)
    layer(b.spec, "sp").split.nOutputs = n
    out = convert_run(b.spec, {"x": x}, tmp_path)
    for name, want in zip(names, torch.chunk(t(x), n, dim=-3)):
        exact(out[name], want, "torch", name)


@oracle_checks("sequenceRepeat")
def test_sequence_repeat(tmp_path: Path):
    """The spec: "A layer that repeats a sequence or the dimension sitting at axis = -5 ... For
    example: for input shape [Seq, B, C, H, W], output shape is [nRepetitions * Seq, B, C, H, W]":
    the whole sequence again (torch's Tensor.repeat on axis -5; onnxmltools reads it the same way,
    as an ONNX Tile). Seq 3, so repeating each step in place would differ."""
    x = distinct(3, 1, 2, 1, 2)
    b = builder([("x", x.shape)], ["y", "z"], nd=True)
    b.add_sequence_repeat("sr", 4, "x", "y")
    b.add_sequence_repeat("sr1", 1, "x", "z")
    out = convert_run(b.spec, {"x": x}, tmp_path)
    exact(out["y"], t(x).repeat(4, 1, 1, 1, 1), "torch")
    exact(out["z"], t(x), "torch")


# -- ND layers: permutations, joins, splits, repeats ----------------------------------------------


@oracle_checks("tile")
def test_tile(tmp_path: Path):
    """The spec: "If two inputs are provided, second input is used as "reps" and "reps" parameter is
    ignored ... If it is less than the input rank, it is made equal to the input rank by prepending
    1's to it". torch.tile prepends 1s the same way. reps distinct per axis."""
    x = distinct(2, 3, 1)
    b = builder([("x", x.shape), ("r", (3,))], ["a", "c", "d", "e"], nd=True)
    b.add_tile("t1", "x", "a", [3, 1, 2])
    b.add_tile("t2", "x", "c", [4])
    b.add_tile("t3", "x", "d", [2, 3])
    b.add_tile("t4", ["x", "r"], "e", [5, 5, 5])  # the input's reps win over the field
    reps_in = np.array([1, 2, 4], np.float32)
    out = convert_run(b.spec, {"x": x, "r": reps_in}, tmp_path)
    exact(out["a"], torch.tile(t(x), (3, 1, 2)), "torch")
    exact(out["c"], torch.tile(t(x), (4,)), "torch")
    exact(out["d"], torch.tile(t(x), (2, 3)), "torch")
    exact(out["e"], torch.tile(t(x), (1, 2, 4)), "torch")


@oracle_checks("stack")
def test_stack(tmp_path: Path):
    """The spec: "stacks the input tensors along the given axis. It is similar in functionality to
    the numpy.stack method ... Negative indexing is supported"; its examples: (2, 4, 2) x 5 inputs,
    axis 3 -> (2, 4, 2, 5), axis -2 -> (2, 4, 5, 2). torch.stack; inputs distinct, so their order
    is pinned too."""
    xs = [distinct(2, 4, 2) for _ in range(5)]
    axes = [3, -2, 0, 1, -4, -1]
    b = builder([(f"x{i}", (2, 4, 2)) for i in range(5)], [f"y{k}" for k in range(len(axes) + 1)], nd=True)
    for k, axis in enumerate(axes):
        b.add_stack(f"s{k}", [f"x{i}" for i in range(5)], f"y{k}", axis=axis)
    b.add_stack("s_two", ["x3", "x1"], f"y{len(axes)}", axis=2)
    out = convert_run(b.spec, {f"x{i}": v for i, v in enumerate(xs)}, tmp_path)
    assert out["y0"].shape == (2, 4, 2, 5) and out["y1"].shape == (2, 4, 5, 2)
    for k, axis in enumerate(axes):
        exact(out[f"y{k}"], torch.stack([t(v) for v in xs], dim=axis), "torch", f"axis {axis}")
    exact(out[f"y{len(axes)}"], torch.stack([t(xs[3]), t(xs[1])], dim=2), "torch")


@oracle_checks("splitND")
def test_split_nd(tmp_path: Path):
    """The spec: "either uniformly splits the input tensor into num_splits tensors, or splits
    according to the given split sizes in split_sizes. Supports unequal splits and negative
    indexing ... If parameter "splitSizes" is provided, value of the parameter "numSplits" is
    ignored"; its example (5, 3, 4), axis -3, split_sizes [3, 2]. torch.split for sizes;
    torch.tensor_split for numSplits (numpy.array_split's parts, which Core ML makes for unequal
    parts: coremltools' device test test_split_nd_cpu, see layers/shape.py)."""
    x = distinct(5, 3, 4)
    cases = [("sizes", -3, None, [3, 2]), ("sizes1", 2, None, [1, 2, 1]), ("sizes_ignore_n", 1, 3, [2, 1]),
             ("even", -1, 2, None), ("uneven", 0, 3, None), ("uneven_neg", -1, 3, None)]
    outs = [[f"{name}_{i}" for i in range(len(sizes) if sizes else n)] for name, _, n, sizes in cases]
    b = builder([("x", x.shape)], [o for names in outs for o in names], nd=True)
    for (name, axis, n, sizes), names in zip(cases, outs):
        b.add_split_nd(name, "x", names, axis=axis, num_splits=n or 2, split_sizes=sizes)
        if sizes and n:
            layer(b.spec, name).splitND.numSplits = n  # differs from len(splitSizes): ignored
    out = convert_run(b.spec, {"x": x}, tmp_path)
    for (_, axis, n, sizes), names in zip(cases, outs):
        want = torch.split(t(x), sizes, dim=axis) if sizes else torch.tensor_split(t(x), n, dim=axis)
        assert len(want) == len(names)
        for got_name, part in zip(names, want):
            exact(out[got_name], part, "torch", got_name)


# -- ND layers: rank changes and reshapes ---------------------------------------------------------


@oracle_checks("flattenTo2D")
def test_flatten_to_2d(tmp_path: Path):
    """The spec: "First dimension of output is the product of all the dimensions in input[:axis]
    ("axis" is exclusive) Second dimension of output is the product of all the dimensions in
    input[axis:] ("axis" is inclusive)", with its examples' shapes. Written with torch.flatten of
    the two ranges (a rank-2 reshape that keeps the row-major order)."""
    x = distinct(2, 3, 4, 5)
    axes = [0, 1, 2, 3, 4, -1, -2, -3, -4]
    b = builder([("x", x.shape), ("v", (3,)), ("m", (5, 5, 3))], [f"y{i}" for i in range(len(axes))]
                + ["e1", "e2", "e3"], nd=True)
    for i, axis in enumerate(axes):
        b.add_flatten_to_2d(f"f{i}", "x", f"y{i}", axis=axis)
    b.add_flatten_to_2d("g1", "v", "e1", axis=-1)
    b.add_flatten_to_2d("g2", "v", "e2", axis=1)
    b.add_flatten_to_2d("g3", "m", "e3", axis=-2)
    v, m = distinct(3), distinct(5, 5, 3)
    out = convert_run(b.spec, {"x": x, "v": v, "m": m}, tmp_path)
    assert [out[k].shape for k in ("e1", "e2", "e3")] == [(1, 3), (3, 1), (5, 15)]  # the spec's examples
    for i, axis in enumerate(axes):
        a = axis + x.ndim if axis < 0 else axis  # negative axes count from the end (the examples)
        lead = int(np.prod(x.shape[:a]))
        want = torch.flatten(t(x), start_dim=a).reshape(lead, -1) if a < 4 else t(x).reshape(lead, 1)
        exact(out[f"y{i}"], want, "torch", f"axis {axis}")


@oracle_checks("rankPreservingReshape")
def test_rank_preserving_reshape(tmp_path: Path):
    """The spec: "reshapes a tensor that does not alter the rank of the input. Order of the data is
    left unchanged", with examples (20, 10) + (5, -1) -> (5, 40), (20, 10, 5) + (0, 2, 25) ->
    (20, 2, 25), (10, 3, 5) + (25, 0, -1) -> (25, 3, 2): 0 copies the input's dim, -1 is inferred.
    That is ONNX Reshape (allowzero 0: "the corresponding dimension value is copied from the input
    tensor"), run by onnxruntime."""
    cases = [((20, 10), (5, -1)), ((20, 10, 5), (0, 2, 25)), ((10, 3, 5), (25, 0, -1)), ((2, 3, 4, 5), (0, 5, 0, -1)),
             ((2, 3, 4, 5), (4, -1, 3, 0)), ((6, 7), (0, 7))]
    b = builder([(f"x{i}", s) for i, (s, _) in enumerate(cases)], [f"y{i}" for i in range(len(cases))], nd=True)
    feeds = {}
    for i, (shape, target) in enumerate(cases):
        b.add_rank_preserving_reshape(f"r{i}", f"x{i}", f"y{i}", list(target))
        feeds[f"x{i}"] = distinct(*shape)
    out = convert_run(b.spec, feeds, tmp_path)
    assert [out[f"y{i}"].shape for i in range(3)] == [(5, 40), (20, 2, 25), (25, 3, 2)]  # the spec's examples
    for i, (_, target) in enumerate(cases):
        (want,) = run_onnx_node("Reshape", {"x": feeds[f"x{i}"]}, initializers={"s": np.array(target, np.int64)},
                                input_order=["x", "s"])
        exact(out[f"y{i}"], want, "onnxruntime", f"target {target}")


@oracle_checks("reshapeLike", "reshapeDynamic")
def test_reshape_like_and_dynamic(tmp_path: Path):
    """The spec: reshapeLike "First input is reshaped to produce the output, while the second input
    is only used to determine the shape of the output. Values of the second input are not used";
    reshapeDynamic "Second input is a rank 1 tensor specifying the shape of the output". torch's
    reshape; the reference is flexible (its shape known at run time) in one layer, static in the
    other."""
    x = distinct(2, 3, 4)
    b = builder([("x", x.shape), ("ref", (4, 3, 2)), ("ref2", (6, 4)), ("s", (3,)), ("s2", (2,))],
                ["a", "c", "d", "e"], nd=True)
    b.add_reshape_like("rl", ["x", "ref"], "a")
    b.add_reshape_like("rl2", ["x", "ref2"], "c")
    b.add_reshape_dynamic("rd", ["x", "s"], "d")
    b.add_reshape_dynamic("rd2", ["x", "s2"], "e")
    flexible(b.spec, "ref2", [1, 1], [24, 24])
    feeds = {"x": x, "ref": distinct(4, 3, 2), "ref2": distinct(8, 3), "s": np.array([3, 4, 2], np.float32),
             "s2": np.array([12, 2], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    exact(out["a"], t(x).reshape(4, 3, 2), "torch")
    exact(out["c"], t(x).reshape(8, 3), "torch")
    exact(out["d"], t(x).reshape(3, 4, 2), "torch")
    exact(out["e"], t(x).reshape(12, 2), "torch")


@oracle_checks("getShape")
def test_get_shape(tmp_path: Path):
    """The spec: "A layer that returns the shape of an input tensor ... Output: a vector of length
    R, where R is the rank of the input tensor": torch's Tensor.shape, for a static and a
    flexible input with distinct dims."""
    b = builder([("x", (2, 3, 4, 5)), ("f", (2, 3, 4))], ["a", "c"], nd=True)
    b.add_get_shape("g", "x", "a")
    b.add_get_shape("g2", "f", "c")
    flexible(b.spec, "f", [1, 1, 1], [9, 9, 9])
    x, f = distinct(2, 3, 4, 5), distinct(7, 1, 6)
    out = convert_run(b.spec, {"x": x, "f": f}, tmp_path)
    exact(out["a"], torch.tensor(t(x).shape, dtype=torch.float32), "torch")
    exact(out["c"], torch.tensor(t(f).shape, dtype=torch.float32), "torch")


# -- ND layers: generated tensors and broadcasting ------------------------------------------------


@oracle_checks("fillLike", "fillStatic", "fillDynamic")
def test_fills(tmp_path: Path):
    """The spec: fillLike "generates an output tensor with a constant value. Input is only used to
    determine the shape"; fillStatic "A N-Dimensional tensor of shape "targetShape""; fillDynamic
    "the shape specified by the values in the input tensor". torch.full, distinct values and dims
    (a flexible reference for fillLike)."""
    b = builder([("x", (2, 3)), ("s", (3,))], ["a", "c", "d", "e"], nd=True)
    b.add_fill_like("fl", "x", "a", value=2.5)
    b.add_fill_static("fs", "c", [2, 1, 3], value=-1.75)
    b.add_fill_static("fs2", "d", [4, 3, 2, 5], value=0.125)
    b.add_fill_dynamic("fd", "s", "e", value=7.0)
    flexible(b.spec, "x", [1, 1], [9, 9])
    out = convert_run(b.spec, {"x": distinct(5, 3), "s": np.array([3, 1, 2], np.float32)}, tmp_path)
    exact(out["a"], torch.full((5, 3), 2.5), "torch")
    exact(out["c"], torch.full((2, 1, 3), -1.75), "torch")
    exact(out["d"], torch.full((4, 3, 2, 5), 0.125), "torch")
    exact(out["e"], torch.full((3, 1, 2), 7.0), "torch")


@oracle_checks("broadcastToLike", "broadcastToStatic", "broadcastToDynamic")
def test_broadcast_to(tmp_path: Path):
    """The spec: "A layer that broadcasts a tensor to a new shape"; Like: "Output is a tensor with
    the same shape as the second input"; Static: "has shape as specified in the parameter
    "targetShape""; Dynamic: "Second input is a rank 1 tensor specifying the shape of the
    output". torch.broadcast_to (numpy's rules: leading dims added, size-1 dims repeated)."""
    x, z = distinct(3, 1), distinct(1, 4, 1)
    b = builder([("x", (3, 1)), ("z", (1, 4, 1)), ("ref", (2, 3, 4)), ("ref2", (2, 4, 3)), ("s", (4,))],
                ["a", "c", "d", "e", "f"], nd=True)
    b.add_broadcast_to_like("bl", ["x", "ref"], "a")
    b.add_broadcast_to_like("bl2", ["z", "ref2"], "f")
    b.add_broadcast_to_static("bs", "x", "c", [2, 3, 5])
    b.add_broadcast_to_static("bs2", "z", "d", [3, 5, 4, 2])
    b.add_broadcast_to_dynamic("bd", ["z", "s"], "e")
    flexible(b.spec, "ref2", [1, 1, 1], [9, 9, 9])  # its shape known at run time only
    feeds = {"x": x, "z": z, "ref": distinct(2, 3, 4), "ref2": distinct(5, 4, 3), "s": np.array([2, 3, 4, 5], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    exact(out["a"], torch.broadcast_to(t(x), (2, 3, 4)), "torch")
    exact(out["f"], torch.broadcast_to(t(z), (5, 4, 3)), "torch")
    exact(out["c"], torch.broadcast_to(t(x), (2, 3, 5)), "torch")
    exact(out["d"], torch.broadcast_to(t(z), (3, 5, 4, 2)), "torch")
    exact(out["e"], torch.broadcast_to(t(z), (2, 3, 4, 5)), "torch")


@oracle_checks("rangeStatic", "rangeDynamic")
def test_ranges(tmp_path: Path):
    """The spec: rangeStatic "returns a tensor that contains evenly spaced values. It is similar in
    functionality to the numpy.arange method" (fields endValue, startValue, stepSizeValue);
    rangeDynamic: "The first input represents the "endValue". The second input, if present,
    corresponds to "startValue". In this case the value of the "startValue" parameter is ignored.
    The third input, if present, corresponds to "stepSizeValue"". torch.arange(start, end, step),
    distinct values, the ignored fields set to other values."""
    b = builder([("e", (1,)), ("s", (1,)), ("p", (1,))], ["a", "c", "d", "f", "g", "h"], nd=True)
    b.add_range_static("rs", "a", end=6.0, start=1.5, step=1.25)
    b.add_range_static("rs2", "c", end=-4.0, start=3.0, step=-1.5)
    b.add_range_dynamic("r1", ["e"], "d", start=1.0, step=2.0)
    b.add_range_dynamic("r2", ["e", "s"], "f", start=-9.0, step=0.5)
    b.add_range_dynamic("r3", ["e", "s", "p"], "g", start=-9.0, step=4.0)
    b.add_range_dynamic("r4", ["s", "e", "p"], "h", start=-9.0, step=4.0)  # end below start, step > 0: empty
    feeds = {"e": np.array([7.0], np.float32), "s": np.array([2.0], np.float32), "p": np.array([1.5], np.float32)}
    out = convert_run(b.spec, feeds, tmp_path)
    exact(out["a"], torch.arange(1.5, 6.0, 1.25), "torch")
    exact(out["c"], torch.arange(3.0, -4.0, -1.5), "torch")
    exact(out["d"], torch.arange(1.0, 7.0, 2.0), "torch")
    exact(out["f"], torch.arange(2.0, 7.0, 0.5), "torch")
    exact(out["g"], torch.arange(2.0, 7.0, 1.5), "torch")
    assert out["h"].size == 0


@oracle_checks("constantPad")
def test_constant_pad(tmp_path: Path):
    """The spec: "output_shape[i] = input_shape[i] + padAmounts[2*i] + padAmounts[2*i+1]" with the
    pair (before, after) of each axis (coremltools' device test test_const_pad_cpu uses tf.pad with
    the same (rank, 2) pairs); "The amount of padding can be either set as a parameter
    ("padAmounts") or provided as a second input". torch.nn.functional.pad takes (before, after)
    pairs from the last axis back. Every amount distinct."""
    x = distinct(2, 3, 4)
    pads = [1, 2, 3, 0, 4, 5]
    pads_in = [2, 0, 0, 1, 3, 4]
    b = builder([("x", x.shape), ("p", (6,))], ["a", "c", "d"], nd=True)
    b.add_constant_pad("p1", ["x"], "a", value=2.5, pad_amounts=pads)
    b.add_constant_pad("p2", ["x", "p"], "c", value=-3.0, pad_amounts=pads)  # the input wins
    b.add_constant_pad("p3", ["x"], "d", pad_amounts=[0, 0, 0, 0, 6, 0])
    out = convert_run(b.spec, {"x": x, "p": np.array(pads_in, np.float32)}, tmp_path)
    exact(out["a"], torch.nn.functional.pad(t(x), _torch_pads(pads), value=2.5), "torch")
    exact(out["c"], torch.nn.functional.pad(t(x), _torch_pads(pads_in), value=-3.0), "torch")
    exact(out["d"], torch.nn.functional.pad(t(x), _torch_pads([0, 0, 0, 0, 6, 0]), value=0.0), "torch")


def _torch_pads(amounts: list[int]) -> list[int]:
    """Core ML's [before_0, after_0, before_1, ...] as torch's (before_last, after_last, ...)."""
    pairs = [amounts[i:i + 2] for i in range(0, len(amounts), 2)]
    return [v for pair in reversed(pairs) for v in pair]


@oracle_checks("constantPad")
def test_constant_pad_to_given_output_size(tmp_path: Path):
    """The spec: with padToGivenOutputSizeMode "output_shape[i] = max(input_shape[i],
    max(padAmounts[2*i] + padAmounts[2*i+1]))", its examples (20, 10) + [0, 21, 14, 0] -> (21, 14)
    and (20, 10, 5) + [0, 0, 17, 0, 0, 14] -> (20, 17, 14). The side: the entry that holds the size
    (coremltools' device test test_const_pad_mode2_cpu puts the size before, left_pad, or after, and
    expects tf.pad of the difference on that side). torch.nn.functional.pad of the difference;
    static and run-time amounts."""
    x = distinct(2, 3, 4)
    sizes = [5, 0, 0, 7, 0, 1]  # axis 0 to 5 before, axis 1 to 7 after, axis 2 kept (1 < 4)
    sizes_in = [0, 6, 4, 0, 0, 9]
    b = builder([("x", x.shape), ("p", (6,)), ("q", (20, 10)), ("r", (20, 10, 5))], ["a", "c", "d", "e"], nd=True)
    b.add_constant_pad("p1", ["x"], "a", value=1.5, pad_to_given_output_size_mode=True, pad_amounts=sizes)
    b.add_constant_pad("p2", ["x", "p"], "c", value=-0.5, pad_to_given_output_size_mode=True, pad_amounts=sizes)
    b.add_constant_pad("p3", ["q"], "d", pad_to_given_output_size_mode=True, pad_amounts=[0, 21, 14, 0])
    b.add_constant_pad("p4", ["r"], "e", pad_to_given_output_size_mode=True, pad_amounts=[0, 0, 17, 0, 0, 14])
    q, r = distinct(20, 10), distinct(20, 10, 5)
    out = convert_run(b.spec, {"x": x, "p": np.array(sizes_in, np.float32), "q": q, "r": r}, tmp_path)
    assert out["d"].shape == (21, 14) and out["e"].shape == (20, 17, 14)

    def to_size(v: np.ndarray, amounts: list[int]) -> list[int]:
        pairs = np.asarray(amounts).reshape(-1, 2)
        grow = np.maximum(pairs.sum(axis=1) - np.asarray(v.shape), 0)
        return [int(g) if side > 0 else 0 for pair, g in zip(pairs, grow) for side in pair]

    for name, v, amounts, value in (("a", x, sizes, 1.5), ("c", x, sizes_in, -0.5), ("d", q, [0, 21, 14, 0], 0.0),
                                    ("e", r, [0, 0, 17, 0, 0, 14], 0.0)):
        want = torch.nn.functional.pad(t(v), _torch_pads(to_size(v, amounts)), value=value)
        exact(out[name], want, "torch", name)
