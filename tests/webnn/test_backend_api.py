"""The WebNN backend's library and command-line surface, without a browser: what the folder holds,
where it may be written (never over the user's files, never partially), static shapes, and one
error listing every op that has no WebNN form."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import converter
from cli import main as cli_main
from converter.destination import DestinationError
from converter.errors import UnsupportedError
from converter.ir.builder import new_program
from converter.ir.types import Symbol, tensor

from ..conftest import MODELS
from .browser_client import module_features

CNN = MODELS / "builder" / "cnn_conv_pool_fc.mlmodel"
FILES = {"model.js", "model.bin", "model.d.ts", "index.html"}


def _mlp_program():
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10

    def body(b, x):
        return [b.relu(x=b.linear(x=x, weight=w, bias=np.ones(3, np.float32)), name="y")]

    return new_program({"x": tensor("fp32", [2, 4])}, body)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_folder_holds_the_four_files_with_16_byte_aligned_constants(tmp_path: Path) -> None:
    out = tmp_path / "web"
    converter.convert(CNN, to="webnn", out=out)
    assert {p.name for p in out.iterdir()} == FILES
    js = (out / "model.js").read_text()
    offsets = [int(m) for m in re.findall(r"constant\(builder, weights, \"\w+\", \[[\d, ]*\], (\d+)\)", js)]
    assert offsets and all(o % 16 == 0 for o in offsets)
    assert (out / "model.bin").stat().st_size % 16 == 0
    assert max(offsets) < (out / "model.bin").stat().st_size
    # one builder call per line, each with the source op's name in a comment
    calls = [line for line in js.splitlines() if "= builder." in line and "builder.input" not in line]
    assert calls and all(re.search(r"// \w+ \S", line) for line in calls)
    assert "compute(" not in js and "dimensions" not in js  # the current API only
    assert _leftovers(tmp_path) == []


def test_existing_folders_are_never_overwritten_without_being_asked(tmp_path: Path) -> None:
    out = tmp_path / "web"
    out.mkdir()
    converter.convert(CNN, to="webnn", out=out, layout="nchw")  # an empty folder is filled
    before = (out / "model.js").read_bytes()
    with pytest.raises(DestinationError, match="already exists"):
        converter.convert(CNN, to="webnn", out=out, layout="nhwc")
    assert (out / "model.js").read_bytes() == before
    converter.convert(CNN, to="webnn", out=out, layout="nhwc", overwrite=True)  # only our own files: replaced
    assert (out / "model.js").read_bytes() != before
    (out / "notes.txt").write_text("mine")
    with pytest.raises(DestinationError, match="notes.txt"):
        converter.convert(CNN, to="webnn", out=out, overwrite=True)
    assert (out / "notes.txt").read_text() == "mine"
    file_there = tmp_path / "file"
    file_there.write_text("x")
    with pytest.raises(DestinationError, match="not a folder"):
        converter.convert(CNN, to="webnn", out=file_there, overwrite=True)
    assert _leftovers(tmp_path) == []


def test_the_source_is_never_the_destination(tmp_path: Path) -> None:
    pkg = converter.save(_mlp_program(), tmp_path / "m.mlpackage")
    prog = converter.load(pkg)
    with pytest.raises(DestinationError, match="source"):
        converter.convert(prog, to="webnn", out=pkg, overwrite=True)
    assert converter.load(pkg) is not None


def test_every_op_without_a_webnn_form_is_listed_in_one_error_and_nothing_is_written(tmp_path: Path) -> None:
    def body(b, x):
        a = b.random_normal(shape=np.array([2, 4], np.int32), name="noise")
        n = b.non_zero(x=x, name="where_nonzero")
        return [b.add(x=x, y=a, name="sum"), n]

    prog = new_program({"x": tensor("fp32", [2, 4])}, body)
    with pytest.raises(UnsupportedError) as info:
        converter.convert(prog, to="webnn", out=tmp_path / "web", passes="none")
    message = str(info.value)
    assert "2 ops have no WebNN form" in message
    assert "random_normal 'noise'" in message and "non_zero 'where_nonzero'" in message
    assert not (tmp_path / "web").exists() and _leftovers(tmp_path) == []


def test_flexible_inputs_take_the_declared_default_or_the_given_shape(tmp_path: Path) -> None:
    flexible = MODELS / "builder" / "flexible_shape_range.mlmodel"
    converter.convert(flexible, to="webnn", out=tmp_path / "default")
    assert module_features(tmp_path / "default")["x"]["shape"] == [3, 8, 8]  # the model's default shape
    converter.convert(flexible, to="webnn", out=tmp_path / "given", input_shapes={"x": [3, 16, 20]})
    assert module_features(tmp_path / "given")["x"]["shape"] == [3, 16, 20]
    with pytest.raises(UnsupportedError, match="no input"):
        converter.convert(flexible, to="webnn", out=tmp_path / "bad", input_shapes={"y": [3, 8, 8]})

    def body(b, x):
        return [b.relu(x=x)]

    prog = new_program({"x": tensor("fp32", [Symbol("n"), 4])}, body)
    with pytest.raises(UnsupportedError, match=r"input 'x' has a flexible shape .* --input-shape x="):
        converter.convert(prog, to="webnn", out=tmp_path / "none")
    converter.convert(prog, to="webnn", out=tmp_path / "fixed", input_shapes={"x": [5, 4]})
    assert module_features(tmp_path / "fixed", "outputs")
    assert module_features(tmp_path / "fixed")["x"]["shape"] == [5, 4]


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="layout"):
        converter.convert(CNN, to="webnn", out=tmp_path / "a", layout="chwn")
    with pytest.raises(UnsupportedError, match="precision"):
        converter.convert(CNN, to="webnn", out=tmp_path / "b", precision="int8")
    with pytest.raises(UnsupportedError, match="webnn only"):
        converter.convert(CNN, to="mil", out=tmp_path / "c.mlpackage", layout="nhwc")


def test_precision_fp16_stores_half_the_weight_bytes_and_keeps_float32_features(tmp_path: Path) -> None:
    converter.convert(CNN, to="webnn", out=tmp_path / "fp32")
    converter.convert(CNN, to="webnn", out=tmp_path / "fp16", precision="fp16")
    size32, size16 = ((tmp_path / d / "model.bin").stat().st_size for d in ("fp32", "fp16"))
    assert size16 < 0.6 * size32
    for which in ("inputs", "outputs"):
        assert module_features(tmp_path / "fp16", which) == module_features(tmp_path / "fp32", which)
    assert '"float16"' in (tmp_path / "fp16" / "model.js").read_text()


def test_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "web"
    r = runner.invoke(cli_main, ["convert", str(CNN), "-o", str(out), "--to", "webnn", "--layout", "nhwc",
                                 "--precision", "fp16"])
    assert r.exit_code == 0, r.output
    assert {p.name for p in out.iterdir()} == FILES
    r = runner.invoke(cli_main, ["convert", str(CNN), "-o", str(tmp_path / "w2"), "--to", "webnn", "--check"])
    assert r.exit_code == 2 and "browser" in r.output
    r = runner.invoke(cli_main, ["convert", str(CNN), "-o", str(tmp_path / "w3"), "--to", "webnn",
                                 "--input-shape", "image"])
    assert r.exit_code == 2 and "NAME=D1,D2" in r.output
    r = runner.invoke(cli_main, ["convert", str(MODELS / "builder" / "flexible_shape_range.mlmodel"), "-o",
                                 str(tmp_path / "w4"), "--to", "webnn", "--input-shape", "x=3,12,9"])
    assert r.exit_code == 0, r.output
    assert module_features(tmp_path / "w4")["x"]["shape"] == [3, 12, 9]
    r = runner.invoke(cli_main, ["convert", str(CNN), "-o", str(tmp_path / "m.mlpackage"), "--layout", "nhwc"])
    assert r.exit_code == 2 and "--to webnn" in r.output


def test_an_input_no_output_reads_is_left_out_of_the_graph_with_a_note(tmp_path: Path,
                                                                       recwarn: pytest.WarningsRecorder) -> None:
    def body(b, x, unused):
        return [b.relu(x=x, name="y")]

    prog = new_program({"x": tensor("fp32", [2]), "unused": tensor("fp32", [3])}, body)
    converter.convert(prog, to="webnn", out=tmp_path / "web")
    assert list(module_features(tmp_path / "web")) == ["x"]
    assert any("'unused'" in str(w.message) for w in recwarn)


def test_identical_constants_are_stored_once_and_distinct_ones_of_one_size_apart(tmp_path: Path) -> None:
    from converter.backends.webnn.weights import WeightFile

    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = a.copy()
    b[32, 5] += 1.0  # differs only between the sampled regions' neighbours
    c = a.copy()
    f = tmp_path / "w.bin"
    with open(f, "w+b") as fh:
        w = WeightFile(fh)
        offsets = [w.add(a), w.add(b), w.add(c), w.add(a.astype(np.float16)), w.add(np.ones(3, np.int32))]
    assert offsets[0] == offsets[2] != offsets[1]
    assert all(o % 16 == 0 for o in offsets)
    data = f.read_bytes()
    for arr, off in zip([a, b, c], offsets[:3]):
        assert data[off:off + arr.nbytes] == arr.tobytes()
    assert w.count == 4 and len(data) == w.size
