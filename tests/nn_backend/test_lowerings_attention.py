"""scaled_dot_product_attention -> batchedMatmul / multiply / mask / softmaxND / batchedMatmul,
checked against torch.nn.functional.scaled_dot_product_attention."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .helpers import assert_close, layer_kinds, program, run_nn

RNG = np.random.default_rng(11)
Q = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)  # [B, heads, L, E]
K = RNG.standard_normal((2, 3, 6, 5)).astype(np.float32)  # S = 6
V = RNG.standard_normal((2, 3, 6, 7)).astype(np.float32)  # EV = 7
BOOL_MASK = RNG.random((4, 6)) > 0.4
BOOL_MASK[:, 0] = True  # no row fully masked (torch gives 0 there, the IR op NaN)
FLOAT_MASK = RNG.standard_normal((1, 3, 4, 6)).astype(np.float32)


def _torch(mask: np.ndarray | None) -> np.ndarray:
    m = None if mask is None else torch.from_numpy(mask)
    return F.scaled_dot_product_attention(torch.from_numpy(Q), torch.from_numpy(K), torch.from_numpy(V),
                                          attn_mask=m).numpy()


@pytest.mark.parametrize("case", ["none", "float_input", "bool_input", "bool_const", "float_const"])
def test_sdpa_matches_torch(tmp_path: Path, case: str) -> None:
    mask = {"none": None, "float_input": FLOAT_MASK, "bool_input": BOOL_MASK, "bool_const": BOOL_MASK,
            "float_const": FLOAT_MASK}[case]
    feeds = {"q": Q, "k": K, "v": V}
    if case.endswith("input"):  # a bool mask computed in the model (bool features do not exist)
        feeds["m"] = mask.astype(np.float32)

    def body(b, q, k, v, m=None):
        if case.endswith("const"):
            m = b.const(mask)
        elif case == "bool_input":
            m = b.greater(x=m, y=np.float32(0.5))
        return [b.scaled_dot_product_attention(query=q, key=k, value=v, **({} if m is None else {"attn_mask": m}),
                                               name="attn")]

    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program(feeds, body, opset="iOS18"), feeds, path).values()
    assert_close(got, _torch(mask))
    kinds = layer_kinds(path)
    assert kinds["batchedMatmul"] == 2 and kinds["softmaxND"] == 1 and kinds["multiply"] == 1
    assert kinds["whereBroadcastable"] == (case == "bool_input")
    assert kinds["addBroadcastable"] == (case in ("float_input", "float_const", "bool_const"))
