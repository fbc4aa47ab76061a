"""Issue 3, command line: ``converter run`` and ``converter convert`` on MIL packages, and
one-line errors (no traceback) when they fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.formats.proto import Model_pb2

from .helpers import TORCH, random_feeds, same_bits


def invoke(*args: str):
    return CliRunner().invoke(cli.main, [str(a) for a in args])


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_run_writes_outputs(tmp_path: Path):
    model = TORCH / "lstm_mlprogram.mlpackage"
    out = tmp_path / "out.npz"
    # the interpreter: the outputs are compared bit for bit with converter.run's
    result = invoke("run", model, "--inputs", TORCH / "lstm.inputs.npz", "-o", out, "--runtime", "interpreter")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote 2 arrays to {out}"
    inputs = dict(np.load(TORCH / "lstm.inputs.npz"))
    expected = converter.run(converter.load(model), inputs)
    with np.load(out) as got:
        assert sorted(got.files) == sorted(expected)
        for k in expected:
            assert same_bits(got[k], expected[k])
        refs = np.load(TORCH / "lstm.torch_outputs.npz")
        np.testing.assert_allclose(got["var_45"], refs["output_0"], atol=1e-4)


def test_run_prints_outputs(tmp_path: Path):
    result = invoke("run", TORCH / "mlp_mlprogram.mlpackage", "--inputs", TORCH / "mlp.inputs.npz")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("var_20 = [[")


def test_run_classifier(tmp_path: Path):
    """Classifier outputs (a label and a dict of probabilities) go to the .npz as arrays."""
    model = MODELS_REAL / "764eeca3_ChineseClassifier.mlpackage"
    feeds = tmp_path / "in.npz"
    np.savez(feeds, text=np.arange(50, dtype=np.int32).reshape(1, 50))
    out = tmp_path / "out.npz"
    result = invoke("run", model, "--inputs", feeds, "-o", out)
    assert result.exit_code == 0, result.output
    with np.load(out) as got:
        assert sorted(got.files) == ["classLabel", "classLabel_probs.labels", "classLabel_probs.values"]
        assert str(got["classLabel"]) in list(got["classLabel_probs.labels"])


def test_convert_to_ios17(tmp_path: Path):
    src = TORCH / "cnn_bn_mlprogram_fp16.mlpackage"
    out = tmp_path / "out.mlpackage"
    result = invoke("convert", src, "-o", out, "--target", "iOS17")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote {out}"
    m = Model_pb2.Model()
    m.ParseFromString((out / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    assert m.specificationVersion == 8 and m.mlProgram.functions["main"].opset == "CoreML7"
    before, after = converter.load(src), converter.load(out)
    assert after.main.opset == "iOS17"
    feeds = random_feeds(before)
    a, b = converter.run(before, feeds), converter.run(after, feeds)
    assert all(same_bits(a[k], b[k]) for k in a)


def test_convert_to_mlmodel(tmp_path: Path):
    out = tmp_path / "mlp.mlmodel"
    result = invoke("convert", TORCH / "mlp_mlprogram.mlpackage", "-o", out)
    assert result.exit_code == 0, result.output
    assert out.is_file() and converter.load(out).main.opset == "iOS15"


def test_convert_malformed_input_is_one_line(tmp_path: Path):
    pkg = shutil.copytree(TORCH / "mlp_mlprogram.mlpackage", tmp_path / "bad.mlpackage")
    (pkg / "Data/com.apple.CoreML/weights/weight.bin").unlink()
    out = tmp_path / "out.mlpackage"
    result = invoke("convert", pkg, "-o", out)
    assert_one_line_error(result, "model.mlmodel", "function 'main'", "weight file", "is missing")
    assert not out.exists()


def test_convert_to_a_target_too_old_is_one_line(tmp_path: Path):
    src = MODELS_REAL / "a2e9c9a9_DTLN_AEC_128_Part2.mlpackage"  # iOS16: fp16 inputs need iOS16
    out = tmp_path / "out.mlpackage"
    result = invoke("convert", src, "-o", out, "--target", "iOS15")
    assert_one_line_error(result, f"file '{out}'", "cannot target iOS15: fp16 input 'estimated_frame' of function "
                                                  "'main' needs iOS16")
    assert not out.exists()


def test_run_with_a_missing_input_is_one_line(tmp_path: Path):
    feeds = tmp_path / "in.npz"
    np.savez(feeds, wrong=np.zeros((2, 16), np.float32))
    result = invoke("run", TORCH / "mlp_mlprogram.mlpackage", "--inputs", feeds)
    assert_one_line_error(result, "function 'main'", "unknown input 'wrong'; missing input 'x' (multiArray float32 2 x 16)")


@pytest.mark.parametrize("args", [["run", "{model}", "--inputs", "{npz}"], ["convert", "{model}", "-o", "{out}"]],
                         ids=["run", "convert"])
def test_not_a_model_is_one_line(tmp_path: Path, args: list[str]):
    model = tmp_path / "junk.mlmodel"
    model.write_bytes(b"\x07junk")
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.zeros(1))
    result = invoke(*[a.format(model=model, npz=npz, out=tmp_path / "o.mlpackage") for a in args])
    assert_one_line_error(result, f"file '{model}'", "not a Core ML model")


MODELS_REAL = TORCH.parent / "real"
