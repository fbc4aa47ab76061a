"""Registry cases: elementwise unary ops (math, rounding, bounds, epsilon-guarded ops, cast)."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(1)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32) * 2
_unit = np.tanh(_x)  # inside (-1, 1): acos, asin, atanh
_pos = np.abs(_x) + 0.1
_h = _x.astype(np.float16)
_i = _rng.integers(-20, 20, (3, 4)).astype(np.int32)
_b = _rng.integers(0, 2, (2, 3)).astype(bool)

_FLOAT_OPS = ["abs", "atan", "ceil", "cos", "cosh", "erf", "exp", "exp2", "floor", "round", "sign", "sin",
              "sinh", "square", "tan", "tanh"]

CASES = []
for _op in _FLOAT_OPS:
    CASES.append(Case(_op, {"x": _x}, id="fp32"))
    CASES.append(Case(_op, {"x": _h}, id="fp16"))
for _op in ["acos", "asin", "atanh"]:
    CASES.append(Case(_op, {"x": _unit}, id="fp32"))
    CASES.append(Case(_op, {"x": _unit.astype(np.float16)}, id="fp16"))
for _op in ["abs", "exp2", "sign", "square"]:
    CASES.append(Case(_op, {"x": _i}, id="int32"))
CASES.append(Case("sqrt", {"x": _pos}, id="fp32"))
CASES.append(Case("logical_not", {"x": _b}))

CASES += [
    Case("clip", {"x": _x}, {"alpha": -1.0, "beta": 1.5}, id="fp32"),
    Case("clip", {"x": _h}, {"alpha": np.float16(2.0), "beta": np.float16(-1.0)}, id="alpha>beta"),
    Case("clip", {"x": _h}, {"alpha": np.float16(-1.0), "beta": np.float16(1.0)}, opset="iOS17", id="iOS17"),
    Case("threshold", {"x": _x}, {"alpha": 0.25}, id="fp32"),
    Case("threshold", {"x": _i}, {"alpha": np.int32(3)}, id="int32"),
]
for _op in ["inverse", "log", "rsqrt"]:
    CASES += [
        Case(_op, {"x": _pos}, id="default-eps"),
        Case(_op, {"x": _pos.astype(np.float16)}, id="fp16-default-eps"),
        Case(_op, {"x": _pos}, {"epsilon": 0.5}, id="eps"),
        Case(_op, {"x": _pos.astype(np.float16)}, {"epsilon": np.float32(1e-3)}, opset="iOS17", id="iOS17-mixed"),
    ]

_CAST_SOURCES = {"fp32": _x * 10, "fp16": _h, "int32": _i, "bool": _b}
for _src, _val in _CAST_SOURCES.items():
    for _to in ["fp16", "fp32", "int32", "bool"]:
        CASES.append(Case("cast", {"x": _val}, {"dtype": _to}, id=f"{_src}-to-{_to}"))
_NARROW = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16}
for _name, _np in _NARROW.items():
    CASES.append(Case("cast", {"x": _x * 100}, {"dtype": _name}, opset="iOS17", id=f"fp32-to-{_name}"))
    CASES.append(Case("cast", {"x": np.arange(0, 12, dtype=_np).reshape(3, 4)}, {"dtype": "fp32"}, opset="iOS17",
                      id=f"{_name}-to-fp32"))
