"""Issue 3, every op through our own MIL writer and reader: for each case of tests/ops/cases (made
writable as for coremltools, see op_cases.loadable_case), save -> load gives a program that
computes bit-identical outputs, and load -> save -> load is a fixed point of the text form."""

from __future__ import annotations

from pathlib import Path

import pytest

import converter
from converter.ir.text import print_program
from tests.ops.harness import Case, build_program

from .helpers import same_bits
from .op_cases import CASES, case_key, loadable_case

pytestmark = pytest.mark.usefixtures("no_fsync")


@pytest.mark.parametrize("case", CASES, ids=case_key)
def test_op_case_round_trip(case: Case, tmp_path: Path):
    prog, feeds = build_program(loadable_case(case))
    loaded = converter.load(converter.save(prog, tmp_path / "a.mlpackage"))
    assert loaded.main.opset == prog.main.opset
    # coremltools' internal _const_symbolic is written (and read back) as const
    assert ("const" if case.op == "_const_symbolic" else case.op) in {op.type for op in loaded.walk()}
    again = converter.load(converter.save(loaded, tmp_path / "b.mlpackage"))
    assert print_program(again) == print_program(loaded)
    expected = converter.run(prog, feeds)
    got = converter.run(loaded, feeds)
    assert list(got) == list(expected)
    for k in expected:
        assert same_bits(got[k], expected[k]), f"output '{k}' differs after save -> load"
