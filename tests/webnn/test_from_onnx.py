"""The issue's torch models, exported by torch.onnx.export, convert ONNX -> WebNN and run in the real
browser (Chromium's WebNN), matching onnxruntime on the original ONNX model (fp32: the browser's
XNNPACK kernels are another implementation, hence 1e-3 x max(1, |ref|))."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter

from ..onnx_frontend.test_torch_models import MODELS, exported_case
from .browser_client import DTYPES, WebnnBrowser, module_features


@pytest.mark.parametrize("name", list(MODELS))
def test_torch_export_runs_as_webnn_in_the_browser(name: str, tmp_path: Path, webnn_browser: WebnnBrowser) -> None:
    _, _, model, feeds, want = exported_case(name)

    folder = tmp_path / name
    converter.convert(model, to="webnn", out=folder)
    inputs = module_features(folder, "inputs")
    result = webnn_browser.run(folder, {n: np.asarray(feeds[n]).astype(DTYPES[d["dataType"]])
                                        for n, d in inputs.items()})
    (got,) = result.outputs.values()
    np.testing.assert_allclose(np.asarray(got, np.float64).reshape(want.shape), want, rtol=0,
                               atol=1e-3 * max(1.0, float(np.abs(want).max())))
