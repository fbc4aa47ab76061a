"""Recurrent layers: rnn, gru, lstm (single layer, MIL weight layouts, Core ML semantics).

Layouts: ``x`` is ``[s, b, I]`` (sequence first); ``weight_ih`` is ``[G*H, I]`` and ``weight_hh``
``[G*H, H]`` with the G gate blocks stacked on axis 0 in MIL's order:

- rnn:  G = 1.
- gru:  G = 3, ``[reset, output (new), update]`` ("roz"; ONNX uses [z, r, h], torch [r, z, n]).
- lstm: G = 4, ``[input, forget, output, cell]`` ("ifoz"; ONNX uses iofc, torch ifgo); peephole
  ``[3*H]`` is ``[input, forget, output]``.

The MIL docstrings are loose; where they are, the behaviour below is the one coremltools' tests
check against the Core ML runtime (``ops/tests/iOS14/test_recurrent.py``):

- ``direction="reverse"`` processes ``x[s-1] .. x[0]`` and the output sequence is in *processing*
  order (``out[0]`` is the state after ``x[s-1]``); it is not flipped back as ONNX does.
- ``direction="bidirectional"`` (lstm only) concatenates forward and backward halves on the last
  axis, the backward outputs aligned to input positions (as ONNX and torch do).
- gru (iOS15-17) computes ``n = act(W_o x + R_o (r * h) + b_o)`` with one bias (ONNX GRU with
  linear_before_reset=0). iOS18 adds ``input_bias`` (added to the input projections, ``bias``
  then being the hidden one) and ``reset_after``: ``n = act(W_o x + b_io + r * (R_o h + b_ho))``
  (torch's GRU). ``reset_after`` defaults to False.
- lstm ``clip`` bounds the cell state after its update, ``c_t = clip(f*c + i*z)``, before the
  output gate's peephole and ``h_t`` read it (the MIL text says "cell gate"; the runtime-checked
  reference clips ``c``).
- Activation names: sigmoid, tanh, relu, linear, scaled_tanh and hard_sigmoid (alias
  sigmoid_hard, the name rnn's doc uses) with their default parameters: scaled_tanh is
  ``1.0 * tanh(1.0 * x)``, hard_sigmoid is ``clip(0.2 * x + 0.5, 0, 1)``.

Kernels compute in fp32 and round to the output dtype (fp16 is allowed since iOS17) once, at the
end: Core ML keeps the recurrent state in the compute precision it picks, fp32 is the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..types import Dim, Symbol, TensorType, Type, is_static_dim
from .activation import sigmoid

Activation = Callable[[np.ndarray], np.ndarray]


ACTIVATIONS: dict[str, Activation] = {
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "scaled_tanh": np.tanh,  # alpha = beta = 1
    "relu": lambda x: np.maximum(x, 0),
    "linear": lambda x: x,
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
    "sigmoid_hard": lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
}


# ---------------------------------------------------------------------------------------------
# Type inference shared by the three ops

_ANY = Symbol("?")  # an expected dim that any size satisfies


def _check_dims(a: InferArgs, name: str, expected: tuple) -> None:
    """Fail if input ``name`` cannot have shape ``expected`` (symbols match any size)."""
    t = a.type(name)
    if not isinstance(t, TensorType) or t.shape is None:
        return
    if len(t.shape) != len(expected) or any(
        is_static_dim(d) and is_static_dim(e) and int(d) != int(e) for d, e in zip(t.shape, expected)
    ):
        want = "[" + ", ".join(str(e) for e in expected) + "]"
        raise a.fail(f"'{name}' has shape {list(t.shape)}, expected {want}")


def _static_first(*dims: Dim | None) -> Dim:
    """The first static dim among candidates describing one size, else the first known one."""
    known = [d for d in dims if d is not None]
    return next((d for d in known if is_static_dim(d)), known[0])


def _str_param(a: InferArgs | EvalArgs, name: str) -> str:
    return str(np.asarray(a.value(name)).reshape(()))


def _check_activations(a: InferArgs, names: tuple[str, ...]) -> None:
    for name in names:
        act = _str_param(a, name)
        if act not in ACTIVATIONS:
            raise a.fail(f"{name} '{act}' is not one of {', '.join(sorted(ACTIVATIONS))}")


def infer_recurrent(a: InferArgs, gates: int, n_states: int, directions_allowed: tuple[str, ...],
                    activations: tuple[str, ...]) -> list[Type]:
    """Output types ``[seq, b, D*H]`` plus ``n_states`` final states ``[b, D*H]``."""
    x = a.tensor_type("x")
    if x.shape is not None and len(x.shape) != 3:
        raise a.fail(f"x must have rank 3 [seq, batch, input], got shape {list(x.shape)}")
    seq, batch, in_size = x.shape if x.shape is not None else (a.new_symbol(), None, None)
    for name in ("weight_ih", "weight_hh"):
        if a.rank(name) not in (None, 2):
            raise a.fail(f"'{name}' must have rank 2, got shape {list(a.tensor_type(name).shape)}")
    w_hh = a.tensor_type("weight_hh").shape
    w_ih = a.tensor_type("weight_ih").shape
    hidden = w_hh[1] if w_hh is not None else (w_ih[0] if w_ih is not None and gates == 1 else None)
    if hidden is None or not is_static_dim(hidden):
        raise a.fail("the hidden size must be known: weight_hh needs a static shape")
    hidden = int(hidden)
    direction = _str_param(a, "direction")
    if direction not in directions_allowed:
        raise a.fail(f"direction '{direction}' is not one of {', '.join(directions_allowed)}")
    num_dir = 2 if direction == "bidirectional" else 1
    weights = [("weight_ih", "weight_hh", "bias")]
    if num_dir == 2:
        for name in ("weight_ih_back", "weight_hh_back"):
            if not a.has(name):
                raise a.fail(f"bidirectional lstm needs '{name}'")
        weights.append(("weight_ih_back", "weight_hh_back", "bias_back"))
    for ih, hh, bias in weights:
        _check_dims(a, ih, (gates * hidden, _ANY if in_size is None else in_size))
        _check_dims(a, hh, (gates * hidden, hidden))
        _check_dims(a, bias, (gates * hidden,))
    if a.has("input_bias"):
        _check_dims(a, "input_bias", (gates * hidden,))
    for name in ("peephole", "peephole_back"):
        if a.has(name):
            _check_dims(a, name, (3 * hidden,))
    state_names = ("initial_h", "initial_c")[:n_states]
    for name in state_names:
        _check_dims(a, name, (_ANY if batch is None else batch, num_dir * hidden))
    state_batch = [a.tensor_type(n).shape[0] for n in state_names if a.tensor_type(n).shape is not None]
    batch = _static_first(batch, *state_batch, a.new_symbol())
    _check_activations(a, activations)
    out_seq = seq if bool(a.value("output_sequence")) else 1
    width = num_dir * hidden
    return [TensorType(x.dtype, (out_seq, batch, width))] + [
        TensorType(x.dtype, (batch, width)) for _ in range(n_states)
    ]


# ---------------------------------------------------------------------------------------------
# Kernels


def _f32(v: Any) -> np.ndarray:
    return np.asarray(v, dtype=np.float32)


def _param(a: EvalArgs, name: str, size: int) -> np.ndarray:
    """An optional vector parameter in fp32, zeros when absent."""
    v = a.value(name)
    return np.zeros(size, np.float32) if v is None else _f32(v)


def _ordered(xs: np.ndarray, reverse: bool) -> np.ndarray:
    return xs[::-1] if reverse else xs


def run_rnn(x: np.ndarray, h: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray,
            act: Activation, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """One direction: outputs in processing order ``[s, b, H]`` and the final state."""
    proj = _ordered(x, reverse) @ w_ih.T + bias
    ys = np.empty(proj.shape[:2] + h.shape[-1:], np.float32)
    for t in range(proj.shape[0]):
        h = act(proj[t] + h @ w_hh.T)
        ys[t] = h
    return ys, h


def run_gru(x: np.ndarray, h: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b_in: np.ndarray,
            b_hid: np.ndarray, rec: Activation, act: Activation, reset_after: bool,
            reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """One direction of a GRU with roz-ordered gates; ``b_in`` input bias, ``b_hid`` hidden bias."""
    proj = _ordered(x, reverse) @ w_ih.T + b_in
    r_hh, o_hh, z_hh = np.split(w_hh, 3)
    r_b, o_b, z_b = np.split(b_hid, 3)
    ys = np.empty(proj.shape[:2] + h.shape[-1:], np.float32)
    for t in range(proj.shape[0]):
        x_r, x_o, x_z = np.split(proj[t], 3, axis=-1)
        r = rec(x_r + h @ r_hh.T + r_b)
        z = rec(x_z + h @ z_hh.T + z_b)
        if reset_after:
            n = act(x_o + r * (h @ o_hh.T + o_b))
        else:
            n = act(x_o + (r * h) @ o_hh.T + o_b)
        h = (1.0 - z) * n + z * h
        ys[t] = h
    return ys, h


def run_lstm(x: np.ndarray, h: np.ndarray, c: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray,
             bias: np.ndarray, peephole: np.ndarray, acts: tuple[Activation, Activation, Activation],
             clip: float | None, reverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One direction of an LSTM with ifoz-ordered gates; returns outputs, final h and c."""
    rec, cell, out = acts
    proj = _ordered(x, reverse) @ w_ih.T + bias
    p_i, p_f, p_o = np.split(peephole, 3)
    ys = np.empty(proj.shape[:2] + h.shape[-1:], np.float32)
    for t in range(proj.shape[0]):
        g_i, g_f, g_o, g_z = np.split(proj[t] + h @ w_hh.T, 4, axis=-1)
        i = rec(g_i + p_i * c)
        f = rec(g_f + p_f * c)
        c = f * c + i * cell(g_z)
        if clip is not None:
            c = np.clip(c, -clip, clip)
        h = rec(g_o + p_o * c) * out(c)
        ys[t] = h
    return ys, h, c


def _sequence_output(ys: np.ndarray, h_final: np.ndarray, output_sequence: bool) -> np.ndarray:
    return ys if output_sequence else h_final[None]


def _cast_all(a: EvalArgs, arrays: list[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(r).astype(t.dtype.storage) for r, t in zip(arrays, a.out_types)]


@register
class Rnn(OpDef):
    """Elman RNN: ``h_t = activation(W_ih x_t + W_hh h_{t-1} + bias)``."""

    op_type = "rnn"

    def infer(self, a: InferArgs) -> list[Type]:
        return infer_recurrent(a, 1, 1, ("forward", "reverse"), ("activation",))

    def evaluate(self, a: EvalArgs) -> list[Any]:
        w_hh = _f32(a["weight_hh"])
        ys, h = run_rnn(_f32(a["x"]), _f32(a["initial_h"]), _f32(a["weight_ih"]), w_hh,
                        _param(a, "bias", w_hh.shape[0]), ACTIVATIONS[_str_param(a, "activation")],
                        _str_param(a, "direction") == "reverse")
        return _cast_all(a, [_sequence_output(ys, h, bool(a.value("output_sequence"))), h])


@register
class Gru(OpDef):
    """GRU with roz gate blocks (see the module docstring for the exact update)."""

    op_type = "gru"

    def infer(self, a: InferArgs) -> list[Type]:
        return infer_recurrent(a, 3, 1, ("forward", "reverse"), ("recurrent_activation", "activation"))

    def evaluate(self, a: EvalArgs) -> list[Any]:
        w_hh = _f32(a["weight_hh"])
        size = w_hh.shape[0]
        if self.signature.since == "iOS18":
            b_in, b_hid = _param(a, "input_bias", size), _param(a, "bias", size)
            reset_after = bool(a.value("reset_after"))
        else:  # one bias; adding it to the input projection is the same as adding it to both
            b_in, b_hid = _param(a, "bias", size), np.zeros(size, np.float32)
            reset_after = False
        ys, h = run_gru(_f32(a["x"]), _f32(a["initial_h"]), _f32(a["weight_ih"]), w_hh, b_in, b_hid,
                        ACTIVATIONS[_str_param(a, "recurrent_activation")],
                        ACTIVATIONS[_str_param(a, "activation")], reset_after,
                        _str_param(a, "direction") == "reverse")
        return _cast_all(a, [_sequence_output(ys, h, bool(a.value("output_sequence"))), h])


@register
class Lstm(OpDef):
    """LSTM with ifoz gate blocks, optional peepholes, cell clipping and a bidirectional mode."""

    op_type = "lstm"

    def infer(self, a: InferArgs) -> list[Type]:
        return infer_recurrent(a, 4, 2, ("forward", "reverse", "bidirectional"),
                               ("recurrent_activation", "cell_activation", "activation"))

    def evaluate(self, a: EvalArgs) -> list[Any]:
        acts = tuple(ACTIVATIONS[_str_param(a, n)] for n in ("recurrent_activation", "cell_activation", "activation"))
        clip = a.value("clip")
        clip = None if clip is None else float(clip)
        direction = _str_param(a, "direction")
        x, h0, c0 = _f32(a["x"]), _f32(a["initial_h"]), _f32(a["initial_c"])
        hidden = _f32(a["weight_hh"]).shape[1]

        def one(suffix: str, h: np.ndarray, c: np.ndarray, reverse: bool) -> tuple[np.ndarray, ...]:
            return run_lstm(x, h, c, _f32(a["weight_ih" + suffix]), _f32(a["weight_hh" + suffix]),
                            _param(a, "bias" + suffix, 4 * hidden), _param(a, "peephole" + suffix, 3 * hidden),
                            acts, clip, reverse)

        seq_out = bool(a.value("output_sequence"))
        if direction != "bidirectional":
            ys, h, c = one("", h0, c0, direction == "reverse")
            return _cast_all(a, [_sequence_output(ys, h, seq_out), h, c])
        yf, hf, cf = one("", h0[:, :hidden], c0[:, :hidden], False)
        yb, hb, cb = one("_back", h0[:, hidden:], c0[:, hidden:], True)
        h, c = np.concatenate([hf, hb], -1), np.concatenate([cf, cb], -1)
        seq = np.concatenate([yf, yb[::-1]], -1) if seq_out else h[None]
        return _cast_all(a, [seq, h, c])
