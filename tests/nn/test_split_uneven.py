"""splitND with a numSplits that does not divide the axis.

The spec: "Supports unequal splits"; Core ML splits as numpy.array_split does (the first
``dim % numSplits`` parts hold one more element: 8 into 3 gives 3, 3, 2, and 10 into 4 gives
3, 3, 2, 2, not the 3, 3, 3, 1 of equal chunks). Oracle: numpy.array_split. Every model also goes
through MIL (same outputs, coremltools' loader accepts the package).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import FormatError

from .common import assert_load_error, builder, convert_run, coremltools_accepts, flexible, load_spec

KINDS_COVERED = {"splitND"}


def _model(shape: tuple[int, ...], axis: int, n: int) -> object:
    b = builder([("x", shape)], [f"y{k}" for k in range(n)], nd=True)
    b.add_split_nd("split", "x", [f"y{k}" for k in range(n)], axis=axis, num_splits=n)
    return b.spec


@pytest.mark.parametrize("shape,axis,n", [
    ((8,), 0, 3),          # the 3 splits of 8: 3, 3, 2
    ((2, 8, 3), 1, 3),
    ((2, 8, 3), -2, 3),    # the same axis counted from the end
    ((5, 7), -1, 4),       # 2, 2, 2, 1
    ((10, 2), 0, 4),       # 3, 3, 2, 2 (equal chunks of 3 would give 3, 3, 3, 1)
    ((1, 2, 3, 11, 2), 3, 5),
    ((6, 4), 0, 4),        # 2, 2, 1, 1
])
def test_uneven_split_is_numpy_array_split(tmp_path: Path, shape: tuple[int, ...], axis: int, n: int) -> None:
    x = np.random.default_rng(len(shape) * 10 + n).standard_normal(shape).astype(np.float32)
    out = convert_run(_model(shape, axis, n), {"x": x}, tmp_path)
    want = np.array_split(x, n, axis=axis)
    assert [out[f"y{k}"].shape for k in range(n)] == [w.shape for w in want]
    for k in range(n):
        np.testing.assert_array_equal(out[f"y{k}"], want[k])


def test_uneven_split_of_a_flexible_axis(tmp_path: Path) -> None:
    """The axis length is known only at run time: each length is split as numpy.array_split."""
    spec = _model((2, 8, 3), 1, 3)
    flexible(spec, "x", [2, 3, 3], [2, 20, 3])
    prog = load_spec(spec, tmp_path)
    package = converter.save(prog, tmp_path / "split.mlpackage")
    coremltools_accepts(package)
    migrated = converter.load(package)
    for length in (3, 8, 9, 10, 20):
        x = np.random.default_rng(length).standard_normal((2, length, 3)).astype(np.float32)
        for p in (prog, migrated):
            out = converter.run(p, {"x": x})
            for k, want in enumerate(np.array_split(x, 3, axis=1)):
                np.testing.assert_array_equal(out[f"y{k}"], want)


def test_more_splits_than_values_is_refused(tmp_path: Path) -> None:
    assert_load_error(_model((2, 3), 1, 4), tmp_path, "split", ["numSplits 4", "3 values"], FormatError)
