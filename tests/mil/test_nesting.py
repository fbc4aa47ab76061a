"""Blocks nested so deeply that protobuf could not read the written file back (Core ML's parser,
like ours, refuses messages nested more than 100 levels): the writer refuses them with one clear
error and writes nothing, instead of a package nobody can load. Found by the hostile-files work
of issue 7: conds nested 45 deep were written, then unreadable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import tensor


def _nested_conds(depth: int) -> converter.Program:
    """``depth`` conds, each in the true branch of the one before: x + 1 when sum(x) > 0, else x."""

    def nest(b, v, d):
        if d == 0:
            return b.add(x=v, y=np.float32(1.0))
        c = b.greater(x=b.reduce_sum(x=v), y=np.float32(0.0))
        return b.cond(c, lambda bb: [nest(bb, v, d - 1)], lambda bb: [bb.identity(x=v)])[0]

    return new_program({"x": tensor("fp32", [2])}, lambda b, x: [nest(b, x, depth)])


def test_deepest_readable_nesting_round_trips(tmp_path: Path) -> None:
    package = converter.save(_nested_conds(44), tmp_path / "deep.mlpackage")
    (out,) = converter.run(converter.load(package), {"x": np.array([0.5, -0.25], np.float32)}).values()
    np.testing.assert_array_equal(out, [1.5, 0.75])  # sum > 0 at every level: x + 1


def test_unreadable_nesting_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="nested too deeply") as e:
        converter.save(_nested_conds(45), tmp_path / "deep.mlpackage")
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []
