"""``converter verify`` and ``convert --check`` with ONNX on either side: with onnxruntime, an ONNX
source runs from the user's own file and an ONNX output as written (not read into the IR and
exported again); features pair by name; int64 inputs, scalar outputs and ZipMap outputs compare.
Oracle: onnxruntime on the original file, called by the test itself."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import converter
from converter.runtimes import onnx_file

from ..cli.helpers import invoke
from ..conftest import MODELS
from .models import cli_subprocess, int_gather, mlp, torch_cnn

CLASSIFIER = MODELS / "builder/image_classifier_preprocessed.mlmodel"  # image input, string labels


@pytest.fixture
def files_run(monkeypatch) -> list[str]:
    """The ONNX files onnxruntime runs as they are, in order."""
    ran: list[str] = []
    original = onnx_file.OnnxFileRunner.run

    def run(self, feeds):  # noqa: ANN001, ANN202
        ran.append(Path(self.path).name)
        return original(self, feeds)

    monkeypatch.setattr(onnx_file.OnnxFileRunner, "run", run)
    return ran


def _report(result) -> dict:  # noqa: ANN001 - a click Result
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("make", [mlp, int_gather])
def test_verify_runs_the_onnx_source_from_its_file(tmp_path, make, files_run):
    src = make(tmp_path / "m.onnx")
    pkg = converter.convert(src, out=tmp_path / "m.mlpackage") and tmp_path / "m.mlpackage"
    doc = _report(invoke("verify", src, pkg, "--runtime", "onnxruntime", "--json"))
    assert doc["ok"], doc
    assert files_run == ["m.onnx"]  # the source is the file; the package is read by the converter
    assert all(o["paired_by"] == "name" for o in doc["outputs"])
    files_run.clear()
    doc = _report(invoke("verify", src, pkg, "--runtime", "interpreter", "--json"))
    assert doc["ok"] and files_run == []


def test_the_source_side_is_onnxruntime_on_the_original_file(tmp_path):
    """With --inputs, the package's outputs (by our interpreter) match onnxruntime on the original
    file (the test's own session), and verify's report agrees."""
    src = int_gather(tmp_path / "g.onnx")
    pkg = tmp_path / "g.mlpackage"
    converter.convert(src, out=pkg)
    idx = np.array([4, -1, 0], np.int64)  # a negative index: ONNX Gather counts from the end
    np.savez(tmp_path / "in.npz", idx=idx)
    want = dict(zip(["y", "count"], ort.InferenceSession(str(src)).run(None, {"idx": idx})))
    got = converter.run(converter.load(pkg), {"idx": idx})
    np.testing.assert_array_equal(got["y"], want["y"])
    assert int(np.asarray(got["count"]).reshape(())) == int(want["count"])
    doc = _report(invoke("verify", src, pkg, "--inputs", tmp_path / "in.npz", "--json"))
    assert doc["ok"] and [o["tolerance"] for o in doc["outputs"]] == ["fp32", "exact"]


def test_convert_check_of_a_torch_exported_model_in_a_subprocess(tmp_path):
    src = torch_cnn(tmp_path / "cnn.onnx")
    r = cli_subprocess("convert", src, "-o", tmp_path / "cnn.mlpackage", "--check", "--runtime", "onnxruntime")
    assert r.returncode == 0, r.stderr
    assert "PASS: 1 output within tolerance" in r.stdout
    assert f"running {src} ..." in r.stderr


@pytest.mark.parametrize("to,out", [("mil", "g.mlpackage"), ("onnx", "g2.onnx")])
def test_convert_check_of_an_onnx_source(tmp_path, to, out, files_run):
    src = int_gather(tmp_path / "g.onnx")
    r = invoke("convert", src, "-o", tmp_path / out, "--to", to, "--check", "--runtime", "onnxruntime")
    assert r.exit_code == 0, r.output
    assert "PASS: 2 outputs within tolerance" in r.stdout
    assert files_run == (["g.onnx"] if to == "mil" else ["g.onnx", "g2.onnx"])


@pytest.mark.parametrize("classifier", ["tensor", "zipmap"])
def test_convert_check_to_onnx_runs_the_written_file(tmp_path, classifier, files_run):
    """A Core ML classifier -> .onnx, checked by running the file as written (a ZipMap output is in
    the ai.onnx.ml domain, which the converter does not read: only the file's own run checks it)."""
    out = tmp_path / "c.onnx"
    r = invoke("convert", CLASSIFIER, "-o", out, "--to", "onnx", "--onnx-classifier", classifier, "--check",
               "--runtime", "onnxruntime")
    assert r.exit_code == 0, r.output
    assert "PASS: 2 outputs within tolerance" in r.stdout
    assert files_run == ["c.onnx"]
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    doc = _report(invoke("verify", CLASSIFIER, out, "--json"))  # auto: onnxruntime, installed
    assert doc["ok"] and {o["name"] for o in doc["outputs"]} == {"logits", "classLabel"}


def test_verify_fails_when_the_written_onnx_file_differs(tmp_path):
    src = mlp(tmp_path / "m.onnx")
    out = tmp_path / "m2.onnx"
    converter.convert(src, to="onnx", out=out)
    m = onnx.load(str(out))
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32 and a.size == 3:  # the bias
            t.CopyFrom(numpy_helper.from_array(a + 1.0, t.name))
    onnx.save(m, str(out))
    r = invoke("verify", src, out, "--runtime", "onnxruntime")
    assert r.exit_code == 1, r.output
    assert "FAIL: 1 of 1 outputs outside tolerance (y)" in r.stdout


def test_an_onnx_output_onnxruntime_cannot_load_is_an_error(tmp_path):
    src = mlp(tmp_path / "m.onnx")
    out = tmp_path / "broken.onnx"
    out.write_bytes(b"not a model")
    r = invoke("verify", src, out, "--runtime", "onnxruntime")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    err = r.stderr.splitlines()[-1]  # after the "running SOURCE ..." line
    assert err.startswith("error: ") and "broken.onnx" in err and "onnxruntime cannot load the model" in err
