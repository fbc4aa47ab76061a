"""Lowerings of the core families (elementwise, activation, shape, reduce, nn) in the real browser,
against formulas written here from the MIL/WebNN specs (numpy) or torch, in both layouts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import run_webnn

LAYOUTS = ["nchw", "nhwc"]


def test_integer_floor_div_and_mod_follow_the_divisors_sign(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    a = np.array([7, -7, 7, -7, 6, -6, 0, 5, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 3, 4, -3, 5], np.int32)
    prog = new_program({"a": tensor("int32", [9]), "b": tensor("int32", [9])},
                       lambda bl, x, y: [bl.floor_div(x=x, y=y, name="q"), bl.mod(x=x, y=y, name="r")])
    out = run_webnn(webnn_browser, prog, {"a": a, "b": b}, tmp_path / "m")
    np.testing.assert_array_equal(out["q"], np.floor_divide(a, b))
    np.testing.assert_array_equal(out["r"], np.mod(a, b))


def test_float_floor_div_and_mod(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    a = np.array([7.5, -7.5, 7.5, -7.5, 1.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 0.25], np.float32)
    prog = new_program({"a": tensor("fp32", [5]), "b": tensor("fp32", [5])},
                       lambda bl, x, y: [bl.floor_div(x=x, y=y, name="q"), bl.mod(x=x, y=y, name="r")])
    out = run_webnn(webnn_browser, prog, {"a": a, "b": b}, tmp_path / "m")
    np.testing.assert_array_equal(out["q"], np.floor_divide(a, b))
    np.testing.assert_allclose(out["r"], np.mod(a, b), atol=1e-6)


def test_cast_float_to_int_truncates_toward_zero(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = np.array([2.7, -2.7, 0.5, -0.5, 3.0, -1e-3], np.float32)
    prog = new_program({"x": tensor("fp32", [6])}, lambda b, x: [b.cast(x=x, dtype="int32", name="y")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m")
    np.testing.assert_array_equal(out["y"], np.trunc(x).astype(np.int32))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scaled_tanh_and_clamped_relu_parameters_are_not_swapped(webnn_browser: WebnnBrowser, tmp_path: Path,
                                                                 layout: str) -> None:
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(1, 2, 3, 4)
    prog = new_program({"x": tensor("fp32", [1, 2, 3, 4])}, lambda b, x: [
        b.scaled_tanh(x=x, alpha=np.float32(1.7), beta=np.float32(0.6), name="st"),
        b.clamped_relu(x=x, alpha=np.float32(0.2), beta=np.float32(1.5), name="cr")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    np.testing.assert_allclose(out["st"], 1.7 * np.tanh(0.6 * x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["cr"], np.minimum(np.where(x >= 0, x, 0.2 * x), 1.5), rtol=1e-6)
