"""Compile-time values in type inference (converter/ir/consteval.py behind ``InferArgs.value``).

Regression: coremltools' EMPTY pipeline writes torch's ``qkv.split(d, dim=-1)`` as
``split(x, split_sizes=tile(const, reps))``: the sizes are known at compile time but no ``const``
op holds them, and ``converter.load`` refused the program (``one of num_splits and split_sizes is
required``). The expected types are written from the op's definition (tile([4], [3]) = [4, 4, 4]),
and coremltools' own loader, which re-runs its type inference with its value inference, gives the
same shapes on the file we write. The evaluation behind it is bounded and never evaluates random
ops: long or large chains, and function inputs, leave a value unknown.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.consteval import VALUE_MAX_BYTES, VALUE_MAX_OPS, RunTimeDependence, compile_time_value
from converter.ir.interpreter import run
from converter.ir.types import tensor
from converter.ir.verify import verify


def _split_by_tile(b, x):
    sizes = b.tile(x=np.array([4], np.int32), reps=np.array([3], np.int32))
    return list(b.split(x=x, split_sizes=sizes, axis=-1))


def test_split_sizes_computed_by_a_tile_of_constants_are_known_to_type_inference() -> None:
    prog = new_program({"x": tensor("fp32", (2, 12))}, _split_by_tile)  # raised before the fix
    verify(prog)
    assert [v.type.shape for v in prog.main.outputs] == [(2, 4)] * 3
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    got = run(prog, {"x": x})
    for v, want in zip(prog.main.outputs, np.split(x, 3, axis=-1)):
        np.testing.assert_array_equal(got[v.name], want)


def test_a_saved_split_by_tile_loads_and_coremltools_infers_the_same_shapes(tmp_path: Path) -> None:
    pytest.importorskip("coremltools")
    from ..mil.helpers import CoremltoolsLoader

    path = converter.save(new_program({"x": tensor("fp32", (2, 12))}, _split_by_tile), tmp_path / "split.mlpackage")
    ours = converter.load(path)  # the MIL frontend re-infers every op
    assert [tuple(v.type.shape) for v in ours.main.outputs] == [(2, 4)] * 3
    theirs = CoremltoolsLoader().load(Path(path))
    main = theirs.functions["main"]
    assert [tuple(v.shape) for v in main.outputs] == [(2, 4)] * 3


def test_shape_arithmetic_over_a_statically_shaped_value_gives_a_static_reshape() -> None:
    """torch's flatten(1) as coremltools lowers it: reshape(x, concat(shape(x)[0:1], [-1]))."""

    def body(b, x):
        r = b.relu(x=x)
        head = b.slice_by_index(x=b.shape(x=r), begin=np.array([0], np.int32), end=np.array([1], np.int32))
        return b.reshape(x=r, shape=b.concat(values=[head, np.array([-1], np.int32)], axis=0))

    prog = new_program({"x": tensor("fp32", (2, 3, 4))}, body)
    assert prog.main.outputs[0].type.shape == (2, 12)


def _chain(n: int, start: np.ndarray):
    def body(b, x):
        c = b.const(start)
        for _ in range(n):
            c = b.add(x=c, y=np.int32(1))
        return [b.add(x=x, y=c)], c

    holder = {}

    def make(b, x):
        outs, c = body(b, x)
        holder["c"] = c
        return outs

    prog = new_program({"x": tensor("int32", tuple(start.shape))}, make)
    return prog, holder["c"]


def test_values_of_short_chains_are_known_and_long_or_large_ones_are_not() -> None:
    _, short = _chain(5, np.array([1, 2], np.int32))
    np.testing.assert_array_equal(compile_time_value(short), [6, 7])
    _, long = _chain(VALUE_MAX_OPS + 1, np.array([1, 2], np.int32))
    assert compile_time_value(long) is None
    big = np.zeros(VALUE_MAX_BYTES // 4 + 1, np.int32)
    _, large = _chain(1, big)
    assert compile_time_value(large) is None


def test_function_inputs_random_ops_and_failing_kernels_leave_a_value_unknown() -> None:
    seen = {}

    def body(b, x):
        seen["input"] = b.add(x=x, y=np.float32(1))
        noise = b.random_uniform(shape=np.array([2], np.int32), low=0.0, high=1.0)
        seen["random"] = b.add(x=noise, y=np.float32(1))
        # gather out of range: the kernel raises, the value is unknown (type inference goes on)
        seen["failing"] = b.gather(x=np.array([1.0, 2.0], np.float32), indices=np.array([5], np.int32))
        return [seen["input"], seen["random"]]

    new_program({"x": tensor("fp32", (2,))}, body)
    assert compile_time_value(seen["input"]) is None
    assert compile_time_value(seen["random"]) is None
    assert compile_time_value(seen["failing"]) is None


def test_run_time_dependence_follows_inputs_random_ops_and_static_shapes() -> None:
    """`RunTimeDependence` (the backends' shortcut before `compile_time_value`): a value computed
    from a function input or a random op depends on run-time values, one computed from constants
    (however long the chain) or from the static shape of any value does not; whatever it calls
    run-time dependent has no compile-time value. Iterative: a chain far deeper than Python's
    recursion limit is answered."""
    seen = {}

    def body(b, x):
        h = x
        for _ in range(3000):
            h = b.relu(x=h)
        seen["deep"] = h
        seen["shape"] = b.add(x=b.shape(x=h), y=np.int32(1))
        seen["random"] = b.add(x=b.random_uniform(shape=np.array([2], np.int32), low=0.0, high=1.0), y=np.float32(1))
        c = b.const(np.array([1, 2], np.int32))
        for _ in range(VALUE_MAX_OPS + 1):
            c = b.add(x=c, y=np.int32(1))
        seen["long_constant_chain"] = c
        return [seen["deep"], seen["shape"], seen["random"], c]

    prog = new_program({"x": tensor("fp32", (2,))}, body)
    depends = RunTimeDependence()
    assert depends(seen["deep"]) and depends(seen["random"])
    assert not depends(seen["shape"]) and not depends(seen["long_constant_chain"])
    np.testing.assert_array_equal(compile_time_value(seen["shape"]), [3])
    for op in prog.main.block.ops:
        for v in op.outputs:
            assert not depends(v) or compile_time_value(v) is None, v.name
