"""Helpers shared by the op oracle tests (tests/ops/test_oracle_*.py): seeded test data, integer
parameter arrays, the exact comparison and the single-operator WebNN conformance vectors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tests.oracles import webnn_vectors

# parametrize(..., **DT_ID): a test id per numpy dtype by its name
DT_ID = {"ids": lambda d: np.dtype(d).name}
DTYPES = [np.float32, np.float16, np.int32, np.bool_]


def random_data(shape: tuple, dt: type, seed: int = 0, *, bound: int = 100, scale: float = 10.0) -> np.ndarray:
    """Seeded data of dtype ``dt``: bools; integers in [-bound, bound) within ``dt``'s range;
    floats standard normal times ``scale``."""
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -bound), min(info.max, bound), shape).astype(dt)
    return (rng.standard_normal(shape) * scale).astype(dt)


def i32(v: Any) -> np.ndarray:
    """An int32 parameter array (a bare [] would become an fp32 constant)."""
    return np.asarray(v, np.int32)


def i64(v: Any) -> np.ndarray:
    return np.asarray(v, np.int64)


def assert_exact(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Same shape, same dtype, same values (NaN matches NaN)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(got, want, err_msg=what)


def single_op_vectors(op: str) -> Iterator[tuple[Any, dict[str, Any], dict[str, Any], Any]]:
    """The WebNN conformance vectors of ``op``, each of one operator: (vector, its arguments merged
    into one dict by name, its options, its output name)."""
    for vec in webnn_vectors.load(op):
        (node,) = vec.operators
        args = {k: v for arg in node["arguments"] for k, v in arg.items()}
        yield vec, args, args.get("options", {}), node["outputs"]
