"""Registry cases: conv, conv_transpose, conv_quantized."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(0)


def _f(*shape, dt=np.float32):
    return _rng.standard_normal(shape).astype(dt)


_x2 = _f(1, 4, 7, 6)
_w2 = _f(6, 2, 3, 3)

CASES = [
    Case("conv", {"x": _x2}, {"weight": _f(6, 4, 3, 3)}, id="valid"),
    Case("conv", {"x": _x2}, {"weight": _w2, "bias": _f(6), "groups": 2, "strides": [2, 2], "pad_type": "same"},
         id="groups-stride2-same"),
    Case("conv", {"x": _x2}, {"weight": _f(4, 1, 2, 2), "groups": 4, "pad_type": "same_lower"}, opset="iOS16",
         id="depthwise-same_lower-even-kernel"),
    Case("conv", {"x": _x2}, {"weight": _f(3, 4, 3, 2), "pad_type": "custom", "pad": [1, 0, 2, 1],
                              "dilations": [2, 1], "strides": [1, 2]}, id="custom-dilated"),
    Case("conv", {"x": _f(2, 3, 9)}, {"weight": _f(5, 3, 4), "strides": [3], "pad_type": "same"}, id="1d"),
    Case("conv", {"x": _f(1, 2, 4, 5, 3)}, {"weight": _f(3, 2, 2, 3, 1), "pad_type": "same"}, id="3d-stride1-same"),
    Case("conv", {"x": _f(1, 4, 6, 6, dt=np.float16)}, {"weight": _f(2, 4, 3, 3, dt=np.float16)}, id="fp16"),
    Case("conv", {"x": _f(1, 4, 6, 6, dt=np.float16), "weight": _f(2, 4, 3, 3), "bias": _f(2)}, opset="iOS17",
         id="iOS17-runtime-fp32-weight"),
    Case("conv_quantized", {"x": _f(1, 3, 6, 6)},
         {"weight": _rng.integers(0, 16, (4, 3, 3, 3)).astype(np.uint8), "quantization_type": "linear", "nbits": 4,
          "quant_scale": np.array([0.1, 0.2, 0.05, 0.3], np.float32), "quant_bias": np.float32(-0.5),
          "pad_type": "same"}),
    Case("conv_transpose", {"x": _f(1, 4, 3, 5)}, {"weight": _f(4, 3, 3, 3)}, id="valid"),
    Case("conv_transpose", {"x": _f(1, 4, 3, 5)}, {"weight": _f(4, 2, 3, 2), "bias": _f(4), "groups": 2,
                                                   "strides": [2, 3], "pad_type": "custom", "pad": [1, 0, 0, 2]},
         id="groups-stride-custom"),
    Case("conv_transpose", {"x": _f(1, 2, 4, 4)}, {"weight": _f(2, 3, 3, 3), "strides": [2, 2], "pad_type": "same"},
         id="same-stride2"),
    Case("conv_transpose", {"x": _f(1, 2, 4, 4)}, {"weight": _f(2, 3, 3, 3), "strides": [2, 2], "pad_type": "same",
                                                   "output_shape": [1, 3, 7, 9]}, id="output_shape"),
    Case("conv_transpose", {"x": _f(2, 3, 5)}, {"weight": _f(3, 2, 3), "dilations": [2]}, id="1d-dilated"),
    Case("conv_transpose", {"x": _f(1, 2, 2, 3, 2)}, {"weight": _f(2, 1, 2, 2, 2), "strides": [2, 1, 2]}, id="3d"),
    Case("conv_transpose", {"x": _f(1, 2, 3, 3, dt=np.float16), "weight": _f(2, 2, 2, 2)}, opset="iOS17",
         id="iOS17-runtime-weight"),
]
