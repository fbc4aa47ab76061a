"""Registry cases: activation functions."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(2)
_x = _rng.standard_normal((2, 3, 4)).astype(np.float32) * 3
_h = _x.astype(np.float16)
_x4 = _rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
_x5 = _rng.standard_normal((1, 3, 2, 2, 2)).astype(np.float32)
_c3 = np.array([0.1, -0.5, 2.0], np.float32)

CASES = []
for _op in ["relu", "relu6", "sigmoid", "silu", "softplus", "softsign"]:
    CASES.append(Case(_op, {"x": _x}, id="fp32"))
    CASES.append(Case(_op, {"x": _h}, id="fp16"))

# (op, params): scalar alpha / beta ops, run in iOS15 (same dtype) and iOS17 (fp32 params, fp16 x)
_ALPHA_BETA = [
    ("clamped_relu", {"alpha": 0.3, "beta": 2.0}),
    ("elu", {"alpha": 1.5}),
    ("leaky_relu", {"alpha": 0.1}),
    ("linear_activation", {"alpha": -2.0, "beta": 0.5}),
    ("scaled_tanh", {"alpha": 1.7, "beta": 0.66}),
    ("sigmoid_hard", {"alpha": 0.2, "beta": 0.5}),
    ("thresholded_relu", {"alpha": 0.4}),
]
for _op, _params in _ALPHA_BETA:
    CASES.append(Case(_op, {"x": _x}, _params, id="fp32"))
    CASES.append(Case(_op, {"x": _h}, _params, id="fp16"))
    CASES.append(Case(_op, {"x": _h}, {k: np.float32(v) for k, v in _params.items()}, opset="iOS17",
                      id="iOS17-mixed"))

for _mode in ["EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION"]:
    CASES.append(Case("gelu", {"x": _x}, {"mode": _mode}, id=_mode))
CASES.append(Case("gelu", {"x": _h}, id="fp16-default"))

CASES += [
    Case("prelu", {"x": _x}, {"alpha": _c3}, id="rank3"),
    Case("prelu", {"x": _x4}, {"alpha": _c3}, id="rank4"),
    Case("prelu", {"x": _x5}, {"alpha": _c3}, id="rank5"),
    Case("prelu", {"x": _x4.astype(np.float16)}, {"alpha": _c3}, opset="iOS17", id="iOS17-mixed"),
    Case("softplus_parametric", {"x": _x4}, {"alpha": _c3, "beta": np.array([1.0, 0.5, -2.0], np.float32)},
         id="rank4"),
    Case("softplus_parametric", {"x": _x.astype(np.float16)},
         {"alpha": _c3, "beta": np.array([1.0, 0.5, 3.0], np.float32)}, opset="iOS17", id="iOS17-mixed"),
    Case("softmax", {"x": _x}, id="default-axis"),
    Case("softmax", {"x": _x4}, {"axis": 1}, id="axis1"),
    Case("softmax", {"x": _h}, {"axis": -2}, id="fp16-axis-2"),
]
