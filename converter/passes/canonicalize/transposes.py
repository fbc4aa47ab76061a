"""Transposes: the identity permutation, pairs composed into one, and transposes sunk below
elementwise ops so that they meet another transpose and merge or cancel.

All exact: an elementwise op computes each element from the elements at the same index, so
permuting its operands permutes its result (``op(T(x), T(y)) = T(op(x, y))`` for equal ranks;
broadcasting is per dim, and permuting both operands' dims permutes the broadcast).

How sinking decides (it never adds an op):
- ``op(transpose(x, p), transpose(y, p))`` -> ``transpose(op(x, y), p)`` always: one op fewer.
- ``unary(transpose(x, p))`` and ``op(transpose(x, p), constant)`` -> the transpose after the op
  (the constant permuted at compile time) are count-neutral, so they fire only when
  `sink_pays`: following the result's single use through ops that could sink the transpose further
  (at most `SINK_LOOKAHEAD` of them, so each match costs O(1)) reaches a transpose (the pair then
  merges or cancels) or a binary elementwise op whose other operand is a transpose with the same
  permutation (the binary rule then removes one). Otherwise the transpose stays where it is.
- Sinking only moves transposes towards their uses, and only through elementwise ops: a transpose
  read by a matmul (directly or through elementwise ops that lead nowhere else) is never moved, so
  it stays available to the fusion folding it into matmul's ``transpose_x``/``transpose_y`` flags;
  nor through ops with a layout (conv, batch_norm, layer_norm, reductions), which other fusions
  match. A transpose read by several ops is never sunk (that would copy it).
"""

from __future__ import annotations

import numpy as np

from ...ir.builder import Builder
from ...ir.core import Block, Op, Value
from ...ir.opdef import first_opset, get_opdef, registered_op_types
from ...ir.ops.elementwise_binary import _Binary
from ...ir.shapes import ShapeError, normalize_axes
from ..rewrite import Match, Refuse, const, op, rule, var
from ._common import tensor_type

#: ops a sink looks ahead through before giving up
SINK_LOOKAHEAD = 8
#: a constant read elsewhere is permuted into a copy only up to this many elements
SHARED_CONST_COPY = 1


def _elementwise_types() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(unary, binary) elementwise op types of the registry (binary: broadcasting ``x``, ``y``)."""
    unary, binary = [], []
    for t in registered_op_types():
        first = first_opset(t)
        if first is None:
            continue
        d = get_opdef(t, first)
        if "elementwise" in d.traits:
            (binary if isinstance(d, _Binary) else unary).append(t)
    return tuple(unary), tuple(binary)


UNARY, BINARY = _elementwise_types()


def perm_of(op_: Op, rank: int | None = None) -> list[int]:
    """``op_``'s permutation, normalized (negative entries resolved)."""
    perm = [int(p) for p in np.asarray(op_.inputs["perm"].const_val).reshape(-1)]
    try:
        return normalize_axes(perm, len(perm) if rank is None else rank, what="perm")
    except ShapeError as e:
        raise Refuse(str(e)) from None


def _is_identity(m: Match) -> str | None:
    perm = perm_of(m.root)
    return None if perm == list(range(len(perm))) else f"perm {perm} is not the identity"


@rule(op.transpose(x=var("x"), perm=const("perm")), check=_is_identity)
def transpose_identity(b: Builder, m: Match):
    """A transpose by the identity permutation.

        %y = transpose(x=%x, perm=[0, 1, 2])    ->    %x"""
    return m["x"]


@rule(op.transpose(x=op.transpose("inner", x=var("x"), perm=const("p1")).multi_use(), perm=const("p2")))
def transpose_pair(b: Builder, m: Match):
    """Two transposes in a row are one: ``transpose(transpose(x, p1), p2) = transpose(x, q)`` with
    ``q[i] = p1[p2[i]]``; none when q is the identity. The inner one stays while something else
    reads it (then the rewrite saves an op only when q is the identity, and costs none otherwise).

        %t = transpose(x=%x, perm=[0, 2, 1, 3])
        %y = transpose(x=%t, perm=[0, 1, 3, 2])    ->    %y = transpose(x=%x, perm=[0, 2, 3, 1])
        %y = transpose(x=%t, perm=[0, 2, 1, 3])    ->    %x"""
    p1, p2 = perm_of(m.op("inner")), perm_of(m.root)
    q = [p1[i] for i in p2]
    if q == list(range(len(q))):
        return m["x"]
    return b.transpose(x=m["x"], perm=np.asarray(q, np.int32))


# -- sinking ----------------------------------------------------------------------------------


def _scalar_params(u: Op) -> bool:
    """Every input of ``u`` but ``x`` is a scalar (so permuting x does not change what it meets)."""
    for key, arg in u.inputs.items():
        if key == "x":
            continue
        if isinstance(arg, tuple):
            return False
        t = tensor_type(arg)
        if t is None or t.shape is None or len(t.shape) != 0:
            return False
    return True


def _const_refusal(c: Value, rank: int) -> str | None:
    """Why constant ``c`` cannot be permuted to meet an operand of ``rank`` dims."""
    t = tensor_type(c)
    if t is None or t.shape is None:
        return f"'{c.name}' has an unknown shape"
    if len(t.shape) > rank:
        return f"constant '{c.name}' has rank {len(t.shape)}, above the transposed operand's {rank}"
    size = int(np.asarray(c.const_val).size)
    if len(t.shape) and size > SHARED_CONST_COPY and len(c.uses) > 1:
        return f"constant '{c.name}' ({size} elements) is read elsewhere: permuting it would store a copy"
    return None


def _other_operand(user: Op, key: str) -> Value | None:
    other = user.inputs.get("y" if key == "x" else "x")
    return other if isinstance(other, Value) else None


def sink_pays(v: Value, perm: list[int], block: Block) -> str | None:
    """None when sinking a transpose by ``perm`` to just after ``v``'s producer leads, through ops
    that sink it further, to a transpose or to a transpose operand with the same perm; else why
    not (see the module docstring)."""
    for _ in range(SINK_LOOKAHEAD):
        if len(v.uses) != 1:
            return f"'{v.name}' has {len(v.uses)} uses"
        use = next(iter(v.uses))
        user = use.user
        if not isinstance(user, Op) or user.block is not block:
            return f"'{v.name}' is read outside its block"
        if user.type == "transpose":
            return None
        if user.type in BINARY and use.key in ("x", "y"):
            other = _other_operand(user, use.key)
            if other is None:
                return f"{user.type} '{user.name}' has one operand"
            if other is v:
                return None
            p = other.producer
            if (p is not None and p.type == "transpose" and p.block is block and len(other.uses) == 1
                    and p.inputs["perm"].is_const and perm_of(p) == perm):
                return None
            if not (other.is_const and _const_refusal(other, len(perm)) is None):
                return f"{user.type} '{user.name}' meets '{other.name}', neither a transpose by {perm} nor a constant"
        elif not (user.type in UNARY and use.key == "x" and _scalar_params(user)):
            return f"'{v.name}' is read by {user.type} '{user.name}', which a transpose does not sink through"
        v = user.outputs[0]
    return f"no transpose to cancel or merge with within {SINK_LOOKAHEAD} ops"


def reads_a_transpose(o: Op) -> bool:
    """A quick filter on the root of the sinking rules (rooted at every elementwise op): some
    operand is computed by a transpose. The full pattern then says why it matches or not."""
    for key in ("x", "y"):
        v = o.inputs.get(key)
        if isinstance(v, Value) and v.producer is not None and v.producer.type == "transpose":
            return True
    return False


def _same_perms(m: Match) -> str | None:
    px, py = perm_of(m.op("tx")), perm_of(m.op("ty"))
    return None if px == py else f"the operands are transposed by {px} and {py}"


@rule(op.any_of(*BINARY)(x=op.transpose("tx", x=var("a"), perm=const("perm")),
                         y=op.transpose("ty", x=var("b"), perm=const())).where(reads_a_transpose),
      check=_same_perms)
def sink_transpose_binary(b: Builder, m: Match):
    """Both operands transposed alike: transpose the result instead (one op fewer).

        %ta = transpose(x=%a, perm=[0, 2, 1])
        %tb = transpose(x=%b, perm=[0, 2, 1])
        %y = mul(x=%ta, y=%tb)                  ->    %r = mul(x=%a, y=%b)
                                                      %y = transpose(x=%r, perm=[0, 2, 1])"""
    r = getattr(b, m.root.type)(x=m["a"], y=m["b"])
    return b.transpose(x=r, perm=m["perm"])


def _unary_sink_pays(m: Match) -> str | None:
    if not _scalar_params(m.root):
        return f"{m.root.type} '{m.root.name}' has a parameter that is not a scalar"
    return sink_pays(m.root.outputs[0], perm_of(m.op("t")), m.root.block)


@rule(op.any_of(*UNARY)(x=op.transpose("t", x=var("a"), perm=const("perm"))).where(reads_a_transpose),
      check=_unary_sink_pays)
def sink_transpose_unary(b: Builder, m: Match):
    """A transpose moved below an elementwise unary op, when it then meets a transpose (see
    `sink_pays`): count-neutral here, one or two ops fewer once the pair merges.

        %t = transpose(x=%x, perm=[1, 0])
        %r = relu(x=%t)                         ->    %r0 = relu(x=%x)
        %y = transpose(x=%r, perm=[1, 0])             %r = transpose(x=%r0, perm=[1, 0])   (then: %y is %r0)"""
    inputs = dict(m.root.inputs)
    inputs["x"] = m["a"]
    r = b.add_op(m.root.type, inputs).outputs[0]
    return b.transpose(x=r, perm=m["perm"])


def _const_sink_pays(m: Match) -> str | None:
    perm = perm_of(m.op("t"))
    why = _const_refusal(m["c"], len(perm))
    return why or sink_pays(m.root.outputs[0], perm, m.root.block)


def _permuted_const(b: Builder, c: Value, perm: list[int]) -> Value:
    """``c`` as the constant that, broadcast against x and transposed by ``perm``, is ``c``
    broadcast against ``transpose(x, perm)``."""
    arr = np.asarray(c.const_val)
    if arr.ndim == 0:
        return c
    full = arr.reshape((1,) * (len(perm) - arr.ndim) + arr.shape)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return b.const(np.ascontiguousarray(np.transpose(full, inverse)), dt=tensor_type(c).dtype)


def _sink_through_const(b: Builder, m: Match, transposed_key: str):
    const_key = "y" if transposed_key == "x" else "x"
    perm = perm_of(m.op("t"))
    operands = {transposed_key: m["a"], const_key: _permuted_const(b, m["c"], perm)}
    r = getattr(b, m.root.type)(x=operands["x"], y=operands["y"])
    return b.transpose(x=r, perm=m["perm"])


@rule(op.any_of(*BINARY)(x=op.transpose("t", x=var("a"), perm=const("perm")), y=const("c")).where(
    reads_a_transpose), check=_const_sink_pays)
def sink_transpose_const_y(b: Builder, m: Match):
    """A transpose moved below a binary op with a constant, the constant permuted to match, when
    it then meets a transpose (see `sink_pays`).

        %t = transpose(x=%x: [2, 3], perm=[1, 0])
        %s = sub(x=%t, y=%c: [3, 1])                  ->    %s0 = sub(x=%x, y=%c2: [1, 3])
        %y = transpose(x=%s, perm=[1, 0])                   (the pair then cancels: %y is %s0)"""
    return _sink_through_const(b, m, "x")


@rule(op.any_of(*BINARY)(x=const("c"), y=op.transpose("t", x=var("a"), perm=const("perm"))).where(
    reads_a_transpose), check=_const_sink_pays)
def sink_transpose_const_x(b: Builder, m: Match):
    """As `sink_transpose_const_y`, with the constant first (``real_div(c, transpose(x))``)."""
    return _sink_through_const(b, m, "y")


RULES = [transpose_identity, transpose_pair, sink_transpose_binary, sink_transpose_unary, sink_transpose_const_y,
         sink_transpose_const_x]
