"""Recurrent ops: rnn -> simpleRecurrent, gru -> gru, lstm -> uniDirectionalLSTM / biDirectionalLSTM.

The recurrent layers keep the legacy rank-5 layout in every network (the proto's layer comments;
our frontend reads them that way): the sequence is ``[Seq, Batch, I, 1, 1]``, each state
``[1, Batch, H, 1, 1]``, the outputs ``[Seq or 1, Batch, H (2H bidirectional), 1, 1]`` then the final
states. The IR's ``[S, B, I]`` sequence and ``[B, H]`` states are wrapped with ``expandDims`` and the
results unwrapped with ``squeeze`` (only the results something reads). Constant initial states are
written rank-5 directly; all-zero ones are left out (the layers start from zeros). A program that
already holds the rank-5 values (what our NeuralNetwork frontend writes for these layers: ``squeeze``
or ``reshape`` of a ``[S, B, I, 1, 1]`` / ``[1, B, H, 1, 1]`` value into the op, ``expand_dims`` of
its results) gets the one layer: it reads and writes those values, and the wrapping ops are
absorbed (one direction; the bidirectional layer's split states are always wrapped).

Gate blocks are split out of the IR's stacked matrices (views, written as they are stored, fp16
staying fp16): lstm ``ifoz`` -> inputGate, forgetGate, outputGate, blockInput; gru ``roz`` ->
resetGate, outputGate, updateGate. ``direction="reverse"`` is ``reverseInput`` (outputs in
processing order for both).

Where results can differ: every NeuralNetwork recurrent layer clips each gate pre-activation to
[-50, 50]; the IR ops do not. For sigmoid, tanh, scaled_tanh and hard_sigmoid that changes nothing
(they saturate before +-50); a ``relu`` or ``linear`` gate activation (rnn's activation, gru's two,
lstm's recurrent and cell activations) gives other values wherever a pre-activation leaves
[-50, 50]. The lstm cell state is always clipped in the layer: an op without ``clip`` gets the
largest fp32 as threshold (no finite value is changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ....errors import LoweringError
from ....ir.consteval import compile_time_value
from ....ir.core import Op, Value
from ....ir.types import TensorType
from ..emitter import NetworkEmitter, op_input
from .registry import lowering

_ACTIVATION_KIND = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "ReLU", "linear": "linear",
                    "scaled_tanh": "scaledTanh", "hard_sigmoid": "sigmoidHard", "sigmoid_hard": "sigmoidHard"}
#: activations f with f(clip(x, -50, 50)) == f(x) in fp32: the layers' pre-activation clip is invisible
SATURATING = frozenset({"sigmoid", "tanh", "scaled_tanh", "hard_sigmoid", "sigmoid_hard"})
NO_CELL_CLIP = float(np.finfo(np.float32).max)
LSTM_GATES = ("inputGate", "forgetGate", "outputGate", "blockInput")  # the IR's ifoz blocks
GRU_GATES = ("resetGate", "outputGate", "updateGate")  # the IR's roz blocks
CLIP_NOTE = ("NeuralNetwork clips every gate pre-activation to [-50, 50]: with relu or linear gate "
             "activations results differ where a pre-activation leaves that range")


# ---------------------------------------------------------------------------------------------
# Shared with other families: rank changes as layers


def expand_dims(e: NetworkEmitter, blob: str, axes: Sequence[int], base: str) -> str:
    out = e.fresh(base)
    e.layer("expandDims", base, [blob], [out]).axes.extend(int(a) for a in axes)
    return out


def squeeze_into(e: NetworkEmitter, blob: str, axes: Sequence[int], result: Value, base: str) -> None:
    """``result`` = ``blob`` with ``axes`` removed, when anything reads ``result``."""
    if len(result.uses):
        e.layer("squeeze", base, [blob], [e.define(result)]).axes.extend(int(a) for a in axes)


# ---------------------------------------------------------------------------------------------
# Parameters


def _str(e: NetworkEmitter, op: Op, key: str) -> str:
    return str(np.asarray(e.const_param(op, key)).reshape(()))


def set_activation(msg: Any, name: str) -> None:
    """An ActivationParams for the IR activation ``name``. Empty messages, as coremltools writes
    them: the runtime reads ``linear {}`` as the identity, ``scaledTanh {}`` as tanh and
    ``sigmoidHard {}`` as (0.2, 0.5), the IR's parameters for those names."""
    kind = _ACTIVATION_KIND.get(name)
    if kind is None:
        raise LoweringError(f"activation '{name}' has no NeuralNetwork recurrent form")
    getattr(msg, kind).SetInParent()


def _weight(e: NetworkEmitter, op: Op, key: str) -> np.ndarray | None:
    v = op_input(op, key)
    return None if v is None else e.const_array(v, f"'{key}'")


def _blocks(a: np.ndarray, n: int) -> list[np.ndarray]:
    return np.split(a, n, axis=0)


def _fill(e: NetworkEmitter, owner: Any, names: Sequence[str], suffix: str, arrays: Sequence[np.ndarray]) -> None:
    for name, arr in zip(names, arrays):
        e.weights(getattr(owner, f"{name}{suffix}"), arr)


# ---------------------------------------------------------------------------------------------
# Inputs and outputs


X_AXES, STATE_AXES = (3, 4), (0, 3, 4)  # the unit axes of the rank-5 sequence and states


def _const_axes(op: Op, rank: int) -> tuple[int, ...] | None:
    axes = compile_time_value(op.inputs["axes"]) if isinstance(op.inputs.get("axes"), Value) else None
    if axes is None:
        return None
    return tuple(sorted(int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)))


def rank5_source(v: Value, unit_axes: tuple[int, ...]) -> Op | None:
    """The op making ``v`` from a rank-5 value by dropping its unit axes ``unit_axes`` (a ``squeeze``
    of those axes, or a ``reshape`` to the other dims), if that is how ``v`` is made."""
    p = v.producer
    src = p.inputs.get("x") if p is not None and p.type in ("squeeze", "reshape") else None
    if not isinstance(src, Value) or not isinstance(src.type, TensorType) or not isinstance(v.type, TensorType):
        return None
    shape, out = src.type.shape, v.type.shape
    if shape is None or out is None or len(shape) != 5:
        return None
    if p.type == "squeeze":
        return p if _const_axes(p, 5) == unit_axes else None
    kept = tuple(d for i, d in enumerate(shape) if i not in unit_axes)
    units = all(isinstance(shape[i], int) and shape[i] == 1 for i in unit_axes)
    return p if units and tuple(out) == kept else None


def rank5_wrapper(v: Value, unit_axes: tuple[int, ...]) -> Op | None:
    """The one op reading ``v`` when it is ``expand_dims(v, unit_axes)`` (giving the rank-5 form)."""
    uses = list(v.uses)
    user = uses[0].user if len(uses) == 1 else None
    if not isinstance(user, Op) or user.type != "expand_dims" or not isinstance(v.type, TensorType):
        return None
    if v.producer is None or user.block is not v.producer.block:  # absorbed ops are of the op's block
        return None
    if v.type.shape is None or len(v.type.shape) + len(unit_axes) != 5:
        return None
    return user if _const_axes(user, 5) == unit_axes else None


def _one_direction(op: Op) -> bool:
    direction = compile_time_value(op.inputs["direction"]) if isinstance(op.inputs.get("direction"), Value) else None
    return direction is None or str(np.asarray(direction).reshape(())) != "bidirectional"


def _absorbs(op: Op) -> list[Op]:
    """The wrapping ops the one-direction layer makes unnecessary (module docstring)."""
    if not _one_direction(op):
        return []
    out = []
    for key, axes in (("x", X_AXES), ("initial_h", STATE_AXES), ("initial_c", STATE_AXES)):
        v = op_input(op, key)
        p = rank5_source(v, axes) if v is not None and len(v.uses) == 1 else None
        if p is not None:
            out.append(p)
    for r, axes in zip(op.outputs, (X_AXES, STATE_AXES, STATE_AXES)):
        w = rank5_wrapper(r, axes)
        if w is not None:
            out.append(w)
    return out


def _sequence(e: NetworkEmitter, op: Op) -> str:
    x = op.inputs["x"]
    p = rank5_source(x, X_AXES)
    if p is not None:
        return e.blob(p.inputs["x"])
    return expand_dims(e, e.blob(x), [3, 4], f"{op.name}_x5")


def _states(e: NetworkEmitter, op: Op, keys: Sequence[str], directions: int) -> list[str]:
    """The initial-state inputs ``[1, B, H, 1, 1]`` in the layer's order (per direction: h[, c]);
    none when every state is a constant zero."""
    values = [op.inputs[k] for k in keys]
    consts = [e.const(v) for v in values]
    if all(c is not None and not np.any(np.asarray(c)) for c in consts):
        return []
    per_key: list[list[str]] = []
    for k, v, c in zip(keys, values, consts):
        if c is not None:
            halves = np.split(np.asarray(c), directions, axis=-1)
            per_key.append([e.load_constant(None, h[None, :, :, None, None], f"{op.name}_{k}{i}")
                            for i, h in enumerate(halves)])
            continue
        if directions == 1:
            p = rank5_source(v, STATE_AXES)
            per_key.append([e.blob(p.inputs["x"]) if p is not None else
                            expand_dims(e, e.blob(v), [0, 3, 4], f"{op.name}_{k}5")])
            continue
        blob = expand_dims(e, e.blob(v), [0, 3, 4], f"{op.name}_{k}5")
        parts = [e.fresh(f"{op.name}_{k}_{d}") for d in ("fwd", "bwd")]
        split = e.layer("splitND", f"{op.name}_{k}_split", [blob], parts)
        split.axis, split.numSplits = 2, 2
        per_key.append(parts)
    return [per_key[k][d] for d in range(directions) for k in range(len(keys))]


def _outputs(e: NetworkEmitter, op: Op, n_states: int, directions: int) -> list[str]:
    """The layer's output blobs (the sequence, then each direction's final states, as far as the
    last one read) and the squeeze layers that give the op's results."""
    def blob(r: Value, axes: tuple[int, ...], base: str) -> str:
        w = rank5_wrapper(r, axes) if directions == 1 else None
        return e.define(w.outputs[0]) if w is not None else e.fresh(base)

    y5 = blob(op.outputs[0], X_AXES, f"{op.name}_y5")
    states = [blob(op.outputs[1 + k], STATE_AXES, f"{op.name}_{'hc'[k]}{d}") if d == 0 else
              e.fresh(f"{op.name}_{'hc'[k]}{d}") for d in range(directions) for k in range(n_states)]
    used = [len(v.uses) > 0 for v in op.outputs[1:]]
    if not any(used):
        return [y5]
    last = max(k for k, u in enumerate(used) if u)
    return [y5] + (states[: last + 1] if directions == 1 else states)


def _unwrap(e: NetworkEmitter, op: Op, blobs: list[str], n_states: int, directions: int) -> None:
    """The op's results from the layer's rank-5 outputs (a result read only through its rank-5
    wrapper has that wrapper's blob already)."""
    if directions == 2 or rank5_wrapper(op.outputs[0], X_AXES) is None:
        squeeze_into(e, blobs[0], [3, 4], op.outputs[0], f"{op.name}_y")
    for k in range(n_states):
        result = op.outputs[1 + k]
        if not len(result.uses):
            continue
        if directions == 1:
            if rank5_wrapper(result, STATE_AXES) is None:
                squeeze_into(e, blobs[1 + k], [0, 3, 4], result, f"{op.name}_{'hc'[k]}")
            continue
        both = e.fresh(f"{op.name}_{'hc'[k]}5")
        e.layer("concatND", f"{op.name}_{'hc'[k]}_concat", [blobs[1 + k], blobs[1 + n_states + k]],
                [both]).axis = 2
        squeeze_into(e, both, [0, 3, 4], result, f"{op.name}_{'hc'[k]}")


def _sizes(e: NetworkEmitter, op: Op) -> tuple[np.ndarray, np.ndarray, int, int]:
    w_ih, w_hh = _weight(e, op, "weight_ih"), _weight(e, op, "weight_hh")
    assert w_ih is not None and w_hh is not None  # required inputs
    return w_ih, w_hh, int(w_ih.shape[1]), int(w_hh.shape[1])


# ---------------------------------------------------------------------------------------------
# The ops


@lowering("rnn", kind="decomposed", absorbs=_absorbs, note="expandDims + simpleRecurrent + squeeze (the layer is rank 5); "
                                         + CLIP_NOTE)
def _rnn(e: NetworkEmitter, op: Op) -> None:
    w_ih, w_hh, inp, hid = _sizes(e, op)
    bias = _weight(e, op, "bias")
    ins = [_sequence(e, op), *_states(e, op, ["initial_h"], 1)]
    outs = _outputs(e, op, 1, 1)
    p = e.layer("simpleRecurrent", op.name, ins, outs)
    p.inputVectorSize, p.outputVectorSize = inp, hid
    set_activation(p.activation, _str(e, op, "activation"))
    p.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    p.reverseInput = _str(e, op, "direction") == "reverse"
    e.weights(p.weightMatrix, w_ih)
    e.weights(p.recursionMatrix, w_hh)
    if bias is not None:
        p.hasBiasVector = True
        e.weights(p.biasVector, bias)
    _unwrap(e, op, outs, 1, 1)


@lowering("gru", kind="decomposed", absorbs=_absorbs, note="expandDims + gru + squeeze; iOS18 reset_after=True has no "
                                         "NeuralNetwork form; " + CLIP_NOTE)
def _gru(e: NetworkEmitter, op: Op) -> None:
    w_ih, w_hh, inp, hid = _sizes(e, op)
    if "reset_after" in op.inputs and bool(e.const_param(op, "reset_after")):
        raise LoweringError("reset_after=True (r * (R_o h + b)) has no NeuralNetwork form: the gru layer resets "
                            "the state before the recurrent matmul (R_o (r * h))")
    bias, input_bias = _weight(e, op, "bias"), _weight(e, op, "input_bias")
    if input_bias is not None:  # without reset_after both biases are added to every gate's sum
        bias = input_bias if bias is None else np.asarray(bias, np.float32) + np.asarray(input_bias, np.float32)
    ins = [_sequence(e, op), *_states(e, op, ["initial_h"], 1)]
    outs = _outputs(e, op, 1, 1)
    p = e.layer("gru", op.name, ins, outs)
    p.inputVectorSize, p.outputVectorSize = inp, hid
    for key in ("recurrent_activation", "activation"):
        set_activation(p.activations.add(), _str(e, op, key))
    p.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    p.reverseInput = _str(e, op, "direction") == "reverse"
    _fill(e, p, GRU_GATES, "WeightMatrix", _blocks(w_ih, 3))
    _fill(e, p, GRU_GATES, "RecursionMatrix", _blocks(w_hh, 3))
    if bias is not None:
        p.hasBiasVectors = True
        _fill(e, p, GRU_GATES, "BiasVector", _blocks(bias, 3))
    _unwrap(e, op, outs, 1, 1)


@lowering("lstm", kind="decomposed", absorbs=_absorbs, note="expandDims + uniDirectionalLSTM / biDirectionalLSTM (+ splitND, "
                                          "concatND for bidirectional states) + squeeze; " + CLIP_NOTE)
def _lstm(e: NetworkEmitter, op: Op) -> None:
    w_ih, w_hh, inp, hid = _sizes(e, op)
    direction = _str(e, op, "direction")
    n_dir = 2 if direction == "bidirectional" else 1
    suffixes = ["", "_back"][:n_dir]
    weights = [(w_ih, w_hh) if s == "" else (_weight(e, op, "weight_ih_back"), _weight(e, op, "weight_hh_back"))
               for s in suffixes]
    biases = [_weight(e, op, "bias" + s) for s in suffixes]
    peeps = [_weight(e, op, "peephole" + s) for s in suffixes]
    clip = e.const_param(op, "clip")
    if clip is not None and not float(np.asarray(clip)) > 0:
        raise LoweringError(f"clip {float(np.asarray(clip))} is not positive: cellClipThreshold 0 means the "
                            f"default (50) in NeuralNetwork")
    ins = [_sequence(e, op), *_states(e, op, ["initial_h", "initial_c"], n_dir)]
    outs = _outputs(e, op, 2, n_dir)
    p = e.layer("biDirectionalLSTM" if n_dir == 2 else "uniDirectionalLSTM", op.name, ins, outs)
    p.inputVectorSize, p.outputVectorSize = inp, hid
    acts = [_str(e, op, k) for k in ("recurrent_activation", "cell_activation", "activation")]
    for fields in ([p.activationsForwardLSTM, p.activationsBackwardLSTM] if n_dir == 2 else [p.activations]):
        for name in acts:
            set_activation(fields.add(), name)
    lp = p.params
    lp.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    lp.hasBiasVectors = any(b is not None for b in biases)
    lp.hasPeepholeVectors = any(x is not None for x in peeps)
    lp.cellClipThreshold = NO_CELL_CLIP if clip is None else float(np.asarray(clip))
    if n_dir == 1:
        p.reverseInput = direction == "reverse"
    for d in range(n_dir):
        wp = p.weightParams.add() if n_dir == 2 else p.weightParams
        w, r = weights[d]
        if w is None or r is None:
            raise LoweringError("bidirectional lstm needs weight_ih_back and weight_hh_back")
        _fill(e, wp, LSTM_GATES, "WeightMatrix", _blocks(w, 4))
        _fill(e, wp, LSTM_GATES, "RecursionMatrix", _blocks(r, 4))
        if lp.hasBiasVectors:
            b = biases[d] if biases[d] is not None else np.zeros(4 * hid, np.float32)
            _fill(e, wp, LSTM_GATES, "BiasVector", _blocks(b, 4))
        if lp.hasPeepholeVectors:
            x = peeps[d] if peeps[d] is not None else np.zeros(3 * hid, np.float32)
            _fill(e, wp, LSTM_GATES[:3], "PeepholeVector", _blocks(x, 3))
    _unwrap(e, op, outs, 2, n_dir)
