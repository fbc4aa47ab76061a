"""Issue 4, torch references: the NeuralNetwork models coremltools 9.0 made from torch modules
(torch/*_nn.mlmodel) reproduce torch's outputs (torch/<name>.torch_outputs.npz, keyed output_0..
in the order of RESULTS.json's "outputs") on the stored inputs, before and after migration to MIL.

Bound: max abs error <= 1e-4 * max(1, |ref|max). Everything is fp32 (weights and compute) and
these models are a few layers deep (MLP, conv + batch norm, LSTM / GRU over 8-9 steps, one
transformer encoder layer): fp32 rounding differences between two implementations stay small
(seen: at most 4.9e-6 of max(1, |ref|max), the transformer layer); a wrong op, a lost bias or
misordered gates shows up at 1e-2 and more.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ..mil.helpers import CoremltoolsLoader
from .coverage import oracle_checks, record_oracle
from .shared import TORCH, Migrations, model_id, torch_record

TOLERANCE = 1e-4
NN_MODELS = sorted(TORCH.glob("*_nn.mlmodel"))


def test_every_torch_nn_model_is_covered() -> None:
    assert [torch_record(p)[0] for p in NN_MODELS] == [
        "cnn_bn", "gru_bidirectional", "lstm", "mlp", "transformer_encoder_layer"]


@oracle_checks("*")  # every (kind, subtype) of NN_MODELS (test_coverage.py reads them)
@pytest.mark.parametrize("path", NN_MODELS, ids=model_id)
def test_matches_torch_before_and_after_mil(path: Path, migrations: Migrations,
                                            coremltools_loader: CoremltoolsLoader) -> None:
    name, record = torch_record(path)
    with np.load(TORCH / f"{name}.torch_outputs.npz") as data:
        refs = [data[f"output_{i}"] for i in range(len(data.files))]
    assert len(refs) == len(record["outputs"])
    m = migrations.get(path)
    assert sorted(m.feeds) == sorted(record["inputs"])
    for stage, outputs in (("NeuralNetwork", m.outputs), ("MIL", m.outputs_again)):
        for out_name, ref in zip(record["outputs"], refs):
            got = np.asarray(outputs[out_name])
            assert got.shape == ref.shape, f"{stage} {out_name}: shape {got.shape}, torch {ref.shape}"
            err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
            bound = TOLERANCE * max(1.0, float(np.max(np.abs(ref))))
            assert err <= bound, f"{name} ({stage}) {out_name}: max abs error {err:.3g} > {bound:.3g}"
    record_oracle("torch")
    coremltools_loader.load(m.package)
