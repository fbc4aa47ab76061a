"""Issue 9, point 3: the real-browser harness runs a hand-written WebNN module in Chromium 153's WebNN
(LiteRT/XNNPACK on CPU) and reports failures as messages, never hangs.

Oracle: numpy formulas written here from the WebNN spec (add + relu; conv2d over an explicitly padded
NHWC input with an ohwi filter), independent of the browser and of the converter."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from .browser_client import BrowserError, WebnnBrowser
from .conftest import require_browser_packages

PAGES = Path(__file__).resolve().parent / "pages"


def _write_model(folder: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Copies the hand-written module into `folder` and writes its model.bin (each constant at a
    16-byte aligned offset, as model.js declares)."""
    shutil.copy(PAGES / "relu_add_conv" / "model.js", folder / "model.js")
    consts = {
        "c": rng.standard_normal((2, 2)).astype(np.float32),
        "filter": rng.standard_normal((3, 3, 3, 2)).astype(np.float32),  # ohwi
        "bias": rng.standard_normal(3).astype(np.float32),
    }
    blob = bytearray(256)
    for name, offset in (("c", 0), ("filter", 16), ("bias", 240)):
        assert offset % 16 == 0
        data = consts[name].tobytes()
        blob[offset:offset + len(data)] = data
    (folder / "model.bin").write_bytes(bytes(blob))
    return consts


def _expected(consts: dict[str, np.ndarray], x: np.ndarray, image: np.ndarray) -> dict[str, np.ndarray]:
    y = np.maximum(x + consts["c"], 0)
    # conv2d, padding [top, bottom, left, right] = [1, 1, 0, 1], stride 1, NHWC input, ohwi filter.
    padded = np.pad(image.astype(np.float64), ((0, 0), (1, 1), (0, 1), (0, 0)))
    f = consts["filter"].astype(np.float64)
    out_h, out_w = padded.shape[1] - 2, padded.shape[2] - 2
    features = np.zeros((1, out_h, out_w, 3))
    for h in range(out_h):
        for w in range(out_w):
            window = padded[0, h:h + 3, w:w + 3, :]  # [kh, kw, i]
            features[0, h, w, :] = np.einsum("hwi,ohwi->o", window, f) + consts["bias"]
    return {"y": y, "features": features}


def test_relu_add_and_nhwc_conv2d_match_numpy(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    consts = _write_model(tmp_path, rng)
    x = rng.standard_normal((2, 2)).astype(np.float32)
    image = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    result = webnn_browser.run(tmp_path, {"x": x, "image": image})
    expected = _expected(consts, x, image)
    assert result.outputs["features"].shape == (1, 5, 4, 3)
    # add and relu are single float32 operations: exact.
    np.testing.assert_array_equal(result.outputs["y"], expected["y"].astype(np.float32))
    # 18-term float32 dot products in XNNPACK's order vs a float64 reference.
    np.testing.assert_allclose(result.outputs["features"], expected["features"], rtol=1e-5, atol=1e-5)
    assert result.build_ms >= 0 and len(result.run_ms) == 1


def test_load_fetches_model_bin_beside_the_module(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    consts = _write_model(tmp_path, rng)
    x = rng.standard_normal((2, 2)).astype(np.float32)
    image = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    result = webnn_browser.run(tmp_path, {"x": x, "image": image}, via="load", runs=3)
    expected = _expected(consts, x, image)
    np.testing.assert_array_equal(result.outputs["y"], expected["y"].astype(np.float32))
    np.testing.assert_allclose(result.outputs["features"], expected["features"], rtol=1e-5, atol=1e-5)
    assert len(result.run_ms) == 3


def test_a_module_error_is_reported_with_its_message(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    _write_model(tmp_path, np.random.default_rng(0))
    (tmp_path / "bad.js").write_text(
        "export const inputs = {}; export const outputs = {};\n"
        "export async function build(context) { const b = new MLGraphBuilder(context);\n"
        "  const x = b.input('x', {dataType: 'float32', shape: [2]});\n"
        "  return b.build({y: b.conv2d(x, x)}); }\n"
        "export async function load() {} export async function run() {}\n")
    with pytest.raises(BrowserError, match=r"TypeError.*\(at: build\)"):
        webnn_browser.run(tmp_path, {}, module="bad.js")
    with pytest.raises(BrowserError, match=r"no feed for input 'image'"):
        webnn_browser.run(tmp_path, {"x": np.zeros((2, 2), np.float32)})
    # The same browser still answers afterwards.
    assert webnn_browser.run(tmp_path, {"x": np.zeros((2, 2), np.float32),
                                        "image": np.zeros((1, 5, 5, 2), np.float32)}).outputs


def test_a_module_that_never_finishes_times_out(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    (tmp_path / "stuck.js").write_text(
        "export const inputs = {}; export const outputs = {};\n"
        "export function build() { return new Promise(() => {}); }\n"
        "export async function load() {} export async function run() {}\n")
    with pytest.raises(BrowserError, match=r"timed out after 1000 ms \(at: build\)"):
        webnn_browser.run(tmp_path, {}, module="stuck.js", timeout_s=1.0)
    _write_model(tmp_path, np.random.default_rng(0))
    assert webnn_browser.run(tmp_path, {"x": np.zeros((2, 2), np.float32),
                                        "image": np.zeros((1, 5, 5, 2), np.float32)}).outputs


def test_a_browser_without_webnn_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    """Launched without --enable-features=WebMachineLearningNeuralNetwork, navigator.ml is undefined."""
    require_browser_packages()
    _write_model(tmp_path, np.random.default_rng(0))
    with WebnnBrowser(webnn=False) as browser:
        with pytest.raises(BrowserError, match=r"WebNN is not available in this browser: navigator\.ml is undefined"):
            browser.run(tmp_path, {"x": np.zeros((2, 2), np.float32),
                                   "image": np.zeros((1, 5, 5, 2), np.float32)}, timeout_s=20)


def test_open_page_returns_what_the_page_publishes(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """The "open" request (used by benchmarks/webnn.py): a page of ours gets the URL of each mounted folder
    and its plain parameters in the query, and publishes a JSON result; a failure or an uncaught error in
    the page is a BrowserError, not a wait until the timeout; a page that never publishes times out with
    the step it was at."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "values.json").write_text("[1, 2, 3]")
    (tmp_path / "page.html").write_text(
        "<!doctype html><script type=module>\n"
        "const q = new URLSearchParams(location.search);\n"
        "const values = await (await fetch(new URL('values.json', q.get('data')))).json();\n"
        "globalThis.__pageResult = {sum: values.reduce((a, b) => a + b), label: q.get('label'),\n"
        "                           ml: typeof navigator.ml};\n"
        "</script>\n")
    got = webnn_browser.open_page(tmp_path / "page.html", mounts={"data": data}, query={"label": "a b&c"})
    assert got.result == {"sum": 6, "label": "a b&c", "ml": "object"}
    (tmp_path / "fails.html").write_text(
        "<!doctype html><script>globalThis.__pageResult = {ok: false, error: 'no luck'};</script>")
    with pytest.raises(BrowserError, match="no luck"):
        webnn_browser.open_page(tmp_path / "fails.html")
    (tmp_path / "throws.html").write_text("<!doctype html><script>throw new Error('boom');</script>")
    with pytest.raises(BrowserError, match="uncaught error in the page: .*boom"):
        webnn_browser.open_page(tmp_path / "throws.html", timeout_s=20)
    (tmp_path / "stuck.html").write_text(
        "<!doctype html><script>globalThis.__webnnHarnessStage = 'waiting for nothing';</script>")
    with pytest.raises(BrowserError, match=r"timed out after 1000 ms \(at: waiting for nothing\)"):
        webnn_browser.open_page(tmp_path / "stuck.html", timeout_s=1.0)
