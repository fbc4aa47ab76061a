"""Issue 8 (b) as far as the rank-5 scaffolding goes: the shared torch models converted both ways,
our migrated NeuralNetwork model after `converter.optimize` (the full default pipeline of this
branch) against coremltools' direct torch -> ML program conversion (op counts: ops other than const,
nested blocks included).

Reached here: cnn_bn, mlp, lstm (ours <= coremltools'). Not yet, each explained:

- transformer_encoder_layer: its two layer norms are NN ``mvn`` layers, which our frontend lowers
  as ``(x - mean) / (sqrt(var) + eps)``; coremltools' program has ``layer_norm``, which computes
  ``(x - mean) / sqrt(var + eps)`` (another function: not fused). The scaffolding around them (two
  reshapes each) is gone, so what is left above coremltools is the mvn arithmetic: 7 ops for 1,
  twice. Its reshape-like ops are no more than coremltools'.
- gru_bidirectional: the NN loop layers count in fp32 [1] tensors; the loop condition is reshaped
  [1] -> [] (three reshapes: one before each loop, one in each body). coremltools counts in int32
  scalars. The rest of the excess is other helpers' work (folding, cast/abs/greater chains, CSE).

The (b) test of test_op_counts.py stays xfail until the lead merges every helper's rules; this
file holds what this branch reaches, and that the optimized programs still match torch.
"""

from __future__ import annotations

import pytest

import converter
from converter.ir.verify import verify

from ..nn_models.shared import TORCH
from .counting import op_count, op_histogram
from .test_op_counts import BOTH_WAYS, histogram_diff, stored_case
from .torch_oracle import assert_matches_torch

REACHED = ("cnn_bn", "lstm", "mlp")
RESHAPE_LIKE = ("reshape", "squeeze", "expand_dims", "transpose")
# reshape-like ops above coremltools' that are not scaffolding (see the module docstring)
EXPLAINED = {"gru_bidirectional": 3}


def _optimized(name: str) -> converter.Program:
    prog = converter.load(TORCH / f"{name}_nn.mlmodel")
    converter.optimize(prog, verify=True)
    verify(prog)
    return prog


@pytest.mark.parametrize("name", BOTH_WAYS)
def test_migrated_model_after_the_default_pipeline_matches_torch(name: str) -> None:
    feeds, refs = stored_case(name)
    assert_matches_torch(converter.run(_optimized(name), feeds), refs, f"{name} (migrated, optimized)")


@pytest.mark.parametrize("name", REACHED)
def test_migrated_model_has_no_more_ops_than_coremltools(name: str) -> None:
    ours = _optimized(name)
    theirs = converter.load(TORCH / f"{name}_mlprogram.mlpackage")
    assert op_count(ours) <= op_count(theirs), f"{name}: {op_count(ours)} > {op_count(theirs)}; " + \
        histogram_diff(ours, theirs)


@pytest.mark.parametrize("name", BOTH_WAYS)
def test_no_more_reshape_like_ops_than_coremltools_except_those_explained(name: str) -> None:
    ours, theirs = op_histogram(_optimized(name)), op_histogram(converter.load(TORCH / f"{name}_mlprogram.mlpackage"))
    extra = sum(ours[t] for t in RESHAPE_LIKE) - sum(theirs[t] for t in RESHAPE_LIKE)
    assert extra <= EXPLAINED.get(name, 0), f"{name}: {extra} reshape-like ops above coremltools: " \
        f"ours {[(t, ours[t]) for t in RESHAPE_LIKE]}, coremltools {[(t, theirs[t]) for t in RESHAPE_LIKE]}"


def test_the_scaffolding_pass_removes_what_the_baseline_counted() -> None:
    """/work/notes/op_count_baseline.md (b): lstm 16 ops migrated, transformer_encoder_layer 54;
    the scaffolding is 10 of the lstm's (6 by pairs, 4 by the expand_dims/reshape of the constant
    initial states) and 4 reshapes of the transformer's, plus the expand_dims/squeeze pair around
    its qkv transpose."""
    lstm, transformer = _optimized("lstm"), _optimized("transformer_encoder_layer")
    assert op_count(lstm) == 6 and not {"squeeze", "reshape"} & set(op_histogram(lstm))
    t = op_histogram(transformer)
    assert t["squeeze"] == 0 and t["reshape"] <= 9
