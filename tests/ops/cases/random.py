"""Registry cases: random ops (constant and run-time shapes, fp16 and fp32)."""

import numpy as np

from tests.ops.harness import Case

_shape = np.array([2, 3, 4], np.int32)

CASES = [
    Case("random_bernoulli", params={"shape": _shape, "prob": 0.3, "seed": 5}),
    Case("random_bernoulli", {"shape": _shape}, {"prob": np.float16(0.7)}, symbolic=False, id="runtime_shape"),
    Case("random_normal", params={"shape": _shape, "mean": np.float16(1.0), "stddev": np.float16(2.0)}, id="fp16"),
    Case("random_uniform", params={"shape": _shape, "low": -1.0, "high": 3.0, "seed": 1}),
    Case("random_uniform", {"shape": _shape}, symbolic=False, id="runtime_shape"),
    Case("random_categorical", {"x": np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]], np.float32))},
         {"size": 4, "seed": 3}, id="logits"),
    Case("random_categorical", {"x": np.array([[1.0, 3.0], [2.0, 0.0]], np.float16)},
         {"mode": "probs", "size": 2}, id="probs_fp16"),
]
