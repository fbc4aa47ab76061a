"""The measuring side of issue 8's quality criterion, checked before any pass exists:

- our op count and coremltools' agree on every source program (same file -> same histogram), so the
  counts of tests/optimize/test_op_counts.py and benchmarks/op_count.py compare like with like;
- coremltools' default pipeline applied to its own reading of the EMPTY-pipeline package gives
  exactly what ``ct.convert`` with the DEFAULT pipeline gives (so "coremltools' count" is its
  default pipeline on the very program ours runs on);
- our interpreter reproduces torch's outputs on the EMPTY-pipeline programs (and on coremltools'
  optimized ones), so "outputs match torch after our pipeline" is one call.

Oracles: coremltools' MIL proto loader and its pass pipeline (counts), torch (values).
"""

from __future__ import annotations

import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.types import tensor

from .coremltools_passes import apply_default
from .counting import ct_load, ct_op_count, ct_op_histogram, op_count, op_histogram
from .sources import SOURCE_NAMES, SourcePrograms
from .torch_oracle import assert_matches_torch


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_counts_agree_on_coremltools_default_program(name: str, sources: dict[str, SourcePrograms]) -> None:
    path = sources[name].default
    ours, theirs = converter.load(path), ct_load(path)
    assert op_histogram(ours) == ct_op_histogram(theirs)
    assert op_histogram(ours, consts=True) == ct_op_histogram(theirs, consts=True)


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_counts_agree_on_empty_program(name: str, sources: dict[str, SourcePrograms]) -> None:
    path = sources[name].empty
    ours, theirs = converter.load(path), ct_load(path)
    assert op_histogram(ours) == ct_op_histogram(theirs)
    assert op_histogram(ours, consts=True) == ct_op_histogram(theirs, consts=True)
    assert op_count(ours) == ct_op_count(theirs) > 0


def test_counts_include_nested_blocks_and_exclude_constants(tmp_path) -> None:
    """A program whose count is known by construction: relu, then cond (1 op) holding mul in one
    branch and sub + abs in the other; every literal is a const op, counted by neither."""

    def body(b, x):
        y = b.relu(x=x)
        (z,) = b.cond(b.const(np.bool_(True)), lambda t: [t.mul(x=y, y=2.0)],
                      lambda f: [f.abs(x=f.sub(x=y, y=1.0))])
        return [z]

    prog = new_program({"x": tensor("fp32", [2, 3])}, body)
    assert op_count(prog) == 5
    assert op_histogram(prog) == {"relu": 1, "cond": 1, "mul": 1, "sub": 1, "abs": 1}
    path = converter.save(prog, tmp_path / "nested.mlpackage")
    assert op_count(converter.load(path)) == ct_op_count(ct_load(path)) == 5


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_coremltools_pipeline_on_empty_program_is_its_default_conversion(
        name: str, sources: dict[str, SourcePrograms]) -> None:
    prog = apply_default(ct_load(sources[name].empty))
    assert ct_op_histogram(prog, consts=True) == ct_op_histogram(ct_load(sources[name].default), consts=True)


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_empty_program_matches_torch(name: str, sources: dict[str, SourcePrograms]) -> None:
    src = sources[name]
    outputs = converter.run(converter.load(src.empty), src.feeds())
    assert_matches_torch(outputs, src.torch_outputs(), f"{name} (EMPTY pipeline)")


@pytest.mark.parametrize("name", SOURCE_NAMES)
def test_coremltools_default_program_matches_torch(name: str, sources: dict[str, SourcePrograms]) -> None:
    src = sources[name]
    outputs = converter.run(converter.load(src.default), src.feeds())
    assert_matches_torch(outputs, src.torch_outputs(), f"{name} (coremltools DEFAULT pipeline)")


def test_empty_programs_hold_what_a_default_pipeline_removes(sources: dict[str, SourcePrograms]) -> None:
    """The sources do exercise the pipeline: coremltools' default pipeline removes ops from each."""
    for name in SOURCE_NAMES:
        empty, default = ct_op_count(ct_load(sources[name].empty)), ct_op_count(ct_load(sources[name].default))
        assert default < empty, f"{name}: {empty} ops -> {default}"
