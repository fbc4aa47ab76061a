"""converter.interface: inputs and outputs described as the user passes and gets them."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter import interface

from .conftest import MODELS


def _fn(rel: str):
    prog = converter.load(MODELS / rel)
    return prog.functions[next(iter(prog.functions))]


def test_image_input_is_h_w_3_uint8_with_its_size_and_colour_space():
    (image,) = interface.inputs(_fn("real/9de70cc9_DeepLabV3Int8LUT.mlmodel"))
    assert (image.kind, image.dtype, image.shape) == ("image", "uint8", [513, 513, 3])
    assert image.details["colour_space"] == "RGB"
    assert image.text() == "image 513 x 513 (W x H) RGB: an H x W x 3 uint8 array"


def test_grayscale_image_is_h_w():
    (image,) = interface.inputs(_fn("real/c3284a54_MNIST.mlmodel"))
    assert image.shape == [28, 28] and image.details["colour_space"] == "grayscale"


def test_enumerated_image_sizes_keep_their_pairs():
    (image,) = interface.inputs(_fn("builder/flexible_image_sizes.mlmodel"))
    assert image.details["enumerated_sizes"] == [{"width": 16, "height": 16}, {"width": 24, "height": 32}]
    assert "one of 16 x 16, 24 x 32 (W x H)" in image.text()


def test_shape_ranges_are_printed_as_ranges():
    (x,) = interface.inputs(_fn("builder/flexible_shape_range.mlmodel"))
    assert x.shape == [3, {"min": 4, "max": 32}, {"min": 4, "max": 32}]
    assert x.shape_text() == "3 x 4..32 x 4..32"
    assert interface.fits(x, np.zeros((3, 4, 32))) and not interface.fits(x, np.zeros((3, 3, 8)))


def test_enumerated_shapes_are_listed_whole():
    (x,) = interface.inputs(_fn("builder/flexible_shape_enumerated.mlmodel"))
    assert x.shape_text().startswith("one of 3 x 8 x 8, 3 x 16 x 16, 3 x 10 x 24")


def test_classifier_outputs_are_a_dict_and_a_label():
    probs, label = interface.outputs(_fn("builder/image_classifier_preprocessed.mlmodel"))
    assert (probs.kind, probs.details["key"]) == ("dictionary", "string")
    assert (label.kind, label.dtype) == ("string", "str")


def test_optional_inputs_say_so():
    feats = {f.name: f for f in interface.inputs(_fn("builder/lstm_bidirectional.mlmodel"))}
    assert not feats["seq"].optional and feats["hf_in"].optional
    assert feats["hf_in"].text().endswith("(optional)")


@pytest.mark.parametrize(("dim", "text"), [(7, "7"), ({"min": 1, "max": 512}, "1..512"),
                                           ({"min": 8, "max": None}, "8.."), ({"choices": [8, 16]}, "8|16")])
def test_dim_text(dim, text):
    assert interface.dim_text(dim) == text


def test_described_reads_a_feature_from_the_description_alone():
    from converter.formats.model_file import read_model_file

    model = read_model_file(MODELS / "real/9de70cc9_DeepLabV3Int8LUT.mlmodel").model
    f = model.description.input[0]
    image = interface.described(f.name, f.type.SerializeToString(), f.shortDescription)
    assert image.text() == "image 513 x 513 (W x H) RGB: an H x W x 3 uint8 array"
    assert image.description == f.shortDescription
