"""Quantized NeuralNetwork weights keep their compression where the MIL target can express it
(constexpr ops, iOS16+) and are written decompressed for iOS15, with the same outputs."""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.check import random_feeds
from tests.conftest import MODELS

# a real model whose convolutions hold 8-bit lookup-table weights (tensors of >= 2048 elements
# keep their compression; the small builder CNNs fall under that threshold)
QUANTIZED = ["real/8dbda0d2_SqueezeNetInt8LUT.mlmodel"]


@pytest.mark.parametrize("path", QUANTIZED)
def test_compression_kept_for_ios16_and_dropped_for_ios15(path, tmp_path):
    prog = converter.load(MODELS / path)
    feeds = random_feeds(prog.main)
    want = converter.run(prog, feeds)
    constexpr = lambda p: [op.type for op in p.walk() if op.type.startswith("constexpr_")]  # noqa: E731
    assert constexpr(prog), "the quantized weights should stay compressed in the IR"

    kept = converter.load(converter.save(prog, tmp_path / "kept.mlpackage"))
    assert kept.main.opset == "iOS16" and constexpr(kept)
    dense = converter.load(converter.save(prog, tmp_path / "dense.mlpackage", target="iOS15"))
    assert dense.main.opset == "iOS15" and not constexpr(dense)
    size = lambda p: (p / "Data/com.apple.CoreML/weights/weight.bin").stat().st_size  # noqa: E731
    assert size(tmp_path / "kept.mlpackage") < size(tmp_path / "dense.mlpackage")
    for back in (kept, dense):
        got = converter.run(back, feeds)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    assert constexpr(prog), "saving must not modify the program"
