"""Issue 9, "Done when": the demo page (index.html) is tested in the real browser: it loads a converted
classifier, runs it, shows labels and times; started without WebNN it shows the plain message and
throws nothing. Also: a picture chosen in the page reaches the graph as the model's image tensor, and
hostile labels and names render as text.

Oracles: for the picture, our interpreter on the source model fed the same pixels through
`converter.runtime_io.adapt_feeds` (Core ML's image feature semantics: RGB array -> the model's colour
order), compared with the page's printed probabilities (4 decimals); labels: the Python strings."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.backends.webnn import write_webnn
from converter.ir.interpreter import Interpreter
from converter.runtime_io import adapt_feeds

from .browser_client import PageResult, WebnnBrowser, module_features
from .conftest import require_browser_packages
from .hostile import HOSTILE, hostile_classifier

MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "models"
READY = {"wait_for": "#status[data-state=ready]"}
DONE = {"wait_for": "#status[data-state=done]"}
SHOWN = ["#status", "#times", "#top5 li", ".output .name", ".output pre", "#inputs .name", "#title"]


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


def write_png(path: Path, rgb: np.ndarray) -> None:
    """An 8-bit RGB PNG (no colour profile, so the browser's canvas returns these exact values)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def top5(result: PageResult) -> list[tuple[str, float]]:
    pairs = []
    for text in result.text["#top5 li"]:
        label, _, prob = text.rpartition(": ")
        pairs.append((label, float(prob)))
    return pairs


def assert_times_shown(result: PageResult) -> None:
    (times,) = result.text["#times"]
    m = re.fullmatch(r"build: (\d+\.\d) ms, inference: (\d+\.\d) ms \(device cpu\)", times)
    assert m, times
    assert float(m.group(1)) > 0 and float(m.group(2)) > 0


@pytest.mark.parametrize("model", ["builder/updatable_classifier.mlmodel", "real/7485461f_SqueezeNetFP16.mlmodel"])
def test_page_runs_a_classifier_on_random_inputs(model: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    out = tmp_path / "webnn"
    converter.convert(MODELS / model, to="webnn", out=out)
    result = webnn_browser.visit_page(out, steps=[READY, {"click": "#run"}, DONE], text=SHOWN, timeout_s=120)
    assert result.page_errors == [] and not [c for c in result.console if c.startswith("error")]
    assert result.text["#status"] == ["Done."]
    assert result.text["#title"] == [Path(model).stem]
    assert_times_shown(result)
    module_labels = [str(x) for x in module_features(out, "labels")]
    shown = top5(result)
    assert len(shown) == min(5, len(module_labels))
    assert all(label in module_labels for label, _ in shown)
    probs = [p for _, p in shown]
    assert probs == sorted(probs, reverse=True) and all(0 <= p <= 1 for p in probs)
    assert result.text[".output .name"] == list(module_features(out, "outputs"))


def test_page_feeds_a_chosen_picture_in_the_models_colour_order(webnn_browser: WebnnBrowser,
                                                                tmp_path: Path) -> None:
    """image_classifier_preprocessed: a BGR 20x20 image input with scale/bias preprocessing."""
    src = MODELS / "builder" / "image_classifier_preprocessed.mlmodel"
    out = tmp_path / "webnn"
    converter.convert(src, to="webnn", out=out)
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)  # the input's own size: no resampling
    picture = tmp_path / "picture.png"
    write_png(picture, pixels)
    result = webnn_browser.visit_page(out, steps=[READY, {"upload": "input.image-file", "files": [str(picture)]},
                                                 {"click": "#run"}, DONE], text=SHOWN, timeout_s=60)
    assert result.page_errors == []
    prog = converter.load(src)
    want = Interpreter(prog).run(adapt_feeds(prog.main, {"image": pixels}), prog.main.name)
    probs = {str(k): float(v) for k, v in want["logits"].items()}
    shown = dict(top5(result))
    assert set(shown) == set(probs)
    for label, p in probs.items():
        assert abs(shown[label] - p) <= 6e-5, (label, shown[label], p)  # printed with 4 decimals
    # The colour order matters for this model: the same picture as RGB gives other probabilities.
    swapped = Interpreter(prog).run(adapt_feeds(prog.main, {"image": pixels[..., ::-1].copy()}), prog.main.name)
    assert max(abs(float(swapped["logits"][k]) - probs[str(k)]) for k in swapped["logits"]) > 1e-3


def test_page_shows_hostile_labels_and_names_as_text(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    labels = HOSTILE[:5] + HOSTILE[8:10]  # 7 labels: the top 5 are shown
    prog, _ = hostile_classifier(HOSTILE[3], HOSTILE[9], HOSTILE[1], labels, op_name=HOSTILE[4])
    out = tmp_path / "webnn"
    write_webnn(prog, out, source=str(tmp_path / "<img src=y onerror=\"throw 2\">&amp;.mlmodel"))  # the title comes from the source
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "innerHTML" not in page and "eval(" not in page and "outerHTML" not in page
    assert "document.write" not in page and "insertAdjacentHTML" not in page
    result = webnn_browser.visit_page(out, steps=[READY, {"click": "#run"}, DONE],
                                     text=SHOWN + ["script", "img"], timeout_s=60)
    assert result.page_errors == []
    assert result.text["img"] == []  # the label "<img ...>" is text, not an element
    assert len(result.text["script"]) == 1  # no script injected by a name
    shown = [label for label, _ in top5(result)]
    assert len(shown) == 5 and set(shown) <= set(labels)
    assert result.text[".output .name"] == [HOSTILE[9]]
    assert result.text["#inputs .name"] == [HOSTILE[3]]
    assert result.text["#title"] == ["<img src=y onerror=\"throw 2\">&amp;"]


def test_page_without_webnn_says_so_and_throws_nothing(tmp_path: Path) -> None:
    require_browser_packages()
    out = tmp_path / "webnn"
    converter.convert(MODELS / "builder" / "updatable_classifier.mlmodel", to="webnn", out=out)
    with WebnnBrowser(webnn=False) as browser:
        result = browser.visit_page(out, steps=[{"wait_for": "#status[data-state=unavailable]"}],
                                   text=["#status", "#run"], timeout_s=30)
    (status,) = result.text["#status"]
    assert status.startswith("This browser does not support WebNN (navigator.ml is missing)")
    assert result.page_errors == []
    assert not [c for c in result.console if c.startswith("error")]


def test_page_switches_device_type(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    out = tmp_path / "webnn"
    converter.convert(MODELS / "builder" / "updatable_classifier.mlmodel", to="webnn", out=out)
    result = webnn_browser.visit_page(out, steps=[READY, {"select": "#device", "value": "gpu"},
                                                 {"wait_for": "#run:not([disabled])"}, {"click": "#run"}, DONE],
                                     text=SHOWN, timeout_s=60)
    assert result.page_errors == []
    assert result.text["#times"][0].endswith("(device gpu)")  # Chromium 153 here: gpu falls back to XNNPACK


def test_page_says_so_when_create_context_rejects(webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """navigator.ml exists but createContext rejects (no such device): a plain message, no page error."""
    out = tmp_path / "webnn"
    converter.convert(MODELS / "builder" / "updatable_classifier.mlmodel", to="webnn", out=out)
    page = (out / "index.html").read_text(encoding="utf-8")
    stub = ("<script>navigator.ml.createContext = () => Promise.reject("
            "new DOMException('no device here', 'NotSupportedError'));</script>\n")
    (out / "stubbed.html").write_text(page.replace('<script type="module">', stub + '<script type="module">'),
                                      encoding="utf-8")
    result = webnn_browser.visit_page(out, visit="stubbed.html",
                                      steps=[{"wait_for": "#status[data-state=unavailable]"}],
                                     text=["#status"], timeout_s=30)
    assert result.text["#status"] == ["WebNN cannot run here: it could not create a cpu context "
                                      "(NotSupportedError: no device here)."]
    assert result.page_errors == []
