"""model.js -> recorder (Node) -> graph file -> IR.

Oracles: numpy formulas written from the WebNN spec (tests/webnn/test_browser_harness.py's formula
for the hand-written relu/add/nhwc-conv2d module, which the real browser also matches), and
coremltools loading the .mlpackage the CLI writes from a model.js.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.errors import FormatError, UnsupportedError
from converter.frontends.webnn.record import record_graph_file
from tests.webnn.test_browser_harness import _expected, _write_model

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

REPO = Path(__file__).resolve().parents[2]


def _module(tmp_path: Path, body: str, *, inputs: str = "{x: {dataType: 'float32', shape: [2, 3]}}") -> Path:
    """A model.js whose build() runs ``body`` with ``b`` (builder) and ``x`` (input 'x') in scope."""
    path = tmp_path / "model.js"
    path.write_text(f"""
export const inputs = {inputs};
export async function build(context, weights) {{
  const b = new MLGraphBuilder(context);
  const x = b.input("x", inputs.x);
  {body}
}}
""")
    return path


def test_hand_written_module_matches_the_numpy_formula(tmp_path: Path) -> None:
    consts = _write_model(tmp_path, np.random.default_rng(9))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2)).astype(np.float32)
    image = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    prog = converter.load(tmp_path / "model.js")
    assert [v.name for v in prog.main.inputs] == ["x", "image"]
    assert [v.name for v in prog.main.outputs] == ["y", "features"]
    out = converter.run(prog, {"x": x, "image": image})
    expected = _expected(consts, x, image)
    np.testing.assert_array_equal(out["y"], expected["y"].astype(np.float32))
    np.testing.assert_allclose(out["features"], expected["features"], rtol=1e-5, atol=1e-5)


def test_constants_are_views_of_the_recorded_weights(tmp_path: Path) -> None:
    _write_model(tmp_path, np.random.default_rng(9))
    prog = converter.load(tmp_path / "model.js")
    filt = next(op for op in prog.main.block.ops if op.type == "const" and op.outputs[0].type.shape == (3, 3, 3, 2))
    assert filt.attributes["val"].base is not None  # a view (of the memory-mapped .bin), not a copy


@pytest.mark.parametrize(("body", "needles"), [
    ("const w = b.constant({dataType: 'float32', shape: [1, 1, 1, 1]}, new Float32Array(1));\n"
     "  const y = b.conv2d(b.reshape(x, [1, 1, 2, 3]), w, {pads: [0, 0, 0, 0]});\n  return b.build({y});",
     ["conv2d", "options.pads", "unknown option"]),
    ("const w = b.constant({dataType: 'float32', shape: [1, 1, 1, 1]}, new Float32Array(1));\n"
     "  return b.build({y: b.conv2d(x, w)});", ["conv2d", "input", "rank 2 is not 4"]),
    ("const other = new MLGraphBuilder(context);\n  const z = other.input('z', inputs.x);\n"
     "  return b.build({y: b.add(x, z)});", ["add", "b:", "another MLGraphBuilder"]),
    ("return b.build({y: b.conv3d(x)});", ["conv3d", "not a function"]),
    ("return b.build({y: b.softmax(x, 2)});", ["softmax", "axis 2 is out of range"]),
    ("return b.build({y: b.cast(x, 'bool')});", ["cast", "dataType"]),
    ("return b.build({y: b.pad(x, [0], [0], {mode: 'symmetric'})});", ["pad", "options.mode"]),
    ("return b.build({y: b.input('w', {dataType: 'float32', dimensions: [2]})});", ["input", "dimensions"]),
    ("try { b.relu(x, {alpha: 1}); } catch (e) {}\n  return b.build({y: b.relu(x)});", ["relu", "options.alpha"]),
])
def test_invalid_calls_are_format_errors_naming_file_and_method(tmp_path: Path, body: str, needles: list[str]) -> None:
    path = _module(tmp_path, body)
    with pytest.raises(FormatError) as info:
        converter.load(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message


def test_a_module_that_throws_is_a_format_error(tmp_path: Path) -> None:
    path = _module(tmp_path, "throw new Error('no weights for you');")
    with pytest.raises(FormatError, match="build\\(\\) threw: no weights for you"):
        converter.load(path)


def test_a_module_that_never_returns_times_out(tmp_path: Path) -> None:
    path = _module(tmp_path, "await new Promise(() => setInterval(() => {}, 1000));")
    with pytest.raises(FormatError, match="did not finish building its graph within 2 s"):
        record_graph_file(path, tmp_path / "g.webnn.json", timeout_s=2)
    assert not (tmp_path / "g.webnn.json").exists()


def test_without_node_model_js_is_an_unsupported_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _module(tmp_path, "return b.build({y: b.relu(x)});")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UnsupportedError, match="needs Node.js"):
        converter.load(path)


def test_recorded_graph_file_loads_without_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    consts = _write_model(tmp_path, np.random.default_rng(9))
    record_graph_file(tmp_path / "model.js", tmp_path / "m.webnn.json")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    prog = converter.load(tmp_path / "m.webnn.json")
    x, image = np.ones((2, 2), np.float32), np.ones((1, 5, 5, 2), np.float32)
    np.testing.assert_allclose(converter.run(prog, {"x": x, "image": image})["features"],
                               _expected(consts, x, image)["features"], rtol=1e-5, atol=1e-5)


def test_cli_converts_model_js_to_an_mlpackage_coremltools_loads(tmp_path: Path) -> None:
    consts = _write_model(tmp_path, np.random.default_rng(9))
    out = tmp_path / "out.mlpackage"
    proc = subprocess.run([sys.executable, str(REPO / "cli.py"), "convert", str(tmp_path / "model.js"), "-o", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    from tests.mil.helpers import CoremltoolsLoader

    assert "conv" in CoremltoolsLoader.op_types(CoremltoolsLoader().load(out))
    rng = np.random.default_rng(2)
    x, image = rng.standard_normal((2, 2)).astype(np.float32), rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    got = converter.run(converter.load(out), {"x": x, "image": image})
    expected = _expected(consts, x, image)
    np.testing.assert_allclose(got["y"], expected["y"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["features"], expected["features"], rtol=1e-5, atol=1e-5)


def test_hostile_names_are_kept(tmp_path: Path) -> None:
    name = "a'\"\\</script>\u2028\n" + "x" * 10_000
    path = tmp_path / "model.js"
    path.write_text(f"""
export async function build(context) {{
  const b = new MLGraphBuilder(context);
  const x = b.input({name!r}, {{dataType: 'float32', shape: [2]}});
  return b.build({{[{name[::-1]!r}]: b.relu(x)}});
}}
""")
    prog = converter.load(path)
    assert prog.main.inputs[0].name == name
    assert prog.main.outputs[0].name == name[::-1]


def test_constant_forms(tmp_path: Path) -> None:
    """constant(dataType, value) scalars (float16 encoded by the recorder, int64 from a BigInt), a
    typed-array view with a byte offset into model.bin, and a bare ArrayBuffer."""
    (tmp_path / "model.bin").write_bytes(bytes(8) + np.array([1, 2, 3, 4, 5, 6], np.float32).tobytes())
    path = _module(tmp_path, """
  const w = b.constant({dataType: 'float32', shape: [2, 3]}, new Float32Array(weights, 8, 6));
  const raw = b.constant({dataType: 'float32', shape: [2, 3]}, weights.slice(8));
  const h = b.cast(b.constant('float16', 1.5), 'float32');
  const i = b.add(b.cast(x, 'int64'), b.constant('int64', 5n));
  return b.build({y: b.add(b.add(x, w), b.mul(raw, h)), i});""")
    prog = converter.load(path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = converter.run(prog, {"x": x})
    w = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(out["y"], x + w + w * 1.5)
    np.testing.assert_array_equal(out["i"], x.astype(np.int32) + 5)


def test_a_module_printing_without_bound_keeps_only_the_last_error(tmp_path: Path) -> None:
    path = _module(tmp_path, "for (let i = 0; i < 20000; i++) console.error('x'.repeat(100));\n"
                             "  throw new Error('the real problem');")
    with pytest.raises(FormatError, match="the real problem"):
        converter.load(path)


def test_float16_constants_from_float16array_views_and_numbers(tmp_path: Path) -> None:
    """Node 20 has no Float16Array: the recorder's stand-in keeps the bits of a view into model.bin
    and rounds numbers to float16."""
    half = np.array([0.1, -2.5, 65504, 1e-7], np.float16)
    (tmp_path / "model.bin").write_bytes(half.tobytes())
    path = _module(tmp_path, """
  const a = b.constant({dataType: 'float16', shape: [4]}, new Float16Array(weights, 0, 4));
  const c = b.constant({dataType: 'float16', shape: [4]}, new Float16Array([0.1, -2.5, 65504, 1e-7]));
  return b.build({y: b.add(x, a), z: b.add(x, c)});""", inputs="{x: {dataType: 'float16', shape: [4]}}")
    out = converter.run(converter.load(path), {"x": np.zeros(4, np.float16)})
    np.testing.assert_array_equal(out["y"].view(np.uint16), half.view(np.uint16))
    np.testing.assert_array_equal(out["z"].view(np.uint16), half.view(np.uint16))


def test_the_module_is_confined_to_its_folder(tmp_path: Path) -> None:
    """Under Node's permission model the module cannot write outside the recorder's output folder,
    read outside its own folder, or start processes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    folder = tmp_path / "model"
    folder.mkdir()
    path = _module(folder, f"""
  const fs = await import('node:fs');
  const cp = await import('node:child_process');
  const tries = [() => fs.writeFileSync({str(outside / 'pwned')!r}, 'x'), () => fs.readFileSync({str(outside / 'secret.txt')!r}),
                 () => cp.execSync('true')];
  const denied = tries.map((f) => {{ try {{ f(); return 'allowed'; }} catch (e) {{ return e.code; }} }});
  if (denied.some((d) => d !== 'ERR_ACCESS_DENIED')) throw new Error('not confined: ' + denied.join());
  return b.build({{y: b.relu(x)}});""")
    prog = converter.load(path)
    assert [v.name for v in prog.main.outputs] == ["y"]
    assert not (outside / "pwned").exists()
