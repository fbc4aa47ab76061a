"""model.js's runtime functions in the real browser: run() reuses its tensors across calls yet keeps
overlapping calls apart, and build() refuses a model.bin that is not the one written with the module.

Oracle: numpy formulas written here (y = 2x + 1, z = x - 3 on each call's own input)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import converter
from converter.ir.builder import new_program
from converter.ir.types import TensorType, fp32

from .browser_client import WebnnBrowser

CALLS = 6

_PAGE = """<!doctype html><meta charset="utf-8"><script type="module">
const q = new URLSearchParams(location.search);
const mod = await import(new URL("model.js", q.get("model")).href);
const context = await navigator.ml.createContext({ deviceType: "cpu" });
const graph = await mod.load(context);
const feed = (k) => ({ x: Float32Array.from({ length: 12 }, (_, i) => i * 0.25 + k) });
// every call started before any finishes, then the same again one after the other
const together = await Promise.all(Array.from({ length: %(calls)d }, (_, k) => mod.run(context, graph, feed(k))));
const inTurn = [];
for (let k = 0; k < %(calls)d; k++) inTurn.push(await mod.run(context, graph, feed(k)));
const plain = (r) => ({ y: Array.from(r.y), z: Array.from(r.z) });
globalThis.__pageResult = { together: together.map(plain), inTurn: inTurn.map(plain) };
</script>"""

_WRONG_SIZE_PAGE = """<!doctype html><meta charset="utf-8"><script type="module">
const q = new URLSearchParams(location.search);
const mod = await import(new URL("model.js", q.get("model")).href);
const context = await navigator.ml.createContext({ deviceType: "cpu" });
const bytes = await (await fetch(new URL("model.bin", q.get("model")))).arrayBuffer();
const messages = [];
for (const weights of [bytes.slice(0, bytes.byteLength - 16), new ArrayBuffer(bytes.byteLength + 16), "model.bin"]) {
  try { await mod.build(context, weights); messages.push("built"); } catch (e) { messages.push(`${e.name}: ${e.message}`); }
}
globalThis.__pageResult = { messages, size: bytes.byteLength };
</script>"""


def _two_output_module(folder: Path) -> None:
    def body(b, x):
        w = np.full((3, 4), 2.0, np.float32)  # a constant, so model.bin is not empty
        return [b.add(x=b.mul(x=x, y=w, name="times2"), y=np.float32(1.0), name="y"),
                b.sub(x=x, y=np.float32(3.0), name="z")]

    prog = new_program([("x", TensorType(fp32, (3, 4)))], body)
    converter.convert(prog, to="webnn", out=folder, passes="none")


def test_overlapping_and_repeated_runs_each_get_their_own_results(webnn_browser: WebnnBrowser,
                                                                   tmp_path: Path) -> None:
    model = tmp_path / "model"
    _two_output_module(model)
    (tmp_path / "page.html").write_text(_PAGE % {"calls": CALLS})
    got = webnn_browser.open_page(tmp_path / "page.html", mounts={"model": model}).result
    for k in range(CALLS):
        x = np.arange(12, dtype=np.float32) * 0.25 + k
        for mode in ("together", "inTurn"):
            np.testing.assert_allclose(got[mode][k]["y"], 2 * x + 1, rtol=1e-6, err_msg=f"{mode} call {k}")
            np.testing.assert_allclose(got[mode][k]["z"], x - 3, rtol=1e-6, err_msg=f"{mode} call {k}")


def test_build_refuses_weights_of_another_size(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    model = tmp_path / "model"
    _two_output_module(model)
    (tmp_path / "page.html").write_text(_WRONG_SIZE_PAGE)
    got = webnn_browser.open_page(tmp_path / "page.html", mounts={"model": model}).result
    size = got["size"]
    assert size == (model / "model.bin").stat().st_size > 16
    short, long_, not_buffer = got["messages"]
    assert short == (f"Error: the weights have {size - 16} bytes; this model.js was written with a model.bin of "
                     f"{size} bytes (is it the model.bin written with it?)")
    assert f"the weights have {size + 16} bytes" in long_
    assert not_buffer == "TypeError: build(context, weights): weights must be the ArrayBuffer of model.bin"

