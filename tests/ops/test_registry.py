"""Registry-wide checks: every MIL op is defined with infer() and evaluate(), and for every case
in ``tests/ops/cases/`` the types infer() predicts agree with what evaluate() returns, with static
and with symbolic input shapes. With symbolic inputs, a size derived from input sizes must be an
expression of them that evaluates to the run's size (a fresh symbol only where the case says why)."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

from converter.ir.interpreter import run
from converter.ir.opdef import OPSETS, OpDef, all_opdefs, mil_op_types, registered_op_types
from converter.ir.runtime import ListValue, StateCell
from converter.ir.types import ListType, StateType, Symbol, TensorType, is_static_dim
from converter.ir.verify import verify

from . import cases as cases_pkg
from .harness import Case, build_program


def _all_cases() -> list[Case]:
    out: list[Case] = []
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{cases_pkg.__name__}.{info.name}")
        out.extend(getattr(mod, "CASES", []))
    return out


CASES = _all_cases()


def test_every_mil_op_is_registered():
    missing = sorted(set(mil_op_types()) - set(registered_op_types()))
    assert not missing, f"MIL ops without a definition: {missing}"


@pytest.mark.parametrize("opdef", all_opdefs(), ids=lambda d: f"{d.op_type}@{d.opset}")
def test_every_op_has_infer_and_evaluate(opdef: OpDef):
    cls = type(opdef)
    assert cls.infer is not OpDef.infer, f"{opdef.op_type}: no infer()"
    assert cls.evaluate is not OpDef.evaluate, f"{opdef.op_type}: no evaluate()"


def test_every_op_has_a_case():
    covered = {c.op for c in CASES}
    missing = sorted(set(registered_op_types()) - covered)
    assert not missing, f"ops without a registry case in tests/ops/cases/: {missing}"


def _sized(s: Symbol) -> bool:
    """The harness names each symbolic input dim after its size (``s7`` is 7)."""
    return s.name.startswith("s") and s.name[1:].isdigit()


def _check_dims(declared, actual_shape, what, fresh_ok: str | None = None):
    """Static dims equal the run's sizes; symbolic dims made of the harness's input symbols
    evaluate to them; any other symbol is a fresh one, allowed only when ``fresh_ok`` says why
    (a size that is data, not arithmetic on the input sizes)."""
    assert declared is not None, f"{what}: inferred unknown rank"
    assert len(declared) == len(actual_shape), f"{what}: inferred rank {len(declared)}, got shape {actual_shape}"
    for d, n in zip(declared, actual_shape):
        if is_static_dim(d):
            assert int(d) == n, f"{what}: inferred {list(declared)}, got {list(actual_shape)}"
        elif all(_sized(s) for s in d.symbols()):
            got = d.evaluate({s.name: int(s.name[1:]) for s in d.symbols()})
            assert got == n, f"{what}: dim {d} evaluates to {got}, the run gives {n}"
        elif fresh_ok is not None:
            assert fresh_ok, (f"{what}: inferred {[str(x) for x in declared]}: dim {d} is a fresh symbol where the "
                              "input sizes determine it (or give the case a fresh_ok reason)")


def _check_value(t, v, what, fresh_ok: str | None = None):
    if isinstance(t, TensorType):
        assert isinstance(v, np.ndarray), f"{what}: not an array"
        if t.dtype.name == "string":
            assert v.dtype.kind in "USO", f"{what}: {v.dtype} for string"
        else:
            assert v.dtype == t.dtype.storage, f"{what}: inferred {t.dtype.name}, got {v.dtype}"
        _check_dims(t.shape, v.shape, what, fresh_ok)
    elif isinstance(t, ListType):
        assert isinstance(v, ListValue), f"{what}: not a list"
        if isinstance(t.length, int) and not t.dynamic_length:
            assert len(v.items) == t.length
        for i, item in enumerate(v.items):
            if item is not None:
                _check_value(t.elem, item, f"{what}[{i}]")
    elif isinstance(t, StateType):
        assert isinstance(v, StateCell)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_infer_matches_evaluate(case: Case):
    opset = case.opset_or_default()
    assert opset in OPSETS
    prog, feeds = build_program(case, opset)
    verify(prog)
    out = run(prog, feeds)
    for v in prog.main.outputs:
        _check_value(v.type, out[v.name], f"{case!r} output {v.name}")
    if case.symbolic and any(isinstance(x, np.ndarray) and x.ndim > 0 for x in feeds.values()):
        sprog, sfeeds = build_program(case, opset, symbolic=True)
        verify(sprog)
        sout = run(sprog, sfeeds)
        for v in sprog.main.outputs:
            _check_value(v.type, sout[v.name], f"{case!r} (symbolic) output {v.name}", case.fresh_ok)
            np.testing.assert_array_equal(np.asarray(sout[v.name]) if not isinstance(sout[v.name], ListValue) else 0,
                                          np.asarray(out[v.name]) if not isinstance(out[v.name], ListValue) else 0)
