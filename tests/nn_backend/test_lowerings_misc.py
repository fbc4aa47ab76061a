"""Random ops (the layer kinds, parameters and output shapes: Core ML's random streams are its own),
non_maximum_suppression (against a greedy NMS written here from the layer's spec), ops without a
NeuralNetwork form (refused, with the reason)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file

from .helpers import assert_close, layer_kinds, program, run_nn


def _layers(path: Path) -> dict:
    return {layer.WhichOneof("layer"): layer for layer in read_model_file(path).model.neuralNetwork.layers}


def test_random_fills_static_and_dynamic(tmp_path: Path) -> None:
    def body(b, x, dims):
        return [
            b.random_normal(shape=np.array([2, 3], np.int32), mean=np.float32(1.5), stddev=np.float32(0.25),
                            seed=np.int32(42), name="normal"),
            b.random_uniform(shape=np.array([5, 4], np.int32), low=np.float32(-2), high=np.float32(-1),
                             seed=np.int32(7), name="uniform"),
            b.random_bernoulli(shape=dims, prob=np.float32(0.75), seed=np.int32(-1), name="bernoulli"),
        ]

    feeds = {"x": np.zeros((5, 4), np.float32), "dims": np.array([2, 1, 3], np.int32)}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert got["normal"].shape == (2, 3) and got["uniform"].shape == (5, 4) and got["bernoulli"].shape == (2, 1, 3)
    assert np.all((got["uniform"] >= -2) & (got["uniform"] <= -1))
    assert set(np.unique(got["bernoulli"])) <= {0.0, 1.0}
    layers = _layers(path)
    normal = layers["randomNormalStatic"].randomNormalStatic
    assert (list(normal.outputShape), normal.mean, normal.stdDev, normal.seed) == ([2, 3], 1.5, 0.25, 42)
    uniform = layers["randomUniformStatic"].randomUniformStatic
    assert (uniform.minVal, uniform.maxVal, uniform.seed) == (-2, -1, 7)
    bern = layers["randomBernoulliDynamic"].randomBernoulliDynamic
    assert (bern.prob, bern.seed) == (0.75, -1) and list(layers["randomBernoulliDynamic"].input) == ["dims"]


@pytest.mark.parametrize("mode", ["logits", "probs"])
def test_random_categorical(tmp_path: Path, mode: str) -> None:
    x = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
    if mode == "probs":
        x = np.exp(x)

    def body(b, x):
        return [b.random_categorical(x=x, mode=mode, size=np.int32(4), seed=np.int32(3), name="draw")]

    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program({"x": x}, body), {"x": x}, path).values()
    assert got.shape == (2, 4) and set(np.unique(got)) <= {0.0, 1.0, 2.0}
    p = _layers(path)["categoricalDistribution"].categoricalDistribution
    assert (p.numSamples, p.isLogits, p.seed, p.temperature) == (4, mode == "logits", 3, 1.0)


def _nms(boxes, scores, iou_thr, score_thr, max_boxes, per_class):
    """Greedy NMS per the NonMaximumSuppression layer's spec: center-size boxes; a box's score is its
    best class score; boxes below the score threshold dropped (if none is left, the best box alone);
    suppressed by a kept box (of the same best class when per_class) with IoU above the threshold."""
    def iou(a, b):
        ax0, ay0, ax1, ay1 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
        bx0, by0, bx1, by1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
        inter = max(0.0, min(ax1, bx1) - max(ax0, bx0)) * max(0.0, min(ay1, by1) - max(ay0, by0))
        return inter / (a[2] * a[3] + b[2] * b[3] - inter)

    n, _, k = scores.shape
    out = (np.zeros((n, max_boxes, 4)), np.zeros((n, max_boxes, k)), np.full((n, max_boxes), -1.0), np.zeros(n))
    for bi in range(n):
        best, cls = scores[bi].max(axis=1), scores[bi].argmax(axis=1)
        kept: list[int] = []
        for i in sorted(range(len(best)), key=lambda j: -best[j]):
            if best[i] < score_thr or len(kept) == max_boxes:
                continue
            if all(iou(boxes[bi, i], boxes[bi, j]) <= iou_thr for j in kept if not per_class or cls[j] == cls[i]):
                kept.append(i)
        kept = kept or [int(np.argmax(best))]
        out[0][bi, :len(kept)], out[1][bi, :len(kept)] = boxes[bi, kept], scores[bi, kept]
        out[2][bi, :len(kept)], out[3][bi] = kept, len(kept)
    return out


BOXES = np.array([[[0.5, 0.5, 1.0, 1.0], [0.55, 0.5, 1.0, 1.0], [3.0, 3.0, 1.0, 2.0], [3.1, 3.2, 1.0, 2.0],
                   [6.0, 0.0, 0.5, 0.5], [0.52, 0.48, 0.9, 1.1]],
                  [[1.0, 1.0, 2.0, 2.0], [1.2, 1.0, 2.0, 2.0], [5.0, 5.0, 1.0, 1.0], [5.0, 5.3, 1.0, 1.0],
                   [8.0, 8.0, 3.0, 3.0], [0.0, 0.0, 0.2, 0.2]]], np.float32)
SCORES = np.array([[[0.9, 0.1], [0.2, 0.85], [0.6, 0.3], [0.1, 0.55], [0.05, 0.02], [0.7, 0.75]],
                   [[0.1, 0.12], [0.14, 0.13], [0.11, 0.01], [0.09, 0.02], [0.03, 0.04], [0.02, 0.15]]], np.float32)


@pytest.mark.parametrize("per_class", [False, True])
def test_non_maximum_suppression(tmp_path: Path, per_class: bool) -> None:
    def body(b, boxes, scores):
        return list(b.non_maximum_suppression(boxes=boxes, scores=scores, iou_threshold=np.float32(0.4),
                                              score_threshold=np.float32(0.5), max_boxes=np.int32(3),
                                              per_class_suppression=per_class, name="nms"))

    feeds = {"boxes": BOXES, "scores": SCORES}
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(program(feeds, body), feeds, path).values())
    for g, w in zip(got, _nms(BOXES, SCORES, 0.4, 0.5, 3, per_class)):
        assert_close(g, w)
    p = _layers(path)["NonMaximumSuppression"].NonMaximumSuppression
    assert (p.maxBoxes, p.perClassSuppression) == (3, per_class)
    assert p.iouThreshold == pytest.approx(0.4) and p.scoreThreshold == pytest.approx(0.5)


def test_non_maximum_suppression_ios17_coordinates_first(tmp_path: Path) -> None:
    boxes, scores = BOXES.transpose(0, 2, 1).copy(), SCORES.transpose(0, 2, 1).copy()

    def body(b, boxes, scores):
        return list(b.non_maximum_suppression(boxes=boxes, scores=scores, iou_threshold=np.float32(0.4),
                                              max_boxes=np.int32(4), name="nms"))

    feeds = {"boxes": boxes, "scores": scores}
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(program(feeds, body, opset="iOS17"), feeds, path).values())
    want = _nms(BOXES, SCORES, 0.4, -np.inf, 4, False)
    assert_close(got[0], want[0].transpose(0, 2, 1))
    assert_close(got[1], want[1].transpose(0, 2, 1))
    assert_close(got[2], want[2])
    assert layer_kinds(path) == {"NonMaximumSuppression": 1, "transpose": 4}


def test_ops_without_a_neuralnetwork_form_are_named_with_the_reason() -> None:
    from converter.backends.neuralnetwork.lowering import neuralnetwork_entry

    for op in ("make_list", "list_read", "list_write", "list_gather", "list_scatter", "list_length"):
        entry = neuralnetwork_entry(op)
        assert entry["status"] == "unsupported" and "list" in entry["reason"]
    for op in ("read_state", "coreml_update_state"):
        assert "no state" in neuralnetwork_entry(op)["reason"]
    for op, kind in (("lstm", "decomposed"), ("cond", "decomposed"), ("random_normal", "direct"),
                     ("scaled_dot_product_attention", "decomposed"), ("quantize", "decomposed")):
        assert neuralnetwork_entry(op)["status"] == kind


def test_a_list_program_is_refused(tmp_path: Path) -> None:
    def body(b, x):
        lst = b.make_list(init_length=np.int32(2), elem_shape=(np.int32(3),), dtype="fp32", name="lst")
        lst = b.list_write(ls=lst, index=np.int32(0), value=x, name="write")
        return [b.list_read(ls=lst, index=np.int32(0), name="read")]

    x = np.ones(3, np.float32)
    with pytest.raises(UnsupportedError, match="make_list 'lst': NeuralNetwork models have no list values"):
        run_nn(program({"x": x}, body), {"x": x}, tmp_path / "m.mlmodel")
