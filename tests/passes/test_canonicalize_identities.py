"""Ops that return their input (converter/passes/canonicalize/identities.py): each rule fires (the
IR after written by hand; the helper also runs both programs on random inputs and requires
bit-identical outputs) and refuses a near miss with its reason."""

from __future__ import annotations

from converter.passes.canonicalize import (
    concat_one,
    identity_op,
    pad_zeros,
    slice_by_index_everything,
    slice_by_size_everything,
    split_one,
    tile_ones,
)

from .helpers import assert_refuses, assert_rewrites

HEAD = "program\nfunc main<iOS17>"


def _prog(inputs: str, body: str, outputs: str) -> str:
    return f"{HEAD}({inputs}) {{\n{body}\n}} -> ({outputs})"


def _ints(name: str, *vals: int) -> str:
    return f"%{name}: tensor<int32, [{len(vals)}]> = const() [val=dense<int32, [{len(vals)}]>({', '.join(map(str, vals))})]"


def _bools(name: str, *vals: bool) -> str:
    text = ", ".join("true" if v else "false" for v in vals)
    return f"%{name}: tensor<bool, [{len(vals)}]> = const() [val=dense<bool, [{len(vals)}]>({text})]"


def _int(name: str, v: int) -> str:
    return f"%{name}: tensor<int32, []> = const() [val=dense<int32, []>({v})]"


X23 = "%x: tensor<fp32, [2, 3]>"
RELU_OF_X = _prog(X23, "%y: tensor<fp32, [2, 3]> = relu(x=%x)", "%y")


def test_identity_op_fires_and_refuses_to_rename_an_output_to_an_input() -> None:
    assert_rewrites(_prog(X23, """
      %i: tensor<fp32, [2, 3]> = identity(x=%x)
      %y: tensor<fp32, [2, 3]> = relu(x=%i)""", "%y"), identity_op, RELU_OF_X)
    assert_refuses(_prog(X23, "%y: tensor<fp32, [2, 3]> = identity(x=%x)", "%y"), identity_op,
                   "'y' is a function output and 'x' is an input")


def _slice(*params: str, out: str = "[2, 3]") -> str:
    return _prog(X23, "\n".join(params[:-1]) + f"""
      %s: tensor<fp32, {out}> = slice_by_index(x=%x, {params[-1]})
      %y: tensor<fp32, {out}> = relu(x=%s)""", "%y")


def test_slice_by_index_everything_fires_with_masks_large_ends_and_negative_begins() -> None:
    # dim 0: begin -2 (= 0 for size 2), end 5 (clamped to 2); dim 1: begin masked, end masked, stride 1
    assert_rewrites(_slice(_ints("b", -2, 7), _ints("e", 5, 1), _ints("st", 1, 1), _bools("bm", False, True),
                           _bools("em", False, True),
                           "begin=%b, end=%e, stride=%st, begin_mask=%bm, end_mask=%em"),
                    slice_by_index_everything, RELU_OF_X)


def test_slice_by_index_everything_refuses_partial_slices() -> None:
    assert_refuses(_slice(_ints("b", 0, 0), _ints("e", 2, -1), "begin=%b, end=%e", out="[2, 2]"),
                   slice_by_index_everything, "dim 1 (size 3) ends at -1")
    assert_refuses(_slice(_ints("b", 0, 1), _ints("e", 2, 3), "begin=%b, end=%e", out="[2, 2]"),
                   slice_by_index_everything, "dim 1 (size 3) starts at 1")
    assert_refuses(_slice(_ints("b", 0, 0), _ints("e", 2, 3), _ints("st", 1, 2), "begin=%b, end=%e, stride=%st",
                          out="[2, 2]"), slice_by_index_everything, "stride 2 on dim 1")
    # a reversed slice takes everything, but not in order
    assert_refuses(_slice(_ints("b", 0, 0), _ints("e", 2, 3), _ints("st", 1, -1), _bools("m", False, True),
                          "begin=%b, end=%e, stride=%st, begin_mask=%m, end_mask=%m"),
                   slice_by_index_everything, "stride -1 on dim 1")


def test_slice_by_index_everything_on_a_symbolic_dim_needs_an_end_beyond_its_bound() -> None:
    text = """program
    symbols {{ n: [1, 8] }}
    func main<iOS17>(%x: tensor<fp32, [n, 3]>) {{
      %b: tensor<int32, [2]> = const() [val=dense<int32, [2]>(0, 0)]
      %e: tensor<int32, [2]> = const() [val=dense<int32, [2]>({end}, 3)]
      %s: tensor<fp32, [{dim}, 3]> = slice_by_index(x=%x, begin=%b, end=%e)
      %y: tensor<fp32, [{dim}, 3]> = relu(x=%s)
    }} -> (%y)"""
    assert_rewrites(text.format(end=8, dim="n"), slice_by_index_everything, """program
    symbols { n: [1, 8] }
    func main<iOS17>(%x: tensor<fp32, [n, 3]>) {
      %y: tensor<fp32, [n, 3]> = relu(x=%x)
    } -> (%y)""")
    assert_refuses(text.format(end=7, dim="s0"), slice_by_index_everything, "dim 0 (size n) ends at 7")


def test_slice_by_size_everything_fires_and_refuses_a_short_slice() -> None:
    def prog(begin: tuple[int, int], size: tuple[int, int], out: str) -> str:
        return _prog(X23, f"""{_ints("b", *begin)}
      {_ints("z", *size)}
      %s: tensor<fp32, {out}> = slice_by_size(x=%x, begin=%b, size=%z)
      %y: tensor<fp32, {out}> = relu(x=%s)""", "%y")

    assert_rewrites(prog((-2, 0), (2, -1), "[2, 3]"), slice_by_size_everything, RELU_OF_X)
    assert_refuses(prog((0, 0), (2, 2), "[2, 2]"), slice_by_size_everything, "dim 1 (size 3) takes 2 elements")
    assert_refuses(prog((0, 1), (2, -1), "[2, 2]"), slice_by_size_everything, "dim 1 (size 3) starts at 1")


def test_concat_one_fires_and_refuses_a_scalar_which_it_makes_1d() -> None:
    assert_rewrites(_prog(X23, f"""{_int("ax", 1)}
      %c: tensor<fp32, [2, 3]> = concat(values=(%x), axis=%ax)
      %y: tensor<fp32, [2, 3]> = relu(x=%c)""", "%y"), concat_one, RELU_OF_X)
    assert_refuses(_prog("%x: tensor<fp32, []>", f"""{_int("ax", 0)}
      %c: tensor<fp32, [1]> = concat(values=(%x), axis=%ax)
      %y: tensor<fp32, [1]> = relu(x=%c)""", "%y"), concat_one, "a concat of one rank-0 value is a 1-D tensor")


def test_tile_ones_fires_and_refuses_a_real_tile() -> None:
    assert_rewrites(_prog(X23, f"""{_ints("r", 1, 1)}
      %t: tensor<fp32, [2, 3]> = tile(x=%x, reps=%r)
      %y: tensor<fp32, [2, 3]> = relu(x=%t)""", "%y"), tile_ones, RELU_OF_X)
    assert_refuses(_prog(X23, f"""{_ints("r", 1, 2)}
      %t: tensor<fp32, [2, 6]> = tile(x=%x, reps=%r)
      %y: tensor<fp32, [2, 6]> = relu(x=%t)""", "%y"), tile_ones, "is [1, 2], not 1")


def test_pad_zeros_fires_in_any_mode_and_refuses_a_real_pad() -> None:
    assert_rewrites(_prog(X23, f"""{_ints("p", 0, 0, 0, 0)}
      %m: tensor<string, []> = const() [val=dense<string, []>("reflect")]
      %t: tensor<fp32, [2, 3]> = pad(x=%x, pad=%p, mode=%m)
      %y: tensor<fp32, [2, 3]> = relu(x=%t)""", "%y"), pad_zeros, RELU_OF_X)
    assert_refuses(_prog(X23, f"""{_ints("p", 0, 1)}
      %t: tensor<fp32, [2, 4]> = pad(x=%x, pad=%p)
      %y: tensor<fp32, [2, 4]> = relu(x=%t)""", "%y"), pad_zeros, "is [0, 1], not 0")


def test_split_one_fires_with_num_splits_or_sizes_and_refuses_two_pieces() -> None:
    assert_rewrites(_prog(X23, f"""{_int("n", 1)}
      {_int("ax", 0)}
      %s: tensor<fp32, [2, 3]> = split(x=%x, num_splits=%n, axis=%ax)
      %y: tensor<fp32, [2, 3]> = relu(x=%s)""", "%y"), split_one, RELU_OF_X)
    assert_rewrites(_prog(X23, f"""{_ints("z", 3)}
      {_int("ax", 1)}
      %s: tensor<fp32, [2, 3]> = split(x=%x, split_sizes=%z, axis=%ax)
      %y: tensor<fp32, [2, 3]> = relu(x=%s)""", "%y"), split_one, RELU_OF_X)
    assert_refuses(_prog(X23, f"""{_int("n", 2)}
      {_int("ax", 0)}
      %s0: tensor<fp32, [1, 3]>, %s1: tensor<fp32, [1, 3]> = split(x=%x, num_splits=%n, axis=%ax)
      %y: tensor<fp32, [1, 3]> = add(x=%s0, y=%s1)""", "%y"), split_one, "it makes 2 pieces")
