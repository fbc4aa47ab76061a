"""Loss (ops_loss.py) and misc (ops_misc.py) mappings vs onnxruntime: NLL / softmax cross-entropy
with class weights, ignore_index (also an index outside [0, C)) and every reduction; Einsum
equations MIL's einsum cannot take (ellipsis, diagonal, three operands, implicit output); Det;
Shrink; Dropout in inference."""

from __future__ import annotations

import numpy as np
import pytest

from .ort_oracle import check

RNG = np.random.default_rng(12)
SCORES = RNG.normal(size=(3, 5, 2)).astype(np.float32) * 3  # [N, C, d1]
TARGET = np.array([[4, 0], [-1, 2], [1, 4]], np.int64)
WEIGHT = np.array([0.5, 2.0, 1.25, 0.75, 3.0], np.float32)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, -1, 4])
def test_negative_log_likelihood_loss(reduction, weighted, ignore_index):
    attrs = {"reduction": reduction}
    target = TARGET if ignore_index == -1 else np.where(TARGET < 0, 3, TARGET)
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    check("NegativeLogLikelihoodLoss", [SCORES, target, WEIGHT if weighted else None], attrs)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_cross_entropy_loss_and_log_prob(reduction, weighted):
    target = np.where(TARGET < 0, 3, TARGET)
    check("SoftmaxCrossEntropyLoss", [SCORES * 10, target, WEIGHT if weighted else None],
          {"reduction": reduction, "ignore_index": 0}, n_out=2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation,shapes", [
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
    ("ij,kj", [(3, 4), (2, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i->", [(4,), (4,)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("ij,j->i", [(3, 4), (4,)]),
])
def test_einsum_equations(equation, shapes):
    ops = [(RNG.normal(size=s) * 2).astype(np.float32) for s in shapes]
    check("Einsum", ops, {"equation": equation}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3, 3), (2, 4, 4), (5, 5)])
def test_det(shape):
    x = (RNG.normal(size=shape) * 1.5).astype(np.float32)
    check("Det", [x], rtol=1e-4, atol=1e-5)


def test_shrink_soft_and_hard():
    x = np.array([-3.0, -1.5, -1.0, -0.2, 0.0, 0.7, 1.5, 4.0], np.float32)
    check("Shrink", [x], {"lambd": 1.0, "bias": 0.25})
    check("Shrink", [x], {"lambd": 0.5})
    check("Shrink", [np.array([-5, -1, 0, 2, 7], np.int32)], {"lambd": 1.5, "bias": 1.0})


def test_dropout_inference_is_identity_with_a_true_mask():
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    check("Dropout", [x, np.array(0.7, np.float32)], n_out=2, consts=(1,))
    check("Dropout", [x, np.array(0.7, np.float32), np.array(False)], n_out=2, consts=(1, 2))
