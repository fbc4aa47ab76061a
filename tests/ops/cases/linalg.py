"""Registry cases: linear, matmul, einsum, scaled_dot_product_attention."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(2)


def _f(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape).astype(np.float32)


_w = _f(5, 4)

CASES = [
    Case("linear", {"x": _f(2, 3, 4)}, {"weight": _w, "bias": _f(5)}, id="rank3-bias"),
    Case("linear", {"x": _f(4)}, {"weight": _w}, id="rank1-default-bias"),
    Case("linear", {"x": _rng.integers(-5, 5, (2, 4)).astype(np.int32)},
         {"weight": _rng.integers(-5, 5, (5, 4)).astype(np.int32)}, id="int32"),
    Case("linear", {"x": _f(2, 4).astype(np.float16)}, {"weight": _w, "bias": _f(5)}, opset="iOS17",
         id="iOS17-fp16-x-fp32-weight"),
    Case("matmul", {"x": _f(2, 3, 4), "y": _f(4, 5)}, id="broadcast"),
    Case("matmul", {"x": _f(4, 3), "y": _f(2, 5, 4)}, {"transpose_x": True, "transpose_y": True}, id="transposed"),
    Case("matmul", {"x": _f(4), "y": _f(2, 4, 5)}, id="x-vector"),
    Case("matmul", {"x": _f(2, 3, 4), "y": _f(4)}, id="y-vector"),
    Case("matmul", {"x": _f(4), "y": _f(4)}, id="dot"),
    Case("matmul", {"x": _rng.integers(-5, 5, (3, 4)).astype(np.int32),
                    "y": _rng.integers(-5, 5, (4, 2)).astype(np.int32)}, id="int32"),
    Case("matmul", {"x": _f(3, 4).astype(np.float16)}, {"y": _f(4, 2)}, opset="iOS17", id="iOS17-const-fp32-y"),
    Case("einsum", {"values": [_f(2, 3, 4, 5), _f(2, 5, 4, 6)]}, {"equation": "nchw,nwhu->nchu"}, id="rank4"),
    Case("einsum", {"values": [_f(3, 1, 5), _f(5, 4, 6)]}, {"equation": "abc,cbd->abd"}, id="rank3-broadcast"),
    Case("scaled_dot_product_attention", {"query": _f(2, 3, 4), "key": _f(2, 5, 4), "value": _f(2, 5, 6)},
         id="no-mask"),
    Case("scaled_dot_product_attention", {"query": _f(1, 2, 3, 4), "key": _f(1, 2, 5, 4), "value": _f(1, 2, 5, 6),
                                          "attn_mask": np.tril(np.ones((3, 5), bool))}, id="bool-mask"),
    Case("scaled_dot_product_attention", {"query": _f(2, 3, 4).astype(np.float16), "key": _f(2, 5, 4).astype(np.float16),
                                          "value": _f(2, 5, 6).astype(np.float16), "attn_mask": _f(3, 5)},
         id="fp16-float-mask"),
]
