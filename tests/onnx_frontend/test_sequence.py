"""Sequences and optionals held at conversion time (lists of IR values). Oracle: onnxruntime
running the same models, whose inputs and outputs are tensors (Core ML programs take and return
tensors); positions negative and positive, elements of different shapes, every SplitToSequence
form, ConcatFromSequence with and without a new axis, SequenceMap with a shared tensor input,
Optional chains. Refusals name the reason."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from converter.errors import UnsupportedError
from converter.frontends.onnx import load_onnx

from .feeding import run_program as run

F = T.FLOAT
RNG = np.random.default_rng(3)


def _vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, consts=(), opset=18):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in consts]
    return h.make_model(h.make_graph(nodes, "g", inputs, outputs, initializer=inits),
                        opset_imports=[h.make_opsetid("", opset)])


def _check(model, feeds):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = run(load_onnx(model), feeds)
    for o, w in zip(model.graph.output, want):
        g = np.asarray(got[o.name])
        assert g.shape == w.shape, o.name
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6, atol=1e-6)


A = RNG.normal(size=(2, 3)).astype(np.float32)
B = RNG.normal(size=(4, 3)).astype(np.float32)
C = RNG.normal(size=(1, 3)).astype(np.float32)
ABC = [_vi("a", F, [2, 3]), _vi("b", F, [4, 3]), _vi("c", F, [1, 3])]
FEEDS = {"a": A, "b": B, "c": C}


@pytest.mark.parametrize("erase,insert,at", [(0, 1, -1), (-1, 0, 0), (1, -2, 2), (-3, 2, -2)])
def test_construct_erase_insert_at_with_elements_of_different_shapes(erase, insert, at):
    nodes = [h.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]), h.make_node("SequenceErase", ["s", "pe"], ["s2"]),
             h.make_node("SequenceInsert", ["s2", "a", "pi"], ["s3"]), h.make_node("SequenceAt", ["s3", "pa"], ["y"]),
             h.make_node("SequenceLength", ["s3"], ["n"])]
    consts = [("pe", np.array(erase, np.int64)), ("pi", np.array(insert, np.int64)), ("pa", np.array(at, np.int64))]
    _check(_model(nodes, ABC, [_vi("y", F, None), _vi("n", T.INT64, [])], consts), FEEDS)


def test_empty_then_inserts_at_the_end_and_a_run_time_position_over_equal_shapes():
    nodes = [h.make_node("SequenceEmpty", [], ["s0"], dtype=F), h.make_node("SequenceInsert", ["s0", "a"], ["s1"]),
             h.make_node("SequenceInsert", ["s1", "a2"], ["s2"]), h.make_node("SequenceAt", ["s2", "p"], ["y"])]
    model = _model([h.make_node("Neg", ["a"], ["a2"])] + nodes, [_vi("a", F, [2, 3]), _vi("p", T.INT64, [])],
                   [_vi("y", F, [2, 3])])
    for p in (0, 1, -1, -2):
        _check(model, {"a": A, "p": np.array(p, np.int64)})


def test_run_time_position_over_different_shapes_is_refused():
    nodes = [h.make_node("SequenceConstruct", ["a", "b"], ["s"]), h.make_node("SequenceAt", ["s", "p"], ["y"])]
    model = _model(nodes, ABC[:2] + [_vi("p", T.INT64, [])], [_vi("y", F, None)])
    with pytest.raises(UnsupportedError, match="differ in type or shape"):
        load_onnx(model)


@pytest.mark.parametrize("split,keepdims,axis,stackable", [
    (None, 1, 1, True), (None, 0, 0, True), (np.array(2, np.int64), 1, 1, False),
    (np.array([1, 3, 1], np.int64), 1, 1, False), (np.array([2], np.int64), 1, 0, True)])
def test_split_to_sequence_then_concat_and_stack(split, keepdims, axis, stackable):
    x = RNG.normal(size=(2, 5)).astype(np.float32)
    ins = ["x"] + (["sp"] if split is not None else [])
    nodes = [h.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims),
             h.make_node("ConcatFromSequence", ["s"], ["cat"], axis=axis if keepdims else 0),
             h.make_node("SequenceLength", ["s"], ["n"])]
    outs = [_vi("cat", F, None), _vi("n", T.INT64, [])]
    if stackable:  # stacking needs elements of equal shapes
        nodes.append(h.make_node("ConcatFromSequence", ["s"], ["stk"], axis=-1, new_axis=1))
        outs.append(_vi("stk", F, None))
    consts = [("sp", split)] if split is not None else []
    _check(_model(nodes, [_vi("x", F, [2, 5])], outs, consts), {"x": x})


def test_split_to_sequence_with_run_time_sizes():
    nodes = [h.make_node("SplitToSequence", ["x", "sp"], ["s"], axis=1), h.make_node("SequenceAt", ["s", "one"], ["y"]),
             h.make_node("SequenceAt", ["s", "two"], ["z"])]
    model = _model(nodes, [_vi("x", F, [2, 6]), _vi("sp", T.INT64, [3])], [_vi("y", F, None), _vi("z", F, None)],
                   [("one", np.array(1, np.int64)), ("two", np.array(2, np.int64))])
    _check(model, {"x": RNG.normal(size=(2, 6)).astype(np.float32), "sp": np.array([1, 2, 3], np.int64)})


def test_sequence_map_with_a_shared_tensor_input():
    body = h.make_graph([h.make_node("Mul", ["e", "w"], ["p"]), h.make_node("Sub", ["e", "w"], ["q"])],
                        "body", [_vi("e", F, None), _vi("w", F, [3])], [_vi("p", F, None), _vi("q", F, None)])
    nodes = [h.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             h.make_node("SequenceMap", ["s", "w"], ["ps", "qs"], body=body),
             h.make_node("ConcatFromSequence", ["ps"], ["cat_p"], axis=0),
             h.make_node("ConcatFromSequence", ["qs"], ["cat_q"], axis=0)]
    w = np.array([1.0, -2.0, 0.5], np.float32)
    model = _model(nodes, ABC + [_vi("w", F, [3])], [_vi("cat_p", F, None), _vi("cat_q", F, None)])
    _check(model, {**FEEDS, "w": w})


def test_optional_chain():
    nodes = [h.make_node("Optional", ["a"], ["o"]), h.make_node("OptionalHasElement", ["o"], ["has"]),
             h.make_node("OptionalGetElement", ["o"], ["y"]),
             h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(F, [2, 3])),
             h.make_node("OptionalHasElement", ["none"], ["has_none"])]
    model = _model(nodes, ABC[:1], [_vi("has", T.BOOL, []), _vi("y", F, [2, 3]), _vi("has_none", T.BOOL, [])])
    _check(model, {"a": A})


def test_sequence_graph_output_is_refused():
    model = _model([h.make_node("SequenceConstruct", ["a"], ["s"])], ABC[:1],
                   [h.make_value_info("s", h.make_sequence_type_proto(h.make_tensor_type_proto(F, [2, 3])))])
    with pytest.raises(UnsupportedError, match="graph output 's' is a sequence_type"):
        load_onnx(model)


SEQ_T = h.make_sequence_type_proto(h.make_tensor_type_proto(F, None))


def _appending_loop(init_nodes, init_name):
    """s = init; for i in range(M): s.append(a * (i + len(s))); then concat/stack/len/last of s."""
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("SequenceLength", ["s_in"], ["n"]),
                         h.make_node("Add", ["i", "n"], ["k"]), h.make_node("Cast", ["k"], ["kf"], to=F),
                         h.make_node("Mul", ["a", "kf"], ["item"]), h.make_node("SequenceInsert", ["s_in", "item"], ["s_out"])],
                        "body", [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, []), h.make_value_info("s_in", SEQ_T)],
                        [_vi("c_out", T.BOOL, []), h.make_value_info("s_out", SEQ_T)])
    nodes = init_nodes + [h.make_node("Loop", ["M", "", init_name], ["s"], body=body),
                          h.make_node("ConcatFromSequence", ["s"], ["cat"], axis=1),
                          h.make_node("ConcatFromSequence", ["s"], ["stk"], axis=0, new_axis=1),
                          h.make_node("SequenceLength", ["s"], ["n_out"]),
                          h.make_node("SequenceAt", ["s", "last"], ["y_last"])]
    return _model(nodes, ABC[:1] + [_vi("M", T.INT64, [])],
                  [_vi("cat", F, None), _vi("stk", F, None), _vi("n_out", T.INT64, []), _vi("y_last", F, None)],
                  [("last", np.array(-1, np.int64))])


@pytest.mark.parametrize("init", ["empty", "construct"])
@pytest.mark.parametrize("trips", [1, 4])
def test_loop_carried_sequence_appended_to_and_read_after(init, trips, tmp_path):
    if init == "empty":
        model = _appending_loop([h.make_node("SequenceEmpty", [], ["s0"], dtype=F)], "s0")
    else:
        model = _appending_loop([h.make_node("Neg", ["a"], ["na"]), h.make_node("SequenceConstruct", ["na", "a"], ["s0"])],
                                "s0")
    prog = load_onnx(model)
    assert any(op.type == "make_list" for op in prog.functions["main"].block.ops)
    _check(model, {"a": A, "M": np.array(trips, np.int64)})


def test_run_time_sequence_insert_at_a_position_is_refused():
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("SequenceInsert", ["s_in", "a", "z"], ["s_out"])],
                        "body", [_vi("i", T.INT64, []), _vi("c_in", T.BOOL, []), h.make_value_info("s_in", SEQ_T)],
                        [_vi("c_out", T.BOOL, []), h.make_value_info("s_out", SEQ_T)])
    nodes = [h.make_node("SequenceEmpty", [], ["s0"], dtype=F), h.make_node("Loop", ["M", "", "s0"], ["s"], body=body),
             h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    model = _model(nodes, ABC[:1] + [_vi("M", T.INT64, [])], [_vi("y", F, None)], [("z", np.array(0, np.int64))])
    with pytest.raises(UnsupportedError, match="appending is supported"):
        load_onnx(model)


def test_loop_carried_sequence_survives_the_mil_round_trip_and_coremltools_loads_it(tmp_path):
    import warnings

    import converter
    from tests.mil.helpers import CoremltoolsLoader

    model = _appending_loop([h.make_node("SequenceEmpty", [], ["s0"], dtype=F)], "s0")
    model.graph.input[1].CopyFrom(_vi("M", T.INT64, [1]))  # Core ML inputs have rank >= 1
    feeds = {"a": A, "M": np.array([3], np.int64)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = converter.save(load_onnx(model), tmp_path / "seq.mlpackage")
    got = run(converter.load(path), feeds)
    for o, w in zip(model.graph.output, want):
        np.testing.assert_allclose(np.asarray(got[o.name]).astype(np.float64), w.astype(np.float64), rtol=1e-6)
    loader = CoremltoolsLoader()
    assert {"while_loop", "make_list", "list_write", "list_length", "list_gather", "list_read"} <= loader.op_types(
        loader.load(path))
