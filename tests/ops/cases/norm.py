"""Registry cases: normalization ops."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(1)
_x4 = _rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
_x3 = _rng.standard_normal((2, 3, 4)).astype(np.float32)
_c = 3
_mean = _rng.standard_normal(_c).astype(np.float32)
_var = _rng.uniform(0.5, 2, _c).astype(np.float32)
_gamma = _rng.standard_normal(_c).astype(np.float32)
_beta = _rng.standard_normal(_c).astype(np.float32)

CASES = [
    Case("batch_norm", {"x": _x4}, {"mean": _mean, "variance": _var}, id="no-affine"),
    Case("batch_norm", {"x": _x3}, {"mean": _mean, "variance": _var, "gamma": _gamma, "beta": _beta,
                                    "epsilon": 1e-3}, id="rank3-affine"),
    Case("batch_norm", {"x": _x4.astype(np.float16)}, {"mean": _mean, "variance": _var, "gamma": _gamma},
         opset="iOS17", id="iOS17-fp16-x-fp32-params"),
    Case("instance_norm", {"x": _x4}, {"gamma": _gamma, "beta": _beta}, id="rank4"),
    Case("instance_norm", {"x": _x3}, id="rank3"),
    Case("instance_norm", {"x": _x4.astype(np.float16)}, {"beta": _beta, "epsilon": 1e-2}, opset="iOS17",
         id="iOS17-fp16-x-fp32-params"),
    Case("l2_norm", {"x": _x3}, id="rank3"),
    Case("l2_norm", {"x": _x4}, {"epsilon": 1e-2}, id="rank4-batched"),
    Case("l2_norm", {"x": _x4.astype(np.float16)}, {"epsilon": np.float32(1e-3)}, opset="iOS17", id="iOS17-fp16"),
    Case("layer_norm", {"x": _x3}, id="default-axes"),
    Case("layer_norm", {"x": _x4}, {"axes": [-1, 1], "gamma": _rng.standard_normal((3, 5)).astype(np.float32),
                                    "beta": _rng.standard_normal((3, 5)).astype(np.float32)}, id="axes-affine"),
    Case("layer_norm", {"x": _x4.astype(np.float16)}, {"axes": [-1], "gamma": np.ones(5, np.float32)},
         opset="iOS17", id="iOS17-fp16-x-fp32-params"),
    Case("local_response_norm", {"x": _x4}, {"size": 3}, id="rank4"),
    Case("local_response_norm", {"x": _x3}, {"size": 2, "alpha": 1e-2, "beta": 0.5, "k": 2.0}, id="rank3-even"),
    Case("local_response_norm", {"x": _x4.astype(np.float16)}, {"size": 5, "alpha": np.float32(0.1)},
         opset="iOS17", id="iOS17-fp16"),
]
