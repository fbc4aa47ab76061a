"""The conv/linear family of fusions (converter/passes/fusions/): each rule fires where it should
(the IR after written out, its folded constants computed here from the ops' formulas as the spec
states them) and refuses its near misses with the reason.

Inexact fusions (conv + bias / batch_norm / scale, matmul + add -> linear, global pooling) are
compared with the original program at a float-rounding tolerance; exact ones (pad into padding,
transpose into matmul flags, quantize of dequantize) bit for bit. The oracle tests against torch are
in test_fusions_conv_torch.py.
"""

from __future__ import annotations

import numpy as np

from converter.passes.fusions.conv_batchnorm import fuse_conv_batchnorm
from converter.passes.fusions.conv_bias import fuse_const_sub_conv_bias, fuse_conv_add_bias, fuse_conv_sub_bias
from converter.passes.fusions.conv_family import FuseConvFamily
from converter.passes.fusions.conv_scale import fuse_conv_scale
from converter.passes.fusions.global_pool import reduce_mean_to_global_avg_pool
from converter.passes.fusions.matmul_linear import fuse_matmul_add_linear
from converter.passes.fusions.matmul_transpose import fold_transpose_into_matmul_x, fold_transpose_into_matmul_y
from converter.passes.fusions.pad_window import fuse_pad_avg_pool, fuse_pad_conv, fuse_pad_max_pool
from converter.passes.fusions.quant_pair import quantize_of_dequantize
from converter.passes.pipelines import resolve, rules_of

from .helpers import assert_refuses, assert_rewrites, canonical_text

HEAD15 = "program\nfunc main<iOS15>"
HEAD17 = "program\nfunc main<iOS17>"
TOL = {"rtol": 1e-5, "atol": 1e-5}


def dense(a, dt: str = "fp32") -> str:
    """An array in the IR text form (fp32 values printed at their shortest round-trip form)."""
    storage = {"fp32": np.float32, "int32": np.int32, "int8": np.int8, "uint8": np.uint8}[dt]
    a = np.asarray(a).astype(storage)
    shape = ", ".join(str(d) for d in a.shape)
    return f"dense<{dt}, [{shape}]>({', '.join(str(v) for v in a.reshape(-1))})"


def const(name: str, a, dt: str = "fp32") -> str:
    a = np.asarray(a)
    shape = ", ".join(str(d) for d in a.shape)
    return f"%{name}: tensor<{dt}, [{shape}]> = const() [val={dense(a, dt)}]"


# a 1x1-by-2 kernel conv of a [1, 2, 3, 3] input into 3 channels, and per-channel values that differ
W = np.array([0.5, -1.25, 0.75, 2.0, -0.375, 1.5], np.float32).reshape(3, 2, 1, 1)
B = np.array([0.25, -0.5, 1.125], np.float32)
C3 = np.array([0.3, -1.7, 2.9], np.float32)
X = "%x: tensor<fp32, [1, 2, 3, 3]>"
Y = "tensor<fp32, [1, 3, 3, 3]>"


def conv_prog(tail: str, *, bias: bool = True, head: str = HEAD15, extra: str = "") -> str:
    b = ", bias=%b" if bias else ""
    return f"""{head}({X}) {{
      {const("w", W)}
      {const("b", B) if bias else ""}
      {extra}
      %y: {Y} = conv(x=%x, weight=%w{b})
      {tail}
    }} -> (%z)"""


def conv_after(w, b, tail: str = "", head: str = HEAD15) -> str:
    return f"""{head}({X}) {{
      {const("w2", w)}
      {const("b2", b)}
      %z: {Y} = conv(x=%x, weight=%w2, bias=%b2)
      {tail}
    }} -> (%z)"""


# -- conv + add / sub -> bias ------------------------------------------------------------------


def test_conv_add_per_channel_constant_becomes_the_bias_in_either_order() -> None:
    c = C3.reshape(1, 3, 1, 1)
    assert_rewrites(conv_prog(f"""{const("c", c)}
      %z: {Y} = add(x=%c, y=%y)"""), fuse_conv_add_bias,
                    conv_after(W, B.astype(np.float64) + C3.astype(np.float64)), **TOL)
    # no bias yet: one is created; [C, 1, 1] broadcasting
    assert_rewrites(conv_prog(f"""{const("c", C3.reshape(3, 1, 1))}
      %z: {Y} = add(x=%y, y=%c)""", bias=False), fuse_conv_add_bias, conv_after(W, C3), **TOL)


def test_conv_add_scalar_is_a_bias_on_every_channel() -> None:
    assert_rewrites(conv_prog(f"""{const("c", np.float32(0.7))}
      %z: {Y} = add(x=%y, y=%c)"""), fuse_conv_add_bias,
                    conv_after(W, B.astype(np.float64) + np.float64(np.float32(0.7))), **TOL)


def test_conv_sub_constant_subtracts_it_from_the_bias() -> None:
    assert_rewrites(conv_prog(f"""{const("c", C3.reshape(1, 3, 1, 1))}
      %z: {Y} = sub(x=%y, y=%c)"""), fuse_conv_sub_bias,
                    conv_after(W, B.astype(np.float64) - C3.astype(np.float64)), **TOL)


def test_constant_minus_conv_negates_the_weight() -> None:
    assert_rewrites(conv_prog(f"""{const("c", C3.reshape(3, 1, 1))}
      %z: {Y} = sub(x=%c, y=%y)"""), fuse_const_sub_conv_bias,
                    conv_after(-W, C3.astype(np.float64) - B.astype(np.float64)), **TOL)


def test_conv_add_refuses_a_constant_varying_over_spatial_dims() -> None:
    assert_refuses(conv_prog(f"""{const("c", np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 1, 1, 3))}
      %z: {Y} = add(x=%y, y=%c)"""), fuse_conv_add_bias, "varies along a spatial dim")
    assert_refuses(conv_prog(f"""{const("c", np.arange(9, dtype=np.float32).reshape(1, 3, 3))}
      %z: {Y} = sub(x=%y, y=%c)"""), fuse_conv_sub_bias, "varies along a spatial dim")


def test_conv_add_refuses_a_conv_read_elsewhere() -> None:
    assert_refuses(f"""{HEAD15}({X}) {{
      {const("w", W)}
      %y: {Y} = conv(x=%x, weight=%w)
      {const("c", C3.reshape(3, 1, 1))}
      %a: {Y} = add(x=%y, y=%c)
      %z: {Y} = mul(x=%a, y=%y)
    }} -> (%z)""", fuse_conv_add_bias, "1 outside the pattern")


# -- conv + batch_norm ---------------------------------------------------------------------------

MEAN = np.array([0.4, -0.9, 1.3], np.float32)
VAR = np.array([0.6, 2.2, 0.35], np.float32)
GAMMA = np.array([1.7, -0.8, 0.45], np.float32)
BETA = np.array([-0.15, 0.95, 0.55], np.float32)
EPS = np.float32(0.03)


def _bn(head: str = "", **missing: bool) -> str:
    parts = ["x=%y", "mean=%mean", "variance=%var"]
    if not missing.get("gamma"):
        parts.append("gamma=%gamma")
    if not missing.get("beta"):
        parts.append("beta=%beta")
    if not missing.get("epsilon"):
        parts.append("epsilon=%eps")
    return f"""{const("mean", MEAN)}
      {const("var", VAR)}
      {"" if missing.get("gamma") else const("gamma", GAMMA)}
      {"" if missing.get("beta") else const("beta", BETA)}
      {"" if missing.get("epsilon") else const("eps", EPS)}
      %z: {Y} = batch_norm({', '.join(parts)})"""


def folded(w, b, mean=MEAN, var=VAR, gamma=GAMMA, beta=BETA, eps=EPS):
    """The batch_norm formula ``gamma * (y - mean) / sqrt(var + eps) + beta`` folded into a conv
    whose output channels lead the weight."""
    f = np.float64
    s = f(gamma) / np.sqrt(var.astype(f) + f(eps))
    return w.astype(f) * s.reshape(-1, 1, 1, 1), (b.astype(f) - mean.astype(f)) * s + beta.astype(f)


def test_conv_batchnorm_folds_into_weight_and_bias() -> None:
    assert_rewrites(conv_prog(_bn()), fuse_conv_batchnorm, conv_after(*folded(W, B)), **TOL)


def test_conv_batchnorm_creates_a_bias_and_uses_the_default_epsilon_gamma_beta() -> None:
    ones, zeros = np.ones(3, np.float32), np.zeros(3, np.float32)
    assert_rewrites(conv_prog(_bn(gamma=True, beta=True, epsilon=True), bias=False), fuse_conv_batchnorm,
                    conv_after(*folded(W, zeros, gamma=ones, beta=zeros, eps=np.float32(1e-5))), **TOL)


def test_conv_batchnorm_refuses_a_runtime_weight() -> None:
    assert_refuses(f"""{HEAD17}({X}, %w: tensor<fp32, [3, 2, 1, 1]>) {{
      %y: {Y} = conv(x=%x, weight=%w)
      {_bn()}
    }} -> (%z)""", fuse_conv_batchnorm, "'w' is not a constant (an input)")


def test_conv_batchnorm_refuses_a_variance_that_makes_the_scale_infinite() -> None:
    text = conv_prog(_bn()).replace(dense(VAR), dense(np.array([0.6, -0.03, 0.35], np.float32)))
    assert_refuses(text, fuse_conv_batchnorm, "the folded scale is not finite")


# -- conv * per-channel constant ------------------------------------------------------------------


def test_conv_mul_per_channel_scales_weight_and_bias() -> None:
    f = np.float64
    assert_rewrites(conv_prog(f"""{const("c", C3.reshape(1, 3, 1, 1))}
      %z: {Y} = mul(x=%c, y=%y)"""), fuse_conv_scale,
                    conv_after(W.astype(f) * C3.astype(f).reshape(-1, 1, 1, 1), B.astype(f) * C3.astype(f)), **TOL)


def test_conv_mul_refuses_a_constant_varying_over_the_batch_or_space() -> None:
    assert_refuses(conv_prog(f"""{const("c", np.array([2.0, 3.0, 4.0], np.float32).reshape(3, 1))}
      %z: {Y} = mul(x=%y, y=%c)"""), fuse_conv_scale, "varies along a spatial dim")


def test_conv_mul_refuses_an_infinite_scale() -> None:
    assert_refuses(conv_prog(f"""{const("c", np.array([2.0, np.inf, 4.0], np.float32).reshape(3, 1, 1))}
      %z: {Y} = mul(x=%y, y=%c)"""), fuse_conv_scale, "inf or NaN")


# -- matmul + add -> linear -------------------------------------------------------------------------

MW = np.array([[0.5, -1.0, 2.25], [1.5, 0.125, -0.75]], np.float32)  # [K=2, N=3]
MC = np.array([0.2, -0.6, 1.4], np.float32)


def test_matmul_const_plus_vector_becomes_linear() -> None:
    assert_rewrites(f"""{HEAD15}(%x: tensor<fp32, [4, 2]>) {{
      {const("w", MW)}
      %y: tensor<fp32, [4, 3]> = matmul(x=%x, y=%w)
      {const("c", MC.reshape(1, 3))}
      %z: tensor<fp32, [4, 3]> = add(x=%c, y=%y)
    }} -> (%z)""", fuse_matmul_add_linear, f"""{HEAD15}(%x: tensor<fp32, [4, 2]>) {{
      {const("w2", MW.T)}
      {const("b2", MC)}
      %z: tensor<fp32, [4, 3]> = linear(x=%x, weight=%w2, bias=%b2)
    }} -> (%z)""", **TOL)


def test_matmul_with_transpose_y_gives_the_constant_as_the_weight() -> None:
    assert_rewrites(f"""{HEAD15}(%x: tensor<fp32, [2, 4, 2]>) {{
      {const("w", MW.T)}
      %t: tensor<bool, []> = const() [val=dense<bool, []>(true)]
      %y: tensor<fp32, [2, 4, 3]> = matmul(x=%x, y=%w, transpose_y=%t)
      {const("c", MC)}
      %z: tensor<fp32, [2, 4, 3]> = add(x=%y, y=%c)
    }} -> (%z)""", fuse_matmul_add_linear, f"""{HEAD15}(%x: tensor<fp32, [2, 4, 2]>) {{
      {const("w2", MW.T)}
      {const("b2", MC)}
      %z: tensor<fp32, [2, 4, 3]> = linear(x=%x, weight=%w2, bias=%b2)
    }} -> (%z)""", **TOL)


def test_matmul_add_refuses_transpose_x_and_a_bias_varying_over_rows() -> None:
    assert_refuses(f"""{HEAD15}(%x: tensor<fp32, [2, 4]>) {{
      {const("w", MW)}
      %t: tensor<bool, []> = const() [val=dense<bool, []>(true)]
      %y: tensor<fp32, [4, 3]> = matmul(x=%x, y=%w, transpose_x=%t)
      {const("c", MC)}
      %z: tensor<fp32, [4, 3]> = add(x=%y, y=%c)
    }} -> (%z)""", fuse_matmul_add_linear, "transpose_x is set")
    assert_refuses(f"""{HEAD15}(%x: tensor<fp32, [4, 2]>) {{
      {const("w", MW)}
      %y: tensor<fp32, [4, 3]> = matmul(x=%x, y=%w)
      {const("c", np.array([1.0, 2.0, 3.0, 4.0], np.float32).reshape(4, 1))}
      %z: tensor<fp32, [4, 3]> = add(x=%y, y=%c)
    }} -> (%z)""", fuse_matmul_add_linear, "varies along dim 0, not the last")


def test_matmul_add_refuses_a_batched_constant_operand() -> None:
    w3 = np.stack([MW, MW * 2])
    assert_refuses(f"""{HEAD15}(%x: tensor<fp32, [2, 4, 2]>) {{
      {const("w", w3)}
      %y: tensor<fp32, [2, 4, 3]> = matmul(x=%x, y=%w)
      {const("c", MC)}
      %z: tensor<fp32, [2, 4, 3]> = add(x=%y, y=%c)
    }} -> (%z)""", fuse_matmul_add_linear, "linear's weight is 2-D")


# -- transpose into matmul flags ------------------------------------------------------------------

T = "%tt: tensor<bool, []> = const() [val=dense<bool, []>(true)]"
F = "%ff: tensor<bool, []> = const() [val=dense<bool, []>(false)]"


def test_transpose_of_the_last_two_axes_folds_into_matmul_flags() -> None:
    assert_rewrites(f"""{HEAD15}(%a: tensor<fp32, [2, 3, 4]>, %b: tensor<fp32, [2, 3, 5]>) {{
      {const("p", np.array([0, 2, 1]), "int32")}
      %at: tensor<fp32, [2, 4, 3]> = transpose(x=%a, perm=%p)
      {const("q", np.array([0, -1, -2]), "int32")}
      %bt: tensor<fp32, [2, 5, 3]> = transpose(x=%b, perm=%q)
      {T}
      %z: tensor<fp32, [2, 4, 5]> = matmul(x=%at, y=%bt, transpose_y=%tt)
    }} -> (%z)""", [fold_transpose_into_matmul_x, fold_transpose_into_matmul_y], f"""{HEAD15}(%a: tensor<fp32, [2, 3, 4]>, %b: tensor<fp32, [2, 3, 5]>) {{
      {T}
      {F}
      %z: tensor<fp32, [2, 4, 5]> = matmul(x=%a, y=%b, transpose_x=%tt, transpose_y=%ff)
    }} -> (%z)""")


def test_transpose_into_matmul_refuses_other_permutations_and_shared_transposes() -> None:
    assert_refuses(f"""{HEAD15}(%a: tensor<fp32, [3, 2, 4]>, %b: tensor<fp32, [2, 4, 5]>) {{
      {const("p", np.array([1, 0, 2]), "int32")}
      %at: tensor<fp32, [2, 3, 4]> = transpose(x=%a, perm=%p)
      %z: tensor<fp32, [2, 3, 5]> = matmul(x=%at, y=%b)
    }} -> (%z)""", fold_transpose_into_matmul_x, "does not only swap the last two axes")
    assert_refuses(f"""{HEAD15}(%a: tensor<fp32, [4, 3]>, %b: tensor<fp32, [4, 3]>) {{
      {const("p", np.array([1, 0]), "int32")}
      %at: tensor<fp32, [3, 4]> = transpose(x=%a, perm=%p)
      %m: tensor<fp32, [3, 3]> = matmul(x=%at, y=%b)
      %z: tensor<fp32, [3, 4]> = relu(x=%at)
    }} -> (%m, %z)""", fold_transpose_into_matmul_x, "1 outside the pattern")


# -- pad into the window's padding ------------------------------------------------------------------


def _pad_prog(window: str, out: str, pad=(0, 0, 0, 0, 1, 2, 0, 1), value: str = "0.0", mode: str = "constant",
              x: str = "[1, 2, 3, 3]", padded: str = "[1, 2, 6, 4]") -> str:
    return f"""{HEAD15}(%x: tensor<fp32, {x}>) {{
      {const("p", np.array(pad), "int32")}
      %md: tensor<string, []> = const() [val=dense<string, []>("{mode}")]
      %v: tensor<fp32, []> = const() [val=dense<fp32, []>({value})]
      %px: tensor<fp32, {padded}> = pad(x=%x, pad=%p, mode=%md, constant_val=%v)
      {window}
    }} -> (%z)"""


KS = f"""{const("k", np.array([2, 2]), "int32")}
      {const("s", np.array([1, 1]), "int32")}"""
WIN = f"""{KS}
      %valid: tensor<string, []> = const() [val=dense<string, []>("valid")]"""


def test_zero_pad_before_conv_becomes_its_custom_padding() -> None:
    w = np.array([0.5, -1.0, 0.25, 2.0, 1.5, -0.5, 0.75, 1.25], np.float32).reshape(1, 2, 2, 2)
    before = _pad_prog(f"""{const("w", w)}
      %z: tensor<fp32, [1, 1, 5, 3]> = conv(x=%px, weight=%w)""", "")
    assert_rewrites(before, fuse_pad_conv, f"""{HEAD15}(%x: tensor<fp32, [1, 2, 3, 3]>) {{
      {const("w", w)}
      %custom: tensor<string, []> = const() [val=dense<string, []>("custom")]
      {const("pp", np.array([1, 2, 0, 1]), "int32")}
      %z: tensor<fp32, [1, 1, 5, 3]> = conv(x=%x, weight=%w, pad_type=%custom, pad=%pp)
    }} -> (%z)""")


def test_zero_pad_adds_to_a_custom_padding_of_conv() -> None:
    w = np.array([0.5, -1.0, 0.25, 2.0, 1.5, -0.5, 0.75, 1.25], np.float32).reshape(1, 2, 2, 2)
    before = _pad_prog(f"""{const("w", w)}
      %custom: tensor<string, []> = const() [val=dense<string, []>("custom")]
      {const("own", np.array([1, 0, 2, 1]), "int32")}
      %z: tensor<fp32, [1, 1, 6, 6]> = conv(x=%px, weight=%w, pad_type=%custom, pad=%own)""", "")
    assert_rewrites(before, fuse_pad_conv, f"""{HEAD15}(%x: tensor<fp32, [1, 2, 3, 3]>) {{
      {const("w", w)}
      %custom2: tensor<string, []> = const() [val=dense<string, []>("custom")]
      {const("pp", np.array([2, 2, 2, 2]), "int32")}
      %z: tensor<fp32, [1, 1, 6, 6]> = conv(x=%x, weight=%w, pad_type=%custom2, pad=%pp)
    }} -> (%z)""")


def test_zero_pad_into_avg_pool_only_when_padding_counts_in_the_average() -> None:
    pool = "%z: tensor<fp32, [1, 2, 5, 3]> = avg_pool(x=%px, kernel_sizes=%k, strides=%s, pad_type=%valid{})"
    assert_rewrites(_pad_prog(f"{WIN}\n      {pool.format('')}", ""), fuse_pad_avg_pool, f"""{HEAD15}(%x: tensor<fp32, [1, 2, 3, 3]>) {{
      {KS}
      %custom: tensor<string, []> = const() [val=dense<string, []>("custom")]
      {const("pp", np.array([1, 2, 0, 1]), "int32")}
      %z: tensor<fp32, [1, 2, 5, 3]> = avg_pool(x=%x, kernel_sizes=%k, strides=%s, pad_type=%custom, pad=%pp)
    }} -> (%z)""")
    excl = "%ex: tensor<bool, []> = const() [val=dense<bool, []>(true)]"
    assert_refuses(_pad_prog(f"{WIN}\n      {excl}\n      {pool.format(', exclude_padding_from_average=%ex')}", ""),
                   fuse_pad_avg_pool, "exclude_padding_from_average is set")
    ceil = "%cm: tensor<bool, []> = const() [val=dense<bool, []>(true)]"
    assert_refuses(_pad_prog(f"{WIN}\n      {ceil}\n      {pool.format(', ceil_mode=%cm')}", ""),
                   fuse_pad_avg_pool, "ceil_mode is set")


def test_pad_into_max_pool_only_with_minus_infinity() -> None:
    pool = "%z: tensor<fp32, [1, 2, 5, 3]> = max_pool(x=%px, kernel_sizes=%k, strides=%s, pad_type=%valid)"
    assert_refuses(_pad_prog(f"{WIN}\n      {pool}", ""), fuse_pad_max_pool, "the pad value is 0.0, not -inf")
    assert_rewrites(_pad_prog(f"{WIN}\n      {pool}", "", value="-inf"), fuse_pad_max_pool, f"""{HEAD15}(%x: tensor<fp32, [1, 2, 3, 3]>) {{
      {KS}
      %custom: tensor<string, []> = const() [val=dense<string, []>("custom")]
      {const("pp", np.array([1, 2, 0, 1]), "int32")}
      %z: tensor<fp32, [1, 2, 5, 3]> = max_pool(x=%x, kernel_sizes=%k, strides=%s, pad_type=%custom, pad=%pp)
    }} -> (%z)""")


def test_pad_into_conv_refuses_channel_padding_same_padding_and_other_modes() -> None:
    w = np.full((1, 3, 2, 2), 0.5, np.float32)
    assert_refuses(_pad_prog(f"""{const("w", w)}
      %z: tensor<fp32, [1, 1, 2, 2]> = conv(x=%px, weight=%w)""", "", pad=(0, 1, 0, 0, 0, 0), padded="[1, 3, 3, 3]"),
                   fuse_pad_conv, "pads the batch or channel dim")
    w2 = np.full((1, 2, 2, 2), 0.5, np.float32)
    assert_refuses(_pad_prog(f"""{const("w", w2)}
      %same: tensor<string, []> = const() [val=dense<string, []>("same")]
      %z: tensor<fp32, [1, 1, 6, 4]> = conv(x=%px, weight=%w, pad_type=%same)""", ""),
                   fuse_pad_conv, "pad_type 'same' derives its padding from the input size")
    assert_refuses(_pad_prog(f"""{const("w", w2)}
      %z: tensor<fp32, [1, 1, 5, 3]> = conv(x=%px, weight=%w)""", "", mode="replicate", value="0.0"),
                   fuse_pad_conv, "not 'constant'")
    assert_refuses(_pad_prog(f"""{const("w", w2)}
      %z: tensor<fp32, [1, 1, 5, 3]> = conv(x=%px, weight=%w)""", "", value="0.5"),
                   fuse_pad_conv, "is 0.5, not 0.0")


# -- reduce_mean -> global average pooling (webnn, neuralnetwork only) ------------------------------


def _mean(axes, keep: str = "true", x: str = "[2, 3, 4, 5]", out: str = "[2, 3, 1, 1]") -> str:
    return f"""{HEAD15}(%x: tensor<fp32, {x}>) {{
      {const("ax", np.array(axes), "int32")}
      %kd: tensor<bool, []> = const() [val=dense<bool, []>({keep})]
      %z: tensor<fp32, {out}> = reduce_mean(x=%x, axes=%ax, keep_dims=%kd)
    }} -> (%z)"""


def test_reduce_mean_over_spatial_dims_becomes_global_avg_pool() -> None:
    assert_rewrites(_mean([-1, -2]), reduce_mean_to_global_avg_pool, f"""{HEAD15}(%x: tensor<fp32, [2, 3, 4, 5]>) {{
      {const("k", np.array([4, 5]), "int32")}
      {const("s", np.array([1, 1]), "int32")}
      %valid: tensor<string, []> = const() [val=dense<string, []>("valid")]
      %ex: tensor<bool, []> = const() [val=dense<bool, []>(false)]
      %z: tensor<fp32, [2, 3, 1, 1]> = avg_pool(x=%x, kernel_sizes=%k, strides=%s, pad_type=%valid, exclude_padding_from_average=%ex)
    }} -> (%z)""", **TOL)


def test_reduce_mean_refuses_other_axes_dropped_dims_and_symbolic_sizes() -> None:
    assert_refuses(_mean([1, 2, 3], out="[2, 1, 1, 1]"), reduce_mean_to_global_avg_pool,
                   "are not all the spatial dims")
    assert_refuses(_mean([2, 3], keep="false", out="[2, 3]"), reduce_mean_to_global_avg_pool, "not True")
    assert_refuses(_mean([2, 3], x="[2, 3, n, 5]"), reduce_mean_to_global_avg_pool, "are not static")


def test_global_pooling_is_only_in_the_pipelines_of_targets_that_prefer_it() -> None:
    def has(pipeline: str) -> bool:
        return reduce_mean_to_global_avg_pool.name in {r.name for r in rules_of(resolve(pipeline))}
    assert not has("default")
    assert has("webnn") and has("neuralnetwork")
    assert fuse_conv_batchnorm.name in {r.name for r in rules_of(resolve("default"))}


# -- quantize(dequantize(q)) ----------------------------------------------------------------------------


def _requant(s1: str = "0.0375", s2: str = "0.0375", z1: str = "3", z2: str = "3", dt: str = "int8",
             out: str = "int8") -> str:
    return f"""{HEAD17}(%q: tensor<{dt}, [2, 5]>) {{
      %s1: tensor<fp32, []> = const() [val=dense<fp32, []>({s1})]
      %z1: tensor<{dt}, []> = const() [val=dense<{dt}, []>({z1})]
      %f: tensor<fp32, [2, 5]> = dequantize(input=%q, scale=%s1, zero_point=%z1)
      %s2: tensor<fp32, []> = const() [val=dense<fp32, []>({s2})]
      %z2: tensor<{dt}, []> = const() [val=dense<{dt}, []>({z2})]
      %od: tensor<string, []> = const() [val=dense<string, []>("{out}")]
      %r: tensor<{out}, [2, 5]> = quantize(input=%f, scale=%s2, zero_point=%z2, output_dtype=%od)
      %z: tensor<fp32, [2, 5]> = dequantize(input=%r, scale=%s1)
    }} -> (%z)"""


def test_quantize_of_dequantize_with_the_same_parameters_is_the_quantized_value() -> None:
    assert_rewrites(_requant(), quantize_of_dequantize, f"""{HEAD17}(%q: tensor<int8, [2, 5]>) {{
      %s1: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0375)]
      %z: tensor<fp32, [2, 5]> = dequantize(input=%q, scale=%s1)
    }} -> (%z)""")


def test_quantize_of_dequantize_refuses_other_parameters() -> None:
    assert_refuses(_requant(s2="0.05"), quantize_of_dequantize, "the scales differ")
    assert_refuses(_requant(z2="4"), quantize_of_dequantize, "the zero points differ")
    assert_refuses(_requant(s1="3e37", s2="3e37"), quantize_of_dequantize, "|scale| * 255 = 7.65e+39 overflows fp32")
    tiny = repr(2.0**-140)
    assert_refuses(_requant(s1=tiny, s2=tiny), quantize_of_dequantize, "1 / |scale| = 1.3938e+42 overflows fp32")


def test_dequantize_of_quantize_is_kept() -> None:
    """dequantize(quantize(x)) rounds x to the grid and clips it: not x, so no rule removes it."""
    text = f"""{HEAD17}(%x: tensor<fp32, [2, 5]>) {{
      %s: tensor<fp32, []> = const() [val=dense<fp32, []>(0.0375)]
      %od: tensor<string, []> = const() [val=dense<string, []>("int8")]
      %q: tensor<int8, [2, 5]> = quantize(input=%x, scale=%s, output_dtype=%od)
      %z: tensor<fp32, [2, 5]> = dequantize(input=%q, scale=%s)
    }} -> (%z)"""
    from converter.ir.text import parse_program
    prog = parse_program(text)
    before = canonical_text(prog)
    assert not FuseConvFamily().run(prog).modified
    assert canonical_text(prog) == before


def test_constant_minus_conv_refuses_a_runtime_weight() -> None:
    # negating the weight needs its values; the add/sub forms only touch the bias and accept it
    assert_refuses(f"""{HEAD17}({X}, %w: tensor<fp32, [3, 2, 1, 1]>) {{
      %y: {Y} = conv(x=%x, weight=%w)
      {const("c", C3.reshape(3, 1, 1))}
      %z: {Y} = sub(x=%c, y=%y)
    }} -> (%z)""", fuse_const_sub_conv_bias, "'w' is not a constant (an input)")
    assert_rewrites(f"""{HEAD17}({X}, %w: tensor<fp32, [3, 2, 1, 1]>) {{
      %y: {Y} = conv(x=%x, weight=%w)
      {const("c", C3.reshape(3, 1, 1))}
      %z: {Y} = sub(x=%y, y=%c)
    }} -> (%z)""", fuse_conv_sub_bias, f"""{HEAD17}({X}, %w: tensor<fp32, [3, 2, 1, 1]>) {{
      {const("b2", -C3)}
      %z: {Y} = conv(x=%x, weight=%w, bias=%b2)
    }} -> (%z)""", **TOL)


def test_transpose_into_matmul_y_refuses_a_transpose_of_other_axes() -> None:
    assert_refuses(f"""{HEAD15}(%a: tensor<fp32, [2, 3, 4]>, %b: tensor<fp32, [4, 2, 5]>) {{
      {const("p", np.array([1, 0, 2]), "int32")}
      %bt: tensor<fp32, [2, 4, 5]> = transpose(x=%b, perm=%p)
      %z: tensor<fp32, [2, 3, 5]> = matmul(x=%a, y=%bt)
    }} -> (%z)""", fold_transpose_into_matmul_y, "perm [1, 0, 2] does not only swap the last two axes")
