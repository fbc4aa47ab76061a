"""Issue 7, data loss: where ``converter convert MODEL -o OUT`` writes, and what it refuses.

Nothing the converter did not write is deleted or replaced: an existing destination needs
--overwrite, and even then only a Core ML model file or a clean Core ML package is replaced; the
source is never the destination, inside it or held by it (symlinks, ``..`` and hard links
included); an existing folder means "into it"; the extension decides the format. Every refusal is
one ``error:`` line, exit 2, and leaves the whole tree byte for byte as it was."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import converter
from tests.cli.helpers import digest, invoke, one_error_line, temporaries
from tests.conftest import MODELS, REPO

TINY = REPO / "examples" / "tiny_classifier.mlmodel"
PACKAGE = MODELS / "torch" / "mlp_mlprogram.mlpackage"


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return Path(shutil.copy(TINY, tmp_path / "tiny.mlmodel"))


def _assert_converted(path: Path, source: Path) -> None:
    prog, original = converter.load(path), converter.load(source)
    assert [v.name for v in prog.main.outputs] and prog.main.opset.startswith("iOS")
    assert sorted(original.main.input_info) == sorted(prog.main.input_info)


# -- an existing folder means "into it" ---------------------------------------------------------------


def test_existing_folder_means_into_it_and_its_files_are_kept(tmp_path: Path, tiny: Path):
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "thesis.txt").write_text("years of work")
    (docs / "sub").mkdir()
    (docs / "sub" / "data.csv").write_text("1,2,3")
    before = {p: digest(docs / p) for p in ("thesis.txt", "sub")}
    result = invoke("convert", tiny, "-o", docs)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"wrote {docs / 'tiny.mlpackage'}"
    assert sorted(os.listdir(docs)) == ["sub", "thesis.txt", "tiny.mlpackage"]
    assert {p: digest(docs / p) for p in before} == before
    _assert_converted(docs / "tiny.mlpackage", tiny)


def test_dot_means_the_current_folder(tmp_path: Path, tiny: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("convert", "tiny.mlmodel", "-o", ".")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and result.exception is None
    assert sorted(os.listdir(tmp_path)) == ["tiny.mlmodel", "tiny.mlpackage"]
    _assert_converted(tmp_path / "tiny.mlpackage", tiny)


def test_a_package_source_into_a_folder_is_named_after_it(tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    result = invoke("convert", PACKAGE, "-o", out)
    assert result.exit_code == 0, result.output
    assert sorted(os.listdir(out)) == ["mlp_mlprogram.mlpackage"]


# -- existing destinations ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["new.mlpackage", "new.mlmodel"])
def test_existing_destination_is_refused_without_overwrite(tmp_path: Path, tiny: Path, name: str):
    out = tmp_path / name
    assert invoke("convert", tiny, "-o", out).exit_code == 0
    before = digest(tmp_path)
    line = one_error_line(invoke("convert", tiny, "-o", out))
    assert line == f"error: file '{out}': already exists; replace it with --overwrite (overwrite=True in Python)"
    assert digest(tmp_path) == before


@pytest.mark.parametrize("name", ["new.mlpackage", "new.mlmodel"])
def test_overwrite_replaces_a_core_ml_model(tmp_path: Path, tiny: Path, name: str):
    out = tmp_path / name
    old = converter.load(PACKAGE)
    converter.save(old, out)  # a Core ML model written by someone: a different one
    result = invoke("convert", tiny, "-o", out, "--overwrite")
    assert result.exit_code == 0, result.output
    _assert_converted(out, tiny)
    assert temporaries(tmp_path) == []


def _not_a_model_file(p: Path) -> None:
    p.write_text("my notes, not a model")


def _folder_named_like_a_model(p: Path) -> None:
    p.mkdir()
    (p / "notes.txt").write_text("mine")


def _package_with_my_files(p: Path) -> None:
    shutil.copytree(PACKAGE, p)
    (p / "mine.txt").write_text("mine")
    (p / "Data" / "extra").mkdir()
    (p / "Data" / "extra" / "more.txt").write_text("mine too")


def _folder_without_manifest(p: Path) -> None:
    p.mkdir()
    (p / "Data").mkdir()


def _file_named_like_a_package(p: Path) -> None:
    p.write_bytes(TINY.read_bytes())


@pytest.mark.parametrize(("name", "make", "why"), [
    ("x.mlmodel", _not_a_model_file, "it does not read as a Core ML model (not a Core ML model"),
    ("x.mlmodel", _folder_named_like_a_model, "it is a folder, not a Core ML model file"),
    ("x.mlpackage", _package_with_my_files,
     "it holds files that are not part of the package (Data/extra, mine.txt); move them out first"),
    ("x.mlpackage", _folder_without_manifest, "it is a folder without Manifest.json, not a Core ML package"),
    ("x.mlpackage", _file_named_like_a_package, "it is a file, not a Core ML package folder"),
], ids=["text-file", "folder.mlmodel", "package-with-user-files", "no-manifest", "file.mlpackage"])
def test_overwrite_replaces_only_a_core_ml_model(tmp_path: Path, tiny: Path, name: str, make, why: str):
    out = tmp_path / name
    make(out)
    before = digest(tmp_path)
    line = one_error_line(invoke("convert", tiny, "-o", out, "--overwrite"))
    assert line.startswith(f"error: file '{out}': already exists and is not replaced, even with --overwrite: {why}")
    assert digest(tmp_path) == before


# -- the source is never written ---------------------------------------------------------------------


def _package_source(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "README.md").write_text("my project")
    return Path(shutil.copytree(PACKAGE, proj / "in.mlpackage"))


@pytest.mark.parametrize("out", [
    "{src}",
    "{src}/Data/com.apple.CoreML/weights/weight.bin",
    "{src}/Data/com.apple.CoreML/weights/new.mlpackage",
    "{src}/Data/new.mlmodel",
    "{proj}",  # the input's parent folder: the result would be the input itself
    "{proj}/../proj/in.mlpackage",
    "{src}/Data/../../in.mlpackage",
    "{link}/in.mlpackage",  # a symlink to the project folder
    "{link}/in.mlpackage/Data/new.mlpackage",
    "{srclink}",  # a symlink to the input
], ids=["itself", "its-weight-file", "inside-weights", "inside-data", "parent-folder", "dotdot", "dotdot-inside",
        "symlinked-folder", "symlinked-folder-inside", "symlink-to-it"])
@pytest.mark.parametrize("overwrite", [False, True], ids=["", "overwrite"])
def test_the_source_package_is_never_written(tmp_path: Path, out: str, overwrite: bool):
    src = _package_source(tmp_path)
    proj = src.parent
    (tmp_path / "link").symlink_to(proj, target_is_directory=True)
    (tmp_path / "srclink.mlpackage").symlink_to(src, target_is_directory=True)
    out = out.format(src=src, proj=proj, link=tmp_path / "link", srclink=tmp_path / "srclink.mlpackage")
    before = digest(tmp_path)
    line = one_error_line(invoke("convert", src, "-o", out, *(["--overwrite"] if overwrite else [])))
    assert f"the source '{src}'; choose another destination" in line, line
    assert digest(tmp_path) == before


@pytest.mark.parametrize("how", ["same", "hard-link", "symlink", "dotdot"])
def test_the_source_file_is_never_written(tmp_path: Path, tiny: Path, how: str):
    out = {"same": tiny, "dotdot": tmp_path / "x" / ".." / "tiny.mlmodel",
           "hard-link": tmp_path / "hard.mlmodel", "symlink": tmp_path / "sym.mlmodel"}[how]
    (tmp_path / "x").mkdir()
    if how == "hard-link":
        os.link(tiny, out)
    elif how == "symlink":
        out.symlink_to(tiny)
    before = digest(tmp_path)
    for extra in ([], ["--overwrite"]):
        line = one_error_line(invoke("convert", tiny, "-o", out, *extra))
        assert f"the output would replace the source '{tiny}'" in line, line
    assert digest(tmp_path) == before


def test_a_destination_holding_the_source_is_never_replaced(tmp_path: Path):
    """The source is a model file inside a package; replacing that package would delete it."""
    pkg = Path(shutil.copytree(PACKAGE, tmp_path / "old.mlpackage"))
    inner = pkg / "Data" / "com.apple.CoreML" / "model.mlmodel"
    before = digest(tmp_path)
    line = one_error_line(invoke("convert", inner, "-o", pkg, "--overwrite"))
    assert f"the output would replace a folder holding the source '{inner}'" in line
    assert digest(tmp_path) == before


# -- the extension decides the format -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["e.onnx", "model", "e.mlpackage.zip"])
def test_an_extension_we_cannot_write_is_refused(tmp_path: Path, tiny: Path, name: str):
    out = tmp_path / name
    line = one_error_line(invoke("convert", tiny, "-o", out))
    assert line.startswith(f"error: file '{out}': ")
    assert "--to mil writes .mlpackage (a package folder) or .mlmodel (a single file)" in line
    assert sorted(os.listdir(tmp_path)) == ["tiny.mlmodel"]


def test_the_extension_is_case_insensitive(tmp_path: Path, tiny: Path):
    single, package = tmp_path / "A.MLMODEL", tmp_path / "B.MLPackage"
    assert invoke("convert", tiny, "-o", single).exit_code == 0
    assert invoke("convert", tiny, "-o", package).exit_code == 0
    assert single.is_file() and (package / "Manifest.json").is_file()


# -- run -o ------------------------------------------------------------------------------------------


def test_run_output_is_never_the_inputs_and_never_replaced_unasked(tmp_path: Path):
    torch = MODELS / "torch"
    feeds = Path(shutil.copy(torch / "mlp.inputs.npz", tmp_path / "in.npz"))
    before = digest(feeds)
    for extra in ([], ["--overwrite"]):
        line = one_error_line(invoke("run", PACKAGE, "--inputs", feeds, "-o", feeds, *extra))
        assert f"the output would replace the source '{feeds}'" in line, line
    notes = tmp_path / "notes.npz"
    notes.write_text("not an npz")
    assert "already exists; replace it with --overwrite" in one_error_line(
        invoke("run", PACKAGE, "--inputs", feeds, "-o", notes))
    assert "it is not an .npz file" in one_error_line(
        invoke("run", PACKAGE, "--inputs", feeds, "-o", notes, "--overwrite"))
    assert digest(feeds) == before and notes.read_text() == "not an npz"
    out = tmp_path / "out.npz"
    assert invoke("run", PACKAGE, "--inputs", feeds, "-o", out).exit_code == 0
    assert invoke("run", PACKAGE, "--inputs", feeds, "-o", out).exit_code == 2
    assert invoke("run", PACKAGE, "--inputs", feeds, "-o", out, "--overwrite").exit_code == 0
