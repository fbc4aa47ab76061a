"""Every op case of tests/ops/cases as a program a Core ML model can hold (see ``loadable_case``)."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace
from typing import Any

import numpy as np

from converter.ir.builder import Builder
from converter.ir.core import Value
from converter.ir.opdef import get_opdef, opset_index
from converter.ir.runtime import ListValue, StateCell
from converter.ir.types import ListType, TensorType, dtype_of_array
from tests.ops import cases as cases_pkg
from tests.ops.harness import Case


def _all_cases() -> list[Case]:
    out: list[Case] = []
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda m: m.name):
        out.extend(getattr(importlib.import_module(f"{cases_pkg.__name__}.{info.name}"), "CASES", []))
    return out


CASES = _all_cases()


def case_key(case: Case) -> str:
    return f"{case.op}[{case.id}]@{case.opset_or_default()}"


# A Core ML model's inputs and outputs are features: multiarrays of fp32, int32, fp64, fp16
# (iOS16+) or int8 (iOS18+), at least rank 1, and not lists. Our backend refuses to write a model
# description it cannot express (UnsupportedError naming the feature). So that every op can be
# handed to coremltools, a case's other inputs are fed as features and converted inside the
# program (bool, uint8, int16 ... <- int32 via cast; rank 0 <- rank 1 via squeeze; a list <- its
# items via make_list + list_write), and outputs are converted the other way (cast to int32 or
# fp32; a list -> list_length). Outputs no op can convert (sub-byte constexpr results) are
# dropped; the op stays in the program.


def _io_dtypes(opset: str) -> set[str]:
    out = {"fp32", "int32"}
    if opset_index(opset) >= opset_index("iOS16"):
        out.add("fp16")
    if opset_index(opset) >= opset_index("iOS18"):
        out.add("int8")
    return out


def _castable(opset: str) -> set[str]:
    return set(get_opdef("cast", opset).signature.inputs["x"].types or ())


def _adapt_input(x: Any, opset: str) -> tuple[Any, Any]:
    """(what to feed instead of ``x``, convert(b, fed value) -> value of x's type)."""
    if isinstance(x, StateCell):
        return x, lambda b, v: v
    if isinstance(x, ListValue):
        items = [np.asarray(i) for i in x.items]

        def make(b: Builder, vs: tuple[Value, ...], lv: ListValue = x) -> Value:
            elem = lv.elem_type
            assert isinstance(elem, TensorType)
            ls = b.make_list(init_length=len(vs), dynamic_length=lv.dynamic_length,
                             elem_shape=[int(d) for d in elem.shape], dtype=elem.dtype.name)
            for i, v in enumerate(vs):
                ls = b.list_write(ls=ls, index=i, value=v)
            return ls

        return tuple(items), make
    arr = np.asarray(x)
    name = dtype_of_array(arr).name
    steps = []
    if arr.ndim == 0:
        arr = arr.reshape(1)
        steps.append(lambda b, v: b.squeeze(x=v, axes=[0]))
    if name not in _io_dtypes(opset) and name in _castable(opset):
        arr = arr.astype(np.float32 if arr.dtype.kind == "f" else np.int32)
        steps.append(lambda b, v, to=name: b.cast(x=v, dtype=to))

    def convert(b: Builder, v: Value) -> Value:
        for step in steps:
            v = step(b, v)
        return v

    return arr, convert


def _adapt_output(b: Builder, v: Value, opset: str) -> Value | None:
    t = v.type
    if isinstance(t, ListType):
        return b.list_length(ls=v)
    if isinstance(t, TensorType) and t.dtype.name not in _io_dtypes(opset) and t.dtype.name != "string":
        if t.dtype.name not in _castable(opset):
            return None
        return b.cast(x=v, dtype="fp32" if t.dtype.is_float else "int32")
    return v


def loadable_case(case: Case) -> Case:
    """``case`` with feature-compatible function inputs and outputs (see above)."""
    opset = case.opset_or_default()
    inputs: dict[str, Any] = {}
    converts: dict[str, Any] = {}
    for key, x in case.inputs.items():
        if isinstance(x, (list, tuple)) and not isinstance(x, ListValue):
            pairs = [_adapt_input(xi, opset) for xi in x]
            inputs[key] = [p[0] for p in pairs]
            converts[key] = lambda b, vs, fs=tuple(p[1] for p in pairs): tuple(f(b, v) for f, v in zip(fs, vs))
        else:
            inputs[key], converts[key] = _adapt_input(x, opset)
    original_build = case.build

    def build(b: Builder, /, **kw: Any) -> list[Value]:
        values = {k: converts[k](b, v) if k in converts else v for k, v in kw.items()}
        if original_build is not None:
            outs = original_build(b, **values)
        else:
            outs = b.add_op(case.op, values).outputs
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        return [o for o in (_adapt_output(b, v, opset) for v in outs) if o is not None]

    # keep type overrides (states, sub-byte) of inputs fed as they are
    kept_types = {k: t for k, t in case.input_types.items() if k in inputs and inputs[k] is case.inputs.get(k)}
    return replace(case, inputs=inputs, build=build, input_types=kept_types, opset=opset)
