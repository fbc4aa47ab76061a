"""rnn / gru / lstm -> simpleRecurrent / gru / uniDirectionalLSTM / biDirectionalLSTM.

Oracles: torch.nn.RNN and torch.nn.LSTM (their weights re-stacked into the IR's gate order: torch
ifgo -> IR ifoz), and, where torch has no such layer (GRU with the reset applied before the
recurrent matmul, peepholes, cell clipping, other activations), recurrences written here in numpy
from the IR ops' definitions (converter/ir/ops/recurrent.py docstring). Sizes are all distinct
(S=5, B=3, IN=4, H=6) and states non-zero, so a swapped gate block, transposed matrix or dropped
state shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import converter
from converter.backends.neuralnetwork.lowering import LOWERINGS, load_all
from converter.backends.neuralnetwork.lowering._recurrent_io import unit_axes_between
from converter.errors import UnsupportedError

from .helpers import assert_close, layer_kinds, program, run_nn

S, B, IN, H = 5, 3, 4, 6
RNG = np.random.default_rng(7)


def _rand(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _hard_sigmoid(x: np.ndarray) -> np.ndarray:
    return np.clip(0.2 * x + 0.5, 0.0, 1.0)


def _torch_lstm(x: np.ndarray, h0: np.ndarray, c0: np.ndarray, bidirectional: bool, seed: int = 3):
    """torch's LSTM with random weights, and those weights in the IR layout."""
    torch.manual_seed(seed)
    n_dir = 2 if bidirectional else 1
    b, hid = h0.shape[0], h0.shape[1] // n_dir
    m = torch.nn.LSTM(x.shape[-1], hid, bidirectional=bidirectional)
    with torch.no_grad():
        y, (hn, cn) = m(torch.from_numpy(x), (torch.from_numpy(h0.reshape(b, n_dir, hid).transpose(1, 0, 2).copy()),
                                              torch.from_numpy(c0.reshape(b, n_dir, hid).transpose(1, 0, 2).copy())))

    def ifoz(w: torch.Tensor) -> np.ndarray:  # torch stacks i, f, g(z), o
        i, f, g, o = np.split(w.detach().numpy(), 4)
        return np.concatenate([i, f, o, g]).astype(np.float32)

    params = {}
    for suffix, tag in (("", ""), ("_reverse", "_back"))[:n_dir]:
        params["weight_ih" + tag] = ifoz(getattr(m, f"weight_ih_l0{suffix}"))
        params["weight_hh" + tag] = ifoz(getattr(m, f"weight_hh_l0{suffix}"))
        params["bias" + tag] = ifoz(getattr(m, f"bias_ih_l0{suffix}") + getattr(m, f"bias_hh_l0{suffix}"))
    h = hn.numpy().transpose(1, 0, 2).reshape(b, n_dir * hid)
    c = cn.numpy().transpose(1, 0, 2).reshape(b, n_dir * hid)
    return params, y.numpy(), h, c


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_matches_torch(tmp_path: Path, direction: str) -> None:
    x, h0, c0 = _rand(S, B, IN), _rand(B, H), _rand(B, H)
    xt = x[::-1].copy() if direction == "reverse" else x  # IR reverse: outputs in processing order
    params, y, h, c = _torch_lstm(xt, h0, c0, False)

    def body(b, x, h0, c0):
        return list(b.lstm(x=x, initial_h=h0, initial_c=c0, direction=direction, output_sequence=True,
                           **params, name="lstm"))

    feeds = {"x": x, "h0": h0, "c0": c0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    outs = list(got.values())
    assert_close(outs[0], y)
    assert_close(outs[1], h)
    assert_close(outs[2], c)
    assert layer_kinds(path) == {"uniDirectionalLSTM": 1, "expandDims": 3, "squeeze": 3}


def test_bidirectional_lstm_matches_torch(tmp_path: Path) -> None:
    x, h0, c0 = _rand(S, B, IN), _rand(B, 2 * H), _rand(B, 2 * H)
    params, y, h, c = _torch_lstm(x, h0, c0, True)

    def body(b, x, h0, c0):
        return list(b.lstm(x=x, initial_h=h0, initial_c=c0, direction="bidirectional", output_sequence=True,
                           **params, name="lstm"))

    feeds = {"x": x, "h0": h0, "c0": c0}
    path = tmp_path / "m.mlmodel"
    outs = list(run_nn(program(feeds, body), feeds, path).values())
    assert_close(outs[0], y)
    assert_close(outs[1], h)
    assert_close(outs[2], c)
    kinds = layer_kinds(path)
    assert kinds["biDirectionalLSTM"] == 1 and kinds["splitND"] == 2 and kinds["concatND"] == 2


def _np_lstm(x, h, c, w_ih, w_hh, bias, peep, clip, acts, reverse):
    """The IR lstm's recurrence, one direction (gate blocks i, f, o, z)."""
    rec, cell, out = acts
    p_i, p_f, p_o = np.split(peep, 3)
    ys = []
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        g = x[t] @ w_ih.T + h @ w_hh.T + bias
        g_i, g_f, g_o, g_z = np.split(g, 4, axis=-1)
        i, f = rec(g_i + p_i * c), rec(g_f + p_f * c)
        c = np.clip(f * c + i * cell(g_z), -clip, clip)
        h = rec(g_o + p_o * c) * out(c)
        ys.append(h)
    return np.stack(ys), h, c


def test_lstm_peephole_clip_activations_and_last_output(tmp_path: Path) -> None:
    """Peepholes (i, f, o distinct), a cell clip that bites, hard_sigmoid gates and a linear
    output activation, output_sequence=False, zero initial states left out of the layer."""
    x = _rand(S, B, IN, scale=2.0)
    w_ih, w_hh, bias, peep = _rand(4 * H, IN, scale=1.5), _rand(4 * H, H), _rand(4 * H), _rand(3 * H, scale=1.0)
    zeros = np.zeros((B, H), np.float32)

    def body(b, x):
        return list(b.lstm(x=x, initial_h=zeros, initial_c=zeros, weight_ih=w_ih, weight_hh=w_hh, bias=bias,
                           peephole=peep, clip=np.float32(0.7), recurrent_activation="hard_sigmoid",
                           cell_activation="tanh", activation="linear", output_sequence=False, name="lstm"))

    feeds = {"x": x}
    path = tmp_path / "m.mlmodel"
    outs = list(run_nn(program(feeds, body), feeds, path).values())
    ys, h, c = _np_lstm(x, zeros, zeros, w_ih, w_hh, bias, peep, 0.7, (_hard_sigmoid, np.tanh, lambda v: v), False)
    assert np.max(np.abs(np.clip(c, -0.7, 0.7) - c)) == 0 and np.max(np.abs(c)) == pytest.approx(0.7)  # it bites
    assert_close(outs[0], h[None])
    assert_close(outs[1], h)
    assert_close(outs[2], c)
    assert layer_kinds(path) == {"uniDirectionalLSTM": 1, "expandDims": 1, "squeeze": 3}


def test_lstm_without_clip_is_not_clipped(tmp_path: Path) -> None:
    """No clip in the IR: the cell state grows past 50 (the NN default threshold) and stays so."""
    x = np.ones((12, 1, 1), np.float32)
    w_ih = np.array([[20.0], [20.0], [20.0], [20.0]], np.float32)  # all gates open, z = tanh(20) = 1
    w_hh = np.zeros((4, 1), np.float32)
    c0 = np.full((1, 1), 45.0, np.float32)

    def body(b, x, c0):
        return list(b.lstm(x=x, initial_h=np.zeros((1, 1), np.float32), initial_c=c0, weight_ih=w_ih,
                           weight_hh=w_hh, activation="linear", name="lstm"))

    feeds = {"x": x, "c0": c0}
    outs = list(run_nn(program(feeds, body), feeds, tmp_path / "m.mlmodel").values())
    assert_close(outs[2], [[57.0]])


def _np_gru(x, h, w_ih, w_hh, bias, rec, act, reverse):
    """The IR gru (iOS15): blocks r, o, z; n = act(W_o x + R_o (r * h) + b_o)."""
    w_r, w_o, w_z = np.split(w_ih, 3)
    r_r, r_o, r_z = np.split(w_hh, 3)
    b_r, b_o, b_z = np.split(bias, 3)
    ys = []
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        r = rec(x[t] @ w_r.T + h @ r_r.T + b_r)
        z = rec(x[t] @ w_z.T + h @ r_z.T + b_z)
        n = act(x[t] @ w_o.T + (r * h) @ r_o.T + b_o)
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_gru_matches_the_recurrence(tmp_path: Path, direction: str) -> None:
    x, h0 = _rand(S, B, IN), _rand(B, H)
    w_ih, w_hh, bias = _rand(3 * H, IN), _rand(3 * H, H), _rand(3 * H)

    def body(b, x, h0):
        return list(b.gru(x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=bias, direction=direction,
                          output_sequence=True, recurrent_activation="sigmoid", activation="scaled_tanh", name="gru"))

    feeds = {"x": x, "h0": h0}
    path = tmp_path / "m.mlmodel"
    outs = list(run_nn(program(feeds, body), feeds, path).values())
    ys, h = _np_gru(x, h0, w_ih, w_hh, bias, _sigmoid, np.tanh, direction == "reverse")
    assert_close(outs[0], ys)
    assert_close(outs[1], h)
    assert layer_kinds(path) == {"gru": 1, "expandDims": 2, "squeeze": 2}


def test_gru_ios18_input_bias_is_added_and_reset_after_is_refused(tmp_path: Path) -> None:
    x, h0 = _rand(S, B, IN), _rand(B, H)
    w_ih, w_hh, bias, in_bias = _rand(3 * H, IN), _rand(3 * H, H), _rand(3 * H), _rand(3 * H)

    def body(b, x, h0, reset_after=False):
        return list(b.gru(x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=bias, input_bias=in_bias,
                          reset_after=reset_after, output_sequence=True, name="gru"))

    feeds = {"x": x, "h0": h0}
    outs = list(run_nn(program(feeds, body, opset="iOS18"), feeds, tmp_path / "m.mlmodel").values())
    ys, h = _np_gru(x, h0, w_ih, w_hh, bias + in_bias, _sigmoid, np.tanh, False)
    assert_close(outs[0], ys)
    with pytest.raises(UnsupportedError, match="gru 'gru'.*reset_after"):
        run_nn(program(feeds, lambda b, x, h0: body(b, x, h0, True), opset="iOS18"), feeds, tmp_path / "r.mlmodel")


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_matches_torch(tmp_path: Path, nonlinearity: str) -> None:
    x, h0 = _rand(S, B, IN), _rand(B, H)
    torch.manual_seed(5)
    m = torch.nn.RNN(IN, H, nonlinearity=nonlinearity)
    with torch.no_grad():
        y, hn = m(torch.from_numpy(x), torch.from_numpy(h0[None]))
    w_ih, w_hh = m.weight_ih_l0.detach().numpy(), m.weight_hh_l0.detach().numpy()
    bias = (m.bias_ih_l0 + m.bias_hh_l0).detach().numpy()

    def body(b, x, h0):
        return list(b.rnn(x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=bias, activation=nonlinearity,
                          output_sequence=True, name="rnn"))

    feeds = {"x": x, "h0": h0}
    path = tmp_path / "m.mlmodel"
    outs = list(run_nn(program(feeds, body), feeds, path).values())
    assert_close(outs[0], y.numpy())
    assert_close(outs[1], hn.numpy()[0])
    assert layer_kinds(path) == {"simpleRecurrent": 1, "expandDims": 2, "squeeze": 2}


def test_unused_final_states_get_no_layers(tmp_path: Path) -> None:
    x, h0 = _rand(S, B, IN), _rand(B, H)
    w_ih, w_hh = _rand(H, IN), _rand(H, H)

    def body(b, x, h0):
        y, _ = b.rnn(x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, activation="linear", direction="reverse",
                     output_sequence=True, name="rnn")
        return [y]

    feeds = {"x": x, "h0": h0}
    path = tmp_path / "m.mlmodel"
    (y,) = run_nn(program(feeds, body), feeds, path).values()
    h, want = h0, []
    for t in range(S - 1, -1, -1):
        h = x[t] @ w_ih.T + h @ w_hh.T
        want.append(h)
    assert_close(y, np.stack(want))
    assert layer_kinds(path) == {"simpleRecurrent": 1, "expandDims": 2, "squeeze": 1}


def test_rank5_wrappers_are_absorbed_into_the_one_layer(tmp_path: Path) -> None:
    """What our NeuralNetwork frontend writes for an LSTM layer (squeeze / reshape of the rank-5
    sequence and states into the op, expand_dims of its results) becomes that one layer again,
    reading and writing the rank-5 values; values still match torch."""
    x, h0, c0 = _rand(S, B, IN), _rand(B, H), _rand(B, H)
    params, y, h, c = _torch_lstm(x, h0, c0, False)

    def body(b, x5, h5, c5):
        xs = b.squeeze(x=x5, axes=[3, 4], name="x_squeezed")
        hs = b.reshape(x=h5, shape=[-1, H], name="h_flat")
        cs = b.squeeze(x=c5, axes=[0, -2, -1], name="c_squeezed")
        ys, hn, cn = b.lstm(x=xs, initial_h=hs, initial_c=cs, output_sequence=True, **params, name="lstm")
        return [b.expand_dims(x=ys, axes=[3, 4], name="y5"), b.expand_dims(x=hn, axes=[0, -2, -1], name="h5_out"),
                b.expand_dims(x=cn, axes=[0, 3, 4], name="c5_out")]

    feeds = {"x5": x[:, :, :, None, None], "h5": h0[None, :, :, None, None], "c5": c0[None, :, :, None, None]}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y5"], y[:, :, :, None, None])
    assert_close(got["h5_out"], h[None, :, :, None, None])
    assert_close(got["c5_out"], c[None, :, :, None, None])
    assert layer_kinds(path) == {"uniDirectionalLSTM": 1}


def test_a_wrapper_read_elsewhere_too_is_kept(tmp_path: Path) -> None:
    """The sequence's squeeze also feeds a mul: it is not absorbed (the layer still reads the rank-5
    value); the final state, read directly, is squeezed."""
    x, h0 = _rand(S, B, IN), _rand(B, H)
    w_ih, w_hh = _rand(H, IN), _rand(H, H)

    def body(b, x5, h0):
        xs = b.squeeze(x=x5, axes=[3, 4], name="x_squeezed")
        ys, hn = b.rnn(x=xs, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, output_sequence=True, name="rnn")
        return [b.expand_dims(x=ys, axes=[3, 4], name="y5"), hn, b.mul(x=xs, y=np.float32(2), name="x2")]

    load_all()
    if "squeeze" not in LOWERINGS:
        pytest.skip("needs the squeeze lowering (another family's)")
    feeds = {"x5": x[:, :, :, None, None], "h0": h0}
    path = tmp_path / "m.mlmodel"
    got = list(run_nn(program(feeds, body), feeds, path).values())
    h, want = h0, []
    for t in range(S):
        h = np.tanh(x[t] @ w_ih.T + h @ w_hh.T)
        want.append(h)
    assert_close(got[0], np.stack(want)[:, :, :, None, None])
    assert_close(got[1], h)
    assert_close(got[2], 2 * x)
    # the x squeeze (kept for the mul), hn's squeeze, h0's expandDims; no expandDims for x or y
    assert layer_kinds(path) == {"simpleRecurrent": 1, "squeeze": 2, "expandDims": 1, "multiply": 1}


def test_bidirectional_rank5_wrappers_are_absorbed(tmp_path: Path) -> None:
    """The frontend's bidirectional pattern: each direction's rank-5 states reshaped and
    concatenated into the op, its final states split and expanded: one biDirectionalLSTM."""
    x, h0, c0 = _rand(S, B, IN), _rand(B, 2 * H), _rand(B, 2 * H)
    params, y, h, c = _torch_lstm(x, h0, c0, True)

    def body(b, x5, hf, cf, hb, cb):
        xs = b.squeeze(x=x5, axes=[3, 4])
        h_in = b.concat(values=(b.reshape(x=hf, shape=[-1, H]), b.reshape(x=hb, shape=[-1, H])), axis=1)
        c_in = b.concat(values=(b.reshape(x=cf, shape=[-1, H]), b.reshape(x=cb, shape=[-1, H])), axis=-1)
        ys, hn, cn = b.lstm(x=xs, initial_h=h_in, initial_c=c_in, direction="bidirectional",
                            output_sequence=True, **params, name="lstm")
        outs = [b.expand_dims(x=ys, axes=[3, 4], name="y5")]
        for v, tag in ((hn, "h"), (cn, "c")):
            halves = b.split(x=v, num_splits=2, axis=1)
            outs += [b.expand_dims(x=part, axes=[0, 3, 4], name=f"{tag}{d}_out") for part, d in zip(halves, "fb")]
        return outs

    def r5(a: np.ndarray) -> np.ndarray:
        return a[None, :, :, None, None]

    feeds = {"x5": x[:, :, :, None, None], "hf": r5(h0[:, :H]), "cf": r5(c0[:, :H]), "hb": r5(h0[:, H:]),
             "cb": r5(c0[:, H:])}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y5"], y[:, :, :, None, None])
    for tag, full in (("h", h), ("c", c)):
        assert_close(got[f"{tag}f_out"], r5(full[:, :H]))
        assert_close(got[f"{tag}b_out"], r5(full[:, H:]))
    assert layer_kinds(path) == {"biDirectionalLSTM": 1}


def test_a_reshaped_state_is_one_layer_to_rank5(tmp_path: Path) -> None:
    """A state made by a reshape (a model's rank-1 state input): one expandDims of the [H] input
    straight to [1, B, H, 1, 1] (the reshape, a rank change, absorbed) instead of a reshape and an
    expandDims."""
    x, h0 = _rand(S, 1, IN), _rand(1, H)
    w_ih, w_hh = _rand(H, IN), _rand(H, H)

    def body(b, x, h_flat):
        _, hn = b.rnn(x=x, initial_h=b.reshape(x=h_flat, shape=[1, H]), weight_ih=w_ih, weight_hh=w_hh,
                      activation="sigmoid", name="rnn")
        return [hn]

    feeds = {"x": x, "h_flat": h0.reshape(-1)}
    path = tmp_path / "m.mlmodel"
    (got,) = run_nn(program(feeds, body), feeds, path).values()
    h = h0
    for t in range(S):
        h = 1 / (1 + np.exp(-(x[t] @ w_ih.T + h @ w_hh.T)))
    assert_close(got, h)
    assert layer_kinds(path) == {"simpleRecurrent": 1, "expandDims": 2, "squeeze": 1}


def test_relu_gate_results_follow_the_layers_pre_activation_clip(tmp_path: Path) -> None:
    """The documented difference: the layer clips each gate pre-activation to [-50, 50] (the
    proto's simpleRecurrent equation), the IR op does not; with relu the outputs differ past 50."""
    x = np.array([[[30.0]], [[80.0]]], np.float32)

    def body(b, x):
        return list(b.rnn(x=x, initial_h=np.zeros((1, 1), np.float32), weight_ih=np.ones((1, 1), np.float32),
                          weight_hh=np.full((1, 1), 0.5, np.float32), activation="relu", output_sequence=True,
                          name="rnn"))[:1]

    prog = program({"x": x}, body)
    (ir,) = converter.run(prog, {"x": x}).values()
    (nn,) = run_nn(prog, {"x": x}, tmp_path / "m.mlmodel").values()
    assert_close(ir.reshape(-1), [30.0, 95.0])  # relu(80 + 0.5 * 30)
    assert_close(nn.reshape(-1), [30.0, 50.0])  # relu(clip(95, -50, 50))


# ---------------------------------------------------------------------------------------------
# The rank changes, concats and splits the pass pipeline leaves around the ops (the round trips of
# builder/lstm_bidirectional, lstm_unidirectional, gru and embedding_simple_rnn): read through,
# no layers of their own


def test_bidirectional_states_as_the_pipeline_leaves_them(tmp_path: Path) -> None:
    """lstm_bidirectional.mlmodel after the pipeline: each direction's [H] state feature goes in as
    ``expand_dims(concat(h_fwd, h_bwd), [0])`` and comes out as ``split`` -> ``squeeze(axes=[0])``.
    One biDirectionalLSTM, one expandDims per [H] state in and one squeeze per [H] state out (the
    features' rank); no concatND, splitND or other rank changes. Values: torch."""
    x = _rand(S, 1, IN)
    hf, hb, cf, cb = (_rand(H) for _ in range(4))
    params, y, h, c = _torch_lstm(x, np.concatenate([hf, hb])[None], np.concatenate([cf, cb])[None], True)

    def body(b, x5, hf, cf, hb, cb):
        h_in = b.expand_dims(x=b.concat(values=(hf, hb), axis=0), axes=[0])
        c_in = b.expand_dims(x=b.concat(values=(cf, cb), axis=0), axes=[0])
        ys, hn, cn = b.lstm(x=b.squeeze(x=x5, axes=[3, 4]), initial_h=h_in, initial_c=c_in,
                            direction="bidirectional", output_sequence=True, **params, name="lstm")
        outs = [b.expand_dims(x=ys, axes=[3, 4], name="y5")]
        for v, tag in ((hn, "h"), (cn, "c")):
            halves = b.split(x=v, num_splits=2, axis=1)
            outs += [b.squeeze(x=part, axes=[0], name=f"{tag}{d}_out") for part, d in zip(halves, "fb")]
        return outs

    feeds = {"x5": x[:, :, :, None, None], "hf": hf, "cf": cf, "hb": hb, "cb": cb}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y5"], y[:, :, :, None, None])
    for tag, full in (("h", h), ("c", c)):
        assert_close(got[f"{tag}f_out"], full[0, :H])
        assert_close(got[f"{tag}b_out"], full[0, H:])
    assert layer_kinds(path) == {"biDirectionalLSTM": 1, "expandDims": 4, "squeeze": 4}


def test_bidirectional_halves_through_other_rank_changes(tmp_path: Path) -> None:
    """Batch 3 and other forms of the same: halves given unit axes before a concat on the axis
    before them, a concat reshaped and squeezed, a final state expanded before a split on axis -1
    whose halves become rank 5, a split by sizes whose halves are read as they are. The rank-5
    halves are written by the layer itself; the [B, H] ones cost one squeeze each."""
    x, h0, c0 = _rand(S, B, IN), _rand(B, 2 * H), _rand(B, 2 * H)
    params, y, h, c = _torch_lstm(x, h0, c0, True, seed=11)

    def body(b, x, hf, hb, cf, cb):
        h_cat = b.concat(values=(b.expand_dims(x=hf, axes=[2]), b.expand_dims(x=hb, axes=[-1])), axis=1)
        h_in = b.squeeze(x=h_cat, axes=[2])  # [B, 2H, 1] -> [B, 2H]
        c_in = b.squeeze(x=b.reshape(x=b.concat(values=(cf, cb), axis=-1), shape=[1, B, 2 * H]), axes=[0])
        ys, hn, cn = b.lstm(x=x, initial_h=h_in, initial_c=c_in, direction="bidirectional", output_sequence=True,
                            **params, name="lstm")
        h_halves = b.split(x=b.expand_dims(x=hn, axes=[0]), num_splits=2, axis=-1)  # [1, B, H] each
        c_halves = b.split(x=cn, split_sizes=[H, H], axis=1)
        return [b.identity(x=ys, name="y"),
                *[b.expand_dims(x=v, axes=[3, 4], name=f"h{d}_5") for v, d in zip(h_halves, "fb")],
                *[b.identity(x=v, name=f"c{d}_out") for v, d in zip(c_halves, "fb")]]

    feeds = {"x": x, "hf": h0[:, :H], "hb": h0[:, H:], "cf": c0[:, :H], "cb": c0[:, H:]}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y"], y)
    assert_close(got["hf_5"], h[None, :, :H, None, None])
    assert_close(got["hb_5"], h[None, :, H:, None, None])
    assert_close(got["cf_out"], c[:, :H])
    assert_close(got["cb_out"], c[:, H:])
    # expandDims: x and the four [B, H] halves; squeeze: y and the two c halves
    assert layer_kinds(path) == {"biDirectionalLSTM": 1, "expandDims": 5, "squeeze": 3}


def test_an_interleaved_concat_is_not_the_two_directions(tmp_path: Path) -> None:
    """Regression: ``concat(interleave=True)`` of two [B, H] values alternates their columns; it is
    not [forward | backward] and must not be read as the two directions' halves."""
    x, hf, hb, c0 = _rand(S, B, IN), _rand(B, H), _rand(B, H), _rand(B, 2 * H)
    h0 = np.stack([hf, hb], axis=-1).reshape(B, 2 * H)  # interleaved columns
    params, y, h, c = _torch_lstm(x, h0, c0, True, seed=13)

    def body(b, x, hf, hb, c0):
        h_in = b.concat(values=(hf, hb), axis=1, interleave=True)
        return list(b.lstm(x=x, initial_h=h_in, initial_c=c0, direction="bidirectional", output_sequence=True,
                           **params, name="lstm"))

    feeds = {"x": x, "hf": hf, "hb": hb, "c0": c0}
    outs = list(run_nn(program(feeds, body), feeds, tmp_path / "m.mlmodel").values())
    assert_close(outs[0], y)
    assert_close(outs[1], h)
    assert_close(outs[2], c)


def test_stacked_layers_pass_the_rank5_sequence(tmp_path: Path) -> None:
    """lstm_unidirectional.mlmodel's two LSTMs: the first one's sequence feeds the second as the
    rank-5 blob it writes (no squeeze and expandDims between); values: two torch LSTMs chained."""
    x, h0, c0 = _rand(S, B, IN), _rand(B, H), _rand(B, H)
    p1, y1, _, _ = _torch_lstm(x, h0, c0, False, seed=3)
    zeros = np.zeros((B, H), np.float32)
    p2, y2, h2, _ = _torch_lstm(y1, zeros, zeros, False, seed=4)

    def body(b, x, h0, c0):
        ys, _, _ = b.lstm(x=x, initial_h=h0, initial_c=c0, output_sequence=True, **p1, name="lstm1")
        ys2, hn2, _ = b.lstm(x=ys, initial_h=zeros, initial_c=zeros, output_sequence=True, **p2, name="lstm2")
        return [b.identity(x=ys2, name="y"), b.identity(x=hn2, name="h")]

    feeds = {"x": x, "h0": h0, "c0": c0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y"], y2)
    assert_close(got["h"], h2)
    # expandDims: x, h0, c0 of the first; squeeze: the second's sequence and final h
    assert layer_kinds(path) == {"uniDirectionalLSTM": 2, "expandDims": 3, "squeeze": 2}


def test_rank1_state_features_of_rnn_as_the_pipeline_leaves_them(tmp_path: Path) -> None:
    """embedding_simple_rnn / gru after the pipeline: a [H] state feature goes in through
    ``expand_dims(axes=[0])``, the final state comes out through ``squeeze(axes=[0])``: one
    expandDims and one squeeze straight between [H] and [1, 1, H, 1, 1]. Values: torch.nn.RNN."""
    x, h0 = _rand(S, 1, IN), _rand(H)
    torch.manual_seed(17)
    m = torch.nn.RNN(IN, H)
    with torch.no_grad():
        y, hn = m(torch.from_numpy(x), torch.from_numpy(h0[None, None]))
    w_ih, w_hh = m.weight_ih_l0.detach().numpy(), m.weight_hh_l0.detach().numpy()
    bias = (m.bias_ih_l0 + m.bias_hh_l0).detach().numpy()

    def body(b, x5, h_in):
        ys, hn = b.rnn(x=b.squeeze(x=x5, axes=[3, 4]), initial_h=b.expand_dims(x=h_in, axes=[0]), weight_ih=w_ih,
                       weight_hh=w_hh, bias=bias, activation="tanh", output_sequence=True, name="rnn")
        return [b.expand_dims(x=ys, axes=[3, 4], name="y5"), b.squeeze(x=hn, axes=[0], name="h_out")]

    feeds = {"x5": x[:, :, :, None, None], "h_in": h0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y5"], y.numpy()[:, :, :, None, None])
    assert_close(got["h_out"], hn.numpy().reshape(H))
    assert layer_kinds(path) == {"simpleRecurrent": 1, "expandDims": 1, "squeeze": 1}


def test_gru_state_through_chains_of_rank_changes(tmp_path: Path) -> None:
    """Two rank changes on each side of the state ([H] -> [1, 1, H] -> [1, H] in, [1, H] ->
    [1, H, 1] -> [H] out) are one expandDims and one squeeze. Values: the gru recurrence."""
    x, h0 = _rand(S, 1, IN), _rand(H)
    w_ih, w_hh, bias = _rand(3 * H, IN), _rand(3 * H, H), _rand(3 * H)

    def body(b, x, h_in):
        h = b.squeeze(x=b.reshape(x=h_in, shape=[1, 1, H]), axes=[0])
        ys, hn = b.gru(x=x, initial_h=h, weight_ih=w_ih, weight_hh=w_hh, bias=bias, output_sequence=True,
                       name="gru")
        return [b.identity(x=ys, name="y"), b.squeeze(x=b.expand_dims(x=hn, axes=[2]), axes=[0, 2], name="h_out")]

    feeds = {"x": x, "h_in": h0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    ys, h = _np_gru(x, h0[None], w_ih, w_hh, bias, _sigmoid, np.tanh, False)
    assert_close(got["y"], ys)
    assert_close(got["h_out"], h[0])
    # expandDims: x, the state; squeeze: y, the final state
    assert layer_kinds(path) == {"gru": 1, "expandDims": 2, "squeeze": 2}


def test_bidirectional_final_state_read_whole_through_a_rank_change(tmp_path: Path) -> None:
    """A bidirectional final state read whole (no split), through a squeeze to [2H]: the two
    directions' blobs are concatenated and squeezed straight to the [2H] value (one concatND, one
    squeeze each; no squeeze to [1, 2H] first)."""
    x, h0, c0 = _rand(S, 1, IN), _rand(1, 2 * H), _rand(1, 2 * H)
    params, y, h, c = _torch_lstm(x, h0, c0, True, seed=19)

    def body(b, x, h0, c0):
        _, hn, cn = b.lstm(x=x, initial_h=h0, initial_c=c0, direction="bidirectional", **params, name="lstm")
        return [b.squeeze(x=hn, axes=[0], name="h"), b.squeeze(x=cn, axes=[0], name="c")]

    feeds = {"x": x, "h0": h0, "c0": c0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["h"], h[0])
    assert_close(got["c"], c[0])
    # expandDims: x, h0, c0 (then split at run time: splitND each)
    assert layer_kinds(path) == {"biDirectionalLSTM": 1, "expandDims": 3, "splitND": 2, "concatND": 2, "squeeze": 2}


def test_a_result_read_in_another_rank5_layout_is_reshaped(tmp_path: Path) -> None:
    """An rnn's final state [B, H] made the next rnn's sequence as [B, H, 1] (S=B, batch H,
    input 1): its rank-5 blob [1, B, H, 1, 1] is not the [B, H, 1, 1, 1] the second layer reads,
    so one reshapeStatic of it (the same elements) feeds the second layer, and the second result
    also stays readable as a [B, H] value. Values: two torch.nn.RNN."""
    x, h0 = _rand(S, B, IN), _rand(B, H)
    torch.manual_seed(23)
    m1, m2 = torch.nn.RNN(IN, H), torch.nn.RNN(1, 2)
    with torch.no_grad():
        _, h1 = m1(torch.from_numpy(x), torch.from_numpy(h0[None]))
        y2, _ = m2(h1[0][:, :, None])

    def weights(m: torch.nn.RNN) -> dict:
        return {"weight_ih": m.weight_ih_l0.detach().numpy(), "weight_hh": m.weight_hh_l0.detach().numpy(),
                "bias": (m.bias_ih_l0 + m.bias_hh_l0).detach().numpy()}

    def body(b, x, h0):
        _, hn = b.rnn(x=x, initial_h=h0, activation="tanh", **weights(m1), name="rnn1")
        ys, _ = b.rnn(x=b.expand_dims(x=hn, axes=[2]), initial_h=np.zeros((H, 2), np.float32), activation="tanh",
                      output_sequence=True, **weights(m2), name="rnn2")
        return [b.identity(x=ys, name="y"), b.identity(x=hn, name="h")]

    feeds = {"x": x, "h0": h0}
    path = tmp_path / "m.mlmodel"
    got = run_nn(program(feeds, body), feeds, path)
    assert_close(got["y"], y2.numpy())
    assert_close(got["h"], h1.numpy()[0])
    # expandDims: x, h0; reshapeStatic: rnn1's state as rnn2's sequence; squeeze: y and h
    assert layer_kinds(path) == {"simpleRecurrent": 2, "expandDims": 2, "reshapeStatic": 1, "squeeze": 2}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 3), max_size=4), st.data())
def test_unit_axes_between_are_the_axes_numpy_squeezes(small: list[int], data: st.DataObject) -> None:
    """Property, numpy the oracle: for a shape with unit axes inserted anywhere (np.expand_dims),
    the axes found squeeze it back to the shape (the expandDims / squeeze axes the recurrent I/O
    writes); for dims in another order (not a rank change) there are none."""
    extra = data.draw(st.integers(0, 3))
    rank = len(small) + extra
    axes = data.draw(st.lists(st.integers(0, max(rank - 1, 0)), min_size=extra, max_size=extra, unique=True))
    big = np.expand_dims(np.zeros(small), tuple(axes)).shape
    found = unit_axes_between(big, tuple(small))
    assert found is not None and np.squeeze(np.zeros(big), axis=found).shape == tuple(small)
    other = tuple(reversed(small))
    if [d for d in other if d != 1] != [d for d in small if d != 1]:
        assert unit_axes_between(big, other) is None
