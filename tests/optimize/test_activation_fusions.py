"""The activation and normalization fusions on the gelu_layer_norm source (torch's F.gelu both
ways, nn.LayerNorm, and the same three spelled out by hand, converted by coremltools with
``PassPipeline.EMPTY``): the hand-written gelu exact, gelu tanh and layer norm each become one op
of the right kind (gelu modes kept apart, the layer norm's epsilon including rsqrt's own), the
program reaches 12 ops (coremltools' default pipeline: 20), and still matches torch's outputs."""

from __future__ import annotations

from collections import Counter

import converter
from converter.ir.verify import verify
from converter.passes.base import PassManager
from converter.passes.pipelines import resolve

from .counting import op_count, op_histogram
from .sources import SourcePrograms
from .torch_oracle import assert_matches_torch

# canonicalize removes the two fp32 -> fp32 casts torch's x / sqrt(2) is lowered with
PASSES = "canonicalize,cse,dead_code,fuse_activations,fuse_normalizations"


def test_gelu_layer_norm_source_fuses_to_12_ops_and_matches_torch(sources: dict[str, SourcePrograms]) -> None:
    src = sources["gelu_layer_norm"]
    prog = converter.load(src.empty)
    assert op_count(prog) == 33
    PassManager(resolve(PASSES), fixed_point=True, max_iterations=4, verify_each=True).run(prog)
    verify(prog)
    assert op_histogram(prog) == Counter({"linear": 5, "gelu": 4, "layer_norm": 3}), op_histogram(prog)
    assert op_count(prog) <= 12
    modes = Counter(str(o.inputs["mode"].const_val) for o in prog.walk() if o.type == "gelu")
    assert modes == Counter({"EXACT": 2, "TANH_APPROXIMATION": 2})
    assert_matches_torch(converter.run(prog, src.feeds()), src.torch_outputs(), "gelu_layer_norm (fused)")
