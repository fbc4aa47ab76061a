"""Property: random programs (with nested cond / while_loop blocks) survive text print -> parse ->
print unchanged, pass the verifier, and run to bit-identical outputs after parsing."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converter.ir.builder import Builder, new_program
from converter.ir.core import Value
from converter.ir.interpreter import run
from converter.ir.opdef import registered_op_types
from converter.ir.text import parse_program, print_program
from converter.ir.types import Symbol, tensor
from converter.ir.verify import verify

BINARY = ["add", "sub", "mul", "maximum", "minimum", "real_div"]
UNARY_CANDIDATES = ["relu", "abs", "tanh", "sigmoid", "square", "sin", "cos", "floor", "ceil", "sign", "exp"]
COMPARE = ["less", "greater", "equal", "greater_equal"]


def _unary_ops() -> list[str]:
    have = set(registered_op_types())
    return [op for op in UNARY_CANDIDATES if op in have]


class _Gen:
    """Draws ops into a builder from a pool of fp32 values that all broadcast to the same shape."""

    def __init__(self, draw, depth: int) -> None:
        self.draw = draw
        self.depth = depth

    def ops(self, b: Builder, pool: list[Value], n: int) -> list[Value]:
        pool = list(pool)
        for _ in range(n):
            kind = self.draw(st.sampled_from(["binary", "binary", "unary", "const", "cond", "loop"]))
            if kind == "binary":
                op = self.draw(st.sampled_from(BINARY))
                x = self.draw(st.sampled_from(pool))
                y = self.draw(st.sampled_from(pool))
                pool.append(getattr(b, op)(x=x, y=y))
            elif kind == "unary" and _unary_ops():
                op = self.draw(st.sampled_from(_unary_ops()))
                pool.append(getattr(b, op)(x=self.draw(st.sampled_from(pool))))
            elif kind == "const":
                val = self.draw(st.floats(-4, 4, allow_nan=False, width=32) | st.sampled_from([0.0, -0.0, 0.1, 1e-30]))
                x = self.draw(st.sampled_from(pool))
                pool.append(b.mul(x=x, y=np.float32(val)))
            elif kind == "cond" and self.depth < 2:
                pool.append(self.cond(b, pool))
            elif kind == "loop" and self.depth < 2:
                pool.append(self.loop(b, pool))
        return pool

    def cond(self, b: Builder, pool: list[Value]) -> Value:
        x = self.draw(st.sampled_from(pool))
        y = self.draw(st.sampled_from(pool))
        # a data-dependent predicate: compare two reductions of pool values
        pred = getattr(b, self.draw(st.sampled_from(COMPARE)))(x=b.reduce_max(x=x, axes=None),
                                                               y=b.reduce_min(x=y, axes=None))
        inner = _Gen(self.draw, self.depth + 1)
        n1, n2 = self.draw(st.integers(0, 3)), self.draw(st.integers(0, 3))

        def branch(n):
            def fn(bb: Builder):
                vals = inner.ops(bb, pool, n)
                # the branch result must have the common broadcast shape: add the widest value
                return [bb.add(x=vals[-1], y=widest(pool))]
            return fn

        (out,) = b.cond(pred, branch(n1), branch(n2))
        return out

    def loop(self, b: Builder, pool: list[Value]) -> Value:
        trips = self.draw(st.integers(0, 3))
        start = widest(pool)
        inner = _Gen(self.draw, self.depth + 1)
        n = self.draw(st.integers(0, 2))

        def body(bb: Builder, i: Value, acc: Value):
            vals = inner.ops(bb, [acc] + pool, n)
            nxt = bb.tanh(x=vals[-1]) if "tanh" in registered_op_types() else bb.mul(x=vals[-1], y=np.float32(0.5))
            return [bb.add(x=i, y=np.int32(1)), bb.add(x=nxt, y=acc)]

        _, acc = b.while_loop([b.const(np.int32(0)), start], lambda cb, i, acc: cb.less(x=i, y=np.int32(trips)), body)
        return acc


def widest(pool: list[Value]) -> Value:
    return max(pool, key=lambda v: len(v.type.shape or ()))


@st.composite
def programs(draw):
    symbolic = draw(st.booleans())
    n = Symbol("n", lower=1, upper=8) if symbolic else 3
    shapes = [[2, n], [n], [1, n], []]
    k = draw(st.integers(1, 3))
    in_shapes = [[2, n]] + [draw(st.sampled_from(shapes)) for _ in range(k - 1)]
    inputs = {f"in{i}": tensor("fp32", s) for i, s in enumerate(in_shapes)}
    gen = _Gen(draw, 0)
    n_ops = draw(st.integers(1, 8))
    n_out = draw(st.integers(1, 3))

    def body(b: Builder, *args: Value):
        pool = gen.ops(b, list(args), n_ops)
        return [draw(st.sampled_from(pool[len(args):] or pool)) for _ in range(n_out)]

    prog = new_program(inputs, body)
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    feeds = {}
    for name, t in inputs.items():
        shape = [3 if isinstance(d, Symbol) else d for d in t.shape]
        feeds[name] = rng.standard_normal(shape).astype(np.float32)
    return prog, feeds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_print_parse_print_is_identity_and_semantics_survive(case):
    prog, feeds = case
    verify(prog)
    text = print_program(prog)
    parsed = parse_program(text)
    assert print_program(parsed) == text
    verify(parsed)
    a = run(prog, feeds)
    b = run(parsed, feeds)
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
        assert a[k].dtype == b[k].dtype


def test_literals_round_trip_exactly():
    vals = {
        "f32": np.array([0.1, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3.4028235e38], np.float32),
        "f16": np.array([0.1, 65504, 6e-8, -0.0, np.nan], np.float16),
        "f64": np.array([0.1, 1 / 3, 5e-324], np.float64),
        "i64": np.array([-(2**63), 2**63 - 1], np.int64),
        "u8": np.array([0, 255], np.uint8),
        "b": np.array([[True, False]]),
        "s": np.array(["a\"b", "ünï", "\n"]),
    }

    def body(b: Builder, x: Value):
        outs = [x]
        for k, v in vals.items():
            outs.append(b.const(v, name=k))
        return outs

    prog = new_program({"x": tensor("fp32", [2])}, body)
    text = print_program(prog)
    parsed = parse_program(text)
    assert print_program(parsed) == text
    got = {op.name: op.attributes["val"] for op in parsed.main.block.ops}
    for k, v in vals.items():
        assert got[k].dtype == v.dtype or (v.dtype.kind == "U" and got[k].dtype.kind == "U")
        np.testing.assert_array_equal(got[k], v)
        if v.dtype.kind == "f":
            assert np.array_equal(np.signbit(got[k]), np.signbit(v))


def test_parse_errors_name_the_line():
    import pytest

    from converter.errors import ParseError

    bad = "program\nfunc main<iOS15>(%x: tensor<fp32, [2]>) {\n  %y: tensor<fp32, [2]> = add(x=%x, y=%nope)\n} -> (%y)\n"
    with pytest.raises(ParseError, match="line 3.*undefined value %nope"):
        parse_program(bad)
    with pytest.raises(ParseError, match="unknown op type 'frobnicate'"):
        parse_program(bad.replace("add(x=%x, y=%nope)", "frobnicate(x=%x)"))
