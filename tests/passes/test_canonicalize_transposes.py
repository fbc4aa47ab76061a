"""Transposes (converter/passes/canonicalize/transposes.py): identity permutations, pairs, and
transposes sunk below elementwise ops only where they then merge with another transpose. Each
rewrite is compared on random inputs with the program before it (bit-identical), whose transposes
numpy computes; the composition rule is also checked against numpy directly."""

from __future__ import annotations

import itertools

import numpy as np

from converter.passes.canonicalize import (
    Canonicalize,
    sink_transpose_binary,
    sink_transpose_const_x,
    sink_transpose_const_y,
    sink_transpose_unary,
    transpose_identity,
    transpose_pair,
)

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"


def _prog(inputs: str, body: str, outputs: str) -> str:
    return f"{HEAD}({inputs}) {{\n{body}\n}} -> ({outputs})"


def _perm(name: str, *perm: int) -> str:
    return f"%{name}: tensor<int32, [{len(perm)}]> = const() [val=dense<int32, [{len(perm)}]>({', '.join(map(str, perm))})]"


X = "%x: tensor<fp32, [2, 3, 4]>"


def test_transpose_identity_fires_with_negative_entries_and_refuses_a_real_permutation() -> None:
    assert_rewrites(_prog(X, f"""{_perm("p", 0, -2, -1)}
      %t: tensor<fp32, [2, 3, 4]> = transpose(x=%x, perm=%p)
      %y: tensor<fp32, [2, 3, 4]> = relu(x=%t)""", "%y"), transpose_identity, _prog(X, """
      %y: tensor<fp32, [2, 3, 4]> = relu(x=%x)""", "%y"))
    assert_refuses(_prog(X, f"""{_perm("p", 0, 2, 1)}
      %t: tensor<fp32, [2, 4, 3]> = transpose(x=%x, perm=%p)
      %y: tensor<fp32, [2, 4, 3]> = relu(x=%t)""", "%y"), transpose_identity, "perm [0, 2, 1] is not the identity")


def test_transpose_pair_composes_as_numpy_does() -> None:
    x = np.arange(24).reshape(2, 3, 4)
    for p1, p2 in itertools.product(itertools.permutations(range(3)), repeat=2):
        q = [p1[i] for i in p2]  # the rule's formula
        np.testing.assert_array_equal(np.transpose(np.transpose(x, p1), p2), np.transpose(x, q))


def test_transpose_pair_merges_into_one_and_keeps_an_inner_transpose_read_elsewhere() -> None:
    # torch's k.transpose(1, 2) then .transpose(-2, -1) (transformer attention)
    assert_rewrites(_prog("%x: tensor<fp32, [2, 3, 4, 5]>", f"""{_perm("p1", 0, 2, 1, 3)}
      {_perm("p2", 0, 1, -1, -2)}
      %t: tensor<fp32, [2, 4, 3, 5]> = transpose(x=%x, perm=%p1)
      %y: tensor<fp32, [2, 4, 5, 3]> = transpose(x=%t, perm=%p2)
      %u: tensor<fp32, [2, 4, 3, 5]> = exp(x=%t)""", "%y, %u"), transpose_pair,
        _prog("%x: tensor<fp32, [2, 3, 4, 5]>", f"""{_perm("p1", 0, 2, 1, 3)}
      %t: tensor<fp32, [2, 4, 3, 5]> = transpose(x=%x, perm=%p1)
      {_perm("q", 0, 2, 3, 1)}
      %y: tensor<fp32, [2, 4, 5, 3]> = transpose(x=%x, perm=%q)
      %u: tensor<fp32, [2, 4, 3, 5]> = exp(x=%t)""", "%y, %u"))


def test_transpose_pair_cancels_and_refuses_to_rename_an_output_to_an_input() -> None:
    pair = f"""{_perm("p1", 1, 2, 0)}
      {_perm("p2", 2, 0, 1)}
      %t: tensor<fp32, [3, 4, 2]> = transpose(x=%x, perm=%p1)
      %y: tensor<fp32, [2, 3, 4]> = transpose(x=%t, perm=%p2)"""
    assert_rewrites(_prog(X, pair + "\n%z: tensor<fp32, [2, 3, 4]> = relu(x=%y)", "%z"), transpose_pair,
                    _prog(X, "%z: tensor<fp32, [2, 3, 4]> = relu(x=%x)", "%z"))
    assert_refuses(_prog(X, pair, "%y"), transpose_pair, "'y' is a function output and 'x' is an input")


def test_sink_transpose_binary_fires_with_broadcasting_and_refuses_different_perms() -> None:
    ab = "%a: tensor<fp32, [2, 3, 1]>, %b: tensor<fp32, [1, 3, 4]>"
    assert_rewrites(_prog(ab, f"""{_perm("p", 2, 0, 1)}
      %ta: tensor<fp32, [1, 2, 3]> = transpose(x=%a, perm=%p)
      %tb: tensor<fp32, [4, 1, 3]> = transpose(x=%b, perm=%p)
      %y: tensor<fp32, [4, 2, 3]> = sub(x=%ta, y=%tb)""", "%y"), sink_transpose_binary, _prog(ab, f"""
      {_perm("p", 2, 0, 1)}
      %s: tensor<fp32, [2, 3, 4]> = sub(x=%a, y=%b)
      %y: tensor<fp32, [4, 2, 3]> = transpose(x=%s, perm=%p)""", "%y"))
    xy = "%a: tensor<fp32, [3, 3]>, %b: tensor<fp32, [3, 3]>"
    assert_refuses(_prog(xy, f"""{_perm("p", 1, 0)}
      {_perm("q", 0, 1)}
      %ta: tensor<fp32, [3, 3]> = transpose(x=%a, perm=%p)
      %tb: tensor<fp32, [3, 3]> = transpose(x=%b, perm=%q)
      %y: tensor<fp32, [3, 3]> = mul(x=%ta, y=%tb)""", "%y"), sink_transpose_binary,
                   "the operands are transposed by [1, 0] and [0, 1]")


def test_sink_transpose_binary_refuses_a_transpose_read_elsewhere() -> None:
    ab = "%a: tensor<fp32, [2, 3]>, %b: tensor<fp32, [2, 3]>"
    assert_refuses(_prog(ab, f"""{_perm("p", 1, 0)}
      %ta: tensor<fp32, [3, 2]> = transpose(x=%a, perm=%p)
      %tb: tensor<fp32, [3, 2]> = transpose(x=%b, perm=%p)
      %y: tensor<fp32, [3, 2]> = add(x=%ta, y=%tb)""", "%y, %ta"), sink_transpose_binary, "1 outside the pattern")


LO_HI = """%lo: tensor<fp32, []> = const() [val=dense<fp32, []>(0.25)]
      %hi: tensor<fp32, []> = const() [val=dense<fp32, []>(0.75)]"""


def test_sink_transpose_unary_moves_a_transpose_through_a_chain_to_cancel_its_pair() -> None:
    assert_rewrites(_prog(X, f"""{_perm("p", 2, 0, 1)}
      {_perm("q", 1, 2, 0)}
      {LO_HI}
      %t: tensor<fp32, [4, 2, 3]> = transpose(x=%x, perm=%p)
      %r: tensor<fp32, [4, 2, 3]> = sigmoid(x=%t)
      %c: tensor<fp32, [4, 2, 3]> = clip(x=%r, alpha=%lo, beta=%hi)
      %y: tensor<fp32, [2, 3, 4]> = transpose(x=%c, perm=%q)""", "%y"), [sink_transpose_unary, transpose_pair],
        _prog(X, f"""{LO_HI}
      %r: tensor<fp32, [2, 3, 4]> = sigmoid(x=%x)
      %y: tensor<fp32, [2, 3, 4]> = clip(x=%r, alpha=%lo, beta=%hi)""", "%y"))


def test_sink_transpose_unary_refuses_when_no_transpose_follows_so_matmul_keeps_its_operand() -> None:
    # relu(transpose(x)) read by matmul: moving the transpose below relu would gain nothing, and it
    # must stay where the fusion into matmul's transpose flags finds it (after relu, for that fusion)
    assert_refuses(_prog("%x: tensor<fp32, [4, 3]>, %w: tensor<fp32, [4, 5]>", f"""{_perm("p", 1, 0)}
      %t: tensor<fp32, [3, 4]> = transpose(x=%x, perm=%p)
      %r: tensor<fp32, [3, 4]> = relu(x=%t)
      %y: tensor<fp32, [3, 5]> = matmul(x=%r, y=%w)""", "%y"), sink_transpose_unary,
                   "'r' is read by matmul 'y', which a transpose does not sink through")


def test_sink_transpose_unary_refuses_a_binary_partner_with_another_perm() -> None:
    assert_refuses(_prog("%a: tensor<fp32, [3, 3, 2]>, %b: tensor<fp32, [3, 3, 2]>", f"""{_perm("p", 1, 0, 2)}
      {_perm("q", 0, 1, 2)}
      %ta: tensor<fp32, [3, 3, 2]> = transpose(x=%a, perm=%p)
      %e: tensor<fp32, [3, 3, 2]> = exp(x=%ta)
      %tb: tensor<fp32, [3, 3, 2]> = transpose(x=%b, perm=%q)
      %y: tensor<fp32, [3, 3, 2]> = add(x=%e, y=%tb)""", "%y"), sink_transpose_unary,
                   "add 'y' meets 'tb', neither a transpose by [1, 0, 2] nor a constant")


def test_the_pass_sinks_through_a_unary_op_into_a_binary_one() -> None:
    # exp(transpose(a)) + transpose(b) -> transpose(exp(a) + b): one transpose fewer
    ab = "%a: tensor<fp32, [2, 3]>, %b: tensor<fp32, [2, 3]>"
    assert_rewrites(_prog(ab, f"""{_perm("p", 1, 0)}
      %ta: tensor<fp32, [3, 2]> = transpose(x=%a, perm=%p)
      %e: tensor<fp32, [3, 2]> = exp(x=%ta)
      %tb: tensor<fp32, [3, 2]> = transpose(x=%b, perm=%p)
      %y: tensor<fp32, [3, 2]> = maximum(x=%tb, y=%e)""", "%y"), Canonicalize(), _prog(ab, f"""
      {_perm("p", 1, 0)}
      %e: tensor<fp32, [2, 3]> = exp(x=%a)
      %m: tensor<fp32, [2, 3]> = maximum(x=%b, y=%e)
      %y: tensor<fp32, [3, 2]> = transpose(x=%m, perm=%p)""", "%y"))


def test_sink_transpose_const_permutes_a_broadcast_constant_and_the_pair_cancels() -> None:
    # (transpose(x) - c) transposed back: c [4, 1] broadcasts over transpose(x) [2, 4, 3]; below the
    # transpose it is [1, 3, 4]... permuted to meet x [2, 3, 4]: c'[0, j, i] = c[i, 0]
    assert_rewrites(_prog(X, f"""{_perm("p", 0, 2, 1)}
      %c: tensor<fp32, [4, 1]> = const() [val=dense<fp32, [4, 1]>(0.5, -1.25, 2.0, 3.75)]
      %t: tensor<fp32, [2, 4, 3]> = transpose(x=%x, perm=%p)
      %s: tensor<fp32, [2, 4, 3]> = sub(x=%t, y=%c)
      %y: tensor<fp32, [2, 3, 4]> = transpose(x=%s, perm=%p)""", "%y"),
        [sink_transpose_const_y, transpose_pair], _prog(X, """
      %c: tensor<fp32, [1, 1, 4]> = const() [val=dense<fp32, [1, 1, 4]>(0.5, -1.25, 2.0, 3.75)]
      %y: tensor<fp32, [2, 3, 4]> = sub(x=%x, y=%c)""", "%y"))


def test_sink_transpose_const_x_keeps_the_operand_order_of_a_division() -> None:
    assert_rewrites(_prog("%x: tensor<fp32, [2, 3]>", f"""{_perm("p", 1, 0)}
      %c: tensor<fp32, [3, 2]> = const() [val=dense<fp32, [3, 2]>(1.5, 2.0, -3.0, 4.5, 0.75, 6.0)]
      %t: tensor<fp32, [3, 2]> = transpose(x=%x, perm=%p)
      %d: tensor<fp32, [3, 2]> = real_div(x=%c, y=%t)
      %y: tensor<fp32, [2, 3]> = transpose(x=%d, perm=%p)""", "%y"), [sink_transpose_const_x, transpose_pair],
        _prog("%x: tensor<fp32, [2, 3]>", """
      %c: tensor<fp32, [2, 3]> = const() [val=dense<fp32, [2, 3]>(1.5, -3.0, 0.75, 2.0, 4.5, 6.0)]
      %y: tensor<fp32, [2, 3]> = real_div(x=%c, y=%x)""", "%y"))


def test_sink_transpose_const_refuses_to_copy_a_shared_constant() -> None:
    assert_refuses(_prog("%x: tensor<fp32, [2, 3]>", f"""{_perm("p", 1, 0)}
      %c: tensor<fp32, [3, 2]> = const() [val=dense<fp32, [3, 2]>(1.5, 2.0, -3.0, 4.5, 0.75, 6.0)]
      %t: tensor<fp32, [3, 2]> = transpose(x=%x, perm=%p)
      %d: tensor<fp32, [3, 2]> = mul(x=%t, y=%c)
      %y: tensor<fp32, [2, 3]> = transpose(x=%d, perm=%p)
      %z: tensor<fp32, [3, 2]> = exp(x=%c)""", "%y, %z"), sink_transpose_const_y,
                   "constant 'c' (6 elements) is read elsewhere")


def test_sink_transpose_const_x_refuses_a_shared_constant_and_a_use_it_cannot_sink_through() -> None:
    # c / transpose(x) with c also read by exp: permuting c would store a second 6-element copy
    assert_refuses(_prog("%x: tensor<fp32, [2, 3]>", f"""{_perm("p", 1, 0)}
      %c: tensor<fp32, [3, 2]> = const() [val=dense<fp32, [3, 2]>(1.5, 2.0, -3.0, 4.5, 0.75, 6.0)]
      %t: tensor<fp32, [3, 2]> = transpose(x=%x, perm=%p)
      %d: tensor<fp32, [3, 2]> = real_div(x=%c, y=%t)
      %y: tensor<fp32, [2, 3]> = transpose(x=%d, perm=%p)
      %z: tensor<fp32, [3, 2]> = exp(x=%c)""", "%y, %z"), [sink_transpose_const_x, transpose_pair],
                   "constant 'c' (6 elements) is read elsewhere")
    # c - transpose(x) read by a matmul: no transpose to meet, so the transpose stays for matmul's flags
    assert_refuses(_prog("%x: tensor<fp32, [2, 3]>, %w: tensor<fp32, [2, 4]>", f"""{_perm("p", 1, 0)}
      %c: tensor<fp32, [3, 1]> = const() [val=dense<fp32, [3, 1]>(0.5, -1.25, 2.0)]
      %t: tensor<fp32, [3, 2]> = transpose(x=%x, perm=%p)
      %d: tensor<fp32, [3, 2]> = sub(x=%c, y=%t)
      %y: tensor<fp32, [3, 4]> = matmul(x=%d, y=%w)""", "%y"), [sink_transpose_const_x, transpose_pair],
                   "'d' is read by matmul 'y', which a transpose does not sink through")
