"""The dense layers of layers/linear.py against torch: embeddingND.

The spec (EmbeddingNDLayerParams): "A layer that performs a matrix lookup and optionally adds a
bias. The weights matrix is stored with dimensions [embeddingSize, vocabSize]"; the input holds
indices in [0, vocabSize - 1], has rank >= 2 and a last dimension of 1; the output replaces that
1 with embeddingSize. Oracle: torch.nn.functional.embedding on the transposed table ([vocabSize,
embeddingSize], torch's layout), plus the bias. vocabSize and embeddingSize differ, so reading
one for the other fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks

from .common import builder, compare_with_oracle, convert_and_run

RNG = np.random.default_rng(1040)
VOCAB, SIZE = 7, 5


@oracle_checks("embeddingND")
@pytest.mark.parametrize("has_bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("shape", [(6, 1), (2, 3, 1), (2, 1, 3, 1), (2, 2, 1, 2, 1)], ids=str)
def test_embedding_nd_against_torch(shape: tuple[int, ...], has_bias: bool, tmp_path: Path) -> None:
    import torch

    table = RNG.standard_normal((SIZE, VOCAB)).astype(np.float32)  # [embeddingSize, vocabSize]
    bias = RNG.standard_normal(SIZE).astype(np.float32)
    nn = builder({"x": shape}, nd=True)
    nn.add_embedding_nd("emb", "x", "y", vocab_size=VOCAB, embedding_size=SIZE, W=table,
                        b=bias if has_bias else None)
    x = RNG.integers(0, VOCAB, shape).astype(np.float32)
    x.flat[:2] = [0, VOCAB - 1]  # both ends of the vocabulary
    outs, _ = convert_and_run(nn.spec, {"x": x}, tmp_path)
    indices = torch.from_numpy(x[..., 0].astype(np.int64))
    want = torch.nn.functional.embedding(indices, torch.from_numpy(table.T.astype(np.float64)))
    if has_bias:
        want = want + torch.from_numpy(bias.astype(np.float64))
    assert outs["y"].shape == (*shape[:-1], SIZE)
    compare_with_oracle(outs["y"], want.numpy(), oracle="torch", rtol=1e-6, atol=1e-6)
