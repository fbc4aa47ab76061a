"""The runtimes (converter/runtimes): ``--runtime onnxruntime|interpreter|auto`` for run, verify and
convert --check, and the library's ``runtime=``.

Oracle: numpy formulas written here from the ops' definitions (relu, mul/add, casts, the image
feature's H x W x 3 RGB -> [1, 3, H, W] BGR/RGB planes); which runtime ran is observed by counting
the onnxruntime runner's calls, not inferred from values. The fallback path is forced by taking a
lowering out of the ONNX backend's table (monkeypatch), so it does not depend on which ops the
backend can write today.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import EvaluationError, RuntimeFallbackWarning, UnsupportedError
from converter.ir.builder import new_program
from converter.ir.core import FeatureInfo, Program
from converter.ir.runtime import ListValue
from converter.ir.types import DictType, TensorType, fp16, fp32, fp64, int32, string
from converter.runtimes import ort, prepare, resolve

from ..cli.helpers import invoke
from ..conftest import MODELS

C = np.array([0.5, -1.0, 2.0, -0.25], np.float32)
X = np.array([[1.0, -2.0, 0.25, 3.0], [-0.5, 0.75, -1.25, 2.5], [0.0, 1.0, -3.0, 0.125]], np.float32)


def _affine_relu(use_relu: bool = True) -> Program:
    """y = relu(2x + C) (or the same as maximum(., 0)), z = x - C."""
    def body(b, x):
        y = b.add(x=b.mul(x=x, y=np.float32(2)), y=C)
        y = b.relu(x=y, name="y") if use_relu else b.maximum(x=y, y=np.float32(0), name="y")
        return [y, b.sub(x=x, y=C, name="z")]

    return new_program([("x", TensorType(fp32, (3, 4)))], body)


def _want(x: np.ndarray) -> dict[str, np.ndarray]:
    return {"y": np.maximum(2 * x + C, 0), "z": x - C}


@pytest.fixture
def count_ort_runs(monkeypatch):
    """The number of onnxruntime runs so far (a list holding one int)."""
    calls = [0]
    real = ort.OrtRunner.run

    def counted(self, feeds):
        calls[0] += 1
        return real(self, feeds)

    monkeypatch.setattr(ort.OrtRunner, "run", counted)
    return calls


@pytest.fixture
def no_relu_lowering(monkeypatch):
    """The ONNX backend without its relu lowering (a stand-in for an op ONNX cannot express)."""
    from converter.backends.onnx.lowering import LOWERINGS, load_all

    load_all()
    monkeypatch.setitem(LOWERINGS, "relu", [])


def _package(prog: Program, path: Path) -> Path:
    return converter.save(prog, path)


def _npz(tmp_path: Path, **arrays) -> Path:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)
    return path


# -- converter run ---------------------------------------------------------------------------------


@pytest.mark.parametrize("runtime", ["onnxruntime", "interpreter", "auto"])
def test_run_gives_the_formulas_values_on_each_runtime(tmp_path, count_ort_runs, runtime):
    model = _package(_affine_relu(), tmp_path / "m.mlpackage")
    out = tmp_path / "out.npz"
    result = invoke("run", model, "--inputs", _npz(tmp_path, x=X), "-o", out, "--runtime", runtime)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # no fallback note: onnxruntime ran it (or the interpreter was asked for)
    with np.load(out) as got:
        for name, want in _want(X).items():
            np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=0)
    assert count_ort_runs[0] == (0 if runtime == "interpreter" else 1)


def test_run_falls_back_to_the_interpreter_with_a_note_naming_the_ops(tmp_path, count_ort_runs, no_relu_lowering):
    model = _package(_affine_relu(), tmp_path / "m.mlpackage")
    out = tmp_path / "out.npz"
    result = invoke("run", model, "--inputs", _npz(tmp_path, x=X), "-o", out, "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert result.stderr == ("note: onnxruntime cannot run this model (no ONNX form for op relu); the interpreter "
                             "runs it\n")
    with np.load(out) as got:
        np.testing.assert_allclose(got["y"], _want(X)["y"], rtol=1e-6, atol=0)
    assert count_ort_runs[0] == 0


def test_a_loop_runs_in_the_interpreter_which_bounds_it(tmp_path, count_ort_runs):
    """onnxruntime cannot stop a loop that never ends; the interpreter's --max-loop-iterations does."""
    model = MODELS / "builder" / "control_flow_loop.mlmodel"
    result = invoke("run", model, "--random", "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("note: onnxruntime cannot run this model (") and "while_loop" in result.stderr
    assert count_ort_runs[0] == 0
    bounded = invoke("run", model, "--random", "--runtime", "onnxruntime", "--max-loop-iterations", "1")
    assert bounded.exit_code == 2 and "iterations" in bounded.stderr


def test_onnxruntime_not_installed(tmp_path, monkeypatch):
    import converter.runtimes as runtimes

    monkeypatch.setattr(runtimes, "onnxruntime_installed", lambda: False)
    model = _package(_affine_relu(), tmp_path / "m.mlpackage")
    asked = invoke("run", model, "--random", "--runtime", "onnxruntime")
    assert asked.exit_code == 2
    assert "pip install 'converter[ort]'" in asked.stderr
    auto = invoke("run", model, "--random")  # auto: the interpreter, silently
    assert auto.exit_code == 0 and auto.stderr == ""
    assert resolve("auto") == "interpreter"


# -- fp16, integer and image features ---------------------------------------------------------------


def test_fp16_and_int32_features_keep_their_types(count_ort_runs):
    h = np.array([[1.5, -2.25], [0.125, 4096.0]], np.float16)
    i = np.array([3, -7, 2**20], np.int32)

    def body(b, h, i):
        return [b.add(x=h, y=h, name="h2"), b.mul(x=i, y=np.int32(3), name="i3"),
                b.cast(x=i, dtype="fp32", name="i_f")]

    prog = new_program([("h", TensorType(fp16, (2, 2))), ("i", TensorType(int32, (3,)))], body)
    got = converter.run(prog, {"h": h.astype(np.float64), "i": i.astype(np.int64)}, runtime="onnxruntime")
    assert count_ort_runs[0] == 1
    assert got["h2"].dtype == np.float16 and np.array_equal(got["h2"], h + h)
    assert got["i3"].dtype == np.int32 and np.array_equal(got["i3"], i * 3)
    assert got["i_f"].dtype == np.float32 and np.array_equal(got["i_f"], i.astype(np.float32))


@pytest.mark.parametrize("bgr", [False, True])
def test_an_image_input_takes_h_w_3_uint8_pixels(count_ort_runs, bgr):
    from converter.formats import description as desc

    prog = new_program([("image", TensorType(fp32, (1, 3, 2, 3)))],
                       lambda b, x: [b.mul(x=x, y=np.array([1, 10, 100], np.float32).reshape(1, 3, 1, 1), name="y")])
    ft = type(desc.type_to_feature(TensorType(fp32, (1, 3, 2, 3))))()
    ft.imageType.width, ft.imageType.height = 3, 2
    ft.imageType.colorSpace = desc.IMAGE.BGR if bgr else desc.IMAGE.RGB
    prog.main.input_info["image"] = FeatureInfo("image", ft.SerializeToString())
    pixels = np.arange(18, dtype=np.uint8).reshape(2, 3, 3) * 7  # H x W x 3, RGB
    got = converter.run(prog, {"image": pixels}, runtime="onnxruntime")["y"]
    planes = (pixels[..., ::-1] if bgr else pixels).transpose(2, 0, 1)[None].astype(np.float32)
    np.testing.assert_array_equal(got, planes * np.array([1, 10, 100], np.float32).reshape(1, 3, 1, 1))
    assert count_ort_runs[0] == 1


# -- the library -----------------------------------------------------------------------------------


def test_the_library_default_is_the_interpreter(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("onnxruntime was used")

    monkeypatch.setattr(ort.OrtRunner, "__init__", refuse)
    assert prepare(_affine_relu()).runtime == "interpreter"
    got = converter.run(_affine_relu(), {"x": X})
    np.testing.assert_allclose(got["y"], _want(X)["y"], rtol=1e-6)


def test_an_onnxruntime_failure_during_a_run_falls_back_with_a_warning(monkeypatch):
    def fail(self, feeds):
        raise ort.OrtCannotRun("boom at run time")

    monkeypatch.setattr(ort.OrtRunner, "run", fail)
    with pytest.warns(RuntimeFallbackWarning, match="onnxruntime failed to run this model \\(boom at run time\\)"):
        got = converter.run(_affine_relu(), {"x": X}, runtime="onnxruntime")
    np.testing.assert_allclose(got["y"], _want(X)["y"], rtol=1e-6)
    prepared = prepare(_affine_relu(), runtime="onnxruntime")
    assert prepared.runtime == "onnxruntime"
    prepared.run({"x": X})
    assert prepared.runtime == "interpreter" and "boom" in prepared.note and prepared.ort is None


def test_a_tensor_over_the_limit_gets_the_interpreters_error():
    """onnxruntime does not bound tensors: the interpreter refuses the op, with its own message."""
    prog = _affine_relu()
    with pytest.raises(EvaluationError) as by_interpreter:
        converter.run(prog, {"x": X}, max_tensor_bytes=16)
    with pytest.warns(RuntimeFallbackWarning, match="over the limit"), pytest.raises(EvaluationError) as by_ort:
        converter.run(prog, {"x": X}, max_tensor_bytes=16, runtime="onnxruntime")
    assert str(by_ort.value) == str(by_interpreter.value)


def test_an_unknown_runtime_is_refused():
    with pytest.raises(UnsupportedError, match="unknown runtime 'tensorflow'"):
        resolve("tensorflow")


def test_classifier_outputs_come_back_as_the_interpreters_dict():
    """Both forms onnxruntime may give (ZipMap's [dict], or the probabilities tensor) become
    {label: probability} in class-label order, the label a 0-d array."""
    labels = ["zebra", "apple", "mango"]

    def body(b, x):
        label, probs = b.classify(probabilities=x, classes=ListValue(
            TensorType(string, ()), [np.array(s) for s in labels], False), name="classify")
        label.name, probs.name = "label", "probs"
        return [label, probs]

    fn = new_program([("x", TensorType(fp32, (3,)))], body).main
    label_v, probs_v = fn.outputs
    assert isinstance(probs_v.type, DictType) and probs_v.type.value == TensorType(fp64, ())
    p = np.array([0.2, 0.7, 0.1], np.float32)
    zipmap = ort._as_ir_output(probs_v, [{"apple": 0.7, "mango": 0.1, "zebra": 0.2}])
    plain = ort._as_ir_output(probs_v, p[None])
    for got in (zipmap, plain):
        assert list(got) == labels and np.allclose(list(got.values()), p)
    label = ort._as_ir_output(label_v, np.array(["apple"], object))
    assert label.shape == () and label.dtype.kind == "U" and label.item() == "apple"  # np.savez-able, as the interpreter


# -- converter verify, convert --check -------------------------------------------------------------


def test_verify_runs_both_models_with_onnxruntime(tmp_path, count_ort_runs):
    source = _package(_affine_relu(), tmp_path / "a.mlpackage")
    converted = _package(_affine_relu(use_relu=False), tmp_path / "b.mlpackage")
    result = invoke("verify", source, converted, "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stdout and result.stdout.rstrip().endswith("PASS: 2 outputs within tolerance")
    assert result.stderr == f"running {source} ...\nrunning {converted} ...\n"
    assert count_ort_runs[0] == 2


def test_verify_notes_the_model_onnxruntime_could_not_run(tmp_path, count_ort_runs, no_relu_lowering):
    source = _package(_affine_relu(), tmp_path / "a.mlpackage")  # relu: no lowering here
    converted = _package(_affine_relu(use_relu=False), tmp_path / "b.mlpackage")
    result = invoke("verify", source, converted, "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert ("note: the source: onnxruntime cannot run this model (no ONNX form for op relu); the interpreter runs it"
            in result.stdout.splitlines())
    assert count_ort_runs[0] == 1
    both = invoke("verify", source, source, "--runtime", "onnxruntime", "--json")
    assert both.exit_code == 0, both.output
    assert '"both models: onnxruntime cannot run this model (no ONNX form for op relu)' in both.stdout


def test_convert_check_uses_the_runtime(tmp_path, count_ort_runs):
    source = _package(_affine_relu(), tmp_path / "a.mlpackage")
    result = invoke("convert", source, "-o", tmp_path / "out.mlpackage", "--check", "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout and count_ort_runs[0] == 2


def test_migrate_check_records_the_runtime(tmp_path):
    import json
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    _package(_affine_relu(), src / "a.mlpackage")
    shutil.copy(MODELS / "builder" / "control_flow_loop.mlmodel", src / "loop.mlmodel")
    dst = tmp_path / "dst"
    result = invoke("migrate", src, dst, "-j", "1", "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    report = json.loads((dst / "migration-report.json").read_text())
    assert report["options"]["runtime"] == "onnxruntime"
    notes = {m["source"]: m["notes"] for m in report["models"]}
    assert not any("onnxruntime" in n for n in notes["a.mlpackage"])
    assert any(n.startswith("both models: onnxruntime cannot run this model") and "while_loop" in n
               for n in notes["loop.mlmodel"])


def test_a_function_other_than_the_default_runs_in_onnxruntime(count_ort_runs):
    """The export holds the function being run (it was the default one only, and the run fell back)."""
    from ..mil.helpers import multifunction_program

    prog = multifunction_program()
    y = np.arange(4, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeFallbackWarning)
        got = converter.run(prog, {"y": y}, function="second", runtime="onnxruntime")
        main = converter.run(prog, {"x": -y[:3] + np.arange(6, dtype=np.float32).reshape(2, 3)}, runtime="onnxruntime")
    np.testing.assert_allclose(got[next(iter(got))].reshape(-1), np.full(12, y.sum()), rtol=1e-6)
    np.testing.assert_array_equal(main["r"], np.maximum(np.arange(6, dtype=np.float32).reshape(2, 3) - y[:3], 0))
    assert count_ort_runs[0] == 2


@pytest.mark.parametrize("runtime", ["onnxruntime", "interpreter"])
def test_convert_to_onnx_check_reads_the_written_model_back(tmp_path, runtime):
    """--check on an .onnx output: the file is read back (ONNX frontend) and run next to the source."""
    source = _package(_affine_relu(), tmp_path / "a.mlpackage")
    out = tmp_path / "out.onnx"
    result = invoke("convert", source, "-o", out, "--to", "onnx", "--check", "--runtime", runtime)
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("PASS: 2 outputs within tolerance") and "note:" not in result.stdout


def test_onnxruntime_carries_a_state_like_the_interpreter() -> None:
    """A state is the ONNX input S and output S_out: the runner feeds the cell's value and writes
    S_out back into the cell, so two runs in a row agree with the interpreter's."""
    from converter.ir.builder import new_program
    from converter.ir.runtime import StateCell
    from converter.ir.types import StateType, TensorType, dtype

    t = TensorType(dtype("fp32"), (2, 3))

    def body(b, cache, x):  # noqa: ANN001, ANN202
        new = b.add(x=b.read_state(input=cache), y=x)
        b.coreml_update_state(state=cache, value=new)
        return [b.mul(x=new, y=np.float32(2.0), name="out")]

    prog = new_program([("cache", StateType(t)), ("x", t)], body, opset="iOS18")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    cells = {rt: StateCell(np.ones((2, 3), np.float32)) for rt in ("interpreter", "onnxruntime")}
    for _ in range(2):
        outs = {rt: converter.run(prog, {"cache": cell, "x": x}, runtime=rt)["out"] for rt, cell in cells.items()}
        np.testing.assert_allclose(outs["onnxruntime"], outs["interpreter"], rtol=1e-6)
        np.testing.assert_allclose(cells["onnxruntime"].value, cells["interpreter"].value, rtol=1e-6)


def test_a_bug_in_the_onnx_export_falls_back_with_a_note(monkeypatch):
    """A lowering that raises (a bug) does not stop the run: the interpreter runs it and says why."""
    from converter.backends.onnx.lowering import LOWERINGS, Lowering, load_all

    load_all()

    def broken(e, op):
        raise KeyError("boom")

    monkeypatch.setitem(LOWERINGS, "relu", [Lowering("relu", "direct", broken)])
    with pytest.warns(RuntimeFallbackWarning, match="internal error in the ONNX export: KeyError: 'boom'"):
        got = converter.run(_affine_relu(), {"x": X}, runtime="onnxruntime")
    np.testing.assert_allclose(got["y"], _want(X)["y"], rtol=1e-6)
