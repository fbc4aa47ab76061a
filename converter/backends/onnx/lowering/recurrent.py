"""rnn, gru and lstm (converter/ir/ops/recurrent.py) as ONNX RNN/GRU/LSTM, or unrolled.

What differs between MIL and ONNX, and how it is bridged (all at conversion time; the weights are
MIL constants):

- gate order: MIL stacks lstm gates ``[i, f, o, z]`` and gru gates ``[r, o(new), z(update)]``;
  ONNX LSTM wants ``[i, o, f, c]`` and GRU ``[z, r, h]``: the weight rows and bias blocks are
  reordered. The lstm peephole ``[i, f, o]`` becomes ONNX's ``[i, o, f]``.
- layouts: ONNX W/R/B/P carry a leading num_directions axis and B holds the input and the
  recurrent bias (MIL: one bias; the iOS18 gru's ``input_bias`` is ONNX's Wb); MIL states are
  ``[b, D*H]``, ONNX's ``[D, b, H]``; MIL's output ``[s, b, D*H]`` is ONNX's Y ``[s, D, b, H]``
  transposed and reshaped.
- direction ``reverse``: MIL's output sequence is in processing order, ONNX aligns it to the input
  positions: Y is flipped along the sequence axis.
- gru ``reset_after`` (iOS18) is ONNX's ``linear_before_reset=1``.
- activations: sigmoid, tanh, relu and hard_sigmoid (alpha 0.2, beta 0.5: ONNX's defaults) are
  ONNX activation names without parameters; scaled_tanh with MIL's fixed alpha = beta = 1 is
  Tanh. ``linear`` would be ONNX ``Affine`` with alpha 1, whose alpha list runtimes consume
  differently (onnxruntime's default alpha is 0): such a layer is unrolled instead.
- lstm ``clip``: MIL clips the cell state after its update; ONNX's ``clip`` bounds the gate inputs,
  a different function: a clipped lstm is unrolled.
- fp16 (iOS17): computed in fp32 and rounded once at the end, as the interpreter does.

Unrolled form (static sequence length): the input projection for the whole sequence is one
MatMul, then each step is a MatMul with the recurrent weights, the gate formulas of the IR kernel
and a Clip of the cell state; the outputs are concatenated in processing order.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ....ir.types import DType, is_static_dim
from ..emitter import OnnxEmitter, onnx_type
from ._common import bool_param, str_param
from ._params import known_value
from .registry import lowering

#: for each ONNX gate block, the MIL block it is taken from
_ONNX_GATES = {"rnn": (0,), "gru": (2, 0, 1), "lstm": (0, 2, 1, 3)}
#: ONNX peephole [i, o, f] from MIL's [i, f, o]
_ONNX_PEEPHOLE = (0, 2, 1)
#: MIL activation -> ONNX activation name (no alpha/beta needed)
_NATIVE_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "scaled_tanh": "Tanh", "relu": "Relu",
                       "hard_sigmoid": "HardSigmoid", "sigmoid_hard": "HardSigmoid"}
_ACTIVATION_KEYS = {"rnn": ("activation",), "gru": ("recurrent_activation", "activation"),
                    "lstm": ("recurrent_activation", "cell_activation", "activation")}


def _weight(e: OnnxEmitter, op: Op, key: str) -> np.ndarray | None:
    v = op.inputs.get(key)
    if not isinstance(v, Value):
        return None
    val = known_value(v)  # compressed (constexpr) weights decompressed
    if val is None:
        raise LoweringError(f"'{key}' must be known at conversion time")
    return np.asarray(val, np.float32)


def _blocks(a: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
    """The gate blocks of ``a`` (stacked on axis 0) in ``order``."""
    parts = np.split(a, len(order)) if len(order) > 1 else [a]
    return np.concatenate([parts[i] for i in order])


def _activations(e: OnnxEmitter, op: Op) -> list[str]:
    return [str_param(e, op, k) for k in _ACTIVATION_KEYS[op.type]]


def _suffixes(direction: str) -> tuple[str, ...]:
    return ("", "_back") if direction == "bidirectional" else ("",)


def _lower_native(e: OnnxEmitter, op: Op) -> None:
    """One ONNX RNN/GRU/LSTM node."""
    kind = op.type
    order = _ONNX_GATES[kind]
    direction = str_param(e, op, "direction")
    dirs = _suffixes(direction)
    w_hh = _weight(e, op, "weight_hh")
    hidden = w_hh.shape[1]
    size = len(order) * hidden
    gru_v18 = _gru_ios18(op)
    W, R, B, peeps = [], [], [], []
    for s in dirs:
        W.append(_blocks(_weight(e, op, "weight_ih" + s), order))
        R.append(_blocks(_weight(e, op, "weight_hh" + s), order))
        bias = _weight(e, op, "bias" + s)
        bias = np.zeros(size, np.float32) if bias is None else bias
        if gru_v18:  # input_bias is added to the input projection, bias to the recurrent one
            in_bias = _weight(e, op, "input_bias")
            in_bias = np.zeros(size, np.float32) if in_bias is None else in_bias
            B.append(np.concatenate([_blocks(in_bias, order), _blocks(bias, order)]))
        else:
            B.append(np.concatenate([_blocks(bias, order), np.zeros(size, np.float32)]))
        if kind == "lstm":
            peeps.append(_weight(e, op, "peephole" + s))
    P = [] if all(p is None for p in peeps) else [
        np.zeros(3 * hidden, np.float32) if p is None else _blocks(p, _ONNX_PEEPHOLE) for p in peeps]
    num_dir = len(dirs)
    x = _fp32(e, op.inputs["x"])
    states = [_state_in(e, op.inputs[k], num_dir, hidden) for k in ("initial_h", "initial_c")[:(2 if kind == "lstm" else 1)]]
    inputs = [x, e.constant(np.stack(W)), e.constant(np.stack(R)), e.constant(np.stack(B)), None, states[0]]
    if kind == "lstm":
        inputs += [states[1], e.constant(np.stack(P)) if P else None]
    acts = [_NATIVE_ACTIVATIONS[a] for a in _activations(e, op)] * num_dir
    attrs: dict = {"hidden_size": int(hidden), "direction": direction, "activations": acts}
    if kind == "gru":
        attrs["linear_before_reset"] = int(gru_v18 and bool_param(e, op, "reset_after"))
    n_out = 3 if kind == "lstm" else 2
    outs = e.node(kind.upper(), inputs, n_out, **attrs)
    y, finals = outs[0], outs[1:]
    seq = bool_param(e, op, "output_sequence")
    dtype = e.dtype(op.inputs["x"])
    # final states [D, b, H] -> [b, D*H]
    final_names = []
    for i, f in enumerate(finals):
        final_names.append(_state_out(e, f, num_dir, op, i + 1, dtype))
    if seq:
        if direction == "reverse":
            y = e.node("Slice", [y, e.int64s([-1]), e.int64s([np.iinfo(np.int64).min]), e.int64s([0]),
                                 e.int64s([-1])])
        _finish(e, _merge_directions(e, y, num_dir, seq_axis=True), op, 0, dtype)
    else:
        e.node("Unsqueeze", [final_names[0], e.int64s([0])], [e.out(op, 0)])


def _fp32(e: OnnxEmitter, v: Value) -> str:
    name = e.name(v)
    return name if e.dtype(v).name == "fp32" else e.cast(name, "fp32")


def _state_in(e: OnnxEmitter, v: Value, num_dir: int, hidden: int) -> str:
    """A MIL state [b, D*H] as ONNX's [D, b, H] (fp32)."""
    s = _fp32(e, v)
    if num_dir == 1:
        return e.node("Unsqueeze", [s, e.int64s([0])])
    split = e.node("Reshape", [s, e.int64s([0, num_dir, hidden])])
    return e.node("Transpose", [split], perm=[1, 0, 2])


def _merge_directions(e: OnnxEmitter, y: str, num_dir: int, seq_axis: bool) -> str:
    """ONNX Y [s, D, b, H] -> [s, b, D*H]; Y_h [D, b, H] -> [b, D*H]."""
    if seq_axis:
        if num_dir == 1:
            return e.node("Squeeze", [y, e.int64s([1])])
        return e.node("Reshape", [e.node("Transpose", [y], perm=[0, 2, 1, 3]), e.int64s([0, 0, -1])])
    if num_dir == 1:
        return e.node("Squeeze", [y, e.int64s([0])])
    return e.node("Reshape", [e.node("Transpose", [y], perm=[1, 0, 2]), e.int64s([0, -1])])


def _finish(e: OnnxEmitter, name: str, op: Op, index: int, dtype: DType) -> str:
    """Bind ``name`` (fp32) as ``op``'s result ``index``, rounded to the op's dtype."""
    out = e.out(op, index)
    if dtype.name == "fp32":
        e.node("Identity", [name], [out])
    else:
        e.node("Cast", [name], [out], to=onnx_type(dtype))
    return out


def _state_out(e: OnnxEmitter, final: str, num_dir: int, op: Op, index: int, dtype: DType) -> str:
    return _finish(e, _merge_directions(e, final, num_dir, seq_axis=False), op, index, dtype)


# -- unrolled form ------------------------------------------------------------------------------


def _act(e: OnnxEmitter, name: str, x: str) -> str:
    if name == "linear":
        return x
    if name in ("hard_sigmoid", "sigmoid_hard"):
        return e.node("HardSigmoid", [x], alpha=0.2, beta=0.5)
    return e.node(_NATIVE_ACTIVATIONS[name], [x])


def _split(e: OnnxEmitter, x: str, n: int, hidden: int) -> list[str]:
    if n == 1:
        return [x]
    return e.node("Split", [x, e.int64s([hidden] * n)], n, axis=-1)


def _lower_unrolled(e: OnnxEmitter, op: Op) -> None:
    """The IR kernel's step formulas written once per time step (static sequence length)."""
    kind = op.type
    gates = len(_ONNX_GATES[kind])
    xv = op.inputs["x"]
    shape = e.tensor_type(xv).shape
    if shape is None or not is_static_dim(shape[0]):
        raise LoweringError(f"{kind} with these parameters is unrolled and needs a static sequence length, "
                            f"got x {e.tensor_type(xv)}")
    steps = int(shape[0])
    direction = str_param(e, op, "direction")
    dirs = _suffixes(direction)
    num_dir = len(dirs)
    acts = _activations(e, op)
    w_hh0 = _weight(e, op, "weight_hh")
    hidden = w_hh0.shape[1]
    size = gates * hidden
    clip = None
    if kind == "lstm" and isinstance(op.inputs.get("clip"), Value):
        clip = float(np.asarray(e.const_param(op, "clip")).reshape(()))
    gru_v18 = _gru_ios18(op)
    reset_after = gru_v18 and bool_param(e, op, "reset_after")
    x = _fp32(e, xv)
    h0 = _fp32(e, op.inputs["initial_h"])
    c0 = _fp32(e, op.inputs["initial_c"]) if kind == "lstm" else None
    seq_outs, h_finals, c_finals = [], [], []
    for d, s in enumerate(dirs):
        w_ih = _weight(e, op, "weight_ih" + s)
        w_hh = _weight(e, op, "weight_hh" + s)
        bias = _weight(e, op, "bias" + s)
        bias = np.zeros(size, np.float32) if bias is None else bias
        b_in, b_hid = bias, np.zeros(size, np.float32)
        if gru_v18:
            b_in, b_hid = _weight(e, op, "input_bias"), bias
            b_in = np.zeros(size, np.float32) if b_in is None else b_in
        proj = e.node("Add", [e.node("MatMul", [x, e.constant(np.ascontiguousarray(w_ih.T))]), e.constant(b_in)])
        r_hh = e.constant(np.ascontiguousarray(w_hh.T))
        h = _half(e, h0, d, num_dir, hidden)
        c = _half(e, c0, d, num_dir, hidden) if c0 is not None else None
        peep = _weight(e, op, "peephole" + s) if kind == "lstm" else None
        reverse = direction == "reverse" or d == 1
        ys = []
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            xt = e.node("Gather", [proj, e.constant(np.asarray(t, np.int64))], axis=0)
            if kind == "rnn":
                h = _act(e, acts[0], e.node("Add", [xt, e.node("MatMul", [h, r_hh])]))
            elif kind == "lstm":
                h, c = _lstm_step(e, xt, h, c, r_hh, peep, acts, clip, hidden)
            else:
                h = _gru_step(e, xt, h, w_hh, b_hid, acts, reset_after, hidden)
            ys.append(e.node("Unsqueeze", [h, e.int64s([0])]))
        seq = ys[0] if len(ys) == 1 else e.node("Concat", ys, axis=0)
        if d == 1:  # the backward half aligned to input positions
            seq = e.node("Slice", [seq, e.int64s([-1]), e.int64s([np.iinfo(np.int64).min]), e.int64s([0]),
                                   e.int64s([-1])])
        seq_outs.append(seq)
        h_finals.append(h)
        c_finals.append(c)
    dtype = e.dtype(xv)

    def cat(names: list[str]) -> str:
        return names[0] if len(names) == 1 else e.node("Concat", names, axis=-1)

    h_final = cat(h_finals)
    if bool_param(e, op, "output_sequence"):
        _finish(e, cat(seq_outs), op, 0, dtype)
    else:
        _finish(e, e.node("Unsqueeze", [h_final, e.int64s([0])]), op, 0, dtype)
    _finish(e, h_final, op, 1, dtype)
    if kind == "lstm":
        _finish(e, cat(c_finals), op, 2, dtype)


def _half(e: OnnxEmitter, state: str, d: int, num_dir: int, hidden: int) -> str:
    """Direction ``d``'s part [b, H] of a MIL state [b, D*H]."""
    if num_dir == 1:
        return state
    return e.node("Slice", [state, e.int64s([d * hidden]), e.int64s([(d + 1) * hidden]), e.int64s([1])])


def _lstm_step(e: OnnxEmitter, xt: str, h: str, c: str, r_hh: str, peep: np.ndarray | None, acts: list[str],
               clip: float | None, hidden: int) -> tuple[str, str]:
    rec, cell, out = acts
    g_i, g_f, g_o, g_z = _split(e, e.node("Add", [xt, e.node("MatMul", [h, r_hh])]), 4, hidden)
    p_i = p_f = p_o = None
    if peep is not None:
        p_i, p_f, p_o = (e.constant(p) for p in np.split(peep, 3))

    def peeped(g: str, p: str | None, state: str) -> str:
        return g if p is None else e.node("Add", [g, e.node("Mul", [p, state])])

    i = _act(e, rec, peeped(g_i, p_i, c))
    f = _act(e, rec, peeped(g_f, p_f, c))
    c = e.node("Add", [e.node("Mul", [f, c]), e.node("Mul", [i, _act(e, cell, g_z)])])
    if clip is not None:
        c = e.node("Clip", [c, e.constant(np.float32(-clip)), e.constant(np.float32(clip))])
    o = _act(e, rec, peeped(g_o, p_o, c))
    return e.node("Mul", [o, _act(e, out, c)]), c


def _gru_step(e: OnnxEmitter, xt: str, h: str, w_hh: np.ndarray, b_hid: np.ndarray, acts: list[str],
              reset_after: bool, hidden: int) -> str:
    rec, act = acts
    x_r, x_o, x_z = _split(e, xt, 3, hidden)
    r_w, o_w, z_w = (e.constant(np.ascontiguousarray(w.T)) for w in np.split(w_hh, 3))
    r_b, o_b, z_b = (e.constant(b) for b in np.split(b_hid, 3))
    r = _act(e, rec, e.node("Add", [e.node("Add", [x_r, e.node("MatMul", [h, r_w])]), r_b]))
    z = _act(e, rec, e.node("Add", [e.node("Add", [x_z, e.node("MatMul", [h, z_w])]), z_b]))
    if reset_after:
        inner = e.node("Mul", [r, e.node("Add", [e.node("MatMul", [h, o_w]), o_b])])
    else:
        inner = e.node("Add", [e.node("MatMul", [e.node("Mul", [r, h]), o_w]), o_b])
    n = _act(e, act, e.node("Add", [x_o, inner]))
    # h = (1 - z) * n + z * h = n + z * (h - n)
    return e.node("Add", [n, e.node("Mul", [z, e.node("Sub", [h, n])])])


def _gru_ios18(op: Op) -> bool:
    """The iOS18 gru: ``bias`` is the recurrent bias, ``input_bias`` the input one, and reset_after."""
    return op.type == "gru" and op.opdef.signature.since == "iOS18"


def _needs_unrolling(e: OnnxEmitter, op: Op) -> bool:
    if any(a not in _NATIVE_ACTIVATIONS for a in _activations(e, op)):
        return True
    return op.type == "lstm" and isinstance(op.inputs.get("clip"), Value) and e.param(op, "clip") is not None


@lowering("rnn", "gru", "lstm", kind="decomposed",
          note="RNN/GRU/LSTM with gates reordered (lstm ifoz -> iofc, gru roz -> zrh), states and outputs "
               "reshaped, a reverse output flipped; unrolled per time step for lstm clip (MIL clips the cell "
               "state, ONNX the gate inputs) and the linear activation")
def _recurrent(e: OnnxEmitter, op: Op) -> None:
    if _needs_unrolling(e, op):
        _lower_unrolled(e, op)
    else:
        _lower_native(e, op)
