"""Tensor operations against onnxruntime, torch and the WebNN vectors.

Where MIL and the oracle differ in convention the test maps one onto the other and says so
(one_hot's negative indices, band_part as two Trilu, NMS's merge of per-class selections); the
expected values always come from the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from tests.oracles import webnn_vectors
from tests.oracles.onnx_oracle import run_onnx, run_onnx_node

from .harness import Case, assert_close, run_case, run_op
from .oracle_util import DT_ID, DTYPES, assert_exact, i32, i64, random_data, single_op_vectors

ORACLE = {
    "concat": "onnxruntime Concat (interleave: Unsqueeze + Concat + Reshape) + WebNN concat vectors",
    "split": "onnxruntime Split + WebNN split vectors",
    "stack": "onnxruntime Unsqueeze + Concat",
    "tile": "onnxruntime Tile + WebNN tile vectors (and expand vectors, as reshape + tile)",
    "flatten2d": "onnxruntime Flatten",
    "shape": "onnxruntime Shape",
    "fill": "onnxruntime ConstantOfShape",
    "fill_like": "onnxruntime Shape + ConstantOfShape",
    "range_1d": "onnxruntime Range (int32), torch.arange (fp32, fp16)",
    "one_hot": "onnxruntime OneHot",
    "non_zero": "onnxruntime NonZero",
    "band_part": "onnxruntime Trilu (upper with k=-lower, then lower with k=upper); torch.triu/tril for fp16",
    "identity": "onnxruntime Identity + WebNN identity vectors",
    "select": "onnxruntime Where",
    "non_maximum_suppression": "onnxruntime NonMaxSuppression (center_point_box=1)",
}

_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5], np.float32)


# ---------------------------------------------------------------------------------------------
# concat, stack, split, tile, flatten2d


_CONCATS = [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], -2), ([(2, 0, 3), (2, 4, 3)], 1), ([(3,)], 0)]


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shapes,axis", _CONCATS, ids=str)
def test_concat_vs_onnxruntime(shapes, axis, dt):
    values = [random_data(s, dt, seed=i) for i, s in enumerate(shapes)]
    got = run_op("concat", {"values": values}, {"axis": axis})[0]
    names = {f"v{i}": v for i, v in enumerate(values)}
    want = run_onnx_node("Concat", names, {"axis": axis})[0]
    assert_exact(got, want, f"concat {shapes}")


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,n,axis", [((2, 3), 2, 0), ((2, 3), 3, -1), ((2, 3, 4), 2, 1)], ids=str)
def test_concat_interleave_vs_onnxruntime(shape, n, axis, dt):
    """interleave: slice j of input i lands at j * n + i, i.e. stacking behind ``axis`` and merging."""
    values = [random_data(shape, dt, seed=i) for i in range(n)]
    got = run_op("concat", {"values": values}, {"axis": axis, "interleave": True})[0]
    ax = axis % len(shape)
    out_shape = list(shape)
    out_shape[ax] *= n
    names = [f"v{i}" for i in range(n)]
    nodes = [helper.make_node("Unsqueeze", [nm, "ax"], [f"u{i}"]) for i, nm in enumerate(names)]
    nodes += [helper.make_node("Concat", [f"u{i}" for i in range(n)], ["c"], axis=ax + 1),
              helper.make_node("Reshape", ["c", "shape"], ["out"])]
    want = run_onnx(nodes, dict(zip(names, values)), ["out"], {"ax": i64([ax + 1]), "shape": i64(out_shape)})[0]
    assert_exact(got, want, "concat interleave")


def test_concat_scalars_vs_onnxruntime():
    """Rank-0 values concatenate into a 1-D tensor (coremltools' rule), i.e. they are stacked."""
    values = [np.float32(1.5), np.float32(-2.0), np.float32(np.nan)]
    got = run_op("concat", {"values": values}, {"axis": 0})[0]
    nodes = [helper.make_node("Unsqueeze", [f"v{i}", "ax"], [f"u{i}"]) for i in range(3)]
    nodes.append(helper.make_node("Concat", ["u0", "u1", "u2"], ["out"], axis=0))
    want = run_onnx(nodes, {f"v{i}": np.asarray(v) for i, v in enumerate(values)}, ["out"], {"ax": i64([0])})[0]
    assert_exact(got, want, "concat scalars")


def test_concat_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("concat"):
        values = [vec.inputs[n] for n in args["inputs"]]
        got = run_op("concat", {"values": values}, {"axis": args["axis"]})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,n,axis", [((2, 3), 2, 0), ((2, 3), 3, -1), ((4,), 1, 1), ((), 2, 0)], ids=str)
def test_stack_vs_onnxruntime(shape, n, axis, dt):
    values = [random_data(shape, dt, seed=i) for i in range(n)]
    got = run_op("stack", {"values": values}, {"axis": axis})[0]
    ax = axis % (len(shape) + 1)
    nodes = [helper.make_node("Unsqueeze", [f"v{i}", "ax"], [f"u{i}"]) for i in range(n)]
    nodes.append(helper.make_node("Concat", [f"u{i}" for i in range(n)], ["out"], axis=ax))
    want = run_onnx(nodes, {f"v{i}": np.asarray(v) for i, v in enumerate(values)}, ["out"], {"ax": i64([ax])})[0]
    assert_exact(got, want, f"stack axis {axis}")


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,axis,sizes,num", [((6, 4), 0, [1, 2, 3], None), ((3, 7), -1, [4, 0, 3], None),
                                                  ((6, 4), 0, None, 3), ((2, 4, 3), 1, None, 1),
                                                  ((4, 6), 1, [2, 4], 2)], ids=str)
def test_split_vs_onnxruntime(shape, axis, sizes, num, dt):
    x = random_data(shape, dt)
    params = {"axis": axis, **({"split_sizes": sizes} if sizes else {}), **({"num_splits": num} if num else {})}
    got = run_op("split", {"x": x}, params)
    count = len(sizes) if sizes else num
    if sizes:
        want = run_onnx_node("Split", {"x": x}, {"axis": axis}, initializers={"s": i64(sizes)}, n_outputs=count)
    else:
        want = run_onnx_node("Split", {"x": x}, {"axis": axis, "num_outputs": count}, n_outputs=count)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_exact(g, w, f"split {params}")


def test_split_vs_webnn_vectors():
    checked = 0
    for vec, args, opts, outs in single_op_vectors("split"):
        splits = args["splits"]
        params = {"axis": opts.get("axis", 0)}
        params.update({"num_splits": splits} if isinstance(splits, int) else {"split_sizes": splits})
        got = run_op("split", {"x": vec.inputs[args["input"]]}, params)
        assert len(got) == len(outs)
        for g, name in zip(got, outs):
            webnn_vectors.assert_ulp(g, vec.expected[name], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,reps", [((2, 3), [1, 1]), ((2, 3), [3, 2]), ((1, 0, 2), [2, 3, 1]), ((4,), [2])],
                         ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_tile_vs_onnxruntime(shape, reps, dt, runtime):
    x = random_data(shape, dt)
    inputs, params = ({"x": x, "reps": i32(reps)}, {}) if runtime else ({"x": x}, {"reps": reps})
    got = run_op("tile", inputs, params)[0]
    want = run_onnx_node("Tile", {"x": x}, initializers={"r": i64(reps)})[0]
    assert_exact(got, want, f"tile {reps}")


def test_tile_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("tile"):
        x = vec.inputs[args["input"]]
        if x.dtype not in (np.float32, np.float16, np.int32):
            continue  # MIL tile has no uint32
        got = run_op("tile", {"x": x}, {"reps": args["repetitions"]})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


def test_tile_after_reshape_vs_webnn_expand_vectors():
    """WebNN expand (numpy broadcasting) is what frontends lower to reshape (prepend 1s) + tile."""
    checked = 0
    for vec, args, _, out in single_op_vectors("expand"):
        x = vec.inputs[args["input"]]
        new_shape = list(args["newShape"])
        lifted = [1] * (len(new_shape) - x.ndim) + list(x.shape)
        reps = [n if d == 1 else 1 for d, n in zip(lifted, new_shape)]

        def build(b, x, lifted=lifted, reps=reps):
            return b.tile(x=b.reshape(x=x, shape=i32(lifted)), reps=i32(reps))

        got = run_case(Case("tile", {"x": x}, build=build))[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shape,axis", [((3,), -1), ((3,), 1), ((4, 3), -1), ((2, 3, 2), -1), ((5, 5, 2), 1),
                                        ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -3), ((2, 0, 4), 2)], ids=str)
def test_flatten2d_vs_onnxruntime(shape, axis, dt):
    x = random_data(shape, dt)
    got = run_op("flatten2d", {"x": x}, {"axis": axis})[0]
    want = run_onnx_node("Flatten", {"x": x}, {"axis": axis})[0]
    assert_exact(got, want, f"flatten2d axis {axis}")


# ---------------------------------------------------------------------------------------------
# shape, fill, fill_like, range_1d


@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5), (7,)], ids=str)
def test_shape_vs_onnxruntime(shape):
    x = random_data(shape, np.float16)
    got = run_op("shape", {"x": x})[0]
    want = run_onnx_node("Shape", {"x": x})[0]
    assert_exact(got, want.astype(np.int32), f"shape {shape}")


_FILL_VALUES = [np.float32(-2.5), np.float16(0.1), np.int32(-7), np.bool_(True), np.float32(np.nan)]


def _constant_of_shape(shape_input: str, value: np.ndarray) -> helper.NodeProto:
    return helper.make_node("ConstantOfShape", [shape_input], ["out"],
                            value=numpy_helper.from_array(np.asarray(value).reshape(1)))


@pytest.mark.parametrize("value", _FILL_VALUES, ids=lambda v: f"{np.asarray(v).dtype}_{v}")
@pytest.mark.parametrize("shape", [[2, 3], [4], [2, 0, 1], []], ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_fill_vs_onnxruntime(shape, value, runtime):
    inputs, params = ({"shape": i32(shape)}, {"value": value}) if runtime else ({}, {"shape": i32(shape), "value": value})
    got = run_op("fill", inputs, params)[0]
    want = run_onnx([_constant_of_shape("s", value)], {}, ["out"], {"s": i64(shape)})[0]
    assert_exact(got, want, f"fill {shape} {value}")


def test_fill_default_value_is_fp32_zero():
    got = run_op("fill", {}, {"shape": i32([2, 2])})[0]
    want = run_onnx([_constant_of_shape("s", np.float32(0))], {}, ["out"], {"s": i64([2, 2])})[0]
    assert_exact(got, want, "fill default")


@pytest.mark.parametrize("value", _FILL_VALUES + [None], ids=lambda v: "default" if v is None else f"{np.asarray(v).dtype}")
@pytest.mark.parametrize("ref_dt", [np.int32, np.float16], **DT_ID)
def test_fill_like_vs_onnxruntime(value, ref_dt):
    ref = random_data((3, 1, 2), ref_dt)
    got = run_op("fill_like", {"ref_tensor": ref}, {} if value is None else {"value": value}, opset="iOS16")[0]
    nodes = [helper.make_node("Shape", ["r"], ["s"]), _constant_of_shape("s", np.float32(0) if value is None else value)]
    want = run_onnx(nodes, {"r": ref}, ["out"])[0]
    assert_exact(got, want, f"fill_like {value}")


_INT_RANGES = [(0, 10, 3), (7, -4, -3), (5, 5, 1), (5, 0, 1), (-3, 3, 1), (0, 1, 100)]
_FLOAT_RANGES = [(0.5, 3.0, 0.75), (1.0, -2.2, -0.4), (0.0, 1.0, 0.1), (2.0, 2.0, 0.5), (-1.5, 0.0, 0.3)]


@pytest.mark.parametrize("start,end,step", _INT_RANGES, ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_range_1d_int32_vs_onnxruntime(start, end, step, runtime):
    vals = {"start": np.int32(start), "end": np.int32(end), "step": np.int32(step)}
    got = run_op("range_1d", vals if runtime else {}, {} if runtime else vals)[0]
    want = run_onnx_node("Range", {k: np.asarray(v) for k, v in vals.items()})[0]
    assert_exact(got, want, f"range {start} {end} {step}")


@pytest.mark.parametrize("dt", [np.float32, np.float16], **DT_ID)
@pytest.mark.parametrize("start,end,step", _FLOAT_RANGES, ids=str)
def test_range_1d_float_vs_torch(start, end, step, dt):
    """torch.arange computes start + i * step in wide precision and rounds once, like our kernel
    (onnxruntime accumulates the step, which drifts)."""
    import torch

    vals = {k: dt(v) for k, v in (("start", start), ("end", end), ("step", step))}
    got = run_op("range_1d", vals)[0]
    tdt = torch.float32 if dt == np.float32 else torch.float16
    want = torch.arange(float(vals["start"]), float(vals["end"]), float(vals["step"]), dtype=tdt).numpy()
    assert got.shape == want.shape, f"range {start} {end} {step}: {got.shape} != {want.shape}"
    webnn_vectors.assert_ulp(got, want, 1 if dt == np.float16 else 0, what=f"range {start} {end} {step}")


# ---------------------------------------------------------------------------------------------
# one_hot, non_zero, band_part, identity, select


@pytest.mark.parametrize("on_off", [None, (np.float32(2.5), np.float32(-1)), (np.int32(7), np.int32(3)),
                                    (np.float16(1), np.float16(0))], ids=lambda v: "default" if v is None else str(v[0].dtype))
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("runtime_size", [False, True], ids=["const_size", "runtime_size"])
def test_one_hot_vs_onnxruntime(on_off, axis, runtime_size):
    """Out-of-range indices give all off_value; MIL treats negative ones the same (ONNX would wrap
    them), so negatives are handed to onnxruntime as ``depth``, which is out of range for both."""
    depth = 5
    indices = i32([[0, 4, -1], [5, 2, -6]])
    params = {"axis": axis}
    if on_off is not None:
        params.update(on_value=on_off[0], off_value=on_off[1])
    if runtime_size:
        got = run_op("one_hot", {"indices": indices, "one_hot_vector_size": np.int32(depth)}, params)[0]
    else:
        got = run_op("one_hot", {"indices": indices}, {"one_hot_vector_size": depth, **params})[0]
    on, off = on_off if on_off is not None else (np.int32(1), np.int32(0))
    values = np.array([off, on], dtype=np.asarray(on).dtype)
    onnx_indices = np.where(indices < 0, depth, indices).astype(np.int64)
    engine = "reference" if values.dtype == np.int32 else "ort"  # onnxruntime has no int32 OneHot kernel
    want = run_onnx_node("OneHot", {"i": onnx_indices}, {"axis": axis},
                         initializers={"d": i64(depth), "v": values}, engine=engine)[0]
    assert_exact(got, want, f"one_hot axis {axis}")


@pytest.mark.parametrize("case", ["fp32_special", "fp16", "int32", "bool", "empty"])
def test_non_zero_vs_onnxruntime(case):
    x = {
        "fp32_special": np.stack([_SPECIAL, _SPECIAL[::-1]]),
        "fp16": random_data((3, 4), np.float16) * (random_data((3, 4), np.bool_, 1)),
        "int32": random_data((2, 3, 2), np.int32) * (random_data((2, 3, 2), np.bool_, 2)),
        "bool": random_data((5,), np.bool_),
        "empty": np.zeros((0, 3), np.float32),
    }[case]
    got = run_op("non_zero", {"x": x})[0]
    want = run_onnx_node("NonZero", {"x": x})[0]
    assert_exact(got, want.T.astype(np.int32), f"non_zero {case}")


@pytest.mark.parametrize("value", [3.0, 0.0])
def test_non_zero_scalar_vs_torch(value):
    """A rank-0 input gives [N, 0] (R = rank 0); onnxruntime treats a scalar as 1-D, torch does not."""
    import torch

    x = np.float32(value)
    got = run_op("non_zero", {"x": x})[0]
    want = torch.nonzero(torch.tensor(value)).numpy().astype(np.int32)
    assert_exact(got, want, f"non_zero scalar {value}")


def _band_oracle(x: np.ndarray, lower: int, upper: int) -> np.ndarray:
    nodes, name = [], "x"
    if lower >= 0:
        nodes.append(helper.make_node("Trilu", [name, "kl"], ["t"], upper=1))
        name = "t"
    if upper >= 0:
        nodes.append(helper.make_node("Trilu", [name, "ku"], ["u"], upper=0))
        name = "u"
    nodes.append(helper.make_node("Identity", [name], ["out"]))
    return run_onnx(nodes, {"x": x}, ["out"], {"kl": i64(-lower), "ku": i64(upper)})[0]


@pytest.mark.parametrize("lower,upper", [(-1, -1), (0, -1), (-1, 0), (0, 0), (1, 2), (2, 0), (-3, 1), (7, 7)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.bool_], **DT_ID)
def test_band_part_vs_onnxruntime(lower, upper, dt):
    x = random_data((2, 4, 5), dt)
    if dt == np.float32:
        x[0] = np.nan  # NaN outside the band must become 0
    got = run_op("band_part", {"x": x}, {"lower": lower, "upper": upper})[0]
    assert_exact(got, _band_oracle(x, lower, upper), f"band_part {lower} {upper}")


@pytest.mark.parametrize("lower,upper", [(0, -1), (1, 0), (-1, 2)], ids=str)
def test_band_part_fp16_vs_torch(lower, upper):
    import torch

    x = random_data((3, 4), np.float16)
    got = run_op("band_part", {"x": x}, {"lower": lower, "upper": upper})[0]
    t = torch.from_numpy(x)
    if lower >= 0:
        t = torch.triu(t, -lower)
    if upper >= 0:
        t = torch.tril(t, upper)
    assert_exact(got, t.numpy(), f"band_part fp16 {lower} {upper}")


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
def test_identity_vs_onnxruntime(dt):
    x = random_data((2, 3), dt)
    assert_exact(run_op("identity", {"x": x})[0], run_onnx_node("Identity", {"x": x})[0], "identity")


def test_identity_vs_webnn_vectors():
    checked = 0
    for vec, args, _, out in single_op_vectors("identity"):
        got = run_op("identity", {"x": vec.inputs[args["input"]]})[0]
        webnn_vectors.assert_ulp(got, vec.expected[out], 0, what=vec.name)
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("dt", DTYPES, **DT_ID)
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((3, 1), (1, 4), ()), ((), (2, 2), (2, 1)),
                                    ((4,), (3, 1), (1,))], ids=str)
def test_select_vs_onnxruntime(shapes, dt):
    cond = random_data(shapes[0], np.bool_, 1)
    a, b = random_data(shapes[1], dt, 2), random_data(shapes[2], dt, 3)
    got = run_op("select", {"cond": np.asarray(cond), "a": np.asarray(a), "b": np.asarray(b)})[0]
    engine = "reference" if dt == np.bool_ else "ort"  # onnxruntime has no bool Where kernel
    want = run_onnx_node("Where", {"c": np.asarray(cond), "a": np.asarray(a), "b": np.asarray(b)}, engine=engine)[0]
    assert_exact(got, want, f"select {shapes}")


def test_select_special_values_vs_onnx_reference():
    """NaN, inf and -0.0 pass through unchanged (onnxruntime's Where turns -0.0 into 0.0, so the
    ONNX reference evaluator is the oracle here)."""
    a = np.repeat(_SPECIAL[:, None], 6, 1)
    b = np.repeat(_SPECIAL[None, :], 6, 0)
    cond = random_data((6, 6), np.bool_, 4)
    got = run_op("select", {"cond": cond, "a": a, "b": b})[0]
    want = run_onnx_node("Where", {"c": cond, "a": a, "b": b}, engine="reference")[0]
    assert_close(got, want, what="select special")
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------------------------------------
# non_maximum_suppression


def _nms_inputs(n: int, count: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 20, (n, count, 2))
    sizes = rng.uniform(1, 8, (n, count, 2))
    scores = rng.permutation(n * count * classes).reshape(n, count, classes) / (n * count * classes) + 0.001
    return np.concatenate([centers, sizes], -1).astype(np.float32), scores.astype(np.float32)


def _nms_oracle(boxes, scores, iou, score_thr, max_boxes, per_class):
    """Selected box indices per batch from onnxruntime, merged in descending score order.

    MIL scores a box by its best class; with per_class_suppression a box only competes within
    that class. ONNX runs NMS per class on a [n, classes, B] score tensor, so each box gets its best
    score in its own class row (or in a single row without per-class suppression) and -inf
    elsewhere (never above the threshold); the per-class selections are merged by score and cut
    at max_boxes.
    """
    n, count, classes = scores.shape
    best = scores.astype(np.float32).max(-1)
    rows = classes if per_class else 1
    onnx_scores = np.full((n, rows, count), -np.inf, np.float32)
    for b in range(n):
        for i in range(count):
            onnx_scores[b, int(np.argmax(scores[b, i])) if per_class else 0, i] = best[b, i]
    thr = np.float32(score_thr if score_thr is not None else np.finfo(np.float32).min)
    sel = run_onnx_node("NonMaxSuppression", {"boxes": boxes.astype(np.float32), "scores": onnx_scores},
                        {"center_point_box": 1},
                        initializers={"m": i64([count]), "iou": np.array([iou], np.float32),
                                      "thr": np.array([thr], np.float32)})[0]
    out = []
    for b in range(n):
        picked = sel[sel[:, 0] == b, 2].tolist()
        out.append(sorted(picked, key=lambda i: -best[b, i])[:max_boxes])
    return out


@pytest.mark.parametrize("per_class", [False, True], ids=["global", "per_class"])
@pytest.mark.parametrize("classes", [1, 4])
@pytest.mark.parametrize("iou,score_thr,max_boxes", [(0.3, 0.2, 5), (0.0, 0.5, 20), (0.7, 0.0, 3), (1.0, 0.9, 30),
                                                     (0.5, 2.0, 4)], ids=str)
@pytest.mark.parametrize("dt", [np.float32, np.float16], **DT_ID)
def test_non_maximum_suppression_ios15_vs_onnxruntime(per_class, classes, iou, score_thr, max_boxes, dt):
    boxes, scores = _nms_inputs(2, 12, classes, seed=classes * 10 + int(per_class))
    boxes, scores = boxes.astype(dt), scores.astype(dt)
    got_boxes, got_scores, got_idx, got_count = run_op(
        "non_maximum_suppression", {"boxes": boxes, "scores": scores},
        {"iou_threshold": dt(iou), "score_threshold": dt(score_thr), "max_boxes": max_boxes,
         "per_class_suppression": per_class})
    for b, picked in enumerate(_nms_oracle(boxes, scores, iou, score_thr, max_boxes, per_class)):
        if not picked:  # MIL (NeuralNetwork NMS rule): the best box, counted once
            picked = [int(np.argmax(scores[b].astype(np.float32).max(-1)))]
        k = len(picked)
        assert got_count[b] == k
        np.testing.assert_array_equal(got_idx[b], picked + [-1] * (max_boxes - k))
        np.testing.assert_array_equal(got_boxes[b, :k], boxes[b, picked])
        np.testing.assert_array_equal(got_scores[b, :k], scores[b, picked])
        assert not got_boxes[b, k:].any() and not got_scores[b, k:].any()


@pytest.mark.parametrize("per_class", [False, True], ids=["global", "per_class"])
@pytest.mark.parametrize("iou,max_boxes", [(0.25, 4), (0.5, 40)], ids=str)
def test_non_maximum_suppression_ios17_vs_onnxruntime(per_class, iou, max_boxes):
    """iOS17: no score_threshold, boxes/scores with the box count last, no count output."""
    boxes, scores = _nms_inputs(3, 15, 3, seed=5)
    got_boxes, got_scores, got_idx = run_op(
        "non_maximum_suppression",
        {"boxes": boxes.transpose(0, 2, 1).copy(), "scores": scores.transpose(0, 2, 1).copy()},
        {"iou_threshold": np.float32(iou), "max_boxes": max_boxes, "per_class_suppression": per_class},
        opset="iOS17")
    assert got_boxes.shape == (3, 4, max_boxes) and got_scores.shape == (3, 3, max_boxes)
    for b, picked in enumerate(_nms_oracle(boxes, scores, iou, None, max_boxes, per_class)):
        k = len(picked)
        np.testing.assert_array_equal(got_idx[b], picked + [-1] * (max_boxes - k))
        np.testing.assert_array_equal(got_boxes[b, :, :k], boxes[b, picked].T)
        np.testing.assert_array_equal(got_scores[b, :, :k], scores[b, picked].T)
        assert not got_boxes[b, :, k:].any() and not got_scores[b, :, k:].any()
