"""Outputs against torch's: the bound the torch-derived shared models are held to
(tests/nn_models/test_torch.py): max abs error <= 1e-4 * max(1, max |torch output|). Everything here
is fp32 (weights and compute) and a few dozen layers deep at most; fp32 rounding differences between
two implementations stay around 1e-6 of the output's scale, while a wrong op, a lost bias or a
misapplied fusion shows up at 1e-2 and more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

TOLERANCE = 1e-4


def assert_matches_torch(outputs: Mapping[str, Any], refs: Mapping[str, np.ndarray], what: str) -> None:
    assert sorted(outputs) == sorted(refs), f"{what}: outputs {sorted(outputs)}, torch has {sorted(refs)}"
    for name, ref in refs.items():
        got = np.asarray(outputs[name])
        assert got.shape == ref.shape, f"{what} {name}: shape {got.shape}, torch {ref.shape}"
        err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)), initial=0.0))
        bound = TOLERANCE * max(1.0, float(np.max(np.abs(ref), initial=0.0)))
        assert err <= bound, f"{what} {name}: max abs error {err:.3g} > {bound:.3g}"
