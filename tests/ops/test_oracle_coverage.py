"""Accounting of how every op's kernel is checked.

Each ``tests/ops/test_oracle_*.py`` module declares ``ORACLE = {op: "oracle used"}`` and tests
every op it declares against that independent oracle (onnxruntime, onnx.reference, torch, the
WebNN vectors). Ops no oracle covers are listed, with the reason, in the docstring and the
``FORMULA_CHECKED = {op: reason}`` table of a ``tests/ops/test_formulas_*.py`` module, and are
checked there against expected values written in the test from the spec text.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from converter.ir.opdef import registered_op_types


def _tables() -> tuple[dict[str, str], dict[str, str]]:
    here = Path(__file__).parent
    oracle: dict[str, str] = {}
    formulas: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("test_oracle_") and info.name != "test_oracle_coverage":
            mod = importlib.import_module(f"tests.ops.{info.name}")
            for op, how in getattr(mod, "ORACLE", {}).items():
                oracle.setdefault(op, how)
        elif info.name.startswith("test_formulas_"):
            mod = importlib.import_module(f"tests.ops.{info.name}")
            formulas.update(getattr(mod, "FORMULA_CHECKED", {}))
    return oracle, formulas


def test_every_op_is_checked_somewhere():
    oracle, formulas = _tables()
    unchecked = sorted(set(registered_op_types()) - set(oracle) - set(formulas))
    assert not unchecked, f"ops checked by no oracle and no spec formula: {unchecked}"


def test_at_least_90_percent_oracle_checked():
    oracle, _ = _tables()
    ops = set(registered_op_types())
    share = len(ops & set(oracle)) / len(ops)
    assert share >= 0.90, f"only {share:.1%} of {len(ops)} ops are oracle-checked"


def test_formula_list_names_only_ops_without_oracle():
    oracle, formulas = _tables()
    both = sorted(set(oracle) & set(formulas))
    assert not both, f"listed as formula-checked but an oracle covers them: {both}"
