"""The shortcuts that make the passes fast must not change what they do:

- the driver's structural pre-check of a rule (`prefilter`) never refuses an op the matcher would
  match or report as a near miss (checked on random programs with every fusion pattern sprinkled
  in, for every registered rule and the benchmark's dummy rules, which cover commutative ops,
  ``multi_use``, optional, absent and tuple inputs);
- a pass manager skips a pass only when it would see the program its last, unchanging run saw;
- cse merges large constants by their full bytes, whatever a byte sample says, and reuses a digest
  only while the op holds the same array; its sample of a file-mapped weight reads a few pages.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import converter
from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.interpreter import run
from converter.ir.types import tensor
from converter.ir.verify import verify
from converter.passes.base import Pass, PassManager, PassResult
from converter.passes.canonicalize import Canonicalize
from converter.passes.cse import SAMPLE, SMALL_CONST, CommonSubexpressionElimination
from converter.passes.pipelines import all_rules
from converter.passes.rewrite import const, match_rule, op, var
from converter.passes.rewrite.match import prefilter

from .test_random_fusions import with_fusion_patterns

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from memory import mapped_resident_bytes  # noqa: E402
from rule_load import dummy_rules  # noqa: E402

RULES = list(all_rules().values()) + dummy_rules()
CHECKS = [(r, prefilter(r.pattern)) for r in RULES]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(with_fusion_patterns())
def test_the_pre_check_refuses_only_what_the_matcher_refuses_without_a_near_miss(case) -> None:
    prog, _, _ = case
    for o in prog.walk():
        for r, possible in CHECKS:
            if o.type in r.root_types and not possible(o):
                outcome = match_rule(r, o)
                assert outcome.match is None and not outcome.near_miss, (r.name, o.name, outcome.reason)


def test_the_pre_check_passes_both_orders_of_commutative_ops_and_defaults() -> None:
    def body(b, x):
        c = b.const(val=np.float32(0))
        y = b.add(x=c, y=x)  # the constant first: add_zero matches it swapped
        return [b.cast(x=y, dtype="fp32")]

    prog = new_program({"x": tensor("fp32", [3])}, body)
    rules = all_rules()
    add = next(op for op in prog.walk() if op.type == "add")
    assert prefilter(rules["add_zero"].pattern)(add) and match_rule(rules["add_zero"], add).match is not None
    assert not prefilter(rules["reshape_chain"].pattern)(add)
    # an op's own condition is part of the pre-check, in both operand orders
    named = op.add(x=var("x"), y=const("c")).where(lambda o: o.name == add.name)
    other = op.add(x=var("x"), y=const("c")).where(lambda o: o.name != add.name)
    assert prefilter(named)(add) and not prefilter(other)(add)


class _Counting(Pass):
    """Changes the program on its first ``changes`` runs (appends nothing: only says so), counts runs."""

    name = "counting"

    def __init__(self, changes: int) -> None:
        self.changes = changes
        self.runs = 0

    def run(self, program: Program) -> PassResult:
        self.runs += 1
        return PassResult(self.runs <= self.changes)


def test_a_pass_is_skipped_only_when_nothing_changed_since_its_unchanging_run() -> None:
    prog = new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.relu(x=x)])
    a, b, c = _Counting(0), _Counting(2), _Counting(0)
    stats = PassManager([a, b, c], fixed_point=True, max_iterations=5).run(prog)
    # round 1: b changes; round 2: a and c run again (b changed since), b changes again;
    # round 3: a runs (b changed since its run), b runs, c is skipped only if b did not change: it did
    # not (its third run) -> c skipped, and the round ends the pipeline
    assert (a.runs, b.runs, c.runs) == (3, 3, 2)
    assert [(p.name, p.iteration, p.skipped) for p in stats.passes if p.skipped] == [("counting", 3, True)]
    assert "skipped: nothing changed since its last run" in stats.format()
    assert ", 8 pass runs (1 skipped), 3 rounds" in stats.summary()
    # a pass that changed the program runs again even with nothing after it (passes need not be idempotent)
    d = _Counting(1)
    PassManager([d], fixed_point=True, max_iterations=5).run(prog)
    assert d.runs == 2


def _two_weights(w1: np.ndarray, w2: np.ndarray) -> Program:
    def body(b, x):
        return [b.add(x=b.matmul(x=x, y=w1), y=b.matmul(x=x, y=w2))]

    return new_program({"x": tensor("fp32", [2, w1.shape[0]])}, body)


def test_cse_merges_large_constants_by_all_their_bytes_not_a_sample() -> None:
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 7
    assert w.nbytes > SMALL_CONST and w.size > SAMPLE
    near = w.copy()
    near[1, 1] += 1  # a byte the sample does not read (16-byte runs at the start, thirds and end)
    prog = _two_weights(w, near)
    assert "const" not in CommonSubexpressionElimination().run(prog).stats["merged"]
    prog = _two_weights(w, w.copy())
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)}
    want = run(prog, feeds)
    assert CommonSubexpressionElimination().run(prog).stats["merged"] == {"const": 1, "matmul": 1}
    verify(prog)
    np.testing.assert_array_equal(run(prog, feeds)[next(iter(want))], next(iter(want.values())))


def test_cse_reuses_a_digest_only_while_the_op_holds_the_same_array() -> None:
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 7
    prog = _two_weights(w, w + 1)  # same size and type, different bytes
    cse = CommonSubexpressionElimination()
    assert not cse.run(prog).modified
    consts = [op for op in prog.walk() if op.type == "const" and np.asarray(op.attributes["val"]).size == w.size]
    consts[1].attributes["val"] = w.copy()  # now equal to the first: a stale digest would keep them apart
    assert cse.run(prog).stats["merged"].get("const") == 1


def test_canonicalize_pass_objects_run_alike_on_a_second_program() -> None:
    """A rewrite pass object keeps no state that a second program could trip on."""
    p = Canonicalize()
    for _ in range(2):
        prog = new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.relu(x=b.add(x=x, y=np.float32(0)))])
        assert p.run(prog).stats["rewrites"] == {"add_zero": 1}


def test_cse_reads_a_few_pages_of_large_file_mapped_weights_of_one_shape(tmp_path: Path) -> None:
    """Two distinct 8 MB weights of one shape, read from a saved package through mmap: telling
    them apart reads a few pages of each (a sample of contiguous runs), so most of the weight file
    never becomes resident in the process. The sample spread over the array made all of it
    resident (64 page faults; each maps what surrounds it: 64 KiB, or a whole large folio, on
    Linux 6.18 here, where the runs leave 38% resident; with 4 KiB folios it is ~3%)."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((2048, 1024)).astype(np.float32) for _ in range(2))
    pkg = converter.save(_two_weights(w1, w2), tmp_path / "two.mlpackage")
    prog = converter.load(pkg)
    weight_file = next(Path(pkg).rglob("weight.bin"))
    before = mapped_resident_bytes(weight_file)
    if before is None:
        pytest.skip("no /proc/self/smaps")
    assert not CommonSubexpressionElimination().run(prog).modified
    assert mapped_resident_bytes(weight_file) < 0.45 * (w1.nbytes + w2.nbytes)
