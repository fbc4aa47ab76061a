"""The node-suite cases of the attention / normalize / recurrent / resize / spatial families through
ONNX -> IR -> MIL .mlpackage -> IR -> interpreter (ONNX's expected outputs the oracle), with
coremltools' MIL loader (which re-runs its own type inference on every op) accepting each
package. Slow: about 45 s for the ~220 cases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.frontends.onnx import load_onnx
from converter.ir.interpreter import run

from .family_oracles import _cases
from .node_suite import _compare, _plain

OPS = {"Attention", "RotaryEmbedding", "LRN", "GroupNormalization", "RMSNormalization", "LpNormalization",
       "LSTM", "GRU", "RNN", "Resize", "Upsample", "ConvTranspose", "DepthToSpace", "SpaceToDepth", "GridSample",
       "AffineGrid", "CenterCropPad", "MaxUnpool", "RoiAlign", "DeformConv"}
#: Not expected to round-trip: fail before MIL already (see the family tests), or bool graph inputs,
#: which Core ML features cannot hold.
SKIP_SUFFIXES = ("_bf16", "4d_causal_fp16")


@pytest.mark.slow
def test_family_cases_round_trip_through_mlpackage(tmp_path):
    from tests.mil.helpers import CoremltoolsLoader

    ct = CoremltoolsLoader()
    bad, done = [], 0
    for c in _cases():
        if not set(c.ops) & OPS or "expanded" in c.name or c.name.endswith(SKIP_SUFFIXES):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog = load_onnx(c.model)
        except UnsupportedError:
            continue
        g = c.model.graph
        init = {t.name for t in g.initializer}
        names = [v.name for v in g.input if v.name not in init]
        ins, outs = c.data_sets[0]
        if any(np.asarray(_plain(x)).dtype == np.bool_ for x in ins):
            continue
        path = tmp_path / f"{c.name}.mlpackage"
        try:
            converter.save(prog, path, to="mil")
            ct.load(path)
            with np.errstate(all="ignore"):
                got = run(converter.load(path), {k: _plain(v) for k, v in zip(names, ins)})
        except Exception as e:  # noqa: BLE001 - collect every case's failure
            bad.append(f"{c.name}: {type(e).__name__}: {str(e)[:200]}")
            continue
        for o, w in zip(g.output, outs):
            why = _compare(got[o.name], _plain(w), c.rtol, c.atol)
            if why:
                bad.append(f"{c.name}: {why}")
        done += 1
    assert not bad, "\n".join(bad)
    assert done >= 190
