"""rnn, gru and lstm against torch.nn and onnxruntime's RNN/GRU/LSTM.

The MIL weights are built here from the oracle's own layout by reordering gate blocks (torch:
ifgo / rzn, ONNX: iofc / zrh, MIL: ifoz / roz). Core ML conventions checked on the way:
``direction="reverse"`` yields outputs in processing order (the reverse of ONNX's alignment),
bidirectional outputs are position-aligned, iOS15 gru is ONNX's linear_before_reset=0 and the
iOS18 ``reset_after`` gru is torch's GRU. Core ML's lstm ``clip`` bounds the cell state, which
neither torch nor ONNX LSTM offers (ONNX clips gate inputs), so clipped LSTMs are checked against
an onnxruntime graph of the cell equations (MatMul/Sigmoid/Tanh/Clip per step).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import helper

from tests.oracles.onnx_oracle import run_onnx

from .harness import assert_close, run_op

ORACLE = {
    "rnn": "torch.nn.RNN; onnxruntime RNN (every activation)",
    "gru": "onnxruntime GRU (linear_before_reset=0, iOS15-18); torch.nn.GRU and onnxruntime "
           "linear_before_reset=1 (iOS18 reset_after)",
    "lstm": "torch.nn.LSTM; onnxruntime LSTM (peepholes, activations, bidirectional); onnxruntime "
            "graph of the cell equations (cell-state clip)",
}

GATES = {"rnn": 1, "gru": 3, "lstm": 4}
STATES = {"rnn": ("initial_h",), "gru": ("initial_h",), "lstm": ("initial_h", "initial_c")}
# MIL activation -> (ONNX activation, alpha, beta); alpha/beta None where the function takes none.
ONNX_ACT = {
    "sigmoid": ("Sigmoid", None, None),
    "tanh": ("Tanh", None, None),
    "relu": ("Relu", None, None),
    "linear": ("Affine", 1.0, 0.0),
    "scaled_tanh": ("ScaledTanh", 1.0, 1.0),
    "hard_sigmoid": ("HardSigmoid", 0.2, 0.5),
    "sigmoid_hard": ("HardSigmoid", 0.2, 0.5),
}


def _blocks(w: np.ndarray, order: str, to: str) -> np.ndarray:
    """Reorder the gate blocks of ``w`` (axis 0) from ``order`` to ``to`` (one letter per gate)."""
    parts = dict(zip(order, np.split(w, len(order))))
    return np.concatenate([parts[g] for g in to])


def _draw(rng: np.random.Generator, op: str, s: int, b: int, i: int, h: int, dirs: int, scale: float = 0.6) -> dict:
    """Inputs and MIL parameters for one op; weights per direction under '' and '_back'."""
    g = GATES[op]
    def w(*shape):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    data = {"x": w(s, b, i) * 2, **{n: w(b, dirs * h) for n in STATES[op]}}
    for suffix in ("", "_back")[:dirs]:
        data.update({f"weight_ih{suffix}": w(g * h, i), f"weight_hh{suffix}": w(g * h, h), f"bias{suffix}": w(g * h)})
        if op == "lstm":
            data[f"peephole{suffix}"] = w(3 * h)
    data["input_bias"] = w(g * h)
    return data


def _mil(op: str, data: dict, opset: str | None = None, dtype=np.float32, **params) -> list[np.ndarray]:
    inputs = {k: data[k].astype(dtype) for k in ("x", *STATES[op])}
    consts = {k: v.astype(dtype) for k, v in params.items() if isinstance(v, np.ndarray)}
    consts.update({k: v for k, v in params.items() if not isinstance(v, np.ndarray)})
    return run_op(op, inputs, consts, opset=opset)


# ---------------------------------------------------------------------------------------------
# torch


def _torch_run(module: torch.nn.Module, x: np.ndarray, states: tuple[np.ndarray, ...], dirs: int,
               reverse: bool) -> list[np.ndarray]:
    """Run a torch recurrent module; return (outputs [s,b,D*H], finals [b,D*H]...) in MIL form."""
    xt = torch.tensor(x[::-1].copy() if reverse else x)
    hs = [torch.tensor(st.reshape(st.shape[0], dirs, -1).transpose(1, 0, 2).copy()) for st in states]
    with torch.no_grad():
        y, fin = module(xt, hs[0] if len(hs) == 1 else tuple(hs))
    finals = fin if isinstance(fin, tuple) else (fin,)
    finals = [f.numpy().transpose(1, 0, 2).reshape(x.shape[1], -1) for f in finals]
    return [y.numpy(), *finals]


def _torch_lstm(data: dict, h: int, dirs: int, reverse: bool) -> list[np.ndarray]:
    m = torch.nn.LSTM(data["x"].shape[2], h, bidirectional=dirs == 2)
    sd = m.state_dict()
    for suffix, tsuffix in (("", ""), ("_back", "_reverse"))[:dirs]:
        sd[f"weight_ih_l0{tsuffix}"] = torch.tensor(_blocks(data[f"weight_ih{suffix}"], "ifoz", "ifzo"))
        sd[f"weight_hh_l0{tsuffix}"] = torch.tensor(_blocks(data[f"weight_hh{suffix}"], "ifoz", "ifzo"))
        sd[f"bias_ih_l0{tsuffix}"] = torch.tensor(_blocks(data[f"bias{suffix}"], "ifoz", "ifzo"))
        sd[f"bias_hh_l0{tsuffix}"] = torch.zeros(4 * h)
    m.load_state_dict(sd)
    return _torch_run(m, data["x"], (data["initial_h"], data["initial_c"]), dirs, reverse)


def _torch_gru(data: dict, h: int, reverse: bool) -> list[np.ndarray]:
    m = torch.nn.GRU(data["x"].shape[2], h)
    sd = m.state_dict()
    sd["weight_ih_l0"] = torch.tensor(_blocks(data["weight_ih"], "roz", "rzo"))
    sd["weight_hh_l0"] = torch.tensor(_blocks(data["weight_hh"], "roz", "rzo"))
    sd["bias_ih_l0"] = torch.tensor(_blocks(data["input_bias"], "roz", "rzo"))
    sd["bias_hh_l0"] = torch.tensor(_blocks(data["bias"], "roz", "rzo"))
    m.load_state_dict(sd)
    return _torch_run(m, data["x"], (data["initial_h"],), 1, reverse)


def _torch_rnn(data: dict, h: int, act: str, reverse: bool) -> list[np.ndarray]:
    m = torch.nn.RNN(data["x"].shape[2], h, nonlinearity=act)
    sd = m.state_dict()
    sd["weight_ih_l0"], sd["weight_hh_l0"] = torch.tensor(data["weight_ih"]), torch.tensor(data["weight_hh"])
    sd["bias_ih_l0"], sd["bias_hh_l0"] = torch.tensor(data["bias"]), torch.zeros(h)
    m.load_state_dict(sd)
    return _torch_run(m, data["x"], (data["initial_h"],), 1, reverse)


def _mil_form(outs: list[np.ndarray], output_sequence: bool, dirs: int) -> list[np.ndarray]:
    """Torch / ONNX final states to MIL's sequence output when only the last step is returned."""
    if output_sequence:
        return outs
    return [outs[1][None], *outs[1:]]


TORCH_CASES = [
    ("rnn", "forward", True, "tanh"), ("rnn", "reverse", True, "relu"), ("rnn", "forward", False, "relu"),
    ("lstm", "forward", True, None), ("lstm", "reverse", True, None), ("lstm", "bidirectional", True, None),
    ("lstm", "bidirectional", False, None), ("lstm", "forward", False, None),
    ("gru", "forward", True, None), ("gru", "reverse", False, None),
]


@pytest.mark.parametrize("op,direction,output_sequence,act", TORCH_CASES)
@pytest.mark.parametrize("dims", [(5, 3, 4, 6), (1, 1, 1, 1)], ids=["s5b3i4h6", "s1b1i1h1"])
def test_recurrent_vs_torch(op: str, direction: str, output_sequence: bool, act: str | None, dims):
    s, b, i, h = dims
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(len(TORCH_CASES) * s + TORCH_CASES.index((op, direction, output_sequence, act)))
    data = _draw(rng, op, s, b, i, h, dirs)
    common = {"direction": direction, "output_sequence": output_sequence}
    reverse = direction == "reverse"
    if op == "lstm":
        weights = {k: data[k] for k in data if k.startswith(("weight", "bias")) and (dirs == 2 or "back" not in k)}
        got = _mil(op, data, **weights, **common)
        want = _torch_lstm(data, h, dirs, reverse)
    elif op == "gru":  # torch's GRU is the iOS18 reset_after form
        got = _mil(op, data, "iOS18", weight_ih=data["weight_ih"], weight_hh=data["weight_hh"], bias=data["bias"],
                   input_bias=data["input_bias"], reset_after=True, **common)
        want = _torch_gru(data, h, reverse)
    else:
        got = _mil(op, data, weight_ih=data["weight_ih"], weight_hh=data["weight_hh"], bias=data["bias"],
                   activation=act, **common)
        want = _torch_rnn(data, h, act, reverse)
    want = _mil_form(want, output_sequence, dirs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=1e-5, atol=1e-5, what=f"{op} {direction} output {k}")


# ---------------------------------------------------------------------------------------------
# onnxruntime


def _act_attrs(names: list[str]) -> dict:
    acts, alpha, beta = [], [], []
    for n in names:
        onnx_name, a, b = ONNX_ACT[n]
        acts.append(onnx_name)
        if a is not None:
            alpha.append(a)
            beta.append(b)
    attrs = {"activations": acts}
    if alpha:
        attrs.update(activation_alpha=alpha, activation_beta=beta)
    return attrs


def _ort(op: str, data: dict, h: int, direction: str, acts: list[str], *, onnx_order: str = "", mil_order: str = "",
         input_bias: np.ndarray | None = None, peephole: bool = False, **attrs) -> list[np.ndarray]:
    """Run onnxruntime's RNN/GRU/LSTM on MIL-layout weights; returns outputs in MIL form."""
    dirs = 2 if direction == "bidirectional" else 1
    suffixes = ("", "_back")[:dirs]
    g = GATES[op]

    def reorder(v):
        return _blocks(v, mil_order, onnx_order) if mil_order else v

    b_in = [reorder(input_bias if input_bias is not None else data[f"bias{s}"]) for s in suffixes]
    b_hid = [reorder(data["bias"]) if input_bias is not None else np.zeros(g * h, np.float32) for _ in suffixes]
    inits = {
        "W": np.stack([reorder(data[f"weight_ih{s}"]) for s in suffixes]),
        "R": np.stack([reorder(data[f"weight_hh{s}"]) for s in suffixes]),
        "B": np.stack([np.concatenate([wb, rb]) for wb, rb in zip(b_in, b_hid)]),
    }
    b = data["x"].shape[1]
    feeds = {"x": data["x"]}
    names = ["x", "W", "R", "B", ""]
    for n in STATES[op]:
        feeds[n] = data[n].reshape(b, dirs, h).transpose(1, 0, 2).copy()
        names.append(n)
    if peephole:
        inits["P"] = np.stack([_blocks(data[f"peephole{s}"], "ifo", "iof") for s in suffixes])
        names.append("P")
    onnx_dir = "bidirectional" if dirs == 2 else direction
    outs = ["Y", "Y_h", "Y_c"][: 1 + len(STATES[op])]
    node = helper.make_node(op.upper(), names, outs, hidden_size=h, direction=onnx_dir, **_act_attrs(acts * dirs),
                            **attrs)
    y, *finals = run_onnx([node], feeds, outs, inits)
    if direction == "reverse":
        y = y[::-1]  # ONNX aligns reverse outputs to input positions; MIL keeps processing order
    seq = y.transpose(0, 2, 1, 3).reshape(y.shape[0], b, dirs * h)
    return [seq, *(f.transpose(1, 0, 2).reshape(b, dirs * h) for f in finals)]


ORT_CASES = [
    # op, opset, direction, activations (MIL names, ONNX order), extra
    ("rnn", "iOS15", "forward", ["tanh"], {}),
    ("rnn", "iOS15", "reverse", ["sigmoid"], {}),
    ("rnn", "iOS15", "forward", ["sigmoid_hard"], {}),
    ("rnn", "iOS15", "forward", ["scaled_tanh"], {}),
    ("rnn", "iOS15", "reverse", ["linear"], {}),
    ("gru", "iOS15", "forward", ["sigmoid", "tanh"], {}),
    ("gru", "iOS15", "reverse", ["sigmoid", "tanh"], {}),
    ("gru", "iOS15", "forward", ["hard_sigmoid", "relu"], {}),
    ("gru", "iOS15", "forward", ["tanh", "sigmoid"], {}),
    ("gru", "iOS18", "forward", ["sigmoid", "tanh"], {"reset_after": False}),
    ("gru", "iOS18", "reverse", ["sigmoid", "tanh"], {"reset_after": True}),
    ("lstm", "iOS15", "forward", ["sigmoid", "tanh", "tanh"], {"peephole": True}),
    ("lstm", "iOS15", "reverse", ["sigmoid", "tanh", "tanh"], {"peephole": True}),
    ("lstm", "iOS15", "bidirectional", ["sigmoid", "tanh", "tanh"], {"peephole": True}),
    ("lstm", "iOS15", "forward", ["hard_sigmoid", "scaled_tanh", "relu"], {}),
    ("lstm", "iOS15", "bidirectional", ["sigmoid", "linear", "sigmoid"], {"peephole": True}),
]


def _ort_case(op: str, opset: str, direction: str, acts: list[str], extra: dict, data: dict, h: int,
              output_sequence: bool, dtype=np.float32) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(MIL results, onnxruntime results) for one ORT_CASES row."""
    dirs = 2 if direction == "bidirectional" else 1
    params = {"direction": direction, "output_sequence": output_sequence}
    for s in ("", "_back")[:dirs]:
        params.update({f"weight_ih{s}": data[f"weight_ih{s}"], f"weight_hh{s}": data[f"weight_hh{s}"],
                       f"bias{s}": data[f"bias{s}"]})
        if extra.get("peephole"):
            params[f"peephole{s}"] = data[f"peephole{s}"]
    names = {"rnn": ["activation"], "gru": ["recurrent_activation", "activation"],
             "lstm": ["recurrent_activation", "cell_activation", "activation"]}[op]
    params.update(dict(zip(names, acts)))
    kw: dict = {"peephole": extra.get("peephole", False)}
    if op == "gru":
        kw.update(mil_order="roz", onnx_order="zro")
        if opset == "iOS18":
            params.update(input_bias=data["input_bias"], reset_after=extra["reset_after"])
            kw.update(input_bias=data["input_bias"], linear_before_reset=int(extra["reset_after"]))
    if op == "lstm":
        kw.update(mil_order="ifoz", onnx_order="iofz")
    got = _mil(op, data, opset, dtype=dtype, **params)
    cast = {k: (v.astype(dtype).astype(np.float32) if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    want = _mil_form(_ort(op, cast, h, direction, acts, **kw), output_sequence, dirs)
    return got, want


@pytest.mark.parametrize("op,opset,direction,acts,extra", ORT_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{'-'.join(c[3])}" for c in ORT_CASES])
@pytest.mark.parametrize("output_sequence", [True, False], ids=["seq", "last"])
def test_recurrent_vs_onnxruntime(op: str, opset: str, direction: str, acts: list[str], extra: dict,
                                  output_sequence: bool):
    rng = np.random.default_rng(ORT_CASES.index((op, opset, direction, acts, extra)))
    h = 5
    data = _draw(rng, op, 6, 3, 4, h, 2 if direction == "bidirectional" else 1)
    got, want = _ort_case(op, opset, direction, acts, extra, data, h, output_sequence)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=1e-5, atol=1e-5, what=f"{op} {direction} output {k}")


@pytest.mark.parametrize("op,opset,direction,acts,extra",
                         [("rnn", "iOS17", "reverse", ["tanh"], {}), ("gru", "iOS17", "forward", ["sigmoid", "tanh"], {}),
                          ("gru", "iOS18", "forward", ["sigmoid", "tanh"], {"reset_after": True}),
                          ("lstm", "iOS17", "bidirectional", ["sigmoid", "tanh", "tanh"], {"peephole": True})],
                         ids=["rnn", "gru", "gru-reset_after", "lstm"])
def test_recurrent_fp16_vs_onnxruntime(op: str, opset: str, direction: str, acts: list[str], extra: dict):
    """fp16 (iOS17+): fp16 inputs, fp32 compute, one rounding; the oracle runs fp32 on the same values."""
    rng = np.random.default_rng(11)
    data = _draw(rng, op, 4, 2, 3, 4, 2 if direction == "bidirectional" else 1)
    got, want = _ort_case(op, opset, direction, acts, extra, data, 4, True, dtype=np.float16)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == np.float16
        assert_close(g, w.astype(np.float16), rtol=1e-3, atol=1e-3, what=f"{op} fp16 output {k}")


@pytest.mark.parametrize("op", ["rnn", "gru", "lstm"])
def test_recurrent_saturation_vs_onnxruntime(op: str):
    """Inputs that saturate every gate (+-1e4, +-inf) and -0.0."""
    rng = np.random.default_rng(5)
    data = _draw(rng, op, 4, 4, 3, 3, 1)
    data["x"][1, 0, :] = [1e4, -1e4, 0.0]
    data["x"][2, 1, 0] = np.inf
    data["x"][0, 2, 1] = -np.inf
    data["x"][0, 0, 0] = -0.0
    acts = {"rnn": ["tanh"], "gru": ["sigmoid", "tanh"], "lstm": ["sigmoid", "tanh", "tanh"]}[op]
    got, want = _ort_case(op, "iOS15", "forward", acts, {}, data, 3, True)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=1e-5, atol=1e-5, what=f"{op} saturated output {k}")


@pytest.mark.parametrize("op", ["rnn", "gru", "lstm"])
def test_recurrent_nan_vs_torch(op: str):
    """A NaN poisons its own batch row from its time step on, and nothing else (torch propagates
    NaN like IEEE arithmetic; onnxruntime's clamped activations do not, so it is not used here)."""
    rng = np.random.default_rng(6)
    h = 3
    data = _draw(rng, op, 4, 3, 2, h, 1)
    data["x"][1, 2, 0] = np.nan
    common = {"weight_ih": data["weight_ih"], "weight_hh": data["weight_hh"], "bias": data["bias"],
              "output_sequence": True}
    if op == "gru":
        got = _mil(op, data, "iOS18", input_bias=data["input_bias"], reset_after=True, **common)
        want = _torch_gru(data, h, False)
    elif op == "lstm":
        got, want = _mil(op, data, **common), _torch_lstm(data, h, 1, False)
    else:
        got, want = _mil(op, data, **common), _torch_rnn(data, h, "tanh", False)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=1e-5, atol=1e-5, what=f"{op} NaN output {k}")
    assert np.isnan(got[0][1:, 2]).all() and not np.isnan(got[0][:, :2]).any() and not np.isnan(got[0][0]).any()


# ---------------------------------------------------------------------------------------------
# lstm cell-state clip: an onnxruntime graph of the Core ML cell equations


def _clip_lstm_graph(data: dict, h: int, suffix: str, clip: float, reverse: bool, hd: slice):
    """Nodes computing one direction step by step; returns (nodes, initializers, output names)."""
    nodes, inits = [], {}
    p = f"d{suffix}_"
    inits[p + "WT"] = data[f"weight_ih{suffix}"].T.copy()
    inits[p + "RT"] = data[f"weight_hh{suffix}"].T.copy()
    inits[p + "B"] = data[f"bias{suffix}"]
    for gate, vec in zip("ifo", np.split(data[f"peephole{suffix}"], 3)):
        inits[p + "P" + gate] = vec
    inits[p + "lo"], inits[p + "hi"] = np.float32(-clip), np.float32(clip)
    inits[p + "sl"], inits[p + "el"], inits[p + "ax"] = np.array([hd.start]), np.array([hd.stop]), np.array([1])
    nodes += [helper.make_node("Slice", [n, p + "sl", p + "el", p + "ax"], [p + n]) for n in ("initial_h", "initial_c")]
    h_prev, c_prev = p + "initial_h", p + "initial_c"
    s = data["x"].shape[0]
    ys = []
    for k, t in enumerate(range(s - 1, -1, -1) if reverse else range(s)):
        q = f"{p}t{k}_"
        inits[q + "idx"] = np.array(t)
        nodes += [
            helper.make_node("Gather", ["x", q + "idx"], [q + "x"], axis=0),
            helper.make_node("MatMul", [q + "x", p + "WT"], [q + "xw"]),
            helper.make_node("MatMul", [h_prev, p + "RT"], [q + "hr"]),
            helper.make_node("Add", [q + "xw", q + "hr"], [q + "s"]),
            helper.make_node("Add", [q + "s", p + "B"], [q + "g"]),
            helper.make_node("Split", [q + "g"], [q + "gi", q + "gf", q + "go", q + "gz"], axis=1, num_outputs=4),
            helper.make_node("Mul", [c_prev, p + "Pi"], [q + "pi"]),
            helper.make_node("Add", [q + "gi", q + "pi"], [q + "ai"]),
            helper.make_node("Sigmoid", [q + "ai"], [q + "i"]),
            helper.make_node("Mul", [c_prev, p + "Pf"], [q + "pf"]),
            helper.make_node("Add", [q + "gf", q + "pf"], [q + "af"]),
            helper.make_node("Sigmoid", [q + "af"], [q + "f"]),
            helper.make_node("Tanh", [q + "gz"], [q + "z"]),
            helper.make_node("Mul", [q + "f", c_prev], [q + "fc"]),
            helper.make_node("Mul", [q + "i", q + "z"], [q + "iz"]),
            helper.make_node("Add", [q + "fc", q + "iz"], [q + "c_raw"]),
            helper.make_node("Clip", [q + "c_raw", p + "lo", p + "hi"], [q + "c"]),
            helper.make_node("Mul", [q + "c", p + "Po"], [q + "po"]),
            helper.make_node("Add", [q + "go", q + "po"], [q + "ao"]),
            helper.make_node("Sigmoid", [q + "ao"], [q + "o"]),
            helper.make_node("Tanh", [q + "c"], [q + "tc"]),
            helper.make_node("Mul", [q + "o", q + "tc"], [q + "h"]),
        ]
        h_prev, c_prev = q + "h", q + "c"
        ys.append(h_prev)
    return nodes, inits, ys, h_prev, c_prev


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("clip", [0.05, 0.7, 50.0])
def test_lstm_cell_clip_vs_onnxruntime_graph(direction: str, clip: float):
    rng = np.random.default_rng(int(clip * 100))
    h, dirs = 4, 2 if direction == "bidirectional" else 1
    data = _draw(rng, "lstm", 5, 2, 3, h, dirs, scale=1.0)
    params = {"direction": direction, "output_sequence": True, "clip": np.float32(clip)}
    for s in ("", "_back")[:dirs]:
        params.update({k + s: data[k + s] for k in ("weight_ih", "weight_hh", "bias", "peephole")})
    got = _mil("lstm", data, **params)
    nodes, inits, parts = [], {}, []
    for d, s in enumerate(("", "_back")[:dirs]):
        n, i, ys, hn, cn = _clip_lstm_graph(data, h, s, clip, direction != "forward" and (dirs == 1 or d == 1),
                                            slice(d * h, (d + 1) * h))
        nodes += n
        inits.update(i)
        if dirs == 2 and d == 1:
            ys = ys[::-1]
        parts.append((ys, hn, cn))
    outs = [y for ys, _, _ in parts for y in ys] + [x for _, hn, cn in parts for x in (hn, cn)]
    res = dict(zip(outs, run_onnx(nodes, {k: data[k] for k in ("x", "initial_h", "initial_c")}, outs, inits)))
    seq = np.concatenate([np.stack([res[y] for y in ys]) for ys, _, _ in parts], axis=-1)
    h_fin = np.concatenate([res[hn] for _, hn, _ in parts], -1)
    c_fin = np.concatenate([res[cn] for _, _, cn in parts], -1)
    for k, (g, w) in enumerate(zip(got, [seq, h_fin, c_fin])):
        assert_close(g, w, rtol=1e-5, atol=1e-5, what=f"lstm clip={clip} {direction} output {k}")
    assert np.abs(got[2]).max() <= clip
