"""Cast chains and squeeze/expand_dims pairs (converter/passes/canonicalize/casts.py, reshapes.py).

The table of value-preserving casts is checked against numpy's conversions (an oracle we did not
write): for each pair of dtypes, ``lossless`` says "exact" exactly when every sampled value (all
values of the 8- and 16-bit dtypes, edge values of the 32-bit ones) is the same number after numpy's conversion.
"""

from __future__ import annotations

import numpy as np
import pytest

from converter.ir.types import dtype
from converter.passes.canonicalize import cast_chain, expand_dims_squeeze, squeeze_expand_dims
from converter.passes.canonicalize.casts import lossless

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"


def _prog(inputs: str, body: str, outputs: str) -> str:
    return f"{HEAD}({inputs}) {{\n{body}\n}} -> ({outputs})"


def _dt(name: str, to: str) -> str:
    return f'%{name}: tensor<string, []> = const() [val=dense<string, []>("{to}")]'


def _samples(name: str) -> np.ndarray:
    storage = dtype(name).storage
    if name == "bool":
        return np.array([False, True])
    if name in ("int8", "uint8", "int16", "uint16"):
        info = np.iinfo(storage)
        return np.arange(info.min, info.max + 1).astype(storage)
    if name == "fp16":
        return np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    if name == "int32":
        return np.array([-2 ** 31, -2 ** 24 - 1, -1, 0, 7, 2 ** 24 + 1, 2 ** 31 - 1], np.int32)
    return np.array([-np.inf, -3.4e38, -1.0e-40, -0.0, 0.0, 0.1, 0.5, 65519.0, 70000.0, 2.0 ** 24 + 2, np.inf, np.nan],
                    np.float32)


def _keeps_values(src: str, dst: str) -> bool:
    """Every sampled value of ``src`` is, after numpy's conversion to ``dst``, the same number (NaN
    stays NaN, zeros keep their sign)."""
    x = _samples(src)
    with np.errstate(all="ignore"):
        y = (x != 0) if dst == "bool" else x.astype(dtype(dst).storage)
        a, b = x.astype(np.float64), y.astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return bool(np.all(same & (np.signbit(a) == np.signbit(b))))


DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "fp16", "fp32"]


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_lossless_agrees_with_numpy_conversions(src: str, dst: str) -> None:
    assert (lossless(dtype(src), dtype(dst)) is None) == _keeps_values(src, dst), (src, dst)


def test_cast_chain_back_to_the_source_dtype_is_the_source() -> None:
    assert_rewrites(_prog("%x: tensor<fp16, [4]>", f"""{_dt("d32", "fp32")}
      {_dt("d16", "fp16")}
      %t: tensor<fp32, [4]> = cast(x=%x, dtype=%d32)
      %c: tensor<fp16, [4]> = cast(x=%t, dtype=%d16)
      %y: tensor<fp16, [4]> = exp(x=%c)""", "%y"), cast_chain, _prog("%x: tensor<fp16, [4]>", """
      %y: tensor<fp16, [4]> = exp(x=%x)""", "%y"))


def test_cast_chain_to_a_third_dtype_is_one_cast_and_keeps_an_inner_cast_read_elsewhere() -> None:
    # int8 -> int16 keeps every value; int16 -> fp16 then equals int8 -> fp16 directly
    assert_rewrites(_prog("%x: tensor<int8, [3]>", f"""{_dt("d1", "int16")}
      {_dt("d2", "fp16")}
      %t: tensor<int16, [3]> = cast(x=%x, dtype=%d1)
      %y: tensor<fp16, [3]> = cast(x=%t, dtype=%d2)""", "%y, %t"), cast_chain, _prog("%x: tensor<int8, [3]>", f"""
      {_dt("d1", "int16")}
      {_dt("d2", "fp16")}
      %t: tensor<int16, [3]> = cast(x=%x, dtype=%d1)
      %y: tensor<fp16, [3]> = cast(x=%x, dtype=%d2)""", "%y, %t"))


def test_cast_chain_refuses_a_lossy_first_cast() -> None:
    assert_refuses(_prog("%x: tensor<fp32, [4]>", f"""{_dt("d16", "fp16")}
      {_dt("d32", "fp32")}
      %t: tensor<fp16, [4]> = cast(x=%x, dtype=%d16)
      %y: tensor<fp32, [4]> = cast(x=%t, dtype=%d32)""", "%y"), cast_chain,
                   "the first cast loses values (fp32 -> fp16 rounds)")
    assert_refuses(_prog("%x: tensor<int32, [4]>", f"""{_dt("d", "fp32")}
      {_dt("i", "int32")}
      %t: tensor<fp32, [4]> = cast(x=%x, dtype=%d)
      %y: tensor<int32, [4]> = cast(x=%t, dtype=%i)""", "%y"), cast_chain, "int32 -> fp32 rounds integers above 2^24")


X = "%x: tensor<fp32, [1, 3, 1, 4]>"


def _ax(name: str, *axes: int) -> str:
    return f"%{name}: tensor<int32, [{len(axes)}]> = const() [val=dense<int32, [{len(axes)}]>({', '.join(map(str, axes))})]"


def test_squeeze_then_expand_dims_of_the_same_axes_is_the_input() -> None:
    # squeeze without axes removes both unit dims; expand_dims puts them back at 0 and 2 (-2 of rank 4)
    assert_rewrites(_prog(X, f"""{_ax("a", 0, -2)}
      %s: tensor<fp32, [3, 4]> = squeeze(x=%x)
      %e: tensor<fp32, [1, 3, 1, 4]> = expand_dims(x=%s, axes=%a)
      %y: tensor<fp32, [1, 3, 1, 4]> = relu(x=%e)
      %z: tensor<fp32, [3, 4]> = exp(x=%s)""", "%y, %z"), squeeze_expand_dims, _prog(X, """
      %s: tensor<fp32, [3, 4]> = squeeze(x=%x)
      %y: tensor<fp32, [1, 3, 1, 4]> = relu(x=%x)
      %z: tensor<fp32, [3, 4]> = exp(x=%s)""", "%y, %z"))


def test_squeeze_then_expand_dims_elsewhere_is_refused() -> None:
    assert_refuses(_prog(X, f"""{_ax("a", 0, 2)}
      {_ax("b", 0, 3)}
      %s: tensor<fp32, [3, 4]> = squeeze(x=%x, axes=%a)
      %e: tensor<fp32, [1, 3, 4, 1]> = expand_dims(x=%s, axes=%b)
      %y: tensor<fp32, [1, 3, 4, 1]> = relu(x=%e)""", "%y"), squeeze_expand_dims,
                   "squeeze removes axes [0, 2], expand_dims inserts [0, 3]")


def test_expand_dims_then_squeeze_of_the_same_axes_is_the_input() -> None:
    assert_rewrites(_prog("%x: tensor<fp32, [3, 4]>", f"""{_ax("a", 1, -1)}
      {_ax("b", 3, 1)}
      %e: tensor<fp32, [3, 1, 4, 1]> = expand_dims(x=%x, axes=%a)
      %s: tensor<fp32, [3, 4]> = squeeze(x=%e, axes=%b)
      %y: tensor<fp32, [3, 4]> = relu(x=%s)""", "%y"), expand_dims_squeeze, _prog("%x: tensor<fp32, [3, 4]>", """
      %y: tensor<fp32, [3, 4]> = relu(x=%x)""", "%y"))


def test_expand_dims_then_squeeze_of_all_unit_dims_is_refused_when_x_has_its_own() -> None:
    # x's own unit dim goes too: [1, 4] -> [1, 1, 4] -> [4]
    assert_refuses(_prog("%x: tensor<fp32, [1, 4]>", f"""{_ax("a", 0)}
      %e: tensor<fp32, [1, 1, 4]> = expand_dims(x=%x, axes=%a)
      %s: tensor<fp32, [4]> = squeeze(x=%e)
      %y: tensor<fp32, [4]> = relu(x=%s)""", "%y"), expand_dims_squeeze,
                   "expand_dims inserts axes [0], squeeze removes [0, 1]")
