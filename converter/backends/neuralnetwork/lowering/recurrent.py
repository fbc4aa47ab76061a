"""Recurrent ops: rnn -> simpleRecurrent, gru -> gru, lstm -> uniDirectionalLSTM / biDirectionalLSTM.

The recurrent layers keep the legacy rank-5 layout in every network (the proto's layer comments;
our frontend reads them that way): the sequence is ``[Seq, Batch, I, 1, 1]``, each state
``[1, Batch, H, 1, 1]``, the outputs ``[Seq or 1, Batch, H (2H bidirectional), 1, 1]`` then the final
states. The IR's ``[S, B, I]`` sequence and ``[B, H]`` states are wrapped with ``expandDims`` and the
results unwrapped with ``squeeze`` (only the results something reads). Constant initial states are
written rank-5 directly; all-zero ones are left out (the layers start from zeros). A program that
already holds the rank-5 values (what our NeuralNetwork frontend writes for these layers: ``squeeze``
or ``reshape`` of a ``[S, B, I, 1, 1]`` / ``[1, B, H, 1, 1]`` value into the op, ``expand_dims`` of
its results; for the bidirectional layer a ``concat`` of the two directions' states and a ``split``
of the final ones) gets the one layer: it reads and writes those values, and the wrapping ops are
absorbed.

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
from ....ir.types import TensorType, is_static_dim
from ..emitter import NetworkEmitter, op_input
from .quant import QuantizedWeights, compressed
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


def _fill(e: NetworkEmitter, owner: Any, names: Sequence[str], suffix: str,
          arrays: Sequence[np.ndarray | QuantizedWeights]) -> None:
    for name, arr in zip(names, arrays):
        wp = getattr(owner, f"{name}{suffix}")
        if isinstance(arr, QuantizedWeights):
            arr.write(wp)
        else:
            e.weights(wp, arr)


def _matrix_blocks(op: Op, key: str, dense: np.ndarray, n: int) -> list[np.ndarray | QuantizedWeights]:
    """The ``n`` gate blocks of weight matrix ``key``: quantized when the program had them so."""
    q = compressed(op, key)
    if q is None:
        return list(_blocks(dense, n))
    rows = dense.shape[0] // n
    return [q.rows(i * rows, (i + 1) * rows) for i in range(n)]


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
    units = all(is_static_dim(shape[i]) and int(shape[i]) == 1 for i in unit_axes)
    return p if units and tuple(out) == kept else None


def reshape_source(v: Value) -> Op | None:
    """The ``reshape`` making ``v`` when ``v``'s shape is static: the layer's rank-5 input can be one
    ``reshapeStatic`` of that reshape's input instead of a reshape and an ``expandDims``."""
    p = v.producer
    if p is None or p.type != "reshape" or not isinstance(p.inputs.get("x"), Value):
        return None
    t = v.type
    return p if isinstance(t, TensorType) and t.shape is not None and all(map(is_static_dim, t.shape)) else None


def _to_rank5(e: NetworkEmitter, v: Value, unit_axes: tuple[int, ...], base: str) -> str:
    """``v`` with the unit axes ``unit_axes`` inserted: read past the op that dropped them, or one
    ``reshapeStatic`` of the input of the reshape making ``v``, else an ``expandDims``."""
    p = rank5_source(v, unit_axes)
    if p is not None:
        return e.blob(p.inputs["x"])
    r = reshape_source(v)
    if r is not None:
        dims = [int(d) for d in v.type.shape]  # type: ignore[union-attr]
        for a in unit_axes:
            dims.insert(a, 1)
        out = e.fresh(base)
        e.layer("reshapeStatic", base, [e.blob(r.inputs["x"])], [out]).targetShape.extend(dims)
        return out
    return expand_dims(e, e.blob(v), unit_axes, base)


def _wrapping_input(v: Value, unit_axes: tuple[int, ...]) -> Op | None:
    return rank5_source(v, unit_axes) or reshape_source(v)


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


def rank1_reader(r: Value) -> Op | None:
    """The one op reading a final state ``r`` ([1, H]) when it is ``squeeze(r, axes=[0])`` (the [H]
    form a declared rank-1 state feature has): squeezed straight from the layer's rank-5 state."""
    uses = list(r.uses)
    user = uses[0].user if len(uses) == 1 else None
    shape = r.type.shape if isinstance(r.type, TensorType) else None
    if not isinstance(user, Op) or user.type != "squeeze" or r.producer is None or user.block is not r.producer.block:
        return None
    if shape is None or len(shape) != 2 or not (is_static_dim(shape[0]) and int(shape[0]) == 1):
        return None
    return user if _const_axes(user, 2) == (0,) else None


RANK1_STATE_AXES = (0, 1, 3, 4)


def _directions(op: Op) -> int:
    direction = compile_time_value(op.inputs["direction"]) if isinstance(op.inputs.get("direction"), Value) else None
    return 2 if direction is not None and str(np.asarray(direction).reshape(())) == "bidirectional" else 1


def _const_int(v: object) -> int | None:
    val = compile_time_value(v) if isinstance(v, Value) else None
    return None if val is None or np.asarray(val).size != 1 else int(np.asarray(val).reshape(()))


def state_parts(v: Value, directions: int) -> tuple[list[Value], Op | None] | None:
    """Each direction's ``[B, H]`` state in ``v`` (``[B, D*H]``): ``v`` itself, or the two halves a
    ``concat`` on the last axis makes it of (and that concat); None for a bidirectional state made
    otherwise."""
    if directions == 1:
        return [v], None
    c = v.producer
    parts = c.inputs.get("values") if c is not None and c.type == "concat" else None
    if not isinstance(parts, tuple) or len(parts) != 2 or _const_int(c.inputs.get("axis")) not in (1, -1):
        return None
    return list(parts), c


def state_wrappers(r: Value, directions: int) -> tuple[list[Op], list[Op]] | None:
    """The ``expand_dims`` giving each direction's rank-5 final state from the result ``r``, and
    every op between (the one reader of ``r``: the wrapper, or a ``split`` in two halves of it on
    the last axis whose halves each have one wrapper)."""
    if directions == 1:
        w = rank5_wrapper(r, STATE_AXES) or rank1_reader(r)
        return ([w], [w]) if w is not None else None
    uses = list(r.uses)
    split = uses[0].user if len(uses) == 1 else None
    if not isinstance(split, Op) or split.type != "split" or split.block is not r.producer.block:  # type: ignore[union-attr]
        return None
    if _const_int(split.inputs.get("axis")) not in (1, -1) or _const_int(split.inputs.get("num_splits")) != 2:
        return None
    wrappers = [rank5_wrapper(half, STATE_AXES) for half in split.outputs]
    if len(wrappers) != 2 or any(w is None for w in wrappers):
        return None
    return wrappers, [split, *wrappers]  # type: ignore[list-item]


def _state_keys(op: Op) -> list[str]:
    return ["initial_h", "initial_c"] if op.type == "lstm" else ["initial_h"]


def _absorbs(op: Op) -> list[Op]:
    """The wrapping ops the layer makes unnecessary (module docstring): those making its inputs from
    rank-5 values (each read only on the way to it), and those making rank-5 values of its results."""
    n_dir = _directions(op)
    out = []
    x = op.inputs["x"]
    p = _wrapping_input(x, X_AXES)
    if p is not None and len(x.uses) == 1:
        out.append(p)
    for key in _state_keys(op):
        v = op.inputs[key]
        found = state_parts(v, n_dir)
        if found is None or not _computed(v) or len(v.uses) != 1:
            continue
        parts, concat = found
        if concat is not None:
            out.append(concat)
        for u in parts:  # each read only by the concat (or the op)
            p = _wrapping_input(u, STATE_AXES)
            if p is not None and len(u.uses) == 1:
                out.append(p)
    w = rank5_wrapper(op.outputs[0], X_AXES)
    if w is not None:
        out.append(w)
    for r in op.outputs[1:]:
        found2 = state_wrappers(r, n_dir)
        if found2 is not None:
            out.extend(found2[1])
    return out


def _computed(v: Value) -> bool:
    """Whether ``v`` is computed at run time (a constant state is written rank-5 directly)."""
    return compile_time_value(v) is None


def _sequence(e: NetworkEmitter, op: Op) -> str:
    return _to_rank5(e, op.inputs["x"], X_AXES, f"{op.name}_x5")


def _states(e: NetworkEmitter, op: Op, directions: int) -> list[str]:
    """The initial-state inputs ``[1, B, H, 1, 1]`` in the layer's order (per direction: h[, c]);
    none when every state is a constant zero."""
    keys = _state_keys(op)
    values = [op.inputs[k] for k in keys]
    consts = [e.const(v) for v in values]
    if all(c is not None and not np.any(np.asarray(c)) for c in consts):
        return []
    per_key: list[list[str]] = []
    for k, v, c in zip(keys, values, consts):
        found = state_parts(v, directions)
        if c is not None:
            halves = np.split(np.asarray(c), directions, axis=-1)
            per_key.append([e.load_constant(None, h[None, :, :, None, None], f"{op.name}_{k}{i}")
                            for i, h in enumerate(halves)])
        elif found is not None:
            per_key.append([_to_rank5(e, u, STATE_AXES, f"{op.name}_{k}{i}_5") for i, u in enumerate(found[0])])
        else:
            blob = expand_dims(e, e.blob(v), [0, 3, 4], f"{op.name}_{k}5")
            parts = [e.fresh(f"{op.name}_{k}_{d}") for d in ("fwd", "bwd")]
            split = e.layer("splitND", f"{op.name}_{k}_split", [blob], parts)
            split.axis, split.numSplits = 2, 2
            per_key.append(parts)
    return [per_key[k][d] for d in range(directions) for k in range(len(keys))]


def _outputs(e: NetworkEmitter, op: Op, directions: int) -> list[str]:
    """The layer's output blobs: the sequence, then each direction's final states (as far as the
    last one read); a result's rank-5 wrappers get theirs written directly."""
    n_states = len(op.outputs) - 1
    w = rank5_wrapper(op.outputs[0], X_AXES)
    blobs = [e.define(w.outputs[0]) if w is not None else e.fresh(f"{op.name}_y5")]
    states: list[list[str]] = []
    for k, r in enumerate(op.outputs[1:]):
        found = state_wrappers(r, directions)
        states.append([e.define(w.outputs[0]) if w.type == "expand_dims" else e.fresh(f"{op.name}_{'hc'[k]}{d}")
                       for d, w in enumerate(found[0])] if found is not None else
                      [e.fresh(f"{op.name}_{'hc'[k]}{d}") for d in range(directions)])
    used = [len(r.uses) > 0 for r in op.outputs[1:]]
    if not any(used):
        return blobs
    last = max(k for k, u in enumerate(used) if u) if directions == 1 else n_states - 1
    return blobs + [states[k][d] for d in range(directions) for k in range(last + 1)]


def _unwrap(e: NetworkEmitter, op: Op, blobs: list[str], directions: int) -> None:
    """The op's results from the layer's rank-5 outputs (a result read only through its rank-5
    wrappers has them already)."""
    n_states = len(op.outputs) - 1
    if rank5_wrapper(op.outputs[0], X_AXES) is None:
        squeeze_into(e, blobs[0], [3, 4], op.outputs[0], f"{op.name}_y")
    for k, result in enumerate(op.outputs[1:]):
        found = state_wrappers(result, directions) if len(result.uses) else None
        if found is not None and directions == 1 and found[0][0].type == "squeeze":  # rank-1 [H] result
            squeeze_into(e, blobs[1 + k], RANK1_STATE_AXES, found[0][0].outputs[0], f"{op.name}_{'hc'[k]}")
            continue
        if not len(result.uses) or found is not None:
            continue
        if directions == 1:
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
    ins = [_sequence(e, op), *_states(e, op, 1)]
    outs = _outputs(e, op, 1)
    p = e.layer("simpleRecurrent", op.name, ins, outs)
    p.inputVectorSize, p.outputVectorSize = inp, hid
    set_activation(p.activation, _str(e, op, "activation"))
    p.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    p.reverseInput = _str(e, op, "direction") == "reverse"
    (w,), (r,) = _matrix_blocks(op, "weight_ih", w_ih, 1), _matrix_blocks(op, "weight_hh", w_hh, 1)
    _fill(e, p, ["weight", "recursion"], "Matrix", [w, r])
    if bias is not None:
        p.hasBiasVector = True
        e.weights(p.biasVector, bias)
    _unwrap(e, op, outs, 1)


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
    ins = [_sequence(e, op), *_states(e, op, 1)]
    outs = _outputs(e, op, 1)
    p = e.layer("gru", op.name, ins, outs)
    p.inputVectorSize, p.outputVectorSize = inp, hid
    for key in ("recurrent_activation", "activation"):
        set_activation(p.activations.add(), _str(e, op, key))
    p.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    p.reverseInput = _str(e, op, "direction") == "reverse"
    _fill(e, p, GRU_GATES, "WeightMatrix", _matrix_blocks(op, "weight_ih", w_ih, 3))
    _fill(e, p, GRU_GATES, "RecursionMatrix", _matrix_blocks(op, "weight_hh", w_hh, 3))
    if bias is not None:
        p.hasBiasVectors = True
        _fill(e, p, GRU_GATES, "BiasVector", _blocks(bias, 3))
    _unwrap(e, op, outs, 1)


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
    ins = [_sequence(e, op), *_states(e, op, n_dir)]
    outs = _outputs(e, op, n_dir)
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
        suffix = "" if d == 0 else "_back"
        _fill(e, wp, LSTM_GATES, "WeightMatrix", _matrix_blocks(op, "weight_ih" + suffix, w, 4))
        _fill(e, wp, LSTM_GATES, "RecursionMatrix", _matrix_blocks(op, "weight_hh" + suffix, r, 4))
        if lp.hasBiasVectors:
            b = biases[d] if biases[d] is not None else np.zeros(4 * hid, np.float32)
            _fill(e, wp, LSTM_GATES, "BiasVector", _blocks(b, 4))
        if lp.hasPeepholeVectors:
            x = peeps[d] if peeps[d] is not None else np.zeros(3 * hid, np.float32)
            _fill(e, wp, LSTM_GATES[:3], "PeepholeVector", _blocks(x, 3))
    _unwrap(e, op, outs, n_dir)
