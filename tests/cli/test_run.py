"""``converter run``: --random inputs, and mistakes reported in the user's terms: every unknown and
missing input named at once, shapes as the user passes them (an image as H x W x 3 with its W x H
size, flexible dimensions as ranges, enumerated sizes as pairs), a float image warned about.

The expected texts are written from the models' descriptions (shared/data/models/builder/*.json):
image_classifier_preprocessed takes a 20 x 20 BGR image; flexible_shape_range a 3 x 4..32 x 4..32
array; flexible_image_sizes a 16 x 16 or 24 x 32 (W x H) image."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import converter
from converter.errors import EvaluationError, InputWarning
from converter.interface import fits, inputs

from ..conftest import MODELS, REPO
from .helpers import invoke, one_error_line

CLASSIFIER = MODELS / "builder" / "image_classifier_preprocessed.mlmodel"
RANGE = MODELS / "builder" / "flexible_shape_range.mlmodel"
ENUMERATED_IMAGE = MODELS / "builder" / "flexible_image_sizes.mlmodel"
IMAGE_TEXT = "image 20 x 20 (W x H) BGR: an H x W x 3 uint8 array"


def _npz(tmp_path, **arrays):
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return path


def test_unknown_and_missing_inputs_are_named_together(tmp_path):
    feeds = _npz(tmp_path, img=np.zeros((20, 20, 3), np.uint8), extra=np.zeros(3))
    line = one_error_line(invoke("run", CLASSIFIER, "--inputs", feeds))
    assert line == (f"error: file '{CLASSIFIER}', function 'main': unknown inputs 'img', 'extra'; "
                    f"missing input 'image' ({IMAGE_TEXT})")
    with pytest.raises(EvaluationError, match="unknown input 'img'; missing input 'image'"):
        converter.run(converter.load(CLASSIFIER), {"img": np.zeros((20, 20, 3), np.uint8)})


def test_an_unknown_input_alone_lists_the_inputs(tmp_path):
    feeds = _npz(tmp_path, image=np.zeros((20, 20, 3), np.uint8), extra=np.zeros(3))
    line = one_error_line(invoke("run", CLASSIFIER, "--inputs", feeds))
    assert line.endswith("unknown input 'extra' (the inputs are 'image')")


@pytest.mark.parametrize(("model", "array", "expected"), [
    (CLASSIFIER, np.zeros((16, 16, 3), np.uint8), f"got a uint8 array of shape 16 x 16 x 3, expected {IMAGE_TEXT}"),
    (CLASSIFIER, np.zeros((20, 20), np.uint8), f"got a uint8 array of shape 20 x 20, expected {IMAGE_TEXT}"),
    (RANGE, np.zeros((3, 40, 8), np.float32),
     "got a float32 array of shape 3 x 40 x 8, expected multiArray float32 3 x 4..32 x 4..32"),
    (ENUMERATED_IMAGE, np.zeros((16, 24, 3), np.uint8),  # H 16 and W 24 are each allowed, not together
     "got a uint8 array of shape 16 x 24 x 3, expected image one of 16 x 16, 24 x 32 (W x H) RGB"),
], ids=["image-size", "image-rank", "range", "enumerated-image-pair"])
def test_shapes_that_do_not_fit_are_shown_in_the_users_terms(tmp_path, model, array, expected):
    name = "x" if model == RANGE else "image"
    line = one_error_line(invoke("run", model, "--inputs", _npz(tmp_path, **{name: array})))
    assert f"input '{name}': {expected}" in line
    assert "['1'" not in line and "_s0" not in line  # not the program's layout, nor a bare symbol


def test_shapes_that_fit_still_run(tmp_path):
    assert invoke("run", RANGE, "--inputs", _npz(tmp_path, x=np.zeros((3, 32, 4), np.float32))).exit_code == 0
    result = invoke("run", ENUMERATED_IMAGE, "--inputs", _npz(tmp_path, image=np.zeros((32, 24, 3), np.uint8)))
    assert result.exit_code == 0, result.output


def test_a_float_image_warns_and_runs(tmp_path):
    pixels = np.random.default_rng(0).random((20, 20, 3)).astype(np.float32)  # in [0, 1): a common mistake
    # the interpreter: the exact stderr must not depend on whether onnxruntime can run the classifier yet
    result = invoke("run", CLASSIFIER, "--inputs", _npz(tmp_path, image=pixels), "--runtime", "interpreter")
    assert result.exit_code == 0, result.output
    assert result.stderr == ("warning: input 'image': a float32 array for an image, which takes uint8 pixels 0..255; "
                             "its values are used as pixel values as they are (values in [0, 1] make a nearly "
                             "black image)\n")
    assert result.stdout.startswith("logits = {")
    with pytest.warns(InputWarning, match="input 'image': a float32 array for an image"):
        converter.run(converter.load(CLASSIFIER), {"image": pixels * 255})
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # uint8 pixels: no warning
        converter.run(converter.load(CLASSIFIER), {"image": (pixels * 255).astype(np.uint8)})


def test_random_inputs_are_seeded(tmp_path):
    outs = []
    for i, seed in enumerate(("0", "0", "1")):
        out = tmp_path / f"out{i}.npz"
        result = invoke("run", CLASSIFIER, "--random", "--seed", seed, "-o", out)
        assert result.exit_code == 0, result.output
        with np.load(out) as data:
            outs.append(data["logits.values"])
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2])


def test_inputs_or_random_exactly_one(tmp_path):
    for args in ((), ("--random", "--inputs", _npz(tmp_path, image=np.zeros((20, 20, 3), np.uint8)))):
        line = one_error_line(invoke("run", CLASSIFIER, *args))
        assert line == "error: give the inputs: --inputs FILE.npz, or --random (not both)"


def test_run_random_in_a_real_subprocess():
    proc = subprocess.run([sys.executable, "-m", "cli", "run", str(CLASSIFIER), "--random"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("logits = {'cat': ") and lines[1].startswith("classLabel = ")


def test_fits_checks_enumerated_image_sizes_as_pairs():
    (image,) = inputs(converter.load(ENUMERATED_IMAGE).main)
    assert fits(image, np.zeros((16, 16, 3))) and fits(image, np.zeros((32, 24, 3)))
    assert not fits(image, np.zeros((16, 24, 3))) and not fits(image, np.zeros((32, 16, 3)))
