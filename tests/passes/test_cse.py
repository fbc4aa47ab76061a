"""Common subexpression elimination: identical pure ops and identical constants become one, only
where the kept value dominates; random ops, function outputs and constants that differ in a bit
(or a dtype) are kept apart. Outputs are compared bit for bit with the original program's."""

from __future__ import annotations

import numpy as np

import converter.passes.cse as cse_module
from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.types import tensor
from converter.ir.verify import verify
from converter.passes.cse import CommonSubexpressionElimination

from .helpers import assert_rewrites

HEAD = "program\nfunc main<iOS17>"


def test_identical_ops_and_constants_merge_and_chains_collapse() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %c1: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %a: tensor<fp32, [3]> = mul(x=%x, y=%c1)
      %c2: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %b: tensor<fp32, [3]> = mul(x=%c2, y=%x)
      %ea: tensor<fp32, [3]> = exp(x=%a)
      %eb: tensor<fp32, [3]> = exp(x=%b)
      %y: tensor<fp32, [3]> = sub(x=%ea, y=%eb)
    }} -> (%y)""", CommonSubexpressionElimination(), f"""{HEAD}(%x: tensor<fp32, [3]>) {{
      %c1: tensor<fp32, []> = const() [val=dense<fp32, []>(2.0)]
      %a: tensor<fp32, [3]> = mul(x=%x, y=%c1)
      %ea: tensor<fp32, [3]> = exp(x=%a)
      %y: tensor<fp32, [3]> = sub(x=%ea, y=%ea)
    }} -> (%y)""")


def test_constants_differing_in_dtype_or_sign_of_zero_stay_apart() -> None:
    text = f"""{HEAD}(%x: tensor<fp32, [2]>, %h: tensor<fp16, [2]>) {{
      %p: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(0.0, 1.0)]
      %n: tensor<fp32, [2]> = const() [val=dense<fp32, [2]>(-0.0, 1.0)]
      %q: tensor<fp16, [2]> = const() [val=dense<fp16, [2]>(0.0, 1.0)]
      %a: tensor<fp32, [2]> = real_div(x=%x, y=%p)
      %b: tensor<fp32, [2]> = real_div(x=%x, y=%n)
      %c: tensor<fp16, [2]> = add(x=%h, y=%q)
    }} -> (%a, %b, %c)"""
    assert_rewrites(text, CommonSubexpressionElimination(), text)


def test_random_ops_are_never_merged() -> None:
    text = f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %s: tensor<int32, [1]> = const() [val=dense<int32, [1]>(2)]
      %r1: tensor<fp32, [2]> = random_normal(shape=%s)
      %r2: tensor<fp32, [2]> = random_normal(shape=%s)
      %y: tensor<fp32, [2]> = sub(x=%r1, y=%r2)
    }} -> (%y)"""
    prog = _parse(text)
    assert not CommonSubexpressionElimination().run(prog).modified


def test_two_function_outputs_computed_alike_both_stay() -> None:
    text = f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %a: tensor<fp32, [2]> = relu(x=%x)
      %b: tensor<fp32, [2]> = relu(x=%x)
    }} -> (%a, %b)"""
    prog = _parse(text)
    result = CommonSubexpressionElimination().run(prog)
    assert not result.modified and result.stats["kept (function outputs)"] == 1


def test_a_function_output_merged_into_an_intermediate_keeps_its_name() -> None:
    assert_rewrites(f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %a: tensor<fp32, [2]> = relu(x=%x)
      %e: tensor<fp32, [2]> = exp(x=%a)
      %y: tensor<fp32, [2]> = relu(x=%x)
    }} -> (%e, %y)""", CommonSubexpressionElimination(), f"""{HEAD}(%x: tensor<fp32, [2]>) {{
      %y: tensor<fp32, [2]> = relu(x=%x)
      %e: tensor<fp32, [2]> = exp(x=%y)
    }} -> (%e, %y)""")


def test_nested_blocks_reuse_only_dominating_values() -> None:
    def body(b, x):
        outer = b.exp(x=x, name="outer")
        pred = b.less(x=b.reduce_sum(x=x), y=np.float32(0))
        (c,) = b.cond(pred,
                      lambda t: [t.add(x=t.exp(x=x, name="same_as_outer"), y=t.sin(x=x, name="sin_then"))],
                      lambda f: [f.mul(x=f.sin(x=x, name="sin_else"), y=outer)])
        after = b.sin(x=x, name="sin_after")  # the branches' sins do not dominate it
        return [b.add(x=b.add(x=c, y=after), y=outer)]

    prog = new_program({"x": tensor("fp32", [3])}, body)
    feeds = {"x": np.array([0.5, -1.0, 2.0], np.float32)}
    want = run(prog, feeds)
    result = CommonSubexpressionElimination().run(prog)
    verify(prog)
    names = {op.name for op in prog.walk()}
    assert "same_as_outer" not in names
    assert {"outer", "sin_then", "sin_else", "sin_after"} <= names
    assert result.stats["merged"] == {"exp": 1}
    got = run(prog, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_identical_weight_blobs_merge_and_only_candidates_are_hashed(monkeypatch) -> None:
    w = np.arange(4096, dtype=np.float32).reshape(64, 64) / 7
    hashed = []
    real = cse_module._digest
    monkeypatch.setattr(cse_module, "_digest", lambda arr: hashed.append(arr.size) or real(arr))

    def body(b, x):
        y1 = b.matmul(x=x, y=w.copy())
        y2 = b.matmul(x=x, y=w.copy())  # the same weights, stored twice
        y3 = b.matmul(x=x, y=np.ones((64, 32), np.float32))  # a size of its own: never hashed
        return [b.add(x=y1, y=y2), y3]

    prog = new_program({"x": tensor("fp32", [2, 64])}, body)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)}
    want = run(prog, feeds)
    result = CommonSubexpressionElimination().run(prog)
    verify(prog)
    assert result.stats["merged"] == {"const": 1, "matmul": 1}
    assert sorted(hashed) == [4096, 4096]
    got = run(prog, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def _parse(text: str):
    from converter.ir.text import parse_program

    prog = parse_program(text)
    verify(prog)
    return prog


def test_identical_1mb_weight_blobs_of_a_package_become_one_and_other_dtypes_stay_apart(tmp_path) -> None:
    """Two equal 1 MiB fp32 weights, read back from a package's weight file (views of the blob
    file), become one constant (one op; the MIL writer already stores equal bytes once in the file).
    An int32 weight with the very same bytes (the fp32 bits viewed as int32) and an fp16 weight with
    the same values are different constants and stay."""
    import converter

    w = np.random.default_rng(3).standard_normal((512, 512)).astype(np.float32)  # 1 MiB

    def body(b, x, idx):
        y1 = b.matmul(x=x, y=b.const(w.copy(), name="w1"))
        y2 = b.matmul(x=x, y=b.const(w.copy(), name="w2"))
        bits = b.gather(x=b.const(w.view(np.int32).copy(), name="w_bits"), indices=idx)  # same bytes, int32
        y3 = b.matmul(x=b.cast(x=x, dtype="fp16"), y=b.const(w.astype(np.float16), name="w_half"))
        return [b.sub(x=y1, y=y2), bits, y3]

    path = converter.save(new_program({"x": tensor("fp32", [2, 512]), "idx": tensor("int32", [2])}, body),
                          tmp_path / "weights.mlpackage")
    prog = converter.load(path)
    feeds = {"x": np.random.default_rng(4).standard_normal((2, 512)).astype(np.float32),
             "idx": np.array([3, 500], np.int32)}
    want = run(prog, feeds)
    result = CommonSubexpressionElimination().run(prog)
    verify(prog)
    assert result.stats["merged"] == {"const": 1, "matmul": 1}
    consts = [np.asarray(op.attributes["val"]) for op in prog.walk() if op.type == "const" and op.outputs[0].type.shape]
    assert sorted(str(c.dtype) for c in consts if c.nbytes >= 1 << 19) == ["float16", "float32", "int32"]
    got = run(prog, feeds)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
