"""Issue 7: a package whose empty ``Data/com.apple.CoreML/weights/`` folder is missing (what git and
many zip tools do to a package without blob weights) loads when no value refers to a weight file,
and is refused with a FormatError naming the weight file and the model when one does."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import FormatError
from converter.formats.package import read_package
from converter.ir.builder import new_program
from converter.ir.types import tensor

from .helpers import TORCH, same_bits

WEIGHTS = "Data/com.apple.CoreML/weights"


def _without_weights_dir(src: Path, tmp: Path) -> Path:
    pkg = shutil.copytree(src, tmp / "copy.mlpackage")
    shutil.rmtree(pkg / WEIGHTS)
    return pkg


def test_package_without_blob_values_loads_without_its_weights_dir(tmp_path: Path):
    prog = new_program({"x": tensor("fp32", [2, 3])}, lambda b, x: [b.add(x=x, y=np.float32(1.5), name="y")])
    saved = converter.save(prog, tmp_path / "small.mlpackage")
    pkg = _without_weights_dir(saved, tmp_path)
    assert read_package(pkg).weights_dir is None
    back = converter.load(pkg)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert same_bits(converter.run(back, {"x": x})["y"], x + np.float32(1.5))
    out = converter.save(back, tmp_path / "again.mlpackage")  # and it can be converted
    assert same_bits(converter.run(converter.load(out), {"x": x})["y"], x + np.float32(1.5))


def test_package_whose_values_need_the_missing_weight_file_is_refused(tmp_path: Path):
    pkg = _without_weights_dir(TORCH / "mlp_mlprogram.mlpackage", tmp_path)
    with pytest.raises(FormatError) as e:
        converter.load(pkg)
    assert e.value.file == str(pkg / "Data/com.apple.CoreML/model.mlmodel")
    assert "weight file '@model_path/weights/weight.bin' is missing" in e.value.message
    assert e.value.field == "blobFileValue.fileName" and e.value.op is not None
