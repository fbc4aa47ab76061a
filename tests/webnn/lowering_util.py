"""Small IR programs (converter/ir/builder.py) converted to WebNN and run in the real browser, for the
per-lowering value tests (tests/webnn/test_lowerings_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.ir.builder import Builder, new_program
from converter.ir.types import TensorType, dtype_of_array

from .browser_client import DTYPES, WebnnBrowser, module_features

LAYOUTS = ("nchw", "nhwc")


def nhwc_source(b: Builder, x: Any, channels: int) -> Any:
    """``x`` through a 1x1 identity convolution: the same values, but in NHWC mode the operand the
    next op reads is NHWC (conv2d's output there), so the op's NHWC path is the one tested."""
    w = np.eye(channels, dtype=np.float32).reshape(channels, channels, 1, 1)
    return b.conv(x=x, weight=w)


def run_program(browser: WebnnBrowser, folder: Path, feeds: dict[str, np.ndarray],
                body: Callable[..., Any], *, layout: str, opset: str = "iOS17",
                precision: str = "fp32") -> list[np.ndarray]:
    """Build ``body(builder, *inputs)`` over ``feeds``, convert it to WebNN in ``layout``, run it in the
    browser and return its outputs in order."""
    types = [(name, TensorType(dtype_of_array(a), a.shape)) for name, a in feeds.items()]
    prog = new_program(types, body, opset=opset)
    names = [v.name for v in prog.main.outputs]
    converter.convert(prog, to="webnn", out=folder, layout=layout, precision=precision)
    module_inputs = module_features(folder, "inputs")
    result = browser.run(folder, {n: np.asarray(feeds[n]).astype(DTYPES[d["dataType"]])
                                  for n, d in module_inputs.items()})
    return [np.asarray(result.outputs[n]) for n in names]


def model_js(folder: Path) -> str:
    return (folder / "model.js").read_text()


def assert_close(got: np.ndarray, want: np.ndarray, bound: float = 1e-5) -> None:
    """fp32: within ``bound`` x max(1, |want|) (the browser's float32 against a float64 or float32 oracle)."""
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= bound * scale, f"max abs error {err:.3g} > {bound:.3g} x {scale:.3g}"
