"""Linear algebra: linear, matmul, einsum, scaled_dot_product_attention.

Accumulation: float operands are multiplied and summed in fp32 and rounded to the output dtype
once (fp16 included); int32 products are summed exactly in int64 and wrap modulo 2**32 when cast
back. Since iOS17 ``linear``'s weight/bias and one ``matmul`` operand may have another dtype than
``x``; the result takes the dtype described on each op.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import ShapeError, broadcast_shapes
from ..types import Dim, TensorType, Type, dims_compatible, is_static_dim


def _work_dtype(*arrays: np.ndarray) -> type:
    """fp32 if any operand is a float, else int64 (exact for int32 products)."""
    return np.float32 if any(x.dtype.kind == "f" for x in arrays) else np.int64


def _same_dim(a: InferArgs, d1: Dim, d2: Dim, what: str) -> Dim:
    """The dim two operands must share (a static one wins over a symbol)."""
    if not dims_compatible(d1, d2):
        raise a.fail(f"{what}: {d1} != {d2}")
    return d1 if is_static_dim(d1) else d2


def _broadcast_or_fail(a: InferArgs, *shapes: tuple) -> tuple:
    try:
        return broadcast_shapes(*shapes)
    except ShapeError as e:
        raise a.fail(str(e)) from None


@register
class Linear(OpDef):
    """``x @ weight.T + bias`` with const weight [Dout, Din] and bias [Dout] (default zeros).

    MIL documents 1 <= rank(x) <= 3; only rank >= 1 is enforced, because coremltools' own
    fuse_matmul_weight_bias pass emits linear for x of any rank >= 2. Output dtype = x's dtype.
    """

    op_type = "linear"

    def default_bias(self, a: InferArgs | EvalArgs) -> np.ndarray | None:
        w = a.tensor_type("weight")
        if w.shape is None or len(w.shape) != 2 or not is_static_dim(w.shape[0]):
            return None
        return np.zeros(int(w.shape[0]), dtype=w.dtype.storage)

    def infer(self, a: InferArgs) -> list[Type]:
        x, w = a.tensor_type("x"), a.tensor_type("weight")
        if w.shape is not None and len(w.shape) != 2:
            raise a.fail(f"weight must be 2-D [Dout, Din], got shape {list(w.shape)}")
        if x.shape is not None and not x.shape:
            raise a.fail("linear needs x of rank >= 1, got a scalar")
        d_out: Dim = a.new_symbol() if w.shape is None else w.shape[0]
        if a.has("bias"):
            b = a.tensor_type("bias")
            if b.shape is not None:
                if len(b.shape) != 1:
                    raise a.fail(f"bias must be 1-D [Dout], got shape {list(b.shape)}")
                d_out = _same_dim(a, d_out, b.shape[0], "bias size vs weight rows")
        if x.shape is None:
            return [TensorType(x.dtype, None)]
        if w.shape is not None:
            _same_dim(a, x.shape[-1], w.shape[1], "last dim of x vs weight columns")
        return [TensorType(x.dtype, x.shape[:-1] + (d_out,))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, w, b = a["x"], np.asarray(a["weight"]), np.asarray(a["bias"])
        work = _work_dtype(x, w)
        with np.errstate(all="ignore"):
            y = np.matmul(x.astype(work), w.T.astype(work)) + b.astype(work)
        return [y.astype(x.dtype)]


@register
class Matmul(OpDef):
    """Batched matrix product with numpy broadcasting of the batch dims.

    A 1-D ``x`` is treated as [1, K] and a 1-D ``y`` as [K, 1], the added dim then removed (two 1-D
    operands give a scalar). ``transpose_x``/``transpose_y`` swap the last two dims first; on a 1-D
    operand they are rejected, as coremltools does (its docs call them no-ops there).
    Output dtype: iOS15/16 and iOS17 with x, y both const or both not: the shared dtype; iOS17
    with exactly one const operand: the dtype of the non-const one.
    """

    op_type = "matmul"

    def _out_dtype(self, a: InferArgs, x: TensorType, y: TensorType) -> Any:
        if x.dtype == y.dtype:
            return x.dtype
        x_const, y_const = a.op.inputs["x"].is_const, a.op.inputs["y"].is_const
        if x_const == y_const:
            kind = "const" if x_const else "non-const"
            raise a.fail(f"x ({x.dtype}) and y ({y.dtype}) are both {kind}, so their dtypes must match")
        return x.dtype if y_const else y.dtype

    def infer(self, a: InferArgs) -> list[Type]:
        x, y = a.tensor_type("x"), a.tensor_type("y")
        out_dt = self._out_dtype(a, x, y)
        if x.shape is None or y.shape is None:
            return [TensorType(out_dt, None)]
        xs, ys = list(x.shape), list(y.shape)
        for name, shape in (("x", xs), ("y", ys)):
            if not shape:
                raise a.fail(f"matmul needs {name} of rank >= 1, got a scalar")
            if a.value(f"transpose_{name}") and len(shape) < 2:
                raise a.fail(f"transpose_{name} is set but {name} is 1-D")
        if a.value("transpose_x"):
            xs[-2], xs[-1] = xs[-1], xs[-2]
        if a.value("transpose_y"):
            ys[-2], ys[-1] = ys[-1], ys[-2]
        x_vec, y_vec = len(xs) == 1, len(ys) == 1
        xs = [1] + xs if x_vec else xs
        ys = ys + [1] if y_vec else ys
        _same_dim(a, xs[-1], ys[-2], "contracted dims of x and y")
        out = list(_broadcast_or_fail(a, tuple(xs[:-2]), tuple(ys[:-2]))) + [xs[-2], ys[-1]]
        if y_vec:
            out.pop(-1)
        if x_vec:
            out.pop(-2 if not y_vec else -1)
        return [TensorType(out_dt, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, y = a["x"], a["y"]
        if a.value("transpose_x"):
            x = np.swapaxes(x, -1, -2)
        if a.value("transpose_y"):
            y = np.swapaxes(y, -1, -2)
        work = _work_dtype(x, y)
        with np.errstate(all="ignore"):
            out = np.asarray(np.matmul(x.astype(work), y.astype(work)))
        return [out.astype(a.out_types[0].dtype.storage)]


def _einsum_pattern(equation: str) -> tuple[list[int], ...] | None:
    """Number each letter by first appearance over inputs then output ("nchw,nwhu->nchu" ->
    [0,1,2,3], [0,3,2,4], [0,1,2,4]); None if the equation is not of the form "a,b->c"."""
    if equation.count("->") != 1:
        return None
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    if len(terms) != 2:
        return None
    ids: dict[str, int] = {}
    return tuple([ids.setdefault(ch, len(ids)) for ch in term] for term in (*terms, out))


# The two contractions MIL's einsum supports, as letter-numbering patterns (see _einsum_pattern).
_EINSUM_RANK4 = ([0, 1, 2, 3], [0, 3, 2, 4], [0, 1, 2, 4])  # "nchw,nwhu->nchu"
_EINSUM_RANK3 = ([0, 1, 2], [2, 1, 3], [0, 1, 3])  # "chw,whr->chr"


@register
class Einsum(OpDef):
    """Einsum, restricted to the two equations MIL supports (up to renaming the letters).

    - rank 4: ``"nchw,nwhu->nchu"``: x [B, C, H, W1] times y [B, W1, H, W2] -> [B, C, H, W2]
    - rank 3: ``"chw,whr->chr"``: x [C, H, W1] times y [W1, H, W2] -> [C, H, W2]

    i.e. matrices on dims -3 and -1 with the other dims as batch; B and H broadcast when one side
    has size 1. Letters must match exactly as written (no spaces, no "..."). Any other equation is
    rejected: a general einsum has to be lowered to matmul/transpose/reduce first. Both inputs are
    fp16 or fp32 of the same dtype.
    """

    op_type = "einsum"

    def infer(self, a: InferArgs) -> list[Type]:
        types = a.types("values")
        if len(types) != 2 or not all(isinstance(t, TensorType) for t in types):
            raise a.fail(f"einsum takes a tuple of 2 tensors, got {len(types)} values")
        x, y = types
        if x.dtype != y.dtype or x.dtype.name not in ("fp16", "fp32"):
            raise a.fail(f"einsum inputs must both be fp16 or both fp32, got {x.dtype} and {y.dtype}")
        equation = a.value("equation")
        if equation is None:
            raise a.fail("einsum needs a compile-time equation")
        pattern = _einsum_pattern(str(np.asarray(equation)))
        if pattern not in (_EINSUM_RANK4, _EINSUM_RANK3):
            raise a.fail(f"unsupported einsum equation '{np.asarray(equation)}': MIL supports only "
                         "'nchw,nwhu->nchu' and 'chw,whr->chr' (up to renaming)")
        rank = len(pattern[0])
        for t in (x, y):
            if t.shape is not None and len(t.shape) != rank:
                raise a.fail(f"equation '{np.asarray(equation)}' needs rank-{rank} inputs, got {list(t.shape)}")
        if x.shape is None or y.shape is None:
            return [TensorType(x.dtype, None)]
        _same_dim(a, x.shape[-1], y.shape[-3], "contracted dims (x[-1] vs y[-3])")
        out = list(_broadcast_or_fail(a, x.shape[:-3] + (1, x.shape[-2], 1), y.shape[:-3] + (1, y.shape[-2], 1)))
        out[-3], out[-1] = x.shape[-3], y.shape[-1]
        return [TensorType(x.dtype, tuple(out))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, y = a["values"]
        # x[..., c, h, k] * y[..., k, h, u] summed over k, with the batch and h dims broadcast.
        xb = np.moveaxis(x.astype(np.float32), -2, -3)  # [..., h, c, k]
        yb = np.moveaxis(y.astype(np.float32), -2, -3)  # [..., h, k, u]
        with np.errstate(all="ignore"):
            out = np.moveaxis(np.matmul(xb, yb), -3, -2)  # [..., c, h, u]
        return [out.astype(x.dtype)]


@register
class ScaledDotProductAttention(OpDef):
    """``softmax(Q @ K^T / sqrt(E) + mask) @ V`` over the last dim, as torch's SDPA (no dropout, not causal).

    query [B, *?, L, E], key [B, *?, S, E], value [B, *?, S, EV] share rank (>= 3) and batch dims
    (not broadcast); ``attn_mask`` broadcasts to [B, *?, L, S]: a bool mask keeps the True
    positions (False adds -inf), a float mask is added to the scores. A row whose every position
    is masked out gives NaN (softmax of all -inf), as the MIL formula and coremltools' value
    inference do; recent torch versions return 0 there instead.
    """

    op_type = "scaled_dot_product_attention"

    def infer(self, a: InferArgs) -> list[Type]:
        q, k, v = (a.tensor_type(n) for n in ("query", "key", "value"))
        if any(t.shape is None for t in (q, k, v)):
            return [TensorType(q.dtype, None)]
        if not len(q.shape) == len(k.shape) == len(v.shape) or len(q.shape) < 3:
            raise a.fail(f"query, key, value must share a rank >= 3, got {list(q.shape)}, {list(k.shape)}, "
                         f"{list(v.shape)}")
        batch = []
        for dq, dk, dv in zip(q.shape[:-2], k.shape[:-2], v.shape[:-2]):
            batch.append(_same_dim(a, _same_dim(a, dq, dk, "batch dims of query vs key"), dv,
                                   "batch dims of key vs value"))
        _same_dim(a, q.shape[-1], k.shape[-1], "embedding dims of query vs key")
        seq = _same_dim(a, k.shape[-2], v.shape[-2], "sequence lengths of key vs value")
        if a.has("attn_mask"):
            self._check_mask(a, a.tensor_type("attn_mask"), tuple(batch) + (q.shape[-2], seq))
        return [TensorType(q.dtype, tuple(batch) + (q.shape[-2], v.shape[-1]))]

    def _check_mask(self, a: InferArgs, m: TensorType, scores: tuple) -> None:
        """The mask is [*?, S] (S = the key's sequence length) and broadcasts to the scores [B, *?, L, S]."""
        if m.shape is None:
            return
        if not m.shape or len(m.shape) > len(scores):
            raise a.fail(f"attn_mask must have rank 1..{len(scores)}, got shape {list(m.shape)}")
        _same_dim(a, m.shape[-1], scores[-1], "attn_mask's last dim vs key's sequence length")
        if not all(map(dims_compatible, _broadcast_or_fail(a, m.shape, scores), scores)):
            raise a.fail(f"attn_mask shape {list(m.shape)} does not broadcast to the scores {list(scores)}")

    def evaluate(self, a: EvalArgs) -> list[Any]:
        q, k, v = (a[n].astype(np.float32) for n in ("query", "key", "value"))
        scores = np.matmul(q, np.swapaxes(k, -1, -2)) / np.float32(np.sqrt(q.shape[-1]))
        mask = a.value("attn_mask")
        with np.errstate(all="ignore"):
            if mask is not None:
                scores = scores + (np.where(mask, 0.0, -np.inf).astype(np.float32) if mask.dtype == bool
                                   else mask.astype(np.float32))
            shifted = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
            weights = shifted / np.sum(shifted, axis=-1, keepdims=True)
            out = np.matmul(weights, v)
        return [out.astype(a["query"].dtype)]
