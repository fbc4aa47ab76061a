"""Control flow in the real browser (Chromium 153's WebNN): loops unrolled, conds as where(), lists as
values (converter/passes/unroll.py), and scatter with constant indices (lowering/scatter.py), in both
layouts.

Oracles: numpy formulas written in tests/passes/test_unroll.py and here (the loop recurrences, the
branch, np.add.at / last-write-wins for scatter, from the MIL spec), not our interpreter; float32 in
the browser vs float64 formulas within 1e-5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.ir.text import parse_program

from ..passes.test_unroll import (
    BRANCH,
    DATA_DEPENDENT,
    HEAD,
    LISTS,
    PARITY,
    RNN,
    branch_formula,
    parity_formula,
    rnn_formula,
)
from .browser_client import WebnnBrowser

TOL = 1e-5
LAYOUTS = ["nchw", "nhwc"]


def _run(browser: WebnnBrowser, text: str, feeds: dict[str, np.ndarray], out: Path, layout: str) -> dict[str, np.ndarray]:
    converter.convert(parse_program(text), to="webnn", out=out, layout=layout)
    return browser.run(out, feeds).outputs


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_unrolled_recurrence_with_gather_and_scatter_add(webnn_browser: WebnnBrowser, tmp_path: Path,
                                                            layout: str) -> None:
    xs = np.random.default_rng(4).standard_normal((5, 3)).astype(np.float32)
    got = _run(webnn_browser, RNN, {"xs": xs}, tmp_path / "rnn", layout)
    for name, want in rnn_formula(xs).items():
        np.testing.assert_allclose(got[name], want, rtol=TOL, atol=TOL, err_msg=name)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lists_through_an_unrolled_loop(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    xs = np.random.default_rng(5).standard_normal((4, 2)).astype(np.float32)
    got = _run(webnn_browser, LISTS, {"xs": xs}, tmp_path / "lists", layout)
    np.testing.assert_allclose(got["cumsum"], 4 * np.cumsum(xs.astype(np.float64), axis=0), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(got["acc_f"], xs.astype(np.float64).sum(axis=0), rtol=TOL, atol=TOL)


def test_a_cond_known_per_iteration(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = np.array([0.5, -1.25, 2.0], np.float32)
    got = _run(webnn_browser, PARITY, {"x": x}, tmp_path / "parity", "nchw")
    np.testing.assert_allclose(got["acc"], parity_formula(x), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_run_time_cond_takes_either_branch(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    out = tmp_path / "branch"
    converter.convert(parse_program(BRANCH), to="webnn", out=out, layout=layout)
    assert "builder.where(" in (out / "model.js").read_text()
    x = np.array([0.25, -1.0, 1.5], np.float32)
    for s in (np.array([2.0], np.float32), np.array([-3.0], np.float32)):
        got = webnn_browser.run(out, {"x": x, "s": s}).outputs
        np.testing.assert_allclose(got["y"], branch_formula(x, s), rtol=TOL, atol=TOL, err_msg=f"s={s[0]}")


def test_a_data_dependent_loop_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match=r"while_loop 'doubling': its condition is not known at conversion "
                                               r"time \(it reads loop variable 0 \('x'\), computed at run time\)"):
        converter.convert(parse_program(DATA_DEPENDENT), to="webnn", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _scatter_program(mode: str) -> str:
    return f"""{HEAD}(%data: tensor<fp32, [2, 4, 3]>, %upd: tensor<fp32, [2, 5, 3]>) {{
  %idx: tensor<int32, [5]> = const() [val=dense<int32, [5]>(2, -1, 2, 0, 2)]
  %axis: tensor<int32, []> = const() [val=dense<int32, []>(1)]
  %mode: tensor<string, []> = const() [val=dense<string, []>("{mode}")]
  %y: tensor<fp32, [2, 4, 3]> = scatter(data=%data, indices=%idx, updates=%upd, axis=%axis, mode=%mode)
}} -> (%y)"""


def _scatter_formula(mode: str, data: np.ndarray, upd: np.ndarray) -> np.ndarray:
    """MIL scatter along axis 1: negative indices count from the end; update: the last write to a
    position wins; the other modes apply each update in turn."""
    out = data.astype(np.float64).copy()
    for k, i in enumerate([2, -1, 2, 0, 2]):
        row = upd[:, k, :].astype(np.float64)
        if mode == "update":
            out[:, i, :] = row
        elif mode == "add":
            out[:, i, :] += row
        elif mode == "mul":
            out[:, i, :] *= row
        elif mode == "max":
            out[:, i, :] = np.maximum(out[:, i, :], row)
    return out


@pytest.mark.parametrize("mode", ["update", "add", "mul", "max"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_scatter_with_constant_indices(webnn_browser: WebnnBrowser, tmp_path: Path, mode: str, layout: str) -> None:
    rng = np.random.default_rng(6)
    data = rng.standard_normal((2, 4, 3)).astype(np.float32)
    upd = rng.standard_normal((2, 5, 3)).astype(np.float32)
    got = _run(webnn_browser, _scatter_program(mode), {"data": data, "upd": upd}, tmp_path / mode, layout)
    np.testing.assert_allclose(got["y"], _scatter_formula(mode, data, upd), rtol=TOL, atol=TOL)
