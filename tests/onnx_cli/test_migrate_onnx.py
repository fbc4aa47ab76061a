"""``converter migrate`` and ``convert FOLDER`` with ONNX models: .onnx files are sources (default
target mil: an .mlpackage beside where the .onnx was), ``--to onnx`` writes .onnx models that
pass the ONNX checker and match onnxruntime on the source, the report validates against its
schema, a refused ONNX model is reported with the op it does not take."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnxruntime as ort

import converter

from ..cli.helpers import invoke
from ..conftest import REPO
from .models import cli_subprocess, int_gather, mlp, refused
from .test_verify_onnx import CLASSIFIER

REPORT_SCHEMA = REPO / "docs" / "schemas" / "migration-report.schema.json"


def _tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    mlp(root / "m.onnx")
    int_gather(root / "sub" / "g.onnx")
    refused(root / "r.onnx", external=True)
    shutil.copy(CLASSIFIER, root / "c.mlmodel")
    return root


def _validated(dst: Path) -> dict:
    doc = json.loads((dst / "migration-report.json").read_text())
    jsonschema.validate(doc, json.loads(REPORT_SCHEMA.read_text()), cls=jsonschema.Draft202012Validator)
    return doc


def test_migrate_picks_up_onnx_models(tmp_path):
    src, dst = _tree(tmp_path / "src"), tmp_path / "dst"
    r = invoke("migrate", src, dst, "-j", "1", "--runtime", "onnxruntime")
    assert r.exit_code == 1, r.output  # the refused model
    doc = _validated(dst)
    status = {m["source"]: (m["status"], m["output"]) for m in doc["models"]}
    assert status == {"m.onnx": ("converted", "m.mlpackage"), "sub/g.onnx": ("converted", "sub/g.mlpackage"),
                      "c.mlmodel": ("converted", "c.mlpackage"), "r.onnx": ("refused", None)}
    reason = next(m["reason"] for m in doc["models"] if m["source"] == "r.onnx")
    assert "com.example::Frobnicate" in reason
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    want = ort.InferenceSession(str(src / "m.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(converter.run(converter.load(dst / "m.mlpackage"), {"x": x})["y"], want,
                               rtol=1e-5, atol=1e-6)


def test_migrate_to_onnx_in_a_subprocess(tmp_path):
    src, dst = _tree(tmp_path / "src"), tmp_path / "dst"
    r = cli_subprocess("migrate", src, dst, "--to", "onnx", "-j", "1")
    assert r.returncode == 1, r.stderr
    doc = _validated(dst)
    assert doc["options"]["to"] == "onnx"
    outputs = sorted(m["output"] for m in doc["models"] if m["status"] == "converted")
    assert outputs == ["c.onnx", "m.onnx", "sub/g.onnx"]
    for rel in outputs:
        onnx.checker.check_model(onnx.load(str(dst / rel)), full_check=True)
    idx = np.array([1, 3, 0], np.int64)
    written = ort.InferenceSession(str(dst / "sub/g.onnx"))
    # the IR holds int64 features in int32 (the frontend's dtype policy); the ONNX written declares
    # them int64 again, as the source did
    source = ort.InferenceSession(str(src / "sub/g.onnx"))
    assert [i.type for i in written.get_inputs()] == [i.type for i in source.get_inputs()] == ["tensor(int64)"]
    assert [o.type for o in written.get_outputs()] == [o.type for o in source.get_outputs()]
    got = written.run(None, {"idx": idx})
    want = source.run(None, {"idx": idx})
    np.testing.assert_array_equal(got[0], want[0])
    assert int(np.asarray(got[1]).reshape(())) == int(want[1])


def test_convert_folder_picks_up_onnx_models(tmp_path):
    src, out = _tree(tmp_path / "src"), tmp_path / "out"
    r = invoke("convert", src, "-o", out, "--check")
    assert r.exit_code == 1, r.output
    assert "3 converted, 1 failed" in r.stdout
    for rel in ("m.mlpackage", "sub/g.mlpackage", "c.mlpackage"):
        assert (out / rel / "Manifest.json").is_file()
    assert "r.onnx" in r.stdout and "Frobnicate" in r.stdout
