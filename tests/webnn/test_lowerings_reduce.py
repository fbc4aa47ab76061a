"""Reductions, arg-reductions and cumsum in the real browser, both layouts, against numpy/torch: under
nhwc the operands come from a conv (`conv_stem`), so the axes (negative ones too) must be mapped and
a reduction without keep_dims must leave a result whose layout later ops read right."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import check_outputs, conv_stem, rand, run_webnn

LAYOUTS = ["nchw", "nhwc"]
X_SHAPE = (2, 3, 4, 5)
TOL = {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reductions_axes_and_keep_dims(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1)
    p = rand(X_SHAPE, 2, 0.5, 1.5)   # positive: log_sum, prod stay well conditioned
    numpy_refs = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
                  "reduce_prod": np.prod,
                  "reduce_l1_norm": lambda a, axis, keepdims: np.sum(np.abs(a), axis=axis, keepdims=keepdims),
                  "reduce_l2_norm": lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims)),
                  "reduce_log_sum": lambda a, axis, keepdims: np.log(np.sum(a, axis=axis, keepdims=keepdims)),
                  "reduce_log_sum_exp": lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis,
                                                                                keepdims=keepdims)),
                  "reduce_sum_square": lambda a, axis, keepdims: np.sum(a * a, axis=axis, keepdims=keepdims)}
    # (axes, keep_dims) per op: every op both ways, negative axes, the channel axis, several axes
    plans = [((1,), True), ((-1,), False), ((1, -2), False), ((-3, 3), True), ((2,), False)]

    def body(b, x, p):  # noqa: ANN001, ANN202
        sx, sp = conv_stem(b, x, 3), conv_stem(b, p, 3)
        outs = []
        for i, op in enumerate(numpy_refs):
            for j, (axes, keep) in enumerate(plans[i % 2::2] if i % 3 else plans):
                src = sp if op in ("reduce_log_sum", "reduce_prod") else sx
                outs.append(getattr(b, op)(x=src, axes=list(axes), keep_dims=keep, name=f"{op}_{j}"))
        outs.append(b.reduce_sum(x=sx, keep_dims=False, name="all"))
        # a reduced NHWC operand read by further layout-aware ops
        m = b.reduce_mean(x=sx, axes=[-1], keep_dims=False)            # [2, 3, 4]
        outs.append(b.softmax(x=b.add(x=m, y=np.arange(4, dtype=np.float32)), axis=-2, name="after"))
        outs.append(b.reduce_max(x=b.reduce_sum(x=sx, axes=[2], keep_dims=False), axes=[1], name="twice"))
        return outs

    prog = new_program({"x": tensor("fp32", X_SHAPE), "p": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x, "p": p}, tmp_path / "m", layout=layout)
    refs = {}
    for i, (op, fn) in enumerate(numpy_refs.items()):
        for j, (axes, keep) in enumerate(plans[i % 2::2] if i % 3 else plans):
            src = p if op in ("reduce_log_sum", "reduce_prod") else x
            refs[f"{op}_{j}"] = fn(src.astype(np.float64), axis=tuple(a % 4 for a in axes), keepdims=keep)
    m = x.mean(axis=-1) + np.arange(4)
    refs["all"] = x.astype(np.float64).sum()
    refs["after"] = np.exp(m) / np.exp(m).sum(axis=-2, keepdims=True)
    refs["twice"] = x.sum(axis=2).max(axis=1)
    check_outputs(out, refs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_argmax_argmin_and_cumsum(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = rand(X_SHAPE, 1)
    flags = [(False, False), (True, False), (False, True), (True, True)]

    def body(b, x):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        outs = [b.reduce_argmax(x=s, axis=1, keep_dims=False, name="amax_c"),
                b.reduce_argmax(x=s, axis=-1, keep_dims=True, name="amax_w"),
                b.reduce_argmin(x=s, axis=-2, keep_dims=False, name="amin_h"),
                b.reduce_argmin(x=s, axis=0, keep_dims=True, name="amin_n")]
        for axis in (1, -1):
            for exclusive, reverse in flags:
                outs.append(b.cumsum(x=s, axis=axis, exclusive=exclusive, reverse=reverse,
                                     name=f"cumsum_{axis % 4}_{int(exclusive)}{int(reverse)}"))
        return outs

    prog = new_program({"x": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    refs = {"amax_c": x.argmax(1), "amax_w": x.argmax(-1)[..., None], "amin_h": x.argmin(-2),
            "amin_n": x.argmin(0)[None]}
    tx = torch.from_numpy(x)
    for axis in (1, 3):
        for exclusive, reverse in flags:
            t = tx.flip(axis) if reverse else tx
            c = torch.cumsum(t, axis) - (t if exclusive else 0)
            refs[f"cumsum_{axis}_{int(exclusive)}{int(reverse)}"] = (c.flip(axis) if reverse else c).numpy()
    check_outputs(out, refs, **TOL)
    assert out["amax_c"].dtype == np.int32


def test_integer_reductions(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    x = np.random.default_rng(3).integers(-50, 50, size=(3, 4)).astype(np.int32)
    prog = new_program({"x": tensor("int32", [3, 4])}, lambda b, x: [
        b.reduce_sum(x=x, axes=[1], name="sum"), b.reduce_max(x=x, axes=[-2], keep_dims=True, name="max"),
        b.reduce_min(x=x, axes=[0, 1], name="min"), b.cumsum(x=x, axis=-1, name="cumsum")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m")
    check_outputs(out, {"sum": x.sum(1), "max": x.max(0, keepdims=True), "min": x.min(), "cumsum": np.cumsum(x, -1)})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_log_sum_exp_of_large_values(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    """log(sum(exp(x))) of logits past 88 (Chromium's reduceLogSumExp saturated at log(FLT_MAX) = 88.38)."""
    x = rand(X_SHAPE, 1, 90.0, 1000.0)
    x[1] -= 1090.0                                 # a batch of large negative values too
    prog = new_program({"x": tensor("fp32", X_SHAPE)}, lambda b, x: [
        b.reduce_log_sum_exp(x=conv_stem(b, x, 3), axes=[1], keep_dims=True, name="keep"),
        b.reduce_log_sum_exp(x=conv_stem(b, x, 3), axes=[-1, 2], keep_dims=False, name="drop"),
        b.reduce_log_sum_exp(x=x, axes=[-1], keep_dims=False, name="plain")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m", layout=layout)
    t = torch.from_numpy(x).double()
    check_outputs(out, {"keep": torch.logsumexp(t, 1, keepdim=True).numpy(), "drop": torch.logsumexp(t, (2, 3)).numpy(),
                 "plain": torch.logsumexp(t, -1).numpy()}, rtol=1e-6)
