"""The WebNN conformance vectors (../shared/data/webnn-conformance/) as numpy test cases.

Each vector is a small graph of WebNN operators with inputs and expected outputs computed by the
WPT authors. Tests map a WebNN operator to IR ops and compare with the harness's tolerance rule
(ULP or ATOL, see the README there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.conftest import WEBNN_VECTORS

_NP = {
    "float32": np.float32, "float16": np.float16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "int8": np.int8, "uint8": np.uint8,
}


def _decode(x: Any) -> Any:
    if isinstance(x, str):
        special = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
        if x in special:
            return special[x]
        return int(x[:-1] if x.endswith("n") else x)  # BigInt literal, e.g. "9007199254740995n"
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def make_array(desc: dict) -> np.ndarray:
    """A numpy array from a vector's {data, descriptor}: scalars fill the shape."""
    shape = desc["descriptor"]["shape"]
    dt = _NP[desc["descriptor"]["dataType"]]
    data = _decode(desc["data"])
    if not isinstance(data, list):
        return np.full(shape, data, dtype=np.float64).astype(dt)
    return np.array(data, dtype=np.float64 if dt in (np.float16, np.float32) else object).astype(dt).reshape(shape)


@dataclass
class Vector:
    name: str
    inputs: dict[str, np.ndarray]
    operators: list[dict]
    expected: dict[str, np.ndarray]


def load(op: str) -> list[Vector]:
    data = json.loads((WEBNN_VECTORS / f"{op}.json").read_text())
    out = []
    for case in data["cases"]:
        g = case["graph"]
        inputs = {k: make_array(v) for k, v in g["inputs"].items()}
        expected = {k: make_array(v) for k, v in g["expectedOutputs"].items()}
        out.append(Vector(case["name"], inputs, g["operators"], expected))
    return out


def ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """|bits(actual) - bits(expected)| as the WPT harness computes it for float32/float16."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.dtype == np.float32:
        ai = a.view(np.int32).astype(np.int64)
        ei = e.astype(np.float32).view(np.int32).astype(np.int64)
        return np.abs(ai - ei)
    if a.dtype == np.float16:
        ai = a.view(np.uint16).astype(np.int64)
        ei = e.astype(np.float16).view(np.uint16).astype(np.int64)
        return np.abs(ai - ei)
    return np.abs(a.astype(np.int64) - e.astype(np.int64))


def assert_ulp(actual: np.ndarray, expected: np.ndarray, budget: int, what: str = "") -> None:
    actual = np.asarray(actual)
    expected = np.asarray(expected).astype(actual.dtype)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    same = (actual == expected) | (np.isnan(actual.astype(np.float64)) & np.isnan(expected.astype(np.float64)))
    far = ~same & (ulp_distance(actual, expected) > budget)
    assert not far.any(), (
        f"{what}: {int(far.sum())} elements beyond {budget} ULP, e.g. got {actual[far][:5]} expected {expected[far][:5]}"
    )


def assert_atol(actual: np.ndarray, expected: np.ndarray, atol: float, what: str = "") -> None:
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=0, atol=atol,
                               equal_nan=True, err_msg=what)
