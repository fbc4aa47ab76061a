"""The conv family's fusions on coremltools' raw (``PassPipeline.EMPTY``) programs of torch CNNs
(tests/optimize/sources.py): every batch_norm of cnn_bn (3, two after bias-less convs) and
resnet34 (36, none with a conv bias) folds into its conv, and the programs still match torch's
outputs (the bound of torch_oracle.py) -- with the ``fuse_conv`` pass alone and with the default
pipeline."""

from __future__ import annotations

import pytest

import converter
from converter.ir.verify import verify
from converter.passes.fusions.conv_family import FuseConvFamily

from .counting import op_histogram
from .sources import SourcePrograms
from .torch_oracle import assert_matches_torch

CNNS = {"cnn_bn": 3, "resnet34": 36}  # batch_norms in the EMPTY program


@pytest.mark.parametrize("name", sorted(CNNS))
@pytest.mark.parametrize("how", ["fuse_conv", "default"])
def test_cnn_sources_lose_every_batch_norm_and_match_torch(name: str, how: str,
                                                           sources: dict[str, SourcePrograms]) -> None:
    src = sources[name]
    prog = converter.load(src.empty)
    before = op_histogram(prog)
    assert before["batch_norm"] == CNNS[name]
    if how == "fuse_conv":
        stats = FuseConvFamily().run(prog).stats
        assert stats["rewrites"] == {"fuse_conv_batchnorm": CNNS[name]}
    else:
        converter.optimize(prog, pipeline="default")
    verify(prog)
    after = op_histogram(prog)
    assert after["batch_norm"] == 0
    assert after["conv"] == before["conv"]
    assert_matches_torch(converter.run(prog, src.feeds()), src.torch_outputs(), f"{name} ({how})")
