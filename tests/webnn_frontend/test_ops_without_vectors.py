"""WebNN ops the conformance vectors do not cover (gemm, pad, pools, resample2d, where, triangular,
prelu, softplus, softsign, gelu, argMin/argMax, notEqual, quantize/dequantize, convTranspose2d
outputPadding, lstm/lstmCell/gru/gruCell), each run through the frontend both as a graph document
and recorded from model.js under Node.

Oracles: torch (nn.LSTM/GRU and their cells, pooling, interpolate, conv_transpose2d, gelu, softplus)
and numpy formulas written here from the spec text (../shared/spec/webnn-api.txt).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .modules import graph_doc, op, run_doc, run_recorded

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _both(doc: dict, feeds: dict[str, np.ndarray], tmp_path: Path) -> dict[str, np.ndarray]:
    """Run the document directly and, where node exists, recorded from model.js: same bits."""
    direct = {k: np.asarray(v) for k, v in run_doc(doc, feeds).items()}
    if shutil.which("node") is not None:
        recorded = run_recorded(doc, feeds, tmp_path)
        for k in direct:
            np.testing.assert_array_equal(np.asarray(recorded[k]), direct[k])
    return direct


def _close(actual: Any, expected: Any, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), rtol=tol, atol=tol)


def test_gemm_alpha_beta_transposes(tmp_path: Path) -> None:
    a, b, c = _f32(4, 3), _f32(5, 4), _f32(5)
    doc = graph_doc([op("gemm", ("a", "a"), ("b", "b"), options={"c": "c", "alpha": 0.5, "beta": -2.0,
                                                                   "aTranspose": True, "bTranspose": True}, outputs="y")],
                    {"y": "y"}, inputs={"a": a}, constants={"b": b, "c": c})
    _close(_both(doc, {"a": a}, tmp_path)["y"], 0.5 * (a.T @ b.T) - 2.0 * c)


@pytest.mark.parametrize(("mode", "np_mode"), [("constant", "constant"), ("edge", "edge"), ("reflection", "reflect")])
def test_pad_modes(mode: str, np_mode: str, tmp_path: Path) -> None:
    x = _f32(2, 3, 4)
    options: dict = {"mode": mode} | ({"value": 2.5} if mode == "constant" else {})
    doc = graph_doc([op("pad", ("input", "x"), ("beginningPadding", [0, 1, 2]), ("endingPadding", [1, 2, 0]),
                        options=options, outputs="y")], {"y": "y"}, inputs={"x": x})
    kw = {"constant_values": 2.5} if mode == "constant" else {}
    np.testing.assert_array_equal(_both(doc, {"x": x}, tmp_path)["y"],
                                  np.pad(x, ((0, 1), (1, 2), (2, 0)), mode=np_mode, **kw))


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("method", ["maxPool2d", "averagePool2d", "l2Pool2d"])
def test_pools(method: str, layout: str, tmp_path: Path) -> None:
    x = _f32(1, 2, 7, 6)
    options = {"windowDimensions": [3, 2], "strides": [2, 2], "padding": [1, 1, 0, 0], "layout": layout,
               "outputShapeRounding": "ceil"}
    feed = x if layout == "nchw" else x.transpose(0, 2, 3, 1).copy()
    doc = graph_doc([op(method, ("input", "x"), options=options, outputs="y")], {"y": "y"}, inputs={"x": feed})
    y = _both(doc, {"x": feed}, tmp_path)["y"]
    t = torch.from_numpy(x)
    if method == "maxPool2d":
        ref = torch.nn.functional.max_pool2d(t, (3, 2), (2, 2), (1, 0), ceil_mode=True)
    elif method == "averagePool2d":  # the average of the window's input cells (padding excluded)
        ref = torch.nn.functional.avg_pool2d(t, (3, 2), (2, 2), (1, 0), ceil_mode=True, count_include_pad=False)
    else:
        ref = torch.nn.functional.lp_pool2d(torch.nn.functional.pad(t, (0, 0, 1, 1)), 2, (3, 2), (2, 2), ceil_mode=True)
    ref = ref.numpy() if layout == "nchw" else ref.numpy().transpose(0, 2, 3, 1)
    _close(y, ref)


def test_resample2d_linear_scales_use_the_size_ratio(tmp_path: Path) -> None:
    """scales [1.7, 0.6] on 4 x 5 give 6 x 3, sampled with the ratios 6/4 and 3/5 (spec: scale =
    outputSize / inputSize; Chromium 153 computes the same), i.e. bilinear resizing to that size."""
    x = _f32(1, 2, 4, 5)
    doc = graph_doc([op("resample2d", ("input", "x"), options={"mode": "linear", "scales": [1.7, 0.6]}, outputs="y")],
                    {"y": "y"}, inputs={"x": x})
    ref = torch.nn.functional.interpolate(torch.from_numpy(x), size=(6, 3), mode="bilinear", align_corners=False)
    _close(_both(doc, {"x": x}, tmp_path)["y"], ref.numpy())


def test_resample2d_linear_sizes_matches_half_pixel_bilinear(tmp_path: Path) -> None:
    x = _f32(1, 2, 4, 5)
    doc = graph_doc([op("resample2d", ("input", "x"), options={"mode": "linear", "sizes": [7, 3]}, outputs="y")],
                    {"y": "y"}, inputs={"x": x})
    ref = torch.nn.functional.interpolate(torch.from_numpy(x), size=(7, 3), mode="bilinear", align_corners=False)
    _close(_both(doc, {"x": x}, tmp_path)["y"], ref.numpy())


def test_resample2d_nearest_scales_on_nhwc_axes(tmp_path: Path) -> None:
    x = _f32(1, 3, 5, 2)
    doc = graph_doc([op("resample2d", ("input", "x"), options={"scales": [1.5, 0.5], "axes": [1, 2]}, outputs="y")],
                    {"y": "y"}, inputs={"x": x})
    y = _both(doc, {"x": x}, tmp_path)["y"]

    def index(n: int, given_scale: float) -> np.ndarray:
        """Spec 8.9.41: output size from the scale; ``scale = outputSize / inputSize``; half-pixel
        coordinate clamped to the input; nearest ``ceil(c - 0.5)``."""
        out = int(np.floor(n * given_scale))
        c = np.clip((np.arange(out) + 0.5) / (out / n) - 0.5, 0, n - 1)
        return np.ceil(c - 0.5).astype(int)

    np.testing.assert_array_equal(y, x[:, index(3, 1.5)][:, :, index(5, 0.5)])


def test_where_triangular_prelu_notequal_argmax(tmp_path: Path) -> None:
    x, s, m = _f32(3, 4), _f32(4), (RNG.random((1, 4)) > 0.5).astype(np.uint8)
    doc = graph_doc([
        op("where", ("condition", "m"), ("trueValue", "x"), ("falseValue", "s"), outputs="w"),
        op("triangular", ("input", "x"), options={"upper": False, "diagonal": 1}, outputs="t"),
        op("triangular", ("input", "x"), outputs="u"),
        op("prelu", ("input", "x"), ("slope", "s"), outputs="p"),
        op("notEqual", ("a", "x"), ("b", "w"), outputs="ne"),
        op("argMax", ("input", "x"), ("axis", 1), options={"keepDimensions": True}, outputs="am"),
        op("argMin", ("input", "x"), ("axis", 0), outputs="an"),
    ], {k: k for k in ("w", "t", "u", "p", "ne", "am", "an")}, inputs={"x": x, "m": m}, constants={"s": s})
    y = _both(doc, {"x": x, "m": m}, tmp_path)
    np.testing.assert_array_equal(y["w"], np.where(m != 0, x, s))
    np.testing.assert_array_equal(y["t"], np.tril(x, 1))
    np.testing.assert_array_equal(y["u"], np.triu(x))
    np.testing.assert_array_equal(y["p"], np.where(x < 0, x * s, x))
    assert y["ne"].dtype == np.uint8
    np.testing.assert_array_equal(y["ne"], (x != np.where(m != 0, x, s)).astype(np.uint8))
    np.testing.assert_array_equal(y["am"], np.argmax(x, 1)[:, None])
    np.testing.assert_array_equal(y["an"], np.argmin(x, 0))


def test_gelu_softplus_softsign(tmp_path: Path) -> None:
    x = _f32(2, 5) * 3
    doc = graph_doc([op(name, ("input", "x"), outputs=name) for name in ("gelu", "softplus", "softsign")],
                    {n: n for n in ("gelu", "softplus", "softsign")}, inputs={"x": x})
    y = _both(doc, {"x": x}, tmp_path)
    t = torch.from_numpy(x)
    _close(y["gelu"], torch.nn.functional.gelu(t).numpy())
    _close(y["softplus"], torch.nn.functional.softplus(t).numpy())
    _close(y["softsign"], x / (1 + np.abs(x)))


def test_quantize_and_dequantize_linear_blockwise(tmp_path: Path) -> None:
    x = _f32(2, 4) * 10
    scale = np.array([[0.5, 0.25]], np.float32)  # block of 2 along the last axis
    zp = np.array([[3, 250]], np.uint8)
    doc = graph_doc([op("quantizeLinear", ("input", "x"), ("scale", "s"), ("zeroPoint", "z"), outputs="q"),
                     op("dequantizeLinear", ("input", "q"), ("scale", "s"), ("zeroPoint", "z"), outputs="d")],
                    {"q": "q", "d": "d"}, inputs={"x": x}, constants={"s": scale, "z": zp})
    y = _both(doc, {"x": x}, tmp_path)
    s_full, z_full = np.repeat(scale, 2, axis=1), np.repeat(zp, 2, axis=1).astype(np.float64)
    q = np.clip(np.round(x / s_full) + z_full, 0, 255).astype(np.uint8)  # np.round: ties to even
    np.testing.assert_array_equal(y["q"], q)
    _close(y["d"], (q.astype(np.float64) - z_full) * s_full)


def test_conv_transpose2d_output_padding_and_hwoi(tmp_path: Path) -> None:
    x, w, bias = _f32(1, 2, 3, 3), _f32(2, 3, 3, 3), _f32(3)  # w: iohw
    hwoi = w.transpose(2, 3, 1, 0).copy()
    doc = graph_doc([op("convTranspose2d", ("input", "x"), ("filter", "w"),
                        options={"strides": [2, 2], "padding": [1, 0, 0, 1], "outputPadding": [1, 1],
                                 "filterLayout": "hwoi", "bias": "b"}, outputs="y")],
                    {"y": "y"}, inputs={"x": x}, constants={"w": hwoi, "b": bias})
    full = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), stride=2,
                                                output_padding=1).numpy()
    # spec: size (3-1)*2 + 3 - pads + outputPadding; the full result cropped by the begin pads
    ref = full[:, :, 1:1 + 7 - 1 + 1, 0:7 - 1 + 1] + bias[None, :, None, None]
    _close(_both(doc, {"x": x}, tmp_path)["y"], ref)


def _torch_lstm_weights(mod: Any, suffix: str, layout: str) -> dict[str, np.ndarray]:
    """torch packs LSTM gates i, f, g, o; WebNN 'ifgo' is the same order, 'iofg' is i, o, f, g."""
    perm = {"ifgo": [0, 1, 2, 3], "iofg": [0, 3, 1, 2]}[layout]

    def reorder(a: np.ndarray) -> np.ndarray:
        return np.concatenate([np.split(a, 4, axis=0)[p] for p in perm], axis=0)

    get = lambda n: getattr(mod, f"{n}{suffix}").detach().numpy()  # noqa: E731
    return {"w": reorder(get("weight_ih")), "r": reorder(get("weight_hh")), "b": reorder(get("bias_ih")),
            "rb": reorder(get("bias_hh"))}


@pytest.mark.parametrize(("direction", "layout"), [("forward", "iofg"), ("both", "ifgo"), ("backward", "iofg")])
def test_lstm_matches_torch(direction: str, layout: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    steps, batch, inp, hid = 4, 2, 3, 5
    bidir = direction == "both"
    mod = torch.nn.LSTM(inp, hid, bidirectional=bidir)
    x = _f32(steps, batch, inp)
    d = 2 if bidir else 1
    h0, c0 = _f32(d, batch, hid), _f32(d, batch, hid)
    dirs = [_torch_lstm_weights(mod, "_l0", layout)] + ([_torch_lstm_weights(mod, "_l0_reverse", layout)] if bidir else [])
    consts = {k: np.stack([w[k] for w in dirs]) for k in ("w", "r", "b", "rb")}
    doc = graph_doc([op("lstm", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps),
                        ("hiddenSize", hid), options={"bias": "b", "recurrentBias": "rb", "initialHiddenState": "h0",
                                                      "initialCellState": "c0", "returnSequence": True,
                                                      "direction": direction, "layout": layout},
                        outputs=["h", "c", "seq"])], {"h": "h", "c": "c", "seq": "seq"},
                    inputs={"x": x, "h0": h0, "c0": c0}, constants=consts)
    y = _both(doc, {"x": x, "h0": h0, "c0": c0}, tmp_path)
    tx = torch.from_numpy(x[::-1].copy() if direction == "backward" else x)
    with torch.no_grad():
        seq, (h, c) = mod(tx, (torch.from_numpy(h0), torch.from_numpy(c0)))
    seq = seq.numpy().reshape(steps, batch, d, hid).transpose(0, 2, 1, 3)
    if direction == "backward":  # torch ran on the reversed input: put entries back at their input step
        seq = seq[::-1]
    _close(y["h"], h.numpy())
    _close(y["c"], c.numpy())
    _close(y["seq"], seq)


def test_gru_and_cells_match_torch(tmp_path: Path) -> None:
    """torch GRU packs r, z, n (WebNN layout 'rzn') and applies the reset gate after the recurrent
    matmul (resetAfter: true); LSTMCell packs i, f, g, o (layout 'ifgo')."""
    torch.manual_seed(1)
    steps, batch, inp, hid = 3, 2, 4, 3
    gru, gcell, lcell = torch.nn.GRU(inp, hid, bidirectional=True), torch.nn.GRUCell(inp, hid), torch.nn.LSTMCell(inp, hid)
    x, h0, hc, cc = _f32(steps, batch, inp), _f32(2, batch, hid), _f32(batch, hid), _f32(batch, hid)
    get = lambda m, n: getattr(m, n).detach().numpy()  # noqa: E731
    consts = {
        "w": np.stack([get(gru, "weight_ih_l0"), get(gru, "weight_ih_l0_reverse")]),
        "r": np.stack([get(gru, "weight_hh_l0"), get(gru, "weight_hh_l0_reverse")]),
        "b": np.stack([get(gru, "bias_ih_l0"), get(gru, "bias_ih_l0_reverse")]),
        "rb": np.stack([get(gru, "bias_hh_l0"), get(gru, "bias_hh_l0_reverse")]),
        "gw": get(gcell, "weight_ih"), "gr": get(gcell, "weight_hh"), "gb": get(gcell, "bias_ih"),
        "grb": get(gcell, "bias_hh"), "lw": get(lcell, "weight_ih"), "lr": get(lcell, "weight_hh"),
        "lb": get(lcell, "bias_ih"), "lrb": get(lcell, "bias_hh"),
    }
    x0 = np.ascontiguousarray(x[0])
    doc = graph_doc([
        op("gru", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps), ("hiddenSize", hid),
           options={"bias": "b", "recurrentBias": "rb", "initialHiddenState": "h0", "returnSequence": True,
                    "direction": "both", "layout": "rzn"}, outputs=["gh", "gseq"]),
        op("gruCell", ("input", "x0"), ("weight", "gw"), ("recurrentWeight", "gr"), ("hiddenState", "hc"),
           ("hiddenSize", hid), options={"bias": "gb", "recurrentBias": "grb", "layout": "rzn"}, outputs="gc"),
        op("lstmCell", ("input", "x0"), ("weight", "lw"), ("recurrentWeight", "lr"), ("hiddenState", "hc"),
           ("cellState", "cc"), ("hiddenSize", hid), options={"bias": "lb", "recurrentBias": "lrb", "layout": "ifgo"},
           outputs=["lh", "lc"]),
    ], {k: k for k in ("gh", "gseq", "gc", "lh", "lc")}, inputs={"x": x, "h0": h0, "x0": x0, "hc": hc, "cc": cc},
        constants=consts)
    y = _both(doc, {"x": x, "h0": h0, "x0": x0, "hc": hc, "cc": cc}, tmp_path)
    with torch.no_grad():
        seq, h = gru(torch.from_numpy(x), torch.from_numpy(h0))
        gc = gcell(torch.from_numpy(x0), torch.from_numpy(hc))
        lh, lc = lcell(torch.from_numpy(x0), (torch.from_numpy(hc), torch.from_numpy(cc)))
    _close(y["gh"], h.numpy())
    _close(y["gseq"], seq.numpy().reshape(steps, batch, 2, hid).transpose(0, 2, 1, 3))
    _close(y["gc"], gc.numpy())
    _close(y["lh"], lh.numpy())
    _close(y["lc"], lc.numpy())


def test_gru_reset_before_and_zrn_layout(tmp_path: Path) -> None:
    """resetAfter: false (``n = tanh(x Wn' + bn + (r * h) Rn' + rbn)``), default layout zrn, no states:
    numpy from the spec's formulas."""
    steps, batch, inp, hid = 2, 1, 3, 2
    x, w, r, b = _f32(steps, batch, inp), _f32(1, 3 * hid, inp), _f32(1, 3 * hid, hid), _f32(1, 3 * hid)
    doc = graph_doc([op("gru", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps),
                        ("hiddenSize", hid), options={"bias": "b", "resetAfter": False}, outputs=["h"])],
                    {"h": "h"}, inputs={"x": x}, constants={"w": w, "r": r, "b": b})
    y = _both(doc, {"x": x}, tmp_path)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    wz, wr, wn = np.split(w[0].astype(np.float64), 3)
    rz, rr, rn = np.split(r[0].astype(np.float64), 3)
    bz, br, bn = np.split(b[0].astype(np.float64), 3)
    h = np.zeros((batch, hid))
    for t in range(steps):
        z = sig(x[t] @ wz.T + bz + h @ rz.T)
        rg = sig(x[t] @ wr.T + br + h @ rr.T)
        n = np.tanh(x[t] @ wn.T + bn + (rg * h) @ rn.T)
        h = (1 - z) * n + z * h
    _close(y["h"], h[None])


@pytest.mark.parametrize("layout", ["iofg", "ifgo"])
def test_lstm_peepholes_and_activations(layout: str, tmp_path: Path) -> None:
    """Peepholes (packed [i, o, f] whatever the layout), the output gate's peephole on the previous
    cell state, and non-default activations; numpy written from the WebNN reference implementation
    (webnn-baseline lstm_cell.js), which Chromium 153 matched when measured."""
    steps, batch, inp, hid = 2, 2, 3, 2
    x, w, r = _f32(steps, batch, inp), _f32(1, 4 * hid, inp), _f32(1, 4 * hid, hid)
    b, p, h0, c0 = _f32(1, 4 * hid), _f32(1, 3 * hid), _f32(1, batch, hid), _f32(1, batch, hid)
    doc = graph_doc([op("lstm", ("input", "x"), ("weight", "w"), ("recurrentWeight", "r"), ("steps", steps),
                        ("hiddenSize", hid), options={"bias": "b", "peepholeWeight": "p", "initialHiddenState": "h0",
                                                      "initialCellState": "c0", "layout": layout,
                                                      "activations": ["sigmoid", "relu", "tanh"]},
                        outputs=["h", "c"])], {"h": "h", "c": "c"}, inputs={"x": x},
                    constants={"w": w, "r": r, "b": b, "p": p, "h0": h0, "c0": c0})
    y = _both(doc, {"x": x}, tmp_path)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    gates = dict(zip(layout, range(4)))
    blk = lambda a, g: np.split(a.astype(np.float64), 4)[gates[g]]  # noqa: E731
    pi, po, pf = np.split(p[0].astype(np.float64), 3)
    h, c = h0[0].astype(np.float64), c0[0].astype(np.float64)
    for t in range(steps):
        pre = {g: x[t] @ blk(w[0], g).T + h @ blk(r[0], g).T + blk(b[0], g) for g in "iofg"}
        i, f = sig(pre["i"] + pi * c), sig(pre["f"] + pf * c)
        o = sig(pre["o"] + po * c)
        c = f * c + i * np.maximum(pre["g"], 0)
        h = o * np.tanh(c)
    _close(y["h"], h[None])
    _close(y["c"], c[None])
