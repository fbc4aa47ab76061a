"""non_maximum_suppression through the ONNX backend under onnxruntime, against a greedy NMS
written here from MIL's definition (center-size boxes, a box's score is its best class score,
descending order with ties by lower index, score_threshold kept when >=, suppression by IoU >
iou_threshold against kept boxes of the same best class when per-class, max_boxes in all, padding
0 / -1, iOS15's count and best-box fallback), and against our interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, dtype

from .helpers import op_types, program, run_both, session


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two center-size boxes, in float32 as the op computes it (0 without overlap)."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    half = np.float32(0.5)
    a_lo, a_hi = a[:2] - a[2:] * half, a[:2] + a[2:] * half
    b_lo, b_hi = b[:2] - b[2:] * half, b[:2] + b[2:] * half
    side = np.maximum(np.minimum(a_hi, b_hi) - np.maximum(a_lo, b_lo), np.float32(0))
    inter = side[0] * side[1]
    union = (a_hi - a_lo).prod() + (b_hi - b_lo).prod() - inter
    return float(inter / union) if inter > 0 and union > 0 else 0.0


def _reference(boxes, scores, iou_thr, score_thr, max_boxes, per_class):  # noqa: ANN001, ANN202
    """MIL's NMS on [n, B, 4] / [n, B, K]: (boxes, scores, indices, counts) padded to max_boxes."""
    n, count, k = scores.shape
    out_b = np.zeros((n, max_boxes, 4), boxes.dtype)
    out_s = np.zeros((n, max_boxes, k), scores.dtype)
    out_i = np.full((n, max_boxes), -1, np.int32)
    counts = np.zeros(n, np.int32)
    for b in range(n):
        best = [float(np.max(scores[b, i].astype(np.float32))) for i in range(count)]  # NaN propagates
        cls = [int(np.argmax(scores[b, i])) for i in range(count)]
        order = sorted(range(count), key=lambda i: (np.isnan(best[i]), 0.0 if np.isnan(best[i]) else -best[i], i))
        if score_thr is not None:
            order = [i for i in order if best[i] >= score_thr]
        kept: list[int] = []
        for i in order:
            if len(kept) == max_boxes:
                break
            if any(_iou(boxes[b, i], boxes[b, j]) > iou_thr for j in kept if not per_class or cls[j] == cls[i]):
                continue
            kept.append(i)
        if not kept and score_thr is not None and count and max_boxes:
            kept = [max(range(count), key=lambda i: (best[i], -i))]
        counts[b] = len(kept)
        for slot, i in enumerate(kept):
            out_b[b, slot], out_s[b, slot], out_i[b, slot] = boxes[b, i], scores[b, i], i
    return out_b, out_s, out_i, counts


# batch 0: boxes 0/1/2 overlap (IoU 0.47, 0.18 ...), box 3 apart, box 4 ties box 1 on score and
# overlaps it; batch 1: other values, a cluster of three near-identical boxes
BOXES = np.array([
    [[10.0, 10.0, 8.0, 6.0], [12.0, 11.0, 8.0, 6.0], [16.5, 12.0, 7.0, 9.0], [40.0, 5.0, 4.0, 3.0],
     [11.0, 10.5, 8.5, 6.5], [30.0, 30.0, 2.0, 10.0]],
    [[5.0, 5.0, 4.0, 4.0], [5.5, 5.25, 4.0, 4.5], [5.25, 4.75, 3.5, 4.0], [20.0, 21.0, 6.0, 2.0],
     [22.0, 21.5, 5.0, 2.5], [0.0, 0.0, 1.0, 1.0]],
], np.float32)
SCORES = np.array([
    [[0.10, 0.80, 0.05], [0.62, 0.30, 0.01], [0.20, 0.25, 0.71], [0.33, 0.12, 0.40], [0.62, 0.05, 0.07],
     [0.02, 0.03, 0.015]],
    [[0.55, 0.10, 0.20], [0.15, 0.90, 0.05], [0.45, 0.50, 0.02], [0.07, 0.06, 0.65], [0.64, 0.30, 0.10],
     [0.01, 0.35, 0.30]],
], np.float32)


def _check(boxes: np.ndarray, scores: np.ndarray, iou: float, score_thr: float | None, max_boxes: int,
           per_class: bool, *, dtype: type = np.float32, opset: int | None = None) -> None:
    boxes, scores = boxes.astype(dtype), scores.astype(dtype)
    want = _reference(boxes, scores, iou, score_thr, max_boxes, per_class)
    if score_thr is None:  # iOS17: boxes [n, 4, B], scores [n, K, B]; no count
        feeds = {"b": boxes.transpose(0, 2, 1).copy(), "s": scores.transpose(0, 2, 1).copy()}
        prog = program(feeds, lambda bld, b, s: bld.non_maximum_suppression(
            boxes=b, scores=s, iou_threshold=dtype(iou), max_boxes=max_boxes, per_class_suppression=per_class),
            opset="iOS17")
        want = (want[0].transpose(0, 2, 1), want[1].transpose(0, 2, 1), want[2])
    else:
        feeds = {"b": boxes, "s": scores}
        prog = program(feeds, lambda bld, b, s: bld.non_maximum_suppression(
            boxes=b, scores=s, iou_threshold=dtype(iou), score_threshold=dtype(score_thr),
            max_boxes=max_boxes, per_class_suppression=per_class), opset="iOS15")
    got, interp = run_both(prog, feeds, opset)
    assert "NonMaxSuppression" in op_types(prog, opset)
    assert len(got) == len(want)
    for g, i, w in zip(got.values(), interp.values(), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, i)


@pytest.mark.parametrize("per_class", [False, True])
@pytest.mark.parametrize("max_boxes", [2, 4, 9])
def test_ios15(per_class: bool, max_boxes: int) -> None:
    _check(BOXES, SCORES, 0.3, 0.32, max_boxes, per_class)


@pytest.mark.parametrize("per_class", [False, True])
def test_ios17_layout_no_threshold(per_class: bool) -> None:
    _check(BOXES, SCORES, 0.25, None, 4, per_class)
    _check(BOXES, SCORES, 0.45, None, 8, per_class)


def test_equal_scores_keep_the_lower_index_first() -> None:
    """Boxes 1 and 3 score 0.6 and overlap (IoU 0.78), box 4 also scores 0.6 apart from both: MIL
    keeps box 1 (the lower index) and orders the ties by index, whatever order onnxruntime's NMS
    heap pops equal scores in; then the same with the tied pair's indices swapped."""
    boxes = np.array([[[10, 10, 2, 2], [0, 0, 4, 4], [30, 0, 3, 1], [0.5, 0, 4, 4], [20, 20, 2, 2]]], np.float32)
    scores = np.array([[[0.7, 0.1], [0.6, 0.2], [0.3, 0.1], [0.1, 0.6], [0.6, 0.0]]], np.float32)
    want = _reference(boxes, scores, 0.5, 0.25, 5, False)
    assert want[2][0].tolist() == [0, 1, 4, 2, -1]
    for order in ([0, 1, 2, 3, 4], [0, 3, 2, 1, 4], [4, 3, 2, 1, 0]):
        for per_class in (False, True):
            _check(boxes[:, order], scores[:, order], 0.5, 0.25, 5, per_class)
            _check(boxes[:, order], scores[:, order], 0.5, None, 3, per_class)


def test_no_box_passes_gives_the_best_alone() -> None:
    _check(BOXES, SCORES, 0.3, 0.95, 3, True)
    scores = SCORES.copy()
    scores[1] *= 2  # batch 1 passes, batch 0 falls back
    _check(BOXES, scores, 0.3, 0.95, 3, False)


@pytest.mark.parametrize("iou", [-0.5, 1.5, 0.0, 1.0])
def test_iou_threshold_outside_onnx_range(iou: float) -> None:
    _check(BOXES, SCORES, iou, 0.0, 6, False)
    _check(BOXES, SCORES, iou, None, 6, True)


def test_fp16() -> None:
    _check(BOXES, SCORES, 0.3, 0.3, 5, True, dtype=np.float16)


def test_max_boxes_zero() -> None:
    _check(BOXES, SCORES, 0.3, 0.3, 0, False)


@pytest.mark.parametrize("opset", [17, 18, 19, 20, 21])
def test_every_opset(opset: int) -> None:
    """ReduceMax takes its axes as an attribute before opset 18, as an input from 18."""
    _check(BOXES, SCORES, 0.3, 0.32, 4, True, opset=opset)
    _check(BOXES, SCORES, 0.3, None, 4, False, opset=opset)


def test_symbolic_batch_and_box_count() -> None:
    """One model for any number of boxes: B and the batch are dim_params, read with Shape at run time."""
    n, count = Symbol("n"), Symbol("boxes")
    prog = new_program([("b", TensorType(dtype("fp32"), (n, count, 4))), ("s", TensorType(dtype("fp32"), (n, count, 3)))],
                       lambda bld, b, s: bld.non_maximum_suppression(
                           boxes=b, scores=s, iou_threshold=np.float32(0.3), score_threshold=np.float32(0.32),
                           max_boxes=5, per_class_suppression=True), opset="iOS15")
    sess = session(prog)
    for boxes, scores in ((BOXES, SCORES), (BOXES[:1, :4], SCORES[:1, :4])):
        got = sess.run(None, {"b": boxes, "s": scores})
        for g, w in zip(got, _reference(boxes, scores, 0.3, 0.32, 5, True)):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("score_thr", [0.32, None])
def test_nan_scores_sort_last(score_thr: float | None) -> None:
    """A NaN best score sorts after every number (numpy's order; ONNX TopK puts NaN first) and
    never passes a threshold; -inf scores sort before it."""
    scores = SCORES.copy()
    scores[0, 2, :] = np.nan
    scores[0, 5, :] = -np.inf
    scores[1, 0, 1] = np.nan
    want = _reference(BOXES, scores, 0.3, score_thr, 6, False)
    if score_thr is None:
        assert want[2][0].tolist() == [0, 3, 5, 2, -1, -1]  # box 5 (-inf) before box 2 (NaN)
    _check(BOXES, scores, 0.3, score_thr, 6, False)


@pytest.mark.parametrize("score_thr", [0.1, None])
def test_one_nan_class_score_makes_the_best_nan(score_thr: float | None) -> None:
    """numpy's max and argmax take a NaN among a box's class scores (the first NaN's class):
    onnxruntime's ReduceMax / ArgMax skip it."""
    scores = SCORES.copy()
    scores[0, 3, 1] = np.nan
    scores[1, 2, 2] = np.nan
    scores[1, 5, 0] = np.nan
    for per_class in (False, True):
        _check(BOXES, scores, 0.05, score_thr, 6, per_class)
