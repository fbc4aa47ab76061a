"""The WebNN lowerings of lstm, gru and rnn (converter/backends/webnn/lowering/recurrent.py), run in
the real browser (Chromium 153's WebNN) in both layouts.

Each case is a one-op IR program (the states are graph inputs, or constants where the case says so)
whose expected outputs come from an oracle we did not write, never from our interpreter:

- torch.nn.LSTM / GRU / RNN with the weights copied (gate blocks reordered from the IR's letters to
  torch's): the configurations torch has (sigmoid/tanh lstm without peepholes in every direction,
  the iOS18 ``reset_after`` gru, tanh/relu rnn);
- onnxruntime's LSTM / GRU / RNN (tests/ops/test_oracle_recurrent.py's `_ort`: peepholes,
  other activations, the reset-before gru of iOS15-17 and iOS18 ``reset_after=False``);
- the lstm cell-state ``clip`` (neither torch nor ONNX has it): the cell equations of the MIL spec
  written below in float64 numpy (`_lstm_formula`).

Each case also says which form the lowering must take (one ``lstm``/``gru`` builder call, or the
cell unrolled per time step), so both forms of every op are exercised. The data are random with
distinct gates, directions, input and hidden sizes, nonzero initial states and a batch > 1, so that
a swapped pair of gate blocks, peephole parts or directions changes the outputs by far more than the
tolerance; `test_swaps_are_visible` checks that for the swaps the lowering could get wrong.

Tolerance: max abs error <= 1e-4 x max(1, |ref|). The browser computes in float32 (XNNPACK), the
oracles in float32 (torch, onnxruntime) or float64 (numpy): a step's sums have at most 11 products of
O(1) values (a few float32 ulps, ~1e-7), carried through at most 6 contracting steps; the measured
errors are ~1e-7 (printed), while a swapped gate gives errors of order 0.1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.backends.webnn.lowering import webnn_entry
from tests.ops.harness import Case, build_program
from tests.ops.test_oracle_recurrent import _blocks, _draw, _mil_form, _ort, _torch_gru, _torch_lstm, _torch_rnn

from .browser_client import WebnnBrowser

BOUND = 1e-4
S, B, IN, H = 5, 3, 4, 6
STATES = {"rnn": ("initial_h",), "gru": ("initial_h",), "lstm": ("initial_h", "initial_c")}
ACT_KEYS = {"rnn": ("activation",), "gru": ("recurrent_activation", "activation"),
            "lstm": ("recurrent_activation", "cell_activation", "activation")}


@dataclass(frozen=True)
class Variant:
    op: str
    direction: str = "forward"
    output_sequence: bool = True
    acts: tuple[str, ...] = ()  # IR activation names (default: the op's defaults)
    opset: str = "iOS15"
    peephole: str = ""  # "" none, "all" every part, "if" input and forget parts only
    clip: float | None = None
    reset_after: bool | None = None  # iOS18 gru
    states: str = "input"  # "input": graph inputs, "const": nonzero constants, "zero": constant zeros
    dims: tuple[int, int, int, int] = (S, B, IN, H)
    oracle: str = "torch"  # torch | ort | formula
    form: str = "direct"  # direct (one builder call) | unrolled
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def dirs(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    @property
    def id(self) -> str:
        parts = [self.op, self.opset, self.direction, "seq" if self.output_sequence else "last"]
        parts += list(self.acts)
        if self.peephole:
            parts.append(f"peephole_{self.peephole}")
        if self.clip is not None:
            parts.append(f"clip{self.clip:g}")
        if self.reset_after is not None:
            parts.append(f"reset_after_{self.reset_after}")
        if self.states != "input":
            parts.append(f"states_{self.states}")
        if self.dims != (S, B, IN, H):
            parts.append("s{}b{}i{}h{}".format(*self.dims))
        return "-".join(parts)


VARIANTS = [
    # lstm: one builder call
    Variant("lstm"),
    Variant("lstm", "reverse"),
    Variant("lstm", "reverse", False),
    Variant("lstm", "bidirectional"),
    Variant("lstm", "bidirectional", False),
    Variant("lstm", "forward", False, states="zero"),
    Variant("lstm", "bidirectional", states="const"),
    Variant("lstm", dims=(1, 1, 1, 1)),
    Variant("lstm", acts=("relu", "sigmoid", "tanh"), oracle="ort"),
    Variant("lstm", "reverse", acts=("sigmoid", "relu", "scaled_tanh"), oracle="ort"),
    Variant("lstm", peephole="if", oracle="ort"),
    Variant("lstm", "bidirectional", peephole="if", oracle="ort"),
    # a clip that provably never binds (constant states, bounded activations): still one call
    Variant("lstm", "bidirectional", clip=50.0, states="const", oracle="formula"),
    # lstm: unrolled
    Variant("lstm", peephole="all", oracle="ort", form="unrolled"),
    Variant("lstm", "reverse", False, peephole="all", oracle="ort", form="unrolled"),
    Variant("lstm", "bidirectional", peephole="all", oracle="ort", form="unrolled"),
    Variant("lstm", acts=("hard_sigmoid", "scaled_tanh", "relu"), oracle="ort", form="unrolled"),
    Variant("lstm", "bidirectional", acts=("sigmoid", "linear", "sigmoid"), peephole="all", oracle="ort",
            form="unrolled"),
    Variant("lstm", clip=0.3, peephole="all", oracle="formula", form="unrolled"),
    Variant("lstm", "reverse", clip=0.3, peephole="all", oracle="formula", form="unrolled"),
    Variant("lstm", "bidirectional", clip=0.3, peephole="all", oracle="formula", form="unrolled"),
    Variant("lstm", "bidirectional", False, clip=0.3, oracle="formula", form="unrolled"),
    Variant("lstm", clip=50.0, oracle="formula", form="unrolled"),  # states are inputs: could bind
    Variant("lstm", clip=0.3, states="const", dims=(1, 1, 1, 1), oracle="formula", form="unrolled"),
    # gru: one builder call
    Variant("gru", opset="iOS18", reset_after=True),
    Variant("gru", "reverse", opset="iOS18", reset_after=True),
    Variant("gru", "reverse", False, opset="iOS18", reset_after=True, states="const"),
    Variant("gru", oracle="ort"),
    Variant("gru", "reverse", oracle="ort"),
    Variant("gru", "forward", False, states="zero", oracle="ort"),
    Variant("gru", opset="iOS18", reset_after=False, oracle="ort"),
    Variant("gru", acts=("tanh", "relu"), oracle="ort"),
    Variant("gru", dims=(1, 1, 1, 1), oracle="ort"),
    # gru: unrolled
    Variant("gru", acts=("hard_sigmoid", "tanh"), oracle="ort", form="unrolled"),
    Variant("gru", "reverse", acts=("sigmoid", "linear"), oracle="ort", form="unrolled"),
    Variant("gru", "reverse", False, acts=("hard_sigmoid", "tanh"), states="const", oracle="ort", form="unrolled"),
    Variant("gru", acts=("hard_sigmoid", "tanh"), opset="iOS18", reset_after=True, oracle="ort", form="unrolled"),
    Variant("gru", "reverse", acts=("hard_sigmoid", "relu"), opset="iOS18", reset_after=False, oracle="ort",
            form="unrolled"),
    # rnn: always unrolled
    Variant("rnn", acts=("tanh",), form="unrolled"),
    Variant("rnn", "reverse", acts=("relu",), form="unrolled"),
    Variant("rnn", "forward", False, acts=("relu",), form="unrolled"),
    Variant("rnn", "reverse", False, acts=("tanh",), states="zero", form="unrolled"),
    Variant("rnn", acts=("tanh",), dims=(1, 1, 1, 1), form="unrolled"),
    Variant("rnn", acts=("sigmoid_hard",), oracle="ort", form="unrolled"),
    Variant("rnn", "reverse", acts=("linear",), oracle="ort", form="unrolled"),
    Variant("rnn", acts=("scaled_tanh",), states="const", oracle="ort", form="unrolled"),
]


# ---------------------------------------------------------------------------------------------
# Data and the IR program


def _data(v: Variant) -> dict[str, np.ndarray]:
    s, b, i, h = v.dims
    rng = np.random.default_rng(VARIANTS.index(v) if v in VARIANTS else 99)
    data = _draw(rng, v.op, s, b, i, h, v.dirs, scale=0.8)
    if v.peephole == "if":  # the output-gate part zero: WebNN's own peephole (old cell state) agrees
        for suffix in ("", "_back")[:v.dirs]:
            data[f"peephole{suffix}"][2 * h:] = 0.0
    if v.states == "zero":
        for n in STATES[v.op]:
            data[n] = np.zeros_like(data[n])
    if v.clip is not None and v.clip >= 1.0 and v.states == "const":
        data["initial_c"] = np.clip(data["initial_c"], -1.0, 1.0)
    return data


def _params(v: Variant, data: dict[str, np.ndarray]) -> dict[str, Any]:
    params: dict[str, Any] = {"direction": v.direction, "output_sequence": v.output_sequence}
    for suffix in ("", "_back")[:v.dirs]:
        for k in ("weight_ih", "weight_hh", "bias") + (("peephole",) if v.peephole else ()):
            params[k + suffix] = data[k + suffix]
    if v.reset_after is not None:
        params.update(input_bias=data["input_bias"], reset_after=v.reset_after)
    if v.clip is not None:
        params["clip"] = np.float32(v.clip)
    params.update(zip(ACT_KEYS[v.op], v.acts))
    return params


def _program(v: Variant, data: dict[str, np.ndarray]) -> tuple[converter.Program, dict[str, np.ndarray]]:
    states = {n: data[n] for n in STATES[v.op]}
    inputs = {"x": data["x"], **(states if v.states == "input" else {})}
    params = {**_params(v, data), **({} if v.states == "input" else states)}
    return build_program(Case(v.op, inputs, params, opset=v.opset))


# ---------------------------------------------------------------------------------------------
# Oracles


def _torch(v: Variant, data: dict[str, np.ndarray]) -> list[np.ndarray]:
    h = v.dims[3]
    reverse = v.direction == "reverse"
    if v.op == "lstm":
        outs = _torch_lstm(data, h, v.dirs, reverse)
    elif v.op == "gru":
        assert v.reset_after, "torch's GRU is the reset_after form"
        outs = _torch_gru(data, h, reverse)
    else:
        outs = _torch_rnn(data, h, v.acts[0], reverse)
    return _mil_form(outs, v.output_sequence, v.dirs)


def _onnxruntime(v: Variant, data: dict[str, np.ndarray]) -> list[np.ndarray]:
    h = v.dims[3]
    acts = list(v.acts) or {"rnn": ["tanh"], "gru": ["sigmoid", "tanh"], "lstm": ["sigmoid", "tanh", "tanh"]}[v.op]
    kw: dict[str, Any] = {"peephole": bool(v.peephole)}
    if v.op == "gru":
        kw.update(mil_order="roz", onnx_order="zro")
        if v.reset_after is not None:
            kw.update(input_bias=data["input_bias"], linear_before_reset=int(v.reset_after))
    elif v.op == "lstm":
        kw.update(mil_order="ifoz", onnx_order="iofz")
    return _mil_form(_ort(v.op, data, h, v.direction, acts, **kw), v.output_sequence, v.dirs)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_formula(v: Variant, data: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The MIL spec's lstm (sigmoid/tanh/tanh) with its cell-state clip, in float64: gate blocks
    [input, forget, output, cell]; peepholes [input, forget, output]; the output gate reads the
    clipped new cell state; ``reverse`` outputs in processing order, the bidirectional op's backward
    half aligned to input positions."""
    x = data["x"].astype(np.float64)
    s, b, _, h = v.dims
    seqs, hs, cs = [], [], []
    for d, suffix in enumerate(("", "_back")[:v.dirs]):
        w, r, bias = (data[k + suffix].astype(np.float64) for k in ("weight_ih", "weight_hh", "bias"))
        p = data[f"peephole{suffix}"].astype(np.float64) if v.peephole else np.zeros(3 * h)
        p_i, p_f, p_o = p[:h], p[h:2 * h], p[2 * h:]
        h_t = data["initial_h"][:, d * h:(d + 1) * h].astype(np.float64)
        c_t = data["initial_c"][:, d * h:(d + 1) * h].astype(np.float64)
        backward = v.direction == "reverse" or d == 1
        ys = []
        for t in (range(s - 1, -1, -1) if backward else range(s)):
            g = x[t] @ w.T + h_t @ r.T + bias
            g_i, g_f, g_o, g_z = g[:, :h], g[:, h:2 * h], g[:, 2 * h:3 * h], g[:, 3 * h:]
            i = _sigmoid(g_i + p_i * c_t)
            f = _sigmoid(g_f + p_f * c_t)
            c_t = np.clip(f * c_t + i * np.tanh(g_z), -v.clip, v.clip)
            o = _sigmoid(g_o + p_o * c_t)
            h_t = o * np.tanh(c_t)
            ys.append(h_t)
        if d == 1:
            ys = ys[::-1]
        seqs.append(np.stack(ys))
        hs.append(h_t)
        cs.append(c_t)
    h_all, c_all = np.concatenate(hs, -1), np.concatenate(cs, -1)
    y = np.concatenate(seqs, -1) if v.output_sequence else h_all[None]
    return [y, h_all, c_all]


def _expected(v: Variant, data: dict[str, np.ndarray]) -> list[np.ndarray]:
    return {"torch": _torch, "ort": _onnxruntime, "formula": _lstm_formula}[v.oracle](v, data)


# ---------------------------------------------------------------------------------------------
# Tests


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


def _convert(prog: converter.Program, out: Path, layout: str, precision: str = "fp32") -> str:
    converter.convert(prog, to="webnn", out=out, layout=layout, precision=precision)
    return (out / "model.js").read_text()


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("v", VARIANTS, ids=[v.id for v in VARIANTS])
def test_recurrent_op_in_the_browser(v: Variant, layout: str, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    data = _data(v)
    prog, feeds = _program(v, data)
    js = _convert(prog, tmp_path / "webnn", layout)
    single_call = f"builder.{v.op}(" in js
    assert single_call == (v.form == "direct"), f"expected the {v.form} form"
    if v.form == "unrolled":
        assert "builder.lstm(" not in js and "builder.gru(" not in js
    got = webnn_browser.run(tmp_path / "webnn", {k: np.asarray(x, np.float32) for k, x in feeds.items()}).outputs
    want = _expected(v, data)
    names = [o.name for o in prog.main.outputs]
    errors = []
    for name, w in zip(names, want):
        g = np.asarray(got[name], np.float64)
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        scale = max(1.0, float(np.max(np.abs(w))))
        err = float(np.max(np.abs(g - w)))
        assert err <= BOUND * scale, f"{v.id} {name}: max abs error {err:.3g} > {BOUND:g} x {scale:.3g}"
        errors.append(err / scale)
    print(v.id, layout, f"max error / max(1, |ref|) {max(errors):.2g}")


SWAPS = [
    # (variant, what the mutation swaps, mutate(data) -> data)
    (Variant("lstm", peephole="if", oracle="ort"), "lstm forget and output gate blocks",
     lambda d: {**d, **{k: _blocks(d[k], "ifoz", "iofz") for k in ("weight_ih", "weight_hh", "bias")}}),
    (Variant("lstm", peephole="if", oracle="ort"), "lstm input and forget peephole parts",
     lambda d: {**d, "peephole": _blocks(d["peephole"], "ifo", "fio")}),
    (Variant("lstm", peephole="all", oracle="ort", form="unrolled"), "lstm forget and output peephole parts",
     lambda d: {**d, "peephole": _blocks(d["peephole"], "ifo", "iof")}),
    (Variant("lstm", "bidirectional"), "the two directions' weights",
     lambda d: {**d, **{k + s1: d[k + s2] for k in ("weight_ih", "weight_hh", "bias")
                        for s1, s2 in (("", "_back"), ("_back", ""))}}),
    (Variant("lstm", "bidirectional"), "the two directions' initial states",
     lambda d: {**d, **{n: np.concatenate([d[n][:, H:], d[n][:, :H]], 1) for n in ("initial_h", "initial_c")}}),
    (Variant("gru", opset="iOS18", reset_after=True), "gru reset and update gate blocks",
     lambda d: {**d, **{k: _blocks(d[k], "roz", "zor") for k in ("weight_ih", "weight_hh", "bias", "input_bias")}}),
    (Variant("gru", opset="iOS18", reset_after=True), "gru input and hidden biases",
     lambda d: {**d, "bias": d["input_bias"], "input_bias": d["bias"]}),
]


@pytest.mark.parametrize("v,what,mutate", SWAPS, ids=[w for _, w, _ in SWAPS])
def test_swaps_are_visible(v: Variant, what: str, mutate) -> None:  # noqa: ANN001
    """The data are such that a lowering swapping ``what`` would fail the browser test: the oracle's
    outputs for the swapped data differ from the true ones by far more than the tolerance."""
    data = _data(v)
    true, swapped = _expected(v, data), _expected(v, mutate(data))
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(true, swapped)) > 100 * BOUND


def test_reset_after_is_visible() -> None:
    """iOS15 gru (reset before the hidden projection) and WebNN's default resetAfter=true differ."""
    v = Variant("gru", oracle="ort")
    data = _data(v)
    before = _expected(v, data)
    after = _onnxruntime(Variant("gru", opset="iOS18", reset_after=True), {**data, "input_bias": data["bias"],
                                                                          "bias": np.zeros_like(data["bias"])})
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(before, after)) > 100 * BOUND


@pytest.mark.parametrize("v", [Variant("lstm", "bidirectional"), Variant("lstm", clip=0.3, oracle="formula", form="unrolled"),
                               Variant("gru", "reverse", oracle="ort"),
                               Variant("gru", acts=("hard_sigmoid", "tanh"), oracle="ort", form="unrolled")],
                         ids=lambda v: v.id)
def test_fp16_precision_in_the_browser(v: Variant, webnn_browser: WebnnBrowser, tmp_path: Path) -> None:
    """--precision fp16: weights and computation in float16 (inputs and outputs stay float32). The
    bound 1e-2 x max(1, |ref|) is ~20 fp16 ulps at 1.0: each step rounds its sums of <= 11 products
    and its activations to 11-bit mantissas, carried through 5 steps."""
    data = _data(v)
    prog, feeds = _program(v, data)
    _convert(prog, tmp_path / "webnn", "nchw", "fp16")
    got = webnn_browser.run(tmp_path / "webnn", {k: np.asarray(x, np.float32) for k, x in feeds.items()}).outputs
    for o, w in zip(prog.main.outputs, _expected(v, data)):
        err = float(np.max(np.abs(np.asarray(got[o.name], np.float64) - w)))
        assert err <= 1e-2 * max(1.0, float(np.max(np.abs(w)))), f"{o.name}: {err:.3g}"
        print(v.id, "fp16", o.name, f"max abs error {err:.2g}")


@pytest.mark.parametrize("op,status", [("lstm", "direct"), ("gru", "direct"), ("rnn", "decomposed")])
def test_ops_json_entries(op: str, status: str) -> None:
    entry = webnn_entry(op)
    assert entry["status"] == status
    assert "unrolled" in entry["note"]
