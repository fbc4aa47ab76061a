"""Issue 7, data loss in folder mode (``converter convert SRC_DIR -o OUT_DIR``): existing per-model
destinations are kept unless --overwrite (and then only clean Core ML packages are replaced), no
input is ever rewritten (a folder converted into itself, an output folder inside a source model,
two sources with one destination), and a folder with nothing to convert is reported, exit 1."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import converter
from tests.cli.helpers import digest, invoke, one_error_line, temporaries
from tests.conftest import MODELS

LSTM = MODELS / "torch" / "lstm_nn.mlmodel"
MLP_PACKAGE = MODELS / "torch" / "mlp_mlprogram.mlpackage"
MLP_NN = MODELS / "torch" / "mlp_nn.mlmodel"


def _src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(LSTM, src)
    return src


def test_an_existing_package_holding_user_files_is_kept(tmp_path: Path):
    src = _src(tmp_path)
    dst = tmp_path / "dst"
    assert invoke("convert", src, "-o", dst).exit_code == 0
    (dst / "lstm_nn.mlpackage" / "mine.txt").write_text("my notes")
    before = digest(dst)
    result = invoke("convert", src, "-o", dst)
    assert result.exit_code == 1, result.output
    assert f"failed  {src / 'lstm_nn.mlmodel'}: file '{dst / 'lstm_nn.mlpackage'}': already exists; replace it " \
           "with --overwrite" in result.stdout
    result = invoke("convert", src, "-o", dst, "--overwrite")
    assert result.exit_code == 1, result.output
    assert "already exists and is not replaced, even with --overwrite: it holds files that are not part of the " \
           "package (mine.txt); move them out first" in result.stdout
    assert "0 converted, 1 failed" in result.stdout
    assert digest(dst) == before


def test_overwrite_replaces_the_packages_a_previous_run_wrote(tmp_path: Path):
    src = _src(tmp_path)
    shutil.copy(MLP_NN, src)
    dst = tmp_path / "dst"
    assert invoke("convert", src, "-o", dst, "--target", "iOS15").exit_code == 0
    result = invoke("convert", src, "-o", dst, "--overwrite", "--target", "iOS17")
    assert result.exit_code == 0, result.output
    assert "2 converted, 0 failed" in result.stdout
    assert converter.load(dst / "lstm_nn.mlpackage").main.opset == "iOS17"
    assert temporaries(tmp_path) == []


def test_a_folder_converted_into_itself_rewrites_no_input(tmp_path: Path):
    src = tmp_path / "proj"
    (src / "nested").mkdir(parents=True)
    shutil.copytree(MLP_PACKAGE, src / "m.mlpackage")
    shutil.copy(MLP_NN, src / "m.mlmodel")  # its destination is the package beside it
    shutil.copy(LSTM, src / "nested")
    inputs = {p: digest(src / p) for p in ("m.mlpackage", "m.mlmodel", "nested/lstm_nn.mlmodel")}
    for extra in ([], ["--overwrite"]):
        result = invoke("convert", src, "-o", src, *extra)
        assert result.exit_code == 1, result.output
        assert f"failed  {src / 'm.mlpackage'}: file '{src / 'm.mlpackage'}': the output would replace the " \
               f"source '{src / 'm.mlpackage'}'; choose another destination" in result.stdout
        assert f"failed  {src / 'm.mlmodel'}: file '{src / 'm.mlpackage'}': the output would replace the " \
               f"source '{src / 'm.mlpackage'}'" in result.stdout
        assert {p: digest(src / p) for p in inputs} == inputs
    # the first run wrote nested/lstm_nn.mlpackage; the second found it as a source and left it alone
    assert (src / "nested" / "lstm_nn.mlpackage" / "Manifest.json").is_file()
    assert "0 converted, 4 failed" in result.stdout


def test_an_output_folder_inside_a_source_model_writes_nothing(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    pkg = shutil.copytree(MLP_PACKAGE, src / "m.mlpackage")
    shutil.copy(LSTM, src)
    before = digest(src)
    result = invoke("convert", src, "-o", pkg / "Data" / "out", "--overwrite")
    assert result.exit_code == 1, result.output
    assert "0 converted, 2 failed" in result.stdout
    assert result.stdout.count(f"the output would lie inside the source '{pkg}'") == 2
    assert digest(src) == before


def test_two_sources_with_one_destination(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copytree(MLP_PACKAGE, src / "m.mlpackage")
    shutil.copy(MLP_NN, src / "m.mlmodel")
    out = tmp_path / "out"
    result = invoke("convert", src, "-o", out, "--overwrite")
    assert result.exit_code == 1, result.output
    assert f"ok      {src / 'm.mlpackage'} -> {out / 'm.mlpackage'}" in result.stdout
    assert f"failed  {src / 'm.mlmodel'}: file '{out / 'm.mlpackage'}': also the destination of " \
           f"'{src / 'm.mlpackage'}', converted before" in result.stdout
    assert converter.load(out / "m.mlpackage").meta["spec_version"] == converter.load(MLP_PACKAGE).meta["spec_version"]


def test_an_output_named_like_a_model_is_refused(tmp_path: Path):
    src = _src(tmp_path)
    line = one_error_line(invoke("convert", src, "-o", tmp_path / "new.mlpackage"))
    assert "the output of a folder conversion must be a folder, not a model name ('.mlpackage')" in line
    assert sorted(os.listdir(tmp_path)) == ["src"]


# -- nothing to convert ------------------------------------------------------------------------------


def test_an_empty_folder_is_reported(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_error_line(invoke("convert", empty, "-o", tmp_path / "out"), code=1)
    assert line == f"error: file '{empty}': no model to convert (no .mlmodel or .onnx file, no .mlpackage folder): it is empty"
    (empty / "readme.txt").write_text("x")
    (empty / "sub").mkdir()
    line = one_error_line(invoke("convert", empty, "-o", tmp_path / "out"), code=1)
    assert line.endswith(": it holds 1 file and 1 folder")
    assert not (tmp_path / "out").exists()


def test_a_package_without_manifest_is_reported(tmp_path: Path):
    broken = Path(shutil.copytree(MLP_PACKAGE, tmp_path / "x.mlpackage"))
    (broken / "Manifest.json").unlink()
    line = one_error_line(invoke("convert", broken, "-o", tmp_path / "out.mlpackage"), code=1)
    assert line == f"error: file '{broken}': not a Core ML package: it has no Manifest.json (it holds 2 files and " \
                   "3 folders)"
    assert sorted(os.listdir(tmp_path)) == ["x.mlpackage"]
