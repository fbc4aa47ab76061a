"""Run single ops through the IR (builder + interpreter), for oracle and registry tests.

``Case`` describes one op invocation: run-time ``inputs`` (become function inputs, and may be
given symbolic dims) and compile-time ``params`` (become const ops). Ops with nested blocks give
a ``build`` callable instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from converter.ir.builder import Builder, new_program
from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.opdef import first_opset
from converter.ir.runtime import ListValue, StateCell
from converter.ir.types import ListType, StateType, Symbol, TensorType, Type, dtype_of_array


@dataclass
class Case:
    op: str
    inputs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    opset: str | None = None  # default: the op's first opset
    symbolic: bool = True  # also check inference with symbolic input dims
    build: Callable[..., Any] | None = None  # build(b, **input_values) -> output value(s)
    input_types: dict[str, Type] = field(default_factory=dict)  # override (lists, states, sub-byte)
    id: str = ""
    # Why, with symbolic inputs, an output size may be a fresh symbol rather than an expression of
    # the input sizes (a size read from a run-time value, data, a clamp): "" = it must not be.
    fresh_ok: str = ""

    def opset_or_default(self) -> str:
        return self.opset or first_opset(self.op) or "iOS15"

    def __repr__(self) -> str:
        return f"{self.op}[{self.id}]" if self.id else self.op


def _runtime_type(name: str, x: Any, symbolic: bool) -> Type:
    if isinstance(x, StateCell):
        return StateType(TensorType(dtype_of_array(x.value), x.value.shape))
    if isinstance(x, ListValue):
        return ListType(x.elem_type, None if symbolic else len(x.items), x.dynamic_length)
    arr = np.asarray(x)
    dt = dtype_of_array(arr)
    if not symbolic:
        return TensorType(dt, arr.shape)
    return TensorType(dt, tuple(Symbol(f"s{d}") if d > 1 else d for d in arr.shape))


def build_program(case: Case, opset: str | None = None, *, symbolic: bool = False) -> tuple[Program, dict[str, Any]]:
    """A one-op program for ``case`` and the feeds to run it."""
    opset = opset or case.opset_or_default()
    feeds: dict[str, Any] = {}
    fn_inputs: list[tuple[str, Type]] = []
    layout: dict[str, Any] = {}
    for key, x in case.inputs.items():
        if isinstance(x, (list, tuple)) and not isinstance(x, ListValue):
            names = []
            for i, xi in enumerate(x):
                nm = f"{key}_{i}"
                fn_inputs.append((nm, case.input_types.get(nm) or _runtime_type(nm, xi, symbolic)))
                feeds[nm] = xi
                names.append(nm)
            layout[key] = names
        else:
            fn_inputs.append((key, case.input_types.get(key) or _runtime_type(key, x, symbolic)))
            feeds[key] = x
            layout[key] = key

    def body(b: Builder, *args: Any) -> Any:
        by_name = {n: v for (n, _), v in zip(fn_inputs, args)}
        values = {k: (tuple(by_name[n] for n in names) if isinstance(names, list) else by_name[names])
                  for k, names in layout.items()}
        if case.build is not None:
            outs = case.build(b, **values, **case.params)
        else:
            op = b.add_op(case.op, {**values, **case.params})
            outs = op.outputs
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        return list(outs)

    return new_program(fn_inputs, body, opset=opset), feeds


def run_case(case: Case, opset: str | None = None) -> list[Any]:
    prog, feeds = build_program(case, opset)
    out = run(prog, feeds)
    return list(out.values())


def run_op(op: str, inputs: dict[str, Any] | None = None, params: dict[str, Any] | None = None,
           opset: str | None = None, **kw: Any) -> list[Any]:
    """Run one op: ``inputs`` are run-time tensors, ``params`` compile-time constants."""
    return run_case(Case(op, inputs or {}, params or {}, opset=opset, **kw))


def assert_close(actual: np.ndarray, expected: np.ndarray, *, rtol: float = 1e-5, atol: float = 1e-6,
                 what: str = "") -> None:
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "biuU" and expected.dtype.kind in "biuU":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True, err_msg=what)


def seq(n: int) -> Sequence[int]:
    return list(range(n))
