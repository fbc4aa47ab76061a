"""Registry cases: elementwise binary ops."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(0)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_y = _rng.standard_normal((3, 1)).astype(np.float32) + 3.0
_i = _rng.integers(-9, 9, (2, 3)).astype(np.int32)
_j = _rng.integers(1, 5, (3,)).astype(np.int32)
_b1 = _rng.integers(0, 2, (2, 3)).astype(bool)
_b2 = _rng.integers(0, 2, (3,)).astype(bool)

CASES = []
for _op in ["add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum",
            "equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]:
    CASES.append(Case(_op, {"x": _x, "y": np.abs(_y) if _op == "pow" else _y}, id="fp32"))
    if _op != "pow":
        CASES.append(Case(_op, {"x": _i, "y": _j}, id="int32"))
for _op in ["logical_and", "logical_or", "logical_xor"]:
    CASES.append(Case(_op, {"x": _b1, "y": _b2}))
