"""Shape ops lowered to NeuralNetwork layers (lowering/shape.py): each model is written, read back
by the NeuralNetwork frontend and run; the oracle is numpy (reshape, transpose, concatenate, split,
stack, squeeze, expand_dims, tile, flip, arange, full) applied in the test to the same inputs.
Shapes are non-symmetric so an axis mix-up changes the result, and the layer kinds are asserted
so a lowering that takes another path is caught. Flexible (symbolic) input dims are run at two
sizes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.clone import clone_program
from converter.ir.types import Symbol, TensorType, dtype_of_array
from tests.nn_backend.helpers import layer_kinds, program, run_nn

RNG = np.random.default_rng(7)


def arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def convert(tmp_path: Path, feeds: dict[str, np.ndarray], body: Callable[..., Any], *, opset: str = "iOS15",
            flexible: dict[str, tuple] | None = None, **options: Any) -> tuple[Path, dict[str, np.ndarray]]:
    """Write the program (inputs typed like ``feeds``, or with the ``flexible`` shapes) and run it
    on ``feeds``; (model path, outputs)."""
    flexible = flexible or {}
    types = [(k, TensorType(dtype_of_array(a), flexible.get(k, a.shape))) for k, a in feeds.items()]
    prog = new_program(types, body, opset=opset) if flexible else program(feeds, body, opset)
    path = tmp_path / "m.mlmodel"
    return path, run_nn(prog, feeds, path, **options)


def run_again(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return converter.run(converter.load(path), feeds)


def kinds(path: Path) -> set[str]:
    return set(layer_kinds(path))


def spec_version(path: Path) -> int:
    return read_model_file(path).model.specificationVersion


def with_shape(b: Any, v: Any) -> list:
    """``v`` and its run-time shape as outputs: the NeuralNetwork frontend returns an output in its
    declared shape, so a rank mistake inside the network shows only in the shape of the blob."""
    return [v, b.shape(x=v, name=f"{v.name}_shape")]


def same_with_shape(out: dict[str, np.ndarray], name: str, want: np.ndarray) -> None:
    same(out[name], want)
    np.testing.assert_array_equal(out[f"{name}_shape"], np.shape(want))


def same(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(np.asarray(got).reshape(np.shape(want)), want)
    assert np.shape(got) == np.shape(want)


@pytest.fixture
def unfolded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Constants are not folded before lowering (they always are in a real conversion): reaches
    the branches for ops whose every input is constant (fillStatic, rangeStatic)."""
    import converter.backends.neuralnetwork as nnb

    monkeypatch.setattr(nnb, "prepare_program", lambda p: clone_program(p)[0])


N = Symbol("n")
M = Symbol("m")

# ---------------------------------------------------------------------------------------------
# reshapes


def test_reshape_to_a_static_shape_resolves_zero_and_minus_one(tmp_path: Path) -> None:
    x = arr(2, 3, 4)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.reshape(x=x, shape=[0, -1, 2], name="a"),
                                                         b.reshape(x=x, shape=[4, 3, 2], name="c")])
    same(out["a"], x.reshape(2, 6, 2))
    same(out["c"], x.reshape(4, 3, 2))
    assert layer_kinds(path)["reshapeStatic"] == 2


def test_reshape_with_one_flexible_dim_is_reshape_static_with_minus_one(tmp_path: Path) -> None:
    x = arr(5, 3, 4)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.reshape(x=x, shape=[-1, 12], name="a"),
                                                         b.reshape(x=x, shape=[0, 6, 2], name="c")],
                        flexible={"x": (N, 3, 4)})
    same(out["a"], x.reshape(5, 12))
    same(out["c"], x.reshape(5, 6, 2))
    assert kinds(path) == {"reshapeStatic"}
    x2 = arr(2, 3, 4)
    again = run_again(path, {"x": x2})
    same(again["a"], x2.reshape(2, 12))
    same(again["c"], x2.reshape(2, 6, 2))


def test_reshape_with_several_flexible_dims(tmp_path: Path) -> None:
    """Same rank, flexible dims kept in place: rankPreservingReshape (0 copies, -1 inferred);
    another rank: the target computed from getShape at run time (iOS17 aligns 0s to the right)."""
    x = arr(3, 6, 2)
    y = arr(1, 3, 2, 6)

    def body(b, x, y):
        return [b.reshape(x=x, shape=[0, 3, -1], name="kept"), b.reshape(x=y, shape=[0, 0, 6], name="merged")]

    feeds = {"x": x, "y": y}
    path, out = convert(tmp_path, feeds, body, opset="iOS17", flexible={"x": (N, 6, M), "y": (1, N, M, 6)})
    same(out["kept"], x.reshape(3, 3, 4))
    same(out["merged"], y.reshape(3, 2, 6))
    k = layer_kinds(path)
    assert k["rankPreservingReshape"] == 1 and k["reshapeDynamic"] == 1 and k["getShape"] == 1
    x2, y2 = arr(2, 6, 5), arr(1, 2, 4, 6)
    again = run_again(path, {"x": x2, "y": y2})
    same(again["kept"], x2.reshape(2, 3, 10))
    same(again["merged"], y2.reshape(2, 4, 6))


def test_reshape_to_a_run_time_shape_is_reshape_dynamic(tmp_path: Path) -> None:
    x, ref = arr(4, 6), arr(4, 3, 2)
    path, out = convert(tmp_path, {"x": x, "ref": ref},
                        lambda b, x, ref: b.reshape(x=x, shape=b.shape(x=ref), name="y"),
                        flexible={"x": (N, 6), "ref": (N, 3, M)})
    same(out["y"], x.reshape(4, 3, 2))
    assert kinds(path) == {"getShape", "reshapeDynamic"}


def test_reshape_like_static_flexible_and_whole_reference(tmp_path: Path) -> None:
    x, ref, y, yref = arr(3, 8), arr(3, 4, 2), arr(3, 2, 5), arr(3, 5, 2)

    def body(b, x, ref, y, yref):
        return [b.reshape_like(x=x, ref_tensors=(ref,), begins=[0], ends=[2], end_masks=[True], name="one"),
                b.reshape_like(x=y, ref_tensors=(yref,), begins=[0], ends=[3], end_masks=[False], name="whole")]

    feeds = {"x": x, "ref": ref, "y": y, "yref": yref}
    path, out = convert(tmp_path, feeds, body, opset="iOS16", flexible={"x": (N, 8), "ref": (N, 4, 2),
                                                                        "y": (N, M, 5), "yref": (N, 5, M)})
    same(out["one"], x.reshape(3, 4, 2))
    same(out["whole"], y.reshape(3, 5, 2))
    k = layer_kinds(path)
    assert k["reshapeStatic"] == 1 and k["reshapeLike"] == 1


def test_reshape_like_from_parts_of_two_references(tmp_path: Path) -> None:
    x, r1, r2 = arr(3, 2, 2, 5), arr(3, 7), arr(9, 2, 10)

    def body(b, x, r1, r2):
        return b.reshape_like(x=x, ref_tensors=(r1, r2), begins=[0, 1], ends=[1, 3], end_masks=[False, True],
                              name="y")

    path, out = convert(tmp_path, {"x": x, "r1": r1, "r2": r2}, body, opset="iOS16",
                        flexible={"x": (N, M, 2, 5), "r1": (N, 7), "r2": (9, M, 10)})
    same(out["y"], x.reshape(3, 2, 10))
    assert layer_kinds(path)["reshapeDynamic"] == 1


def test_flatten2d_axis(tmp_path: Path) -> None:
    x = arr(2, 3, 4)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [*with_shape(b, b.flatten2d(x=x, axis=2, name="a")),
                                                         *with_shape(b, b.flatten2d(x=x, axis=-2, name="c"))],
                        flexible={"x": (N, 3, 4)})
    same_with_shape(out, "a", x.reshape(6, 4))
    same_with_shape(out, "c", x.reshape(2, 12))
    assert kinds(path) == {"flattenTo2D", "getShape"}


# ---------------------------------------------------------------------------------------------
# permutations, unit dims


def test_transpose_permutation(tmp_path: Path) -> None:
    x = arr(2, 3, 4, 5)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: b.transpose(x=x, perm=[2, 0, -1, 1], name="y"))
    same(out["y"], np.transpose(x, (2, 0, 3, 1)))
    assert kinds(path) == {"transpose"}


def test_a_transpose_moving_only_unit_dims_is_no_layer(tmp_path: Path) -> None:
    """[1, 0, 2, 4, 3] on [1, 1, 3, 1, 1]: the data keep their order (the output is a copy of the input
    blob); [0, 2, 1] on [2, 1, 3] moves the unit dim past a real one: a transpose layer."""
    x, z = arr(1, 1, 3, 1, 1), arr(2, 1, 3)

    def body(b, x, z):
        return [b.relu(x=b.transpose(x=x, perm=[1, 0, 2, 4, 3]), name="y"), b.transpose(x=z, perm=[0, 2, 1], name="w")]

    path, out = convert(tmp_path, {"x": x, "z": z}, body)
    same(out["y"], np.maximum(x, 0))
    same(out["w"], np.transpose(z, (0, 2, 1)))
    assert dict(layer_kinds(path)) == {"activation": 1, "transpose": 1}


def test_squeeze_named_and_all_unit_dims_but_never_a_flexible_one(tmp_path: Path) -> None:
    x = arr(1, 3, 1, 2, 1)

    def body(b, x):
        return [*with_shape(b, b.squeeze(x=x, axes=[0, -1], name="named")), *with_shape(b, b.squeeze(x=x, name="all"))]

    path, out = convert(tmp_path, {"x": x}, body, flexible={"x": (1, 3, 1, 2, N)})
    same_with_shape(out, "named", x.reshape(3, 1, 2, 1))  # the flexible last dim stays
    same_with_shape(out, "all", x.reshape(3, 2, 1))
    assert kinds(path) == {"squeeze", "getShape"}


def test_expand_dims_axes_in_the_output(tmp_path: Path) -> None:
    x = arr(3, 2)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: with_shape(b, b.expand_dims(x=x, axes=[0, -1], name="y")),
                        flexible={"x": (N, 2)})
    same_with_shape(out, "y", x.reshape(1, 3, 2, 1))
    assert kinds(path) == {"expandDims", "getShape"}


# ---------------------------------------------------------------------------------------------
# joins, splits, repeats


def test_concat_along_each_axis(tmp_path: Path) -> None:
    a, b_, c = arr(2, 1, 4), arr(2, 3, 4), arr(2, 2, 4)
    d = arr(2, 3, 5)

    def body(b, a, b_, c, d):
        return [b.concat(values=(a, b_, c), axis=1, name="mid"), b.concat(values=(b_, d), axis=-1, name="last")]

    path, out = convert(tmp_path, {"a": a, "b_": b_, "c": c, "d": d}, body)
    same(out["mid"], np.concatenate([a, b_, c], axis=1))
    same(out["last"], np.concatenate([b_, d], axis=2))
    assert kinds(path) == {"concatND"} and spec_version(path) == 4


def test_concat_with_a_flexible_dim_on_and_off_the_axis(tmp_path: Path) -> None:
    a, b_, c = arr(4, 3), arr(4, 2), arr(2, 3)

    def body(b, a, b_, c):
        return [b.concat(values=(a, b_), axis=1, name="across"), b.concat(values=(a, c), axis=0, name="along")]

    path, out = convert(tmp_path, {"a": a, "b_": b_, "c": c}, body, flexible={"a": (N, 3), "b_": (N, 2)})
    same(out["across"], np.concatenate([a, b_], axis=1))
    same(out["along"], np.concatenate([a, c], axis=0))
    a2, b2 = arr(1, 3), arr(1, 2)
    again = run_again(path, {"a": a2, "b_": b2, "c": c})
    same(again["across"], np.concatenate([a2, b2], axis=1))
    same(again["along"], np.concatenate([a2, c], axis=0))
    assert kinds(path) == {"concatND"}


@pytest.mark.parametrize("target, layers, version", [(None, {"concatND"}, 5),
                                                     ("iOS13", {"stack", "reshapeStatic"}, 4)])
def test_concat_interleave(tmp_path: Path, target: str | None, layers: set[str], version: int) -> None:
    a, b_, c = arr(4, 3, 2), arr(4, 3, 2), arr(4, 3, 2)
    path, out = convert(tmp_path, {"a": a, "b_": b_, "c": c}, lambda b, a, b_, c: b.concat(
        values=(a, b_, c), axis=1, interleave=True, name="y"), target=target, flexible={k: (N, 3, 2) for k in ("a", "b_", "c")})
    want = np.stack([a, b_, c], axis=2).reshape(4, 9, 2)  # a[:, 0], b[:, 0], c[:, 0], a[:, 1], ...
    same(out["y"], want)
    assert kinds(path) == layers and spec_version(path) == version


def test_split_equal_and_unequal_parts(tmp_path: Path) -> None:
    x = arr(6, 4)

    def body(b, x):
        eq = b.split(x=x, num_splits=3, axis=0, name="eq")
        uneq = b.split(x=x, split_sizes=[1, 3], axis=-1, name="uneq")
        return [*eq, *uneq]

    path, out = convert(tmp_path, {"x": x}, body)
    got = list(out.values())
    for g, w in zip(got, np.split(x, 3, axis=0) + np.split(x, [1], axis=1)):
        same(g, w)
    assert layer_kinds(path)["splitND"] == 2


def test_split_of_a_flexible_tensor_along_a_static_axis(tmp_path: Path) -> None:
    x = arr(3, 5)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: list(b.split(x=x, split_sizes=[2, 3], axis=1, name="s")),
                        flexible={"x": (N, 5)})
    parts = list(out.values())
    same(parts[0], x[:, :2])
    same(parts[1], x[:, 2:])
    assert kinds(path) == {"splitND"}


def test_stack_axis(tmp_path: Path) -> None:
    a, b_ = arr(2, 3), arr(2, 3)
    path, out = convert(tmp_path, {"a": a, "b_": b_}, lambda b, a, b_: [b.stack(values=(a, b_), axis=1, name="mid"),
                                                                       b.stack(values=(a, b_), axis=-1, name="end")])
    same(out["mid"], np.stack([a, b_], axis=1))
    same(out["end"], np.stack([a, b_], axis=2))
    assert kinds(path) == {"stack"}


def test_tile_constant_and_run_time_reps(tmp_path: Path) -> None:
    x = arr(2, 1, 3)
    reps = np.array([1, 4, 2], np.int32)

    def body(b, x, reps):
        return [b.tile(x=x, reps=[2, 1, 3], name="const"), b.tile(x=x, reps=reps, name="run")]

    path, out = convert(tmp_path, {"x": x, "reps": reps}, body)
    same(out["const"], np.tile(x, (2, 1, 3)))
    same(out["run"], np.tile(x, (1, 4, 2)))
    assert layer_kinds(path)["tile"] == 2


def test_reverse_named_axes_and_all(tmp_path: Path) -> None:
    x = arr(2, 3, 4)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.reverse(x=x, axes=[0, -1], name="some"),
                                                         b.reverse(x=x, name="all")])
    same(out["some"], np.flip(x, (0, 2)))
    same(out["all"], np.flip(x))
    assert kinds(path) == {"reverse"}


def _reverse_sequence(x: np.ndarray, lengths: np.ndarray, seq: int, batch: int) -> np.ndarray:
    out = x.copy()
    for i, n in enumerate(lengths):
        src = [slice(None)] * x.ndim
        src[batch] = i
        part = x[tuple(src)]
        s = seq if seq < batch else seq - 1
        idx = [slice(None)] * part.ndim
        idx[s] = slice(0, int(n))
        rev = np.flip(part[tuple(idx)], s)
        dst = list(src)
        dst[seq] = slice(0, int(n))
        out[tuple(dst)] = rev
    return out


def test_reverse_sequence_batch_before_and_after_the_sequence_axis(tmp_path: Path) -> None:
    x = arr(3, 5, 2)
    lengths = np.array([2, 5, 0], np.int32)
    y = arr(4, 3)  # sequence axis 0, batch axis 1
    ylen = np.array([4, 1, 3], np.int32)

    def body(b, x, lengths, y, ylen):
        return [b.reverse_sequence(x=x, lengths=lengths, seq_axis=1, batch_axis=0, name="before"),
                b.reverse_sequence(x=y, lengths=ylen, seq_axis=0, batch_axis=1, name="after")]

    path, out = convert(tmp_path, {"x": x, "lengths": lengths, "y": y, "ylen": ylen}, body)
    same(out["before"], _reverse_sequence(x, lengths, 1, 0))
    same(out["after"], _reverse_sequence(y, ylen, 0, 1))
    k = layer_kinds(path)
    assert k["reverseSeq"] == 2 and k["transpose"] == 2


# ---------------------------------------------------------------------------------------------
# generated tensors and shapes


def test_shape_fill_and_fill_like_of_a_flexible_tensor(tmp_path: Path) -> None:
    x = arr(4, 3)

    def body(b, x):
        s = b.shape(x=x, name="s")
        return [s, b.fill(shape=s, value=np.float32(2.5), name="filled"), b.fill_like(ref_tensor=x, value=np.float32(-3),
                                                                                     name="like")]

    path, out = convert(tmp_path, {"x": x}, body, opset="iOS16", flexible={"x": (N, 3)})
    same(out["s"], np.array([4, 3]))
    same(out["filled"], np.full((4, 3), 2.5, np.float32))
    same(out["like"], np.full((4, 3), -3, np.float32))
    assert kinds(path) == {"getShape", "fillDynamic", "fillLike"}
    again = run_again(path, {"x": arr(2, 3)})
    same(again["filled"], np.full((2, 3), 2.5, np.float32))


def test_fill_of_a_constant_shape_is_fill_static(tmp_path: Path, unfolded: None) -> None:
    x = arr(2)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.relu(x=x, name="r"),
                                                         b.fill(shape=[2, 3], value=np.float32(7), name="f")])
    same(out["f"], np.full((2, 3), 7, np.float32))
    assert "fillStatic" in kinds(path)


def test_an_int_fill_value_beyond_fp32_exactness_is_refused(tmp_path: Path) -> None:
    x = arr(4, 3)

    def body(b, x):
        return b.fill(shape=b.shape(x=x), value=np.int32(2**24 + 1), name="f")

    with pytest.raises(UnsupportedError, match="not exact in fp32"):
        convert(tmp_path, {"x": x}, body, flexible={"x": (N, 3)})


def test_range_with_run_time_end_and_run_time_step(tmp_path: Path) -> None:
    end = np.array([7.0], np.float32)
    step = np.array([1.5], np.float32)

    def body(b, end, step):
        return [b.range_1d(start=np.float32(-2), end=end, step=np.float32(3), name="end_only"),
                b.range_1d(start=np.float32(1), end=end, step=step, name="all")]

    path, out = convert(tmp_path, {"end": end, "step": step}, body)
    same(out["end_only"], np.arange(-2, 7, 3, dtype=np.float32))
    same(out["all"], np.arange(1, 7, 1.5, dtype=np.float32))
    assert kinds(path) == {"rangeDynamic", "loadConstantND"}


def test_range_of_constants_is_range_static(tmp_path: Path, unfolded: None) -> None:
    x = arr(2)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: [b.relu(x=x, name="r"),
                                                         b.range_1d(start=np.float32(5), end=np.float32(-1),
                                                                    step=np.float32(-2), name="rg")])
    same(out["rg"], np.arange(5, -1, -2, dtype=np.float32))
    assert "rangeStatic" in kinds(path)


def test_split_in_equal_parts_along_a_flexible_axis(tmp_path: Path) -> None:
    x = arr(4, 3)
    path, out = convert(tmp_path, {"x": x}, lambda b, x: list(b.split(x=x, num_splits=2, axis=0, name="s")),
                        flexible={"x": (N, 3)})
    for g, w in zip(out.values(), np.split(x, 2)):
        same(g, w)
    x2 = arr(6, 3)
    for g, w in zip(run_again(path, {"x": x2}).values(), np.split(x2, 2)):
        same(g, w)
    assert kinds(path) == {"splitND"}
