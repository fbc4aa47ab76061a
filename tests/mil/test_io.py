"""Issue 3, writing MIL programs: atomic saves, untouched inputs, single-file .mlmodel output,
saving over the package a program was loaded from, and state updates in and out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.backends import mil as mil_backend
from converter.errors import ConverterError, FormatError, UnsupportedError
from converter.formats.proto import Model_pb2
from converter.ir.builder import new_program
from converter.ir.runtime import StateCell
from converter.ir.text import print_program
from converter.ir.types import StateType, tensor

from .helpers import (
    MLPROGRAM_PACKAGES,
    TORCH,
    assert_same_program,
    model_id,
    multifunction_program,
    random_feeds,
    same_bits,
    tree_digest,
)


def _small_program():
    """No constant large enough for the weight file."""

    def body(b, x):
        y = b.mul(x=x, y=np.float32(2.0), name="twice")
        return [b.softmax(x=b.add(x=y, y=np.array([1.0, -1.0, 0.5], np.float32), name="shifted"), axis=-1,
                          name="probs")]

    return new_program({"x": tensor("fp32", [2, 3])}, body)


def _weighty_program():
    def body(b, x):
        return [b.linear(x=x, weight=np.arange(48, dtype=np.float32).reshape(6, 8), name="y")]

    return new_program({"x": tensor("fp32", [2, 8])}, body)


def _unwritable_program():
    """Valid IR whose interface Core ML cannot describe (a bool output): saving fails late, after
    the weights were written."""

    def body(b, x):
        y = b.linear(x=x, weight=np.ones((6, 8), np.float32), name="y")
        return [y, b.greater(x=y, y=np.float32(0.0), name="positive")]

    return new_program({"x": tensor("fp32", [2, 8])}, body)


def _listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ---------------------------------------------------------------------------------------------
# atomic writes


@pytest.mark.parametrize("suffix", [".mlpackage", ".mlmodel"])
def test_failing_save_leaves_nothing(tmp_path: Path, suffix: str):
    out = tmp_path / f"out{suffix}"
    with pytest.raises(UnsupportedError, match="feature 'positive': Core ML multiArray features cannot hold bool") as e:
        converter.save(_unwritable_program(), out)
    assert e.value.file == str(out)
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("suffix", [".mlpackage", ".mlmodel"])
def test_failing_save_keeps_existing_output(tmp_path: Path, suffix: str):
    out = converter.save(_small_program(), tmp_path / f"out{suffix}")
    before, listing = tree_digest(tmp_path), _listing(tmp_path)
    with pytest.raises(UnsupportedError):
        converter.save(_unwritable_program(), out, overwrite=True)
    assert tree_digest(tmp_path) == before and _listing(tmp_path) == listing
    assert print_program(converter.load(out)) == print_program(_small_program())


def test_save_failing_while_writing_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An I/O error in the middle of the weight file (disk full): a FormatError naming the output,
    nothing left behind, the existing package intact."""
    out = converter.save(_weighty_program(), tmp_path / "out.mlpackage")
    before, listing = tree_digest(tmp_path), _listing(tmp_path)

    def disk_full(self, array, dtype_name):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mil_backend.BlobWriter, "write", disk_full)
    with pytest.raises(FormatError, match="No space left on device") as e:
        converter.save(_weighty_program(), out, overwrite=True)
    assert e.value.file == str(out)
    assert tree_digest(tmp_path) == before and _listing(tmp_path) == listing


def test_target_without_the_op_fails_before_writing(tmp_path: Path):
    prog = new_program({"x": tensor("fp32", [1, 4, 8])},
                       lambda b, x: [b.scaled_dot_product_attention(query=x, key=x, value=x, name="att")],
                       opset="iOS18")
    out = tmp_path / "out.mlpackage"
    with pytest.raises(UnsupportedError, match="cannot target iOS15: op 'scaled_dot_product_attention' is not "
                                               "available in opset iOS15 \\(first in iOS18\\) \\(1 op: 'att'\\)"):
        converter.save(prog, out, target="iOS15")
    assert _listing(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# inputs are read, never written


@pytest.mark.parametrize("path", MLPROGRAM_PACKAGES, ids=model_id)
def test_source_package_is_not_modified(path: Path, tmp_path: Path):
    def digest() -> tuple[str, list[int]]:
        return tree_digest(path), [p.stat().st_mtime_ns for p in sorted(path.rglob("*"))]

    before = digest()
    prog = converter.load(path)
    converter.run(prog, random_feeds(prog))
    converter.save(prog, tmp_path / "copy.mlpackage")
    converter.save(prog, tmp_path / "copy.mlmodel")
    del prog
    assert digest() == before


def test_save_over_the_loaded_package_is_refused(tmp_path: Path):
    """Saving a program over the package its weights are mapped from is refused, even with
    ``overwrite=True`` (the source is never written); the package stays as it was and still runs."""
    src = shutil.copytree(TORCH / "cnn_bn_mlprogram.mlpackage", tmp_path / "m.mlpackage")
    before = tree_digest(tmp_path)
    prog = converter.load(src)
    feeds = random_feeds(prog)
    expected = converter.run(prog, feeds)
    for overwrite in (False, True):
        with pytest.raises(converter.DestinationError, match="the output would replace the source"):
            converter.save(prog, src, overwrite=overwrite)
    assert tree_digest(tmp_path) == before
    out = converter.run(converter.load(src), feeds)
    assert all(same_bits(expected[k], out[k]) for k in expected)


# ---------------------------------------------------------------------------------------------
# single-file .mlmodel output


def test_mlmodel_single_file_round_trip(tmp_path: Path):
    prog = _small_program()
    out = converter.save(prog, tmp_path / "small.mlmodel")
    assert out.is_file() and _listing(tmp_path) == ["small.mlmodel"]
    m = Model_pb2.Model()
    m.ParseFromString(out.read_bytes())
    assert m.WhichOneof("Type") == "mlProgram" and m.specificationVersion == 6
    again = converter.load(out)
    assert print_program(again) == print_program(prog)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}
    a, b = converter.run(prog, feeds), converter.run(again, feeds)
    assert same_bits(a["probs"], b["probs"])
    # and back to a package, identically
    pkg = converter.save(again, tmp_path / "small.mlpackage")
    assert print_program(converter.load(pkg)) == print_program(prog)


def test_mlmodel_single_file_from_a_package_with_weights(tmp_path: Path):
    """A package's blob weights become immediate values in a single file, bit for bit."""
    prog = converter.load(TORCH / "mlp_mlprogram_fp16.mlpackage")
    out = converter.save(prog, tmp_path / "mlp.mlmodel")
    assert _listing(tmp_path) == ["mlp.mlmodel"]
    again = converter.load(out)
    assert_same_program(prog, again)
    feeds = random_feeds(prog)
    a, b = converter.run(prog, feeds), converter.run(again, feeds)
    assert all(same_bits(a[k], b[k]) for k in a)


def test_mlmodel_with_a_blob_reference_is_refused(tmp_path: Path):
    """A bare .mlmodel has no weights directory: a blob reference in it is a located error."""
    src = converter.save(_weighty_program(), tmp_path / "w.mlpackage")
    bare = tmp_path / "w.mlmodel"
    shutil.copy(src / "Data/com.apple.CoreML/model.mlmodel", bare)
    with pytest.raises(FormatError, match="a bare .mlmodel has no weights directory") as e:
        converter.load(bare)
    assert e.value.file == str(bare) and e.value.op == "y_weight" and e.value.function == "main"


# ---------------------------------------------------------------------------------------------
# states (iOS18): coreml_update_state <-> write_state + read_state


def _stateful_program(use_result: bool = True):
    def body(b, cache, x):
        old = b.read_state(input=cache, name="old")
        new = b.add(x=old, y=x, name="summed")
        updated = b.coreml_update_state(state=cache, value=new, name="update")
        return [b.mul(x=updated if use_result else new, y=np.float16(2.0), name="out")]

    return new_program({"cache": StateType(tensor("fp16", [2, 3])), "x": tensor("fp16", [2, 3])}, body,
                       opset="iOS18")


@pytest.mark.parametrize("use_result", [True, False], ids=["read-back", "write-only"])
def test_state_update_round_trip(tmp_path: Path, use_result: bool):
    prog = _stateful_program(use_result)
    out = converter.save(prog, tmp_path / "s.mlpackage")
    m = Model_pb2.Model()
    m.ParseFromString((out / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    fn = m.mlProgram.functions["main"]
    state_ops = [op.type for op in fn.block_specializations[fn.opset].operations if op.type.endswith("_state")]
    assert state_ops == ["read_state", "write_state", "read_state"] if use_result else ["read_state", "write_state"]
    assert m.specificationVersion == 9 and len(m.description.state) == 1
    again = converter.load(out)
    assert print_program(again) == print_program(prog)

    def run(p):
        cell = StateCell(np.full((2, 3), 1.0, np.float16))
        x = np.arange(6, dtype=np.float16).reshape(2, 3)
        return converter.run(p, {"cache": cell, "x": x})["out"], cell.value

    (a, sa), (b, sb) = run(prog), run(again)
    assert same_bits(a, b) and same_bits(sa, sb)
    assert same_bits(sb, np.arange(6, dtype=np.float16).reshape(2, 3) + np.float16(1.0))


def test_write_state_outside_ios18_is_refused(tmp_path: Path):
    prog = new_program({"cache": StateType(tensor("fp16", [2, 3])), "x": tensor("fp16", [2, 3])},
                       lambda b, cache, x: [b.coreml_update_state(state=cache, value=x, name="update")],
                       opset="iOS18")
    out = converter.save(prog, tmp_path / "s.mlpackage")
    m = Model_pb2.Model()
    path = out / "Data/com.apple.CoreML/model.mlmodel"
    m.ParseFromString(path.read_bytes())
    fn = m.mlProgram.functions["main"]
    fn.block_specializations["CoreML7"].CopyFrom(fn.block_specializations["CoreML8"])
    del fn.block_specializations["CoreML8"]
    fn.opset = "CoreML7"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(ConverterError) as e:
        converter.load(out)
    assert e.value.file == str(path) and e.value.function == "main" and e.value.op == "update_write_state"
    assert "write_state is not available in opset iOS17 (first in iOS18)" in str(e.value)


def test_no_temporaries_after_many_saves(tmp_path: Path):
    for _ in range(3):
        converter.save(_weighty_program(), tmp_path / "w.mlpackage", overwrite=True)
        converter.save(_small_program(), tmp_path / "s.mlmodel", overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["s.mlmodel", "w.mlpackage"]


# ---------------------------------------------------------------------------------------------
# several functions (iOS18)


def test_multifunction_round_trip(tmp_path: Path):
    prog = multifunction_program()
    out = converter.save(prog, tmp_path / "m.mlpackage")
    m = Model_pb2.Model()
    m.ParseFromString((out / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    assert m.specificationVersion == 9 and m.description.defaultFunctionName == "main"
    assert [f.name for f in m.description.functions] == ["main", "second"]
    again = converter.load(out)
    assert print_program(again) == print_program(prog)  # function order and default kept
    y = np.arange(4, dtype=np.float32)
    assert same_bits(converter.run(again, {"y": y}, function="second")["l"], np.full((1, 12), 6.0, np.float32))
