"""Normalization fusions (converter/passes/fusions/layer_norm.py, instance_norm.py): the
decomposition fuses into layer_norm / instance_norm with the right axes, fused epsilon, gamma and
beta (each distinct and non-trivial, so a dropped or swapped parameter fails the value comparison),
refuses its near misses with the reason, and the result computes what torch's F.layer_norm /
F.instance_norm compute (float64, rounded to fp32: an oracle we did not write).

Tolerance (decomposition vs fused, on the helper's standard-normal inputs): rtol 1e-5, atol 1e-5.
The two round in a different order (means summed in another order, one division instead of
rsqrt then a product, gamma/beta applied inside the kernel); on rows of unit spread the results
stay within a few ulps, and the bound leaves room for the amplification of the mean's rounding by
1/sqrt(var + eps) on the helper's small rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.passes.fusions import instance_norm, layer_norm
from converter.passes.fusions.activation_family import FuseNormalizations

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"
TOL = dict(rtol=1e-5, atol=1e-5)
X3 = "tensor<fp32, [2, 3, 4]>"
R3 = "tensor<fp32, [2, 3, 1]>"
GAMMA = [0.5, 1.25, -0.75, 2.0]
BETA = [0.1, -0.3, 0.7, 0.05]


def dense(values, shape) -> str:
    return f"dense<fp32, [{', '.join(map(str, shape))}]>({', '.join(repr(float(v)) for v in values)})"


def ints(values) -> str:
    return f"tensor<int32, [{len(values)}]> = const() [val=dense<int32, [{len(values)}]>({', '.join(map(str, values))})]"


def scalar(name: str, v: float) -> str:
    return f"%{name}: tensor<fp32, []> = const() [val=dense<fp32, []>({v!r})]"


def decomposition(*, axes1=(-1,), axes2=(-1,), square="mul", root="rsqrt", eps=0.003, rsqrt_eps: float | None = 0.011,
                  gamma=GAMMA, beta=BETA, gamma_shape=(4,), beta_shape=(4,), x=X3, r=R3) -> str:
    """The hand-written layer norm of torch_models.layer_norm_by_hand (gamma/beta None: absent)."""
    sq = {"mul": "mul(x=%c, y=%c)", "square": "square(x=%c)", "pow": "pow(x=%c, y=%two)"}[square]
    if root == "rsqrt":
        eps_arg = ", epsilon=%e2" if rsqrt_eps is not None else ""
        norm = f"""  %r: {r} = rsqrt(x=%ve{eps_arg})
  %n: {x} = mul(x=%c, y=%r)"""
    else:
        norm = f"""  %r: {r} = sqrt(x=%ve)
  %n: {x} = real_div(x=%c, y=%r)"""
    lines = [f"  %a1: {ints(axes1)}", f"  %a2: {ints(axes2)}", "  %t: tensor<bool, []> = const() [val=dense<bool, []>(true)]",
             f"  {scalar('eps', eps)}", f"  {scalar('two', 2.0)}"]
    if rsqrt_eps is not None:
        lines.append(f"  {scalar('e2', rsqrt_eps)}")
    body = "\n".join(lines) + f"""
  %mean: {r} = reduce_mean(x=%x, axes=%a1, keep_dims=%t)
  %c: {x} = sub(x=%x, y=%mean)
  %sq: {x} = {sq}
  %var: {r} = reduce_mean(x=%sq, axes=%a2, keep_dims=%t)
  %ve: {r} = add(x=%var, y=%eps)
{norm}"""
    out = "n"
    if gamma is not None:
        body += f"""
  %g: tensor<fp32, [{', '.join(map(str, gamma_shape))}]> = const() [val={dense(gamma, gamma_shape)}]
  %s: {x} = mul(x=%n, y=%g)"""
        out = "s"
    if beta is not None:
        body += f"""
  %b: tensor<fp32, [{', '.join(map(str, beta_shape))}]> = const() [val={dense(beta, beta_shape)}]
  %y: {x} = add(x=%b, y=%{out})"""
        out = "y"
    body = body.replace("%two", "%two") if square == "pow" else body.replace(f"  {scalar('two', 2.0)}\n", "")
    return f"{HEAD}(%x: {x}) {{\n{body}\n}} -> (%{out})"


def torch_layer_norm(prog: Program, shape, normalized, gamma, beta, eps: float) -> None:
    rng = np.random.default_rng(3)
    for scale, offset in ((1.0, 0.0), (5.0, 2.0), (0.1, -1.0)):
        x = (rng.standard_normal(shape) * scale + offset).astype(np.float32)
        got = next(iter(run(prog, {"x": x}).values()))
        g = None if gamma is None else torch.tensor(np.float32(gamma), dtype=torch.float64).reshape(normalized)
        b = None if beta is None else torch.tensor(np.float32(beta), dtype=torch.float64).reshape(normalized)
        want = F.layer_norm(torch.from_numpy(x.astype(np.float64)), normalized, g, b, eps=eps).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def after_layer_norm(axes, eps: float, gamma=GAMMA, beta=BETA, x=X3, normalized=(4,)) -> str:
    lines = [f"  %ax: {ints(axes)}", f"  {scalar('e', eps)}"]
    args = ""
    if gamma is not None:
        lines.append(f"  %g: tensor<fp32, [{', '.join(map(str, normalized))}]> = const() [val={dense(gamma, normalized)}]")
        args += ", gamma=%g"
    if beta is not None:
        lines.append(f"  %b: tensor<fp32, [{', '.join(map(str, normalized))}]> = const() [val={dense(beta, normalized)}]")
        args += ", beta=%b"
    out = "y" if beta is not None else "s" if gamma is not None else "n"
    lines.append(f"  %{out}: {x} = layer_norm(x=%x, axes=%ax{args}, epsilon=%e)")
    return f"{HEAD}(%x: {x}) {{\n" + "\n".join(lines) + f"\n}} -> (%{out})"


def eps32(*parts: float) -> float:
    """The fused epsilon as the rule computes it: the fp32 constants summed, rounded to fp32."""
    return float(np.float32(sum(float(np.float32(p)) for p in parts)))


def test_layer_norm_with_rsqrt_epsilon_gamma_and_beta_fuses_and_matches_torch() -> None:
    eps = eps32(0.003, 0.011)  # the added epsilon plus rsqrt's own: dropping either fails the values
    prog = assert_rewrites(decomposition(), FuseNormalizations(), after_layer_norm([2], eps), **TOL)
    torch_layer_norm(prog, (2, 3, 4), (4,), GAMMA, BETA, eps)


VARIANTS = [(square, root) for square in ("mul", "square", "pow") for root in ("rsqrt", "sqrt")]


@pytest.mark.parametrize("square, root", VARIANTS)
def test_layer_norm_fires_in_each_form_with_gamma_and_beta_and_matches_torch(square: str, root: str) -> None:
    # rsqrt's own epsilon (0.011) adds to the added one; the sqrt form has none
    eps = eps32(0.003, 0.011) if root == "rsqrt" else eps32(0.003)
    before = decomposition(square=square, root=root, rsqrt_eps=0.011 if root == "rsqrt" else None)
    prog = assert_rewrites(before, layer_norm.RULES, after_layer_norm([2], eps), **TOL)
    torch_layer_norm(prog, (2, 3, 4), (4,), GAMMA, BETA, eps)


@pytest.mark.parametrize("square, root", VARIANTS)
def test_layer_norm_refuses_near_misses_in_each_form(square: str, root: str) -> None:
    rsqrt_eps = 0.011 if root == "rsqrt" else None
    # normalized over axis 1 of [2, 3, 4] (not the last): a layer norm of another shape
    assert_refuses(decomposition(axes1=(1,), axes2=(1,), square=square, root=root, rsqrt_eps=rsqrt_eps, gamma=None,
                                 beta=None, r="tensor<fp32, [2, 1, 4]>"), layer_norm.RULES,
                   "axes [1] are not the last axes of a rank-3 x")
    # the variance over the last two axes, the mean over the last one
    r2 = "tensor<fp32, [2, 1, 1]>"
    text = decomposition(axes2=(1, 2), square=square, root=root, rsqrt_eps=rsqrt_eps, gamma=None, beta=None)
    text = text.replace(f"%var: {R3}", f"%var: {r2}").replace(f"%ve: {R3}", f"%ve: {r2}").replace(
        f"%r: {R3}", f"%r: {r2}")
    assert_refuses(text, layer_norm.RULES, "the mean axes differ: [2] for the mean, [1, 2] for the variance")
    # a negative epsilon (a typo'd -3e-3): layer_norm's epsilon must be a positive offset
    assert_refuses(decomposition(eps=-0.003, square=square, root=root, rsqrt_eps=rsqrt_eps, gamma=None, beta=None),
                   layer_norm.RULES, "epsilon -0.003")


def test_layer_norm_rsqrt_default_epsilon_is_added() -> None:
    eps = float(np.float32(float(np.float32(0.003)) + float(np.float32(1e-12))))
    assert_rewrites(decomposition(rsqrt_eps=None), FuseNormalizations(), after_layer_norm([2], eps), **TOL)


def test_layer_norm_over_two_axes_sqrt_form_square_and_mixed_axis_signs() -> None:
    g = np.linspace(0.5, 1.6, 12).round(3)
    b = np.linspace(-0.4, 0.9, 12).round(3)
    before = decomposition(axes1=(1, 2), axes2=(-1, -2), square="square", root="sqrt", rsqrt_eps=None,
                           gamma=g, beta=b, gamma_shape=(3, 4), beta_shape=(1, 3, 4), r="tensor<fp32, [2, 1, 1]>")
    prog = assert_rewrites(before, FuseNormalizations(), after_layer_norm([1, 2], 0.003, g, b, normalized=(3, 4)),
                           **TOL)
    torch_layer_norm(prog, (2, 3, 4), (3, 4), g, b, float(np.float32(0.003)))


def test_layer_norm_pow_form_without_gamma_and_beta() -> None:
    before = decomposition(square="pow", gamma=None, beta=None)
    eps = eps32(0.003, 0.011)
    prog = assert_rewrites(before, layer_norm.RULES, after_layer_norm([2], eps, None, None), **TOL)
    torch_layer_norm(prog, (2, 3, 4), (4,), None, None, eps)


def test_layer_norm_beta_without_gamma_and_a_scalar_gamma() -> None:
    eps = eps32(0.003, 0.011)
    assert_rewrites(decomposition(gamma=None), layer_norm.RULES, after_layer_norm([2], eps, None, BETA), **TOL)
    # a scalar gamma broadcasts over the normalized shape: stored as [4]
    assert_rewrites(decomposition(gamma=[1.5], gamma_shape=(), beta=None), layer_norm.RULES,
                    after_layer_norm([2], eps, [1.5] * 4, None), **TOL)


def test_layer_norm_refuses_different_mean_axes() -> None:
    assert_refuses(decomposition(axes2=(-2,), gamma=None, beta=None).replace(
        f"%var: {R3}", "%var: tensor<fp32, [2, 1, 4]>").replace(f"%ve: {R3}", "%ve: tensor<fp32, [2, 1, 4]>").replace(
        f"%r: {R3}", "%r: tensor<fp32, [2, 1, 4]>"), layer_norm.RULES, "the mean axes differ: [2] for the mean, [1]")


def test_layer_norm_refuses_axes_that_are_not_last_and_a_non_scalar_epsilon() -> None:
    r = "tensor<fp32, [2, 1, 4]>"
    assert_refuses(decomposition(axes1=(1,), axes2=(1,), gamma=None, beta=None, r=r), layer_norm.RULES,
                   "axes [1] are not the last axes")
    per_row = decomposition(gamma=None, beta=None).replace(
        scalar("eps", 0.003), f"%eps: tensor<fp32, [2, 1, 1]> = const() [val={dense([0.003, 0.004], (2, 1, 1))}]")
    assert_refuses(per_row, layer_norm.RULES, "epsilon is not a scalar constant")


def test_layer_norm_refuses_a_gamma_that_is_not_over_the_normalized_shape() -> None:
    # gamma varying along axis 0 (the batch): neither layer_norm's parameter nor instance_norm's
    prog = parse_program(decomposition(gamma=[0.5, 2.0], gamma_shape=(2, 1, 1), beta=None))
    FuseNormalizations().run(prog)
    assert [o.type for o in prog.walk() if o.type != "const"] == ["layer_norm", "mul"]  # gamma kept apart
    stays = f"""{HEAD}(%x: {X3}) {{
  %ax: {ints([2])}
  {scalar('e', 0.014)}
  %n: {X3} = layer_norm(x=%x, axes=%ax, epsilon=%e)
  %g: tensor<fp32, [2, 1, 1]> = const() [val={dense([0.5, 2.0], (2, 1, 1))}]
  %s: {X3} = mul(x=%n, y=%g)
}} -> (%s)"""
    assert_refuses(stays, FuseNormalizations(), "gamma varies along axis 0, which is not normalized")
    assert_refuses(stays, FuseNormalizations(), "gamma varies along axis 0: not one value per channel")


def test_layer_norm_beta_refuses_a_beta_that_is_not_over_the_normalized_shape() -> None:
    # beta one value per batch row (axis 0): neither layer_norm's beta nor instance_norm's
    def shifted(gamma: bool) -> str:
        g = f"""
  %g: tensor<fp32, [4]> = const() [val={dense(GAMMA, (4,))}]""" if gamma else ""
        return f"""{HEAD}(%x: {X3}) {{
  %ax: {ints([2])}
  {scalar('e', 0.014)}{g}
  %n: {X3} = layer_norm(x=%x, axes=%ax{", gamma=%g" if gamma else ""}, epsilon=%e)
  %b: tensor<fp32, [2, 1, 1]> = const() [val={dense([0.4, -1.5], (2, 1, 1))}]
  %y: {X3} = add(x=%n, y=%b)
}} -> (%y)"""

    assert_refuses(shifted(True), FuseNormalizations(), "beta varies along axis 0, which is not normalized (axes [2])")
    assert_refuses(shifted(False), FuseNormalizations(), "beta varies along axis 0, which is not normalized (axes [2])")
    assert_refuses(shifted(False), FuseNormalizations(), "beta varies along axis 0: not one value per channel (axis 1)")


# -- instance_norm --------------------------------------------------------------------------------

X4 = "tensor<fp32, [2, 3, 2, 2]>"
R4 = "tensor<fp32, [2, 3, 1, 1]>"
G_C = [0.5, 1.75, -1.25]
B_C = [0.2, -0.6, 1.1]


def test_instance_norm_from_spatial_decomposition_with_per_channel_gamma_beta_matches_torch() -> None:
    before = decomposition(axes1=(2, 3), axes2=(-2, -1), gamma=G_C, beta=B_C, gamma_shape=(1, 3, 1, 1),
                           beta_shape=(3, 1, 1), x=X4, r=R4)
    eps = eps32(0.003, 0.011)
    after = f"""{HEAD}(%x: {X4}) {{
  {scalar('e', eps)}
  %g: tensor<fp32, [3]> = const() [val={dense(G_C, (3,))}]
  %b: tensor<fp32, [3]> = const() [val={dense(B_C, (3,))}]
  %y: {X4} = instance_norm(x=%x, gamma=%g, beta=%b, epsilon=%e)
}} -> (%y)"""
    prog = assert_rewrites(before, FuseNormalizations(), after, **TOL)
    rng = np.random.default_rng(5)
    for scale in (1.0, 3.0):
        x = (rng.standard_normal((2, 3, 2, 2)) * scale + 0.5).astype(np.float32)
        got = next(iter(run(prog, {"x": x}).values()))
        want = F.instance_norm(torch.from_numpy(x.astype(np.float64)),
                               weight=torch.tensor(np.float32(G_C), dtype=torch.float64),
                               bias=torch.tensor(np.float32(B_C), dtype=torch.float64), eps=eps).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_instance_norm_beta_only() -> None:
    before = f"""{HEAD}(%x: {X4}) {{
  %ax: {ints([2, 3])}
  {scalar('e', 0.02)}
  %n: {X4} = layer_norm(x=%x, axes=%ax, epsilon=%e)
  %b: tensor<fp32, [3, 1, 1]> = const() [val={dense(B_C, (3, 1, 1))}]
  %y: {X4} = add(x=%n, y=%b)
}} -> (%y)"""
    after = f"""{HEAD}(%x: {X4}) {{
  {scalar('e', 0.02)}
  %b: tensor<fp32, [3]> = const() [val={dense(B_C, (3,))}]
  %y: {X4} = instance_norm(x=%x, beta=%b, epsilon=%e)
}} -> (%y)"""
    assert_rewrites(before, instance_norm.RULES, after, **TOL)


def _instance_norm_plus(beta, beta_shape) -> str:
    return f"""{HEAD}(%x: {X4}) {{
  {scalar('e', 0.02)}
  %g: tensor<fp32, [3]> = const() [val={dense(G_C, (3,))}]
  %n: {X4} = instance_norm(x=%x, gamma=%g, epsilon=%e)
  %b: tensor<fp32, [{', '.join(map(str, beta_shape))}]> = const() [val={dense(beta, beta_shape)}]
  %y: {X4} = add(x=%n, y=%b)
}} -> (%y)"""


def test_instance_norm_beta_folds_a_per_channel_shift() -> None:
    after = f"""{HEAD}(%x: {X4}) {{
  {scalar('e', 0.02)}
  %g: tensor<fp32, [3]> = const() [val={dense(G_C, (3,))}]
  %b: tensor<fp32, [3]> = const() [val={dense(B_C, (3,))}]
  %y: {X4} = instance_norm(x=%x, gamma=%g, beta=%b, epsilon=%e)
}} -> (%y)"""
    assert_rewrites(_instance_norm_plus(B_C, (1, 3, 1, 1)), instance_norm.RULES, after, **TOL)


def test_instance_norm_beta_refuses_a_shift_along_a_spatial_or_the_batch_axis() -> None:
    # one value per row (axis 2 of [N, C, H, W]), then one per batch item (axis 0)
    assert_refuses(_instance_norm_plus([0.3, -0.8], (2, 1)), instance_norm.RULES,
                   "beta varies along axis 2: not one value per channel (axis 1)")
    assert_refuses(_instance_norm_plus([0.3, -0.8], (2, 1, 1, 1)), FuseNormalizations(),
                   "beta varies along axis 0: not one value per channel (axis 1)")


def test_instance_norm_beta_only_refuses_a_shift_along_the_batch_axis() -> None:
    text = f"""{HEAD}(%x: {X4}) {{
  %ax: {ints([2, 3])}
  {scalar('e', 0.02)}
  %n: {X4} = layer_norm(x=%x, axes=%ax, epsilon=%e)
  %b: tensor<fp32, [2, 1, 1, 1]> = const() [val={dense([0.3, -0.8], (2, 1, 1, 1))}]
  %y: {X4} = add(x=%n, y=%b)
}} -> (%y)"""
    assert_refuses(text, FuseNormalizations(), "beta varies along axis 0: not one value per channel (axis 1)")


def test_instance_norm_refuses_non_spatial_axes_and_rank_5() -> None:
    x = "tensor<fp32, [2, 3, 2, 2]>"
    text = f"""{HEAD}(%x: {x}) {{
  %ax: {ints([3])}
  {scalar('e', 0.02)}
  %n: {x} = layer_norm(x=%x, axes=%ax, epsilon=%e)
  %g: tensor<fp32, [3, 1, 1]> = const() [val={dense(G_C, (3, 1, 1))}]
  %y: {x} = mul(x=%n, y=%g)
}} -> (%y)"""
    assert_refuses(text, instance_norm.RULES, "the layer_norm's axes [3] are not the spatial axes [2, 3]")
    x5 = "tensor<fp32, [1, 3, 2, 2, 2]>"
    text5 = text.replace(x, x5).replace(ints([3]), ints([2, 3, 4])).replace("[3, 1, 1]", "[3, 1, 1, 1]")
    assert_refuses(text5, instance_norm.RULES, "instance_norm needs x of rank 3 or 4, x has rank 5")


def test_instance_norm_1d_from_a_last_axis_decomposition_with_per_channel_gamma() -> None:
    # [N, C, L] normalized over L: the layer_norm rule takes the normalization, instance_norm the
    # per-channel gamma ([C, 1]: varies along axis 1, which the layer norm does not normalize)
    before = decomposition(gamma=G_C, gamma_shape=(3, 1), beta=None)
    eps = eps32(0.003, 0.011)
    after = f"""{HEAD}(%x: {X3}) {{
  {scalar('e', eps)}
  %g: tensor<fp32, [3]> = const() [val={dense(G_C, (3,))}]
  %s: {X3} = instance_norm(x=%x, gamma=%g, epsilon=%e)
}} -> (%s)"""
    prog = assert_rewrites(before, FuseNormalizations(), after, **TOL)
    x = (np.random.default_rng(2).standard_normal((2, 3, 4)) * 2 + 1).astype(np.float32)
    want = F.instance_norm(torch.from_numpy(x.astype(np.float64)),
                           weight=torch.tensor(np.float32(G_C), dtype=torch.float64), eps=eps).numpy()
    np.testing.assert_allclose(next(iter(run(prog, {"x": x}).values())), want, rtol=1e-5, atol=1e-5)


def test_mvn_with_epsilon_outside_the_square_root_is_not_a_layer_norm() -> None:
    # our NeuralNetwork frontend's mvn: (x - mean) / (sqrt(var) + eps), another function than
    # layer_norm's (x - mean) / sqrt(var + eps) (op_count_baseline.md, transformer_encoder_layer)
    text = decomposition(root="sqrt", rsqrt_eps=None, gamma=None, beta=None).replace(
        f"""  %ve: {R3} = add(x=%var, y=%eps)
  %r: {R3} = sqrt(x=%ve)
  %n: {X3} = real_div(x=%c, y=%r)""", f"""  %sd: {R3} = sqrt(x=%var)
  %r: {R3} = add(x=%sd, y=%eps)
  %n: {X3} = real_div(x=%c, y=%r)""")
    assert "sqrt(x=%var)" in text
    assert_refuses(text, layer_norm.RULES, "'r' is computed by add, not sqrt")
