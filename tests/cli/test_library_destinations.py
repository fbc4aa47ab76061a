"""Issue 7, data loss, from Python: `converter.save` and `converter.convert` follow the command
line's destination rules (converter/destination.py). By default nothing is replaced; with
``overwrite=True`` only a Core ML model is, and never the model a program was loaded from."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

import converter
from converter.formats import atomic
from converter.ir.builder import new_program
from converter.ir.types import tensor
from tests.cli.helpers import digest, temporaries
from tests.conftest import MODELS, REPO

TINY = REPO / "examples" / "tiny_classifier.mlmodel"
PACKAGE = MODELS / "torch" / "mlp_mlprogram.mlpackage"


def _built():
    return new_program({"x": tensor("fp32", [2])}, lambda b, x: [b.relu(x=x, name="y")])


@pytest.mark.parametrize("name", ["m.mlpackage", "m.mlmodel"])
def test_save_replaces_nothing_unless_asked(tmp_path: Path, name: str):
    out = converter.save(_built(), tmp_path / name)
    before = digest(out)
    with pytest.raises(converter.DestinationError, match="already exists; replace it with --overwrite") as e:
        converter.save(_built(), out)
    assert e.value.file == str(out) and isinstance(e.value, converter.ConverterError)
    assert digest(out) == before
    assert converter.save(_built(), out, overwrite=True) == out
    assert digest(out) != before and temporaries(tmp_path) == []


def test_save_with_overwrite_replaces_only_a_core_ml_model(tmp_path: Path):
    notes = tmp_path / "notes.mlmodel"
    notes.write_text("mine")
    with pytest.raises(converter.DestinationError, match="not replaced, even with --overwrite"):
        converter.save(_built(), notes, overwrite=True)
    assert notes.read_text() == "mine"


def test_save_into_a_folder_names_the_model_after_its_source(tmp_path: Path):
    prog = converter.load(Path(shutil.copy(TINY, tmp_path / "tiny.mlmodel")))
    out = tmp_path / "out"
    out.mkdir()
    assert converter.save(prog, out) == out / "tiny.mlpackage"
    with pytest.raises(converter.DestinationError, match=r"is a folder: name the model to write in it "
                                                         r"\(NAME.mlpackage or NAME.mlmodel\)"):
        converter.save(_built(), out)  # built in memory: no name to give it
    assert sorted(os.listdir(out)) == ["tiny.mlpackage"]


def test_save_never_writes_the_source(tmp_path: Path):
    src = Path(shutil.copytree(PACKAGE, tmp_path / "m.mlpackage"))
    before = digest(tmp_path)
    prog = converter.load(src)
    for dest in (src, src / "Data" / "x.mlpackage", tmp_path):
        with pytest.raises(converter.DestinationError, match=f"the source '{src}'"):
            converter.save(prog, dest, overwrite=True)
    with pytest.raises(converter.DestinationError, match=f"the source '{src}'"):
        converter.convert(src, out=src, overwrite=True)
    assert digest(tmp_path) == before


def test_save_refuses_an_extension_it_cannot_write(tmp_path: Path):
    with pytest.raises(converter.DestinationError, match=r"extension '\.onnx': --to mil writes \.mlpackage"):
        converter.save(_built(), tmp_path / "m.onnx")
    assert os.listdir(tmp_path) == []


def test_convert_refuses_before_reading_the_source(tmp_path: Path):
    junk = tmp_path / "junk.mlmodel"
    junk.write_bytes(b"\x07not a model")
    with pytest.raises(converter.DestinationError, match="extension"):
        converter.convert(junk, out=tmp_path / "x.onnx")  # the destination error, not the junk's


# -- the final rename never replaces what appeared after the check ----------------------------------


def test_publishing_without_overwrite_never_replaces(tmp_path: Path):
    dest = tmp_path / "f.bin"
    dest.write_bytes(b"mine")
    with pytest.raises(FileExistsError):
        atomic.atomic_write_bytes(dest, b"new", overwrite=False)
    folder = tmp_path / "p.mlpackage"
    folder.mkdir()
    (folder / "mine.txt").write_text("mine")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    with pytest.raises(FileExistsError):
        atomic.replace_path(tmp, folder, overwrite=False)
    assert dest.read_bytes() == b"mine" and (folder / "mine.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["f.bin", "p.mlpackage", "tmpdir"]


def test_an_interrupt_while_swapping_a_package_waits_for_the_swap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """SIGINT between "old package renamed aside" and "new one renamed in" is held back until the
    swap is done: the new package is in place and no ``.old`` copy is left behind."""
    old = converter.save(_built(), tmp_path / "m.mlpackage")
    rename = os.rename
    calls = []

    def rename_then_interrupt(a, b):
        rename(a, b)
        calls.append(b)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(atomic.os, "rename", rename_then_interrupt)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            converter.save(converter.load(PACKAGE), old, overwrite=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 2  # both renames happened before the interrupt was delivered
    assert temporaries(tmp_path) == [] and sorted(os.listdir(tmp_path)) == ["m.mlpackage"]
    assert [v.name for v in converter.load(old).main.inputs] == [v.name for v in converter.load(PACKAGE).main.inputs]
