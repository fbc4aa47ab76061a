"""simpleRecurrent, gru, uniDirectionalLSTM, biDirectionalLSTM.

Oracles: the spec's equations written below in float64 numpy (every case); torch.nn.RNN / LSTM with
the weights re-ordered (configurations torch has: tanh/relu RNN, sigmoid-tanh-tanh LSTM without
peepholes, forward and bidirectional); onnxmltools + onnxruntime for the classic layers, checked
against the equations first. Where onnxmltools disagrees with the spec (forgetBias, the order of
a reversed output sequence, a cell clip applied to the gate inputs, the [-50, 50] pre-activation
clip) the tests show it with the formula. Every converted model also goes through MIL (same
outputs, coremltools' loader accepts it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import converter
from converter.errors import FormatError
from tests.conftest import MODELS

from .common import builder, check_close, convert_and_run, flexible, load_spec, onnx_oracle, op_types, through_mil

# NeuralNetwork layer kinds this module's models exercise (tests/nn_models/coverage.py checks them)
KINDS_COVERED = {
    "activation",
    "biDirectionalLSTM",
    "embedding",
    "expandDims",
    "gru",
    "innerProduct",
    "loadConstantND",
    "simpleRecurrent",
    "sliceStatic",
    "squeeze",
    "transpose",
    "uniDirectionalLSTM",
}

BUILDER = MODELS / "builder"
PRE_CLIP = 50.0  # the spec's clip() of every gate pre-activation
S, IN, H = 5, 3, 4  # sequence length, input and hidden sizes of the test layers

# -- activations, as the spec defines them ------------------------------------------------------

BUILDER_NAME = {"tanh": "TANH", "sigmoid": "SIGMOID", "ReLU": "RELU", "linear": "LINEAR",
                "scaledTanh": "SCALED_TANH", "sigmoidHard": "SIGMOID_HARD"}
# An empty message (both parameters 0): what the Core ML runtime uses (coremltools writes e.g.
# ``linear {}`` for an identity and its tests of the runtime expect tanh from ``scaledTanh {}``).
# A message with a parameter set is the spec's formula as written (test_recurrent_oracles.py).
UNSET = {"linear": (1.0, 0.0), "scaledTanh": (1.0, 1.0), "sigmoidHard": (0.2, 0.5)}


@dataclass(frozen=True)
class A:
    """A recurrent activation as written in the model: alpha/beta None are left unset (0)."""

    kind: str
    alpha: float | None = None
    beta: float | None = None

    def effective(self) -> tuple[float, float]:
        if not self.alpha and not self.beta:
            return UNSET.get(self.kind, (0.0, 0.0))
        return self.alpha or 0.0, self.beta or 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        a, b = self.effective()
        if self.kind == "tanh":
            return np.tanh(x)
        if self.kind == "sigmoid":
            return 1.0 / (1.0 + np.exp(-x))
        if self.kind == "ReLU":
            return np.maximum(x, 0.0)
        if self.kind == "linear":
            return a * x + b
        if self.kind == "scaledTanh":
            return a * np.tanh(b * x)
        return np.minimum(np.maximum(a * x + b, 0.0), 1.0)  # sigmoidHard

    def write(self, msg: Any) -> None:
        msg.Clear()
        sub = getattr(msg, self.kind)
        sub.SetInParent()
        if self.alpha is not None:
            sub.alpha = self.alpha
        if self.beta is not None:
            sub.beta = self.beta

    def __str__(self) -> str:
        params = "" if self.alpha is None and self.beta is None else f"({self.alpha},{self.beta})"
        return f"{self.kind}{params}"


SIG, TANH, RELU = A("sigmoid"), A("tanh"), A("ReLU")


def gate(f: A, pre: np.ndarray) -> np.ndarray:
    return f(np.clip(pre, -PRE_CLIP, PRE_CLIP))


# -- the spec's equations (float64) --------------------------------------------------------------


def ref_rnn(x, h, w, r, b, f: A, reverse: bool, seq: bool):
    ys = []
    for xt in (x[::-1] if reverse else x):
        h = gate(f, xt @ w.T + h @ r.T + b)
        ys.append(h)
    return (np.stack(ys) if seq else h[None]), h


def ref_gru(x, h, w, r, b, f: A, g: A, reverse: bool, seq: bool):
    """w, r, b: dicts of the z, r, o blocks."""
    ys = []
    for xt in (x[::-1] if reverse else x):
        z = gate(f, xt @ w["z"].T + h @ r["z"].T + b["z"])
        rr = gate(f, xt @ w["r"].T + h @ r["r"].T + b["r"])
        o = gate(g, xt @ w["o"].T + (h * rr) @ r["o"].T + b["o"])
        h = (1 - z) * o + z * h
        ys.append(h)
    return (np.stack(ys) if seq else h[None]), h


def ref_lstm(x, h, c, w, r, b, p, acts, reverse: bool, seq: bool, coupled: bool, clip: float):
    """w, r, b: dicts of the i, f, o, z blocks (b with forgetBias already added); p: i, f, o."""
    f, g, hh = acts
    ys = []
    for xt in (x[::-1] if reverse else x):
        i = gate(f, xt @ w["i"].T + h @ r["i"].T + p["i"] * c + b["i"])
        ff = 1 - i if coupled else gate(f, xt @ w["f"].T + h @ r["f"].T + p["f"] * c + b["f"])
        z = gate(g, xt @ w["z"].T + h @ r["z"].T + b["z"])
        c = np.clip(c * ff + i * z, -clip, clip)
        o = gate(f, xt @ w["o"].T + h @ r["o"].T + p["o"] * c + b["o"])
        h = hh(c) * o
        ys.append(h)
    return (np.stack(ys) if seq else h[None]), h, c


# -- models ------------------------------------------------------------------------------------


def rand(rng: np.random.Generator, *shape: int, scale: float = 0.5) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def gates(rng, names: str, *shape: int, fp16: bool = False) -> dict[str, np.ndarray]:
    """One random block per gate; ``fp16``: values fp16 holds exactly."""
    out = {g: rand(rng, *shape) for g in names}
    return {g: v.astype(np.float16).astype(np.float32) for g, v in out.items()} if fp16 else out


def f64(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.astype(np.float64) for k, v in d.items()}


@dataclass
class Net:
    """A one-layer model, its inputs and the expected outputs."""

    spec: Any
    feeds: dict[str, np.ndarray]
    want: dict[str, np.ndarray]
    layer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _inputs(i_size: int, h_size: int, given: int, nd: bool, batch: int) -> dict:
    """Declared inputs: rank 5 as they are in an ND network, [C] in a rank-5 one."""
    if nd:
        ins = {"x": (S, batch, i_size, 1, 1)}
        ins.update({f"s{k}": (1, batch, h_size, 1, 1) for k in range(given)})
    else:
        ins = {"x": (i_size,)}
        ins.update({f"s{k}": (h_size,) for k in range(given)})
    return ins


def _state_feed(v: np.ndarray, nd: bool) -> np.ndarray:
    return v[None, :, :, None, None] if nd else v.reshape(-1)


@dataclass
class Case:
    kind: str  # rnn, gru, lstm, bilstm
    acts: tuple[A, ...]
    bias: bool = True
    seq: bool = True
    reverse: bool = False
    states: int = -1  # how many initial states are given (-1: all)
    outputs: int = -1  # how many outputs are listed (-1: all)
    peephole: bool = False
    forget_bias: bool = False
    coupled: bool = False
    clip: float = 50000.0  # cellClipThreshold as written
    scale: float = 1.0  # input scale (large: pre-activations beyond +-50)
    nd: bool = False
    batch: int = 1
    acts_back: tuple[A, ...] | None = None
    fast: bool = True  # lowered to the MIL op (else a while_loop)
    fp16: bool = False  # weights stored as float16Value
    name: str = ""

    def __str__(self) -> str:
        return self.name or f"{self.kind}-{'-'.join(map(str, self.acts))}"


def build(case: Case, seed: int = 0) -> Net:
    rng = np.random.default_rng(seed)
    n_dir = 2 if case.kind == "bilstm" else 1
    n_st = 2 if case.kind in ("lstm", "bilstm") else 1
    total = n_dir * n_st
    given = total if case.states < 0 else case.states
    n_out = 1 + total if case.outputs < 0 else case.outputs
    outs = ("y",) + tuple(f"o{k}" for k in range(n_out - 1))
    b = builder(_inputs(IN, H, given, case.nd, case.batch), outs, nd=case.nd)
    x = rand(rng, S, case.batch, IN, scale=case.scale)
    init = [rand(rng, case.batch, H) for _ in range(total)]
    feeds = {"x": x[..., None, None]}  # [S, B, IN, 1, 1]
    feeds.update({f"s{k}": _state_feed(init[k], case.nd) for k in range(given)})
    states = [init[k].astype(np.float64) if k < given else np.zeros((case.batch, H)) for k in range(total)]
    ins = ["x"] + [f"s{k}" for k in range(given)]
    xd = x.astype(np.float64)

    if case.kind == "rnn":
        w, r, bias = rand(rng, H, IN), rand(rng, H, H), rand(rng, H)
        layer = b.add_simple_rnn("rnn", r, w, bias if case.bias else None, H, IN, BUILDER_NAME[case.acts[0].kind],
                                 ins, list(outs), output_all=case.seq, reverse_input=case.reverse)
        case.acts[0].write(layer.simpleRecurrent.activation)
        y, h = ref_rnn(xd, states[0], w.astype(np.float64), r.astype(np.float64),
                       bias.astype(np.float64) if case.bias else 0.0, case.acts[0], case.reverse, case.seq)
        finals = [h]
        extra = {"w": w, "r": r, "b": bias}
    elif case.kind == "gru":
        w, r, bias = gates(rng, "zro", H, IN), gates(rng, "zro", H, H), gates(rng, "zro", H)
        layer = b.add_gru("gru", [r[g] for g in "zro"], [w[g] for g in "zro"],
                          [bias[g] for g in "zro"] if case.bias else None, H, IN, ins, list(outs),
                          output_all=case.seq, reverse_input=case.reverse)
        for msg, a in zip(layer.gru.activations, case.acts):
            a.write(msg)
        bz = f64(bias) if case.bias else dict.fromkeys("zro", 0.0)
        y, h = ref_gru(xd, states[0], f64(w), f64(r), bz, *case.acts, case.reverse, case.seq)
        finals = [h]
        extra = {"w": w, "r": r, "b": bias}
    else:
        dirs = []
        for _ in range(n_dir):
            dirs.append(tuple(gates(rng, g, *shape, fp16=case.fp16) for g, shape in
                              (("ifoz", (H, IN)), ("ifoz", (H, H)), ("ifoz", (H,)), ("ifo", (H,)))))
        common = {"hidden_size": H, "input_size": IN, "input_names": ins, "output_names": list(outs),
                  "peep": None, "output_all": case.seq, "forget_bias": case.forget_bias,
                  "coupled_input_forget_gate": case.coupled, "cell_clip_threshold": case.clip}

        def lists(d):
            w, r, bias, p = d
            return ([r[g] for g in "ifoz"], [w[g] for g in "ifoz"], [bias[g] for g in "ifoz"] if case.bias else None,
                    [p[g] for g in "ifo"] if case.peephole else None)

        if n_dir == 1:
            rr, ww, bb, pp = lists(dirs[0])
            common["peep"] = pp
            layer = b.add_unilstm("lstm", rr, ww, bb, reverse_input=case.reverse, **common)
            msgs = [list(layer.uniDirectionalLSTM.activations)]
        else:
            (rr, ww, bb, pp), (rb, wb, bbb, pb) = lists(dirs[0]), lists(dirs[1])
            common["peep"] = pp
            layer = b.add_bidirlstm("lstm", rr, ww, bb, rb, wb, bbb, peep_back=pb, **common)
            msgs = [list(layer.biDirectionalLSTM.activationsForwardLSTM),
                    list(layer.biDirectionalLSTM.activationsBackwardLSTM)]
        all_acts = [case.acts, case.acts_back or case.acts]
        for d, dir_msgs in enumerate(msgs):
            for msg, a in zip(dir_msgs, all_acts[d]):
                a.write(msg)
        clip = case.clip or 50.0
        ys, finals = [], []
        for d, (w, r, bias, p) in enumerate(dirs):
            bd = f64(bias) if case.bias else dict.fromkeys("ifoz", np.zeros(H))
            if case.forget_bias:
                bd = dict(bd, f=bd["f"] + 1.0)
            pd = f64(p) if case.peephole else dict.fromkeys("ifo", 0.0)
            yd, hd, cd = ref_lstm(xd, states[2 * d], states[2 * d + 1], f64(w), f64(r), bd, pd, all_acts[d],
                                  case.reverse or d == 1, case.seq, case.coupled, clip)
            ys.append(yd[::-1] if d == 1 and case.seq else yd)  # backward outputs at their input positions
            finals += [hd, cd]
        y = np.concatenate(ys, axis=-1)
        extra = {"dirs": dirs}
    if case.fp16:
        _to_fp16(layer)
    want = {"y": y}
    want.update({f"o{k}": finals[k][None] for k in range(n_out - 1)})
    return Net(b.spec, feeds, want, layer, extra)


def _to_fp16(msg: Any) -> None:
    """Store every WeightParams of ``msg`` as float16Value (the references used fp16-exact values)."""
    for fd, val in msg.ListFields():
        if fd.message_type is None:
            continue
        for item in (val if fd.is_repeated else [val]):
            if fd.message_type.name == "WeightParams":
                if len(item.floatValue):
                    item.float16Value = np.asarray(item.floatValue, np.float16).tobytes()
                    item.ClearField("floatValue")
            else:
                _to_fp16(item)


def check(outs: dict[str, Any], want: dict[str, np.ndarray], atol: float = 2e-5, rtol: float = 2e-5) -> None:
    for k, v in want.items():
        check_close(outs[k], v, rtol=rtol, atol=atol, match="size", err_msg=k)


def path_of(prog) -> str:
    ops = op_types(prog)
    fast = bool(ops & {"rnn", "gru", "lstm"})
    assert fast != ("while_loop" in ops), ops
    return "mil-op" if fast else "loop"


# -- cases ---------------------------------------------------------------------------------------

CASES = [
    # simpleRecurrent
    Case("rnn", (TANH,), name="rnn-tanh"),
    Case("rnn", (SIG,), bias=False, seq=False, reverse=True, states=0, name="rnn-sigmoid-nobias-last-reverse"),
    Case("rnn", (RELU,), reverse=True, fast=False, name="rnn-relu-reverse"),
    Case("rnn", (RELU,), scale=40.0, fast=False, name="rnn-relu-clip50"),
    Case("rnn", (A("linear"),), scale=40.0, fast=False, name="rnn-linear-unset-clip50"),
    Case("rnn", (A("linear", 0.5, 0.2),), fast=False, name="rnn-linear-explicit"),
    Case("rnn", (A("scaledTanh"),), name="rnn-scaledtanh-unset"),
    Case("rnn", (A("scaledTanh", 1.7159, 2 / 3),), fast=False, name="rnn-scaledtanh-explicit"),
    Case("rnn", (A("scaledTanh", 1.0, 0.01),), scale=40.0, fast=False, name="rnn-scaledtanh-small-beta-clip50"),
    Case("rnn", (A("sigmoidHard"),), name="rnn-hardsigmoid-unset"),
    Case("rnn", (A("sigmoidHard", 0.3, 0.4),), fast=False, name="rnn-hardsigmoid-explicit"),
    Case("rnn", (A("sigmoidHard", 0.001, 0.5),), scale=40.0, fast=False, name="rnn-hardsigmoid-shallow-clip50"),
    # gru
    Case("gru", (A("sigmoidHard"), TANH), name="gru-hardsigmoid-tanh"),
    Case("gru", (SIG, TANH), bias=False, seq=False, reverse=True, name="gru-sigmoid-nobias-last-reverse"),
    Case("gru", (SIG, TANH), reverse=True, states=0, outputs=1, name="gru-reverse-seq"),
    Case("gru", (RELU, A("linear")), scale=20.0, fast=False, name="gru-relu-linear-clip50"),
    Case("gru", (A("sigmoidHard", 0.25, 0.45), A("scaledTanh", 1.5, 0.8)), fast=False, name="gru-explicit-params"),
    # uniDirectionalLSTM
    Case("lstm", (SIG, TANH, TANH), name="lstm-standard"),
    Case("lstm", (SIG, TANH, TANH), peephole=True, forget_bias=True, clip=0.5, reverse=True,
         name="lstm-peephole-forgetbias-clip-reverse"),
    Case("lstm", (SIG, TANH, TANH), coupled=True, fast=False, name="lstm-coupled"),
    Case("lstm", (SIG, TANH, TANH), bias=False, forget_bias=True, seq=False, name="lstm-forgetbias-without-bias"),
    Case("lstm", (SIG, A("linear"), A("linear")), clip=0.0, scale=30.0, states=0, fast=False,
         name="lstm-clip-default-50"),
    Case("lstm", (RELU, A("scaledTanh", 1.7159, 2 / 3), RELU), peephole=True, fast=False, name="lstm-relu-gates"),
    Case("lstm", (A("sigmoidHard"), TANH, A("linear")), states=1, outputs=1, name="lstm-h-only-y-only"),
    Case("lstm", (SIG, TANH, TANH), seq=False, outputs=2, reverse=True, name="lstm-last-two-outputs"),
    Case("lstm", (SIG, TANH, TANH), peephole=True, fp16=True, name="lstm-fp16-weights"),
    # biDirectionalLSTM
    Case("bilstm", (SIG, TANH, TANH), name="bilstm-standard"),
    Case("bilstm", (SIG, TANH, TANH), peephole=True, forget_bias=True, clip=0.7, seq=False,
         name="bilstm-peephole-forgetbias-clip-last"),
    Case("bilstm", (SIG, TANH, TANH), acts_back=(A("sigmoidHard"), TANH, RELU), fast=False,
         name="bilstm-different-backward-activations"),
    Case("bilstm", (SIG, TANH, TANH), coupled=True, states=2, outputs=3, fast=False, name="bilstm-coupled"),
    # ND network (spec 4): batch 2, rank-5 inputs declared as they are
    Case("lstm", (SIG, TANH, TANH), nd=True, batch=2, peephole=True, name="nd-lstm-batch2"),
    Case("rnn", (RELU,), nd=True, batch=2, states=0, fast=False, name="nd-rnn-relu-batch2"),
    Case("bilstm", (SIG, TANH, TANH), nd=True, batch=2, states=0, name="nd-bilstm-batch2-zero-states"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_layer_vs_spec_equations(case: Case, tmp_path: Path):
    net = build(case)
    outs, prog = convert_and_run(net.spec, net.feeds, tmp_path)
    assert path_of(prog) == ("mil-op" if case.fast else "loop")
    tol = 2e-5 * max(case.scale, 1.0)
    check(outs, net.want, atol=tol, rtol=2e-5)
    assert case.fp16 == any("stored as fp32" in n for n in prog.meta["notes"])


@pytest.mark.parametrize("mode", ["_linear_quantization", "_lookup_table_quantization_linear"])
@pytest.mark.parametrize("name", ["rnn-tanh", "gru-hardsigmoid-tanh", "bilstm-peephole-forgetbias-clip-last"])
def test_quantized_weights(name: str, mode: str, tmp_path: Path):
    """8-bit weights (linear, or a lookup table) quantized by coremltools: the outputs equal those of
    the same model dequantized by coremltools (the dequantized weights' outputs are checked against
    the equations above)."""
    from coremltools.models.neural_network.quantization_utils import _dequantize_nn_spec, _quantize_nn_spec

    net = build(next(c for c in CASES if c.name == name))
    _quantize_nn_spec(net.spec.neuralNetwork, 8, mode)
    assert net.spec.neuralNetwork.layers[0].WhichOneof("layer") is not None
    prog = load_spec(net.spec, tmp_path, "quantized")
    outs = converter.run(prog, net.feeds)
    _dequantize_nn_spec(net.spec.neuralNetwork)
    want = converter.run(load_spec(net.spec, tmp_path, "dequantized"), net.feeds)
    check(outs, {k: np.asarray(v) for k, v in want.items()}, atol=1e-6, rtol=1e-6)
    check(outs, net.want, atol=0.05, rtol=0.05)  # 8 bits are close to the fp32 weights
    assert any("stored as fp32" in n for n in prog.meta["notes"])
    through_mil(prog, net.feeds, tmp_path)


# -- torch ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _torch_state(v: np.ndarray):
    import torch

    return torch.from_numpy(v[None].astype(np.float32))


@pytest.mark.parametrize("act", ["tanh", "relu"])
@pytest.mark.parametrize("reverse", [False, True])
def test_simple_recurrent_vs_torch_rnn(act: str, reverse: bool, torch, tmp_path: Path):
    case = Case("rnn", (TANH if act == "tanh" else RELU,), reverse=reverse, fast=act == "tanh")
    net = build(case, seed=1)
    rnn = torch.nn.RNN(IN, H, nonlinearity=act)
    with torch.no_grad():
        rnn.weight_ih_l0.copy_(torch.from_numpy(net.extra["w"]))
        rnn.weight_hh_l0.copy_(torch.from_numpy(net.extra["r"]))
        rnn.bias_ih_l0.copy_(torch.from_numpy(net.extra["b"]))
        rnn.bias_hh_l0.zero_()
        x = net.feeds["x"][..., 0, 0]
        y, h = rnn(torch.from_numpy(x[::-1].copy() if reverse else x), _torch_state(net.feeds["s0"].reshape(1, H)))
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    # reverseInput: outputs in processing order, as torch gives them for the flipped sequence
    check(outs, {"y": y.numpy(), "o0": h.numpy()}, atol=1e-5, rtol=1e-5)


def _torch_lstm_weights(lstm, dirs) -> None:
    import torch

    order = "ifzo"  # torch's i, f, g, o
    with torch.no_grad():
        for d, (w, r, b, _) in enumerate(dirs):
            sfx = "_reverse" if d else ""
            getattr(lstm, f"weight_ih_l0{sfx}").copy_(torch.from_numpy(np.concatenate([w[g] for g in order])))
            getattr(lstm, f"weight_hh_l0{sfx}").copy_(torch.from_numpy(np.concatenate([r[g] for g in order])))
            getattr(lstm, f"bias_ih_l0{sfx}").copy_(torch.from_numpy(np.concatenate([b[g] for g in order])))
            getattr(lstm, f"bias_hh_l0{sfx}").zero_()


@pytest.mark.parametrize("kind", ["lstm", "bilstm"])
@pytest.mark.parametrize("seq", [True, False])
def test_lstm_vs_torch_lstm(kind: str, seq: bool, torch, tmp_path: Path):
    net = build(Case(kind, (SIG, TANH, TANH), seq=seq), seed=2)
    bi = kind == "bilstm"
    lstm = torch.nn.LSTM(IN, H, bidirectional=bi)
    _torch_lstm_weights(lstm, net.extra["dirs"])
    st = [net.feeds[f"s{k}"].reshape(1, H) for k in range(4 if bi else 2)]
    h0 = torch.from_numpy(np.stack(st[0::2]).astype(np.float32))
    c0 = torch.from_numpy(np.stack(st[1::2]).astype(np.float32))
    with torch.no_grad():
        y, (hn, cn) = lstm(torch.from_numpy(net.feeds["x"][..., 0, 0]), (h0, c0))
    hn, cn = hn.numpy(), cn.numpy()
    want = {"y": y.numpy() if seq else np.concatenate(list(hn), axis=-1)[None]}
    for d in range(2 if bi else 1):
        want[f"o{2 * d}"], want[f"o{2 * d + 1}"] = hn[d][None], cn[d][None]
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    check(outs, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_vs_torch_gru_with_diagonal_output_recursion(reverse: bool, torch, tmp_path: Path):
    """torch's GRU computes ``n = tanh(W_n x + b_n + r * (R_n h))``, the spec ``o = g(W_o x + R_o (r * h)
    + b_o)``: the two agree when R_o is diagonal, which makes torch an oracle for the gate order."""
    rng = np.random.default_rng(10)
    w, r, b = gates(rng, "zro", H, IN), gates(rng, "zro", H, H), gates(rng, "zro", H)
    r["o"] = np.diag(rand(rng, H))
    x, h0 = rand(rng, S, 1, IN), rand(rng, 1, H)
    spec = builder({"x": (IN,), "h0": (H,)}, ("y", "h"))
    spec.add_gru("gru", [r[g] for g in "zro"], [w[g] for g in "zro"], [b[g] for g in "zro"], H, IN, ["x", "h0"],
                 ["y", "h"], activation="TANH", inner_activation="SIGMOID", output_all=True, reverse_input=reverse)
    gru = torch.nn.GRU(IN, H)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(np.concatenate([w["r"], w["z"], w["o"]])))
        gru.weight_hh_l0.copy_(torch.from_numpy(np.concatenate([r["r"], r["z"], r["o"]])))
        gru.bias_ih_l0.copy_(torch.from_numpy(np.concatenate([b["r"], b["z"], b["o"]])))
        gru.bias_hh_l0.zero_()
        y, h = gru(torch.from_numpy(x[::-1].copy() if reverse else x), torch.from_numpy(h0[None]))
    outs, _ = convert_and_run(spec.spec, {"x": x[..., None, None], "h0": h0.reshape(-1)}, tmp_path)
    check(outs, {"y": y.numpy(), "h": h.numpy()}, atol=1e-5, rtol=1e-5)


def test_torch_gru_is_not_the_spec_gru(torch):
    """torch's GRU resets after the recurrent product, ``n = tanh(W x + r * (R h))``; the spec (and
    MIL's gru) multiply first, ``o = g(W x + R (r * h))``: torch is no oracle for gru."""
    rng = np.random.default_rng(3)
    x, h = rand(rng, 1, 1, IN), rand(rng, 1, H)
    w, r, b = gates(rng, "zro", H, IN), gates(rng, "zro", H, H), {g: np.zeros(H, np.float32) for g in "zro"}
    gru = torch.nn.GRU(IN, H)
    with torch.no_grad():
        gru.weight_ih_l0.copy_(torch.from_numpy(np.concatenate([w["r"], w["z"], w["o"]])))
        gru.weight_hh_l0.copy_(torch.from_numpy(np.concatenate([r["r"], r["z"], r["o"]])))
        gru.bias_ih_l0.zero_()
        gru.bias_hh_l0.zero_()
        _, ht = gru(torch.from_numpy(x), torch.from_numpy(h[None]))
    _, spec_h = ref_gru(x.astype(np.float64), h.astype(np.float64), f64(w), f64(r), b, SIG, TANH, False, True)
    assert np.abs(ht.numpy()[0] - spec_h).max() > 1e-3


# -- onnxmltools + onnxruntime -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rnn-tanh", "gru-hardsigmoid-tanh", "lstm-standard", "lstm-coupled",
                                  "gru-sigmoid-nobias-last-reverse", "bilstm-standard", "rnn-hardsigmoid-explicit",
                                  "gru-explicit-params"])
def test_layer_vs_onnxmltools(name: str, tmp_path: Path):
    """Cases where onnxmltools' ONNX form means what the spec says: it agrees with the equations
    (checked first) and with the conversion."""
    net = build(next(c for c in CASES if c.name == name))
    ref = onnx_oracle(net.spec, net.feeds)
    check(ref, net.want, atol=2e-5, rtol=2e-5)
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    check(outs, {k: ref[k] for k in net.want}, atol=2e-5, rtol=2e-5)


def test_onnxmltools_reverse_sequence_order(tmp_path: Path):
    """onnxmltools maps reverseInput to ONNX direction="reverse", whose outputs sit at their input
    positions; Core ML emits them in processing order (y[0] after x[S-1]). Same values, flipped."""
    net = build(next(c for c in CASES if c.name == "gru-reverse-seq"))
    ref = onnx_oracle(net.spec, net.feeds)["y"].reshape(S, 1, H)
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    got = np.asarray(outs["y"]).reshape(S, 1, H)
    np.testing.assert_allclose(got, ref[::-1], atol=2e-5, rtol=2e-5)
    assert np.abs(got - ref).max() > 1e-3


def test_onnxmltools_clip_semantics(tmp_path: Path):
    """onnxmltools passes cellClipThreshold as ONNX ``clip``, which bounds the gate inputs, not the
    cell state: with a small threshold the spec's c_t = clip(c f + i z) is not what it computes."""
    net = build(next(c for c in CASES if c.name == "lstm-peephole-forgetbias-clip-reverse"))
    assert np.abs(net.want["o1"]).max() == pytest.approx(0.5)  # the cell state reaches the clip
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    check(outs, net.want)
    ref = onnx_oracle(net.spec, net.feeds)
    assert np.abs(ref["o1"].reshape(-1) - net.want["o1"].reshape(-1)).max() > 1e-2


def test_onnxmltools_has_no_preactivation_clip(tmp_path: Path):
    """With pre-activations beyond 50, the spec's clip() shows: relu saturates at 50."""
    net = build(next(c for c in CASES if c.name == "rnn-relu-clip50"))
    outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
    check(outs, net.want, atol=1e-3)
    assert np.asarray(outs["y"]).max() == pytest.approx(50.0)
    ref = onnx_oracle(net.spec, net.feeds)
    assert ref["y"].max() > 50.5


# -- the shared builder models -------------------------------------------------------------------


def _shared(name: str) -> tuple[Path, dict[str, np.ndarray]]:
    path = BUILDER / f"{name}.mlmodel"
    return path, dict(np.load(path.with_suffix(".npz")))


def _spec(path: Path) -> Any:
    from converter.formats.proto import Model_pb2

    m = Model_pb2.Model()
    m.ParseFromString(path.read_bytes())
    return m


def _states(path: Path, feeds: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Feeds with random values for the optional state inputs the .npz leaves out (a converted
    program has no optional inputs: zeros are what Core ML would use when they are absent)."""
    rng = np.random.default_rng(seed)
    out = dict(feeds)
    for f in _spec(path).description.input:
        if f.name not in out:
            out[f.name] = rand(rng, *f.type.multiArrayType.shape)
    return out


@pytest.mark.parametrize("name", ["lstm_unidirectional", "gru"])
def test_shared_model_vs_onnxmltools(name: str, tmp_path: Path):
    path, feeds = _shared(name)
    feeds = _states(path, feeds, 4)
    prog = converter.load(path)
    outs = converter.run(prog, feeds)
    ref = onnx_oracle(_spec(path), feeds)
    assert set(ref) == set(outs)
    check(outs, {k: v.reshape(np.asarray(outs[k]).shape) for k, v in ref.items()}, atol=2e-5, rtol=2e-5)
    through_mil(prog, feeds, tmp_path)


def test_shared_bidirectional_forget_bias(tmp_path: Path):
    """forgetBias adds 1 to b_f (the spec); onnxmltools assumes the 1 is already in the stored
    vector. Folding the 1 into the weights and clearing the flag makes its ONNX form agree."""
    path, feeds = _shared("lstm_bidirectional")
    feeds = _states(path, feeds, 5)
    spec = _spec(path)
    layer = spec.neuralNetwork.layers[0].biDirectionalLSTM
    assert layer.params.forgetBias and layer.params.sequenceOutput
    prog = converter.load(path)
    outs = converter.run(prog, feeds)
    folded = _spec(path)
    lf = folded.neuralNetwork.layers[0].biDirectionalLSTM
    lf.params.forgetBias = False
    for wp in lf.weightParams:
        wp.forgetGateBiasVector.floatValue[:] = [v + 1.0 for v in wp.forgetGateBiasVector.floatValue]
    ref = onnx_oracle(folded, feeds)
    check(outs, {k: v.reshape(np.asarray(outs[k]).shape) for k, v in ref.items()}, atol=2e-5, rtol=2e-5)
    as_shipped = onnx_oracle(spec, feeds)
    assert np.abs(as_shipped["y"].reshape(-1) - np.asarray(outs["y"]).reshape(-1)).max() > 1e-2
    through_mil(prog, feeds, tmp_path)


def test_shared_embedding_simple_rnn(tmp_path: Path):
    """embedding (W[:, token] + bias) then simpleRecurrent (tanh), written from the spec (onnxmltools
    broadcasts the embedding bias wrongly). The model declares the output h_out twice; MIL names
    the second one h_out_out."""
    path, feeds = _shared("embedding_simple_rnn")
    feeds = _states(path, feeds, 6)
    nn = _spec(path).neuralNetwork
    emb, rnn = nn.layers[0].embedding, nn.layers[1].simpleRecurrent
    table = np.asarray(emb.weights.floatValue, np.float64).reshape(emb.outputChannels, emb.inputDim)
    e = table[:, feeds["tokens"].reshape(-1).astype(int)].T + np.asarray(emb.bias.floatValue)
    w = np.asarray(rnn.weightMatrix.floatValue, np.float64).reshape(rnn.outputVectorSize, rnn.inputVectorSize)
    r = np.asarray(rnn.recursionMatrix.floatValue, np.float64).reshape(rnn.outputVectorSize, rnn.outputVectorSize)
    b = np.asarray(rnn.biasVector.floatValue, np.float64)
    y, h = ref_rnn(e[:, None], feeds["h_in"].reshape(1, -1).astype(np.float64), w, r, b, TANH, False, True)
    prog = converter.load(path)
    outs = converter.run(prog, feeds)
    check(outs, {"rnn_out": y, "h_out": h}, atol=1e-5, rtol=1e-5)
    through_mil(prog, feeds, tmp_path, renamed_ok=True)


# -- flexible shapes ------------------------------------------------------------------------------


def test_flexible_batch_and_sequence_zero_states(tmp_path: Path):
    """An ND model whose [Seq, Batch, IN, 1, 1] input has flexible Seq and Batch: the absent initial
    states are zeros of the run-time batch, on both lowerings."""
    for case in (Case("lstm", (SIG, TANH, TANH), nd=True, batch=2, states=0),
                 Case("rnn", (RELU,), nd=True, batch=2, states=0, fast=False)):
        net = build(case, seed=7)
        flexible(net.spec, "x", [1, 1, IN, 1, 1], [10, 4, IN, 1, 1])
        prog = load_spec(net.spec, tmp_path)
        assert path_of(prog) == ("mil-op" if case.fast else "loop")
        check(converter.run(prog, net.feeds), net.want)
        through_mil(prog, net.feeds, tmp_path)
        # another sequence length and batch than the case was built with
        x = rand(np.random.default_rng(9), 3, 3, IN)
        if case.kind == "rnn":
            e = net.extra
            want, _ = ref_rnn(x.astype(np.float64), np.zeros((3, H)), e["w"], e["r"], e["b"], RELU, False, True)
        else:
            w, r, b, _ = net.extra["dirs"][0]
            want, _, _ = ref_lstm(x.astype(np.float64), np.zeros((3, H)), np.zeros((3, H)), f64(w), f64(r), f64(b),
                                  dict.fromkeys("ifo", 0.0), case.acts, False, True, False, 50000.0)
        check(converter.run(prog, {"x": x[..., None, None]}), {"y": want})


# -- malformed layers ----------------------------------------------------------------------------


def _broken(edit, case: Case | None = None) -> Any:
    net = build(case or Case("lstm", (SIG, TANH, TANH)))
    edit(net.spec, net.layer)
    return net.spec


@pytest.mark.parametrize("what, edit, case, message", [
    ("weights of the wrong size", lambda spec, lay: lay.uniDirectionalLSTM.weightParams.forgetGateWeightMatrix.floatValue.pop(),
     None, "forgetGateWeightMatrix"),
    ("missing recursion matrix", lambda spec, lay: lay.simpleRecurrent.recursionMatrix.ClearField("floatValue"),
     Case("rnn", (TANH,)), "recursionMatrix"),
    ("one GRU activation", lambda spec, lay: lay.gru.activations.pop(), Case("gru", (SIG, TANH)), "activations"),
    ("an ELU activation", lambda spec, lay: lay.uniDirectionalLSTM.activations[1].ELU.SetInParent(), None, "ELU"),
    ("one weightParams for two directions", lambda spec, lay: lay.biDirectionalLSTM.weightParams.pop(),
     Case("bilstm", (SIG, TANH, TANH)), "weightParams"),
    ("input size mismatch", lambda spec, lay: spec.description.input[0].type.multiArrayType.shape.__setitem__(0, IN + 1), None,
     "inputVectorSize"),
    ("too many inputs", lambda spec, lay: lay.input.append("x"), Case("gru", (SIG, TANH)), "input"),
])
def test_malformed_layer(what: str, edit, case, message: str, tmp_path: Path):
    spec = _broken(edit, case)
    with pytest.raises(FormatError) as err:
        load_spec(spec, tmp_path)
    text = str(err.value)
    assert message in text, text
    assert err.value.op in ("lstm", "rnn", "gru"), what


# -- a torch model converted to NeuralNetwork by coremltools --------------------------------------


def torch_reference(name: str) -> tuple[Path, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A torch-derived NeuralNetwork model, its inputs and torch's outputs keyed by feature name."""
    import json

    torch_dir = MODELS / "torch"
    outputs = json.loads((torch_dir / "RESULTS.json").read_text())["models"][name]["nn"]["outputs"]
    want = np.load(torch_dir / f"{name}.torch_outputs.npz")
    return (torch_dir / f"{name}_nn.mlmodel", dict(np.load(torch_dir / f"{name}.inputs.npz")),
            {k: want[f"output_{i}"] for i, k in enumerate(outputs)})


def test_torch_lstm_model(tmp_path: Path):
    """torch.nn.LSTM converted by coremltools into an ND network (spec 5) holding a
    uniDirectionalLSTM: its outputs against torch's."""
    path, feeds, want = torch_reference("lstm")
    prog = converter.load(path)
    assert "lstm" in op_types(prog)
    outs = converter.run(prog, feeds)
    check(outs, want, atol=1e-5, rtol=1e-5)
    through_mil(prog, feeds, tmp_path)
