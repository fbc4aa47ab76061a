"""Feature names that are not MIL identifiers are renamed when written, and the user is told."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.types import tensor


def test_invalid_feature_names_are_renamed_with_a_warning(tmp_path):
    prog = new_program({"input.1": tensor("fp32", [2])}, lambda b, x: [b.relu(x=x, name="out:0")])
    with pytest.warns(converter.ConversionWarning) as caught:
        converter.save(prog, tmp_path / "m.mlpackage")
    messages = [str(w.message) for w in caught]
    assert any("input 'input.1' is written as 'input_1'" in m for m in messages)
    assert any("output 'out:0' is written as 'out_0'" in m for m in messages)
    back = converter.load(tmp_path / "m.mlpackage")
    assert [v.name for v in back.main.inputs] == ["input_1"]
    out = converter.run(back, {"input_1": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out["out_0"], [0.0, 2.0])


def test_valid_names_give_no_warning(tmp_path, recwarn):
    prog = new_program({"x": tensor("fp32", [2])}, lambda b, x: [b.relu(x=x, name="y")])
    converter.save(prog, tmp_path / "m.mlpackage")
    assert not [w for w in recwarn if issubclass(w.category, converter.ConversionWarning)]
