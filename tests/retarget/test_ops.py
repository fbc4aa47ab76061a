"""Issue 7: ordinary ops whose parameters or meaning changed between opsets are re-targeted (or
refused with one line per cause).

Oracles: formulas from the MIL docs written here with numpy (negative gather indices count from the
end up to iOS16; iOS17 reshape aligns 0s right), torch's conv2d, and coremltools' loader reading
what we write. Agreement of our interpreter before and after re-targeting is the round-trip check.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import ConversionWarning, UnsupportedError
from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.types import Symbol, tensor
from tests.mil.helpers import CoremltoolsLoader, same_bits

pytestmark = pytest.mark.usefixtures("no_fsync")
rng = np.random.default_rng(11)


def save(prog: Program, path: Path, target: str) -> tuple[Program, list[str]]:
    """``prog`` written for ``target`` and read back, and the notes said while writing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        out = converter.save(prog, path, target=target)
    back = converter.load(out)
    assert back.main.opset == target
    return back, [str(w.message) for w in caught if issubclass(w.category, ConversionWarning)]


def op_types(prog: Program) -> list[str]:
    return [op.type for op in prog.walk() if op.type != "const"]


# ---------------------------------------------------------------------------------------------
# gather / scatter: negative indices count from the end up to iOS16, are out of range from iOS17


@pytest.mark.parametrize("kind", ["const", "int16_const", "const_symbolic", "run_time", "run_time_symbolic"])
@pytest.mark.parametrize("target", ["iOS17", "iOS18"])
def test_gather_negative_indices_wrapped(kind, target, tmp_path, coremltools_loader: CoremltoolsLoader):
    idx = np.array([[-1, 0], [-5, 2]], np.int32)
    rows = Symbol("n", lower=1, upper=8) if kind.endswith("symbolic") else 5
    inputs = {"x": tensor("fp32", [rows, 4])}
    if kind.startswith("run_time"):
        inputs["i"] = tensor("int32", [2, 2])

    def body(b, x, i=None):
        indices = i if i is not None else b.const(idx.astype(np.int16) if kind == "int16_const" else idx)
        return [b.gather(x=x, indices=indices, axis=0, name="g")]

    src = new_program(inputs, body, opset="iOS16")
    x = rng.standard_normal((5, 4)).astype(np.float32)
    feeds = {"x": x, "i": idx} if kind.startswith("run_time") else {"x": x}
    want = np.take(x, idx, axis=0)  # the iOS15/16 docs: -D <= i < D, negative counts from the end
    assert same_bits(converter.run(src, feeds)["g"], want)
    back, notes = save(src, tmp_path / "g.mlpackage", target)
    assert not notes and same_bits(converter.run(back, feeds)["g"], want)
    coremltools_loader.load(tmp_path / "g.mlpackage")


def test_gather_nd_and_scatter_negative_indices(tmp_path):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    nd_idx = np.array([[-1, -4], [0, 3]], np.int32)
    sc_idx = np.array([-1, 0], np.int32)
    upd = rng.standard_normal((2, 4)).astype(np.float32)

    def body(b, x, i, j, u):
        return [b.gather_nd(x=x, indices=i, name="nd"), b.scatter(data=x, indices=j, updates=u, mode="update",
                                                                   name="sc")]

    src = new_program({"x": tensor("fp32", [3, 4]), "i": tensor("int32", [2, 2]), "j": tensor("int32", [2]),
                       "u": tensor("fp32", [2, 4])}, body, opset="iOS16")
    feeds = {"x": x, "i": nd_idx, "j": sc_idx, "u": upd}
    scattered = x.copy()
    scattered[[2, 0]] = upd  # -1 is row 2
    back, _ = save(src, tmp_path / "s.mlpackage", "iOS17")
    got = converter.run(back, feeds)
    assert same_bits(got["nd"], x[[2, 0], [0, 3]])
    assert same_bits(got["sc"], scattered)


def test_validate_indices_dropped_going_down_with_a_note(tmp_path):
    src = new_program({"x": tensor("fp32", [5, 4]), "i": tensor("int32", [3])},
                      lambda b, x, i: [b.gather(x=x, indices=i, validate_indices=True, name="g")], opset="iOS17")
    back, notes = save(src, tmp_path / "g.mlpackage", "iOS16")
    assert "validate_indices" not in next(op for op in back.walk() if op.type == "gather").inputs
    assert any("validate_indices=True dropped" in n and "(1 op: 'g')" in n for n in notes), notes


# ---------------------------------------------------------------------------------------------
# conv: a bias computed at run time (iOS17) becomes conv + add for iOS15/16


def test_conv_run_time_bias_split(tmp_path, coremltools_loader: CoremltoolsLoader):
    torch = pytest.importorskip("torch")
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    src = new_program({"x": tensor("fp32", [1, 2, 6, 6]), "bias": tensor("fp32", [3])},
                      lambda b, x, bias: [b.conv(x=x, weight=w, bias=bias, pad_type="same", name="c")], opset="iOS17")
    back, _ = save(src, tmp_path / "c.mlpackage", "iOS16")
    assert op_types(back) == ["conv", "expand_dims", "add"]
    x, bias = rng.standard_normal((1, 2, 6, 6)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias),
                                      padding=1).numpy()
    np.testing.assert_allclose(converter.run(back, {"x": x, "bias": bias})["c"], want, rtol=1e-5, atol=1e-5)
    assert same_bits(converter.run(back, {"x": x, "bias": bias})["c"], converter.run(src, {"x": x, "bias": bias})["c"])
    coremltools_loader.load(tmp_path / "c.mlpackage")


def test_conv_transpose_run_time_weight_refused(tmp_path):
    src = new_program({"x": tensor("fp32", [1, 2, 4, 4]), "w": tensor("fp32", [2, 3, 3, 3])},
                      lambda b, x, w: [b.conv_transpose(x=x, weight=w, name="ct")], opset="iOS17")
    with pytest.raises(UnsupportedError, match=r"conv_transpose: a conv_transpose weight computed at run time has "
                                               r"no iOS16 form \(1 op: 'ct'\)"):
        converter.save(src, tmp_path / "ct.mlpackage", target="iOS16")
    assert not (tmp_path / "ct.mlpackage").exists()


# ---------------------------------------------------------------------------------------------
# reshape: iOS17 aligns the 0s of shape to the right


def test_reshape_zero_dims_written_out_going_down(tmp_path):
    src = new_program({"x": tensor("fp32", [2, 3, 4])},
                      lambda b, x: [b.reshape(x=x, shape=[0, -1], name="r")], opset="iOS17")
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    want = x.reshape(3, 8)  # iOS17 docs: shape[i] matches x[j] when len(shape) - i == rank(x) - j
    assert same_bits(converter.run(src, {"x": x})["r"], want)
    back, _ = save(src, tmp_path / "r.mlpackage", "iOS16")
    assert same_bits(converter.run(back, {"x": x})["r"], want)
    shape = next(op for op in back.walk() if op.type == "reshape").inputs["shape"].const_val
    assert shape.tolist() == [3, -1]


def test_reshape_with_an_int8_shape_retyped(tmp_path):
    src = new_program({"x": tensor("fp32", [2, 6])},
                      lambda b, x: [b.reshape(x=x, shape=b.const(np.array([3, 4], np.int8)), name="r")], opset="iOS17")
    back, _ = save(src, tmp_path / "r.mlpackage", "iOS16")
    assert next(op for op in back.walk() if op.type == "reshape").inputs["shape"].type.dtype.name == "int32"


# ---------------------------------------------------------------------------------------------
# crop_resize: roi (iOS15/16) <-> boxes + box_indices (iOS17)


def _crop_program(opset: str, roi_shape: list[int] | None = None) -> Program:
    if roi_shape is not None:
        return new_program({"x": tensor("fp32", [2, 3, 8, 8]), "roi": tensor("fp32", roi_shape)},
                           lambda b, x, roi: [b.crop_resize(x=x, roi=roi, target_height=3, target_width=2, name="c")],
                           opset=opset)
    return new_program({"x": tensor("fp32", [2, 3, 8, 8]), "boxes": tensor("fp32", [3, 4]),
                        "idx": tensor("int32", [3])},
                       lambda b, x, boxes, idx: [b.crop_resize(x=x, boxes=boxes, box_indices=idx, target_height=3,
                                                               target_width=2, name="c")], opset=opset)


def _boxes(n: int) -> np.ndarray:
    lo = rng.uniform(0, 3, (n, 2))
    return np.concatenate([lo, lo + rng.uniform(1, 4, (n, 2))], axis=1).astype(np.float32)


@pytest.mark.parametrize("coords", [4, 5])
def test_crop_resize_roi_to_boxes(coords, tmp_path, coremltools_loader: CoremltoolsLoader):
    src = _crop_program("iOS16", [3, 1, coords, 1, 1])
    boxes = _boxes(3)
    roi = boxes if coords == 4 else np.concatenate([np.array([[1], [0], [1]], np.float32), boxes], axis=1)
    feeds = {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32), "roi": roi.reshape(3, 1, coords, 1, 1)}
    back, _ = save(src, tmp_path / "c.mlpackage", "iOS17")
    assert "roi" not in next(op for op in back.walk() if op.type == "crop_resize").inputs
    assert same_bits(converter.run(back, feeds)["c"], converter.run(src, feeds)["c"])
    coremltools_loader.load(tmp_path / "c.mlpackage")


def test_crop_resize_boxes_to_roi(tmp_path):
    src = _crop_program("iOS17")
    feeds = {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32), "boxes": _boxes(3),
             "idx": np.array([1, 0, 1], np.int32)}
    back, _ = save(src, tmp_path / "c.mlpackage", "iOS16")
    assert "roi" in next(op for op in back.walk() if op.type == "crop_resize").inputs
    assert same_bits(converter.run(back, feeds)["c"], converter.run(src, feeds)["c"])


# ---------------------------------------------------------------------------------------------
# parameters added later; dtypes iOS17 lets differ


def test_topk_parameters_dropped_at_their_defaults_and_refused_otherwise(tmp_path):
    keep = new_program({"x": tensor("fp32", [2, 6])},
                       lambda b, x: list(b.topk(x=x, k=2, sort=True, return_indices=True, name="t")), opset="iOS16")
    back, _ = save(keep, tmp_path / "t.mlpackage", "iOS15")
    assert not {"sort", "return_indices"} & set(next(op for op in back.walk() if op.type == "topk").inputs)
    unsorted = new_program({"x": tensor("fp32", [2, 6])},
                           lambda b, x: list(b.topk(x=x, k=2, sort=False, name="t")), opset="iOS16")
    with pytest.raises(UnsupportedError, match=r"topk: sort=False has no iOS15 form \(sort was added in iOS16"):
        converter.save(unsorted, tmp_path / "u.mlpackage", target="iOS15")


def test_gru_reset_after_refused_going_down(tmp_path):
    h = 2

    def body(b, x, h0):
        return list(b.gru(x=x, initial_h=h0, weight_ih=rng.standard_normal((3 * h, 3)).astype(np.float32),
                          weight_hh=rng.standard_normal((3 * h, h)).astype(np.float32), reset_after=True, name="g"))

    src = new_program({"x": tensor("fp32", [4, 1, 3]), "h0": tensor("fp32", [1, h])}, body, opset="iOS18")
    with pytest.raises(UnsupportedError, match=r"gru: reset_after=True has no iOS17 form"):
        converter.save(src, tmp_path / "g.mlpackage", target="iOS17")


def test_ios17_weight_dtypes_retyped_when_exact(tmp_path, coremltools_loader: CoremltoolsLoader):
    exact = (rng.integers(-8, 8, (3, 2, 1, 1)) / 4).astype(np.float32)  # fp16 holds these exactly

    def body(b, x):
        y = b.conv(x=x, weight=exact, name="c")
        return [b.clamped_relu(x=y, alpha=np.float32(0.5), beta=np.float32(6.0), name="r")]

    src = new_program({"x": tensor("fp16", [1, 2, 4, 4])}, body, opset="iOS17")
    back, _ = save(src, tmp_path / "c.mlpackage", "iOS16")
    conv = next(op for op in back.walk() if op.type == "conv")
    assert conv.inputs["weight"].type.dtype.name == "fp16"
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float16)
    assert same_bits(converter.run(back, {"x": x})["r"], converter.run(src, {"x": x})["r"])
    coremltools_loader.load(tmp_path / "c.mlpackage")

    inexact = new_program({"x": tensor("fp16", [1, 2, 4, 4])},
                          lambda b, x: [b.conv(x=x, weight=np.full((3, 2, 1, 1), 0.1, np.float32), name="c")],
                          opset="iOS17")
    with pytest.raises(UnsupportedError, match="'weight' holds values fp16 cannot represent exactly"):
        converter.save(inexact, tmp_path / "i.mlpackage", target="iOS16")


def test_nms_refused_both_ways(tmp_path):
    def body16(b, boxes, scores):
        return list(b.non_maximum_suppression(boxes=boxes, scores=scores, iou_threshold=0.5, score_threshold=0.1,
                                              max_boxes=3, name="n"))

    src = new_program({"boxes": tensor("fp32", [1, 5, 4]), "scores": tensor("fp32", [1, 5, 2])}, body16, opset="iOS16")
    with pytest.raises(UnsupportedError, match="non_maximum_suppression changed in iOS17"):
        converter.save(src, tmp_path / "n.mlpackage", target="iOS17")


# ---------------------------------------------------------------------------------------------
# one line per cause


def test_refusals_are_grouped_by_cause_with_counts(tmp_path):
    def body(b, x, i):
        outs = []
        for k in range(12):
            outs.append(b.topk(x=x, k=1, sort=False, name=f"t{k}")[0])
        for k in range(7):
            outs.append(b.slice_update(x=x, update=b.const(np.zeros((1, 6), np.float32)), begin=[0, 0], end=[1, 6],
                                       name=f"s{k}"))
        return outs

    src = new_program({"x": tensor("fp32", [2, 6]), "i": tensor("int32", [1])}, body, opset="iOS18")
    with pytest.raises(UnsupportedError) as e:
        converter.save(src, tmp_path / "x.mlpackage", target="iOS15")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.count("sort=False has no iOS15 form") == 1 and "(12 ops: 't0', 't1', 't2', ...)" in msg, msg
    assert msg.count("'t0'") == 1, "a refused op is reported once, not again by the target check"
    assert msg.count("slice_update' is not available in opset iOS15") == 1 and "(7 ops: 's0', 's1', 's2', ...)" in msg
    assert len(msg) < 600, len(msg)
