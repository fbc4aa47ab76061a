"""If / Loop / Scan: ONNX subgraphs -> IR cond / while_loop blocks. Oracle: onnxruntime running the
same model, on inputs chosen to exercise each path (both branches, early exit, zero iterations, no
trip count, reversed scan directions, moved scan axes, outer-scope values, a carried value that
grows, nesting), plus the MIL round trip of the built programs (ONNX -> IR -> .mlpackage -> IR)."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import converter
from converter.errors import UnsupportedError
from converter.frontends.onnx import load_onnx

from .feeding import run_program as run

F = T.FLOAT


def _vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, opset=21, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _check(model, feeds, tmp_path=None):
    """Our interpreter on the converted program equals onnxruntime on the model (and, given a
    folder, so does the program after a round trip through a saved .mlpackage)."""
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    prog = load_onnx(model)
    progs = [prog]
    if tmp_path is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            progs.append(converter.load(converter.save(prog, tmp_path / "m.mlpackage")))
    for p in progs:
        got = run(p, feeds)
        for o, w in zip(model.graph.output, want):
            g = np.asarray(got[o.name])
            assert g.shape == w.shape, (o.name, g.shape, w.shape)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6, atol=1e-6)
    return want


def _const(name, arr):
    return h.make_node("Constant", [], [name], value=h.make_tensor(name + "_v", h.np_dtype_to_tensor_dtype(arr.dtype),
                                                                   arr.shape, arr.reshape(-1).tolist()))


def _if_model():
    # then: x * w (w from the outer scope) ; else: x - 1, then Neg. Outer values used in both.
    then_g = h.make_graph([h.make_node("Mul", ["x", "w"], ["t_out"])], "then", [], [_vi("t_out", F, [2, 3])])
    else_g = h.make_graph([_const("one", np.array(1.0, np.float32)), h.make_node("Sub", ["x", "one"], ["e0"]),
                           h.make_node("Neg", ["e0"], ["e_out"])], "else", [], [_vi("e_out", F, [2, 3])])
    nodes = [h.make_node("Greater", ["a", "b"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    return _model(nodes, [_vi("a", F, [1]), _vi("b", F, [1]), _vi("x", F, [2, 3]), _vi("w", F, [2, 3])],
                  [_vi("y", F, [2, 3])])


@pytest.mark.parametrize("a", [1.0, -1.0])
def test_if_takes_either_branch_at_run_time(a, tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.linspace(-2, 3, 6, dtype=np.float32).reshape(2, 3)
    prog = load_onnx(_if_model())
    assert any(op.type == "cond" for op in prog.functions["main"].block.ops)
    _check(_if_model(), {"a": np.float32([a]), "b": np.float32([0.0]), "x": x, "w": w}, tmp_path)


def test_if_on_a_constant_condition_is_inlined():
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", F, [3])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", F, [3])])
    nodes = [_const("c", np.array([False])), h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    model = _model(nodes, [_vi("x", F, [3])], [_vi("y", F, [3])])
    prog = load_onnx(model)
    assert not any(op.type == "cond" for op in prog.functions["main"].walk())
    _check(model, {"x": np.array([-1.0, 2.0, -3.0], np.float32)})


def _loop_body(with_scan=True, early_exit=True):
    """carried: acc (float scalar), v (float [2]); acc += i; v = v * x + acc; cond_out = acc < limit
    (limit, x from the outer scope); scan output: v."""
    nodes = [h.make_node("Cast", ["i"], ["i_f"], to=F), h.make_node("Add", ["acc_in", "i_f"], ["acc_out"]),
             h.make_node("Mul", ["v_in", "x"], ["vx"]), h.make_node("Add", ["vx", "acc_out"], ["v_out"])]
    if early_exit:
        nodes.append(h.make_node("Less", ["acc_out", "limit"], ["c_out"]))
    else:
        nodes.append(h.make_node("Identity", ["c_in"], ["c_out"]))
    outs = [_vi("c_out", T.BOOL, [1]), _vi("acc_out", F, [1]), _vi("v_out", F, [2])]
    if with_scan:
        nodes.append(h.make_node("Identity", ["v_out"], ["s_out"]))
        outs.append(_vi("s_out", F, [2]))
    ins = [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, [1]), _vi("acc_in", F, [1]), _vi("v_in", F, [2])]
    return h.make_graph(nodes, "body", ins, outs)


# shape [1], not scalars: Core ML model inputs have rank >= 1 (the tests round-trip through MIL)
_OUTER = [_vi("acc0", F, [1]), _vi("v0", F, [2]), _vi("x", F, [2]), _vi("limit", F, [1])]
_FEEDS = {"acc0": np.float32([0.5]), "v0": np.array([1.0, -1.0], np.float32), "x": np.array([0.5, 2.0], np.float32)}


@pytest.mark.parametrize("trip,limit", [(5, 100.0), (5, 4.0), (0, 100.0), (50, 30.0)])
def test_loop_with_trip_count_early_exit_and_scan_output(trip, limit, tmp_path):
    nodes = [h.make_node("Less", ["acc0", "limit"], ["cond"]),  # a computed initial condition (bool features
             h.make_node("Loop", ["M", "cond", "acc0", "v0"], ["acc", "v", "scan"], body=_loop_body())]  # aren't Core ML's)
    model = _model(nodes, [_vi("M", T.INT64, [1])] + _OUTER,
                   [_vi("acc", F, [1]), _vi("v", F, [2]), _vi("scan", F, None)], opset=17)
    _check(model, {"M": np.int64([trip]), "limit": np.float32([limit]), **_FEEDS}, tmp_path)


def test_loop_without_trip_count_runs_until_the_condition_fails():
    nodes = [h.make_node("Loop", ["", "cond", "acc0", "v0"], ["acc", "v", "scan"], body=_loop_body())]
    model = _model(nodes, [_vi("cond", T.BOOL, [1])] + _OUTER,
                   [_vi("acc", F, [1]), _vi("v", F, [2]), _vi("scan", F, None)], opset=17)
    _check(model, {"cond": np.array([True]), "limit": np.float32([40.0]), **_FEEDS})


def test_loop_with_int64_max_trip_count_and_no_condition_input():
    big = np.array(np.iinfo(np.int64).max, np.int64)
    nodes = [_const("M", big), h.make_node("Loop", ["M", "", "acc0", "v0"], ["acc", "v"],
                                           body=_loop_body(with_scan=False))]
    model = _model(nodes, _OUTER, [_vi("acc", F, [1]), _vi("v", F, [2])], opset=17)
    _check(model, {"limit": np.float32([25.0]), **_FEEDS})


def test_loop_with_trip_count_only_ignores_nothing():
    nodes = [h.make_node("Loop", ["M", "", "acc0", "v0"], ["acc", "v", "scan"],
                         body=_loop_body(early_exit=False))]
    model = _model(nodes, [_vi("M", T.INT64, [])] + _OUTER, [_vi("acc", F, [1]), _vi("v", F, [2]),
                                                             _vi("scan", F, None)], opset=17)
    _check(model, {"M": np.int64(3), "limit": np.float32([0.0]), **_FEEDS})


def test_loop_carried_value_that_grows_gets_a_symbolic_shape(tmp_path):
    # carried n (int64 [1]) and t = zeros(n): t's shape changes every iteration
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), _const("one", np.array([1], np.int64)),
                         h.make_node("Add", ["n_in", "one"], ["n_out"]),
                         h.make_node("ConstantOfShape", ["n_out"], ["t_out"],
                                     value=h.make_tensor("v", F, [1], [2.5]))], "body",
                        [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("n_in", T.INT64, [1]),
                         _vi("t_in", F, None)],
                        [_vi("c_out", T.BOOL, []), _vi("n_out", T.INT64, [1]), _vi("t_out", F, None)])
    nodes = [h.make_node("Loop", ["M", "", "n0", "t0"], ["n", "t"], body=body)]
    model = _model(nodes, [_vi("M", T.INT64, [1]), _vi("n0", T.INT64, [1]), _vi("t0", F, [1])],
                   [_vi("n", T.INT64, [1]), _vi("t", F, None)], opset=17)
    want = _check(model, {"M": np.int64([4]), "n0": np.array([1], np.int64), "t0": np.zeros(1, np.float32)}, tmp_path)
    assert want[1].shape == (5,)


def test_nested_if_inside_loop_reads_outer_scope_values():
    inner_then = h.make_graph([h.make_node("Add", ["acc_in", "x"], ["r"])], "t", [], [_vi("r", F, [2])])
    inner_else = h.make_graph([h.make_node("Sub", ["acc_in", "x"], ["r2"])], "e", [], [_vi("r2", F, [2])])
    body = h.make_graph([h.make_node("Cast", ["i"], ["i_f"], to=F), h.make_node("Less", ["i_f", "k"], ["p"]),
                         h.make_node("If", ["p"], ["acc_out"], then_branch=inner_then, else_branch=inner_else),
                         h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("acc_in", F, [2])],
                        [_vi("c_out", T.BOOL, []), _vi("acc_out", F, [2])])
    nodes = [h.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)]
    model = _model(nodes, [_vi("M", T.INT64, []), _vi("acc0", F, [2]), _vi("x", F, [2]), _vi("k", F, [])],
                   [_vi("acc", F, [2])], opset=17)
    _check(model, {"M": np.int64(6), "acc0": np.zeros(2, np.float32), "x": np.array([1.0, 10.0], np.float32),
                   "k": np.float32(2.0)})


@pytest.mark.parametrize("in_dir,out_dir,in_axis,out_axis", [(0, 0, 0, 0), (1, 0, 1, 0), (0, 1, 1, 1), (1, 1, 0, -1)])
def test_scan_directions_and_axes(in_dir, out_dir, in_axis, out_axis, tmp_path):
    body = h.make_graph([h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
                        "body", [_vi("s_in", F, [3]), _vi("x_t", F, [3])],
                        [_vi("s_out", F, [3]), _vi("y_t", F, [3])])
    node = h.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, scan_input_directions=[in_dir],
                       scan_output_directions=[out_dir], scan_input_axes=[in_axis], scan_output_axes=[out_axis])
    xshape = [4, 3] if in_axis == 0 else [3, 4]
    model = _model([node], [_vi("s0", F, [3]), _vi("x", F, xshape)], [_vi("s", F, [3]), _vi("y", F, None)], opset=17)
    x = (np.arange(12, dtype=np.float32).reshape(xshape) - 5.0) / 3.0
    _check(model, {"s0": np.array([0.5, -1.0, 2.0], np.float32), "x": x}, tmp_path)


def test_scan_with_two_states_two_inputs_and_a_symbolic_length():
    body = h.make_graph([h.make_node("Add", ["a_in", "x_t"], ["a_out"]), h.make_node("Mul", ["b_in", "z_t"], ["b_out"]),
                         h.make_node("Sub", ["a_out", "b_out"], ["y_t"])], "body",
                        [_vi("a_in", F, [2]), _vi("b_in", F, [2]), _vi("x_t", F, [2]), _vi("z_t", F, [2])],
                        [_vi("a_out", F, [2]), _vi("b_out", F, [2]), _vi("y_t", F, [2])])
    node = h.make_node("Scan", ["a0", "b0", "x", "z"], ["a", "b", "y"], body=body, num_scan_inputs=2)
    model = _model([node], [_vi("a0", F, [2]), _vi("b0", F, [2]), _vi("x", F, ["T", 2]), _vi("z", F, ["T", 2])],
                   [_vi("a", F, [2]), _vi("b", F, [2]), _vi("y", F, ["T", 2])], opset=17)
    rng = np.random.default_rng(1)
    x, z = rng.normal(size=(5, 2)).astype(np.float32), rng.normal(size=(5, 2)).astype(np.float32)
    _check(model, {"a0": np.ones(2, np.float32), "b0": np.array([1.0, -2.0], np.float32), "x": x, "z": z})


def test_unsupported_op_inside_a_subgraph_is_named():
    tfidf = h.make_node("TfIdfVectorizer", ["xi"], ["t"], mode="TF", min_gram_length=1, max_gram_length=1,
                        max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1], pool_int64s=[1, 2])
    then_g = h.make_graph([tfidf], "then", [], [_vi("t", F, [2])])
    else_g = h.make_graph([h.make_node("Cast", ["xi"], ["e"], to=F)], "else", [], [_vi("e", F, [2])])
    model = _model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                   [_vi("c", T.BOOL, [1]), _vi("xi", T.INT64, [2])], [_vi("y", F, [2])])
    with pytest.raises(UnsupportedError, match="TfIdfVectorizer"):
        load_onnx(model)


def _bad_models():
    then_g = h.make_graph([h.make_node("Neg", ["x"], ["t"])], "then", [], [_vi("t", F, [2])])
    two = h.make_graph([h.make_node("Neg", ["x"], ["e"]), h.make_node("Relu", ["x"], ["e2"])], "else", [],
                       [_vi("e", F, [2]), _vi("e2", F, [2])])
    yield "branch output counts", _model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=two)],
                                         [_vi("c", T.BOOL, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    int_g = h.make_graph([h.make_node("Cast", ["x"], ["e"], to=T.INT32)], "else", [], [_vi("e", T.INT32, [2])])
    yield "branch dtypes", _model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=int_g)],
                                  [_vi("c", T.BOOL, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, [])], [_vi("c_out", T.BOOL, [])])
    yield "loop body arity", _model([h.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
                                    [_vi("M", T.INT64, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    cast_body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Cast", ["v"], ["v2"], to=T.INT32)],
                             "body", [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("v", F, [2])],
                             [_vi("c_out", T.BOOL, []), _vi("v2", T.INT32, [2])])
    yield "carried dtype change", _model([h.make_node("Loop", ["M", "", "x"], ["y"], body=cast_body)],
                                         [_vi("M", T.INT64, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    scan_body = h.make_graph([h.make_node("Add", ["s", "x_t"], ["s2"])], "body", [_vi("s", F, [2]), _vi("x_t", F, [2])],
                             [_vi("s2", F, [2])])
    yield "scan without num_scan_inputs", _model([h.make_node("Scan", ["s0", "x"], ["s"], body=scan_body)],
                                                 [_vi("s0", F, [2]), _vi("x", F, [3, 2])], [_vi("s", F, [2])])


@pytest.mark.parametrize("what,model", list(_bad_models()), ids=[w for w, _ in _bad_models()])
def test_malformed_control_flow_is_a_clear_error(what, model):
    from converter.errors import FormatError

    with pytest.raises((FormatError, UnsupportedError)) as e:
        load_onnx(model)
    print(what, "->", e.value)


def test_coremltools_loads_the_written_loop_scan_and_if_programs(tmp_path):
    """coremltools' MIL loader (which re-runs its own type inference on every op, nested blocks
    and lists included) accepts the .mlpackages written from If / Loop (scan outputs) / Scan."""
    from tests.mil.helpers import CoremltoolsLoader

    loader = CoremltoolsLoader()
    loop = _model([h.make_node("Loop", ["M", "", "acc0", "v0"], ["acc", "v", "scan"], body=_loop_body(early_exit=False))],
                  [_vi("M", T.INT64, [1])] + _OUTER, [_vi("acc", F, [1]), _vi("v", F, [2]), _vi("scan", F, None)], opset=17)
    body = h.make_graph([h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
                        "body", [_vi("s_in", F, [3]), _vi("x_t", F, [3])], [_vi("s_out", F, [3]), _vi("y_t", F, [3])])
    scan = _model([h.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                               scan_input_directions=[1], scan_output_axes=[1])],
                  [_vi("s0", F, [3]), _vi("x", F, [4, 3])], [_vi("s", F, [3]), _vi("y", F, None)], opset=17)
    for k, model in enumerate((_if_model(), loop, scan)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = converter.save(load_onnx(model), tmp_path / f"m{k}.mlpackage")
        ops = loader.op_types(loader.load(path))
        assert ops & {"cond", "while_loop"}, ops
        if k:
            assert {"while_loop", "make_list", "list_write", "list_gather"} <= ops, ops
