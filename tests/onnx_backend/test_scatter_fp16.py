"""fp16 scatter with a reduction: onnxruntime's CPU ScatterElements/ScatterND reduce float,
double and integers only, so the reduction runs in fp32 and is rounded back once. Oracle: numpy
(np.add.at) written here, and our interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from .helpers import assert_close, only, program, run_both


@pytest.mark.parametrize("op", ["scatter", "scatter_along_axis", "scatter_nd"])
def test_fp16_scatter_add(op: str) -> None:
    data = (np.arange(12, dtype=np.float16) * np.float16(0.25)).reshape(3, 4)
    if op == "scatter_nd":
        idx, upd = np.array([[0, 1], [2, 3], [0, 1]], np.int32), np.array([1.5, -2.0, 0.5], np.float16)
        want = data.astype(np.float32)
        np.add.at(want, (idx[:, 0], idx[:, 1]), upd.astype(np.float32))
        body = lambda b, d: b.scatter_nd(data=d, indices=idx, updates=upd, mode="add")  # noqa: E731
    elif op == "scatter":
        idx, upd = np.array([2, 0, 2], np.int32), np.full((3, 4), 0.75, np.float16)
        want = data.astype(np.float32)
        np.add.at(want, idx, upd.astype(np.float32))
        body = lambda b, d: b.scatter(data=d, indices=idx, updates=upd, axis=0, mode="add")  # noqa: E731
    else:
        idx, upd = np.array([[1, 1, 0, 2]], np.int32), np.array([[1.0, 2.0, -1.0, 0.5]], np.float16)
        want = data.astype(np.float32)
        for j in range(4):
            want[idx[0, j], j] += upd[0, j]
        body = lambda b, d: b.scatter_along_axis(data=d, indices=idx, updates=upd, axis=0, mode="add")  # noqa: E731
    prog = program({"d": data}, body, opset="iOS17")
    got, interp = run_both(prog, {"d": data})
    assert only(got).dtype == np.float16
    assert_close(only(got), want, 2e-3)
    assert_close(only(got), only(interp), 2e-3)
