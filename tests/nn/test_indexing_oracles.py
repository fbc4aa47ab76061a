"""The indexing layers (layers/indexing.py) against oracles we did not write.

Each test converts a model holding the layer with non-default parameters that differ from each
other (per axis too), runs our conversion, and compares its values with:
- onnxruntime, on a small ONNX graph built here from the equivalent ONNX operators (Slice,
  Squeeze, ScatterElements/ScatterND with a reduction, GatherND, GatherElements, ReverseSequence,
  TopK, ArgMax/ArgMin, NonZero, Trilu, NonMaxSuppression, OneHot, CumSum). The Core ML parameters
  are mapped to the ONNX ones from the spec's text in each test;
- torch, for argSort (a stable sort);
- a formula written here from the spec's text, where the spec defines something the ONNX operator
  leaves undefined or defines otherwise (SCATTER_UPDATE with repeated indices, oneHot's negative
  indices, NMS with no surviving box).

The spec's text for scatter, scatterND, oneHot and cumSum is missing from /work/shared/spec (the
comment blocks were lost when it was extracted); it is quoted here from Apple's
NeuralNetwork.proto (apple/coremltools, mlmodel/format/NeuralNetwork.proto), the same message
definitions with their comments.

Ties: the NeuralNetwork spec does not say which index topK, argMax/argMin or argSort return for
equal values (MIL's reduce_argmax says "not guaranteed"). argMax/argMin inputs here have no ties;
topK and argSort get ties, compared against oracles that keep index order (ONNX TopK: "the
element with the lower index will appear first"; torch's stable sort), which is what the
lowerings' docstrings promise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from onnx import helper

from converter.formats.proto import NeuralNetwork_pb2 as nn
from tests.nn_models.coverage import oracle_checks
from tests.oracles.onnx_oracle import run_onnx

from .common import builder, compare_with_oracle, convert_run

RNG = np.random.default_rng(11)
BIG = np.iinfo(np.int64).max  # ONNX Slice: "INT_MAX when slicing forward and INT_MIN when slicing backward"
MODES = ["UPDATE", "ADD", "SUB", "MUL", "DIV", "MAX", "MIN"]


def ort(nodes: Sequence[Any], feeds: Mapping[str, np.ndarray], outputs: Sequence[str],
        consts: Mapping[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """onnxruntime's outputs of a small graph (``consts``: initializers)."""
    return run_onnx(list(nodes), dict(feeds), list(outputs), dict(consts or {}))


def node(op: str, inputs: Sequence[str], outputs: Sequence[str] | str, **attrs: Any) -> Any:
    return helper.make_node(op, list(inputs), [outputs] if isinstance(outputs, str) else list(outputs), **attrs)


def i64(values: Any) -> np.ndarray:
    return np.asarray(values, np.int64)


def run_layer(feeds: Mapping[str, np.ndarray], outputs: Sequence[str], add: Callable[[Any], None],
              tmp: Path) -> dict[str, np.ndarray]:
    """Our conversion of an ND network (fp32 inputs ``feeds``) whose layers ``add`` adds, run on
    ``feeds``."""
    b = builder({k: v.shape for k, v in feeds.items()}, outputs, nd=True)
    add(b)
    return convert_run(b.spec, dict(feeds), tmp)


def last_layer(b: Any) -> Any:
    return b.spec.neuralNetwork.layers[-1]


def check(got: np.ndarray, want: np.ndarray, oracle: str = "onnxruntime", tol: float = 1e-6) -> None:
    compare_with_oracle(got, np.asarray(want, np.float64), oracle=oracle, rtol=tol, atol=tol)


# =============================================================================================
# slices


SLICE_AXES = {"CHANNEL_AXIS": -3, "HEIGHT_AXIS": -2, "WIDTH_AXIS": -1}


@oracle_checks("slice.axis=HEIGHT_AXIS", "slice.axis=WIDTH_AXIS", "slice.axis=CHANNEL_AXIS")
@pytest.mark.parametrize("slices", [
    {"CHANNEL_AXIS": (-3, 2, 1), "HEIGHT_AXIS": (1, -1, 2), "WIDTH_AXIS": (2, -2, 3)},
    {"CHANNEL_AXIS": (1, 100, 1), "HEIGHT_AXIS": (-5, 6, 3), "WIDTH_AXIS": (-6, 100, 2)},
], ids=["a", "b"])
def test_slice_classic(slices: dict[str, tuple[int, int, int]], tmp_path: Path) -> None:
    """The spec (SliceLayerParams): the interval [startIndex, endIndex) with step stride along
    axis -3 (CHANNEL), -2 (HEIGHT) or -1 (WIDTH); negative indices count from the end (-1 is N-1).
    ONNX Slice with starts, ends, steps on that axis (ends past the dim clamp to it)."""
    x = np.arange(3 * 6 * 7, dtype=np.float32).reshape(3, 6, 7)
    b = builder({"x": x.shape}, list(slices))  # rank-5 network: the classic layer
    for axis, (start, end, stride) in slices.items():
        b.add_slice(axis, "x", axis, "width", 0, 1, 1)
        p = last_layer(b).slice
        p.axis = nn.SliceLayerParams.SliceAxis.Value(axis)
        p.startIndex, p.endIndex, p.stride = start, end, stride
    got = convert_run(b.spec, {"x": x}, tmp_path)
    for axis, (start, end, stride) in slices.items():
        want, = ort([node("Slice", ["x", "s", "e", "a", "t"], "y")], {"x": x}, ["y"],
                    {"s": i64([start]), "e": i64([end]), "a": i64([SLICE_AXES[axis]]), "t": i64([stride])})
        check(got[axis], want)


def strided_slice_graph(begin: Sequence[int], end: Sequence[int], strides: Sequence[int],
                        begin_masks: Sequence[bool], end_masks: Sequence[bool],
                        squeeze_masks: Sequence[bool]) -> tuple[list[Any], dict[str, np.ndarray]]:
    """ONNX Slice (+ Squeeze) for a Core ML strided slice of input "x", output "y". The spec
    (SliceStaticLayerParams): "i-th element of beginIds is ignored ... if the i-th element of
    beginMasks is True", the same for endIds and endMasks, i.e. that end of the axis is open (the
    spec's example reads beginMasks [True, ...] as ``input[:3:2, ...]``; coremltools' own tests of
    the layer against Core ML use numpy's ``None`` for a masked id, negative strides included);
    "if the i-th element of squeezeMasks is set to True, only beginIds[i] would be sliced out, and
    all other masks and inputs are ignored" (the axis is removed)."""
    starts, ends, steps = [], [], []
    for b, e, s, bm, em, sq in zip(begin, end, strides, begin_masks, end_masks, squeeze_masks):
        if sq:
            starts.append(b)
            ends.append(b + 1 if b != -1 else BIG)
            steps.append(1)
            continue
        starts.append((0 if s > 0 else BIG) if bm else b)
        ends.append((BIG if s > 0 else -BIG - 1) if em else e)
        steps.append(s)
    r = len(starts)
    consts = {"st": i64(starts), "en": i64(ends), "ax": i64(range(r)), "sp": i64(steps)}
    squeezed = [i for i, sq in enumerate(squeeze_masks) if sq]
    nodes = [node("Slice", ["x", "st", "en", "ax", "sp"], "sliced" if squeezed else "y")]
    if squeezed:
        consts["sq"] = i64(squeezed)
        nodes.append(node("Squeeze", ["sliced", "sq"], "y"))
    return nodes, consts


X4 = np.arange(5 * 6 * 7 * 8, dtype=np.float32).reshape(5, 6, 7, 8)
# beginIds, endIds, strides, beginMasks, endMasks, squeezeMasks of a rank-4 slice: per axis all
# different, and for every two axes i, j some case where the two differ in each field (and the
# difference changes the result), so a lowering that reads one axis's entry for another fails.
T, F = True, False
SLICES4 = {
    "plain": ([1, -5, 6, 0], [4, 5, 1, -2], [2, 1, -2, 3], [F, F, F, F], [F, F, F, F], [F, F, F, F]),
    "masks-a": ([2, 4, -3, 1], [0, 1, 7, -2], [-1, -2, 1, 2], [T, F, F, T], [F, T, T, F], [F, F, F, F]),
    "masks-b": ([-1, 1, 5, 6], [1, 5, 0, 2], [-2, 3, -1, -1], [T, F, T, F], [T, F, T, F], [F, F, F, F]),
    "masks-c": ([3, 0, -6, 2], [1, -2, 6, 5], [-1, 2, 2, 1], [F, T, F, T], [F, F, T, T], [F, F, F, F]),
    "squeeze-a": ([3, -4, 1, -1], [0, 6, -1, 0], [1, 2, 3, 1], [F, T, F, F], [F, F, T, F], [T, F, F, T]),
    "squeeze-b": ([-2, 5, 0, 2], [1, 0, 7, 7], [-1, -1, 2, 1], [F, T, T, F], [T, F, F, F], [F, T, F, T]),
    "squeeze-c": ([1, 3, -2, 4], [4, 1, 0, 8], [2, -1, -2, 3], [F, F, F, F], [F, F, F, F], [T, F, T, F]),
}


@oracle_checks("sliceStatic")
@pytest.mark.parametrize("case", list(SLICES4))
def test_slice_static_rank4(case: str, tmp_path: Path) -> None:
    begin, end, strides, bmask, emask, squeeze = SLICES4[case]

    def add(b: Any) -> None:
        b.add_slice_static("s", "x", "y", begin_ids=begin, end_ids=end, strides=strides, begin_masks=bmask,
                           end_masks=emask, squeeze_masks=squeeze)

    got = run_layer({"x": X4}, ["y"], add, tmp_path)["y"]
    nodes, consts = strided_slice_graph(begin, end, strides, bmask, emask, squeeze)
    want, = ort(nodes, {"x": X4}, ["y"], consts)
    assert want.size > 1, "a case must keep more than one element"
    check(got, want)


@oracle_checks("sliceDynamic")
@pytest.mark.parametrize("case", list(SLICES4))
def test_slice_dynamic_rank4(case: str, tmp_path: Path) -> None:
    """The spec (SliceDynamicLayerParams): beginIds from input 2; inputs 3-7, when present,
    replace endIds, strides, beginMasks, endMasks and squeezeMasks ("the value of the ...
    parameter is ignored"). Here: (a) only beginIds as a run-time input, the rest from the layer's
    fields; (b) all seven inputs (ends at run time, strides and masks constants), the fields set
    to other values that must be ignored."""
    begin, end, strides, bmask, emask, squeeze = SLICES4[case]
    feeds = {"x": X4, "b": np.asarray(begin, np.float32), "e": np.asarray(end, np.float32)}

    def add_fields_only(b: Any) -> None:
        b.add_slice_dynamic("s", ["x", "b"], "y", end_ids=end, strides=strides, begin_masks=bmask, end_masks=emask,
                            squeeze_masks=squeeze)

    def add_all_inputs(b: Any) -> None:
        for name, vals in (("st", strides), ("bm", bmask), ("em", emask), ("sq", squeeze)):
            b.add_load_constant_nd(name, name, np.asarray(vals, np.float64), (4,))
        b.add_slice_dynamic("s", ["x", "b", "e", "st", "bm", "em", "sq"], "y", end_ids=[1, 1, 1, 1],
                            strides=[1, 1, 1, 1], begin_masks=[F, T, F, T], end_masks=[T, F, T, F],
                            squeeze_masks=[F, F, F, F])

    nodes, consts = strided_slice_graph(begin, end, strides, bmask, emask, squeeze)
    want, = ort(nodes, {"x": X4}, ["y"], consts)
    for add in (add_fields_only, add_all_inputs):
        check(run_layer(feeds, ["y"], add, tmp_path)["y"], want)


@oracle_checks("sliceBySize")
@pytest.mark.parametrize(("axis", "size", "begin"), [(1, 3, 2), (-1, 2, 3), (0, 1, 2)])
def test_slice_by_size(axis: int, size: int, begin: int, tmp_path: Path) -> None:
    """The spec (SliceBySizeLayerParams): "Input 2: begin, size: 2, axis: 1, Output:
    x[:, begin:begin+2, :]". ONNX Slice from begin to begin + size along axis."""
    x = RNG.standard_normal((3, 6, 5)).astype(np.float32)
    feeds = {"x": x, "b": np.array([begin], np.float32)}
    got = run_layer(feeds, ["y"], lambda b: b.add_slice_by_size("s", ["x", "b"], "y", axis=axis, size=size),
                    tmp_path)["y"]
    want, = ort([node("Slice", ["x", "s", "e", "a"], "y")], {"x": x}, ["y"],
                {"s": i64([begin]), "e": i64([begin + size]), "a": i64([axis])})
    check(got, want)


# =============================================================================================
# gathers and scatters


def onnx_scatter_inputs(mode: str, updates: np.ndarray) -> tuple[str, np.ndarray]:
    """The ONNX reduction computing a Core ML scatter mode, and the updates it is given. The spec
    (ScatterLayerParams): "output = container; For each i in 0, ..., N - 1: output[indices[i], :, ...,
    :] = updates[i, :, ..., :] // if mode == SCATTER_UPDATE ... += ... // if mode == SCATTER_ADD
    ... -= ... // if mode == SCATTER_SUB" (ScatterMode: add, subtract, multiply, divide, maximum,
    minimum): each update applied in turn, so a repeated index accumulates. Subtracting u is
    adding -u, dividing by u is multiplying by 1/u; ONNX has no sub or div reduction."""
    if mode == "SUB":
        return "add", -updates
    if mode == "DIV":
        return "mul", (1.0 / updates.astype(np.float64)).astype(np.float32)
    return {"UPDATE": "none", "ADD": "add", "MUL": "mul", "MAX": "max", "MIN": "min"}[mode], updates


def updates_for(mode: str, shape: Sequence[int]) -> np.ndarray:
    """Updates of magnitude in [0.5, 2) (products and quotients stay moderate), either sign."""
    u = RNG.uniform(0.5, 2.0, shape) * RNG.choice([-1.0, 1.0], shape)
    return u.astype(np.float32)


SCATTER_CONTAINER = RNG.uniform(-2, 2, (4, 7, 3)).astype(np.float32)
# indices along axis 1 of the container (size 7), shape (2, 3): negative indices, and repeats (2 three
# times, 6 = -1 twice) for the accumulating modes; UPDATE (which ONNX leaves undefined for repeats)
# gets distinct ones
SCATTER_IDX_REPEATED = np.array([[2, -1, 0], [-5, 6, 2]], np.float32)
SCATTER_IDX_DISTINCT = np.array([[2, -1, 0], [-4, 5, 1]], np.float32)


@oracle_checks("scatter.mode=SCATTER_UPDATE", "scatter.mode=SCATTER_ADD", "scatter.mode=SCATTER_SUB",
               "scatter.mode=SCATTER_MUL", "scatter.mode=SCATTER_DIV", "scatter.mode=SCATTER_MAX",
               "scatter.mode=SCATTER_MIN")
@pytest.mark.parametrize("axis", [1, -2])
def test_scatter_modes(axis: int, tmp_path: Path) -> None:
    """The spec (ScatterLayerParams), see ``onnx_scatter_inputs``; "When indices is a tensor of
    rank greater than 1, the equation becomes (for axis=0): For each vector index (i,...,j)
    output[indices[i,...,j],...] -= updates[i,...,j,...]", with updates of shape container.shape[:axis]
    + indices.shape + container.shape[axis + 1:] (the spec's example: container (4, 3), indices
    (5, 2, 3), updates (4, 5, 2, 3), axis 1). ONNX ScatterElements takes indices of the updates' shape:
    the (flattened) indices broadcast along the other axes."""
    data = SCATTER_CONTAINER
    assert len(set(SCATTER_IDX_DISTINCT.astype(int).ravel() % 7)) == SCATTER_IDX_DISTINCT.size
    upd = {m: updates_for(m, (4, 2, 3, 3)) for m in MODES}
    feeds = {"d": data, "dup": SCATTER_IDX_REPEATED, "one": SCATTER_IDX_DISTINCT, **{f"u{m}": upd[m] for m in MODES}}

    def add(b: Any) -> None:
        for m in MODES:
            b.add_scatter(f"s{m}", ["d", "one" if m == "UPDATE" else "dup", f"u{m}"], m, axis=0, mode=m)
            last_layer(b).scatter.axis = axis
            last_layer(b).scatter.mode = nn.ScatterMode.Value(f"SCATTER_{m}")

    got = run_layer(feeds, MODES, add, tmp_path)
    for m in MODES:
        idx = (SCATTER_IDX_DISTINCT if m == "UPDATE" else SCATTER_IDX_REPEATED).astype(np.int64).reshape(-1)
        flat_updates = upd[m].reshape(4, 6, 3)
        reduction, onnx_updates = onnx_scatter_inputs(m, flat_updates)
        full_idx = np.broadcast_to(idx[None, :, None], flat_updates.shape).copy()
        want, = ort([node("ScatterElements", ["d", "i", "u"], "y", axis=axis, reduction=reduction)],
                    {"d": data, "i": full_idx, "u": onnx_updates}, ["y"])
        check(got[m], want, tol=1e-5)


@oracle_checks("scatter.mode=SCATTER_UPDATE", "scatterND.mode=SCATTER_UPDATE")
def test_scatter_update_repeated_index_keeps_the_last(tmp_path: Path) -> None:
    """SCATTER_UPDATE with a repeated index, which ONNX leaves undefined: the spec's loop
    ("output = container; For each i in 0, ..., N - 1: output[indices[i], :, ..., :] = updates[i,
    :, ..., :]"; scatterND: "For each vector index (i,...,j) ... output[indices[i,...,j,:], :,:,..,:] =
    updates[i,....,j,:,:,..,:]") writes in order, so the last update of an index is what stays."""
    data = RNG.uniform(-2, 2, (4, 3)).astype(np.float32)
    idx = np.array([1, -1, 1, 3, 0, 1], np.float32)  # row 1 three times, row 3 twice (as -1 and 3)
    upd = RNG.uniform(-2, 2, (6, 3)).astype(np.float32)
    nd_idx = np.array([[1, 2], [0, 0], [1, 2], [3, 1], [0, 0]], np.float32)
    nd_upd = RNG.uniform(-2, 2, (5,)).astype(np.float32)
    feeds = {"d": data, "i": idx, "u": upd, "ni": nd_idx, "nu": nd_upd}

    def add(b: Any) -> None:
        b.add_scatter("s", ["d", "i", "u"], "y", axis=0, mode="UPDATE")
        b.add_scatter_nd("snd", ["d", "ni", "nu"], "z", mode="UPDATE")

    got = run_layer(feeds, ["y", "z"], add, tmp_path)
    want = data.copy()
    for i in range(len(idx)):
        want[int(idx[i])] = upd[i]
    check(got["y"], want, oracle="spec formula")
    want = data.copy()
    for i in range(len(nd_idx)):
        want[tuple(nd_idx[i].astype(int))] = nd_upd[i]
    check(got["z"], want, oracle="spec formula")


@oracle_checks("scatterND.mode=SCATTER_UPDATE", "scatterND.mode=SCATTER_ADD", "scatterND.mode=SCATTER_SUB",
               "scatterND.mode=SCATTER_MUL", "scatterND.mode=SCATTER_DIV", "scatterND.mode=SCATTER_MAX",
               "scatterND.mode=SCATTER_MIN")
@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd_modes(k: int, tmp_path: Path) -> None:
    """The spec (ScatterNDLayerParams): "indices is a rank K+1 tensor of shape [I_0, .., I_(K-1),
    I_K] ... shape of updates = [I_0, I_1,...,I(K-1)] + container.shape[I_K:]; output = container;
    For each vector index (i,...,j) ... output[indices[i,...,j,:], :,:,..,:] = updates[i,....,j,:,:,..,:]
    // if mode == SCATTER_UPDATE", the other modes accumulating as in ``onnx_scatter_inputs``.
    ONNX ScatterND has the same shapes. Repeated multi-indices for all modes but UPDATE."""
    data = RNG.uniform(-2, 2, (7, 3, 5)).astype(np.float32)
    n = 6
    distinct = np.stack(np.unravel_index(RNG.permutation(int(np.prod(data.shape[:k])))[:n], data.shape[:k]), -1)
    repeated = distinct.copy()
    repeated[3], repeated[5] = repeated[0], repeated[1]
    idx_shape = (2, 3, k)
    upd_shape = (2, 3) + data.shape[k:]
    upd = {m: updates_for(m, upd_shape) for m in MODES}
    feeds = {"d": data, "dup": repeated.reshape(idx_shape).astype(np.float32),
             "one": distinct.reshape(idx_shape).astype(np.float32), **{f"u{m}": upd[m] for m in MODES}}

    def add(b: Any) -> None:
        for m in MODES:
            b.add_scatter_nd(f"s{m}", ["d", "one" if m == "UPDATE" else "dup", f"u{m}"], m, mode="UPDATE")
            last_layer(b).scatterND.mode = nn.ScatterMode.Value(f"SCATTER_{m}")

    got = run_layer(feeds, MODES, add, tmp_path)
    for m in MODES:
        reduction, onnx_updates = onnx_scatter_inputs(m, upd[m])
        idx = feeds["one" if m == "UPDATE" else "dup"].astype(np.int64)
        want, = ort([node("ScatterND", ["d", "i", "u"], "y", reduction=reduction)],
                    {"d": data, "i": idx, "u": onnx_updates}, ["y"])
        check(got[m], want, tol=1e-5)


@oracle_checks("scatterAlongAxis.mode=SCATTER_UPDATE", "scatterAlongAxis.mode=SCATTER_ADD",
               "scatterAlongAxis.mode=SCATTER_SUB", "scatterAlongAxis.mode=SCATTER_MUL",
               "scatterAlongAxis.mode=SCATTER_DIV", "scatterAlongAxis.mode=SCATTER_MAX",
               "scatterAlongAxis.mode=SCATTER_MIN")
@pytest.mark.parametrize("axis", [-2, 2])
def test_scatter_along_axis_modes(axis: int, tmp_path: Path) -> None:
    """The spec (ScatterAlongAxisLayerParams): "similar in functionality to numpy.put_along_axis
    ... output = container; for each vector index (i,j,....,k) output[index[i,j,....,k],j,....,k] =
    updates[i,j,....,k]" (for axis 0), "Negative indices and negative axis are supported", the
    modes as in ``onnx_scatter_inputs``. ONNX ScatterElements: the same operation."""
    data = RNG.uniform(-2, 2, (3, 5, 4)).astype(np.float32)
    size = data.shape[axis]
    idx_shape = list(data.shape)
    idx_shape[axis] = 3
    # distinct positions along the axis for UPDATE (a permutation's first 3), repeats for the others;
    # negative indices in both
    perm = np.argsort(RNG.random(data.shape), axis=axis)
    distinct = np.take(perm, [0, 1, 2], axis=axis) - size * RNG.integers(0, 2, idx_shape)
    repeated = RNG.integers(-size, size, idx_shape)
    upd = {m: updates_for(m, idx_shape) for m in MODES}
    feeds = {"d": data, "dup": repeated.astype(np.float32), "one": distinct.astype(np.float32),
             **{f"u{m}": upd[m] for m in MODES}}

    def add(b: Any) -> None:
        for m in MODES:
            b.add_scatter_along_axis(f"s{m}", ["d", "one" if m == "UPDATE" else "dup", f"u{m}"], m, axis=0)
            last_layer(b).scatterAlongAxis.axis = axis
            last_layer(b).scatterAlongAxis.mode = nn.ScatterMode.Value(f"SCATTER_{m}")

    got = run_layer(feeds, MODES, add, tmp_path)
    for m in MODES:
        reduction, onnx_updates = onnx_scatter_inputs(m, upd[m])
        idx = feeds["one" if m == "UPDATE" else "dup"].astype(np.int64)
        want, = ort([node("ScatterElements", ["d", "i", "u"], "y", axis=axis, reduction=reduction)],
                    {"d": data, "i": idx, "u": onnx_updates}, ["y"])
        check(got[m], want, tol=1e-5)


@oracle_checks("gatherND")
@pytest.mark.parametrize(("pshape", "ishape"), [((4, 3, 5, 2), (2, 3, 2)), ((4, 3, 5, 2), (5, 1)),
                                                 ((4, 3, 5, 2), (3, 4)), ((5, 3, 2, 5), (2, 7, 3, 2))])
def test_gather_nd(pshape: tuple[int, ...], ishape: tuple[int, ...], tmp_path: Path) -> None:
    """The spec (GatherNDLayerParams): "output[i,....,j,:,:,..,:] = params[indices[i,...,j,:],
    :,:,..,:] ... output shape is [I_0, I_1,...,I(K-1)] + params.shape[I_K:]". ONNX GatherND
    (batch_dims 0): the same."""
    params = RNG.standard_normal(pshape).astype(np.float32)
    k = ishape[-1]
    idx = np.stack([RNG.integers(0, pshape[j], ishape[:-1]) for j in range(k)], axis=-1)
    feeds = {"p": params, "i": idx.astype(np.float32)}
    got = run_layer(feeds, ["y"], lambda b: b.add_gather_nd("g", ["p", "i"], "y"), tmp_path)["y"]
    want, = ort([node("GatherND", ["p", "i"], "y")], {"p": params, "i": idx.astype(np.int64)}, ["y"])
    check(got, want)


@oracle_checks("gatherAlongAxis")
@pytest.mark.parametrize(("axis", "ishape"), [(1, (4, 3, 6)), (-1, (4, 5, 2)), (0, (2, 5, 6))])
def test_gather_along_axis(axis: int, ishape: tuple[int, ...], tmp_path: Path) -> None:
    """The spec (GatherAlongAxisLayerParams): "similar in functionality to numpy.take_along_axis
    ... output[i,j,....,k] = data[index[i,j,....,k],j,....,k]" (axis 0), "Negative indices and
    negative axis are supported". ONNX GatherElements: the same."""
    data = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    size = data.shape[axis]
    idx = RNG.integers(-size, size, ishape)
    feeds = {"d": data, "i": idx.astype(np.float32)}
    got = run_layer(feeds, ["y"], lambda b: b.add_gather_along_axis("g", ["d", "i"], "y", axis=axis), tmp_path)["y"]
    want, = ort([node("GatherElements", ["d", "i"], "y", axis=axis)], {"d": data, "i": idx}, ["y"])
    check(got, want)


# =============================================================================================
# reverseSeq, whereNonZero, oneHot, band parts


@oracle_checks("reverseSeq")
@pytest.mark.parametrize(("shape", "batch_axis", "seq_axis", "lengths"), [
    ((3, 4, 5), 0, 2, [5, 2, 1]), ((2, 3, 4, 5), -3, -1, [4, 5, 2]), ((4, 3, 2), 1, -3, [1, 3, 4])])
def test_reverse_seq(shape: tuple[int, ...], batch_axis: int, seq_axis: int, lengths: list[int],
                     tmp_path: Path) -> None:
    """The spec (ReverseSeqLayerParams) by its examples: for each b along batchAxis, the first
    seq_lengths[b] elements along sequenceAxis are reversed, the rest kept. ONNX ReverseSequence
    (the same, batch and time axes among the first two): the input transposed to (sequence,
    batch, others) and back."""
    x = RNG.standard_normal(shape).astype(np.float32)
    r = len(shape)
    bat, seq = batch_axis % r, seq_axis % r
    feeds = {"x": x, "n": np.asarray(lengths, np.float32)}
    got = run_layer(feeds, ["y"], lambda b: b.add_reverse_sequence("r", ["x", "n"], "y", batch_axis=batch_axis,
                                                                    seq_axis=seq_axis), tmp_path)["y"]
    perm = [seq, bat] + [a for a in range(r) if a not in (seq, bat)]
    want, = ort([node("Transpose", ["x"], "t", perm=perm),
                 node("ReverseSequence", ["t", "n"], "rt", time_axis=0, batch_axis=1),
                 node("Transpose", ["rt"], "y", perm=list(np.argsort(perm)))],
                {"x": x, "n": i64(lengths)}, ["y"])
    check(got, want)


@oracle_checks("whereNonZero")
@pytest.mark.parametrize("shape", [(3, 4, 2), (7,), (2, 3, 2, 2)])
def test_where_non_zero(shape: tuple[int, ...], tmp_path: Path) -> None:
    """The spec (WhereNonZeroLayerParams) by its examples: the (N, rank) indices of the non-zero
    elements in row-major order. ONNX NonZero: the same, transposed (rank, N)."""
    x = (RNG.integers(-1, 2, shape) * RNG.uniform(0.5, 2, shape)).astype(np.float32)
    x.flat[0] = -0.0  # a zero too
    got = run_layer({"x": x}, ["y"], lambda b: b.add_where_nonzero("w", "x", "y"), tmp_path)["y"]
    want, = ort([node("NonZero", ["x"], "nz"), node("Transpose", ["nz"], "y", perm=[1, 0])], {"x": x}, ["y"])
    check(got, want)


def band_graph(lower: int, upper: int) -> list[Any]:
    """ONNX Trilu for the spec's band (MatrixBandPartLayerParams): "band(m, n) = (num_lower < 0 ||
    (m-n) <= num_lower) && (num_upper < 0 || (n-m) <= num_upper)". Trilu upper=1 with k keeps
    n - m >= k, upper=0 keeps n - m <= k: m - n <= num_lower is the upper part from k = -num_lower,
    n - m <= num_upper the lower part up to k = num_upper; a negative bound keeps that side."""
    nodes, cur = [], "x"
    if lower >= 0:
        nodes.append(node("Trilu", [cur, "kl"], "up", upper=1))
        cur = "up"
    nodes.append(node("Trilu", [cur, "ku"], "y", upper=0) if upper >= 0 else node("Identity", [cur], "y"))
    return nodes


@oracle_checks("matrixBandPart")
@pytest.mark.parametrize(("lower", "upper"), [(1, 2), (2, 0), (-1, 1), (0, -1), (3, 1), (-1, -1)])
def test_matrix_band_part(lower: int, upper: int, tmp_path: Path) -> None:
    x = RNG.standard_normal((2, 5, 6)).astype(np.float32)

    def add(b: Any) -> None:
        b.add_matrix_band_part("bp", "x", "y", num_lower=0, num_upper=0)
        last_layer(b).matrixBandPart.numLower = lower
        last_layer(b).matrixBandPart.numUpper = upper

    got = run_layer({"x": x}, ["y"], add, tmp_path)["y"]
    want, = ort(band_graph(lower, upper), {"x": x}, ["y"], {"kl": i64(-lower), "ku": i64(upper)})
    check(got, want)


@oracle_checks("lowerTriangular", "upperTriangular")
@pytest.mark.parametrize("k", [-2, 0, 1, 3])
def test_triangular(k: int, tmp_path: Path) -> None:
    """The spec: upperTriangular "k: Diagonal below which to zero elements", lowerTriangular
    "Diagonal above which to zero elements", "k = 0 (the default) is the main diagonal, k < 0 is
    below it and k > 0 is above"; the last two dims are the matrix. ONNX Trilu with k: the same."""
    x = RNG.standard_normal((2, 4, 6)).astype(np.float32)

    def add(b: Any) -> None:
        b.add_upper_triangular("ut", "x", "u", k=k)
        b.add_lower_triangular("lt", "x", "l", k=k)

    got = run_layer({"x": x}, ["u", "l"], add, tmp_path)
    want_u, want_l = ort([node("Trilu", ["x", "k"], "u", upper=1), node("Trilu", ["x", "k"], "l", upper=0)],
                         {"x": x}, ["u", "l"], {"k": i64(k)})
    check(got["u"], want_u)
    check(got["l"], want_l)


@oracle_checks("oneHot")
@pytest.mark.parametrize(("axis", "size", "on", "off", "size_input"), [
    (-1, 4, 5.0, -1.0, False), (1, 5, -2.5, 0.5, False), (0, 3, 1.0, 0.0, True), (-2, 6, 0.0, 3.0, True)])
def test_one_hot(axis: int, size: int, on: float, off: float, size_input: bool, tmp_path: Path) -> None:
    """The spec (OneHotLayerParams): "Rank of the output is one more than the first input. If the
    second input is present, it is used to determine the value of oneHotVectorSize and the
    parameter oneHotVectorSize is ignored. Input values correspond to indices ... If it is outside
    this range, a vector of all offValue will be chosen", onValue at the index; "axis: negative
    indexing is supported. It refers to the axis in the output tensor." ONNX OneHot with depth
    and values [off, on] on non-negative indices (it counts negative ones from the end, which
    Core ML does not: test_one_hot_negative_index)."""
    idx = np.array([[2, 0, 7], [1, 5, 3]], np.float32)  # 7 is out of range for every size here
    feeds = {"i": idx, **({"n": np.array([size], np.float32)} if size_input else {})}

    def add(b: Any) -> None:
        b.add_one_hot("o", ["i", "n"] if size_input else ["i"], "y", one_hot_vector_size=1 if size_input else size,
                      axis=0)
        p = last_layer(b).oneHot
        p.axis, p.onValue, p.offValue = axis, on, off

    got = run_layer(feeds, ["y"], add, tmp_path)["y"]
    want, = ort([node("OneHot", ["i", "depth", "values"], "y", axis=axis)], {"i": idx.astype(np.int64)}, ["y"],
                {"depth": i64(size), "values": np.array([off, on], np.float32)})
    check(got, want)


@oracle_checks("oneHot")
def test_one_hot_negative_index(tmp_path: Path) -> None:
    """The spec's own example (OneHotLayerParams): "input values = [2, -1], and onValue = 5, and
    offValue = -1, then output will be: [-1, -1, 5, -1; -1, -1, -1, -1]": a negative index is out
    of range (ONNX OneHot would count it from the end and set the last position)."""
    idx = np.array([2, -1], np.float32)

    def add(b: Any) -> None:
        b.add_one_hot("o", ["i"], "y", one_hot_vector_size=4, axis=-1, on_value=5.0, off_value=-1.0)

    got = run_layer({"i": idx}, ["y"], add, tmp_path)["y"]
    check(got, [[-1, -1, 5, -1], [-1, -1, -1, -1]], oracle="spec formula", tol=0)
    onnx_reading, = ort([node("OneHot", ["i", "depth", "values"], "y", axis=-1)], {"i": idx.astype(np.int64)}, ["y"],
                        {"depth": i64(4), "values": np.array([-1, 5], np.float32)})
    assert onnx_reading[1].tolist() == [-1, -1, -1, 5]  # why the ONNX oracle is not used for negative indices


# =============================================================================================
# sorting, arg-reductions, cumulative sums


def with_ties(shape: tuple[int, ...]) -> np.ndarray:
    """Values from a small set, so that every row along every axis holds ties."""
    return (RNG.integers(-3, 4, shape) * 0.5).astype(np.float32)


@oracle_checks("topK")
@pytest.mark.parametrize(("axis", "k", "bottom", "k_from"), [
    (1, 3, False, "field"), (-1, 2, True, "field"), (0, 4, True, "field"), (-2, 5, False, "input"),
    (2, 1, False, "constant")])
def test_top_k(axis: int, k: int, bottom: bool, k_from: str, tmp_path: Path) -> None:
    """The spec (TopKLayerParams): the K largest values (the K smallest with useBottomK) along
    axis ("negative indexing is supported") and their indices; "The second input is the value of
    the K ... If there is only one input, value of K that is specified in the layer parameter is
    used". ONNX TopK (largest = not useBottomK, sorted) on values with ties (see the module
    docstring)."""
    x = with_ties((5, 6, 4))
    feeds = {"x": x, **({"k": np.array([k], np.float32)} if k_from == "input" else {})}

    def add(b: Any) -> None:
        if k_from == "constant":
            b.add_load_constant_nd("kc", "kconst", np.array([float(k)]), (1,))
        inputs = {"field": ["x"], "input": ["x", "k"], "constant": ["x", "kconst"]}[k_from]
        b.add_topk("t", inputs, ["v", "i"], k=k if k_from == "field" else k + 1, axis=0)
        p = last_layer(b).topK
        p.axis, p.useBottomK = axis, bottom

    got = run_layer(feeds, ["v", "i"], add, tmp_path)
    values, indices = ort([node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=int(not bottom), sorted=1)],
                          {"x": x}, ["v", "i"], {"k": i64([k])})
    check(got["v"], values)
    check(got["i"], indices)


@oracle_checks("argMax", "argMin")
@pytest.mark.parametrize(("axis", "remove"), [(-2, False), (0, True), (2, True), (1, False)])
def test_arg_max_min(axis: int, remove: bool, tmp_path: Path) -> None:
    """The spec (ArgMaxLayerParams, ArgMinLayerParams): the index of the largest (smallest) value
    along axis ("Negative indexing is supported"); the output keeps the axis as size 1 unless
    removeDim, "input shape = (5,), axis = 0: output shape = (1,), if removeDim = False or True".
    ONNX ArgMax / ArgMin with keepdims = not removeDim, on values without ties."""
    x = (RNG.permutation(3 * 4 * 5).reshape(3, 4, 5) * 0.25 - 7).astype(np.float32)
    v = (RNG.permutation(6) - 2.5).astype(np.float32)

    def add(b: Any) -> None:
        b.add_argmax("amax", "x", "mx", axis=axis, keepdims=not remove)
        b.add_argmin("amin", "x", "mn", axis=axis, keepdims=not remove)
        b.add_argmax("vmax", "v", "vmx", axis=-1, keepdims=not remove)
        b.add_argmin("vmin", "v", "vmn", axis=0, keepdims=not remove)

    got = run_layer({"x": x, "v": v}, ["mx", "mn", "vmx", "vmn"], add, tmp_path)
    want = ort([node("ArgMax", ["x"], "mx", axis=axis, keepdims=int(not remove)),
                node("ArgMin", ["x"], "mn", axis=axis, keepdims=int(not remove)),
                node("ArgMax", ["v"], "vmx", axis=0, keepdims=1), node("ArgMin", ["v"], "vmn", axis=0, keepdims=1)],
               {"x": x, "v": v}, ["mx", "mn", "vmx", "vmn"])
    for name, w in zip(["mx", "mn", "vmx", "vmn"], want):
        check(got[name], w)


@oracle_checks("argSort")
@pytest.mark.parametrize(("axis", "descending"), [(1, False), (2, True), (0, True), (-1, False)])
def test_arg_sort(axis: int, descending: bool, tmp_path: Path) -> None:
    """The spec (ArgSortLayerParams): "the indices that would sort the input tensor, along a
    specified axis", ascending unless descending; the spec asks for 0 <= axis < rank, a negative
    axis (accepted by the lowering) counts from the end. torch.argsort with a stable sort, on values
    with ties (see the module docstring)."""
    x = with_ties((4, 5, 6))

    def add(b: Any) -> None:
        b.add_argsort("s", "x", "y", axis=0)
        p = last_layer(b).argSort
        p.axis, p.descending = axis, descending

    got = run_layer({"x": x}, ["y"], add, tmp_path)["y"]
    want = torch.argsort(torch.from_numpy(x), dim=axis, descending=descending, stable=True).numpy()
    check(got, want, oracle="torch")


@oracle_checks("cumSum")
@pytest.mark.parametrize(("axis", "exclusive", "reverse", "axis_from"), [
    (1, True, False, "field"), (-1, False, True, "field"), (0, True, True, "field"), (-2, False, False, "field"),
    (2, True, False, "input"), (-3, False, True, "input"), (1, True, True, "constant")])
def test_cum_sum(axis: int, exclusive: bool, reverse: bool, axis_from: str, tmp_path: Path) -> None:
    """The spec (CumSumLayerParams): the cumulative sum along axis ("negative indexing is
    supported"; "If the second input is present, it is used to determine the value of axis");
    excludeFinalSum: "the first element of the output is 0, and the last element contains the sum
    of the input up to the penultimate value ... (this behavior is reversed when reverse flag is
    True)"; reverse: "cumsum is performed in the opposite direction". ONNX CumSum with exclusive
    and reverse: the same."""
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    feeds = {"x": x, **({"a": np.array([axis], np.float32)} if axis_from == "input" else {})}

    def add(b: Any) -> None:
        if axis_from == "constant":
            b.add_load_constant_nd("ac", "aconst", np.array([float(axis)]), (1,))
        inputs = {"field": ["x"], "input": ["x", "a"], "constant": ["x", "aconst"]}[axis_from]
        b.add_cumsum("c", inputs, "y", axis=0)
        p = last_layer(b).cumSum
        p.axis = axis if axis_from == "field" else (axis + 1) % 3  # a field value the input must override
        p.excludeFinalSum, p.reverse = exclusive, reverse

    got = run_layer(feeds, ["y"], add, tmp_path)["y"]
    want, = ort([node("CumSum", ["x", "a"], "y", exclusive=int(exclusive), reverse=int(reverse))], {"x": x}, ["y"],
                {"a": i64(axis)})
    check(got, want, tol=1e-5)


# =============================================================================================
# non-maximum suppression


NMS_BOXES = np.array([
    # batch 0: boxes 0, 1, 4 overlap (IoU 0.56 to 0.82), 2 and 3 overlap (IoU 0.67), 5 alone
    [[0, 0, 2, 2], [0.2, 0, 2, 2], [3, 3, 1, 1], [3.2, 3, 1, 1], [0, 0.4, 2, 2], [6, 6, 1, 1]],
    # batch 1: 0 and 5 overlap (IoU 0.50), 2 and 3 (IoU 0.60), 1 and 4 apart
    [[1, 1, 1, 1], [9, 1, 1, 1], [5, 5, 2, 2], [5, 5.5, 2, 2], [9, 9, 1, 1], [1.33, 1, 1, 1]]], np.float32)
NMS_SCORES = np.array([
    [[0.9, 0.1, 0.05], [0.2, 0.8, 0.1], [0.7, 0.0, 0.3], [0.1, 0.15, 0.6], [0.3, 0.5, 0.45], [0.05, 0.02, 0.35]],
    [[0.1, 0.2, 0.0], [0.3, 0.1, 0.25], [0.25, 0.05, 0.4], [0.1, 0.16, 0.45], [0.02, 0.01, 0.03], [0.22, 0.33, 0.1]]],
    np.float32)


def nms_oracle(boxes: np.ndarray, scores: np.ndarray, iou: float, thr: float, max_boxes: int,
               per_class: bool) -> list[np.ndarray]:
    """The spec (NonMaximumSuppressionLayerParams) through ONNX NonMaxSuppression (center_point_box
    1: "[x_center, y_center, width, height]", the spec's box order "x, y, width, height" around a
    center; a box is suppressed by a kept one whose IoU is over the threshold, boxes scoring under
    scoreThreshold are dropped first). The spec: "the N scores for N boxes, used for suppression,
    are generated by taking the max of the matrix (N,C) along the columns. If perClassSuppression
    is false, suppression happens across all classes" (one ONNX class holding each box's best
    score); "If true, each box is assigned to the class with the highest score and then the
    suppression happens separately for boxes within the same class" (one ONNX class per Core ML
    class, a box scoring only in its own; the per-class survivors merged by score, at most maxBoxes:
    a greedy pass in score order keeps exactly these). Outputs "padded ... using values 0 ... for
    the third output the padding value used is -1"; "If no box survives ... number of boxes ...
    will be 1. The first 3 outputs will correspond to the box with the highest score"."""
    nb, n, c = scores.shape
    best, cls = scores.max(axis=2), scores.argmax(axis=2)
    if per_class:
        onnx_scores = np.where(cls[:, None, :] == np.arange(c)[None, :, None], best[:, None, :], -1e30)
    else:
        onnx_scores = best[:, None, :]
    sel, = ort([node("NonMaxSuppression", ["b", "s", "m", "iou", "thr"], "sel", center_point_box=1)],
               {"b": boxes, "s": onnx_scores.astype(np.float32)}, ["sel"],
               {"m": i64([max_boxes]), "iou": np.array([iou], np.float32), "thr": np.array([thr], np.float32)})
    out_b = np.zeros((nb, max_boxes, 4), np.float32)
    out_s = np.zeros((nb, max_boxes, c), np.float32)
    out_i = np.full((nb, max_boxes), -1.0, np.float32)
    count = np.zeros(nb, np.float32)
    for bi in range(nb):
        kept = sorted((int(j) for b_, _, j in sel if b_ == bi), key=lambda j: -best[bi, j])[:max_boxes]
        kept = kept or [int(np.argmax(best[bi]))]
        out_b[bi, :len(kept)] = boxes[bi, kept]
        out_s[bi, :len(kept)] = scores[bi, kept]
        out_i[bi, :len(kept)] = kept
        count[bi] = len(kept)
    return [out_b, out_s, out_i, count]


NMS_OUTPUTS = ["ob", "os", "oi", "oc"]


@oracle_checks("NonMaximumSuppression")
@pytest.mark.parametrize(("iou", "thr", "max_boxes", "per_class"), [
    (0.55, 0.12, 4, False),  # baseline
    (0.75, 0.12, 4, False),  # iouThreshold up: boxes with IoU 0.6-0.67 to a kept box survive
    (0.55, 0.32, 4, False),  # scoreThreshold up: drops low boxes
    (0.55, 0.12, 2, False),  # maxBoxes down: truncates
    (0.55, 0.12, 5, True),   # perClassSuppression: overlapping boxes of other classes survive
    (0.45, 0.55, 3, True),   # batch 1 keeps no box: its best box, count 1
])
def test_nms(iou: float, thr: float, max_boxes: int, per_class: bool, tmp_path: Path) -> None:
    def add(b: Any) -> None:
        b.add_nms("nms", ["boxes", "scores"], NMS_OUTPUTS, max_boxes=1)
        p = last_layer(b).NonMaximumSuppression
        p.iouThreshold, p.scoreThreshold, p.maxBoxes, p.perClassSuppression = iou, thr, max_boxes, per_class

    got = run_layer({"boxes": NMS_BOXES, "scores": NMS_SCORES}, NMS_OUTPUTS, add, tmp_path)
    for name, want in zip(NMS_OUTPUTS, nms_oracle(NMS_BOXES, NMS_SCORES, iou, thr, max_boxes, per_class)):
        check(got[name], want)


@oracle_checks("NonMaximumSuppression")
def test_nms_inputs_replace_fields(tmp_path: Path) -> None:
    """The spec: "input 3 ... IoU threshold. When present, it overwrites the value provided in
    layer parameter iouThreshold", input 4 scoreThreshold, input 5 maxBoxes (constants here, the
    fields set to values that would give another result)."""
    def add(b: Any) -> None:
        for name, val in (("iou", 0.75), ("thr", 0.12), ("mb", 3.0)):
            b.add_load_constant_nd(name, name, np.array([val]), (1,))
        b.add_nms("nms", ["boxes", "scores", "iou", "thr", "mb"], NMS_OUTPUTS, iou_threshold=0.3, score_threshold=0.5,
                  max_boxes=6)

    got = run_layer({"boxes": NMS_BOXES, "scores": NMS_SCORES}, NMS_OUTPUTS, add, tmp_path)
    for name, want in zip(NMS_OUTPUTS, nms_oracle(NMS_BOXES, NMS_SCORES, 0.75, 0.12, 3, False)):
        check(got[name], want)
