"""Activation fusions (converter/passes/fusions/: gelu, silu, leaky_relu, prelu, relu6, softplus,
softsign): each rule fires (the IR after written out), refuses its near misses with the reason,
and the fused op computes what torch.nn.functional computes (gelu approximate='none'/'tanh', silu,
leaky_relu, prelu, relu6, softplus, softsign: an oracle we did not write), on inputs spanning
[-12, 12] and beyond.

Tolerances. assert_rewrites compares the decomposition with the fused op on random inputs:
bit-identical (rtol = atol = 0) for relu6, leaky_relu and prelu, which compute the same
elementwise selections; ``ROUNDING`` for the rest, whose decompositions round 2 to 8 times where
the fused op rounds once. Measured over 2e5 inputs in [-20, 20] and |x| up to 1e8 (fp32): at most
1 ulp apart (relative 1.2e-7) beyond an absolute 1e-7, the absolute part being where the
decomposition cancels (gelu's 1 + erf(x / sqrt(2)) for x < -5 gives 0 where gelu gives -1e-7 and
less); ROUNDING doubles both.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.text import parse_program
from converter.passes.fusions import gelu, leaky_relu, prelu, relu6, silu, softplus, softsign
from converter.passes.fusions.activation_family import FuseActivations

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"
ROUNDING = dict(rtol=2.4e-7, atol=2e-7)
T = "tensor<fp32, [2, 3]>"
T4 = "tensor<fp32, [1, 3, 2, 2]>"


def c(name: str, value: float) -> str:
    return f"%{name}: tensor<fp32, []> = const() [val=dense<fp32, []>({value!r})]"


def func(body: str, shape: str = T, out: str = "y") -> str:
    return f"{HEAD}(%x: {shape}) {{\n{body}\n}} -> (%{out})"


def f32(v: float) -> float:
    """``v`` as the fp32 constant in the program holds it (the oracle computes in float64)."""
    return float(np.float32(v))


def rule_named(rules, name):
    return next(r for r in rules if r.name == name)


def oracle(prog: Program, torch_fn, *, shape=(2, 3), rtol=2.4e-7, atol=1e-7, scale=6.0, seed=1) -> None:
    """``prog`` (one input %x, one output) computes ``torch_fn`` on inputs of magnitude ``scale``
    (plus a few far out and special values). torch computes in float64, rounded to fp32: its fp32
    kernels round intermediates (fp32 gelu is 1% off near x = -4.5, where 1 + erf cancels), the fused
    ops round once."""
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(shape) * scale).astype(np.float32) for _ in range(20)]
    xs.append(np.resize(np.array([0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 1e4, -1e4, 3.0, -3.0], np.float32), shape))
    for x in xs:
        got = next(iter(run(prog, {"x": x}).values()))
        want = torch_fn(torch.from_numpy(x.astype(np.float64))).numpy().astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def ops_of(prog: Program) -> list[str]:
    return [o.type for o in prog.walk() if o.type != "const"]


# -- gelu --------------------------------------------------------------------------------------

GELU_EXACT = {
    "gelu_exact_half_x": """  %h = mul(x=%x, y=%half)
  %a = add(x=%one, y=erf(x=real_div(x=%x, y=%r2)))
  %y = mul(x=%a, y=%h)""",
    "gelu_exact_half_last": """  %a = add(x=erf(x=real_div(x=%x, y=%r2)), y=%one)
  %p = mul(x=%x, y=%a)
  %y = mul(x=%half, y=%p)""",
    "gelu_exact_half_inner": """  %a = add(x=erf(x=real_div(x=%x, y=%r2)), y=%one)
  %q = mul(x=%a, y=%half)
  %y = mul(x=%x, y=%q)""",
}


def _typed(body: str, shape: str = T) -> str:
    """Give every line ``%v = op(...)`` the type ``shape`` and hoist nested calls into lines."""
    out: list[str] = []
    n = 0
    for line in body.strip().splitlines():
        line = line.strip()
        name, expr = (s.strip() for s in line.split("=", 1))
        while True:  # innermost call op(...) nested inside an argument list
            i = expr.find("(")
            inner_at = -1
            for k in range(i + 1, len(expr)):
                if expr[k] == "(":
                    j = k
                    while j > 0 and (expr[j - 1].isalnum() or expr[j - 1] == "_"):
                        j -= 1
                    inner_at = j
            if inner_at < 0:
                break
            end = expr.index(")", inner_at) + 1
            tmp = f"%t{n}"
            n += 1
            out.append(f"  {tmp}: {shape} = {expr[inner_at:end]}")
            expr = expr[:inner_at] + tmp + expr[end:]
        out.append(f"  {name}: {shape} = {expr}")
    return "\n".join(out)


def _gelu_before(body: str, scale_line: str | None = None) -> str:
    consts = [c("half", 0.5), c("one", 1.0), scale_line or c("r2", 1.4142135)]
    return func("\n".join(f"  {s}" for s in consts) + "\n" + _typed(body))


def _gelu_after(mode: str) -> str:
    return func(f"""  %m: tensor<string, []> = const() [val=dense<string, []>("{mode}")]
  %y: {T} = gelu(x=%x, mode=%m)""")


@pytest.mark.parametrize("name", sorted(GELU_EXACT))
def test_gelu_exact_fires_in_each_arrangement_and_matches_torch(name: str) -> None:
    prog = assert_rewrites(_gelu_before(GELU_EXACT[name]), rule_named(gelu.RULES, name), _gelu_after("EXACT"),
                           **ROUNDING)
    oracle(prog, lambda x: F.gelu(x, approximate="none"), atol=2e-7)
    # the decomposition itself is torch's gelu too (the test's program is what we think it is)
    oracle(parse_program(_gelu_before(GELU_EXACT[name])), lambda x: F.gelu(x, approximate="none"), atol=4e-7)


def test_gelu_exact_with_multiplication_by_one_over_sqrt2() -> None:
    body = GELU_EXACT["gelu_exact_half_x"].replace("real_div(x=%x, y=%r2)", "mul(x=%r2, y=%x)")
    assert_rewrites(_gelu_before(body, c("r2", 0.70710677)), FuseActivations(), _gelu_after("EXACT"), **ROUNDING)


def test_gelu_exact_refuses_a_constant_that_is_not_sqrt2() -> None:
    assert_refuses(_gelu_before(GELU_EXACT["gelu_exact_half_x"], c("r2", 1.414)), gelu.RULES,
                   "x is divided by a constant that is not sqrt(2): 1.414")
    # the multiplicative form with sqrt(2) itself (not its inverse) is another function
    body = GELU_EXACT["gelu_exact_half_x"].replace("real_div(x=%x, y=%r2)", "mul(x=%x, y=%r2)")
    assert_refuses(_gelu_before(body), gelu.RULES, "not 1/sqrt(2)")


def test_gelu_exact_refuses_another_half_and_a_shared_intermediate() -> None:
    text = _gelu_before(GELU_EXACT["gelu_exact_half_x"]).replace("(0.5)", "(0.25)")
    assert_refuses(text, gelu.RULES, "is 0.25, not 0.5")
    # erf's result also an output: fusing would compute erf twice
    shared = func("\n".join(f"  {s}" for s in (c("half", 0.5), c("one", 1.0), c("r2", 1.4142135))) + "\n" + _typed(
        """  %e = erf(x=real_div(x=%x, y=%r2))
  %a = add(x=%e, y=%one)
  %y = mul(x=mul(x=%x, y=%half), y=%a)""")).replace("-> (%y)", "-> (%y, %e)")
    assert_refuses(shared, gelu.RULES, "outside")


@pytest.mark.parametrize("name", sorted(GELU_EXACT))
def test_gelu_exact_refuses_near_misses_in_each_arrangement(name: str) -> None:
    # 1.414 is not sqrt(2) to fp32 precision; 0.45 is not the 0.5, wherever the 0.5 stands
    assert_refuses(_gelu_before(GELU_EXACT[name], c("r2", 1.414)), gelu.RULES,
                   "x is divided by a constant that is not sqrt(2): 1.414")
    assert_refuses(_gelu_before(GELU_EXACT[name]).replace("(0.5)", "(0.45)"), gelu.RULES,
                   "constant 'half' is 0.449999988")
    # 1/sqrt(2) written where sqrt(2) divides: the multiplicative form's constant, used as a divisor
    assert_refuses(_gelu_before(GELU_EXACT[name], c("r2", 0.70710677)), gelu.RULES,
                   "not sqrt(2): 0.7071067")


def _gelu_tanh(cube: str, arrangement: str, k: float = 0.044715, s: float = 0.7978846) -> str:
    cube_expr = "pow(x=%x, y=%three)" if cube == "pow" else "mul(x=%x, y=mul(x=%x, y=%x))"
    inner = f"""  %u = mul(x=%k, y={cube_expr})
  %i = add(x=%x, y=%u)
  %a = add(x=tanh(x=mul(x=%i, y=%s)), y=%one)"""
    outer = {"half_x": "  %y = mul(x=mul(x=%half, y=%x), y=%a)",
             "half_last": "  %y = mul(x=mul(x=%a, y=%x), y=%half)",
             "half_inner": "  %y = mul(x=%x, y=mul(x=%a, y=%half))"}[arrangement]
    consts = (c("half", 0.5), c("one", 1.0), c("k", k), c("s", s)) + ((c("three", 3.0),) if cube == "pow" else ())
    return func("\n".join(f"  {x}" for x in consts) + "\n" + _typed(inner + "\n" + outer))


@pytest.mark.parametrize("cube", ["pow", "mul"])
@pytest.mark.parametrize("arrangement", ["half_x", "half_last", "half_inner"])
def test_gelu_tanh_fires_in_each_arrangement_and_matches_torch(cube: str, arrangement: str) -> None:
    before = _gelu_tanh(cube, arrangement)
    prog = assert_rewrites(before, rule_named(gelu.RULES, f"gelu_tanh_{cube}_{arrangement}"),
                           _gelu_after("TANH_APPROXIMATION"), **ROUNDING)
    oracle(prog, lambda x: F.gelu(x, approximate="tanh"), atol=2e-7)
    oracle(parse_program(before), lambda x: F.gelu(x, approximate="tanh"), atol=4e-7)


@pytest.mark.parametrize("cube", ["pow", "mul"])
@pytest.mark.parametrize("arrangement", ["half_x", "half_last", "half_inner"])
def test_gelu_tanh_refuses_near_misses_in_each_arrangement(cube: str, arrangement: str) -> None:
    assert_refuses(_gelu_tanh(cube, arrangement, k=0.045), gelu.RULES,
                   "the coefficient of x^3 is not 0.044715: 0.045")
    assert_refuses(_gelu_tanh(cube, arrangement, s=0.8), gelu.RULES, "not scaled by sqrt(2/pi): 0.8")
    # sqrt(2/pi) rounded to 3 digits (0.798) is another number, not sqrt(2/pi) in fp32
    assert_refuses(_gelu_tanh(cube, arrangement, s=0.798), gelu.RULES, "not scaled by sqrt(2/pi): 0.797999978")


def test_gelu_tanh_refuses_other_constants_and_is_never_the_exact_form() -> None:
    assert_refuses(_gelu_tanh("pow", "half_x", k=0.045), gelu.RULES, "the coefficient of x^3 is not 0.044715")
    assert_refuses(_gelu_tanh("pow", "half_x", s=0.8), gelu.RULES, "not scaled by sqrt(2/pi): 0.8")
    # the tanh form fuses to mode TANH_APPROXIMATION only (checked above); torch's two gelus
    # differ by up to ~5e-4, so a swap would fail the oracle comparison
    prog = parse_program(_gelu_tanh("mul", "half_inner"))
    FuseActivations().run(prog)
    with pytest.raises(AssertionError):
        oracle(prog, lambda x: F.gelu(x, approximate="none"), scale=2.0)


# -- silu ----------------------------------------------------------------------------------------


def test_silu_fires_and_matches_torch() -> None:
    before = func(f"""  %s: {T} = sigmoid(x=%x)
  %y: {T} = mul(x=%s, y=%x)""")
    prog = assert_rewrites(before, silu.silu, func(f"  %y: {T} = silu(x=%x)"), **ROUNDING)
    oracle(prog, F.silu)


def test_silu_refuses_the_sigmoid_of_another_value() -> None:
    assert_refuses(func(f"""  %r: {T} = relu(x=%x)
  %s: {T} = sigmoid(x=%r)
  %y: {T} = mul(x=%s, y=%x)"""), silu.silu, "is not 'x'")


# -- leaky_relu and prelu --------------------------------------------------------------------------


def _leaky_after(alpha: float) -> str:
    return func(f"""  {c("al", alpha)}
  %y: {T} = leaky_relu(x=%x, alpha=%al)""")


def test_leaky_relu_from_max_fires_and_matches_torch() -> None:
    before = func(f"""  {c("a", 0.15)}
  %n: {T} = mul(x=%a, y=%x)
  %y: {T} = maximum(x=%n, y=%x)""")
    prog = assert_rewrites(before, leaky_relu.leaky_relu_from_max, _leaky_after(0.15))
    oracle(prog, lambda x: F.leaky_relu(x, f32(0.15)), rtol=0, atol=0)


def test_leaky_relu_from_max_refuses_slopes_outside_0_1() -> None:
    for alpha in (1.5, -0.2, 0.0):
        assert_refuses(func(f"""  {c("a", alpha)}
  %n: {T} = mul(x=%x, y=%a)
  %y: {T} = maximum(x=%x, y=%n)"""), leaky_relu.leaky_relu_from_max, "only for 0 < alpha < 1")


@pytest.mark.parametrize("cond, a, b", [("greater", "%x", "%n"), ("greater_equal", "%x", "%n"),
                                        ("less", "%n", "%x"), ("less_equal", "%n", "%x")])
def test_leaky_relu_from_select_fires_for_any_slope(cond: str, a: str, b: str) -> None:
    before = func(f"""  {c("zero", 0.0)}
  {c("al", 1.7)}
  %t: tensor<bool, [2, 3]> = {cond}(x=%x, y=%zero)
  %n: {T} = mul(x=%x, y=%al)
  %y: {T} = select(cond=%t, a={a}, b={b})""")
    prog = assert_rewrites(before, leaky_relu.RULES, _leaky_after(1.7))
    oracle(prog, lambda x: F.leaky_relu(x, f32(1.7)), rtol=0, atol=0)


def test_leaky_relu_from_select_refuses_the_branches_swapped() -> None:
    assert_refuses(func(f"""  {c("zero", 0.0)}
  {c("al", 0.3)}
  %t: tensor<bool, [2, 3]> = greater(x=%x, y=%zero)
  %n: {T} = mul(x=%x, y=%al)
  %y: {T} = select(cond=%t, a=%n, b=%x)"""), leaky_relu.RULES, "input 'a' of select 'y': 'n' is not 'x'")


SELECT_FORMS = [("greater", "%x", "%n"), ("greater_equal", "%x", "%n"), ("less", "%n", "%x"), ("less_equal", "%n", "%x")]


@pytest.mark.parametrize("cond, a, b", SELECT_FORMS)
def test_leaky_relu_from_select_refuses_another_threshold_and_a_slope_along_the_last_axis(cond: str, a: str,
                                                                                         b: str) -> None:
    # x compared with 0.25, not 0: the select switches at 0.25, leaky_relu at 0
    assert_refuses(func(f"""  {c("thr", 0.25)}
  {c("al", 0.3)}
  %t: tensor<bool, [2, 3]> = {cond}(x=%x, y=%thr)
  %n: {T} = mul(x=%x, y=%al)
  %y: {T} = select(cond=%t, a={a}, b={b})"""), leaky_relu.RULES, "constant 'thr' is 0.25, not 0.0")
    # a slope per position of the last axis of [N, C, H, W]: neither leaky_relu nor prelu
    assert_refuses(func(f"""  {c("zero", 0.0)}
  %al: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.25, 0.5)]
  %t: tensor<bool, [1, 3, 2, 2]> = {cond}(x=%x, y=%zero)
  %n: {T4} = mul(x=%x, y=%al)
  %y: {T4} = select(cond=%t, a={a}, b={b})""", T4), leaky_relu.RULES, "the slope varies along axes [3]")


ALPHA_C = "dense<fp32, [3, 1, 1]>(0.25, 0.125, 0.375)"
PRELU_AFTER = func(f"""  %al: tensor<fp32, [3]> = const() [val=dense<fp32, [3]>(0.25, 0.125, 0.375)]
  %y: {T4} = prelu(x=%x, alpha=%al)""", T4)


def _torch_prelu(x: torch.Tensor) -> torch.Tensor:
    return F.prelu(x, torch.tensor([0.25, 0.125, 0.375], dtype=x.dtype))


def test_prelu_from_relu_plus_alpha_min_fires_and_matches_torch() -> None:
    before = func(f"""  {c("zero", 0.0)}
  %al: tensor<fp32, [3, 1, 1]> = const() [val={ALPHA_C}]
  %p: {T4} = relu(x=%x)
  %n: {T4} = minimum(x=%zero, y=%x)
  %s: {T4} = mul(x=%al, y=%n)
  %y: {T4} = add(x=%s, y=%p)""", T4)
    prog = assert_rewrites(before, prelu.prelu_from_relu_min, PRELU_AFTER)
    oracle(prog, _torch_prelu, shape=(1, 3, 2, 2), rtol=0, atol=0)


def test_prelu_keras_forms_fire_and_match_torch() -> None:
    neg = "dense<fp32, [3, 1, 1]>(-0.25, -0.125, -0.375)"
    for root, alpha in (("add", neg), ("sub", ALPHA_C)):
        before = func(f"""  {c("m1", -1.0)}
  %al: tensor<fp32, [3, 1, 1]> = const() [val={alpha}]
  %p: {T4} = relu(x=%x)
  %m: {T4} = mul(x=%x, y=%m1)
  %r: {T4} = relu(x=%m)
  %s: {T4} = mul(x=%r, y=%al)
  %y: {T4} = {root}(x=%p, y=%s)""", T4)
        prog = assert_rewrites(before, prelu.RULES, PRELU_AFTER)
        oracle(prog, _torch_prelu, shape=(1, 3, 2, 2), rtol=0, atol=0)


@pytest.mark.parametrize("root", ["add", "sub"])
def test_prelu_keras_forms_refuse_another_negation_and_a_slope_along_the_last_axis(root: str) -> None:
    def keras(m1: float, alpha: str, alpha_shape: str) -> str:
        return func(f"""  {c("m1", m1)}
  %al: tensor<fp32, {alpha_shape}> = const() [val={alpha}]
  %p: {T4} = relu(x=%x)
  %m: {T4} = mul(x=%x, y=%m1)
  %r: {T4} = relu(x=%m)
  %s: {T4} = mul(x=%r, y=%al)
  %y: {T4} = {root}(x=%p, y=%s)""", T4)

    sign = "-" if root == "add" else ""
    per_channel = f"dense<fp32, [3, 1, 1]>({sign}0.25, {sign}0.125, {sign}0.375)"
    # relu(-0.5 x) is not relu(-x): the negative side would be scaled by half the slope
    assert_refuses(keras(-0.5, per_channel, "[3, 1, 1]"), prelu.RULES, "constant 'm1' is -0.5, not -1.0")
    assert_refuses(keras(-1.0, f"dense<fp32, [2]>({sign}0.25, {sign}0.5)", "[2]"), prelu.RULES,
                   "the slope varies along axes [3]")


def test_per_channel_max_form_is_prelu_and_a_scalar_slope_is_leaky_relu() -> None:
    before = func(f"""  %al: tensor<fp32, [1, 3, 1, 1]> = const() [val=dense<fp32, [1, 3, 1, 1]>(0.25, 0.125, 0.375)]
  %n: {T4} = mul(x=%x, y=%al)
  %y: {T4} = maximum(x=%x, y=%n)""", T4)
    assert_rewrites(before, leaky_relu.RULES, PRELU_AFTER)
    scalar = func(f"""  {c("zero", 0.0)}
  {c("al", 0.3)}
  %p: {T} = relu(x=%x)
  %n: {T} = minimum(x=%x, y=%zero)
  %s: {T} = mul(x=%n, y=%al)
  %y: {T} = add(x=%p, y=%s)""")
    prog = assert_rewrites(scalar, prelu.RULES, _leaky_after(0.3))
    oracle(prog, lambda x: F.leaky_relu(x, f32(0.3)), rtol=0, atol=0)


def test_prelu_refuses_a_slope_along_another_axis() -> None:
    assert_refuses(func(f"""  {c("zero", 0.0)}
  %al: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.25, 0.5)]
  %p: {T4} = relu(x=%x)
  %n: {T4} = minimum(x=%x, y=%zero)
  %s: {T4} = mul(x=%n, y=%al)
  %y: {T4} = add(x=%p, y=%s)""", T4), prelu.RULES, "the slope varies along axes [3]")


# -- relu6 -------------------------------------------------------------------------------------


RELU6_FORMS = {
    "relu6_from_clip": f"""  {c("lo", 0.0)}
  {c("hi", 6.0)}
  %y: {T} = clip(x=%x, alpha=%lo, beta=%hi)""",
    "relu6_from_max_min": f"""  {c("lo", 0.0)}
  {c("hi", 6.0)}
  %p: {T} = maximum(x=%lo, y=%x)
  %y: {T} = minimum(x=%hi, y=%p)""",
    "relu6_from_min_max": f"""  {c("lo", 0.0)}
  {c("hi", 6.0)}
  %p: {T} = minimum(x=%x, y=%hi)
  %y: {T} = maximum(x=%p, y=%lo)""",
    "relu6_from_relu_min": f"""  {c("hi", 6.0)}
  %p: {T} = relu(x=%x)
  %y: {T} = minimum(x=%p, y=%hi)""",
}


@pytest.mark.parametrize("name", sorted(RELU6_FORMS))
def test_relu6_fires_bit_exact_and_matches_torch(name: str) -> None:
    prog = assert_rewrites(func(RELU6_FORMS[name]), rule_named(relu6.RULES, name), func(f"  %y: {T} = relu6(x=%x)"))
    oracle(prog, F.relu6, rtol=0, atol=0)


def test_relu6_refuses_other_bounds() -> None:
    assert_refuses(func(RELU6_FORMS["relu6_from_clip"].replace("(6.0)", "(5.0)")), relu6.RULES, "is 5.0, not 6.0")
    assert_refuses(func(RELU6_FORMS["relu6_from_min_max"].replace("(0.0)", "(-1.0)")), relu6.RULES,
                   "is -1.0, not 0.0")


@pytest.mark.parametrize("name", sorted(RELU6_FORMS))
def test_relu6_refuses_another_upper_bound_in_each_form(name: str) -> None:
    assert_refuses(func(RELU6_FORMS[name].replace("(6.0)", "(6.5)")), relu6.RULES, "is 6.5, not 6.0")


@pytest.mark.parametrize("name", sorted(set(RELU6_FORMS) - {"relu6_from_relu_min"}))
def test_relu6_refuses_another_lower_bound_in_each_form(name: str) -> None:
    # the constant second: with maximum(x=%lo, y=%x) the explanation reported is the commuted
    # attempt's ("'x' is not a constant"), equally far in the matcher's measure
    text = RELU6_FORMS[name].replace("maximum(x=%lo, y=%x)", "maximum(x=%x, y=%lo)").replace("(0.0)", "(-0.5)")
    assert_refuses(func(text), relu6.RULES, "constant 'lo' is -0.5, not 0.0")


def test_relu6_from_relu_min_refuses_a_max_in_place_of_the_min() -> None:
    # max(relu(x), 6) is 6 for x < 6: another function
    assert_refuses(func(RELU6_FORMS["relu6_from_relu_min"].replace("minimum(", "maximum(")), relu6.RULES,
                   "is computed by relu, not minimum")


# A constant that broadcasts x to a larger shape: the fused op keeps x's shape. With x [n, 3] and a
# [2, 3] constant, the decomposition's result is [2, 3] (n broadcast to 2); leaky_relu(x) / relu6(x)
# is [n, 3], which for n = 1 is [1, 3]. The engine's type check lets the symbol n stand for the
# static 2, so these rules fire and change the output's shape (and the function's declared output
# type from [2, 3] to [n, 3]). Static shapes are refused (the replacement's type differs).
BROADCASTING_CONSTANT = {
    "leaky_relu_from_max": (leaky_relu.RULES, """  %a: tensor<fp32, [2, 3]> = const() [val=dense<fp32, [2, 3]>(0.2, 0.2, 0.2, 0.2, 0.2, 0.2)]
  %n: tensor<fp32, [2, 3]> = mul(x=%x, y=%a)
  %y: tensor<fp32, [2, 3]> = maximum(x=%x, y=%n)"""),
    "relu6_from_relu_min": (relu6.RULES, """  %hi: tensor<fp32, [2, 3]> = const() [val=dense<fp32, [2, 3]>(6.0, 6.0, 6.0, 6.0, 6.0, 6.0)]
  %p: tensor<fp32, [n, 3]> = relu(x=%x)
  %y: tensor<fp32, [2, 3]> = minimum(x=%p, y=%hi)"""),
}


@pytest.mark.parametrize("name", sorted(BROADCASTING_CONSTANT))
def test_a_constant_that_broadcasts_a_symbolic_x_is_not_fused(name: str) -> None:
    rules, body = BROADCASTING_CONSTANT[name]
    text = f"{HEAD}(%x: tensor<fp32, [n, 3]>) {{\n{body}\n}} -> (%y)"
    prog = parse_program(text)
    x = np.array([[-1.5, 2.25, 7.0]], np.float32)  # n = 1: the decomposition broadcasts it to [2, 3]
    assert run(prog, {"x": x})["y"].shape == (2, 3)
    assert_refuses(text, rules, "the replacement of 'y' has type")


def test_a_constant_that_broadcasts_a_static_x_is_not_fused() -> None:
    rules, body = BROADCASTING_CONSTANT["leaky_relu_from_max"]
    static = f"{HEAD}(%x: tensor<fp32, [1, 3]>) {{\n{body}\n}} -> (%y)"
    assert_refuses(static, rules, "the replacement of 'y' has type")


# -- softplus and softsign -----------------------------------------------------------------------


SOFTPLUS = f"""  {c("one", 1.0)}
  %e: {T} = exp(x=%x)
  %a: {T} = add(x=%one, y=%e)
  %y: {T} = log(x=%a)"""


def test_softplus_fires_and_matches_torch() -> None:
    prog = assert_rewrites(func(SOFTPLUS), softplus.softplus, func(f"  %y: {T} = softplus(x=%x)"), **ROUNDING)
    # torch's softplus (threshold 20: x itself above) is the oracle; the range includes x = 40 and
    # 1e4, where the decomposition overflows or loses everything
    oracle(prog, F.softplus, rtol=1e-6, atol=1e-7)


def test_softplus_refuses_a_log_epsilon_that_changes_the_sum() -> None:
    text = func(SOFTPLUS.replace("log(x=%a)", "log(x=%a, epsilon=%eps)").replace(
        "  %e:", f"  {c('eps', 1e-3)}\n  %e:"))
    assert_refuses(text, softplus.softplus, "log's epsilon 0.001")


def test_softplus_keeps_a_tiny_log_epsilon() -> None:
    text = func(SOFTPLUS.replace("log(x=%a)", "log(x=%a, epsilon=%eps)").replace(
        "  %e:", f"  {c('eps', 1e-30)}\n  %e:"))
    assert_rewrites(text, softplus.softplus, func(f"  %y: {T} = softplus(x=%x)"), **ROUNDING)


SOFTSIGN = f"""  {c("one", 1.0)}
  %a: {T} = abs(x=%x)
  %d: {T} = add(x=%a, y=%one)
  %y: {T} = real_div(x=%x, y=%d)"""


def test_softsign_fires_and_matches_torch() -> None:
    prog = assert_rewrites(func(SOFTSIGN), softsign.softsign, func(f"  %y: {T} = softsign(x=%x)"), **ROUNDING)
    oracle(prog, F.softsign)


def test_softsign_refuses_the_abs_of_another_value_and_another_offset() -> None:
    assert_refuses(func(SOFTSIGN.replace("(1.0)", "(2.0)")), softsign.softsign, "is 2.0, not 1.0")
    assert_refuses(func(SOFTSIGN.replace("%d: tensor<fp32, [2, 3]> = add(x=%a", f"%s: {T} = sigmoid(x=%x)\n"
                                         f"  %b: {T} = abs(x=%s)\n  %d: {T} = add(x=%b")), softsign.softsign,
                   "is not 'x'")


# -- registration ----------------------------------------------------------------------------------


def test_rules_declare_whether_they_keep_results_bit_for_bit() -> None:
    from converter.passes.fusions.activation_family import ACTIVATION_RULES, NORMALIZATION_RULES

    exact = {r.name for r in ACTIVATION_RULES + NORMALIZATION_RULES if r.exact}
    assert exact == {r.name for r in relu6.RULES + leaky_relu.RULES + prelu.RULES}


def test_the_fusion_passes_are_registered_and_in_the_default_pipeline() -> None:
    from converter.passes.pipelines import PASSES, default_pipeline

    names = [p.name for p in default_pipeline()]
    assert {"fuse_activations", "fuse_normalizations"} <= set(PASSES) and \
        {"fuse_activations", "fuse_normalizations"} <= set(names)
