"""The WebNN frontend's reading of ops the conformance vectors do not cover, against the real
browser (Chromium 153's WebNN): the same graph runs as model.js in the browser and through the
frontend + our interpreter. Oracle: the browser. Where Chromium 153 departs from the spec text the
frontend follows the spec; those cases are listed in DIVERGENT with the reason and must still
differ (so a browser or frontend change is noticed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.webnn_frontend.modules import browser_module_source, graph_doc, op, run_doc

from .browser_client import WebnnBrowser

RNG = np.random.default_rng(11)
WEBNN_TYPE = {np.dtype("float32"): "float32", np.dtype("uint8"): "uint8", np.dtype("int32"): "int32"}


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _recurrent_cases() -> dict[str, tuple[dict, dict]]:
    steps, batch, inp, hid = 3, 2, 3, 4
    x = _f32(steps, batch, inp)
    cases = {}
    for direction in ("backward", "both"):
        d = 2 if direction == "both" else 1
        cases[f"lstm_{direction}"] = (graph_doc(
            [op("lstm", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps), ("hiddenSize", hid),
                options={"bias": "b", "returnSequence": True, "direction": direction}, outputs=["h", "c", "seq"])],
            {"h": "h", "c": "c", "seq": "seq"}, inputs={"x": x},
            constants={"w": _f32(d, 4 * hid, inp), "r": _f32(d, 4 * hid, hid), "b": _f32(d, 4 * hid)}), {"x": x})
        cases[f"gru_{direction}_reset_before"] = (graph_doc(
            [op("gru", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps), ("hiddenSize", hid),
                options={"bias": "b", "recurrentBias": "rb", "returnSequence": True, "direction": direction,
                         "resetAfter": False}, outputs=["h", "seq"])],
            {"h": "h", "seq": "seq"}, inputs={"x": x},
            constants={"w": _f32(d, 3 * hid, inp), "r": _f32(d, 3 * hid, hid), "b": _f32(d, 3 * hid),
                       "rb": _f32(d, 3 * hid)}), {"x": x})
    for layout in ("iofg", "ifgo"):
        cases[f"lstm_peephole_{layout}"] = (graph_doc(
            [op("lstm", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps), ("hiddenSize", hid),
                options={"bias": "b", "recurrentBias": "rb", "peepholeWeight": "p", "initialHiddenState": "h0",
                         "initialCellState": "c0", "returnSequence": True, "layout": layout,
                         "activations": ["sigmoid", "relu", "tanh"]}, outputs=["h", "c", "seq"])],
            {"h": "h", "c": "c", "seq": "seq"}, inputs={"x": x},
            constants={"w": _f32(1, 4 * hid, inp), "r": _f32(1, 4 * hid, hid), "b": _f32(1, 4 * hid),
                       "rb": _f32(1, 4 * hid), "p": _f32(1, 3 * hid), "h0": _f32(1, batch, hid),
                       "c0": _f32(1, batch, hid)}), {"x": x})
    for layout in ("zrn", "rzn"):
        cases[f"gru_{layout}"] = (graph_doc(
            [op("gru", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps), ("hiddenSize", hid),
                options={"bias": "b", "recurrentBias": "rb", "initialHiddenState": "h0", "returnSequence": True,
                         "layout": layout}, outputs=["h", "seq"])],
            {"h": "h", "seq": "seq"}, inputs={"x": x},
            constants={"w": _f32(1, 3 * hid, inp), "r": _f32(1, 3 * hid, hid), "b": _f32(1, 3 * hid),
                       "rb": _f32(1, 3 * hid), "h0": _f32(1, batch, hid)}), {"x": x})
    x0 = _f32(batch, inp)
    cases["cells"] = (graph_doc(
        [op("lstmCell", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("hiddenState", "h"),
            ("cellState", "c"), ("hiddenSize", hid), options={"bias": "b", "peepholeWeight": "p"}, outputs=["ho", "co"]),
         op("gruCell", ("input", "x"), ("weight", "gw"), ("recurrentWeight", "gr"), ("hiddenState", "h"),
            ("hiddenSize", hid), options={"bias": "gb", "resetAfter": False}, outputs="go")],
        {"ho": "ho", "co": "co", "go": "go"}, inputs={"x": x0},
        constants={"w": _f32(4 * hid, inp), "r": _f32(4 * hid, hid), "b": _f32(4 * hid), "p": _f32(3 * hid),
                   "h": _f32(batch, hid), "c": _f32(batch, hid), "gw": _f32(3 * hid, inp), "gr": _f32(3 * hid, hid),
                   "gb": _f32(3 * hid)}), {"x": x0})
    return cases


def _other_cases() -> dict[str, tuple[dict, dict]]:
    cases = {}
    xi = _f32(1, 2, 7, 6)
    for method in ("maxPool2d", "averagePool2d", "l2Pool2d"):
        cases[f"{method}_ceil"] = (graph_doc([op(method, ("input", "x"), options={
            "windowDimensions": [3, 2], "strides": [2, 2], "outputShapeRounding": "ceil"}, outputs="y")],
            {"y": "y"}, inputs={"x": xi}), {"x": xi})
        cases[f"{method}_padded"] = (graph_doc([op(method, ("input", "x"), options={
            "windowDimensions": [3, 2], "strides": [2, 2], "padding": [1, 1, 0, 0]}, outputs="y")],
            {"y": "y"}, inputs={"x": xi}), {"x": xi})
    xr = _f32(1, 2, 4, 5)
    for name, options in {"linear_sizes": {"mode": "linear", "sizes": [7, 3]},
                          "linear_scales": {"mode": "linear", "scales": [1.7, 0.6]},
                          "nearest_ties": {"sizes": [7, 3]}, "nearest_no_ties": {"sizes": [8, 10]}}.items():
        cases[f"resample2d_{name}"] = (graph_doc([op("resample2d", ("input", "x"), options=options, outputs="y")],
                                                 {"y": "y"}, inputs={"x": xr}), {"x": xr})
    a, x2, xq, xc = _f32(4, 3), _f32(3, 4), _f32(2, 4) * 10, _f32(1, 2, 5, 5)
    cases["gemm"] = (graph_doc([op("gemm", ("a", "a"), ("b", "b"), options={
        "c": "c", "alpha": 0.5, "beta": -2.0, "aTranspose": True, "bTranspose": True}, outputs="y")],
        {"y": "y"}, inputs={"a": a}, constants={"b": _f32(5, 4), "c": _f32(5)}), {"a": a})
    cases["elementwise"] = (graph_doc([
        op("triangular", ("input", "x"), options={"upper": False, "diagonal": 1}, outputs="t"),
        op("prelu", ("input", "x"), ("slope", "s"), outputs="p"), op("gelu", ("input", "x"), outputs="g"),
        op("softplus", ("input", "x"), outputs="sp"), op("softsign", ("input", "x"), outputs="ss"),
        op("argMax", ("input", "x"), ("axis", 1), outputs="am")],
        {k: k for k in ("t", "p", "g", "sp", "ss", "am")}, inputs={"x": x2}, constants={"s": _f32(4)}), {"x": x2})
    cases["quantize"] = (graph_doc([
        op("quantizeLinear", ("input", "x"), ("scale", "s"), ("zeroPoint", "z"), outputs="q"),
        op("dequantizeLinear", ("input", "q"), ("scale", "s"), ("zeroPoint", "z"), outputs="d")],
        {"q": "q", "d": "d"}, inputs={"x": xq},
        constants={"s": np.array([[0.5, 0.25]], np.float32), "z": np.array([[3, 250]], np.uint8)}), {"x": xq})
    cases["convolutions"] = (graph_doc([
        op("convTranspose2d", ("input", "x"), ("filter", "w"), options={"strides": [2, 2], "outputSizes": [12, 12],
                                                                        "bias": "b"}, outputs="y"),
        op("conv2d", ("input", "x"), ("filter", "hw"), options={"filterLayout": "hwio", "padding": [1, 0, 2, 1],
                                                                "strides": [2, 1], "dilations": [1, 2]}, outputs="z"),
        op("pad", ("input", "x"), ("beginningPadding", [0, 0, 1, 2]), ("endingPadding", [0, 1, 2, 0]),
           options={"mode": "reflection"}, outputs="p"),
        op("cumulativeSum", ("input", "x"), ("axis", 3), options={"exclusive": True, "reversed": True}, outputs="cs")],
        {"y": "y", "z": "z", "p": "p", "cs": "cs"}, inputs={"x": xc},
        constants={"w": _f32(2, 3, 3, 3), "b": _f32(3), "hw": _f32(3, 3, 2, 4)}), {"x": xc})
    return cases


CASES = _recurrent_cases() | _other_cases()
#: Chromium 153 against the spec text (the frontend follows the spec): measured here.
DIVERGENT = {
    "resample2d_nearest_ties": "Chromium 153 rounds nearest-neighbor ties up; the spec's ceil(c - 0.5) rounds them down",
    "l2Pool2d_padded": "Chromium 153 counts a window that overlaps explicit padding as full (it differs from the "
                       "spec's L2 norm of the window's cells)",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_frontend_matches_the_browser(webnn_browser: WebnnBrowser, tmp_path: Path, name: str) -> None:
    doc, feeds = CASES[name]
    ours = {k: np.asarray(v) for k, v in run_doc(doc, feeds).items()}
    outputs = {k: {"dataType": WEBNN_TYPE[v.dtype], "shape": list(v.shape)} for k, v in ours.items()}
    (tmp_path / "model.js").write_text(browser_module_source(doc, outputs))
    browser = webnn_browser.run(tmp_path, feeds).outputs
    close = {k: np.allclose(browser[k].astype(np.float64), v.astype(np.float64), rtol=1e-5, atol=1e-5)
             for k, v in ours.items()}
    if name in DIVERGENT:
        assert not all(close.values()), f"now agrees with the browser: remove it from DIVERGENT ({DIVERGENT[name]})"
    else:
        assert all(close.values()), {k: float(np.max(np.abs(browser[k] - ours[k].astype(np.float64))))
                                     for k in ours}
