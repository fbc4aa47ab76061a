"""The boundary of a network: model outputs bound to one value, and the preprocessing of image
inputs (a malformed entry is a FormatError that says where)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import FormatError

from .common import builder, load_error, load_spec, through_mil

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {"activation", "copy"}

X = np.array([0.5, -1.25, 2.0], np.float32)


@pytest.mark.parametrize("outputs", [("y", "z"), ("z", "y")])
def test_two_outputs_bound_to_one_value_keep_their_names(outputs: tuple[str, str], tmp_path: Path) -> None:
    """relu x -> y, copy y -> z: both outputs are the relu's value; each keeps its own name in the
    program, in the run's results and in the saved model."""
    nn = builder({"x": (3,)}, outputs, nd=True)
    nn.add_activation("r", "RELU", "x", "y")
    nn.add_copy("c", "y", "z")
    prog = load_spec(nn.spec, tmp_path)
    assert [v.name for v in prog.main.outputs] == list(outputs)
    outs = converter.run(prog, {"x": X})
    assert list(outs) == list(outputs)
    for name in outputs:
        np.testing.assert_array_equal(outs[name], np.maximum(X, 0))
    again = through_mil(prog, {"x": X}, tmp_path, outs=outs)  # the saved model declares both names
    assert list(again) == list(outputs)


def test_two_outputs_bound_to_an_input_keep_their_names(tmp_path: Path) -> None:
    nn = builder({"x": (3,)}, ("y", "z"), nd=True)
    nn.add_copy("c1", "x", "y")
    nn.add_copy("c2", "x", "z")
    prog = load_spec(nn.spec, tmp_path)
    outs = converter.run(prog, {"x": X})
    assert list(outs) == ["y", "z"]
    for name in outs:
        np.testing.assert_array_equal(outs[name], X)
    through_mil(prog, {"x": X}, tmp_path, outs=outs)


def test_mean_image_of_the_wrong_size_is_a_located_format_error(tmp_path: Path) -> None:
    nn = builder({"x": (3, 4, 4)})
    nn.add_activation("r", "RELU", "x", "y")
    spec = nn.spec
    image = spec.description.input[0].type
    image.imageType.width, image.imageType.height = 4, 4
    image.imageType.colorSpace = image.imageType.RGB
    spec.neuralNetwork.preprocessing.add(featureName="x").meanImage.meanImage.extend([0.5] * 10)  # 48 needed
    e = load_error(spec, tmp_path)
    assert isinstance(e, FormatError), repr(e)
    assert e.file is not None and e.file.endswith(".mlmodel"), e
    assert e.field == "preprocessing.meanImage", e
    assert "input 'x'" in e.message and "10 values" in e.message, e
