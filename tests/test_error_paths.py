"""Bad input gets a converter.errors exception naming the file, function, op and field: never a raw
traceback, a hang or a partial output file. Regression tests for error paths of ``convert --check``,
``converter run``, the IR text parser and the model readers."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
import converter.formats.blob as blob_module
from converter.check import compare, random_feeds
from converter.errors import EvaluationError, FormatError, ParseError, UnsupportedError
from converter.formats.blob import BlobReader
from converter.ir.builder import new_program
from converter.ir.interpreter import Interpreter
from converter.ir.text import parse_program
from converter.ir.types import tensor
from tests.conftest import MODELS

TORCH = MODELS / "torch"
RENAMED_MODEL = MODELS / "real" / "d8cf86f0_test.mlmodel"  # input '0' and output '7': written as '_0', '_7'


def invoke(*args):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def assert_one_line_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


# -- 1. convert --check: features renamed by the backend ------------------------------------------


def _renamed_program():
    # two inputs whose sorted order differs from their order, both renamed when written
    return new_program(
        [("b.1", tensor("fp32", [3])), ("a.1", tensor("fp32", [3]))],
        lambda b, x, y: [b.sub(x=x, y=y, name="diff:0"), b.relu(x=x, name="relu.out")],
    )


def test_compare_pairs_renamed_features_by_position(tmp_path):
    prog = _renamed_program()
    with pytest.warns(converter.ConversionWarning):
        converter.save(prog, tmp_path / "m.mlpackage")
    back = converter.load(tmp_path / "m.mlpackage")
    assert [v.name for v in back.main.inputs] == ["b_1", "a_1"]
    diffs = compare(prog, back)
    assert diffs == {"diff:0": 0.0, "relu.out": 0.0}  # keyed by the source's names


def test_compare_reports_a_missing_output_as_inf():
    prog = _renamed_program()
    fewer = new_program([("b", tensor("fp32", [3])), ("a", tensor("fp32", [3]))],
                        lambda b, x, y: [b.sub(x=x, y=y, name="d")])
    assert compare(prog, fewer) == {"diff:0": 0.0, "relu.out": float("inf")}


def test_compare_with_a_different_number_of_inputs_is_an_error():
    prog = _renamed_program()
    one = new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.relu(x=x, name="y")])
    with pytest.raises(EvaluationError, match=r"function 'main'.*source has 2 inputs .*converted model 1"):
        compare(prog, one, converted_file="out.mlpackage")


def test_convert_check_with_renamed_features(tmp_path):
    out = tmp_path / "out.mlpackage"
    result = invoke("convert", RENAMED_MODEL, "-o", out, "--check")
    assert result.exit_code == 0, result.output
    assert "input '0' is written as '_0'" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].split() == ["7", "0", "0", "rtol", "0.0001", "atol", "1e-05", "ok"]  # the source's output name
    assert "note: outputs paired by position (no output of that name): '7' -> '_7'" in lines
    assert lines[-1] == "PASS: 1 output within tolerance"


def test_random_feeds_of_an_input_it_cannot_make_names_the_input():
    prog = new_program({"x.1": tensor("fp32", None)}, lambda b, x: [b.relu(x=x, name="y")])
    with pytest.raises(UnsupportedError) as info:
        random_feeds(prog.main)
    assert "function 'main'" in str(info.value) and "input 'x.1'" in str(info.value)
    where = r"file 'src.mlmodel', function 'main', field 'inputs.x.1': .*input 'x.1'"
    with pytest.raises(UnsupportedError, match=where):
        compare(prog, prog, source_file="src.mlmodel")


# -- 2. converter run ------------------------------------------------------------------------------


def test_run_an_unknown_function_lists_the_functions(tmp_path):
    model = TORCH / "mlp_mlprogram.mlpackage"
    result = invoke("run", model, "--inputs", TORCH / "mlp.inputs.npz", "--function", "foo")
    assert_one_line_error(result, "function 'foo'", "no function named 'foo'", "'main'")
    prog = converter.load(model)
    with pytest.raises(EvaluationError, match=r"no function named 'foo' \(the program has: 'main'\)"):
        converter.run(prog, {}, function="foo")
    with pytest.raises(EvaluationError, match="no function named 'foo'"):
        Interpreter(prog).run({}, "foo")
    prog.default_function = "gone"
    with pytest.raises(EvaluationError, match="no default function named 'gone'"):
        converter.run(prog, {})


def _garbage_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    cases = {}
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros((2, 16), np.float32))
    cases["npy"] = (npy, "a single .npy array, not an .npz file")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"garbage!" * 8)
    cases["junk"] = (junk, "not an .npz file (not a zip archive)")
    good = tmp_path / "good.npz"
    np.savez(good, x=np.zeros((2, 16), np.float32))
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:100])
    cases["truncated"] = (truncated, "not a readable .npz file")
    objects = tmp_path / "objects.npz"
    np.savez(objects, x=np.array([1, "a", None], dtype=object))
    cases["objects"] = (objects, "field 'x': cannot read array 'x'")
    return cases


@pytest.mark.parametrize("case", ["npy", "junk", "truncated", "objects"])
def test_run_with_inputs_that_are_not_an_npz_is_one_line(tmp_path, case):
    path, fragment = _garbage_inputs(tmp_path)[case]
    result = invoke("run", TORCH / "mlp_mlprogram.mlpackage", "--inputs", path)
    line = assert_one_line_error(result, f"file '{path}'", fragment)
    assert "pickled" not in line


def test_run_output_that_cannot_be_written_is_one_line(tmp_path):
    out = tmp_path / "missing" / "out.npz"
    result = invoke("run", TORCH / "mlp_mlprogram.mlpackage", "--inputs", TORCH / "mlp.inputs.npz", "-o", out)
    assert_one_line_error(result, f"file '{out}'", "cannot write")
    assert not out.parent.exists()


# -- 2. the IR text parser ---------------------------------------------------------------------------

GOOD = """program
symbols { n: [1, 16] }
func main<iOS18>(%x: tensor<fp32, [n, 4]>) {
  %y: tensor<fp32, [n, 4]> = relu(x=%x)
} -> (%y)
"""


def _sub(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


BAD_TEXTS = {
    "symbol bound not a number": (_sub("[1, 16]", "[a, 3]"), "line 2", "lower bound of symbol 'n'"),
    "symbol upper bound": (_sub("[1, 16]", "[1, ]]"), "line 2", "upper bound of symbol 'n'"),
    "symbol bounds reversed": (_sub("[1, 16]", "[5, 2]"), "line 2", "must be at least 5"),
    "symbol no choices": (_sub("[1, 16]", "{}"), "line 2", "lists no sizes"),
    "symbol choice not a number": (_sub("[1, 16]", "{2, x}"), "line 2", "size of symbol 'n'"),
    "fractional dimension": (_sub("[n, 4]>)", "[n, 1.5]>)"), "line 3", "expected an integer dimension"),
    "negative dimension": (_sub("[n, 4]>)", "[n, -1]>)"), "line 3", "dimension must be at least 0"),
    "bad string escape": (_sub("relu(x=%x)", 'relu(x=%x) [note="\\q"]'), "line 4", "bad string"),
    "bad name escape": (_sub("%y: ", '%"\\q": '), "line 4", "bad name"),
    "bad op name escape": (_sub("relu(x=%x)", 'relu(x=%x) @"\\u12"'), "line 4", "bad name"),
    "dict key not a string": (_sub("relu(x=%x)", "relu(x=%x) [d={k: 1}]"), "line 4", "dictionary key"),
    "bytes not hex": (_sub("relu(x=%x)", 'relu(x=%x) [b=bytes("zz")]'), "line 4", "bad bytes literal"),
    "bytes not a string": (_sub("relu(x=%x)", "relu(x=%x) [b=bytes(5)]"), "line 4", "hex string"),
    "dense shape not a number": (_sub("relu(x=%x)", "relu(x=%x) [a=dense<int8, [(]>(1)]"), "line 4",
                                 "dimension of dense<int8>"),
    "dense value overflows": (_sub("relu(x=%x)", "relu(x=%x) [a=dense<int8, [1]>(300)]"), "line 4",
                              "dense<int8> cannot hold"),
    "dense nan as int": (_sub("relu(x=%x)", "relu(x=%x) [a=dense<int32, [1]>(nan)]"), "line 4",
                         "dense<int32> cannot hold"),
    "dense string as float": (_sub("relu(x=%x)", 'relu(x=%x) [a=dense<fp32, [1]>("abc")]'), "line 4",
                              "dense<fp32> cannot hold"),
    "truncated": (GOOD[: GOOD.index("[1,") + 3], "line 2", "end of input"),
    "unknown default function": (_sub("program", 'program [__default__="nope"]'), "line 1",
                                 "__default__ names no function: 'nope'"),
    "deep nesting": (_sub("relu(x=%x)", "relu(x=%x) [a=" + "[" * 50000 + "]" * 50000 + "]"), "line 4",
                     "nested too deeply"),
}


@pytest.mark.parametrize("name", list(BAD_TEXTS))
def test_parser_errors_are_parse_errors(name):
    text, line, fragment = BAD_TEXTS[name]
    with pytest.raises(ParseError) as info:
        parse_program(text)
    assert f"{line}, column " in str(info.value) and fragment in str(info.value), str(info.value)


# -- 2. OSError while reading a model: FormatError naming the file -----------------------------------


def _permission_denied(path):
    return PermissionError(errno.EACCES, "Permission denied", str(path))


def test_blob_reader_open_error_names_the_file(tmp_path, monkeypatch):
    pkg = shutil.copytree(TORCH / "mlp_mlprogram.mlpackage", tmp_path / "m.mlpackage")
    weights = pkg / "Data/com.apple.CoreML/weights/weight.bin"

    real_open = os.open

    def fake_open(path, *args, **kw):
        if Path(path) == weights:
            raise _permission_denied(path)
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", fake_open)
    with pytest.raises(FormatError, match=r"weight.bin'.*cannot read weight file: Permission denied"):
        BlobReader(weights)
    with pytest.raises(FormatError, match="Permission denied"):
        converter.load(pkg)


def test_blob_reader_mapping_error_names_the_file(tmp_path, monkeypatch):
    weights = TORCH / "mlp_mlprogram.mlpackage/Data/com.apple.CoreML/weights/weight.bin"

    def no_mapping(*args, **kw):
        raise OSError(errno.ENODEV, "No such device")

    monkeypatch.setattr(blob_module.mmap, "mmap", no_mapping)
    with pytest.raises(FormatError, match=r"weight.bin'.*cannot read weight file: No such device"):
        BlobReader(weights)


@pytest.mark.parametrize("which", ["Manifest.json", "model.mlmodel"])
def test_unreadable_package_file_names_the_file(tmp_path, monkeypatch, which):
    pkg = shutil.copytree(TORCH / "mlp_mlprogram.mlpackage", tmp_path / "m.mlpackage")
    real_open = os.open

    def fake_open(path, *args, **kw):
        if Path(path).name == which:
            raise _permission_denied(path)
        return real_open(path, *args, **kw)

    monkeypatch.setattr(os, "open", fake_open)
    with pytest.raises(FormatError) as info:
        converter.load(pkg)
    assert which in str(info.value) and "cannot read" in str(info.value) and "Permission denied" in str(info.value)


@pytest.mark.parametrize("kind", ["package", "bare"])
def test_unlistable_model_names_the_file(tmp_path, monkeypatch, kind):
    if kind == "package":
        model = shutil.copytree(TORCH / "mlp_mlprogram.mlpackage", tmp_path / "m.mlpackage")
    else:
        model = tmp_path / "m.mlmodel"
        shutil.copy(RENAMED_MODEL, model)
    exists = Path.exists

    def fake_exists(self):
        if self == model:
            raise _permission_denied(self)
        return exists(self)

    monkeypatch.setattr(Path, "exists", fake_exists)
    with pytest.raises(FormatError, match=rf"file '{model}': cannot read: Permission denied"):
        converter.load(model)


@pytest.mark.parametrize("runtime", ["interpreter", "onnxruntime"])
def test_an_integer_feed_that_does_not_fit_the_input_is_refused_not_wrapped(runtime):
    """An int64 value above 2^31 - 1 for an int32 input (what ONNX models' int64 inputs become) is
    an error naming the input, not a silently wrapped negative number."""
    from converter.errors import EvaluationError
    from converter.ir.builder import new_program
    from converter.ir.interpreter import run as ir_run
    from converter.ir.types import TensorType, dtype

    prog = new_program({"ids": TensorType(dtype("int32"), (2,))}, lambda b, i: b.add(x=i, y=np.int32(1), name="y"))
    ok = converter.run(prog, {"ids": np.array([1, 2], np.int64)}, runtime=runtime)
    np.testing.assert_array_equal(ok["y"], [2, 3])
    for call in (lambda f: converter.run(prog, f, runtime=runtime), lambda f: ir_run(prog, f)):
        with pytest.raises(EvaluationError, match=r"input 'ids': value 2147483648 does not fit .*int32"):
            call({"ids": np.array([1, 2**31], np.int64)})
