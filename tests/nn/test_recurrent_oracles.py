"""Every recurrent activation, in every position of every recurrent layer, against onnxruntime.

The oracle: onnxruntime running the ONNX op with the same function (RNN, GRU, LSTM), built here
with onnx.helper; the Core ML parameters are mapped to ONNX's from the two specs' texts:

- activations. Core ML (NeuralNetwork.proto, "Recurrent Layers"): Linear ``alpha * x + beta``,
  Sigmoid, Tanh, ReLU, Scaled Hyperbolic Tangent ``alpha * tanh(beta * x)``, Hard Sigmoid
  ``min(max(alpha * x + beta, 0), 1)``. ONNX (RNN/GRU/LSTM): ``Affine(x) - alpha*x + beta``,
  Sigmoid, Tanh, Relu, ``ScaledTanh(x) - alpha*Tanh(beta*x)``, ``HardSigmoid(x) -
  min(max(alpha*x + beta, 0), 1)``. onnxruntime consumes ``activation_alpha``/``activation_beta``
  in the order of the activations, one per activation that takes it (``_onnx_acts``).
- the list positions. Core ML: gru ``z, r = f(...)``, ``o = g(...)``; LSTM ``i, f, o = f(...)``,
  ``z = g(...)`` (block input), ``y = h(c) o``; coremltools' builder writes the lists as
  [inner (f), activation (g)] and [inner (f), cell update (g), output (h)]. ONNX: GRU ``f`` for
  z and r, ``g`` for h; LSTM ``f`` for i, o, f, ``g`` for the cell input, ``h`` for the output;
  bidirectional: the forward list then the reverse list.
- gate orders. Core ML gru fields update (z), reset (r), output (o); ONNX GRU ``W[zrh]``. Core ML
  LSTM fields input, forget, output, blockInput; ONNX LSTM ``W[iofc]``, peepholes ``P[iof]``.
- equations. ONNX GRU with ``linear_before_reset = 0`` is the spec's ``o = g(W_o x + R_o (y * r)
  + b_o)``; ONNX biases ``Wb`` take the Core ML bias, ``Rb`` zeros. ONNX ``clip`` "is applied to the
  input of activations", the spec's ``clip()`` to [-50, 50] (the pre-activations here stay far
  inside it anyway). Bidirectional: ONNX ``Y[t, 1]`` is the backward output at input position t,
  the spec's example ``{[yf_1, yb_3], [yf_2, yb_2], [yf_3, yb_1]}``; Core ML concatenates the two
  directions along C.

The models: distinct activations in every position of a list (swapping two entries changes the
result), forward and backward lists distinct, explicit parameters (1.7159 / (2/3) and 0.2 / 0.5,
the values the spec names, and others), empty messages, random weights, biases, peepholes and
initial states, batch 1 and 2. Each model is built by tests/nn/test_recurrent.py's ``build``
(whose float64 spec equations must agree too) and goes through MIL (``convert_and_run``).

Empty messages and single set fields (issue 7): the spec gives each activation by the formula in
its fields and names no default; coremltools' builder writes ``scaledTanh {}``, ``sigmoidHard {}``
and ``linear {}`` for every recurrent activation, and its tests of the Core ML runtime
(apple/coremltools converters/mil/mil/ops/tests/iOS14/test_recurrent.py, TestLSTM
``test_numpy_numerical``) expect "All activation functions use their standard default values.
This makes tanh equivalent to scaled_tanh, and makes linear a pass through", with hard_sigmoid
``0.2 x + 0.5``. So an empty message is (1, 0), (1, 1), (0.2, 0.5). A message with a field set is
the formula as written: ``linear {alpha: 0, beta: 1}`` is the constant 1 (``test_one_field_set``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.nn_models.coverage import oracle_checks
from tests.oracles.onnx_oracle import run_onnx_node

from .common import compare_with_oracle, convert_and_run
from .test_recurrent import PRE_CLIP, A, Case, Net, build, check

# Layer kinds of this module's models (tests/nn_models/coverage.py)
KINDS_COVERED = {"simpleRecurrent", "gru", "uniDirectionalLSTM", "biDirectionalLSTM"}

# Core ML activation -> ONNX activation, and whether it takes alpha and beta
ONNX_ACT = {"linear": "Affine", "sigmoid": "Sigmoid", "tanh": "Tanh", "ReLU": "Relu", "scaledTanh": "ScaledTanh",
            "sigmoidHard": "HardSigmoid"}
EMPTY = {"linear": (1.0, 0.0), "scaledTanh": (1.0, 1.0), "sigmoidHard": (0.2, 0.5)}  # the runtime's (docstring)
SIG, TANH, RELU = A("sigmoid"), A("tanh"), A("ReLU")
LECUN = (1.7159, 2 / 3)  # scaledTanh values the spec names
HARD = (0.2, 0.5)  # sigmoidHard values the spec names


def _onnx_acts(acts: tuple[A, ...]) -> dict:
    """ONNX activation attributes for ``acts``: alpha and beta of the parameterised ones only,
    in order; an empty message has the runtime's values, a message with a field set its fields."""
    names, alphas, betas = [], [], []
    for a in acts:
        names.append(ONNX_ACT[a.kind])
        if a.kind in EMPTY:
            alpha, beta = (a.alpha or 0.0, a.beta or 0.0)
            if alpha == 0.0 and beta == 0.0:
                alpha, beta = EMPTY[a.kind]
            alphas.append(alpha)
            betas.append(beta)
    attrs: dict = {"activations": names}
    if alphas:
        attrs.update(activation_alpha=alphas, activation_beta=betas)
    return attrs


def _cat(blocks: dict[str, np.ndarray], order: str) -> np.ndarray:
    return np.concatenate([blocks[g] for g in order], axis=0)


def onnx_reference(case: Case, net: Net) -> dict[str, np.ndarray]:
    """onnxruntime's outputs for the model ``build(case)`` made, keyed and shaped as the Core ML
    outputs ([Seq or 1, Batch, H or 2H] for y, [1, Batch, H] for each final state)."""
    assert not (case.reverse or case.coupled or case.forget_bias or case.fp16)  # mapped below: none of these
    x = net.feeds["x"][..., 0, 0]  # [S, B, IN]
    seq, batch = x.shape[:2]
    hid = next(iter(net.want.values())).shape[-1] // (2 if case.kind == "bilstm" else 1)
    n_st = 2 if case.kind in ("lstm", "bilstm") else 1
    n_dir = 2 if case.kind == "bilstm" else 1
    zero = np.zeros((batch, hid), np.float32)  # an absent initial-state input: zeros
    states = [net.feeds[f"s{k}"].reshape(batch, hid) if f"s{k}" in net.feeds else zero
              for k in range(n_dir * n_st)]
    if case.kind == "rnn":
        e = net.extra
        dirs = [(e["w"], e["r"], e["b"] if case.bias else np.zeros(hid, np.float32), None)]
        op, attrs, acts = "RNN", {}, case.acts
    elif case.kind == "gru":
        e = net.extra
        b = _cat(e["b"], "zro") if case.bias else np.zeros(3 * hid, np.float32)
        dirs = [(_cat(e["w"], "zro"), _cat(e["r"], "zro"), b, None)]  # ONNX W[zrh]
        op, attrs, acts = "GRU", {"linear_before_reset": 0}, case.acts
    else:
        dirs = []
        for w, r, b, p in net.extra["dirs"]:
            bias = _cat(b, "iofz") if case.bias else np.zeros(4 * hid, np.float32)
            dirs.append((_cat(w, "iofz"), _cat(r, "iofz"), bias, _cat(p, "iof") if case.peephole else None))
        op, attrs = "LSTM", {}
        acts = case.acts + ((case.acts_back or case.acts) if n_dir == 2 else ())
    inits = {"W": np.stack([d[0] for d in dirs]), "R": np.stack([d[1] for d in dirs]),
             "B": np.stack([np.concatenate([d[2], np.zeros_like(d[2])]) for d in dirs]),
             "initial_h": np.stack(states[0::n_st])}
    order = ["x", "W", "R", "B", "", "initial_h"]
    if n_st == 2:
        inits["initial_c"] = np.stack(states[1::n_st])
        order.append("initial_c")
        if case.peephole:
            inits["P"] = np.stack([d[3] for d in dirs])
            order.append("P")
    attrs.update(_onnx_acts(acts), hidden_size=hid, clip=PRE_CLIP,
                 direction="bidirectional" if n_dir == 2 else "forward")
    outs = run_onnx_node(op, {"x": x}, attrs, n_outputs=1 + n_st, initializers=inits, input_order=order)
    y, finals = outs[0], outs[1:]  # Y [S, dirs, B, H]; Y_h, Y_c [dirs, B, H]
    want = {"y": (y.transpose(0, 2, 1, 3).reshape(seq, batch, n_dir * hid) if case.seq
                  else finals[0].transpose(1, 0, 2).reshape(1, batch, n_dir * hid))}
    for d in range(n_dir):
        for k in range(n_st):
            want[f"o{d * n_st + k}"] = finals[k][d][None]
    return {k: v for k, v in want.items() if k in net.want}


def check_against_onnxruntime(cases: list[Case], tmp_path: Path) -> None:
    """Each case converted and run: equal to onnxruntime's op (and to the spec's equations)."""
    for case in cases:
        net = build(case, seed=11)
        ref = onnx_reference(case, net)
        assert set(ref) == set(net.want), case
        outs, _ = convert_and_run(net.spec, net.feeds, tmp_path)
        for k, v in ref.items():
            compare_with_oracle(outs[k], v, oracle="onnxruntime", rtol=2e-5, atol=2e-5, match="size",
                                err_msg=f"{case.name}: {k}")
        check(outs, net.want)


# -- simpleRecurrent ----------------------------------------------------------------------------


@oracle_checks("simpleRecurrent.activation.linear", "simpleRecurrent.activation.ReLU",
               "simpleRecurrent.activation.scaledTanh", "simpleRecurrent.activation.sigmoid",
               "simpleRecurrent.activation.sigmoidHard", "simpleRecurrent.activation.tanh")
def test_simple_recurrent_activations(tmp_path: Path):
    check_against_onnxruntime([
        Case("rnn", (A("linear", 0.6, 0.25),), name="rnn-linear"),
        Case("rnn", (A("linear"),), name="rnn-linear-empty"),
        Case("rnn", (RELU,), nd=True, batch=2, name="rnn-relu-batch2"),
        Case("rnn", (A("scaledTanh", *LECUN),), name="rnn-scaledtanh-lecun"),
        Case("rnn", (A("scaledTanh", 1.3, 0.45),), bias=False, seq=False, name="rnn-scaledtanh-last"),
        Case("rnn", (A("scaledTanh"),), name="rnn-scaledtanh-empty"),
        Case("rnn", (SIG,), name="rnn-sigmoid"),
        Case("rnn", (A("sigmoidHard", *HARD),), name="rnn-hardsigmoid-spec"),
        Case("rnn", (A("sigmoidHard", 0.35, 0.6),), name="rnn-hardsigmoid"),
        Case("rnn", (A("sigmoidHard"),), name="rnn-hardsigmoid-empty"),
        Case("rnn", (TANH,), nd=True, batch=2, states=0, name="rnn-tanh-zero-state"),
    ], tmp_path)


# -- gru: [f (z, r), g (o)] ----------------------------------------------------------------------


@oracle_checks("gru.activations.linear", "gru.activations.ReLU", "gru.activations.scaledTanh",
               "gru.activations.sigmoid", "gru.activations.sigmoidHard", "gru.activations.tanh")
def test_gru_activations(tmp_path: Path):
    check_against_onnxruntime([
        Case("gru", (SIG, A("linear", 0.8, 0.1)), name="gru-sigmoid-linear"),
        Case("gru", (A("linear", 0.5, 0.3), SIG), name="gru-linear-sigmoid"),  # the swapped pair
        Case("gru", (RELU, A("scaledTanh", *LECUN)), nd=True, batch=2, name="gru-relu-scaledtanh"),
        Case("gru", (A("scaledTanh", 1.3, 0.45), RELU), seq=False, name="gru-scaledtanh-relu-last"),
        Case("gru", (A("sigmoidHard", *HARD), TANH), name="gru-hardsigmoid-tanh"),
        Case("gru", (TANH, A("sigmoidHard", 0.35, 0.6)), bias=False, name="gru-tanh-hardsigmoid"),
        Case("gru", (A("sigmoidHard"), A("scaledTanh")), name="gru-empty-messages"),
        Case("gru", (A("linear"), A("sigmoidHard")), name="gru-empty-messages-2"),
    ], tmp_path)


# -- uniDirectionalLSTM: [f (i, f, o), g (z), h (output)] -----------------------------------------


@oracle_checks("uniDirectionalLSTM.activations.linear", "uniDirectionalLSTM.activations.ReLU",
               "uniDirectionalLSTM.activations.scaledTanh", "uniDirectionalLSTM.activations.sigmoid",
               "uniDirectionalLSTM.activations.sigmoidHard", "uniDirectionalLSTM.activations.tanh")
def test_uni_lstm_activations(tmp_path: Path):
    check_against_onnxruntime([
        Case("lstm", (A("sigmoidHard", *HARD), A("scaledTanh", *LECUN), A("linear", 0.6, 0.25)), peephole=True,
             name="lstm-hardsigmoid-scaledtanh-linear"),
        Case("lstm", (A("linear", 0.5, 0.3), A("sigmoidHard", 0.35, 0.6), A("scaledTanh", 1.3, 0.45)),
             name="lstm-linear-hardsigmoid-scaledtanh"),
        Case("lstm", (A("scaledTanh", 1.3, 0.45), A("linear", 0.5, 0.3), A("sigmoidHard", 0.35, 0.6)),
             peephole=True, nd=True, batch=2, name="lstm-scaledtanh-linear-hardsigmoid"),
        Case("lstm", (SIG, RELU, TANH), seq=False, name="lstm-sigmoid-relu-tanh-last"),
        Case("lstm", (SIG, TANH, RELU), name="lstm-sigmoid-tanh-relu"),
        Case("lstm", (A("sigmoidHard"), A("scaledTanh"), A("linear")), bias=False, name="lstm-empty-messages"),
    ], tmp_path)


# -- biDirectionalLSTM: the forward list, then the backward list ----------------------------------


@oracle_checks("biDirectionalLSTM.activationsForwardLSTM.linear", "biDirectionalLSTM.activationsForwardLSTM.ReLU",
               "biDirectionalLSTM.activationsForwardLSTM.scaledTanh", "biDirectionalLSTM.activationsForwardLSTM.sigmoid",
               "biDirectionalLSTM.activationsForwardLSTM.sigmoidHard", "biDirectionalLSTM.activationsForwardLSTM.tanh",
               "biDirectionalLSTM.activationsBackwardLSTM.linear", "biDirectionalLSTM.activationsBackwardLSTM.ReLU",
               "biDirectionalLSTM.activationsBackwardLSTM.scaledTanh", "biDirectionalLSTM.activationsBackwardLSTM.sigmoid",
               "biDirectionalLSTM.activationsBackwardLSTM.sigmoidHard", "biDirectionalLSTM.activationsBackwardLSTM.tanh")
def test_bi_lstm_activations(tmp_path: Path):
    check_against_onnxruntime([
        Case("bilstm", (A("sigmoidHard", *HARD), A("scaledTanh", *LECUN), A("linear", 0.6, 0.25)),
             acts_back=(SIG, RELU, A("scaledTanh", 1.3, 0.45)), peephole=True, name="bilstm-1"),
        Case("bilstm", (SIG, RELU, A("scaledTanh", 1.3, 0.45)),
             acts_back=(A("sigmoidHard", *HARD), A("scaledTanh", *LECUN), A("linear", 0.6, 0.25)),
             nd=True, batch=2, name="bilstm-1-swapped-directions"),
        Case("bilstm", (A("linear", 0.5, 0.3), A("sigmoidHard", 0.35, 0.6), TANH),
             acts_back=(A("sigmoidHard", 0.3, 0.45), TANH, A("linear", 0.7, -0.2)), seq=False, name="bilstm-2"),
        Case("bilstm", (A("sigmoidHard"), A("scaledTanh"), A("linear")),
             acts_back=(SIG, A("linear"), A("scaledTanh")), name="bilstm-empty-messages"),
        Case("bilstm", (SIG, TANH, RELU), acts_back=(RELU, A("scaledTanh", *LECUN), A("sigmoidHard")),
             peephole=True, name="bilstm-3"),
    ], tmp_path)


# -- parameters left 0 ----------------------------------------------------------------------------


@pytest.mark.parametrize("act, formula", [
    (A("linear", 0.0, 1.0), "0 * x + 1"),  # only beta set: the constant 1, not x + 1
    (A("linear", 0.0, -0.4), "0 * x - 0.4"),
    (A("linear", 0.7, 0.0), "0.7 * x"),
    (A("sigmoidHard", 0.3, 0.0), "min(max(0.3 x, 0), 1)"),  # not 0.3 x + 0.5
    (A("sigmoidHard", 0.0, 0.3), "min(max(0.3, 0), 1)"),  # not 0.2 x + 0.3
    (A("scaledTanh", 1.5, 0.0), "1.5 tanh(0 x)"),  # 0, not 1.5 tanh(x)
    (A("scaledTanh", 0.0, 0.8), "0 tanh(0.8 x)"),
], ids=str)
def test_one_field_set(act: A, formula: str, tmp_path: Path):
    """A recurrent activation with one field set and the other 0 is the spec's formula with that 0
    (module docstring; before, the 0 was read as "unset" and replaced by the empty message's value:
    linear {alpha: 0, beta: 1} gave x + 1). Each layer is a simpleRecurrent around it; onnxruntime
    runs the formula with the same two numbers."""
    check_against_onnxruntime([Case("rnn", (act,), name=f"rnn-{formula}")], tmp_path)
