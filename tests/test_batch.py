"""Batch migration of a folder tree: every model converted in place under the output folder,
failures listed with their error, the rest unaffected."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

import cli
import converter
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
