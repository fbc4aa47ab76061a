"""Issue 3, coremltools as an independent reader: its MIL proto loader (which re-runs its own type
inference on every op) accepts every package we write: the shared models re-saved by us, and a
one-op program for every case of every registered op (tests/ops/cases), at the case's opset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import ConverterError
from converter.ir.opdef import registered_op_types
from converter.ir.runtime import StateCell
from tests.ops.harness import Case, build_program

from .helpers import MLPROGRAM_PACKAGES, TORCH, CoremltoolsLoader, model_id, multifunction_program, same_bits
from .op_cases import CASES, case_key, loadable_case

pytestmark = pytest.mark.usefixtures("no_fsync")


# ---------------------------------------------------------------------------------------------
# (a) the shared models, re-saved by us


@pytest.mark.parametrize("path", MLPROGRAM_PACKAGES, ids=model_id)
def test_coremltools_loads_resaved_shared_model(path: Path, tmp_path: Path, coremltools_loader: CoremltoolsLoader):
    prog = converter.load(path)
    out = converter.save(prog, tmp_path / "out.mlpackage")
    ct_prog = coremltools_loader.load(out)
    ours = {op.type for op in prog.walk()}
    theirs = coremltools_loader.op_types(ct_prog)
    assert ours <= theirs, f"ops missing from coremltools' program: {sorted(ours - theirs)}"


# ---------------------------------------------------------------------------------------------
# (b) one program per op case (inputs and outputs made features: see op_cases.loadable_case)


# Cases coremltools' loader rejects for reasons of its own, each reproduced below with
# coremltools' own builder (no file of ours involved): case key -> (error pattern, why).
COREMLTOOLS_LIMITATIONS: dict[str, tuple[str, str]] = {
    "prelu[rank3]@iOS15": (
        "rank 3 or rank 5 input is only supported when all the values of alpha are same",
        "coremltools' prelu type inference refuses per-channel alpha for rank 3 and 5, which its own "
        "docstring allows (x: (B,C,H) or (B,C,D,H,W), alpha: [C])"),
    "prelu[rank5]@iOS15": (
        "rank 3 or rank 5 input is only supported when all the values of alpha are same",
        "as prelu[rank3]"),
    "crop_resize[roi5]@iOS15": (
        "Mismatch between var types in specification vs PyMIL",
        "with roi [N,1,5,1,1] (box index given per box) coremltools infers [N, B, C, h, w] instead of "
        "[N, 1, C, h, w], contradicting its own docstring; our declared output type is the documented one"),
    "crop_resize[iOS16-pad_value]@iOS16": (
        "Mismatch between var types in specification vs PyMIL", "as crop_resize[roi5]"),
    "matmul[x-vector]@iOS15": (
        "Mismatch between var types in specification vs PyMIL",
        "for a rank-1 x coremltools' type inference drops the wrong dim ([4] @ [2,4,5] -> [1,5]); numpy "
        "and coremltools' own matmul docstring ((4) @ (10,4,3) -> (10,3)) give [2,5]"),
    "matmul[y-vector]@iOS15": (
        "list index out of range",
        "coremltools' matmul type inference indexes y.shape[-2], so a rank-1 y (which its docstring allows) "
        "raises IndexError"),
    "matmul[dot]@iOS15": ("list index out of range", "as matmul[y-vector]"),
    "layer_norm[default-axes]@iOS15": (
        r"Cannot add const range\(0, 3\)",
        "coremltools' default for the optional axes is a Python range, which its builder cannot make a "
        "const of: its loader fails on any layer_norm without axes"),
    "slice_by_index[squeeze_to_empty]@iOS15": (
        r"unsupported values in for dimension 2, \(begin, end, stride\) : \(4, 1, 1\)",
        "coremltools refuses begin > end with a positive stride (an empty slice, which numpy and our "
        "interpreter produce), though it accepts begin == end"),
}

# Ops that coremltools' program shows under another name, and why.
WRITTEN_AS = {
    "_const_symbolic": ("const", "coremltools' internal constant op (symbolic values); the Core ML runtime has "
                                 "no such op and coremltools' writer never emits it, so we write a const"),
}

# IR-only ops: every one of them has a MIL form (coreml_update_state is written as write_state +
# read_state and read back by coremltools as coreml_update_state), so none is listed here.
IR_ONLY_WITHOUT_MIL_FORM: dict[str, str] = {}


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # coremltools, range_1d[empty]
@pytest.mark.parametrize("case", CASES, ids=case_key)
def test_coremltools_loads_op_case(case: Case, tmp_path: Path, coremltools_loader: CoremltoolsLoader):
    key = case_key(case)
    prog, _ = build_program(loadable_case(case))
    assert case.op in {op.type for op in prog.walk()}
    assert prog.main.opset == case.opset_or_default()
    if case.op in IR_ONLY_WITHOUT_MIL_FORM:
        with pytest.raises(ConverterError, match="IR op with no MIL form"):
            converter.save(prog, tmp_path / "case.mlpackage")
        return
    out = converter.save(prog, tmp_path / "case.mlpackage")
    if key in COREMLTOOLS_LIMITATIONS:
        with pytest.raises(Exception, match=COREMLTOOLS_LIMITATIONS[key][0]):
            coremltools_loader.load(out)
        return
    ct_prog = coremltools_loader.load(out)
    want = WRITTEN_AS.get(case.op, (case.op, ""))[0]
    assert want in coremltools_loader.op_types(ct_prog)


def test_every_registered_op_is_accepted_by_coremltools():
    """Every registered op has at least one case coremltools loads (the limitations above are
    single cases, never an op's only case)."""
    accepted = {c.op for c in CASES if case_key(c) not in COREMLTOOLS_LIMITATIONS}
    missing = set(registered_op_types()) - accepted - set(IR_ONLY_WITHOUT_MIL_FORM)
    assert not missing, f"ops with no case accepted by coremltools: {sorted(missing)}"
    assert set(COREMLTOOLS_LIMITATIONS) <= {case_key(c) for c in CASES}, "stale limitation entries"
    assert len(registered_op_types()) >= 169


# ---------------------------------------------------------------------------------------------
# The limitations, reproduced with coremltools' own builder


def _ct_reproduce(kind: str):
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program

    def run(specs, body):
        fn_inputs = {f"x{i}": mb.placeholder(shape=s) for i, s in enumerate(specs)}
        prog = Program()
        with Function(fn_inputs) as fn:
            out = body(*fn.inputs.values())
            fn.set_outputs([out])
        prog.add_function("main", fn)
        return out

    if kind == "prelu":
        run([(1, 3, 5)], lambda x: mb.prelu(x=x, alpha=np.array([0.1, 0.2, 0.3], np.float32)))
    elif kind == "crop_resize":
        out = run([(2, 3, 5, 4), (3, 1, 5, 1, 1)],
                  lambda x, roi: mb.crop_resize(x=x, roi=roi, target_height=2, target_width=3))
        return tuple(out.shape)
    elif kind == "matmul_x":
        return tuple(run([(4,), (2, 4, 5)], lambda x, y: mb.matmul(x=x, y=y)).shape)
    elif kind == "matmul_y":
        run([(2, 3, 4), (4,)], lambda x, y: mb.matmul(x=x, y=y))
    elif kind == "layer_norm":
        run([(2, 3, 4)], lambda x: mb.layer_norm(x=x))
    elif kind == "slice":
        run([(2, 3, 5)], lambda x: mb.slice_by_index(x=x, begin=[-1, -2, 4], end=[0, 0, 1],
                                                      squeeze_mask=[True, True, False]))


def test_coremltools_limitations_are_theirs(coremltools_loader: CoremltoolsLoader):
    """Each listed failure happens in coremltools' own builder too, with no file of ours involved."""
    with pytest.raises(ValueError, match=COREMLTOOLS_LIMITATIONS["prelu[rank3]@iOS15"][0]):
        _ct_reproduce("prelu")
    # documented [N, 1, C, h, w] for roi [N, 1, 5, 1, 1]; coremltools infers [N, B, C, h, w]
    assert _ct_reproduce("crop_resize") == (3, 2, 3, 2, 3)
    # numpy semantics: [4] @ [2, 4, 5] -> [2, 5]; coremltools infers [1, 5]
    assert np.matmul(np.ones(4), np.ones((2, 4, 5))).shape == (2, 5)
    assert _ct_reproduce("matmul_x") == (1, 5)
    with pytest.raises(IndexError):
        _ct_reproduce("matmul_y")
    with pytest.raises(ValueError, match=COREMLTOOLS_LIMITATIONS["layer_norm[default-axes]@iOS15"][0]):
        _ct_reproduce("layer_norm")
    with pytest.raises(ValueError, match="unsupported values in for dimension 2"):
        _ct_reproduce("slice")


# ---------------------------------------------------------------------------------------------
# State updates as coremltools writes them (write_state + read_state) read as coreml_update_state


def test_stateful_program_written_by_coremltools(tmp_path: Path, coremltools_loader: CoremltoolsLoader):
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.backend.mil.load import load as ct_write
    from coremltools.converters.mil.mil import types

    from converter.formats.package import write_package
    from converter.formats.proto import Model_pb2

    @mb.program(input_specs=[mb.StateTensorSpec((2, 3), dtype=types.fp16), mb.TensorSpec((2, 3), dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(cache, x):
        old = mb.read_state(input=cache, name="old")
        updated = mb.coreml_update_state(state=cache, value=mb.add(x=old, y=x, name="summed"), name="update")
        return mb.mul(x=updated, y=np.float16(2.0), name="out")

    spec = ct_write(prog, weights_dir=str(tmp_path), specification_version=9)
    theirs = [op.type for op in spec.mlProgram.functions["main"].block_specializations["CoreML8"].operations]
    src = write_package(tmp_path / "ct.mlpackage", spec.SerializeToString())

    ours = converter.load(src)
    assert [op.type for op in ours.walk()] == ["read_state", "add", "coreml_update_state", "const", "mul"]
    cell = StateCell(np.ones((2, 3), np.float16))
    out = converter.run(ours, {"cache": cell, "x": np.full((2, 3), 2.0, np.float16)})
    assert same_bits(cell.value, np.full((2, 3), 3.0, np.float16))
    assert same_bits(out["out"], np.full((2, 3), 6.0, np.float16))

    # written back: the same sequence of MIL ops as coremltools writes, and coremltools reads it
    back = converter.save(ours, tmp_path / "ours.mlpackage")
    m = Model_pb2.Model()
    m.ParseFromString((back / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    assert [op.type for op in m.mlProgram.functions["main"].block_specializations["CoreML8"].operations] == theirs
    assert "coreml_update_state" in coremltools_loader.op_types(coremltools_loader.load(back))


def test_coremltools_loads_single_file_mlmodel(tmp_path: Path, coremltools_loader: CoremltoolsLoader):
    """A bare .mlmodel (every value immediate, no weights directory), from a package with weights."""
    prog = converter.load(TORCH / "cnn_bn_mlprogram.mlpackage")
    out = converter.save(prog, tmp_path / "cnn.mlmodel")
    assert {op.type for op in prog.walk()} <= coremltools_loader.op_types(coremltools_loader.load(out))


def test_coremltools_loads_multifunction_program(tmp_path: Path, coremltools_loader: CoremltoolsLoader):
    out = converter.save(multifunction_program(), tmp_path / "m.mlpackage")
    ct_prog = coremltools_loader.load(out)
    assert sorted(ct_prog.functions) == ["main", "second"]
    assert {"relu", "linear", "expand_dims"} <= coremltools_loader.op_types(ct_prog)
