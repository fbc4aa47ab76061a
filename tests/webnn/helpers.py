"""Run IR programs through the WebNN backend in the real browser (for lowering tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.ir.core import Program

from .browser_client import DTYPES, WebnnBrowser, module_features


def run_webnn(browser: WebnnBrowser, prog: Program, feeds: dict[str, Any], folder: Path, *, layout: str = "nchw",
              precision: str = "fp32", passes: str = "none", **options: Any) -> dict[str, np.ndarray]:
    """Convert ``prog`` to WebNN at ``folder`` (no pass pipeline by default: the lowering itself is
    under test) and run it in the browser on ``feeds``; outputs in the IR's shapes."""
    converter.convert(prog, to="webnn", out=folder, layout=layout, precision=precision, passes=passes,
                      overwrite=True, **options)
    inputs = module_features(folder, "inputs")
    result = browser.run(folder, {n: np.asarray(feeds[n]).astype(DTYPES[d["dataType"]]) for n, d in inputs.items()})
    return result.outputs


def computes_in_fp16(prog: Program) -> bool:
    """Whether any op of the program computes in float16 (then fp16 tolerances apply)."""
    return any(getattr(v.type, "dtype", None) is not None and v.type.dtype.name == "fp16"
               for op in prog.walk() for v in op.outputs)


def conv_stem(b: Any, x: Any, channels: int, name: str | None = None) -> Any:
    """An identity 1x1 conv: the value is ``x`` unchanged, but under layout nhwc the ops after it read an
    NHWC operand (the case the layout tracking must map), so oracles computed on ``x`` hold for both."""
    w = np.eye(channels, dtype=np.float32).reshape(channels, channels, 1, 1)
    return b.conv(x=x, weight=w, name=name)


def rand(shape: Any, seed: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Distinct non-round values (so swapped axes or parameters change the result)."""
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)


def check_outputs(out: dict[str, np.ndarray], refs: dict[str, Any], **tol: float) -> None:
    """Every output has its reference's shape and values (bool references compared exactly, others
    within ``tol``: assert_allclose's rtol/atol)."""
    for name, ref in refs.items():
        ref = np.asarray(ref)
        assert out[name].shape == ref.shape, f"{name}: shape {out[name].shape} != {ref.shape}"
        if ref.dtype == bool:
            np.testing.assert_array_equal(out[name].astype(bool), ref, err_msg=name)
        else:
            np.testing.assert_allclose(out[name], ref, err_msg=name, **tol)
