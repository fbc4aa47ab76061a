"""Einsum, Det, Dropout (inference), Shrink, in IR ops.

- Einsum: MIL's einsum takes two fixed equations only, so any equation is lowered: ``...``
  expanded, repeated letters of one operand reduced to their diagonal (a gather on the flattened
  pair), letters used by one operand only summed out, then operands contracted pairwise as
  transpose + reshape + matmul (batch letters as matmul batch dims) and transposed to the output
  order. Needs static shapes.
- Det: Laplace expansion along the first row, for matrices up to DET_MAX_SIZE (the IR has no
  determinant or LU op; ONNX's reference uses LU, so results agree to rounding).
- Dropout: inference is the identity with an all-true mask. Training mode with a non-zero ratio
  draws random numbers ONNX does not specify and is refused.
- Shrink: ``x + bias`` where ``x < -lambd``, ``x - bias`` where ``x > lambd``, else 0 (integers in
  fp32, truncated back to the integer type as ONNX's reference does).
"""

from __future__ import annotations

import math
from itertools import count

import numpy as np

from ...ir.core import Value
from ...ir.types import is_static_dim
from .context import FLOATS, NUMERIC, Ctx, Node
from .registry import onnx_op

#: Largest matrix Det expands (a Laplace expansion has n! terms).
DET_MAX_SIZE = 5


# -- Einsum ------------------------------------------------------------------------------------


def _parse_einsum(ctx: Ctx, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's letters and the output's, with ``...`` replaced by fresh letters (aligned
    to the right, as broadcasting is)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.format_error(f"equation '{equation}' names {len(terms)} operands, the node has {len(ranks)}")
    used = set(eq)
    fresh = (c for c in (chr(i) for i in count(0x100)) if c not in used)
    n_ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            n_ell = max(n_ell, r - (len(t) - 3))
    ell = "".join(next(fresh) for _ in range(n_ell))
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:] if k else "")
        if len(t) != r or not all(c.isalpha() or ord(c) >= 0x100 for c in t):
            raise ctx.format_error(f"equation term for an operand of rank {r} does not match: '{equation}'")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_terms)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return out_terms, out


def _static_shape(ctx: Ctx, v: Value) -> list[int]:
    shape = v.type.shape
    if shape is None or not all(is_static_dim(d) for d in shape):
        raise ctx.unsupported("Einsum needs operand shapes known at conversion time")
    return [int(d) for d in shape]


def _diagonals(ctx: Ctx, v: Value, letters: str) -> tuple[Value, str]:
    """Reduce each repeated letter to the diagonal of its axes."""
    b = ctx.b
    while len(set(letters)) < len(letters):
        c = next(ch for ch in letters if letters.count(ch) > 1)
        i, j = letters.index(c), letters.index(c, letters.index(c) + 1)
        shape = _static_shape(ctx, v)
        n = shape[i]
        rest = [k for k in range(len(letters)) if k not in (i, j)]
        v = b.transpose(x=v, perm=rest + [i, j])
        v = b.reshape(x=v, shape=[shape[k] for k in rest] + [n * n])
        v = b.gather(x=v, indices=(np.arange(n) * (n + 1)).astype(np.int32), axis=-1)
        letters = "".join(letters[k] for k in rest) + c
    return v, letters


def _sum_out(ctx: Ctx, v: Value, letters: str, keep: set[str]) -> tuple[Value, str]:
    axes = [i for i, c in enumerate(letters) if c not in keep]
    if not axes:
        return v, letters
    return ctx.b.reduce_sum(x=v, axes=axes, keep_dims=False), "".join(c for c in letters if c in keep)


def _contract(ctx: Ctx, a: Value, la: str, bv: Value, lb: str, keep: set[str]) -> tuple[Value, str]:
    """Contract two operands over their shared letters not in ``keep`` with one matmul."""
    b = ctx.b
    sa, sb = dict(zip(la, _static_shape(ctx, a))), dict(zip(lb, _static_shape(ctx, bv)))
    batch = [c for c in la if c in lb and c in keep]
    contract = [c for c in la if c in lb and c not in keep]
    a_only = [c for c in la if c not in lb]
    b_only = [c for c in lb if c not in la]
    if any(sa[c] != sb[c] for c in contract):
        raise ctx.unsupported("Einsum contracting a broadcast (size-1) dimension")
    a2 = b.transpose(x=a, perm=[la.index(c) for c in batch + a_only + contract])
    a2 = b.reshape(x=a2, shape=[sa[c] for c in batch] + [math.prod(sa[c] for c in a_only),
                                                         math.prod(sa[c] for c in contract)])
    b2 = b.transpose(x=bv, perm=[lb.index(c) for c in batch + contract + b_only])
    b2 = b.reshape(x=b2, shape=[sb[c] for c in batch] + [math.prod(sb[c] for c in contract),
                                                         math.prod(sb[c] for c in b_only)])
    out = b.matmul(x=a2, y=b2)
    dims = [max(sa[c], sb[c]) for c in batch] + [sa[c] for c in a_only] + [sb[c] for c in b_only]
    return b.reshape(x=out, shape=dims), "".join(batch + a_only + b_only)


@onnx_op("Einsum", versions=(12, 28))
def einsum(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    ops = [ctx.input(i, NUMERIC) for i in range(len(node.inputs))]
    dt = ops[0].type.dtype.name
    ops = [v if v.type.dtype.name == dt else b.cast(x=v, dtype=dt) for v in ops]
    terms, out = _parse_einsum(ctx, str(ctx.required_attr("equation")), [len(_static_shape(ctx, v)) for v in ops])
    if len(set(out)) != len(out) or any(c not in "".join(terms) for c in out):
        raise ctx.format_error(f"invalid output term in '{ctx.attr('equation')}'")
    items = []
    for k, (v, t) in enumerate(zip(ops, terms)):
        v, t = _diagonals(ctx, v, t)
        others = set(out).union(*(terms[j] for j in range(len(terms)) if j != k))
        items.append(_sum_out(ctx, v, t, others))
    acc, la = items[0]
    for k in range(1, len(items)):
        keep = set(out).union(*(terms[j] for j in range(k + 1, len(terms))))
        acc, la = _sum_out(ctx, acc, la, keep | set(items[k][1]))
        v, lb = _sum_out(ctx, *items[k], keep | set(la))
        acc, la = _contract(ctx, acc, la, v, lb, keep)
    acc, la = _sum_out(ctx, acc, la, set(out))
    if la != out:
        acc = b.transpose(x=acc, perm=[la.index(c) for c in out]) if out else acc
    return [acc if acc is not ops[0] else b.identity(x=acc)]


# -- Det ---------------------------------------------------------------------------------------


def _det(ctx: Ctx, x: Value, rows: list[int], cols: list[int]) -> Value:
    """det of the sub-matrix ``x[..., rows, cols]`` by expansion along its first row."""
    b = ctx.b

    def entry(r: int, c: int) -> Value:
        return b.gather(x=b.gather(x=x, indices=np.int32(r), axis=-2), indices=np.int32(c), axis=-1)

    if len(rows) == 1:
        return entry(rows[0], cols[0])
    total = None
    for j, c in enumerate(cols):
        term = b.mul(x=entry(rows[0], c), y=_det(ctx, x, rows[1:], cols[:j] + cols[j + 1:]))
        if total is None:
            total = term
        elif j % 2:
            total = b.sub(x=total, y=term)
        else:
            total = b.add(x=total, y=term)
    return total


@onnx_op("Det", versions=(11, 22))
def det(ctx: Ctx, node: Node) -> list[Value]:
    x = ctx.input(0, FLOATS)
    shape = x.type.shape
    if shape is None or len(shape) < 2 or not is_static_dim(shape[-1]) or shape[-1] != shape[-2]:
        raise ctx.unsupported("Det needs square matrices of a size known at conversion time")
    n = int(shape[-1])
    if n > DET_MAX_SIZE:
        raise ctx.unsupported(f"Det of {n}x{n} matrices (the expansion is done up to {DET_MAX_SIZE}x{DET_MAX_SIZE}; "
                              "the IR has no LU decomposition)")
    if n == 0:
        return [ctx.b.fill(shape=ctx.b.const(np.asarray(shape[:-2], np.int32)), value=x.type.dtype.storage.type(1))]
    return [_det(ctx, x, list(range(n)), list(range(n)))]


# -- Dropout, Shrink ---------------------------------------------------------------------------


@onnx_op("Dropout", versions=(7, 22))
def dropout(ctx: Ctx, node: Node) -> list[Value]:
    """Identity + all-true mask; training mode only with a ratio of 0 (else it is random)."""
    x = ctx.input(0)
    if node.version >= 12:
        training = ctx.const_input(2)
        ratio = ctx.const_input(1)
        ratio_zero = ratio is not None and float(np.asarray(ratio).reshape(-1)[0]) == 0.0
        if ctx.has(2) and not ratio_zero and (training is None or bool(np.asarray(training).reshape(-1)[0])):
            raise ctx.unsupported("Dropout in training mode (or a training_mode known only at run time) with a "
                                  "non-zero ratio draws random numbers")
    ref = ctx.widen(x, ("fp32", "fp16", "int32", "bool"))
    return [x, ctx.b.fill_like(ref_tensor=ref, value=True)]


@onnx_op("Shrink", versions=(9, 9))
def shrink(ctx: Ctx, node: Node) -> list[Value]:
    b = ctx.b
    x = ctx.input(0, FLOATS)
    lambd, bias = float(ctx.attr("lambd", 0.5)), float(ctx.attr("bias", 0.0))
    below = b.select(cond=b.less(x=x, y=ctx.const(-lambd, x)), a=b.add(x=x, y=ctx.const(bias, x)),
                     b=ctx.const(0.0, x))
    return [b.select(cond=b.greater(x=x, y=ctx.const(lambd, x)), a=b.sub(x=x, y=ctx.const(bias, x)), b=below)]
