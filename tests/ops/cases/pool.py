"""Registry cases: avg_pool, max_pool, l2_pool."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(1)
_x = _rng.standard_normal((2, 3, 7, 6)).astype(np.float32)

CASES = []
for _op in ("avg_pool", "max_pool", "l2_pool"):
    CASES += [
        Case(_op, {"x": _x}, {"kernel_sizes": [2, 3], "pad_type": "valid"}, id="valid"),
        Case(_op, {"x": _x}, {"kernel_sizes": [3, 2], "strides": [2, 2], "pad_type": "same"}, id="same-stride2"),
        Case(_op, {"x": _x}, {"kernel_sizes": [3, 3], "strides": [2, 1], "pad_type": "custom", "pad": [1, 1, 0, 0],
                              "ceil_mode": True}, fresh_ok="ceil_mode with padding drops a last window depending on the size", id="ceil"),
        Case(_op, {"x": _x[:, :, 0]}, {"kernel_sizes": [2], "strides": [2], "pad_type": "same_lower"}, opset="iOS16",
             id="1d-same_lower"),
        Case(_op, {"x": _x.astype(np.float16)}, {"kernel_sizes": [2, 2], "pad_type": "valid"}, id="fp16"),
    ]
    if _op != "l2_pool":
        CASES.append(Case(_op, {"x": _x[:, :, None]}, {"kernel_sizes": [1, 2, 2], "pad_type": "same"}, id="3d"))
CASES.append(Case("avg_pool", {"x": _x}, {"kernel_sizes": [3, 3], "pad_type": "custom", "pad": [1, 2, 2, 1],
                                          "exclude_padding_from_average": True}, id="exclude-padding"))
