"""Elementwise math, comparisons, logic, select and cast in the real browser, both layouts, against
numpy formulas written from the MIL spec (converter/ir/ops docstrings). Under nhwc the 4-D operands
come from a conv (`conv_stem`), so binary ops mix an NHWC operand with IR-layout inputs, broadcast
constants and lower-rank operands."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import tensor

from .browser_client import WebnnBrowser
from .helpers import check_outputs, conv_stem, rand, run_webnn

LAYOUTS = ["nchw", "nhwc"]
X_SHAPE = (1, 3, 4, 5)


def _x() -> np.ndarray:
    x = rand(X_SHAPE, 1)
    x[0, 0, 0] = [0.5, 1.5, 2.5, -0.5, -2.5]     # round: ties to even
    x[0, 1, 0, :2] = [0.0, -3.0]
    return x


@pytest.mark.parametrize("layout", LAYOUTS)
def test_unary_math(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x = _x()
    p = rand(X_SHAPE, 2, 0.25, 3.0)
    p[0, 0, 0, 0] = 0.0
    names = ["abs", "ceil", "cos", "erf", "exp", "floor", "round", "sign", "sin", "tan", "tanh", "relu", "sigmoid",
             "softsign", "identity", "square", "exp2"]

    def body(b, x, p):  # noqa: ANN001, ANN202
        s, sp = conv_stem(b, x, 3), conv_stem(b, p, 3)
        outs = [getattr(b, n)(x=s, name=n) for n in names]
        return outs + [
            b.sqrt(x=sp, name="sqrt"), b.log(x=sp, name="log"), b.log(x=sp, epsilon=0.5, name="log_eps"),
            b.inverse(x=sp, name="inverse"), b.inverse(x=sp, epsilon=0.25, name="inverse_eps"),
            b.rsqrt(x=sp, epsilon=2.0, name="rsqrt_eps"), b.rsqrt(x=b.add(x=sp, y=1.0), name="rsqrt"),
            b.clip(x=s, alpha=-0.5, beta=1.2, name="clip"), b.clip(x=s, alpha=1.0, beta=-1.0, name="clip_inverted"),
            b.threshold(x=s, alpha=0.3, name="threshold")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "p": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x, "p": p}, tmp_path / "m", layout=layout)
    xd, pd = x.astype(np.float64), p.astype(np.float64)
    erf = np.vectorize(math.erf)
    refs = {"abs": np.abs(xd), "ceil": np.ceil(xd), "cos": np.cos(xd), "erf": erf(xd), "exp": np.exp(xd),
            "floor": np.floor(xd), "round": np.round(xd), "sign": np.sign(xd), "sin": np.sin(xd), "tan": np.tan(xd),
            "tanh": np.tanh(xd), "relu": np.maximum(xd, 0), "sigmoid": 1 / (1 + np.exp(-xd)),
            "softsign": xd / (1 + np.abs(xd)), "identity": xd, "square": xd * xd, "exp2": 2.0 ** xd,
            "sqrt": np.sqrt(pd), "log": np.log(pd + np.float32(1e-45)), "log_eps": np.log(pd + 0.5),
            "inverse": 1 / (pd + 1e-4), "inverse_eps": 1 / (pd + 0.25), "rsqrt_eps": 1 / np.sqrt(pd + 2),
            "rsqrt": 1 / np.sqrt(pd + 1 + 1e-12), "clip": np.minimum(np.maximum(xd, -0.5), 1.2),
            "clip_inverted": np.full(X_SHAPE, -1.0), "threshold": np.maximum(xd, 0.3)}
    inv = refs.pop("inverse")
    check_outputs(out, refs, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(out["inverse"][p != 0], inv[p != 0], rtol=2e-6)   # epsilon 1e-4 is visible
    assert out["inverse"][0, 0, 0, 0] == pytest.approx(1e4, rel=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_broadcasting_and_layouts(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x, y = _x(), rand(X_SHAPE, 2)
    v = rand((5,), 3)
    c = rand((3, 1, 1), 4, 0.5, 2.0)
    pos = rand(X_SHAPE, 5, 0.5, 2.0)
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "real_div": np.divide, "maximum": np.maximum,
           "minimum": np.minimum}

    def body(b, x, y, v, pos):  # noqa: ANN001, ANN202
        s, spos = conv_stem(b, x, 3), conv_stem(b, pos, 3)
        outs = []
        for n in ops:
            f = getattr(b, n)
            outs += [f(x=s, y=y, name=f"{n}_rt"), f(x=c, y=s, name=f"{n}_const_first"),
                     f(x=s, y=v, name=f"{n}_vec"), f(x=s, y=np.float32(0.75), name=f"{n}_scalar")]
        return outs + [b.pow(x=spos, y=y, name="pow_rt"), b.pow(x=c, y=s, name="pow_const_first"),
                       b.pow(x=spos, y=v, name="pow_vec"), b.floor_div(x=s, y=c, name="floor_div"),
                       b.mod(x=c, y=s, name="mod")]

    prog = new_program({"x": tensor("fp32", X_SHAPE), "y": tensor("fp32", X_SHAPE), "v": tensor("fp32", [5]),
                        "pos": tensor("fp32", X_SHAPE)}, body)
    out = run_webnn(webnn_browser, prog, {"x": x, "y": y, "v": v, "pos": pos}, tmp_path / "m", layout=layout)
    refs = {}
    with np.errstate(all="ignore"):  # x holds a 0: x / 0 and mod(c, 0) are inf and NaN on both sides
        for n, f in ops.items():
            refs.update({f"{n}_rt": f(x, y), f"{n}_const_first": f(c, x), f"{n}_vec": f(x, v),
                         f"{n}_scalar": f(x, np.float32(0.75))})
        refs.update({"pow_rt": pos ** y, "pow_const_first": c ** x, "pow_vec": pos ** v,
                     "floor_div": np.floor_divide(x, c), "mod": np.mod(c, x)})
    check_outputs(out, refs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_comparisons_logic_select_cast(webnn_browser: WebnnBrowser, tmp_path: Path, layout: str) -> None:
    x, y = _x(), _x()
    y[0, 2] = rand((4, 5), 7)                       # equal in channels 0-1, different in channel 2
    y[0, 1, 1] = x[0, 1, 1] + 1
    i = np.random.default_rng(5).integers(-3, 4, size=X_SHAPE).astype(np.int32)
    cmp = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal,
           "less": np.less, "less_equal": np.less_equal}

    def body(b, x, y, i):  # noqa: ANN001, ANN202
        s = conv_stem(b, x, 3)
        outs = [getattr(b, n)(x=s, y=y, name=n) for n in cmp]
        outs += [b.less(x=i, y=0, name="less_int"), b.equal(x=np.float32(0.5), y=s, name="equal_const_first")]
        gt, eq = b.greater(x=s, y=y), b.equal(x=s, y=y)
        outs += [b.logical_and(x=gt, y=b.less(x=s, y=1.0), name="and"), b.logical_or(x=gt, y=eq, name="or"),
                 b.logical_xor(x=gt, y=b.greater(x=y, y=0.0), name="xor"), b.logical_not(x=gt, name="not")]
        outs += [b.select(cond=gt, a=s, b=y, name="select"), b.select(cond=gt, a=i, b=np.int32(-7), name="select_int"),
                 b.select(cond=gt, a=eq, b=b.less(x=y, y=0.0), name="select_bool"),
                 b.select(cond=b.less(x=v_c(), y=0.0), a=s, b=np.float32(9.0), name="select_broadcast")]
        outs += [b.cast(x=s, dtype="bool", name="to_bool"), b.cast(x=i, dtype="bool", name="int_to_bool"),
                 b.cast(x=gt, dtype="fp32", name="bool_to_fp32"), b.cast(x=gt, dtype="int32", name="bool_to_int"),
                 b.cast(x=i, dtype="fp32", name="int_to_fp32"), b.cast(x=b.mul(x=s, y=3.0), dtype="int32",
                                                                       name="to_int")]
        return outs

    def v_c() -> np.ndarray:
        return np.array([-1.0, 1.0, -1.0, 1.0, 1.0], np.float32)

    prog = new_program({"x": tensor("fp32", X_SHAPE), "y": tensor("fp32", X_SHAPE), "i": tensor("int32", X_SHAPE)},
                       body)
    out = run_webnn(webnn_browser, prog, {"x": x, "y": y, "i": i}, tmp_path / "m", layout=layout)
    gt, eq = x > y, x == y
    refs = {n: f(x, y) for n, f in cmp.items()}
    refs.update({"less_int": i < 0, "equal_const_first": x == 0.5, "and": gt & (x < 1), "or": gt | eq,
                 "xor": gt ^ (y > 0), "not": ~gt, "select": np.where(gt, x, y), "select_int": np.where(gt, i, -7),
                 "select_bool": np.where(gt, eq, y < 0), "select_broadcast": np.where(v_c() < 0, x, 9.0),
                 "to_bool": x != 0, "int_to_bool": i != 0, "bool_to_fp32": gt.astype(np.float32),
                 "bool_to_int": gt.astype(np.int32), "int_to_fp32": i.astype(np.float32),
                 "to_int": np.trunc(x * 3).astype(np.int32)})
    check_outputs(out, refs)
    assert eq.any() and (~eq).any() and gt.any() and (~gt).any()


def test_cast_out_of_range_and_nan(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """MIL cast float -> int: NaN gives 0, out-of-range values saturate (converter/ir/ops docstring)."""
    x = np.array([3e9, -3e9, np.inf, -np.inf, np.nan, 2.9e4, -7.5], np.float32)
    prog = new_program({"x": tensor("fp32", [7])}, lambda b, x: [b.cast(x=x, dtype="int32", name="i"),
                                                                 b.cast(x=x, dtype="bool", name="bo")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m")
    np.testing.assert_array_equal(out["i"], [2**31 - 1, -2**31, 2**31 - 1, -2**31, 0, 29000, -7])
    np.testing.assert_array_equal(out["bo"].astype(bool), [True] * 6 + [True])


@pytest.mark.parametrize("target,lo,hi", [("int8", -128, 127), ("uint8", 0, 255), ("int16", -(2**15), 2**15 - 1),
                                           ("uint16", 0, 2**16 - 1)])
def test_cast_to_narrow_integers_saturates_floats_and_wraps_integers(webnn_browser: WebnnBrowser, tmp_path: Path,
                                                                     target: str, lo: int, hi: int) -> None:
    """MIL cast: float -> int truncates, saturates, NaN -> 0; int -> int wraps (two's complement).
    WebNN has no 16-bit integers: int16/uint16 are held as int32 and must still wrap and saturate."""
    x = np.array([300.7, -300.7, 70000.2, -40000.5, 127.9, -128.9, 255.5, np.nan], np.float32)
    i = np.array([300, -300, 70000, -40000, 127, -129, 255, 65535], np.int32)
    prog = new_program({"x": tensor("fp32", [8]), "i": tensor("int32", [8])}, lambda b, x, i: [
        b.cast(x=x, dtype=target, name="f"), b.cast(x=i, dtype=target, name="n")], opset="iOS17")
    out = run_webnn(webnn_browser, prog, {"x": x, "i": i}, tmp_path / "m")
    span = hi - lo + 1
    np.testing.assert_array_equal(out["f"], np.clip(np.trunc(np.nan_to_num(x, nan=0.0)), lo, hi))
    np.testing.assert_array_equal(out["n"], (i.astype(np.int64) - lo) % span + lo)


def test_a_zero_epsilon_still_makes_minus_zero_plus_zero(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """MIL computes 1 / (x + epsilon): with epsilon 0, x = -0 gives +inf (-0 + 0 is +0), not -inf."""
    x = np.array([-0.0, 0.0, 4.0], np.float32)
    prog = new_program({"x": tensor("fp32", [3])}, lambda b, x: [
        b.inverse(x=x, epsilon=np.float32(0.0), name="inverse"), b.rsqrt(x=x, epsilon=np.float32(0.0), name="rsqrt")])
    out = run_webnn(webnn_browser, prog, {"x": x}, tmp_path / "m")
    np.testing.assert_array_equal(out["inverse"], [np.inf, np.inf, 0.25])
    np.testing.assert_array_equal(out["rsqrt"], [np.inf, np.inf, 0.5])


def test_integer_unary_and_binary(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    i = np.array([-7, -1, 0, 3, 12], np.int32)
    j = np.array([2, -3, 5, 3, -4], np.int32)
    prog = new_program({"i": tensor("int32", [5]), "j": tensor("int32", [5])}, lambda b, i, j: [
        b.abs(x=i, name="abs"), b.sign(x=i, name="sign"), b.square(x=i, name="square"),
        b.threshold(x=i, alpha=np.int32(1), name="threshold"), b.add(x=i, y=j, name="add"),
        b.sub(x=i, y=j, name="sub"), b.mul(x=i, y=j, name="mul"), b.maximum(x=i, y=j, name="max"),
        b.minimum(x=i, y=j, name="min")])
    out = run_webnn(webnn_browser, prog, {"i": i, "j": j}, tmp_path / "m")
    check_outputs(out, {"abs": np.abs(i), "sign": np.sign(i), "square": i * i, "threshold": np.maximum(i, 1),
                 "add": i + j, "sub": i - j, "mul": i * j, "max": np.maximum(i, j), "min": np.minimum(i, j)})


@pytest.mark.parametrize("op", ["exp2", "real_div"])
def test_integer_ops_without_a_webnn_form_are_refused(tmp_path: Path, op: str) -> None:
    def body(b, i):  # noqa: ANN001, ANN202
        return [b.exp2(x=i, name="y")] if op == "exp2" else [b.real_div(x=i, y=np.int32(2), name="y")]

    prog = new_program({"i": tensor("int32", [3])}, body)
    with pytest.raises(UnsupportedError, match=f"{op} 'y'"):
        converter.convert(prog, to="webnn", out=tmp_path / "m", passes="none")
