"""Tensor transformations against onnxruntime, torch and the WebNN vectors.

Where MIL and the oracle differ in convention, the test maps MIL parameters onto the oracle's
(slice masks become INT64 sentinels, squeeze_mask a Squeeze after the Slice); the expected values
always come from the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from converter.ir.builder import new_program
from converter.ir.types import Symbol, tensor
from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import run_op
from .oracle_util import DT_ID, DTYPES, assert_exact, i32, i64, random_data, single_op_vectors

ORACLE = {
    "reshape": "onnxruntime Reshape (allowzero=0) + WebNN reshape vectors",
    "reshape_like": "onnxruntime Shape(start, end) + Concat + Reshape",
    "transpose": "onnxruntime Transpose + WebNN transpose vectors",
    "squeeze": "onnxruntime Squeeze; torch.squeeze for explicit axes of size != 1",
    "expand_dims": "onnxruntime Unsqueeze",
    "slice_by_index": "onnxruntime Slice (+ Squeeze) + WebNN slice vectors",
    "slice_by_size": "onnxruntime Slice + WebNN slice vectors",
    "slice_update": "onnxruntime Slice of an iota + ScatterElements",
    "reverse": "torch.flip + WebNN reverse vectors",
    "reverse_sequence": "onnxruntime ReverseSequence (Transpose around it for other axes)",
}

_BIG = np.iinfo(np.int64).max


# ---------------------------------------------------------------------------------------------
# reshape


_RESHAPES = [  # (input shape, MIL shape) where MIL's 0/-1 mean what ONNX allowzero=0 means
    ((2, 3, 4), [4, -1]),
    ((2, 3, 4), [0, -1, 2]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [0, 0, 0]),
    ((1,), []),
    ((2, 0, 3), [3, 0, 2]),
    ((6,), [1, 2, 1, 3]),
]


@pytest.mark.parametrize("opset", ["iOS15", "iOS17"])
@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,target", _RESHAPES, ids=str)
def test_reshape_vs_onnxruntime(shape, target, dt, opset):
    x = random_data(shape, dt)
    got = run_op("reshape", {"x": x}, {"shape": i32(target)}, opset=opset)[0]
    want = run_onnx_node("Reshape", {"x": x}, {"allowzero": 0}, initializers={"s": i64(target)})[0]
    assert_exact(got, want, f"reshape {shape} -> {target}")


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16], **DT_ID)
def test_reshape_ios17_dtypes_and_runtime_shape_vs_onnxruntime(dt):
    x = random_data((2, 3, 4), dt)
    shape = np.array([3, -1, 0], np.int16)
    got = run_op("reshape", {"x": x, "shape": shape}, opset="iOS17")[0]
    want = run_onnx_node("Reshape", {"x": x, "s": shape.astype(np.int64)})[0]
    assert_exact(got, want, "reshape iOS17 run-time shape")


@pytest.mark.parametrize("shape,target,expected_shape", [
    ((2, 50), [1, 0, -1, 0], (1, 1, 2, 50)),  # the MIL doc's example
    ((2, 3, 4), [0, -1], (3, 8)),
    ((3, 4), [0, 2, 1, 0, -1], (1, 2, 1, 3, 2)),
])
def test_reshape_ios17_right_aligned_zeros(shape, target, expected_shape):
    """iOS17: each 0 copies the dim at the same position counted from the right (1 if none).
    The expected shape is the MIL doc's rule; the values come from onnxruntime's Reshape."""
    x = random_data(shape, np.float32)
    got = run_op("reshape", {"x": x}, {"shape": target}, opset="iOS17")[0]
    want = run_onnx_node("Reshape", {"x": x}, initializers={"s": i64(expected_shape)})[0]
    assert_exact(got, want, f"reshape iOS17 {shape} -> {target}")


def test_reshape_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("reshape"):
        got = run_op("reshape", {"x": vec.inputs[args["input"]]}, {"shape": i32(args["newShape"])})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("opset", ["iOS16", "iOS17"])
def test_reshape_like_vs_onnxruntime(opset):
    x = random_data((2, 3, 4, 5), np.float32 if opset == "iOS16" else np.uint8)
    refs = [np.zeros((6, 7), np.int32), np.zeros((9, 4, 5), np.float16), np.zeros((2,), bool)]
    begins, ends, masks = (0, 1, 0), (1, 0, -1), (False, True, False)
    got = run_op("reshape_like", {"x": x, "ref_tensors": refs},
                 {"begins": begins, "ends": ends, "end_masks": masks}, opset=opset)[0]
    nodes = [helper.make_node("Shape", ["r0"], ["p0"], start=0, end=1),
             helper.make_node("Shape", ["r1"], ["p1"], start=1),
             helper.make_node("Shape", ["r2"], ["p2"], start=0, end=-1),
             helper.make_node("Concat", ["p0", "p1", "p2"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["out"])]
    want = run_onnx(nodes, {"x": x, "r0": refs[0], "r1": refs[1], "r2": refs[2]}, ["out"])[0]
    assert_exact(got, want, "reshape_like")


# ---------------------------------------------------------------------------------------------
# transpose, squeeze, expand_dims


@pytest.mark.parametrize("dt", DTYPES + [np.int8, np.uint16], **DT_ID)
@pytest.mark.parametrize("shape,perm", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4, 1), [-1, 0, -2, 1]), ((5,), [0]),
                                        ((0, 3), [1, 0])], ids=str)
def test_transpose_vs_onnxruntime(shape, perm, dt):
    x = random_data(shape, dt)
    opset = "iOS17" if dt in (np.int8, np.uint16) else "iOS15"
    got = run_op("transpose", {"x": x}, {"perm": perm}, opset=opset)[0]
    want = run_onnx_node("Transpose", {"x": x}, {"perm": [p % len(shape) for p in perm]})[0]
    assert_exact(got, want, f"transpose {perm}")


def test_transpose_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("transpose"):
        x = vec.inputs[args["input"]]
        perm = opts.get("permutation", list(range(x.ndim))[::-1])
        got = run_op("transpose", {"x": x}, {"perm": i32(perm)})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), [0, -2]), ((1, 1), None),
                                        ((3, 1), [1]), ((1, 0, 1), None)], ids=str)
def test_squeeze_vs_onnxruntime(shape, axes, dt):
    x = random_data(shape, dt)
    got = run_op("squeeze", {"x": x}, {} if axes is None else {"axes": axes})[0]
    inits = {} if axes is None else {"axes": i64(axes)}
    want = run_onnx_node("Squeeze", {"x": x}, initializers=inits)[0]
    assert_exact(got, want, f"squeeze {axes}")


@pytest.mark.parametrize("shape,axes", [((2, 1, 3), [0, 1]), ((2, 1, 3, 1), [0, 1, 2, -1]), ((4, 5), [1])], ids=str)
def test_squeeze_ignores_non_unit_axes_like_torch(shape, axes):
    """The MIL doc: squeezing a dim that is not 1 is ignored, following PyTorch."""
    import torch

    x = random_data(shape, np.float32)
    got = run_op("squeeze", {"x": x}, {"axes": axes})[0]
    want = torch.squeeze(torch.from_numpy(x), dim=tuple(axes)).numpy()
    assert_exact(got, want, f"squeeze {axes}")


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,axes", [((2, 3), [0]), ((2, 3), [-1, 0]), ((2, 3), [1, -1, 0]), ((), [0, -1])],
                         ids=str)
def test_expand_dims_vs_onnxruntime(shape, axes, dt):
    x = random_data(shape, dt)
    got = run_op("expand_dims", {"x": x}, {"axes": axes})[0]
    want = run_onnx_node("Unsqueeze", {"x": x}, initializers={"axes": i64(axes)})[0]
    assert_exact(got, want, f"expand_dims {axes}")


# ---------------------------------------------------------------------------------------------
# slicing


_SLICES = [  # begin, end, stride, begin_mask, end_mask, squeeze_mask for x of shape (4, 5, 6)
    ([1, 0, 2], [3, 5, 6], None, None, None, None),
    ([-3, -1, 5], [-1, -6, 0], [1, -1, -2], None, None, None),
    ([0, 3, 0], [0, 1, 2], [1, -1, 1], [True, False, False], [True, False, False], None),
    ([3, 2, -1], [0, 0, 0], [-1, 2, -3], [False, True, False], [True, True, True], None),
    ([2, 1, 0], [1, 1, 9], [1, 1, 1], None, None, None),  # empty dims (begin >= end)
    ([9, -9, 1], [20, 9, 2], None, None, None, None),  # out-of-range bounds clamp
    ([1, -1, 0], [2, 0, 6], [1, 1, 2], None, [False, False, True], [True, True, False]),
    ([0, 2, 5], [0, 3, 0], [1, 1, -1], [True, False, False], [False, False, True], [True, True, True]),
]


def _onnx_slice(x: np.ndarray, begin, end, stride, begin_mask, end_mask, squeeze_mask) -> np.ndarray:
    """MIL slice parameters mapped onto ONNX Slice: a masked bound becomes the open end for the
    stride's direction; a squeezed dim takes one element at begin and is squeezed afterwards."""
    rank = x.ndim
    stride = stride or [1] * rank
    bm, em, sm = (m or [False] * rank for m in (begin_mask, end_mask, squeeze_mask))
    starts, ends, steps = [], [], []
    for i in range(rank):
        if sm[i]:
            b = 0 if bm[i] else begin[i]
            starts.append(b)
            ends.append(_BIG if b == -1 else b + 1)
            steps.append(1)
            continue
        s = stride[i]
        starts.append((0 if s > 0 else _BIG) if bm[i] else begin[i])
        ends.append((_BIG if s > 0 else -_BIG) if em[i] else end[i])
        steps.append(s)
    squeezed = [i for i in range(rank) if sm[i]]
    nodes = [helper.make_node("Slice", ["x", "b", "e", "a", "s"], ["y"]),
             helper.make_node("Squeeze", ["y", "sq"], ["out"]) if squeezed else helper.make_node("Identity", ["y"], ["out"])]
    inits = {"b": i64(starts), "e": i64(ends), "a": i64(range(rank)), "s": i64(steps)}
    if squeezed:
        inits["sq"] = i64(squeezed)
    return run_onnx(nodes, {"x": x}, ["out"], inits)[0]


def _slice_params(begin, end, stride, bm, em, sm) -> dict:
    p = {"begin": begin, "end": end}
    for k, v in (("stride", stride), ("begin_mask", bm), ("end_mask", em), ("squeeze_mask", sm)):
        if v is not None:
            p[k] = v
    return p


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("spec", _SLICES, ids=lambda s: str(s[:3]))
def test_slice_by_index_vs_onnxruntime(spec, dt):
    x = random_data((4, 5, 6), dt)
    got = run_op("slice_by_index", {"x": x}, _slice_params(*spec))[0]
    assert_exact(got, _onnx_slice(x, *spec), f"slice_by_index {spec}")


@pytest.mark.parametrize("index_dt", [np.int8, np.int16, np.int32], **DT_ID)
def test_slice_by_index_ios17_runtime_bounds_vs_onnxruntime(index_dt):
    x = random_data((4, 5, 6), np.uint8)
    begin, end = np.array([-1, 1, 0], index_dt), np.array([0, 5, 6], index_dt)
    got = run_op("slice_by_index", {"x": x, "begin": begin, "end": end},
                 {"stride": np.array([-2, 2, 3], index_dt)}, opset="iOS17")[0]
    assert_exact(got, _onnx_slice(x, [-1, 1, 0], [0, 5, 6], [-2, 2, 3], None, None, None), "slice iOS17")


@pytest.mark.parametrize("begin,size", [([1, 0, 2], [2, -1, 3]), ([-2, 4, 0], [1, 1, -1]), ([0, 0, 0], [0, 5, 6]),
                                        ([3, 0, 5], [1, 5, 1])], ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_slice_by_size_vs_onnxruntime(begin, size, runtime):
    x = random_data((4, 5, 6), np.float32)
    b, s = np.array(begin, np.int32), np.array(size, np.int32)
    inputs, params = ({"x": x, "begin": b, "size": s}, {}) if runtime else ({"x": x}, {"begin": b, "size": s})
    got = run_op("slice_by_size", inputs, params)[0]
    ends = [_BIG if n == -1 else (bb if bb >= 0 else bb + d) + n for bb, n, d in zip(begin, size, x.shape)]
    want = run_onnx_node("Slice", {"x": x}, initializers={"b": i64(begin), "e": i64(ends)})[0]
    assert_exact(got, want, f"slice_by_size {begin} {size}")


def test_slice_by_index_and_slice_by_size_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("slice"):
        x = vec.inputs[args["input"]]
        starts, sizes = list(args["starts"]), list(args["sizes"])
        strides = opts.get("strides")
        want = vec.expected[out]
        ends = [b + n for b, n in zip(starts, sizes)]
        params = {"begin": i32(starts), "end": i32(ends), **({"stride": i32(strides)} if strides else {})}
        got = run_op("slice_by_index", {"x": x}, params)[0]
        webnn_vectors.assert_ulp(got, want, 0, what=f"slice_by_index {vec.name}")
        if not strides and x.ndim:
            got = run_op("slice_by_size", {"x": x}, {"begin": starts, "size": sizes})[0]
            webnn_vectors.assert_ulp(got, want, 0, what=f"slice_by_size {vec.name}")
        checked += 1
    assert checked > 0


def _onnx_slice_update(x: np.ndarray, update: np.ndarray, spec) -> np.ndarray:
    """Positions of the slice come from slicing an iota with onnxruntime; ScatterElements writes."""
    iota = np.arange(x.size, dtype=np.int64).reshape(x.shape)
    pos = _onnx_slice(iota, *spec).reshape(-1)
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["xf"]),
             helper.make_node("Reshape", ["u", "flat"], ["uf"]),
             helper.make_node("ScatterElements", ["xf", "pos", "uf"], ["yf"], axis=0),
             helper.make_node("Reshape", ["yf", "shape"], ["out"])]
    return run_onnx(nodes, {"x": x, "u": update}, ["out"],
                    {"flat": i64([-1]), "pos": pos, "shape": i64(x.shape)})[0]


@pytest.mark.parametrize("dt", DTYPES + [np.int16], **DT_ID)
@pytest.mark.parametrize("spec", [s for s in _SLICES if s[5] is None or not all(s[5])], ids=lambda s: str(s[:3]))
def test_slice_update_vs_onnxruntime(spec, dt):
    x = random_data((4, 5, 6), dt, seed=1)
    shape = _onnx_slice(x, *spec).shape
    update = random_data(shape, dt, seed=2)
    got = run_op("slice_update", {"x": x, "update": update}, _slice_params(*spec), opset="iOS18")[0]
    assert_exact(got, _onnx_slice_update(x, update, spec), f"slice_update {spec}")


# ---------------------------------------------------------------------------------------------
# reverse, reverse_sequence


@pytest.mark.parametrize("dt", DTYPES + [np.uint8], **DT_ID)
@pytest.mark.parametrize("axes", [None, [0], [-1, 1], []], ids=str)
def test_reverse_vs_torch(axes, dt):
    import torch

    x = random_data((2, 3, 4), dt)
    got = run_op("reverse", {"x": x}, {} if axes is None else {"axes": i32(axes)},
                 opset="iOS17" if dt == np.uint8 else "iOS15")[0]
    dims = range(x.ndim) if axes is None else axes
    want = torch.flip(torch.from_numpy(x), dims=list(dims)).numpy()
    assert_exact(got, want, f"reverse {axes}")


def test_reverse_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, out in single_op_vectors("reverse"):
        params = {"axes": i32(opts["axes"])} if "axes" in opts else {}
        got = run_op("reverse", {"x": vec.inputs[args["input"]]}, params)[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("seq_axis,batch_axis", [(1, 0), (0, 1), (2, 0), (-1, 1), (0, 2)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32, np.bool_], **DT_ID)
def test_reverse_sequence_vs_onnxruntime(seq_axis, batch_axis, dt):
    x = random_data((3, 4, 5), dt)
    rank = x.ndim
    seq, batch = seq_axis % rank, batch_axis % rank
    rng = np.random.default_rng(seq * 3 + batch)
    lengths = rng.integers(0, x.shape[seq] + 1, x.shape[batch]).astype(np.int32)
    lengths[0] = x.shape[seq]
    got = run_op("reverse_sequence", {"x": x, "lengths": lengths}, {"seq_axis": seq_axis, "batch_axis": batch_axis})[0]
    # ONNX needs batch and time in dims 0 and 1: move them there and back.
    rest = [i for i in range(rank) if i not in (batch, seq)]
    perm = [batch, seq] + rest
    inverse = list(np.argsort(perm))
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=perm),
             helper.make_node("ReverseSequence", ["xt", "len"], ["yt"], batch_axis=0, time_axis=1),
             helper.make_node("Transpose", ["yt"], ["out"], perm=[int(i) for i in inverse])]
    want = run_onnx(nodes, {"x": x}, ["out"], {"len": lengths.astype(np.int64)})[0]
    assert_exact(got, want, f"reverse_sequence seq={seq_axis} batch={batch_axis}")


def test_reverse_sequence_ios17_int8_lengths_vs_onnxruntime():
    x = random_data((4, 3), np.int16)
    lengths = np.array([2, 0, 4], np.int8)
    got = run_op("reverse_sequence", {"x": x, "lengths": lengths}, {"seq_axis": 0, "batch_axis": 1}, opset="iOS17")[0]
    want = run_onnx_node("ReverseSequence", {"x": x}, {"batch_axis": 1, "time_axis": 0},
                         initializers={"len": lengths.astype(np.int64)})[0]
    assert_exact(got, want, "reverse_sequence iOS17")


def test_slice_by_index_out_of_range_squeeze_index_is_an_error():
    from converter.errors import EvaluationError

    with pytest.raises(EvaluationError, match="slice_by_index"):
        run_op("slice_by_index", {"x": np.zeros((2, 3), np.float32), "begin": np.array([5, 0], np.int32)},
               {"end": [0, 3], "squeeze_mask": [True, False]})


# ---------------------------------------------------------------------------------------------
# Symbolic shape inference: the dims infer() derives for symbolic inputs, per the MIL doc's rules
# (run-time values are checked against the oracles above and by tests/ops/test_registry.py).


_S, _T = Symbol("S"), Symbol("T")
_S4 = Symbol("S4", lower=4)


def _infer(op: str, x_type, params: dict, opset: str = "iOS15", extra: dict | None = None):
    """Output type of ``op`` on a symbolic input ``x`` (other inputs from ``extra`` as run-time)."""
    extra = extra or {}
    names = [("x", x_type)] + list(extra.items())

    def body(b, x, *rest):
        return b.add_op(op, {"x": x, **dict(zip(extra, rest)), **params}).outputs[0]

    return new_program(names, body, opset=opset).main.outputs[0].type


def _fresh(d) -> bool:
    return isinstance(d, Symbol) and d not in (_S, _T, _S4)


@pytest.mark.parametrize("x_shape,target,opset,want", [
    ((_S, 3, 4), [-1, 12], "iOS15", (_S, 12)),
    ((_S, 3, 4), [0, -1, 4], "iOS15", (_S, 3, 4)),
    ((_S, 6), [-1, 2, 3], "iOS15", (_S, 2, 3)),
    ((3, _S), [1, 0, -1, 0], "iOS17", (1, 1, 3, _S)),
], ids=str)
def test_reshape_symbolic_inference(x_shape, target, opset, want):
    """-1 cancels the symbols both sides share; iOS17 0s copy dims counted from the right."""
    assert _infer("reshape", tensor("fp32", x_shape), {"shape": i32(target)}, opset).shape == want


def test_reshape_symbolic_inference_of_minus_one_is_an_expression():
    """-1 is the element count over the other target dims, as a polynomial when it divides."""
    (d,) = _infer("reshape", tensor("fp32", (_S, _T)), {"shape": i32([-1])}).shape
    assert d == _S * _T
    assert _infer("reshape", tensor("fp32", (2 * _S, 6)), {"shape": i32([-1, 3])}).shape == (4 * _S, 3)
    assert _infer("reshape", tensor("fp32", (_S, _T, 4)), {"shape": i32([-1, 8])}).shape == (_S * _T // 2, 8)


def test_reshape_runtime_shape_gives_rank_from_its_length():
    t = _infer("reshape", tensor("fp32", (_S, 4)), {}, extra={"shape": tensor("int32", (3,))})
    assert len(t.shape) == 3 and all(_fresh(d) for d in t.shape)
    t = _infer("reshape", tensor("fp32", (_S, 4)), {}, extra={"shape": tensor("int32", (_T,))})
    assert t.shape is None


@pytest.mark.parametrize("dim,begin,end,stride,want", [
    (_S, 0, 1, 1, 1),                      # every size >= 1 has a first element
    (_S, 0, 2**31 - 1, 1, _S),             # an end sentinel keeps the whole dim
    (_S, -1, 2**31 - 1, 1, 1),
    (_S, -1, -(2**31), -1, _S),            # full reverse
    (_S, 1, 2**31 - 1, 1, _S - 1),         # every size >= 1 loses its first element
    (_S, 0, -1, 1, _S - 1),            # all but the last
    (_S, 0, 2**31 - 1, 2, (_S + 1) // 2),  # every other element: ceil(S / 2)
    (_S4, 1, -1, 2, (_S4 + 1) // 2 - 1),
    (_S, 2, 2**31 - 1, 1, "fresh"),        # max(S - 2, 0): S may be 1
    (_S, 0, 3, 1, "fresh"),                # min(S, 3)
    (_S4, 0, 3, 1, 3),                     # S >= 4
    (_S4, -2, 2**31 - 1, 2, 1),
    (_S, 3, 1, 1, 0),                      # begin past end: always empty
], ids=str)
def test_slice_by_index_symbolic_inference(dim, begin, end, stride, want):
    t = _infer("slice_by_index", tensor("fp32", (dim, 2)),
               {"begin": i32([begin, 0]), "end": i32([end, 2]), "stride": i32([stride, 1])})
    assert t.shape[1] == 2
    assert _fresh(t.shape[0]) if want == "fresh" else t.shape[0] == want


def test_squeeze_keeps_symbolic_dims():
    """A symbolic dim is assumed not to be 1 (as coremltools assumes), so the rank is fixed."""
    assert _infer("squeeze", tensor("fp32", (_S, 1, _T)), {}).shape == (_S, _T)
    assert _infer("squeeze", tensor("fp32", (_S, 1)), {"axes": i32([0, 1])}).shape == (_S,)


def test_slice_by_size_symbolic_inference():
    t = _infer("slice_by_size", tensor("fp32", (_S, 5)), {"begin": i32([0, 1]), "size": i32([-1, 3])})
    assert t.shape == (_S, 3)
