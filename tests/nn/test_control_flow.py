"""branch, loop, loopBreak, loopContinue and copy.

Oracle: the spec's semantics written here as Python over numpy (the branch and loop pseudo-code
of the spec; nested networks read and write the enclosing network's blobs by name; a condition is
true when its magnitude exceeds 1e-6, the threshold coremltools' builder documents for branch:
"if_branch: Neural network to execute if the absolute value of the input tensor is greater than
1e-6"). onnxmltools has no converter for these layers. Every converted model also goes through MIL.
Comparisons against those formulas go through ``spec_formula`` (recorded as oracle checks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import FormatError, UnsupportedError
from tests.conftest import MODELS
from tests.nn_models.coverage import oracle_checks

from .common import builder, compare_with_oracle, convert_and_run, flexible, load_spec, op_types, through_mil

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "activation",
    "add",
    "addBroadcastable",
    "branch",
    "concatND",
    "copy",
    "expandDims",
    "gather",
    "greaterThan",
    "innerProduct",
    "lessThan",
    "loadConstantND",
    "loop",
    "loopBreak",
    "loopContinue",
    "multiply",
    "reverse",
    "scatter",
    "slice",
    "squeeze",
    "transpose",
}

BUILDER = MODELS / "builder"
X = np.array([0.5, -1.25, 2.0], np.float32)


def spec_formula(got: Any, want: Any) -> None:
    """``got`` equals the value the spec's semantics give (computed in the test)."""
    compare_with_oracle(np.asarray(got).reshape(np.shape(want)), want, oracle="spec formula", rtol=1e-6, atol=1e-7)


def nested(nn_spec: Any) -> Any:
    """A builder adding layers to a nested network (branch arm, loop body or condition)."""
    from coremltools.models.neural_network import NeuralNetworkBuilder

    return NeuralNetworkBuilder(nn_spec=nn_spec, disable_rank5_shape_mapping=True)


def model(inputs: dict[str, tuple[int, ...]], outputs: tuple[str, ...], body: Callable[[Any], None]) -> Any:
    b = builder(inputs, outputs, nd=True)
    body(b)
    return b.spec


def scale(b: Any, name: str, src: str, dst: str, k: float) -> None:
    b.add_elementwise(name, [src], dst, "MULTIPLY", alpha=k)


def plus(b: Any, name: str, srcs: list[str], dst: str, k: float = 0.0) -> None:
    b.add_elementwise(name, srcs, dst, "ADD", alpha=k)


# -- the shared builder models -------------------------------------------------------------------


@oracle_checks("branch")
@pytest.mark.parametrize("cond", [1.0, 0.0, -2.0, 5e-7, -5e-7, 2e-6])
def test_shared_branch_model(cond: float, tmp_path: Path):
    path = BUILDER / "control_flow_branch.mlmodel"
    feeds = dict(np.load(path.with_suffix(".npz")))
    feeds["cond"] = np.array([cond], np.float32)
    x = feeds["x"].astype(np.float64)
    want = 2 * x if abs(cond) > 1e-6 else np.tanh(x)
    prog = converter.load(path)
    assert "cond" in op_types(prog)
    spec_formula(converter.run(prog, feeds)["y"], want)
    through_mil(prog, feeds, tmp_path)


def test_shared_loop_model(tmp_path: Path):
    path = BUILDER / "control_flow_loop.mlmodel"
    feeds = dict(np.load(path.with_suffix(".npz")))
    x = feeds["x"].astype(np.float64)
    acc = x.copy()  # init: copy x -> acc; 4 times: acc = 0.5 * acc + x
    for _ in range(4):
        acc = 0.5 * acc + x
    prog = converter.load(path)
    assert "while_loop" in op_types(prog)
    np.testing.assert_allclose(converter.run(prog, feeds)["acc"], acc, rtol=1e-6)
    through_mil(prog, feeds, tmp_path)


# -- branch ---------------------------------------------------------------------------------------


def _branch_model(else_writes_acc: bool) -> Any:
    def body(b: Any) -> None:
        b.add_copy("init", "x", "acc")
        layer = b.add_branch("branch", "c")
        t = nested(layer.branch.ifBranch)
        scale(t, "triple", "acc", "t", 3.0)
        t.add_copy("write_acc", "t", "acc")  # overwrite a blob of the enclosing network
        t.add_activation("new_if", "TANH", "x", "new")  # a blob first produced in the branch
        e = nested(layer.branch.elseBranch)
        e.add_activation("new_else", "RELU", "x", "new")
        if else_writes_acc:
            scale(e, "neg", "x", "n", -1.0)
            e.add_copy("write_acc_else", "n", "acc")
        plus(b, "sum", ["acc", "new"], "y")

    return model({"x": (3,), "c": (1,)}, ("y",), body)


@oracle_checks("branch")
@pytest.mark.parametrize("else_writes_acc", [False, True])
@pytest.mark.parametrize("c", [1.0, 0.0, -0.5])
def test_branch_writes_enclosing_blobs(c: float, else_writes_acc: bool, tmp_path: Path):
    """if c: acc = 3 acc; new = tanh(x) else: new = relu(x) (and acc = -x); y = acc + new. The two
    arms compute different values, so running the wrong one (or swapping them) changes y."""
    x = X.astype(np.float64)
    if abs(c) > 1e-6:
        want = 3 * x + np.tanh(x)
    else:
        want = (-x if else_writes_acc else x) + np.maximum(x, 0)
    outs, prog = convert_and_run(_branch_model(else_writes_acc), {"x": X, "c": np.array([c], np.float32)}, tmp_path)
    spec_formula(outs["y"], want)
    (cond_op,) = [op for op in prog.walk() if op.type == "cond"]
    assert len(cond_op.outputs) == 2  # acc and new; the arms' temporaries stay inside


def test_blob_produced_in_one_arm_only(tmp_path: Path):
    """The else arm does not produce z, which is read after the branch: Core ML leaves it undefined
    on that path; the conversion gives zeros there and says so."""

    def body(b: Any) -> None:
        layer = b.add_branch("branch", "c")
        scale(nested(layer.branch.ifBranch), "double", "x", "z", 2.0)
        plus(b, "sum", ["z", "x"], "y")

    spec = model({"x": (3,), "c": (1,)}, ("y",), body)
    for c, want in ((1.0, 3 * X), (0.0, X)):
        outs, prog = convert_and_run(spec, {"x": X, "c": np.array([c], np.float32)}, tmp_path)
        np.testing.assert_allclose(outs["y"], want, rtol=1e-6)
    assert any("only some paths" in n for n in prog.meta["notes"])


@oracle_checks("branch")
def test_nested_branches(tmp_path: Path):
    """if c1: (if c2: y = x + 1 else y = x + 2) else y = x + 3."""

    def body(b: Any) -> None:
        outer = b.add_branch("outer", "c1")
        inner = nested(outer.branch.ifBranch).add_branch("inner", "c2")
        plus(nested(inner.branch.ifBranch), "p1", ["x"], "y", 1.0)
        plus(nested(inner.branch.elseBranch), "p2", ["x"], "y", 2.0)
        plus(nested(outer.branch.elseBranch), "p3", ["x"], "y", 3.0)

    spec = model({"x": (3,), "c1": (1,), "c2": (1,)}, ("y",), body)
    for c1, c2, k in ((1, 1, 1), (1, 0, 2), (0, 1, 3), (0, 0, 3)):
        feeds = {"x": X, "c1": np.array([c1], np.float32), "c2": np.array([c2], np.float32)}
        outs, _ = convert_and_run(spec, feeds, tmp_path)
        spec_formula(outs["y"], X.astype(np.float64) + k)


# -- loop -----------------------------------------------------------------------------------------


def _acc_body(body: Any, factor: float = 0.5) -> None:
    """acc = factor * acc + x"""
    scale(body, "body_mul", "acc", "acc_scaled", factor)
    plus(body, "body_add", ["acc_scaled", "x"], "acc_sum")
    body.add_copy("body_copy", "acc_sum", "acc")


def _acc_ref(x: np.ndarray, iterations: int, factor: float = 0.5) -> np.ndarray:
    acc = x.astype(np.float64)
    for _ in range(iterations):
        acc = factor * acc + x
    return acc


@pytest.mark.parametrize("n", [0.0, 1.0, 3.0])
def test_loop_count_from_input(n: float, tmp_path: Path):
    """The optional input is the iteration count; maxLoopIterations (100) is then ignored."""

    def body(b: Any) -> None:
        b.add_copy("init", "x", "acc")
        layer = b.add_loop("loop", input_name="n", max_iterations=100)
        _acc_body(nested(layer.loop.bodyNetwork))

    outs, _ = convert_and_run(model({"x": (3,), "n": (1,)}, ("acc",), body), {"x": X, "n": np.array([n], np.float32)},
                              tmp_path)
    np.testing.assert_allclose(outs["acc"], _acc_ref(X, int(n)), rtol=1e-6)


def _counting_loop(max_iterations: int | None, limit_blob: bool = True) -> Any:
    """while i < limit (conditionNetwork): i = i + 1; acc = 2 acc. The condition network's blob
    'cond' is an output too (visible after the loop)."""

    def body(b: Any) -> None:
        b.add_copy("init_acc", "x", "acc")
        b.add_load_constant_nd("zero", "i", np.zeros(1, np.float32), (1,))
        layer = b.add_loop("loop", condition="cond", max_iterations=max_iterations)
        cnet = nested(layer.loop.conditionNetwork)
        cnet.add_less_than("less", ["i", "limit"], "cond")
        bnet = nested(layer.loop.bodyNetwork)
        plus(bnet, "inc", ["i"], "i_next", 1.0)
        bnet.add_copy("write_i", "i_next", "i")
        scale(bnet, "double", "acc", "acc2", 2.0)
        bnet.add_copy("write_acc", "acc2", "acc")

    return model({"x": (3,), "limit": (1,)}, ("acc", "i", "cond"), body)


@pytest.mark.parametrize("limit", [0.0, 2.5, 4.0])
@pytest.mark.parametrize("max_iterations", [None, 2])
def test_loop_with_condition_network(limit: float, max_iterations: int | None, tmp_path: Path):
    """Case 2 (condition only) and case 3 (condition and a positive maxLoopIterations)."""
    i, it = 0.0, 0
    while i < limit and (max_iterations is None or it < max_iterations):
        i, it = i + 1, it + 1
    outs, _ = convert_and_run(_counting_loop(max_iterations), {"x": X, "limit": np.array([limit], np.float32)},
                              tmp_path)
    np.testing.assert_allclose(outs["acc"], X * 2.0**it, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(outs["i"]).reshape(-1), [i])
    np.testing.assert_array_equal(np.asarray(outs["cond"]).reshape(-1), [float(i < limit)])


def _jump_loop(kind: str, threshold: float, max_iterations: int, count: bool, limit: float | None) -> Any:
    """A loop whose body is: i = i + 1; before = before + x; if i > threshold: <kind>;
    after = after + x. The loop runs maxLoopIterations times, or n times (the input, when
    ``count``), and/or while i < limit (a conditionNetwork writing 'go', when ``limit`` is set).
    Outputs before, after, i (and go)."""

    def body(b: Any) -> None:
        b.add_copy("init_before", "x", "before")
        b.add_copy("init_after", "x", "after")
        b.add_load_constant_nd("zero", "i", np.zeros(1, np.float32), (1,))
        layer = b.add_loop("loop", input_name="n" if count else None, max_iterations=max_iterations,
                           condition="go" if limit is not None else None)
        if limit is not None:
            nested(layer.loop.conditionNetwork).add_less_than("less", ["i"], "go", alpha=limit)
        bnet = nested(layer.loop.bodyNetwork)
        plus(bnet, "inc", ["i"], "i_next", 1.0)
        bnet.add_copy("write_i", "i_next", "i")
        plus(bnet, "add_before", ["before", "x"], "before_next")
        bnet.add_copy("write_before", "before_next", "before")
        bnet.add_greater_than("test", ["i"], "stop", alpha=threshold)
        arm = bnet.add_branch("maybe", "stop")
        jump = nested(arm.branch.ifBranch)
        jump.add_loop_break("jump") if kind == "break" else jump.add_loop_continue("jump")
        plus(bnet, "add_after", ["after", "x"], "after_next")
        bnet.add_copy("write_after", "after_next", "after")

    outputs = ("before", "after", "i") + (("go",) if limit is not None else ())
    return model({"x": (3,), "n": (1,)} if count else {"x": (3,)}, outputs, body)


def _jump_ref(kind: str, threshold: float, max_iterations: int, n: int | None,
              limit: float | None) -> tuple[int, int, float, bool | None]:
    """(additions of x before the jump, after it, final i, final go) by the spec's pseudo-code:

    - the iteration limit is the input when present ("the value of the maxLoopIterations field is
      ignored"), else maxLoopIterations; case 2 (a conditionNetwork, maxLoopIterations 0, no
      input) has no limit: "while conditionVar: bodyNetwork(); conditionVar = conditionNetwork()";
      case 3 joins both: "while (conditionVar and loopIterator < maxLoopIterations)";
    - loopBreak "Terminate the loop that has this layer": nothing after it runs, the condition
      network included (it is part of the loop statement the break leaves);
    - loopContinue "Stop the current loop iteration and continue on the next iteration": the rest
      of the body is skipped; the loop's own bookkeeping (loopIterator + 1 and conditionVar =
      conditionNetwork()) still runs, as for a C ``for`` loop (without it a while loop holding a
      continue could never end: its conditionVar would never be recomputed)."""
    limit_count = n if n is not None else (max_iterations if limit is None or max_iterations > 0 else None)
    i, before, after, it = 0.0, 0, 0, 0
    go = (i < limit) if limit is not None else None
    while (go is None or go) and (limit_count is None or it < limit_count):
        i += 1
        before += 1
        if i > threshold and kind == "break":
            break
        if not i > threshold:
            after += 1
        it += 1
        if limit is not None:
            go = i < limit
    return before, after, i, go


# (threshold, maxLoopIterations, count input, limit of a condition network)
_JUMP_CASES = [
    (2.5, 10, None, None),  # case 1: maxLoopIterations
    (0.5, 10, None, None),  # jumps in the first iteration
    (20.0, 5, None, None),  # never jumps
    (2.5, 1, 6, None),  # case 1 with the input: 6 iterations, maxLoopIterations (1) ignored
    (1.5, 100, 0, None),  # the input says 0 iterations
    (4.5, 0, None, 3.0),  # case 2: while i < 3
    (1.5, 0, None, 5.0),  # case 2, jumping at i = 2
    (2.5, 0, None, 3.0),  # case 2, jumping at i = 3 = limit: go after the jump tells whether the condition ran
    (2.5, 4, None, 6.0),  # case 3: maxLoopIterations (4) ends it before the condition
    (2.5, 10, None, 4.0),  # case 3: the condition ends it before maxLoopIterations
    (2.5, 9, 3, 6.0),  # case 3 with the input (3) as the limit
    (4.5, 9, 3, 6.0),  # ... which ends it before any jump, maxLoopIterations (9) ignored
    (20.0, 4, None, 6.0),  # case 3: maxLoopIterations ends it, no jump
]


def _check_jump_loop(kind: str, threshold: float, max_iterations: int, n: int | None, limit: float | None,
                     tmp: Path) -> None:
    before, after, i, go = _jump_ref(kind, threshold, max_iterations, n, limit)
    feeds = {"x": X} if n is None else {"x": X, "n": np.array([n], np.float32)}
    outs, _ = convert_and_run(_jump_loop(kind, threshold, max_iterations, n is not None, limit), feeds, tmp)
    x = X.astype(np.float64)
    spec_formula(outs["before"], x * (1 + before))
    spec_formula(outs["after"], x * (1 + after))
    spec_formula(outs["i"], np.array([i]))
    if go is not None:
        spec_formula(outs["go"], np.array([float(go)]))


@oracle_checks("loopBreak")
@pytest.mark.parametrize("threshold, max_iterations, n, limit", _JUMP_CASES, ids=str)
def test_loop_break(threshold: float, max_iterations: int, n: int | None, limit: float | None, tmp_path: Path):
    """A loopBreak in a branch of the body, in each of the spec's three loop cases: what ran before
    it in the breaking iteration stays, nothing after it runs (the condition network included)."""
    _check_jump_loop("break", threshold, max_iterations, n, limit, tmp_path)


@oracle_checks("loopContinue")
@pytest.mark.parametrize("threshold, max_iterations, n, limit", _JUMP_CASES, ids=str)
def test_loop_continue(threshold: float, max_iterations: int, n: int | None, limit: float | None, tmp_path: Path):
    """A loopContinue in a branch of the body, in each of the spec's three loop cases: the rest of
    the iteration is skipped, the loop goes on (iteration count and condition network as usual)."""
    _check_jump_loop("continue", threshold, max_iterations, n, limit, tmp_path)


def test_unconditional_break_ends_the_body(tmp_path: Path):
    """Layers after a top-level loopBreak never run; the loop runs once."""

    def body(b: Any) -> None:
        b.add_copy("init_acc", "x", "acc")
        layer = b.add_loop("loop", max_iterations=7)
        bnet = nested(layer.loop.bodyNetwork)
        _acc_body(bnet, 1.0)
        bnet.add_loop_break("stop")
        scale(bnet, "dead", "acc", "acc_dead", 100.0)
        bnet.add_copy("write_dead", "acc_dead", "acc")

    outs, prog = convert_and_run(model({"x": (3,)}, ("acc",), body), {"x": X}, tmp_path)
    np.testing.assert_allclose(outs["acc"], 2 * X, rtol=1e-6)
    assert not any(op.name.startswith("dead") for op in prog.walk())


def test_nested_loops_break_the_inner_one(tmp_path: Path):
    """outer 3 times: (inner up to 10 times: j = j + 1; if j > 1.5: break; acc = acc + x); j = 0
    A break belongs to the loop whose body holds it."""

    def body(b: Any) -> None:
        b.add_copy("init_acc", "x", "acc")
        b.add_load_constant_nd("zero", "j", np.zeros(1, np.float32), (1,))
        outer = nested(b.add_loop("outer", max_iterations=3).loop.bodyNetwork)
        inner = nested(outer.add_loop("inner", max_iterations=10).loop.bodyNetwork)
        plus(inner, "inc", ["j"], "j_next", 1.0)
        inner.add_copy("write_j", "j_next", "j")
        inner.add_greater_than("test", ["j"], "stop", alpha=1.5)
        nested(inner.add_branch("maybe", "stop").branch.ifBranch).add_loop_break("jump")
        plus(inner, "add", ["acc", "x"], "acc_next")
        inner.add_copy("write_acc", "acc_next", "acc")
        outer.add_load_constant_nd("reset", "j0", np.zeros(1, np.float32), (1,))
        outer.add_copy("write_j0", "j0", "j")

    outs, _ = convert_and_run(model({"x": (3,)}, ("acc",), body), {"x": X}, tmp_path)
    np.testing.assert_allclose(outs["acc"], X * (1 + 3), rtol=1e-6)  # one addition per outer pass


def test_break_before_an_inner_loop_skips_it(tmp_path: Path):
    """outer up to 5 times: i = i + 1; if i > 2.5: break; (inner 2 times: acc = acc + x)"""

    def body(b: Any) -> None:
        b.add_copy("init_acc", "x", "acc")
        b.add_load_constant_nd("zero", "i", np.zeros(1, np.float32), (1,))
        outer = nested(b.add_loop("outer", max_iterations=5).loop.bodyNetwork)
        plus(outer, "inc", ["i"], "i_next", 1.0)
        outer.add_copy("write_i", "i_next", "i")
        outer.add_greater_than("test", ["i"], "stop", alpha=2.5)
        nested(outer.add_branch("maybe", "stop").branch.ifBranch).add_loop_break("jump")
        inner = nested(outer.add_loop("inner", max_iterations=2).loop.bodyNetwork)
        plus(inner, "add", ["acc", "x"], "acc_next")
        inner.add_copy("write_acc", "acc_next", "acc")

    outs, _ = convert_and_run(model({"x": (3,)}, ("acc", "i"), body), {"x": X}, tmp_path)
    np.testing.assert_allclose(outs["acc"], 5 * X, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(outs["i"]).reshape(-1), [3.0])


def test_branch_in_loop_body_writes_loop_variable(tmp_path: Path):
    """for 4 times: i = i + 1; if i > 2.5: acc = acc * 3 else: acc = acc + x"""

    def body(b: Any) -> None:
        b.add_copy("init_acc", "x", "acc")
        b.add_load_constant_nd("zero", "i", np.zeros(1, np.float32), (1,))
        bnet = nested(b.add_loop("loop", max_iterations=4).loop.bodyNetwork)
        plus(bnet, "inc", ["i"], "i_next", 1.0)
        bnet.add_copy("write_i", "i_next", "i")
        bnet.add_greater_than("test", ["i"], "late", alpha=2.5)
        arm = bnet.add_branch("which", "late")
        t = nested(arm.branch.ifBranch)
        scale(t, "triple", "acc", "a3", 3.0)
        t.add_copy("w3", "a3", "acc")
        e = nested(arm.branch.elseBranch)
        plus(e, "addx", ["acc", "x"], "ax")
        e.add_copy("wx", "ax", "acc")

    acc = X.astype(np.float64)
    for i in range(1, 5):
        acc = acc * 3 if i > 2.5 else acc + X
    outs, _ = convert_and_run(model({"x": (3,)}, ("acc",), body), {"x": X}, tmp_path)
    np.testing.assert_allclose(outs["acc"], acc, rtol=1e-6)


@pytest.mark.parametrize("n", [3.0, 0.0])
def test_blob_first_produced_in_the_body_is_visible_after(n: float, tmp_path: Path):
    """'last' is produced only inside the body and read after the loop: it is loop-carried (its
    last value; zeros if the loop never ran, where Core ML has no value)."""

    def body(b: Any) -> None:
        b.add_copy("init", "x", "acc")
        bnet = nested(b.add_loop("loop", input_name="n").loop.bodyNetwork)
        _acc_body(bnet)
        scale(bnet, "snapshot", "acc", "last", 10.0)
        plus(b, "after", ["last"], "y", 1.0)

    outs, prog = convert_and_run(model({"x": (3,), "n": (1,)}, ("y",), body), {"x": X, "n": np.array([n], np.float32)},
                                 tmp_path)
    want = 10 * _acc_ref(X, int(n)) + 1 if n else np.ones(3)
    np.testing.assert_allclose(outs["y"], want, rtol=1e-6)
    assert any("'last'" in note for note in prog.meta["notes"])


def test_copy_aliases_without_an_op(tmp_path: Path):
    spec = model({"x": (3,)}, ("y",), lambda b: b.add_copy("c", "x", "y"))
    outs, prog = convert_and_run(spec, {"x": X}, tmp_path)
    np.testing.assert_array_equal(outs["y"], X)
    assert op_types(prog) <= {"identity"}


# -- malformed layers ----------------------------------------------------------------------------


def _bad_break(b: Any) -> None:
    b.add_copy("init", "x", "y")
    b.add_loop_break("stray")


def _cond_without_var(b: Any) -> None:
    layer = b.add_loop("stray", max_iterations=2)
    nested(layer.loop.conditionNetwork).add_less_than("less", ["x"], "go", alpha=1.0)
    b.add_copy("c", "x", "y")


def _missing_cond_var(b: Any) -> None:
    b.add_loop("stray", condition="nowhere")
    b.add_copy("c", "x", "y")


def _branch_with_output(b: Any) -> None:
    layer = b.add_branch("stray", "x")
    layer.output.append("y")


def _same_name_copy(b: Any) -> None:
    b.add_copy("stray", "x", "x")
    b.add_copy("c", "x", "y")


@pytest.mark.parametrize("what, body, message", [
    ("loopBreak outside a loop", _bad_break, "bodyNetwork"),
    ("conditionNetwork without conditionVar", _cond_without_var, "conditionVar"),
    ("conditionVar nobody produces", _missing_cond_var, "nowhere"),
    ("branch listing an output", _branch_with_output, "no outputs"),
    ("copy onto itself", _same_name_copy, "distinct"),
    ("condition of three values", lambda b: (b.add_branch("stray", "x"), b.add_copy("c", "x", "y")), "one value"),
])
def test_malformed_layer(what: str, body: Callable[[Any], None], message: str, tmp_path: Path):
    with pytest.raises(FormatError) as err:
        load_spec(model({"x": (3,)}, ("y",), body), tmp_path)
    assert err.value.op == "stray", what
    assert message in str(err.value)


def test_blob_of_unknown_shape_on_one_path_is_unsupported(tmp_path: Path):
    """A blob produced on one arm only, read after, whose shape is not static: nothing can stand
    in for it on the other path."""
    def body(b: Any) -> None:
        layer = b.add_branch("branch", "c")
        scale(nested(layer.branch.ifBranch), "double", "x", "z", 2.0)
        plus(b, "sum", ["z", "x"], "y")

    spec = model({"x": (3,), "c": (1,)}, ("y",), body)
    flexible(spec, "x", [1], [8])
    with pytest.raises(UnsupportedError, match="'z'"):
        load_spec(spec, tmp_path)


def test_branch_whose_results_nobody_reads(tmp_path: Path):
    def body(b: Any) -> None:
        layer = b.add_branch("branch", "c")
        scale(nested(layer.branch.ifBranch), "double", "x", "unused", 2.0)
        b.add_copy("c", "x", "y")

    outs, prog = convert_and_run(model({"x": (3,), "c": (1,)}, ("y",), body),
                                 {"x": X, "c": np.array([1.0], np.float32)}, tmp_path)
    np.testing.assert_array_equal(outs["y"], X)
    assert "cond" not in op_types(prog)


# -- conversion cost ------------------------------------------------------------------------------


def _branches(n: int) -> Any:
    """n branches in a row, each doubling acc when c is set."""

    def body(b: Any) -> None:
        b.add_copy("init", "x", "acc")
        for i in range(n):
            arm = nested(b.add_branch(f"branch{i}", "c").branch.ifBranch)
            scale(arm, f"double{i}", "acc", f"acc{i}", 2.0)
            arm.add_copy(f"write{i}", f"acc{i}", "acc")
        b.add_copy("out", "acc", "y")

    return model({"x": (3,), "c": (1,)}, ("y",), body)


def test_control_flow_walks_the_model_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """What the layers of the model read is counted once per conversion, not once per branch or loop."""
    from converter.frontends.neuralnetwork import model as nn_model

    walks = []
    iter_layers = nn_model.iter_layers

    def counting(nn: Any, path: str = ""):
        if not path:
            walks.append(nn)
        return iter_layers(nn, path)

    monkeypatch.setattr(nn_model, "iter_layers", counting)
    counts = []
    for n in (2, 12):
        walks.clear()
        prog = load_spec(_branches(n), tmp_path)
        outs = converter.run(prog, {"x": X, "c": np.array([1.0], np.float32)})
        np.testing.assert_allclose(outs["y"], X * 2.0**n, rtol=1e-6)
        counts.append(len(walks))
    assert counts[0] == counts[1], counts


def test_nested_loop_bodies_are_not_converted_exponentially(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Three nested loops, each producing a blob read after it (its initial value needs the blob's
    type, which a probe conversion of the body finds): the innermost body is converted
    depth + 1 = 4 times, not 2**3 = 8."""
    from converter.frontends.neuralnetwork.registry import LOWERINGS, load_all

    load_all()
    activation = LOWERINGS["activation"]
    innermost = []

    def counting(ctx: Any) -> Any:
        if ctx.name == "innermost":
            innermost.append(ctx)
        return activation(ctx)

    monkeypatch.setitem(LOWERINGS, "activation", counting)

    def body(b: Any) -> None:
        net1 = nested(b.add_loop("loop1", max_iterations=2).loop.bodyNetwork)
        net2 = nested(net1.add_loop("loop2", max_iterations=2).loop.bodyNetwork)
        net3 = nested(net2.add_loop("loop3", max_iterations=2).loop.bodyNetwork)
        net3.add_activation("innermost", "RELU", "x", "g3")
        net2.add_copy("read_g3", "g3", "g2")
        net1.add_copy("read_g2", "g2", "g1")
        b.add_copy("read_g1", "g1", "y")

    prog = load_spec(model({"x": (3,)}, ("y",), body), tmp_path)
    assert len(innermost) == 4
    np.testing.assert_array_equal(converter.run(prog, {"x": X})["y"], np.maximum(X, 0))


def test_torch_bidirectional_gru_model(tmp_path: Path):
    """torch.nn.GRU(bidirectional) converted by coremltools into a NeuralNetwork (spec 4) that
    unrolls each direction as a loop layer whose body gathers a step, updates the state and writes
    it back with copy layers: its output against torch's."""
    import json

    torch_dir = MODELS / "torch"
    (name,) = json.loads((torch_dir / "RESULTS.json").read_text())["models"]["gru_bidirectional"]["nn"]["outputs"]
    feeds = dict(np.load(torch_dir / "gru_bidirectional.inputs.npz"))
    want = np.load(torch_dir / "gru_bidirectional.torch_outputs.npz")["output_0"]
    prog = converter.load(torch_dir / "gru_bidirectional_nn.mlmodel")
    assert sum(op.type == "while_loop" for op in prog.walk()) == 2
    outs = converter.run(prog, feeds)
    np.testing.assert_allclose(np.asarray(outs[name]).reshape(want.shape), want, atol=1e-5, rtol=1e-5)
    through_mil(prog, feeds, tmp_path)
