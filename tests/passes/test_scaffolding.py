"""remove_scaffolding (converter/passes/scaffolding): each rule fires where it should (the IR after
written out by hand) and refuses its near misses with the reason; the table of ops that commute
with unit axes is complete for the elementwise ops.

Every rewrite here moves no arithmetic: the same op computes the same elements at a lower rank, and
reshape-like ops only relabel the shape. The helper runs both programs on random inputs and
requires bit-identical outputs (tests/passes/helpers.py), so a wrong axis argument (softmax over
the wrong axis, a transpose permuted wrongly, a constant broadcast along the wrong dim) fails on
values, not only on the text.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import converter
from converter.check import random_feeds
from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.opdef import get_opdef, registered_op_types
from converter.ir.symexpr import Symbol
from converter.ir.types import tensor
from converter.passes.scaffolding import RemoveScaffolding, reshape_like_chain, sink_unit_axes
from converter.passes.scaffolding.table import BINARY, TABLE, UNARY

from .helpers import assert_refuses, assert_rewrites
from .patterns.scaffolding import SPRINKLES as SCAFFOLDING

HEAD = "program\nfunc main<iOS17>"
AX0 = "%ax: tensor<int32, [1]> = const() [val=dense<int32, [1]>(0)]"


# -- sink_unit_axes -----------------------------------------------------------------------------


def test_sink_moves_an_elementwise_op_below_the_insertion() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 3)]
      %e: tensor<fp32, [1, 2, 3, 1]> = expand_dims(x=%x, axes=%ax)
      %r: tensor<fp32, [1, 2, 3, 1]> = relu(x=%e)
      %y: tensor<fp32, [2, 3]> = squeeze(x=%r, axes=%ax)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 3)]
      %r: tensor<fp32, [2, 3]> = relu(x=%x)
      %ax2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 3)]
      %e: tensor<fp32, [1, 2, 3, 1]> = expand_dims(x=%r, axes=%ax2)
      %y: tensor<fp32, [2, 3]> = squeeze(x=%e, axes=%ax)
    }} -> (%y)""")


def test_the_pass_cancels_the_sunk_insertion_against_the_squeeze() -> None:
    # the NeuralNetwork frontend's expand_dims(conv, [0]) -> relu -> squeeze([0]), in small
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 3)]
      %e: tensor<fp32, [1, 2, 3, 1]> = expand_dims(x=%x, axes=%ax)
      %r: tensor<fp32, [1, 2, 3, 1]> = relu(x=%e)
      %y: tensor<fp32, [2, 3]> = squeeze(x=%r, axes=%ax)
    }} -> (%y)""", RemoveScaffolding(), f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %y: tensor<fp32, [2, 3]> = relu(x=%x)
    }} -> (%y)""")


def test_sink_lowers_constants_that_reach_the_unit_axes_and_keeps_the_others() -> None:
    # c [1, 1, 3] pairs its axis 0 with the inserted axis 0: squeezed to [1, 3]; d [3] does not
    # reach it and is kept; sub keeps its operand order
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %c: tensor<fp32, [1, 1, 3]> = const() [val=dense<fp32, [1, 1, 3]>(0.5, -1.25, 2.0)]
      %s: tensor<fp32, [1, 2, 3]> = sub(x=%c, y=%e)
      %d: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(3.0, 0.75, -2.5)]
      %y: tensor<fp32, [1, 2, 3]> = mul(x=%s, y=%d)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %c: tensor<fp32, [1, 3]> = const() [val=dense<fp32, [1, 3]>(0.5, -1.25, 2.0)]
      %s: tensor<fp32, [2, 3]> = sub(x=%c, y=%x)
      %d: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(3.0, 0.75, -2.5)]
      %m: tensor<fp32, [2, 3]> = mul(x=%s, y=%d)
      {AX0}
      %y: tensor<fp32, [1, 2, 3]> = expand_dims(x=%m, axes=%ax)
    }} -> (%y)""")


def test_sink_refuses_a_constant_that_broadcasts_along_a_unit_axis() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %c: tensor<fp32, [2, 1, 1]> = const() [val=dense<fp32, [2, 1, 1]>(0.5, -1.25)]
      %y: tensor<fp32, [2, 2, 3]> = add(x=%e, y=%c)
    }} -> (%y)""", sink_unit_axes, "a constant of shape [2, 1, 1] is not 1 on the unit axes [0]")


MVN = f"""{HEAD}(%x: tensor<fp32, [1, 3, 4]>) {{
  %up: tensor<int32, [4]> = const() [val=dense<int32, [4]>(1, 3, 1, 4)]
  %r: tensor<fp32, [1, 3, 1, 4]> = reshape(x=%x, shape=%up)
  %axes: tensor<int32, [2]> = const() [val=dense<int32, [2]>(-2, -1)]
  %keep: tensor<bool, []> = const() [val=dense<bool, []>(true)]
  %mean: tensor<fp32, [1, 3, 1, 1]> = reduce_mean(x=%r, axes=%axes, keep_dims=%keep)
  %c: tensor<fp32, [1, 3, 1, 4]> = sub(x=%r, y=%mean)
  %sq: tensor<fp32, [1, 3, 1, 4]> = mul(x=%c, y=%c)
  %var: tensor<fp32, [1, 3, 1, 1]> = reduce_mean(x=%sq, axes=%axes, keep_dims=%keep)
  %std: tensor<fp32, [1, 3, 1, 1]> = sqrt(x=%var)
  %eps: tensor<fp32, []> = const() [val=dense<fp32, []>(0.001)]
  %den: tensor<fp32, [1, 3, 1, 1]> = add(x=%std, y=%eps)
  %n: tensor<fp32, [1, 3, 1, 4]> = real_div(x=%c, y=%den)
  %down: tensor<int32, [3]> = const() [val=dense<int32, [3]>(1, 3, 4)]
  %y: tensor<fp32, [1, 3, 4]> = reshape(x=%n, shape=%down)
}} -> (%y)"""


def test_the_pass_lowers_the_frontends_mvn_between_its_reshapes() -> None:
    # transformer_encoder_layer's layer norms as the NN model has them: reshape [1,7,16] ->
    # [1,7,1,16], mvn, reshape back. The region is a DAG (r is read by reduce_mean and sub):
    # reduce_mean sinks first because it foresees that sub will sink after it.
    assert_rewrites(MVN, RemoveScaffolding(), f"""{HEAD}(%x: tensor<fp32, [1, 3, 4]>) {{
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(true)]
      %a1: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %mean: tensor<fp32, [1, 3, 1]> = reduce_mean(x=%x, axes=%a1, keep_dims=%keep)
      %c: tensor<fp32, [1, 3, 4]> = sub(x=%x, y=%mean)
      %sq: tensor<fp32, [1, 3, 4]> = mul(x=%c, y=%c)
      %a2: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %var: tensor<fp32, [1, 3, 1]> = reduce_mean(x=%sq, axes=%a2, keep_dims=%keep)
      %std: tensor<fp32, [1, 3, 1]> = sqrt(x=%var)
      %eps: tensor<fp32, []> = const() [val=dense<fp32, []>(0.001)]
      %den: tensor<fp32, [1, 3, 1]> = add(x=%std, y=%eps)
      %y: tensor<fp32, [1, 3, 4]> = real_div(x=%c, y=%den)
    }} -> (%y)""")


def test_sink_refuses_when_another_reader_keeps_the_insertion() -> None:
    # sub also reads r, but its other input w is not lifted: r would stay, and sinking
    # reduce_mean would add an op
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [1, 3, 4]>, %w: tensor<fp32, [1, 3, 1, 4]>) {{
      %up: tensor<int32, [4]> = const() [val=dense<int32, [4]>(1, 3, 1, 4)]
      %r: tensor<fp32, [1, 3, 1, 4]> = reshape(x=%x, shape=%up)
      %axes: tensor<int32, [1]> = const() [val=dense<int32, [1]>(-1)]
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(true)]
      %mean: tensor<fp32, [1, 3, 1, 1]> = reduce_mean(x=%r, axes=%axes, keep_dims=%keep)
      %y: tensor<fp32, [1, 3, 1, 4]> = sub(x=%r, y=%w)
    }} -> (%mean, %y)""", sink_unit_axes, "is also read by sub 'y', which cannot sink")


def test_sink_refuses_when_the_insertion_is_also_a_block_output() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %y: tensor<fp32, [1, 2, 3]> = tanh(x=%e)
    }} -> (%e, %y)""", sink_unit_axes, "'e' is also an output of its block")


def test_sink_refuses_when_another_reader_is_not_in_the_table() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %y: tensor<fp32, [1, 2, 3]> = tanh(x=%e)
      %rev: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %z: tensor<fp32, [1, 2, 3]> = reverse(x=%e, axes=%rev)
    }} -> (%y, %z)""", sink_unit_axes, "'e' is also read by reverse 'z', which keeps it lifted")


def test_sink_proceeds_when_its_result_goes_straight_back_down_even_if_an_insertion_stays() -> None:
    # ex stays for reverse, but sub's only reader is the squeeze that absorbs the new insertion
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>, %y: tensor<fp32, [2, 3]>) {{
      {AX0}
      %ex: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %ey: tensor<fp32, [1, 2, 3]> = expand_dims(x=%y, axes=%ax)
      %d: tensor<fp32, [1, 2, 3]> = sub(x=%ex, y=%ey)
      %s: tensor<fp32, [2, 3]> = squeeze(x=%d, axes=%ax)
      %rev: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %z: tensor<fp32, [1, 2, 3]> = reverse(x=%ex, axes=%rev)
    }} -> (%s, %z)""", RemoveScaffolding(), f"""{HEAD}(%x: tensor<fp32, [2, 3]>, %y: tensor<fp32, [2, 3]>) {{
      {AX0}
      %ex: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %s: tensor<fp32, [2, 3]> = sub(x=%x, y=%y)
      %rev: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %z: tensor<fp32, [1, 2, 3]> = reverse(x=%ex, axes=%rev)
    }} -> (%s, %z)""")


def test_the_pass_relifts_an_input_with_more_unit_axes_than_the_others() -> None:
    # the s4tf models' concat: a [11] input reshaped to [1, 1, 11, 1, 1] next to embeddings of
    # [1, 1, n] lifted at [3, 4]: the concat runs on [1, 1, *], the [4] input gets its two 1s
    assert_rewrites(f"""{HEAD}(%v: tensor<fp32, [4]>, %w: tensor<fp32, [1, 1, 2]>) {{
      %shape: tensor<int32, [5]> = const() [val=dense<int32, [5]>(1, 1, 4, 1, 1)]
      %ev: tensor<fp32, [1, 1, 4, 1, 1]> = reshape(x=%v, shape=%shape)
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, 4)]
      %ew: tensor<fp32, [1, 1, 2, 1, 1]> = expand_dims(x=%w, axes=%ax)
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %c: tensor<fp32, [1, 1, 6, 1, 1]> = concat(values=(%ev, %ew), axis=%axis)
      %y: tensor<fp32, [1, 1, 6]> = squeeze(x=%c, axes=%ax)
    }} -> (%y)""", RemoveScaffolding(), f"""{HEAD}(%v: tensor<fp32, [4]>, %w: tensor<fp32, [1, 1, 2]>) {{
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 1)]
      %ev: tensor<fp32, [1, 1, 4]> = expand_dims(x=%v, axes=%ax)
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %y: tensor<fp32, [1, 1, 6]> = concat(values=(%ev, %w), axis=%axis)
    }} -> (%y)""")


def test_sink_refuses_inputs_lifted_into_different_frames() -> None:
    # both [1, 2, 1, 3], but a is [2, 1, 3] lifted at 0 and b is [1, 2, 3] lifted at 2
    assert_refuses(f"""{HEAD}(%a: tensor<fp32, [2, 1, 3]>, %b: tensor<fp32, [1, 2, 3]>) {{
      {AX0}
      %ea: tensor<fp32, [1, 2, 1, 3]> = expand_dims(x=%a, axes=%ax)
      %two: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %eb: tensor<fp32, [1, 2, 1, 3]> = expand_dims(x=%b, axes=%two)
      %y: tensor<fp32, [1, 2, 1, 3]> = maximum(x=%ea, y=%eb)
    }} -> (%y)""", sink_unit_axes, "its inputs are lifted differently")


def test_sink_accepts_two_insertions_that_differ_only_in_where_a_unit_axis_sits() -> None:
    # [1, 3] lifted at axis 0 and at axis 1 is the same [1, 1, 3] tensor with the same low value
    assert_rewrites(f"""{HEAD}(%a: tensor<fp32, [1, 3]>, %b: tensor<fp32, [1, 3]>) {{
      {AX0}
      %ea: tensor<fp32, [1, 1, 3]> = expand_dims(x=%a, axes=%ax)
      %one: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %eb: tensor<fp32, [1, 1, 3]> = expand_dims(x=%b, axes=%one)
      %y: tensor<fp32, [1, 1, 3]> = real_div(x=%ea, y=%eb)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%a: tensor<fp32, [1, 3]>, %b: tensor<fp32, [1, 3]>) {{
      %d: tensor<fp32, [1, 3]> = real_div(x=%a, y=%b)
      {AX0}
      %y: tensor<fp32, [1, 1, 3]> = expand_dims(x=%d, axes=%ax)
    }} -> (%y)""")


def test_sink_rewrites_reduction_axes_and_drops_the_frame_when_keep_dims_is_false() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %ax: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %e: tensor<fp32, [2, 1, 3]> = expand_dims(x=%x, axes=%ax)
      %axes: tensor<int32, [2]> = const() [val=dense<int32, [2]>(1, 2)]
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %y: tensor<fp32, [2]> = reduce_sum(x=%e, axes=%axes, keep_dims=%keep)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %axes: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %y: tensor<fp32, [2]> = reduce_sum(x=%x, axes=%axes, keep_dims=%keep)
    }} -> (%y)""")


def test_sink_refuses_a_reduction_over_unit_axes_only() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %ax: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %e: tensor<fp32, [2, 1, 3]> = expand_dims(x=%x, axes=%ax)
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(true)]
      %y: tensor<fp32, [2, 1, 3]> = reduce_max(x=%e, axes=%ax, keep_dims=%keep)
    }} -> (%y)""", sink_unit_axes, "it reduces only over unit axes [1]")


def test_sink_renumbers_argmax_axis_without_keep_dims() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%x, axes=%ax)
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(-1)]
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %y: tensor<int32, [1, 2]> = reduce_argmax(x=%e, axis=%axis, keep_dims=%keep)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %keep: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %i: tensor<int32, [2]> = reduce_argmax(x=%x, axis=%axis, keep_dims=%keep)
      {AX0}
      %y: tensor<int32, [1, 2]> = expand_dims(x=%i, axes=%ax)
    }} -> (%y)""")


SOFTMAX = f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
  %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 1)]
  %e: tensor<fp32, [1, 1, 2, 3]> = expand_dims(x=%x, axes=%ax)
  %axis: tensor<int32, []> = const() [val=dense<int32, []>(AXIS)]
  %s: tensor<fp32, [1, 1, 2, 3]> = softmax(x=%e, axis=%axis)
  %y: tensor<fp32, [2, 3]> = squeeze(x=%s, axes=%ax)
}} -> (%y)"""


def test_the_pass_renumbers_softmax_axis() -> None:
    # axis -2 of [1, 1, 2, 3] is the 2: axis 0 of x (a softmax along the last axis would differ)
    assert_rewrites(SOFTMAX.replace("AXIS", "-2"), RemoveScaffolding(), f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %y: tensor<fp32, [2, 3]> = softmax(x=%x, axis=%axis)
    }} -> (%y)""")


def test_sink_refuses_softmax_along_a_unit_axis() -> None:
    assert_refuses(SOFTMAX.replace("AXIS", "1"), sink_unit_axes, "its axis 1 is one of the unit axes [0, 1]")


def test_the_pass_lowers_a_transpose_that_moves_the_unit_axis() -> None:
    # transformer_encoder_layer's qkv: expand_dims [0], transpose (3, 1, 2, 0, 4), squeeze [3]
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2, 1, 3, 4]>) {{
      {AX0}
      %e: tensor<fp32, [1, 2, 1, 3, 4]> = expand_dims(x=%x, axes=%ax)
      %perm: tensor<int32, [5]> = const() [val=dense<int32, [5]>(3, 1, 2, 0, 4)]
      %t: tensor<fp32, [3, 2, 1, 1, 4]> = transpose(x=%e, perm=%perm)
      %sq: tensor<int32, [1]> = const() [val=dense<int32, [1]>(3)]
      %y: tensor<fp32, [3, 2, 1, 4]> = squeeze(x=%t, axes=%sq)
    }} -> (%y)""", RemoveScaffolding(), f"""{HEAD}(%x: tensor<fp32, [2, 1, 3, 4]>) {{
      %perm: tensor<int32, [4]> = const() [val=dense<int32, [4]>(2, 0, 1, 3)]
      %y: tensor<fp32, [3, 2, 1, 4]> = transpose(x=%x, perm=%perm)
    }} -> (%y)""")


def test_sink_drops_a_transpose_that_only_moves_unit_axes() -> None:
    # transformer_encoder_layer's attention output: [7, 16] lifted to [7, 1, 16], transposed to
    # [1, 7, 16]: the same elements in the same order, one expand_dims
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [7, 16]>) {{
      %ax: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %e: tensor<fp32, [7, 1, 16]> = expand_dims(x=%x, axes=%ax)
      %perm: tensor<int32, [3]> = const() [val=dense<int32, [3]>(1, 0, 2)]
      %t: tensor<fp32, [1, 7, 16]> = transpose(x=%e, perm=%perm)
      %y: tensor<fp32, [1, 7, 16]> = add(x=%t, y=%t)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%x: tensor<fp32, [7, 16]>) {{
      %s: tensor<fp32, [7, 16]> = add(x=%x, y=%x)
      {AX0}
      %y: tensor<fp32, [1, 7, 16]> = expand_dims(x=%s, axes=%ax)
    }} -> (%y)""")


def test_the_pass_lowers_a_concat_of_lifted_values() -> None:
    # SqueezeNet's fire modules: two activations of lifted convs, concatenated on channels
    assert_rewrites(f"""{HEAD}(%a: tensor<fp32, [1, 2, 3]>, %b: tensor<fp32, [1, 4, 3]>) {{
      {AX0}
      %ea: tensor<fp32, [1, 1, 2, 3]> = expand_dims(x=%a, axes=%ax)
      %eb: tensor<fp32, [1, 1, 4, 3]> = expand_dims(x=%b, axes=%ax)
      %ra: tensor<fp32, [1, 1, 2, 3]> = relu(x=%ea)
      %rb: tensor<fp32, [1, 1, 4, 3]> = sigmoid(x=%eb)
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(-2)]
      %il: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %c: tensor<fp32, [1, 1, 6, 3]> = concat(values=(%ra, %rb), axis=%axis, interleave=%il)
      %y: tensor<fp32, [1, 6, 3]> = squeeze(x=%c, axes=%ax)
    }} -> (%y)""", RemoveScaffolding(), f"""{HEAD}(%a: tensor<fp32, [1, 2, 3]>, %b: tensor<fp32, [1, 4, 3]>) {{
      %ra: tensor<fp32, [1, 2, 3]> = relu(x=%a)
      %rb: tensor<fp32, [1, 4, 3]> = sigmoid(x=%b)
      %il: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %y: tensor<fp32, [1, 6, 3]> = concat(values=(%ra, %rb), axis=%axis, interleave=%il)
    }} -> (%y)""")


def test_sink_refuses_a_concat_along_a_unit_axis() -> None:
    assert_refuses(f"""{HEAD}(%a: tensor<fp32, [2, 3]>, %b: tensor<fp32, [2, 3]>) {{
      {AX0}
      %ea: tensor<fp32, [1, 2, 3]> = expand_dims(x=%a, axes=%ax)
      %eb: tensor<fp32, [1, 2, 3]> = expand_dims(x=%b, axes=%ax)
      %axis: tensor<int32, []> = const() [val=dense<int32, []>(0)]
      %y: tensor<fp32, [2, 2, 3]> = concat(values=(%ea, %eb), axis=%axis)
    }} -> (%y)""", sink_unit_axes, "its axis 0 is one of the unit axes [0]")


def test_sink_lowers_select_with_a_lifted_condition() -> None:
    assert_rewrites(f"""{HEAD}(%c: tensor<bool, [2, 3]>, %a: tensor<fp32, [2, 3]>) {{
      {AX0}
      %ec: tensor<bool, [1, 2, 3]> = expand_dims(x=%c, axes=%ax)
      %ea: tensor<fp32, [1, 2, 3]> = expand_dims(x=%a, axes=%ax)
      %b: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(-1.5, 0.25, 4.0)]
      %y: tensor<fp32, [1, 2, 3]> = select(cond=%ec, a=%ea, b=%b)
    }} -> (%y)""", sink_unit_axes, f"""{HEAD}(%c: tensor<bool, [2, 3]>, %a: tensor<fp32, [2, 3]>) {{
      %b: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(-1.5, 0.25, 4.0)]
      %s: tensor<fp32, [2, 3]> = select(cond=%c, a=%a, b=%b)
      {AX0}
      %y: tensor<fp32, [1, 2, 3]> = expand_dims(x=%s, axes=%ax)
    }} -> (%y)""")


def test_sink_does_not_match_ops_that_read_nothing_lifted() -> None:
    text = f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %y: tensor<fp32, [2, 3]> = relu(x=%x)
    }} -> (%y)"""
    assert_refuses(text, sink_unit_axes, "fails the condition 'reads_lifted_value'")


# -- reshape_like_chain -------------------------------------------------------------------------

SPLIT = """%n: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %h0: tensor<fp32, [1, 5]>, %h1: tensor<fp32, [1, 5]> = split(x=%h, num_splits=%n, axis=%one)"""


def test_chain_turns_a_lifted_split_output_reshaped_to_its_declared_shape_into_one_squeeze() -> None:
    # lstm_bidirectional's hf_out: split -> expand_dims to rank 5 -> reshape to the declared [5]
    assert_rewrites(f"""{HEAD}(%h: tensor<fp32, [1, 10]>) {{
      {SPLIT}
      %ax: tensor<int32, [3]> = const() [val=dense<int32, [3]>(0, 3, 4)]
      %e: tensor<fp32, [1, 1, 5, 1, 1]> = expand_dims(x=%h0, axes=%ax)
      %shape: tensor<int32, [1]> = const() [val=dense<int32, [1]>(5)]
      %y: tensor<fp32, [5]> = reshape(x=%e, shape=%shape)
    }} -> (%y, %h1)""", reshape_like_chain, f"""{HEAD}(%h: tensor<fp32, [1, 10]>) {{
      %n: tensor<int32, []> = const() [val=dense<int32, []>(2)]
      %one: tensor<int32, []> = const() [val=dense<int32, []>(1)]
      %h0: tensor<fp32, [1, 5]>, %h1: tensor<fp32, [1, 5]> = split(x=%h, num_splits=%n, axis=%one)
      %ax: tensor<int32, [1]> = const() [val=dense<int32, [1]>(0)]
      %y: tensor<fp32, [5]> = squeeze(x=%h0, axes=%ax)
    }} -> (%y, %h1)""")


def test_chain_cancels_a_pair_through_a_multi_output_op() -> None:
    # the lstm's outputs lifted to rank 5 and squeezed back, per output
    assert_rewrites(f"""{HEAD}(%h: tensor<fp32, [1, 10]>) {{
      {SPLIT}
      %ax: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, 3)]
      %e: tensor<fp32, [1, 5, 1, 1]> = expand_dims(x=%h1, axes=%ax)
      %s: tensor<fp32, [1, 5]> = squeeze(x=%e, axes=%ax)
      %y: tensor<fp32, [1, 5]> = sub(x=%h0, y=%s)
    }} -> (%y)""", reshape_like_chain, f"""{HEAD}(%h: tensor<fp32, [1, 10]>) {{
      {SPLIT}
      %y: tensor<fp32, [1, 5]> = sub(x=%h0, y=%h1)
    }} -> (%y)""")


def test_chain_leaves_two_reshapes_to_canonicalize() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 3]>) {{
      %s1: tensor<int32, [1]> = const() [val=dense<int32, [1]>(6)]
      %r: tensor<fp32, [6]> = reshape(x=%x, shape=%s1)
      %s2: tensor<int32, [2]> = const() [val=dense<int32, [2]>(3, 2)]
      %y: tensor<fp32, [3, 2]> = reshape(x=%r, shape=%s2)
    }} -> (%y)""", reshape_like_chain, "two reshapes: canonicalize's reshape_chain")


def test_chain_refuses_when_the_inner_op_stays_and_nothing_is_saved() -> None:
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [2, 1, 3]>) {{
      %one: tensor<int32, [1]> = const() [val=dense<int32, [1]>(1)]
      %s: tensor<fp32, [2, 3]> = squeeze(x=%x, axes=%one)
      %a: tensor<fp32, [2, 3]> = abs(x=%s)
      {AX0}
      %y: tensor<fp32, [1, 2, 3]> = expand_dims(x=%s, axes=%ax)
    }} -> (%a, %y)""", reshape_like_chain, "has other uses and the chain does not reduce to 'x'")


def test_chain_keeps_an_insertion_that_lifts_into_ops_the_sink_rule_lowers() -> None:
    # one reshape [6] -> [1, 2, 3] would hide that relu runs on x's [2, 3] with a unit axis added
    assert_refuses(f"""{HEAD}(%x: tensor<fp32, [6]>) {{
      %s1: tensor<int32, [2]> = const() [val=dense<int32, [2]>(2, 3)]
      %r: tensor<fp32, [2, 3]> = reshape(x=%x, shape=%s1)
      {AX0}
      %e: tensor<fp32, [1, 2, 3]> = expand_dims(x=%r, axes=%ax)
      %y: tensor<fp32, [1, 2, 3]> = relu(x=%e)
    }} -> (%y)""", reshape_like_chain, "lifts by unit axes into ops sink_unit_axes may lower")


# -- the table ------------------------------------------------------------------------------------


def test_every_elementwise_op_is_classified() -> None:
    """A new op with the ``elementwise`` trait must be looked at (added to UNARY/BINARY, whose
    parameters are checked to be scalars at match time, or left out on purpose here)."""
    elementwise = {t for t in registered_op_types()
                   if "elementwise" in _opdef(t).traits}
    assert elementwise == UNARY | BINARY
    for t in UNARY:
        assert "x" in _opdef(t).signature.inputs and "y" not in _opdef(t).signature.inputs, t
    for t in BINARY:
        assert {"x", "y"} <= set(_opdef(t).signature.inputs), t
    # per-channel parameters: not elementwise in the table's sense
    assert not {"prelu", "softplus_parametric", "batch_norm", "l2_norm", "layer_norm"} & set(TABLE)


def _opdef(t: str):
    try:
        return get_opdef(t, "iOS15")
    except Exception:  # noqa: BLE001 - ops newer than iOS15
        return get_opdef(t, "iOS18")


# -- the random-program patterns fire -----------------------------------------------------------

SHAPES = [(2, 3), (4,), (), (1, 5, 1), (Symbol("n"), 3)]


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(range(len(SHAPES))), st.sampled_from(SCAFFOLDING))
def test_each_scaffolding_pattern_disappears_entirely(data, shape_index: int, sprinkle) -> None:
    """The patterns of tests/passes/patterns/scaffolding.py (which the random-program property
    test sprinkles into programs) leave no reshape-like op behind: the rules fire on them."""
    shape = SHAPES[shape_index]
    made: list = []

    def body(b, x):
        y = sprinkle.make(b, x, data.draw)
        made.append(y)
        return x if y is None else y

    prog = new_program({"x": tensor("fp32", shape)}, body)
    if made[0] is None:
        return
    feeds = random_feeds(prog.main, seed=0)
    want = run(prog, feeds)
    converter.optimize(prog, verify=True)
    left = [op.type for op in prog.walk() if op.type in ("reshape", "squeeze", "expand_dims")]
    assert not left, left
    (got,), (expected,) = run(prog, feeds).values(), want.values()
    np.testing.assert_array_equal(got, expected)
