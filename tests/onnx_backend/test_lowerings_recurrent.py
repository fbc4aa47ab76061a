"""lstm / gru / rnn through the ONNX backend, run by onnxruntime.

Oracles: torch.nn.LSTM / GRU / RNN with the weights copied in torch's gate order (torch stacks
lstm gates i, f, g, o and gru gates r, z, n; MIL i, f, o, g and r, o(n), z), and, where torch has
no such layer (peepholes, cell clipping, the iOS15 gru that resets before the recurrent product,
other activations), the step formulas of the MIL documentation written here. Every case is also
compared with our interpreter on the same program. Weights, biases and initial states are
distinct random values (no symmetric parameter can hide a swapped gate).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .helpers import assert_close, op_types, program, run_both

S, B, IN, H = 5, 2, 3, 4
RNG = np.random.default_rng(12)


def rand(*shape: int, scale: float = 0.6) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


X = rand(S, B, IN, scale=1.0)
H0 = rand(B, H)
C0 = rand(B, H)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


ACT = {"sigmoid": sigmoid, "tanh": np.tanh, "scaled_tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
       "linear": lambda x: x, "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1)}


def _mil_to_torch_lstm(w: np.ndarray) -> np.ndarray:
    i, f, o, g = np.split(w, 4)
    return np.concatenate([i, f, g, o])


def _mil_to_torch_gru(w: np.ndarray) -> np.ndarray:
    r, n, z = np.split(w, 3)
    return np.concatenate([r, z, n])


def lstm_formula(x, h, c, w_ih, w_hh, b, peep=None, acts=("sigmoid", "tanh", "tanh"), clip=None, reverse=False):
    """MIL lstm, one direction: gates i, f, o, g; outputs in processing order."""
    rec, cell, out = (ACT[a] for a in acts)
    hid = w_hh.shape[1]
    p = np.zeros(3 * hid) if peep is None else peep
    ys = []
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        gi, gf, go, gg = np.split(x[t] @ w_ih.T + h @ w_hh.T + b, 4, axis=-1)
        i = rec(gi + p[:hid] * c)
        f = rec(gf + p[hid:2 * hid] * c)
        c = f * c + i * cell(gg)
        if clip is not None:
            c = np.clip(c, -clip, clip)
        h = rec(go + p[2 * hid:] * c) * out(c)
        ys.append(h)
    return np.stack(ys), h, c


def gru_formula(x, h, w_ih, w_hh, b_in, b_hid, reset_after, acts=("sigmoid", "tanh"), reverse=False):
    """MIL gru: gates r, o (new), z; h' = (1 - z) n + z h."""
    rec, act = (ACT[a] for a in acts)
    ys = []
    wr, wo, wz = np.split(w_hh, 3)
    br, bo, bz = np.split(b_hid, 3)
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        xr, xo, xz = np.split(x[t] @ w_ih.T + b_in, 3, axis=-1)
        r = rec(xr + h @ wr.T + br)
        z = rec(xz + h @ wz.T + bz)
        n = act(xo + r * (h @ wo.T + bo)) if reset_after else act(xo + (r * h) @ wo.T + bo)
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


def _lstm_weights(hidden: int = H):
    return rand(4 * hidden, IN), rand(4 * hidden, hidden), rand(4 * hidden)


def _run(prog, feeds):
    got, interp = run_both(prog, feeds)
    return [got[k] for k in interp], list(interp.values())


@pytest.mark.parametrize("seq_out", [True, False])
def test_lstm_forward_matches_torch(seq_out: bool) -> None:
    w_ih, w_hh, b = _lstm_weights()
    prog = program({"x": X, "h0": H0, "c0": C0}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, output_sequence=seq_out))
    got, interp = _run(prog, {"x": X, "h0": H0, "c0": C0})
    t = torch.nn.LSTM(IN, H)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(w_ih)))
        t.weight_hh_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(w_hh)))
        t.bias_ih_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(b)))
        t.bias_hh_l0.zero_()
        y, (h, c) = t(torch.from_numpy(X), (torch.from_numpy(H0)[None], torch.from_numpy(C0)[None]))
    want_y = y.numpy() if seq_out else h.numpy()
    for g, w in zip(got, [want_y, h[0].numpy(), c[0].numpy()]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert "LSTM" in op_types(prog)


def test_lstm_reverse_outputs_in_processing_order() -> None:
    """MIL's reverse output sequence is not flipped back: out[0] is the state after x[s-1] (torch
    run forward on the reversed sequence)."""
    w_ih, w_hh, b = _lstm_weights()
    prog = program({"x": X, "h0": H0, "c0": C0}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, output_sequence=True,
        direction="reverse"))
    got, interp = _run(prog, {"x": X, "h0": H0, "c0": C0})
    t = torch.nn.LSTM(IN, H)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(w_ih)))
        t.weight_hh_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(w_hh)))
        t.bias_ih_l0.copy_(torch.from_numpy(_mil_to_torch_lstm(b)))
        t.bias_hh_l0.zero_()
        y, (h, c) = t(torch.from_numpy(X[::-1].copy()), (torch.from_numpy(H0)[None], torch.from_numpy(C0)[None]))
    for g, w in zip(got, [y.numpy(), h[0].numpy(), c[0].numpy()]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)


def test_lstm_bidirectional_matches_torch() -> None:
    fw, bw = _lstm_weights(), _lstm_weights()
    h0, c0 = rand(B, 2 * H), rand(B, 2 * H)
    prog = program({"x": X, "h0": h0, "c0": c0}, lambda bb, x, h, c: bb.lstm(
        x=x, initial_h=h, initial_c=c, weight_ih=fw[0], weight_hh=fw[1], bias=fw[2], weight_ih_back=bw[0],
        weight_hh_back=bw[1], bias_back=bw[2], direction="bidirectional", output_sequence=True))
    got, interp = _run(prog, {"x": X, "h0": h0, "c0": c0})
    t = torch.nn.LSTM(IN, H, bidirectional=True)
    with torch.no_grad():
        for sfx, (wi, wh, bb) in (("", fw), ("_reverse", bw)):
            getattr(t, "weight_ih_l0" + sfx).copy_(torch.from_numpy(_mil_to_torch_lstm(wi)))
            getattr(t, "weight_hh_l0" + sfx).copy_(torch.from_numpy(_mil_to_torch_lstm(wh)))
            getattr(t, "bias_ih_l0" + sfx).copy_(torch.from_numpy(_mil_to_torch_lstm(bb)))
            getattr(t, "bias_hh_l0" + sfx).zero_()
        states = [torch.from_numpy(np.stack([s[:, :H], s[:, H:]])) for s in (h0, c0)]
        y, (h, c) = t(torch.from_numpy(X), tuple(states))
    want = [y.numpy(), np.concatenate([h[0], h[1]], -1), np.concatenate([c[0], c[1]], -1)]
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_peephole_matches_formula(direction: str) -> None:
    w_ih, w_hh, b = _lstm_weights()
    peep = np.concatenate([np.full(H, 0.9), np.full(H, -0.7), np.full(H, 0.4)]).astype(np.float32) * rand(3 * H)
    prog = program({"x": X, "h0": H0, "c0": C0}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, peephole=peep,
        output_sequence=True, direction=direction))
    got, interp = _run(prog, {"x": X, "h0": H0, "c0": C0})
    want = lstm_formula(X, H0, C0, w_ih, w_hh, b, peep=peep, reverse=direction == "reverse")
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert "LSTM" in op_types(prog)


def test_lstm_clip_bounds_the_cell_state() -> None:
    """MIL clips c after its update (ONNX's clip would bound the gate inputs): unrolled."""
    w_ih, w_hh, b = (w * 3 for w in _lstm_weights())
    peep = rand(3 * H)
    prog = program({"x": X, "h0": H0, "c0": C0}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, peephole=peep, clip=0.35,
        output_sequence=True))
    got, interp = _run(prog, {"x": X, "h0": H0, "c0": C0})
    want = lstm_formula(X, H0, C0, w_ih, w_hh, b, peep=peep, clip=0.35)
    assert np.max(np.abs(want[2])) == pytest.approx(0.35)  # the clip is active
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert "LSTM" not in op_types(prog)


@pytest.mark.parametrize("acts", [("hard_sigmoid", "relu", "scaled_tanh"), ("sigmoid", "linear", "tanh"),
                                  ("tanh", "sigmoid", "relu")])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_activations(acts: tuple[str, str, str], direction: str) -> None:
    fw, bw = _lstm_weights(), _lstm_weights()
    d = 2 if direction == "bidirectional" else 1
    h0, c0 = rand(B, d * H), rand(B, d * H)
    back = dict(weight_ih_back=bw[0], weight_hh_back=bw[1], bias_back=bw[2]) if d == 2 else {}
    prog = program({"x": X, "h0": h0, "c0": c0}, lambda bb, x, h, c: bb.lstm(
        x=x, initial_h=h, initial_c=c, weight_ih=fw[0], weight_hh=fw[1], bias=fw[2], direction=direction,
        recurrent_activation=acts[0], cell_activation=acts[1], activation=acts[2], output_sequence=True, **back))
    got, interp = _run(prog, {"x": X, "h0": h0, "c0": c0})
    yf, hf, cf = lstm_formula(X, h0[:, :H], c0[:, :H], *fw, acts=acts)
    want = [yf, hf, cf]
    if d == 2:
        yb, hb, cb = lstm_formula(X, h0[:, H:], c0[:, H:], *bw, acts=acts, reverse=True)
        want = [np.concatenate([yf, yb[::-1]], -1), np.concatenate([hf, hb], -1), np.concatenate([cf, cb], -1)]
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert ("LSTM" in op_types(prog)) == ("linear" not in acts)


def _torch_gru(w_ih, w_hh, b_in, b_hid):
    t = torch.nn.GRU(IN, H)
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(_mil_to_torch_gru(w_ih)))
        t.weight_hh_l0.copy_(torch.from_numpy(_mil_to_torch_gru(w_hh)))
        t.bias_ih_l0.copy_(torch.from_numpy(_mil_to_torch_gru(b_in)))
        t.bias_hh_l0.copy_(torch.from_numpy(_mil_to_torch_gru(b_hid)))
    return t


def test_gru_ios18_reset_after_matches_torch() -> None:
    w_ih, w_hh, b_in, b_hid = rand(3 * H, IN), rand(3 * H, H), rand(3 * H), rand(3 * H)
    prog = program({"x": X, "h0": H0}, lambda bb, x, h0: bb.gru(
        x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=b_hid, input_bias=b_in, reset_after=True,
        output_sequence=True), opset="iOS18")
    got, interp = _run(prog, {"x": X, "h0": H0})
    with torch.no_grad():
        y, h = _torch_gru(w_ih, w_hh, b_in, b_hid)(torch.from_numpy(X), torch.from_numpy(H0)[None])
    for g, w in zip(got, [y.numpy(), h[0].numpy()]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert "GRU" in op_types(prog)


@pytest.mark.parametrize("opset", ["iOS15", "iOS18"])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_gru_reset_before_matches_formula(opset: str, direction: str) -> None:
    """n = act(W_o x + R_o (r * h) + b): ONNX linear_before_reset=0; the iOS18 gru with input_bias
    and reset_after=False; the iOS15 gru's one bias."""
    w_ih, w_hh, b_in, b_hid = rand(3 * H, IN), rand(3 * H, H), rand(3 * H), rand(3 * H)
    extra = dict(input_bias=b_in, reset_after=False) if opset == "iOS18" else {}
    bias = b_hid if opset == "iOS18" else b_in
    prog = program({"x": X, "h0": H0}, lambda bb, x, h0: bb.gru(
        x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=bias, direction=direction, output_sequence=True,
        **extra), opset=opset)
    got, interp = _run(prog, {"x": X, "h0": H0})
    hid = b_hid if opset == "iOS18" else np.zeros(3 * H, np.float32)
    want = gru_formula(X, H0, w_ih, w_hh, b_in, hid, False, reverse=direction == "reverse")
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)


@pytest.mark.parametrize("acts", [("hard_sigmoid", "relu"), ("sigmoid", "linear")])
def test_gru_activations_last_state(acts: tuple[str, str]) -> None:
    w_ih, w_hh, b = rand(3 * H, IN), rand(3 * H, H), rand(3 * H)
    prog = program({"x": X, "h0": H0}, lambda bb, x, h0: bb.gru(
        x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=b, recurrent_activation=acts[0],
        activation=acts[1]))
    got, interp = _run(prog, {"x": X, "h0": H0})
    ys, h = gru_formula(X, H0, w_ih, w_hh, b, np.zeros(3 * H), False, acts=acts)
    for g, w in zip(got, [h[None], h]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)


@pytest.mark.parametrize("act", ["tanh", "relu"])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_rnn_matches_torch(act: str, direction: str) -> None:
    w_ih, w_hh, b = rand(H, IN), rand(H, H), rand(H)
    prog = program({"x": X, "h0": H0}, lambda bb, x, h0: bb.rnn(
        x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=b, activation=act, output_sequence=True,
        direction=direction))
    got, interp = _run(prog, {"x": X, "h0": H0})
    t = torch.nn.RNN(IN, H, nonlinearity=act)
    xs = X[::-1].copy() if direction == "reverse" else X
    with torch.no_grad():
        t.weight_ih_l0.copy_(torch.from_numpy(w_ih))
        t.weight_hh_l0.copy_(torch.from_numpy(w_hh))
        t.bias_ih_l0.copy_(torch.from_numpy(b))
        t.bias_hh_l0.zero_()
        y, h = t(torch.from_numpy(xs), torch.from_numpy(H0)[None])
    for g, w in zip(got, [y.numpy(), h[0].numpy()]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)


def test_rnn_linear_is_unrolled() -> None:
    w_ih, w_hh, b = rand(H, IN), rand(H, H), rand(H)
    prog = program({"x": X, "h0": H0}, lambda bb, x, h0: bb.rnn(
        x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=b, activation="linear", output_sequence=True))
    got, interp = _run(prog, {"x": X, "h0": H0})
    h, ys = H0.astype(np.float64), []
    for t in range(S):
        h = X[t] @ w_ih.T + h @ w_hh.T + b
        ys.append(h)
    for g, w in zip(got, [np.stack(ys), h]):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
    assert "RNN" not in op_types(prog)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_lstm_fp16_computes_in_fp32_and_rounds_once(clip: float | None) -> None:
    w_ih, w_hh, b = (w.astype(np.float16) for w in _lstm_weights())
    x16, h16, c16 = X.astype(np.float16), H0.astype(np.float16), C0.astype(np.float16)
    prog = program({"x": x16, "h0": h16, "c0": c16}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, output_sequence=True,
        clip=None if clip is None else np.float16(clip)), opset="iOS17")
    got, interp = _run(prog, {"x": x16, "h0": h16, "c0": c16})
    want = lstm_formula(x16.astype(np.float32), h16.astype(np.float32), c16.astype(np.float32),
                        *(w.astype(np.float32) for w in (w_ih, w_hh, b)), clip=clip)
    for g, w, i in zip(got, want, interp):
        assert g.dtype == np.float16
        assert_close(g, w, 1e-3)
        np.testing.assert_array_equal(g, i)


@pytest.mark.parametrize("opset", [17, 19])
def test_recurrent_at_older_opsets(opset: int) -> None:
    w_ih, w_hh, b = _lstm_weights()
    prog = program({"x": X, "h0": H0, "c0": C0}, lambda bb, x, h0, c0: bb.lstm(
        x=x, initial_h=h0, initial_c=c0, weight_ih=w_ih, weight_hh=w_hh, bias=b, output_sequence=True,
        direction="reverse"))
    got, interp = run_both(prog, {"x": X, "h0": H0, "c0": C0}, opset=opset)
    for k in interp:
        assert_close(got[k], interp[k], 1e-5)
    assert_close(list(interp.values())[0], lstm_formula(X, H0, C0, w_ih, w_hh, b, reverse=True)[0], 1e-5)


def test_lstm_with_compressed_weights_larger_than_a_parameter() -> None:
    """weight_ih an 8-bit affine dequantization (16 KB dense: more than compile-time parameters
    may hold), weight_hh a 4-bit palette: decompressed at conversion time into the LSTM's W/R."""
    from converter.ir.bitpack import pack_subbyte

    hidden, inputs = 32, 32
    q = RNG.integers(0, 256, (4 * hidden, inputs)).astype(np.uint8)
    scale = np.float32(0.004)
    lut = np.linspace(-0.3, 0.25, 16, dtype=np.float32)
    codes = RNG.integers(0, 16, (4 * hidden, hidden)).astype(np.uint8)
    x = rand(S, B, inputs, scale=1.0)
    h0, c0 = rand(B, hidden), rand(B, hidden)

    def body(bb, x, h, c):  # noqa: ANN001, ANN202
        w_ih = bb.constexpr_affine_dequantize(quantized_data=q, scale=scale, zero_point=np.uint8(128), axis=np.int32(0))
        w_hh = bb.constexpr_lut_to_dense(indices=pack_subbyte(codes.reshape(-1), 4), lut=lut,
                                         shape=np.array([4 * hidden, hidden], np.uint32))
        return list(bb.lstm(x=x, initial_h=h, initial_c=c, weight_ih=w_ih, weight_hh=w_hh, output_sequence=True))

    prog = program({"x": x, "h0": h0, "c0": c0}, body, opset="iOS16")
    got, interp = _run(prog, {"x": x, "h0": h0, "c0": c0})
    w_ih = (q.astype(np.float32) - 128) * scale
    w_hh = lut[codes]
    want = lstm_formula(x, h0, c0, w_ih, w_hh, np.zeros(4 * hidden, np.float32))
    for g, w in zip(got, want):
        assert_close(g, w, 1e-5)
    for g, w in zip(got, interp):
        assert_close(g, w, 1e-5)
