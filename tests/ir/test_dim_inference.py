"""Sizes derived from symbolic input sizes are expressions of them, and the expression infer()
gives is the size evaluate() produces, for several concrete sizes (one program, built once with
symbolic inputs, run at each size). Slicing is also checked against numpy's own slicing for random
bounds, strides and symbol ranges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.ops.tensor_transform import _slice_dim
from converter.ir.symexpr import DimExpr, SymExpr
from converter.ir.types import Symbol, TensorType, dtype, is_static_dim

H, W, L = Symbol("H", lower=4), Symbol("W", lower=4), Symbol("L", lower=6)
SIZES = [(4, 5, 6), (7, 9, 8), (8, 8, 11), (13, 6, 17)]  # (H, W, L): odd, even, primes


def _w(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _conv(**p):
    return lambda b, x: b.conv(x=x, weight=_w(2, 3, 3, 2), **p)


def _pool(op, **p):
    return lambda b, x: getattr(b, op)(x=x, kernel_sizes=[3, 2], **p)


# (id, input shape, build(b, x) -> value)
OPS = [
    ("conv-valid", (1, 3, H, W), _conv()),
    ("conv-same-stride2", (1, 3, H, W), _conv(strides=[2, 2], pad_type="same")),
    ("conv-custom-dilated-stride3", (1, 3, H, W), _conv(strides=[3, 1], dilations=[1, 2], pad_type="custom",
                                                       pad=[1, 2, 0, 1])),
    ("conv_transpose-stride2", (1, 3, H, W), lambda b, x: b.conv_transpose(x=x, weight=_w(3, 2, 3, 2),
                                                                            strides=[2, 3])),
    ("conv_transpose-custom", (1, 3, H, W), lambda b, x: b.conv_transpose(
        x=x, weight=_w(3, 2, 3, 3), strides=[2, 2], pad_type="custom", pad=[1, 0, 0, 2])),
    ("max_pool-valid-stride2", (1, 3, H, W), _pool("max_pool", strides=[2, 2], pad_type="valid")),
    ("avg_pool-same-stride3", (1, 3, H, W), _pool("avg_pool", strides=[3, 2], pad_type="same")),
    ("max_pool-ceil-nopad", (1, 3, H, W), _pool("max_pool", strides=[2, 2], pad_type="valid", ceil_mode=True)),
    ("concat", (2, L), lambda b, x: b.concat(values=(x, x, b.slice_by_index(x=x, begin=[0, 1], end=[0, 0],
                                                                            end_mask=[True, True])), axis=1)),
    ("split-num", (2, 2 * L), lambda b, x: b.split(x=x, num_splits=2, axis=1)[0]),
    ("tile", (H, W), lambda b, x: b.tile(x=x, reps=[2, 3])),
    ("flatten2d", (2, H, W), lambda b, x: b.flatten2d(x=x, axis=1)),
    ("reshape-minus-one", (2 * H, W, 3), lambda b, x: b.reshape(x=x, shape=[-1, 6])),
    ("reshape-copy-and-cancel", (H, W, 6), lambda b, x: b.reshape(x=x, shape=[0, -1, 3])),
    ("slice-step2", (H, L), lambda b, x: b.slice_by_index(x=x, begin=[1, 0], end=[0, -1], stride=[2, 3],
                                                          end_mask=[True, False])),
    ("slice-reverse", (L,), lambda b, x: b.slice_by_index(x=x, begin=[-2], end=[0], stride=[-2], end_mask=[True])),
    ("slice_by_size", (H, W), lambda b, x: b.slice_by_size(x=x, begin=[1, -3], size=[-1, -1])),
    ("pad", (H, W), lambda b, x: b.pad(x=x, pad=np.array([1, 2, 0, 3], np.int32), mode="constant")),
    ("crop", (1, 2, H, W), lambda b, x: b.crop(x=x, crop_height=[1, 2], crop_width=[0, 3])),
    ("upsample-int", (1, 2, H, W), lambda b, x: b.upsample_nearest_neighbor(
        x=x, scale_factor_height=2.0, scale_factor_width=3.0)),
    ("upsample-fraction", (1, 2, H, W), lambda b, x: b.upsample_bilinear(
        x=x, scale_factor_height=1.5, scale_factor_width=0.75)),
    ("space_to_depth", (1, 2, 2 * H, 2 * W), lambda b, x: b.space_to_depth(x=x, block_size=2)),
    ("depth_to_space", (1, 8, H, W), lambda b, x: b.depth_to_space(x=x, block_size=2)),
    ("pixel_shuffle", (1, 9, H, W), lambda b, x: b.pixel_shuffle(x=x, upscale_factor=3)),
    ("space_to_batch", (1, 2, 2 * H, 3 * W), lambda b, x: b.space_to_batch(
        x=x, block_shape=[2, 3], paddings=[[2, 0], [0, 3]])),
    ("batch_to_space", (6 * H, 2, W, 3), lambda b, x: b.batch_to_space(
        x=x, block_shape=[2, 3], crops=[[1, 0], [0, 2]])),
    ("sliding_windows", (2, L), lambda b, x: b.sliding_windows(x=x, axis=1, size=3, stride=2)),
    ("stack-broadcast", (H, 1), lambda b, x: b.stack(values=(b.add(x=x, y=_w(1, 5)), b.mul(x=x, y=_w(1, 5))),
                                                     axis=0)),
]


def _concrete(d, env):
    return int(d) if is_static_dim(d) else d.evaluate(env)


@pytest.mark.parametrize("build", [o[2] for o in OPS], ids=[o[0] for o in OPS])
def test_inferred_expression_is_the_size_evaluate_gives(build):
    shape = next(o[1] for o in OPS if o[2] is build)
    prog = new_program({"x": TensorType(dtype("fp32"), shape)}, lambda b, x: [build(b, x)])
    out = prog.main.outputs[0]
    declared = out.type.shape
    inputs = {"H", "W", "L"}
    for d in declared:
        if isinstance(d, DimExpr):
            assert {s.name for s in d.symbols()} <= inputs, f"{out.type}: a fresh symbol where sizes determine it"
    assert any(isinstance(d, SymExpr) for d in declared) or declared != shape, out.type
    for h, w, length in SIZES:
        env = {"H": h, "W": w, "L": length}
        x = np.zeros([_concrete(d, env) for d in shape], np.float32)
        got = run(prog, {"x": x})[out.name]
        assert got.shape == tuple(_concrete(d, env) for d in declared), f"{out.type} at {env}"


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 12), st.integers(0, 30), st.one_of(st.none(), st.integers(-14, 14)),
       st.one_of(st.none(), st.integers(-14, 14)), st.sampled_from([1, 2, 3, -1, -2, -3]))
def test_symbolic_slice_length_matches_numpy_for_every_allowed_size(lo, span, begin, end, stride):
    n = Symbol("n", lower=lo, upper=lo + span)
    d = _slice_dim(n, begin, end, stride)
    for size in range(lo, lo + span + 1):
        want = len(range(size)[slice(begin, end, stride)])
        if is_static_dim(d):
            assert int(d) == want, (d, size)
        elif all(s.name == "n" for s in d.symbols()):  # not a fresh symbol: an expression of n
            assert d.evaluate({"n": size}) == want, (str(d), size)


def test_broadcasting_keeps_equal_symbolic_dims_and_one_that_cannot_be_1():
    from converter.ir.shapes import broadcast_shapes

    s, t, big = Symbol("s"), Symbol("t"), Symbol("big", lower=2)
    assert broadcast_shapes((2 * s, 3), (1, 3)) == (2 * s, 3)
    assert broadcast_shapes((s + 1,), (s + 1,)) == (s + 1,)
    assert broadcast_shapes((big,), (t,)) == (big,)  # t must be 1 or big
    (fresh,) = broadcast_shapes((s,), (t,))
    assert isinstance(fresh, Symbol) and fresh not in (s, t)


def test_inputs_with_expression_dims_are_checked_when_fed():
    from converter.errors import EvaluationError

    n = Symbol("n")
    prog = new_program({"x": TensorType(dtype("fp32"), (n, 2 * n))}, lambda b, x: [b.relu(x=x)])
    assert run(prog, {"x": np.ones((3, 6), np.float32)})
    with pytest.raises(EvaluationError, match=r"dimension 2\*n is 6 here, got 5"):
        run(prog, {"x": np.ones((3, 5), np.float32)})
