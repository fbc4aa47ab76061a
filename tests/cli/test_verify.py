"""``converter verify`` and ``convert --check``: the verdict, the exit status, the pairing note, the
JSON report against its schema, and `converter.verify.verify` on Programs and paths.

The oracle for the numbers is arithmetic written here: the MLP ends in linear -> softmax, so moving
the last bias[0] by ``delta`` turns the source's probabilities p into p0 e^delta / Z and pj / Z
(Z = p0 e^delta + 1 - p0), whatever the layers before compute; errors of hand-made arrays are computed
from the definition in converter/verify.py's docstring (max |b - a|, over the source's scale)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import converter
from converter.ir.builder import new_program
from converter.ir.types import tensor
from converter.verify import TOLERANCES, _errors, pair_names, random_feeds, tolerance_for, verify

from ..conftest import MODELS, REPO
from .helpers import invoke, one_error_line

MLP = MODELS / "torch" / "mlp_nn.mlmodel"  # x [2, 16] -> 3 linear layers, softmax -> var_20 [2, 4]
RENAMED = MODELS / "real" / "d8cf86f0_test.mlmodel"  # input '0', output '7': written as '_0', '_7'
CLASSIFIER = MODELS / "builder" / "image_classifier_preprocessed.mlmodel"  # image -> {label: p}, classLabel
SCHEMA = json.loads((REPO / "docs" / "schemas" / "verify.schema.json").read_text())
DELTA = 0.5


def _convert(src: Path, out: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", converter.ConversionWarning)
        converter.convert(src, out=out)
    return out


@pytest.fixture(scope="module")
def mlp_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The MLP converted to a package, and a copy whose last bias[0] is moved by DELTA."""
    d = tmp_path_factory.mktemp("mlp")
    good = _convert(MLP, d / "good.mlpackage")
    prog = converter.load(good)
    consts = {op.name: op for op in prog.main.walk() if op.type == "const"}
    bias = consts["linear_2_bias"]
    val = np.array(bias.attributes["val"], copy=True)
    val[0] += DELTA
    bias.attributes["val"] = val
    bad = d / "bad.mlpackage"
    converter.save(prog, bad)
    return good, bad


def test_verify_passes_a_faithful_conversion(mlp_pair):
    good, _ = mlp_pair
    result = invoke("verify", MLP, good)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["output", "max", "abs", "err", "max", "rel", "err", "tolerance"]
    assert lines[1].split()[0] == "var_20" and lines[1].endswith("rtol 0.0001 atol 1e-05  ok")
    assert lines[-1] == "PASS: 1 output within tolerance"
    # progress on stderr, one line as each model starts
    assert result.stderr.splitlines() == [f"running {MLP} ...", f"running {good} ..."]


def test_verify_fails_a_perturbed_weight_with_exit_1(mlp_pair):
    _, bad = mlp_pair
    result = invoke("verify", MLP, bad)
    assert result.exit_code == 1, result.output
    source = converter.load(MLP)
    p = converter.run(source, random_feeds(source.main, 0))["var_20"].astype(np.float64)
    z = p[:, :1] * np.exp(DELTA) + 1 - p[:, :1]
    moved = np.concatenate([p[:, :1] * np.exp(DELTA), p[:, 1:]], axis=1) / z
    want = float(np.abs(moved - p).max())
    row = result.stdout.splitlines()[1].split()
    assert row[0] == "var_20" and row[-1] == "FAIL"
    assert float(row[1]) == pytest.approx(want, rel=5e-3)  # the table shows 3 digits
    assert result.stdout.splitlines()[-1] == "FAIL: 1 of 1 outputs outside tolerance (var_20)"
    report = verify(MLP, bad)
    (o,) = report.outputs
    assert not report.ok and o.max_abs_error == pytest.approx(want, rel=1e-5)
    assert o.max_rel_error == pytest.approx(want / p.max(), rel=1e-5)
    assert o.mismatched == 8  # every probability of both rows moves (the softmax renormalizes)
    # a tolerance wide enough for the move passes it
    assert invoke("verify", MLP, bad, "--atol", f"{want * 1.01}").exit_code == 0


def test_verify_with_a_tiny_atol_fails_a_conversion_with_rounding_differences(tmp_path):
    src = MODELS / "real" / "56e485a2_my_network_image.mlmodel"  # ~1e-6 apart after the default passes
    out = _convert(src, tmp_path / "o.mlpackage")
    assert invoke("verify", src, out).exit_code == 0
    result = invoke("verify", src, out, "--rtol", "0", "--atol", "1e-9")
    assert result.exit_code == 1 and "rtol 0 atol 1e-09  FAIL" in result.stdout, result.output


def test_verify_notes_features_paired_by_position(tmp_path):
    out = _convert(RENAMED, tmp_path / "o.mlpackage")
    result = invoke("verify", RENAMED, out)
    assert result.exit_code == 0, result.output
    assert "note: inputs paired by position (no input of that name): '0' -> '_0'" in result.stdout
    assert "note: outputs paired by position (no output of that name): '7' -> '_7'" in result.stdout
    doc = json.loads(invoke("verify", RENAMED, out, "--json").stdout)
    assert doc["outputs"][0]["paired_by"] == "position" and doc["outputs"][0]["converted_name"] == "_7"


def test_verify_json_follows_its_schema(mlp_pair, tmp_path):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    good, bad = mlp_pair
    for model, code in ((good, 0), (bad, 1)):
        result = invoke("verify", MLP, model, "--json")
        assert result.exit_code == code
        doc = json.loads(result.stdout)
        jsonschema.validate(doc, SCHEMA)
        assert doc["ok"] is (code == 0)
    # a classifier: the probabilities dict (fp32 class) and the label (exact), with given inputs
    out = _convert(CLASSIFIER, tmp_path / "c.mlpackage")
    inputs = tmp_path / "in.npz"
    np.savez(inputs, image=np.random.default_rng(1).integers(0, 256, (20, 20, 3), dtype=np.uint8))
    doc = json.loads(invoke("verify", CLASSIFIER, out, "--inputs", inputs, "--json").stdout)
    jsonschema.validate(doc, SCHEMA)
    assert [(o["name"], o["tolerance"]) for o in doc["outputs"]] == [("logits", "fp32"), ("classLabel", "exact")]
    assert doc["inputs"] == str(inputs) and doc["seed"] is None
    np.savez(inputs, image=np.full((20, 20, 3), 0.5, np.float32))  # float pixels: warned once, still judged
    result = invoke("verify", CLASSIFIER, out, "--inputs", inputs)
    assert result.exit_code == 0, result.output
    assert [ln for ln in result.stderr.splitlines() if ln.startswith("warning: ")] == [
        "warning: input 'image': a float32 array for an image, which takes uint8 pixels 0..255; its values are used "
        "as pixel values as they are (values in [0, 1] make a nearly black image)"]
    # an output without a pair: max errors null (infinite), and the report still validates
    missing = verify(_two_outputs(), _one_output())
    jsonschema.validate(missing.to_json(), SCHEMA)
    assert missing.to_json()["outputs"][1]["max_abs_error"] is None


def test_verify_errors_exit_2_naming_the_file(tmp_path):
    inputs = tmp_path / "in.npz"
    np.savez(inputs, img=np.zeros((2, 16), np.float32))
    result = invoke("verify", MLP, MLP, "--inputs", inputs)
    line = one_error_line(result, 2)
    assert str(MLP) in line and "unknown input 'img'" in line and "missing input 'x'" in line


def test_convert_check_prints_the_verify_table_and_exits_1_on_failure(tmp_path, monkeypatch):
    src = MODELS / "real" / "56e485a2_my_network_image.mlmodel"
    result = invoke("convert", src, "-o", tmp_path / "a.mlpackage", "--check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "PASS: 1 output within tolerance"
    assert f"running {src} ..." in result.stderr
    monkeypatch.setitem(TOLERANCES, "fp32", (0.0, 0.0))  # the same conversion, judged exactly
    result = invoke("convert", src, "-o", tmp_path / "b.mlpackage", "--check")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[-1] == "FAIL: 1 of 1 outputs outside tolerance (my_output)"
    assert (tmp_path / "b.mlpackage").is_dir()  # written; the check only judges it


def test_verify_in_a_real_subprocess(mlp_pair):
    good, bad = mlp_pair
    for model, code, verdict in ((good, 0, "PASS"), (bad, 1, "FAIL")):
        proc = subprocess.run([sys.executable, "-m", "cli", "verify", str(MLP), str(model)], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == code, proc.stderr
        assert proc.stdout.splitlines()[-1].startswith(verdict + ": ")
        assert proc.stderr.splitlines()[0] == f"running {MLP} ..."


# -- the library function -------------------------------------------------------------------------


def _affine(w: float, name: str = "y"):
    return new_program({"x": tensor("fp32", [3])}, lambda b, x: [b.mul(x=x, y=np.float32(w), name=name)])


def _two_outputs():
    return new_program({"x": tensor("fp32", [3])},
                       lambda b, x: [b.relu(x=x, name="r"), b.mul(x=x, y=np.float32(2), name="m")])


def _one_output():
    return new_program({"x.1": tensor("fp32", [3])}, lambda b, x: [b.relu(x=x, name="r")])


def test_verify_takes_programs_and_given_inputs():
    x = np.array([1.0, -2.0, 4.0], np.float32)
    report = verify(_affine(1.0), _affine(1.01), inputs={"x": x})
    (o,) = report.outputs
    want_abs = float(np.max(np.abs(x * np.float32(1.01) - x)))  # 0.04, at x = 4
    assert math.isclose(o.max_abs_error, want_abs, rel_tol=1e-6)
    assert math.isclose(o.max_rel_error, want_abs / 4.0, rel_tol=1e-6)  # over the scale max|x| = 4
    assert not report.ok and report.inputs == "given" and report.seed is None
    assert verify(_affine(1.0), _affine(1.01), inputs={"x": x}, rtol=0.011).ok  # 0.04 <= 0.011 * 4


def test_verify_pairs_by_name_then_position_and_fails_a_missing_output():
    report = verify(_two_outputs(), _one_output())
    assert [(o.name, o.converted_name, o.paired_by, o.ok) for o in report.outputs] == [
        ("r", "r", "name", True), ("m", None, None, False)]
    assert report.notes == ["inputs paired by position (no input of that name): 'x' -> 'x.1'"]
    assert report.verdict() == "FAIL: 1 of 2 outputs outside tolerance (m)"


def test_pair_names():
    assert pair_names(["a", "b", "c"], ["b", "a_", "c_", "d"]) == (
        [("a", "a_", "position"), ("b", "b", "name"), ("c", "c_", "position")], [], ["d"])
    assert pair_names(["a", "b"], ["x"]) == ([("a", "x", "position")], ["b"], [])


def test_errors_by_definition():
    a = np.array([10.0, 0.0, np.nan, -1.0], np.float32)
    b = np.array([10.0, 1e-4, np.nan, -1.0], np.float32)
    e = _errors(a, b, 1e-4, 1e-5)  # bound 1e-5 + 1e-4 * 10 = 1.01e-3 >= 1e-4: the element near 0 passes
    assert math.isclose(e.max_abs, 1e-4, rel_tol=1e-3) and e.mismatched == 0
    assert math.isclose(e.max_rel, 1e-5, rel_tol=1e-3)
    assert _errors(a, np.array([10, 0, 1, -1], np.float32), 1, 1).max_abs == math.inf  # NaN vs a number
    assert _errors(np.zeros((2, 3)), np.zeros((3, 2)), 1, 1).note.startswith("shapes differ: [2, 3]")
    assert _errors({"a": 0.5, "b": 0.5}, {"a": 0.5, "c": 0.5}, 1, 1).note.startswith("labels differ")
    assert _errors({"a": 0.25, "b": 0.75}, {"b": 0.75, "a": 0.2}, 0, 0).max_abs == pytest.approx(0.05)  # per key
    assert _errors(np.array("cat"), np.array("dog"), 0, 0).mismatched == 1
    assert tolerance_for(np.float16(1)) == "fp16" and tolerance_for(np.float32(1), fp16_compute=True) == "fp16"
    assert tolerance_for(np.int32(1)) == "exact" and tolerance_for({"a": 1.0}) == "fp32"
