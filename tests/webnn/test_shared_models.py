"""Issue 9, first "Done when": every shared model that converts to MIL converts to WebNN (or is
refused with an `UnsupportedError` asserted here), and runs in the real browser (Chromium 153's
WebNN, LiteRT/XNNPACK on CPU) in both layouts on the stored (or random) inputs.

Oracles: our interpreter on the *source* model (fp32: max abs error <= 1e-3 x max(1, |ref|)), and
for the torch-derived models the stored torch outputs too (same bound: the browser's float32 is
another implementation than the interpreter's float64-accumulating numpy).

fp16 models (the ``*_fp16`` packages, SqueezeNetFP16, and programs casting to fp16 inside) compute in float16 inside WebNN as in the
source program. The interpreter rounds each fp16 op's result once from a wider computation, XNNPACK
may accumulate in fp16: a sum of K products of O(1) values carries up to ~K/2 ulp of error, so the
bound is 2^-7 (two fp16 ulps at 1.0 scaled by the sqrt-K of the small models here) x max(1, |ref|),
with the measured errors far below it (see the per-model report the test prints).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.ir.interpreter import Interpreter
from converter.runtime_io import adapt_feeds

from ..nn_models.shared import model_id
from ..passes.test_models import MODELS, _feeds, _torch_reference
from .browser_client import DTYPES, WebnnBrowser, module_features
from .helpers import computes_in_fp16

FP32_BOUND = 1e-3
FP16_BOUND = 2.0**-7

# Models that have no WebNN form, with the reason the UnsupportedError must give.
REFUSED: dict[str, str] = {}


def _ir_outputs(prog: converter.Program, ir_feeds: dict[str, Any]) -> dict[str, Any]:
    return Interpreter(prog).run(ir_feeds, prog.main.name)


def _compare(name: str, got: np.ndarray, want: Any, bound: float) -> float:
    want = np.asarray(want, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= bound * scale, f"output {name}: max abs error {err:.3g} > {bound:.3g} x {scale:.3g}"
    return err


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("path", MODELS, ids=model_id)
def test_shared_model_runs_in_the_browser(path: Path, layout: str, webnn_browser: WebnnBrowser,
                                          tmp_path: Path) -> None:
    prog = converter.load(path)
    feeds = _feeds(path, prog)
    ir_feeds = adapt_feeds(prog.main, feeds)
    shapes = {v.name: list(np.shape(ir_feeds[v.name])) for v in prog.main.inputs if v.name in ir_feeds}
    out = tmp_path / "webnn"
    reason = REFUSED.get(model_id(path))
    if reason is not None:
        with pytest.raises(UnsupportedError, match=reason):
            converter.convert(prog, to="webnn", out=out, layout=layout, input_shapes=shapes)
        return
    converter.convert(prog, to="webnn", out=out, layout=layout, input_shapes=shapes)
    want = _ir_outputs(prog, ir_feeds)
    module_inputs = module_features(out, "inputs")
    browser_feeds = {name: np.asarray(ir_feeds[name]).astype(DTYPES[d["dataType"]])
                     for name, d in module_inputs.items()}
    result = webnn_browser.run(out, browser_feeds, timeout_s=120)
    bound = FP16_BOUND if computes_in_fp16(prog) else FP32_BOUND
    errors = {}
    module_outputs = module_features(out, "outputs")
    for name, value in want.items():
        if name not in module_outputs:  # a classifier's label: run() maps it from the probabilities
            assert f'labelOutput: "{name}"' in (out / "model.js").read_text()
            continue
        if isinstance(value, dict):  # a classifier's probabilities: the graph returns them in label order
            by_label = dict(zip(module_features(out, "labels"), result.outputs[name]))  # a repeated label keeps its last value, as Core ML's dict
            errors[name] = _compare(name, np.asarray([by_label[k] for k in value]), list(value.values()), bound)
            continue
        elif np.asarray(value).dtype.kind in "OUS":
            continue  # the predicted label: mapped by run() from the probabilities
        errors[name] = _compare(name, result.outputs[name], value, bound)
    ref = _torch_reference(path)
    if ref is not None:
        names, refs, _ = ref
        for out_name, r in zip(names, refs):
            _compare(f"{out_name} (vs torch)", np.asarray(result.outputs[out_name]).reshape(r.shape), r, bound)
    print(model_id(path), layout, {k: f"{v:.2g}" for k, v in errors.items()})
