"""Batch migration of a folder tree: every model converted in place under the output folder,
failures listed with their error, the rest unaffected."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

import cli
import converter
from converter.batch import convert_tree
from converter.check import compare
from tests.conftest import MODELS


def _tree(tmp_path):
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    shutil.copy(MODELS / "builder" / "gru.mlmodel", src)
    shutil.copy(MODELS / "real" / "baf6017f_songs.mlmodel", src)  # a tree ensemble: refused
    shutil.copytree(MODELS / "torch" / "mlp_mlprogram.mlpackage", src / "nested" / "mlp.mlpackage")
    shutil.copy(MODELS / "builder" / "cnn_conv_pool_fc.mlmodel", src / "nested")
    return src


def test_folder_is_migrated_and_failures_are_listed(tmp_path):
    src = _tree(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "3 converted, 1 failed" in result.output
    assert "baf6017f_songs.mlmodel: " in result.output and "treeEnsembleRegressor" in result.output
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.mlpackage")) == [
        "gru.mlpackage", "nested/cnn_conv_pool_fc.mlpackage", "nested/mlp.mlpackage"]
    assert not (out / "baf6017f_songs.mlpackage").exists()
    for rel in ("gru", "nested/cnn_conv_pool_fc"):
        diffs = compare(converter.load(src / f"{rel}.mlmodel"), converter.load(out / f"{rel}.mlpackage"))
        assert max(diffs.values()) <= 1e-5, (rel, diffs)


def test_folder_of_good_models_exits_zero(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(MODELS / "builder" / "regressor_mlp.mlmodel", src)
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(tmp_path / "out"), "--target", "iOS16"])
    assert result.exit_code == 0, result.output
    assert "1 converted, 0 failed" in result.output
    assert converter.load(tmp_path / "out" / "regressor_mlp.mlpackage").main.opset == "iOS16"


# -- failures while writing, folders left behind, --check, --to -------------------------------------


def _small_tree(tmp_path):
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    shutil.copy(MODELS / "builder" / "regressor_mlp.mlmodel", src)
    shutil.copy(MODELS / "builder" / "gru.mlmodel", src / "nested")
    return src


def test_a_folder_that_cannot_be_created_fails_that_model_only(tmp_path):
    src = _small_tree(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "nested").write_text("a file where a folder should go")
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert "1 converted, 1 failed" in result.output
    assert f"failed  {src / 'nested' / 'gru.mlmodel'}: file '{out / 'nested'}': cannot create folder" in result.output
    assert (out / "regressor_mlp.mlpackage").is_dir()


def test_a_failed_write_is_listed_and_the_rest_go_on(tmp_path, monkeypatch):
    import converter.api

    src = _small_tree(tmp_path)
    out = tmp_path / "out"
    save = converter.api.save

    def failing_save(prog, path, **kw):
        if "gru" in str(path):
            raise OSError(28, "No space left on device", str(path))
        return save(prog, path, **kw)

    monkeypatch.setattr(converter.api, "save", failing_save)
    outcomes = convert_tree(src, out)
    assert [(o.source.name, o.ok) for o in outcomes] == [("regressor_mlp.mlmodel", True), ("gru.mlmodel", False)]
    assert "cannot write: No space left on device" in str(outcomes[1].error)
    assert not (out / "nested").exists()  # the folder made for it is removed again


def test_failed_models_leave_no_empty_folders(tmp_path):
    src = tmp_path / "src"
    (src / "junk").mkdir(parents=True)
    (src / "junk" / "bad.mlmodel").write_bytes(b"\x07junk")
    (src / "old" / "deeper").mkdir(parents=True)
    shutil.copytree(MODELS / "real" / "a2e9c9a9_DTLN_AEC_128_Part2.mlpackage", src / "old" / "deeper" / "m.mlpackage")
    out = tmp_path / "out"
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(out), "--target", "iOS15"])
    assert result.exit_code == 1, result.output
    assert "0 converted, 2 failed" in result.output
    assert "not a Core ML model" in result.output and "cannot target iOS15" in result.output
    assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))


def test_folder_check_prints_the_largest_difference(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(MODELS / "real" / "d8cf86f0_test.mlmodel", src)  # features renamed when written
    shutil.copy(MODELS / "builder" / "regressor_mlp.mlmodel", src)
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(tmp_path / "out"), "--check"])
    assert result.exit_code == 0, result.output
    assert "2 converted, 0 failed" in result.output
    lines = result.output.splitlines()
    checks = [line for line in lines if line.strip().startswith("largest output difference: ")]
    assert len(checks) == 2, result.output
    assert all(float(line.split(": ")[1]) <= 1e-5 for line in checks), checks
    outcomes = convert_tree(src, tmp_path / "out2", check=True)
    assert outcomes[0].differences == {"7": 0.0}  # the source's output name


def test_folder_check_failure_is_listed(tmp_path, monkeypatch):
    import converter.verify

    src = _small_tree(tmp_path)

    def failing_verify(*args, **kw):
        raise converter.UnsupportedError("cannot make a random value for input 'x'", function="main")

    monkeypatch.setattr(converter.verify, "verify", failing_verify)
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(tmp_path / "out"), "--check"])
    assert result.exit_code == 1, result.output
    assert "0 converted, 2 failed" in result.output
    assert "but the check failed: function 'main': cannot make a random value" in result.output


def test_unknown_output_format_is_refused_before_anything_is_done(tmp_path):
    src = _small_tree(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(converter.UnsupportedError, match="unknown output format 'tflite'"):
        convert_tree(src, out, to="tflite")
    assert not out.exists()


def test_output_that_is_a_file_is_one_line(tmp_path):
    src = _small_tree(tmp_path)
    out = tmp_path / "out.mlmodel"
    out.write_bytes(b"")
    result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"error: file '{out}': the output of a folder conversion must be a folder"


def test_output_folder_inside_the_source_is_not_converted_again(tmp_path):
    src = _small_tree(tmp_path)
    out = src / "converted"
    for again in ([], ["--overwrite"]):
        result = CliRunner().invoke(cli.main, ["convert", str(src), "-o", str(out), *again])
        assert result.exit_code == 0, result.output
        assert "2 converted, 0 failed" in result.output
    assert not (out / "converted").exists()


def test_a_folder_that_cannot_be_listed_is_a_failure(tmp_path, monkeypatch):
    import os

    import converter.batch

    src = _small_tree(tmp_path)
    walk = os.walk

    def walk_with_error(top, onerror=None, **kw):
        onerror(PermissionError(13, "Permission denied", str(src / "locked")))
        yield from walk(top, onerror=onerror, **kw)

    monkeypatch.setattr(converter.batch.os, "walk", walk_with_error)
    outcomes = convert_tree(src, tmp_path / "out")
    assert [o.ok for o in outcomes] == [False, True, True]
    assert str(outcomes[0].error) == f"file '{src / 'locked'}': cannot list folder: Permission denied"
