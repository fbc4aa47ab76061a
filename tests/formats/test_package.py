""".mlpackage manifest reading, path-escape rejection, atomic package and file writes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from converter.errors import FormatError
from converter.formats import package as pkgmod
from converter.formats.blob import BlobReader, BlobWriter
from converter.formats.package import (
    COREML_AUTHOR,
    WEIGHT_FILE_REF,
    atomic_write_bytes,
    is_mlpackage,
    read_package,
    write_package,
)
from tests.conftest import MODELS

SHARED_PACKAGES = sorted(MODELS.rglob("*.mlpackage")) if MODELS.is_dir() else []
UUID = re.compile(r"[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}")
MODEL_ID = "11111111-1111-4111-8111-111111111111"
WEIGHTS_ID = "22222222-2222-4222-8222-222222222222"


def _weights(values=(1.0, 2.0, 3.0) * 5):
    def write(weights_dir: Path) -> None:
        with BlobWriter(weights_dir / "weight.bin") as w:
            w.write(np.asarray(values, np.float32), "fp32")

    return write


def _listing(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))
    }


def _hand_made(tmp_path: Path, model_path="com.apple.CoreML/model.mlmodel", **manifest) -> Path:
    """A package with a model file, a weights dir and a manifest we control."""
    root = tmp_path / "M.mlpackage"
    (root / "Data/com.apple.CoreML/weights").mkdir(parents=True)
    (root / "Data/com.apple.CoreML/model.mlmodel").write_bytes(b"model")
    doc = {
        "fileFormatVersion": "1.0.0",
        "itemInfoEntries": {
            MODEL_ID: {"author": COREML_AUTHOR, "description": "spec", "name": "model.mlmodel", "path": model_path},
            WEIGHTS_ID: {"author": COREML_AUTHOR, "description": "w", "name": "weights", "path": "com.apple.CoreML/weights"},
        },
        "rootModelIdentifier": MODEL_ID,
    }
    doc.update(manifest)
    (root / "Manifest.json").write_text(json.dumps(doc))
    return root


def _assert_names(err: FormatError, root: Path, field_fragment: str) -> None:
    assert err.file == str(root / "Manifest.json")
    assert str(root / "Manifest.json") in str(err)
    assert field_fragment in (err.field or ""), err.field
    assert field_fragment in str(err)


# ---------------------------------------------------------------------------------------------
# Reading


def test_shared_packages_exist(shared_dir):
    assert len(SHARED_PACKAGES) >= 5, f"expected the shared .mlpackage models under {MODELS}"


@pytest.mark.parametrize("path", SHARED_PACKAGES, ids=lambda p: str(p.relative_to(MODELS)))
def test_shared_packages_parse(path: Path):
    assert is_mlpackage(path)
    pkg = read_package(path)
    manifest = json.loads((path / "Manifest.json").read_text())
    assert pkg.file_format_version == manifest["fileFormatVersion"] == "1.0.0"
    assert pkg.root_identifier == manifest["rootModelIdentifier"]
    assert set(pkg.items) == set(manifest["itemInfoEntries"])
    assert pkg.model_path == (path / "Data/com.apple.CoreML/model.mlmodel").resolve()
    assert pkg.read_model_bytes()[:1]  # non-empty proto
    assert pkg.weights_dir == (path / "Data/com.apple.CoreML/weights").resolve()
    weight_file = pkg.resolve_blob_file(WEIGHT_FILE_REF)
    assert weight_file == pkg.weights_dir / "weight.bin"
    with BlobReader(weight_file) as r:
        assert len(r) > 0


def test_newer_major_version_rejected(tmp_path):
    root = _hand_made(tmp_path, fileFormatVersion="2.0.0")
    with pytest.raises(FormatError, match="fileFormatVersion 2.0.0 is newer") as e:
        read_package(root)
    _assert_names(e.value, root, "fileFormatVersion")


def test_newer_minor_version_accepted(tmp_path):
    assert read_package(_hand_made(tmp_path, fileFormatVersion="1.3.7")).file_format_version == "1.3.7"


@pytest.mark.parametrize("version", ["1.0", "1.0.0.0", "v1.0.0", "", 1, None])
def test_malformed_version_rejected(tmp_path, version):
    root = _hand_made(tmp_path, fileFormatVersion=version)
    with pytest.raises(FormatError, match="major.minor.patch") as e:
        read_package(root)
    _assert_names(e.value, root, "fileFormatVersion")


@pytest.mark.parametrize(
    "bad_path,message",
    [
        ("../x", "'..' in path"),
        ("com.apple.CoreML/../../x", "'..' in path"),
        ("/etc/passwd", "absolute path"),
        ("C:/Windows/x", "absolute path"),
        ("..\\x", "backslash"),
        ("", "empty path"),
    ],
)
def test_escaping_item_path_rejected(tmp_path, bad_path, message):
    outside = tmp_path / "x"
    outside.write_bytes(b"secret")
    root = _hand_made(tmp_path, model_path=bad_path)
    with pytest.raises(FormatError, match=re.escape(message)) as e:
        read_package(root)
    _assert_names(e.value, root, f"itemInfoEntries.{MODEL_ID}.path")


def test_symlink_out_of_package_rejected(tmp_path):
    outside = tmp_path / "outside.mlmodel"
    outside.write_bytes(b"secret")
    root = _hand_made(tmp_path)
    model = root / "Data/com.apple.CoreML/model.mlmodel"
    model.unlink()
    model.symlink_to(outside)
    with pytest.raises(FormatError, match="outside the package") as e:
        read_package(root)
    _assert_names(e.value, root, f"itemInfoEntries.{MODEL_ID}.path")


def test_symlinked_data_dir_out_of_package_rejected(tmp_path):
    root = _hand_made(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (root / "Data").rename(elsewhere)
    (root / "Data").symlink_to(elsewhere)
    with pytest.raises(FormatError, match="outside the package") as e:
        read_package(root)
    assert "itemInfoEntries." in e.value.field


def test_symlinked_manifest_out_of_package_rejected(tmp_path):
    root = _hand_made(tmp_path)
    (root / "Manifest.json").rename(tmp_path / "Manifest.json")
    (root / "Manifest.json").symlink_to(tmp_path / "Manifest.json")
    with pytest.raises(FormatError, match="outside the package"):
        read_package(root)


def test_symlink_inside_package_and_symlinked_package_accepted(tmp_path):
    root = _hand_made(tmp_path)
    model = root / "Data/com.apple.CoreML/model.mlmodel"
    model.rename(root / "Data/real.mlmodel")
    model.symlink_to(Path("../real.mlmodel"))
    link = tmp_path / "Link.mlpackage"
    link.symlink_to(root)
    pkg = read_package(link)
    assert pkg.read_model_bytes() == b"model"
    assert pkg.model_path == (root / "Data/real.mlmodel").resolve()


@pytest.mark.parametrize(
    "file_name,message",
    [
        ("weights/weight.bin", "must start with '@model_path/'"),
        ("@model_path/../../../x", "'..' in path"),
        ("@model_path//etc/passwd", "absolute path"),
    ],
)
def test_escaping_blob_file_name_rejected(tmp_path, file_name, message):
    pkg = read_package(_hand_made(tmp_path))
    with pytest.raises(FormatError, match=re.escape(message)) as e:
        pkg.resolve_blob_file(file_name)
    assert e.value.file == str(pkg.model_path) and e.value.field == "blobFileValue.fileName"


@pytest.mark.parametrize(
    "change,message,field",
    [
        ({"rootModelIdentifier": "nope"}, "names no item", "rootModelIdentifier"),
        ({"rootModelIdentifier": WEIGHTS_ID}, "is not a regular file: it is a directory", "rootModelIdentifier"),
        ({"itemInfoEntries": []}, "must be a JSON object", "itemInfoEntries"),
        ({"itemInfoEntries": {MODEL_ID: "x"}}, "must be a JSON object", f"itemInfoEntries.{MODEL_ID}"),
        ({"itemInfoEntries": {MODEL_ID: {"path": 3}}}, "'path' must be a string", f"itemInfoEntries.{MODEL_ID}"),
        ({"itemInfoEntries": {MODEL_ID: {"path": "com.apple.CoreML/gone"}}}, "does not exist", MODEL_ID),
    ],
)
def test_inconsistent_manifest_rejected(tmp_path, change, message, field):
    root = _hand_made(tmp_path, **change)
    with pytest.raises(FormatError, match=message) as e:
        read_package(root)
    _assert_names(e.value, root, field)


def test_invalid_json_and_missing_manifest(tmp_path):
    root = _hand_made(tmp_path)
    (root / "Manifest.json").write_text('{"fileFormatVersion": "1.0.0",,}')
    with pytest.raises(FormatError, match=r"invalid JSON: .*line 1, column 31") as e:
        read_package(root)
    assert e.value.offset == 30 and e.value.file == str(root / "Manifest.json")
    (root / "Manifest.json").unlink()
    with pytest.raises(FormatError, match="missing Manifest.json"):
        read_package(root)
    with pytest.raises(FormatError, match="not an .mlpackage directory"):
        read_package(tmp_path / "nothing.mlpackage")


# ---------------------------------------------------------------------------------------------
# Writing


def test_write_then_read(tmp_path):
    dest = tmp_path / "Out.mlpackage"
    assert write_package(dest, b"proto bytes", _weights()) == dest
    assert sorted(os.listdir(tmp_path)) == ["Out.mlpackage"]
    manifest = json.loads((dest / "Manifest.json").read_text())
    assert manifest["fileFormatVersion"] == "1.0.0"
    entries = manifest["itemInfoEntries"]
    assert all(UUID.fullmatch(k) for k in entries)
    assert sorted((e["path"], e["name"], e["author"]) for e in entries.values()) == [
        ("com.apple.CoreML/model.mlmodel", "model.mlmodel", COREML_AUTHOR),
        ("com.apple.CoreML/weights", "weights", COREML_AUTHOR),
    ]
    pkg = read_package(dest)
    assert entries[pkg.root_identifier]["path"] == "com.apple.CoreML/model.mlmodel"
    assert pkg.read_model_bytes() == b"proto bytes"
    with BlobReader(pkg.resolve_blob_file(WEIGHT_FILE_REF)) as r:
        np.testing.assert_array_equal(r.read(64), np.asarray((1.0, 2.0, 3.0) * 5, np.float32))


def test_coremltools_reads_our_package(tmp_path):
    try:
        from coremltools.libmodelpackage import ModelPackage
    except ImportError:  # pragma: no cover - coremltools is a test dependency
        pytest.skip("coremltools is not installed")
    dest = tmp_path / "Out.mlpackage"
    write_package(dest, b"proto bytes", _weights())
    assert ModelPackage.isValid(str(dest))
    root = ModelPackage(str(dest)).getRootModel()
    assert Path(root.path()).read_bytes() == b"proto bytes"
    # coremltools finds the weights by (name, author) (models/utils.py _try_get_weights_dir_path):
    # why our items keep the author com.apple.CoreML.
    weights = ModelPackage(str(dest)).findItemByNameAuthor("weights", COREML_AUTHOR)
    assert Path(weights.path()).resolve() == read_package(dest).weights_dir


def test_model_bytes_callable_runs_after_weights(tmp_path):
    calls = []

    def weights(d: Path) -> None:
        calls.append("weights")
        _weights()(d)

    def model() -> bytes:
        calls.append("model")
        return b"late"

    write_package(tmp_path / "M.mlpackage", model, weights)
    assert calls == ["weights", "model"]
    assert read_package(tmp_path / "M.mlpackage").read_model_bytes() == b"late"


def test_write_without_weights(tmp_path):
    dest = write_package(tmp_path / "M.mlpackage", b"nn", None)
    pkg = read_package(dest)
    assert len(pkg.items) == 1 and pkg.weights_dir is None
    assert not (dest / "Data/com.apple.CoreML/weights").exists()


def test_overwrite_replaces_existing(tmp_path):
    dest = tmp_path / "M.mlpackage"
    write_package(dest, b"old", _weights())
    write_package(dest, b"new", _weights((7.0,) * 12))
    assert read_package(dest).read_model_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["M.mlpackage"]
    with pytest.raises(FileExistsError):
        write_package(dest, b"newer", None, overwrite=False)
    assert read_package(dest).read_model_bytes() == b"new"


@pytest.mark.parametrize("where", ["weights", "model"])
def test_interrupted_write_leaves_nothing_and_keeps_existing(tmp_path, where):
    def failing_weights(d: Path) -> None:
        with BlobWriter(d / "weight.bin") as w:
            w.write(np.ones(20, np.float32), "fp32")
        raise RuntimeError("interrupted")

    def failing_model() -> bytes:
        raise RuntimeError("interrupted")

    args = (b"x", failing_weights) if where == "weights" else (failing_model, _weights())
    dest = tmp_path / "M.mlpackage"
    with pytest.raises(RuntimeError, match="interrupted"):
        write_package(dest, *args)
    assert os.listdir(tmp_path) == []  # no partial package, no temporary left behind

    write_package(dest, b"keep me", _weights())
    before = _listing(dest)
    with pytest.raises(RuntimeError, match="interrupted"):
        write_package(dest, *args)
    assert _listing(dest) == before
    assert os.listdir(tmp_path) == ["M.mlpackage"]


def test_failed_final_rename_restores_existing(tmp_path, monkeypatch):
    dest = tmp_path / "M.mlpackage"
    write_package(dest, b"keep me", _weights())
    before = _listing(dest)
    real_rename = os.rename

    def rename(src, dst):
        if Path(src).name.endswith(".tmp") and Path(dst) == dest:
            raise OSError("simulated failure")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="simulated failure"):
        write_package(dest, b"new", _weights())
    monkeypatch.undo()
    assert _listing(dest) == before
    assert os.listdir(tmp_path) == ["M.mlpackage"]


def test_atomic_write_bytes(tmp_path):
    path = tmp_path / "m.mlmodel"
    assert atomic_write_bytes(path, b"one") == path
    atomic_write_bytes(path, memoryview(b"two"))
    assert path.read_bytes() == b"two"
    with pytest.raises(TypeError):
        atomic_write_bytes(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"two"
    assert os.listdir(tmp_path) == ["m.mlmodel"]
    assert pkgmod.atomic_write_bytes is atomic_write_bytes


@pytest.mark.parametrize("durable", [False, True])
def test_directory_fsyncs_only_when_durable(tmp_path, monkeypatch, durable):
    """A non-durable save fsyncs nothing (the data is not fsynced, so syncing the renames buys no
    safety and costs a disk wait per directory); a durable one syncs each directory it renames into."""
    from converter.formats import atomic

    synced: list[str] = []
    monkeypatch.setattr(atomic, "fsync_dir", lambda d: synced.append(str(d)))
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(f"fd {fd}"))

    def weights(d: Path) -> None:
        with BlobWriter(d / "weight.bin", durable=durable) as w:
            w.write(np.arange(64, dtype=np.float32), "fp32")

    write_package(tmp_path / "m.mlpackage", b"model", weights, durable=durable)
    assert (tmp_path / "m.mlpackage" / "Data").is_dir()
    if durable:
        assert str(tmp_path) in synced  # the package's rename into place
    else:
        assert synced == []
