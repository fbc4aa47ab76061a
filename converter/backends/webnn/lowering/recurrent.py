"""Recurrent layers: the IR's ``lstm``, ``gru`` and ``rnn`` (converter/ir/ops/recurrent.py).

Where WebNN's own ``lstm`` / ``gru`` compute exactly what the IR op does, one builder call; every
weight is re-laid-out at conversion time (numpy: gate blocks permuted, directions stacked), so the
graph holds no weight arithmetic. The differences handled here, each checked in Chromium 153 by
tests/webnn/test_recurrent.py:

- gate order: the IR's lstm blocks are ``[i, f, o, z]``, WebNN's ``iofg`` layout ``[i, o, f, g]``;
  the IR's gru blocks are ``[r, o(new), z]``, WebNN's ``zrn`` layout ``[z, r, n]``. Peepholes: the
  IR's ``[i, f, o]``, WebNN's ``[i, o, f]``.
- WebNN's output-gate peephole reads the *previous* cell state (measured in Chromium 153, as the
  spec's lstmCell steps); the IR's reads the updated one (``o = act(W_o x + R_o h + p_o * c_t)``).
  An lstm with a nonzero output peephole is therefore unrolled.
- gru: WebNN's ``resetAfter`` defaults to true, the IR's (iOS18 ``reset_after``) to false and
  iOS15-17 gru is always reset-before: the option is always written. The IR's input bias (its one
  ``bias`` before iOS18, ``input_bias`` from iOS18) is WebNN's ``bias``, its hidden bias
  (``bias`` from iOS18) WebNN's ``recurrentBias``.
- direction: ``reverse`` -> ``backward``. WebNN aligns a backward sequence output to input
  positions (out[t] is the state after x[t]); the IR's ``reverse`` keeps processing order, so the
  returned sequence is reversed on its time axis. The IR's ``bidirectional`` lstm aligns the
  backward half to input positions as WebNN's ``both`` does.
- states: the IR's ``[b, D*H]`` are WebNN's ``[D, b, H]`` (and back for the outputs); the IR's
  sequence output ``[s, b, D*H]`` is WebNN's ``[s, D, b, H]`` transposed; without
  ``output_sequence`` it is the last hidden state with a unit time axis.
- activations: WebNN's recurrent ops take only sigmoid, tanh and relu (the IR's ``scaled_tanh``
  has its default parameters, so it is tanh). Others (``hard_sigmoid``, ``linear``) and the
  lstm's cell-state ``clip`` have no option: those ops are *unrolled* over the (static) sequence,
  one input projection ``gemm`` for all steps then per step a recurrent ``matmul``, the gate
  activations, the state update and a ``clamp`` for the clip. A clip is dropped (the single call
  kept) only where it provably never binds: bounded gate and cell activations (|act| <= 1) give
  ``|c_t| <= |c_0| + t``, so a constant initial cell state and a clip above that bound, with the
  rounding of every step accounted for, cannot change a value.
- ``rnn`` has no WebNN op: always unrolled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ....ir.core import Op, Value
from ..emitter import GraphEmitter, LoweringError, Operand
from ._common import float_scalar, reshape
from .registry import lowering

#: IR activation -> WebNN MLRecurrentNetworkActivation (the IR's scaled_tanh has alpha = beta = 1)
DIRECT_ACTIVATIONS = {"sigmoid": "sigmoid", "tanh": "tanh", "scaled_tanh": "tanh", "relu": "relu"}
#: activations whose values lie in [-1, 1] (for the cell-clip bound)
BOUNDED_ACTIVATIONS = {"sigmoid", "tanh", "scaled_tanh", "hard_sigmoid", "sigmoid_hard"}
#: unit roundoff of the WebNN data types (for the cell-clip bound)
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11}

# Gate-block permutations: IR order -> WebNN layout order (indices of IR blocks)
LSTM_TO_IOFG = (0, 2, 1, 3)  # IR [i, f, o, z] -> WebNN iofg [i, o, f, g]
PEEPHOLE_TO_IOF = (0, 2, 1)  # IR [i, f, o] -> WebNN [i, o, f]
GRU_TO_ZRN = (2, 0, 1)  # IR [r, o, z] -> WebNN zrn [z, r, n]


def reorder_blocks(w: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """``w`` with its gate blocks (equal parts of axis 0) in ``order``."""
    parts = np.split(np.asarray(w), len(order))
    return np.concatenate([parts[i] for i in order])


# ---------------------------------------------------------------------------------------------
# Reading the op


@dataclass
class Recurrent:
    """One recurrent op's compile-time parameters, in the IR's layouts (fp32 numpy)."""

    op: Op
    seq: int
    batch: int
    hidden: int
    dtype: str  # WebNN data type of the computation
    direction: str  # forward | reverse | bidirectional
    output_sequence: bool
    activations: tuple[str, ...]
    weights: list[dict[str, np.ndarray]]  # per direction: w_ih, w_hh, b_in, b_hid (, peephole)

    @property
    def num_dir(self) -> int:
        return len(self.weights)


def _string(e: GraphEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(()))


def _const(e: GraphEmitter, op: Op, key: str, size: int | None = None) -> np.ndarray | None:
    """A weight input as fp32 numpy (zeros of ``size`` when absent and ``size`` is given)."""
    v = op.inputs.get(key)
    if v is None:
        return None if size is None else np.zeros(size, np.float32)
    arr = e.value_of(v)
    if arr is None:
        raise LoweringError(f"'{key}' must be a constant (WebNN recurrent weights are re-laid-out at conversion time)")
    return np.asarray(arr, dtype=np.float32)


def _read(e: GraphEmitter, op: Op, act_keys: tuple[str, ...]) -> Recurrent:
    seq, batch, _ = e.shape(op.inputs["x"])
    w_hh = _const(e, op, "weight_hh")
    assert w_hh is not None
    gates = w_hh.shape[0] // w_hh.shape[1]
    hidden = w_hh.shape[1]
    size = gates * hidden
    direction = _string(e, op, "direction")
    suffixes = ("", "_back") if direction == "bidirectional" else ("",)
    weights = []
    for s in suffixes:
        w = {"w_ih": _const(e, op, "weight_ih" + s), "w_hh": _const(e, op, "weight_hh" + s)}
        if op.type == "gru" and op.opdef.signature.since == "iOS18":
            w["b_in"], w["b_hid"] = _const(e, op, "input_bias", size), _const(e, op, "bias", size)
        else:  # one bias, added to the input projection (gru before iOS18: outside the reset product)
            w["b_in"], w["b_hid"] = _const(e, op, "bias" + s, size), np.zeros(size, np.float32)
        if op.type == "lstm":
            w["peephole"] = _const(e, op, "peephole" + s, 3 * hidden)
        weights.append(w)  # type: ignore[arg-type]
    return Recurrent(op, seq, batch, hidden, e.dtype_of(op.inputs["x"]), direction,
                     bool(np.asarray(e.const_param(op, "output_sequence")).reshape(())),
                     tuple(_string(e, op, k) for k in act_keys), weights)  # type: ignore[arg-type]


def _used(v: Value) -> bool:
    return bool(v.uses)


def _reset_after(e: GraphEmitter, op: Op) -> bool:
    if op.opdef.signature.since != "iOS18":
        return False
    v = e.param(op, "reset_after")
    return v is not None and bool(np.asarray(v).reshape(()))


def _clip(e: GraphEmitter, op: Op) -> float | None:
    v = e.param(op, "clip")
    if v is None and "clip" in op.inputs:
        raise LoweringError("'clip' must be known at conversion time")
    return None if v is None else float_scalar(v)


def _clip_is_inert(e: GraphEmitter, r: Recurrent, clip: float | None) -> bool:
    """Whether ``clip`` provably never changes the cell state (see the module docstring)."""
    if clip is None:
        return True
    rec, cell, _ = r.activations
    if rec not in BOUNDED_ACTIVATIONS or cell not in BOUNDED_ACTIVATIONS:
        return False
    c0 = e.value_of(r.op.inputs["initial_c"])
    if c0 is None:
        return False
    bound = float(np.max(np.abs(c0.astype(np.float64)), initial=0.0))
    if not np.isfinite(bound):
        return False
    u = UNIT_ROUNDOFF[r.dtype]
    for _ in range(r.seq):  # |c_t| <= (|f| |c_{t-1}| + |i| |g|) with two products and a sum rounded
        bound = (bound + 1.0) * (1.0 + u) ** 3
    return bound < clip


# ---------------------------------------------------------------------------------------------
# States and outputs between the IR's layouts and WebNN's


def _direction_states(e: GraphEmitter, v: Value, r: Recurrent) -> Operand | None:
    """An initial state ``[b, D*H]`` as WebNN's ``[D, b, H]`` (None: a constant zero, WebNN's default)."""
    d, b, h = r.num_dir, r.batch, r.hidden
    const = e.value_of(v)
    if const is not None:
        if not np.any(const):
            return None
        return e.constant(np.transpose(np.asarray(const).reshape(b, d, h), (1, 0, 2)), r.dtype)
    x = e.get(v)
    if d == 1:
        return reshape(e, x, [1, b, h])
    x = reshape(e, x, [b, d, h])
    return e.emit("transpose", x, shape=[d, b, h], dtype=x.dtype, permutation=[1, 0, 2])


def _ir_state(e: GraphEmitter, s: Operand, r: Recurrent, leading: tuple[int, ...] = ()) -> Operand:
    """WebNN's ``[D, b, H]`` as the IR's ``[*leading, b, D*H]``."""
    d, b, h = r.num_dir, r.batch, r.hidden
    if d == 2:
        s = e.emit("transpose", s, shape=[b, d, h], dtype=s.dtype, permutation=[1, 0, 2])
    return reshape(e, s, [*leading, b, d * h])


def _ir_sequence(e: GraphEmitter, seq: Operand, r: Recurrent) -> Operand:
    """WebNN's ``[s, D, b, H]`` (backward half aligned to input positions) as the IR's ``[s, b, D*H]``."""
    s, d, b, h = seq.shape
    if r.direction == "reverse":  # the IR keeps processing order
        seq = e.emit("reverse", seq, shape=seq.shape, dtype=seq.dtype, axes=[0])
    if d == 2:
        seq = e.emit("transpose", seq, shape=[s, b, d, h], dtype=seq.dtype, permutation=[0, 2, 1, 3])
    return reshape(e, seq, [s, b, d * h])


# ---------------------------------------------------------------------------------------------
# One builder call


def _stacked(e: GraphEmitter, r: Recurrent, key: str, order: tuple[int, ...]) -> Operand:
    return e.constant(np.stack([reorder_blocks(w[key], order) for w in r.weights]), r.dtype)


def _stacked_or_none(e: GraphEmitter, r: Recurrent, key: str, order: tuple[int, ...]) -> Operand | None:
    if not any(np.any(w[key]) for w in r.weights):
        return None
    return _stacked(e, r, key, order)


def _direct(e: GraphEmitter, r: Recurrent, method: str, order: tuple[int, ...], n_states: int,
            **options: object) -> None:
    op = r.op
    y, *states = op.outputs
    want_seq = r.output_sequence and _used(y)
    d, b, h = r.num_dir, r.batch, r.hidden
    x = e.get(op.inputs["x"])
    state_names = ("initialHiddenState", "initialCellState")[:n_states]
    state_inputs = ("initial_h", "initial_c")[:n_states]
    outs = [((d, b, h), r.dtype)] * n_states + ([((r.seq, d, b, h), r.dtype)] if want_seq else [])
    direction = {"forward": "forward", "reverse": "backward", "bidirectional": "both"}[r.direction]
    results = e.emit_multi(
        method, x, _stacked(e, r, "w_ih", order), _stacked(e, r, "w_hh", order), r.seq, h, outputs=outs,
        bias=_stacked_or_none(e, r, "b_in", order), recurrentBias=_stacked_or_none(e, r, "b_hid", order),
        **{name: _direction_states(e, op.inputs[key], r) for name, key in zip(state_names, state_inputs)},
        **options, returnSequence=want_seq, direction=direction,
        activations=[DIRECT_ACTIVATIONS[a] for a in r.activations])
    finals = results[:n_states]
    for v, s in zip(states, finals):
        if _used(v):
            e.bind(v, _ir_state(e, s, r))
    if _used(y):
        e.bind(y, _ir_sequence(e, results[-1], r) if want_seq else _ir_state(e, finals[0], r, (1,)))


# ---------------------------------------------------------------------------------------------
# Unrolled over the sequence


def _activation(e: GraphEmitter, name: str, x: Operand) -> Operand:
    if name == "linear":
        return x
    if name in ("hard_sigmoid", "sigmoid_hard"):
        return e.emit("hardSigmoid", x, shape=x.shape, dtype=x.dtype, alpha=0.2, beta=0.5)
    return e.emit(DIRECT_ACTIVATIONS[name], x, shape=x.shape, dtype=x.dtype)


def _binary(e: GraphEmitter, method: str, a: Operand, b: Operand) -> Operand:
    shape = tuple(int(s) for s in np.broadcast_shapes(a.shape, b.shape))
    return e.emit(method, a, b, shape=shape, dtype=a.dtype)


def _add(e: GraphEmitter, x: Operand, c: Operand | None) -> Operand:
    """``x + c``; None is a zero constant, left out."""
    return x if c is None else _binary(e, "add", x, c)


def _split(e: GraphEmitter, x: Operand, parts: int) -> list[Operand]:
    b, n = x.shape
    return e.emit_multi("split", x, parts, outputs=[((b, n // parts), x.dtype)] * parts, axis=1)


def _matmul(e: GraphEmitter, x: Operand, w_t: Operand) -> Operand:
    return e.emit("matmul", x, w_t, shape=[x.shape[0], w_t.shape[1]], dtype=x.dtype)


def _weight(e: GraphEmitter, arr: np.ndarray, dtype: str) -> Operand:
    return e.constant(np.ascontiguousarray(arr), dtype)


def _optional(e: GraphEmitter, arr: np.ndarray, dtype: str) -> Operand | None:
    """A bias or peephole constant; None when it is zero (the add or product is left out)."""
    return e.constant(np.ascontiguousarray(arr), dtype) if np.any(arr) else None


def _initial(e: GraphEmitter, v: Value, r: Recurrent, d: int) -> Operand:
    """Direction ``d``'s part ``[b, H]`` of an initial state ``[b, D*H]``."""
    h = r.hidden
    const = e.value_of(v)
    if const is not None:
        return e.constant(np.asarray(const)[:, d * h:(d + 1) * h], r.dtype)
    x = e.get(v)
    if r.num_dir == 1:
        return x
    return e.emit("slice", x, [0, d * h], [r.batch, h], shape=[r.batch, h], dtype=x.dtype)


class _Steps:
    """The per-step inputs of one direction: the input projection of every step, computed once."""

    def __init__(self, e: GraphEmitter, r: Recurrent, w_ih: np.ndarray, b_in: np.ndarray, reverse: bool) -> None:
        x = e.get(r.op.inputs["x"])
        s, b, n_in = x.shape
        width = w_ih.shape[0]
        flat = reshape(e, x, [s * b, n_in])
        proj = e.emit("gemm", flat, e.constant(np.ascontiguousarray(w_ih.T), r.dtype), shape=[s * b, width],
                      dtype=r.dtype, c=e.constant(b_in, r.dtype) if np.any(b_in) else None)
        self.e, self.proj, self.batch, self.width = e, proj, b, width
        self.times = list(range(s - 1, -1, -1) if reverse else range(s))

    def at(self, t: int) -> Operand:
        b = self.batch
        if self.proj.shape[0] == b:
            return self.proj
        return self.e.emit("slice", self.proj, [t * b, 0], [b, self.width], shape=[b, self.width],
                           dtype=self.proj.dtype)


def _sequence(e: GraphEmitter, hs: list[Operand], r: Recurrent) -> Operand:
    """Per-step hidden states ``[b, H]`` (in output order) as ``[s, b, H]``."""
    if len(hs) == 1:
        return reshape(e, hs[0], [1, *hs[0].shape])
    b, h = hs[0].shape
    cat = e.emit("concat", hs, 0, shape=[len(hs) * b, h], dtype=hs[0].dtype)
    return reshape(e, cat, [len(hs), b, h])


def _concat_last(e: GraphEmitter, parts: list[Operand]) -> Operand:
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[-1] = sum(p.shape[-1] for p in parts)
    return e.emit("concat", parts, len(shape) - 1, shape=shape, dtype=parts[0].dtype)


Cell = dict[str, Operand | None]
#: a direction's weights (numpy) -> the constants its cell reads, written once and shared by every step
Prepare = Callable[[dict[str, np.ndarray]], Cell]
#: one time step: (the step's input projection [b, G*H], the states [b, H] (h first), the cell's
#: constants) -> the new states
Step = Callable[[Operand, list[Operand], Cell], list[Operand]]


def _unrolled(e: GraphEmitter, r: Recurrent, prepare: Prepare, step: Step, n_states: int) -> None:
    """Run ``step`` over the sequence for each direction and bind the IR outputs."""
    op = r.op
    y, *state_values = op.outputs
    keep_seq = r.output_sequence and _used(y)
    seqs: list[Operand] = []
    finals: list[list[Operand]] = []
    for d, w in enumerate(r.weights):
        reverse = r.direction == "reverse" or d == 1
        steps = _Steps(e, r, w["w_ih"], w["b_in"], reverse)
        states = [_initial(e, op.inputs[k], r, d) for k in ("initial_h", "initial_c")[:n_states]]
        cell = prepare(w)
        hs = []
        for t in steps.times:
            states = step(steps.at(t), states, cell)
            hs.append(states[0])
        if keep_seq:
            if d == 1:  # the bidirectional op's backward half is aligned to input positions
                hs = hs[::-1]
            seqs.append(_sequence(e, hs, r))
        finals.append(states)
    for i, v in enumerate(state_values):
        if _used(v):
            e.bind(v, _concat_last(e, [f[i] for f in finals]))
    if _used(y):
        if keep_seq:
            e.bind(y, _concat_last(e, seqs))
        else:
            last = _concat_last(e, [f[0] for f in finals])
            e.bind(y, reshape(e, last, [1, *last.shape]))


# ---------------------------------------------------------------------------------------------
# lstm


@lowering("lstm", kind="direct",
          note="lstm (iofg layout, peepholes [i,o,f], states [D,b,H]); decomposed (unrolled per time step) when "
               "clip can bind, an activation is not sigmoid/tanh/relu or the output-gate peephole is nonzero")
def _lstm(e: GraphEmitter, op: Op) -> None:
    r = _read(e, op, ("recurrent_activation", "cell_activation", "activation"))
    clip = _clip(e, op)
    direct = (all(a in DIRECT_ACTIVATIONS for a in r.activations) and _clip_is_inert(e, r, clip)
              and not any(np.any(w["peephole"][2 * r.hidden:]) for w in r.weights))
    if direct:
        _direct(e, r, "lstm", LSTM_TO_IOFG, 2, layout="iofg",
                peepholeWeight=_stacked_or_none(e, r, "peephole", PEEPHOLE_TO_IOF))
        return
    rec, cell_act, out_act = r.activations
    h = r.hidden

    def prepare(w: dict[str, np.ndarray]) -> Cell:
        peepholes = {f"p_{g}": _optional(e, w["peephole"][k * h:(k + 1) * h], r.dtype) for k, g in enumerate("ifo")}
        return {"w_hh_t": _weight(e, w["w_hh"].T, r.dtype), **peepholes}

    def step(x_t: Operand, states: list[Operand], k: Cell) -> list[Operand]:
        h_prev, c_prev = states
        g = _binary(e, "add", x_t, _matmul(e, h_prev, k["w_hh_t"]))
        g_i, g_f, g_o, g_z = _split(e, g, 4)

        def peep(gate: Operand, p: Operand | None, c: Operand) -> Operand:
            return gate if p is None else _binary(e, "add", gate, _binary(e, "mul", c, p))

        i = _activation(e, rec, peep(g_i, k["p_i"], c_prev))
        f = _activation(e, rec, peep(g_f, k["p_f"], c_prev))
        c = _binary(e, "add", _binary(e, "mul", f, c_prev), _binary(e, "mul", i, _activation(e, cell_act, g_z)))
        if clip is not None:
            c = e.emit("clamp", c, shape=c.shape, dtype=c.dtype, minValue=-clip, maxValue=clip)
        o = _activation(e, rec, peep(g_o, k["p_o"], c))
        return [_binary(e, "mul", o, _activation(e, out_act, c)), c]

    _unrolled(e, r, prepare, step, 2)


# ---------------------------------------------------------------------------------------------
# gru


@lowering("gru", kind="direct",
          note="gru (zrn layout, resetAfter as the IR's reset_after: false before iOS18); decomposed (unrolled per "
               "time step) when an activation is not sigmoid/tanh/relu (e.g. hard_sigmoid)")
def _gru(e: GraphEmitter, op: Op) -> None:
    r = _read(e, op, ("recurrent_activation", "activation"))
    reset_after = _reset_after(e, op)
    if all(a in DIRECT_ACTIVATIONS for a in r.activations):
        _direct(e, r, "gru", GRU_TO_ZRN, 1, resetAfter=reset_after, layout="zrn")
        return
    rec, act = r.activations
    h = r.hidden
    for w in r.weights:  # input projection in [r, z, o] order: r and z split from one add
        w["w_ih"] = reorder_blocks(w["w_ih"], (0, 2, 1))
        w["b_in"] = reorder_blocks(w["b_in"], (0, 2, 1))

    def prepare(w: dict[str, np.ndarray]) -> Cell:
        r_hh, o_hh, z_hh = np.split(w["w_hh"], 3)
        b_r, b_o, b_z = np.split(w["b_hid"], 3)
        return {"rz_t": _weight(e, np.concatenate([r_hh, z_hh]).T, r.dtype), "o_t": _weight(e, o_hh.T, r.dtype),
                "b_rz": _optional(e, np.concatenate([b_r, b_z]), r.dtype), "b_o": _optional(e, b_o, r.dtype)}

    def step(x_t: Operand, states: list[Operand], k: Cell) -> list[Operand]:
        (h_prev,) = states
        x_rz = e.emit("slice", x_t, [0, 0], [r.batch, 2 * h], shape=[r.batch, 2 * h], dtype=x_t.dtype)
        x_o = e.emit("slice", x_t, [0, 2 * h], [r.batch, h], shape=[r.batch, h], dtype=x_t.dtype)
        hid_rz = _add(e, _matmul(e, h_prev, k["rz_t"]), k["b_rz"])
        gate_r, gate_z = _split(e, _activation(e, rec, _binary(e, "add", x_rz, hid_rz)), 2)
        if reset_after:
            hid_o = _add(e, _matmul(e, h_prev, k["o_t"]), k["b_o"])
            pre = _binary(e, "add", x_o, _binary(e, "mul", gate_r, hid_o))
        else:
            hid_o = _add(e, _matmul(e, _binary(e, "mul", gate_r, h_prev), k["o_t"]), k["b_o"])
            pre = _binary(e, "add", x_o, hid_o)
        n = _activation(e, act, pre)
        # (1 - z) n + z h = n + z (h - n)
        return [_binary(e, "add", n, _binary(e, "mul", gate_z, _binary(e, "sub", h_prev, n)))]

    _unrolled(e, r, prepare, step, 1)


# ---------------------------------------------------------------------------------------------
# rnn


@lowering("rnn", kind="decomposed",
          note="WebNN has no rnn: unrolled per time step (one gemm for the input projection, then matmul, add "
               "and the activation per step)")
def _rnn(e: GraphEmitter, op: Op) -> None:
    r = _read(e, op, ("activation",))
    (act,) = r.activations

    def prepare(w: dict[str, np.ndarray]) -> Cell:
        return {"w_hh_t": _weight(e, w["w_hh"].T, r.dtype)}

    def step(x_t: Operand, states: list[Operand], k: Cell) -> list[Operand]:
        (h_prev,) = states
        return [_activation(e, act, _binary(e, "add", x_t, _matmul(e, h_prev, k["w_hh_t"])))]

    _unrolled(e, r, prepare, step, 1)
