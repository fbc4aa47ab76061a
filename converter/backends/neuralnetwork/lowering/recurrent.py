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
from ....ir.types import is_static_dim
from ..emitter import NetworkEmitter, op_input
from . import _recurrent_io as io
from ._recurrent_io import STATE_AXES, X_AXES
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
# Inputs and outputs (the rank-5 blobs: _recurrent_io.py)


def _directions(op: Op) -> int:
    direction = compile_time_value(op.inputs["direction"]) if isinstance(op.inputs.get("direction"), Value) else None
    return 2 if direction is not None and str(np.asarray(direction).reshape(())) == "bidirectional" else 1


def _state_keys(op: Op) -> list[str]:
    return ["initial_h", "initial_c"] if op.type == "lstm" else ["initial_h"]


def _hidden(op: Op) -> int | None:
    """H: the last dim of a final state over the directions."""
    shape = io.dims(op.outputs[1])
    return int(shape[-1]) // _directions(op) if shape and is_static_dim(shape[-1]) else None


def _computed(v: Value) -> bool:
    """Whether ``v`` is computed at run time (a constant state is written rank-5 directly)."""
    return compile_time_value(v) is None


def _source(op: Op, v: Value, unit_axes: tuple[int, ...]) -> io.Source:
    """How the layer reads ``v`` with ``unit_axes`` inserted (an expandDims when its shape is not known)."""
    shape = io.dims(v)
    if shape is None:
        return io.Source(v, (), unit_axes)
    return io.input_source(v, io.with_unit_axes(shape, unit_axes), op.block)


def _sink(op: Op, r: Value, unit_axes: tuple[int, ...]) -> io.Sink:
    """Where the layer's blob holding ``r`` with ``unit_axes`` inserted goes (a squeeze to ``r``
    when its shape is not known)."""
    shape = io.dims(r)
    if shape is None:
        return io.Sink(r, unit_axes)
    return io.output_sink(r, io.with_unit_axes(shape, unit_axes), op.block)


def _state_sources(op: Op, v: Value, directions: int) -> io.StateHalves | None:
    """How each direction's rank-5 state is read from the state input ``v`` (None: a bidirectional
    state split at run time)."""
    if directions == 2:
        return io.state_halves(v, _hidden(op), op.block)
    source = _source(op, v, STATE_AXES)
    return io.StateHalves(source.absorbed, [source])


def _sinks(op: Op, directions: int) -> tuple[io.Sink, list[io.FinalHalves]]:
    """Where the layer writes the sequence, and each final state's blobs."""
    y_sink = _sink(op, op.outputs[0], X_AXES)
    finals = []
    for r in op.outputs[1:]:
        halves = io.final_halves(r, _hidden(op), op.block) if directions == 2 else None
        if halves is None:
            sink = _sink(op, r, STATE_AXES)
            halves = io.FinalHalves(sink.absorbed, [sink], [r], joined=directions == 2)
        finals.append(halves)
    return y_sink, finals


def _absorbs(op: Op) -> list[Op]:
    """The rank changes (and concat, split) between the layer's rank-5 blobs and the op that only
    they read (_recurrent_io.py): no layers of their own. None when the op cannot be lowered (its
    lowering reports why)."""
    try:
        return _wrapping_ops(op)
    except LoweringError:
        return []


def _wrapping_ops(op: Op) -> list[Op]:
    n_dir = _directions(op)
    out = list(_source(op, op.inputs["x"], X_AXES).absorbed)
    for key in _state_keys(op):
        v = op.inputs[key]
        found = _state_sources(op, v, n_dir) if _computed(v) and len(v.uses) == 1 else None
        if found is not None:
            out.extend(found.absorbed)
    y_sink, finals = _sinks(op, n_dir)
    out.extend(y_sink.absorbed)
    for f in finals:
        out.extend(f.absorbed)
        out.extend(a for s in f.halves for a in s.absorbed)
    return out


def _sequence(e: NetworkEmitter, op: Op) -> str:
    return io.read_source(e, _source(op, op.inputs["x"], X_AXES), f"{op.name}_x5")


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
        found = _state_sources(op, v, directions) if c is None else None
        if c is not None:
            halves = np.split(np.asarray(c), directions, axis=-1)
            per_key.append([e.load_constant(None, h[None, :, :, None, None], f"{op.name}_{k}{i}")
                            for i, h in enumerate(halves)])
        elif found is not None:
            per_key.append([io.read_source(e, s, f"{op.name}_{k}{i}_5") for i, s in enumerate(found.halves)])
        else:  # both directions' states in one [1, B, 2H, 1, 1] blob, split at run time
            blob = io.read_source(e, _source(op, v, STATE_AXES), f"{op.name}_{k}5")
            parts = [e.fresh(f"{op.name}_{k}_{d}") for d in ("fwd", "bwd")]
            split = e.layer("splitND", f"{op.name}_{k}_split", [blob], parts)
            split.axis, split.numSplits = 2, 2
            per_key.append(parts)
    return [per_key[k][d] for d in range(directions) for k in range(len(keys))]


def _outputs(e: NetworkEmitter, op: Op, directions: int) -> list[str]:
    """The layer's output blobs: the sequence, then each direction's final states (as far as the
    last one read); a blob is the value reading it through rank changes where there is one."""
    n_states = len(op.outputs) - 1
    y_sink, finals = _sinks(op, directions)
    blobs = [io.sink_blob(e, y_sink, f"{op.name}_y5")]
    states = [[io.sink_blob(e, None if f.joined else f.halves[d], f"{op.name}_{'hc'[k]}{d}")
               for d in range(directions)] for k, f in enumerate(finals)]
    used = [len(r.uses) > 0 for r in op.outputs[1:]]
    if not any(used):
        return blobs
    last = max(k for k, u in enumerate(used) if u) if directions == 1 else n_states - 1
    return blobs + [states[k][d] for d in range(directions) for k in range(last + 1)]


def _unwrap(e: NetworkEmitter, op: Op, blobs: list[str], directions: int) -> None:
    """The values read from the layer's rank-5 outputs; each result's rank-5 blob is recorded for
    the recurrent layers reading it."""
    n_states = len(op.outputs) - 1
    y_sink, finals = _sinks(op, directions)
    y = op.outputs[0]
    io.write_sink(e, y_sink, blobs[0], f"{op.name}_y")
    if io.dims(y) is not None:
        io.record_rank5(e, y, blobs[0], io.with_unit_axes(io.dims(y), X_AXES))  # type: ignore[arg-type]
    for k, (r, f) in enumerate(zip(op.outputs[1:], finals)):
        if not len(r.uses):
            continue
        written = [blobs[1 + d * n_states + k] for d in range(directions)]
        if f.joined:
            both = io.sink_blob(e, f.halves[0], f"{op.name}_{'hc'[k]}5")
            e.layer("concatND", f"{op.name}_{'hc'[k]}_concat", written, [both]).axis = 2
            written = [both]
        shape = io.dims(r)
        for d, (sink, result, blob) in enumerate(zip(f.halves, f.results, written)):
            io.write_sink(e, sink, blob, f"{op.name}_{'hc'[k]}{d if len(written) == 2 else ''}")
            if shape is not None:  # [1, B, D*H, 1, 1], or [1, B, H, 1, 1] for each of two halves
                io.record_rank5(e, result, blob, (1, shape[0], shape[1] if len(written) == 1 else _hidden(op), 1, 1))


def _sizes(e: NetworkEmitter, op: Op) -> tuple[np.ndarray, np.ndarray, int, int]:
    w_ih, w_hh = _weight(e, op, "weight_ih"), _weight(e, op, "weight_hh")
    assert w_ih is not None and w_hh is not None  # required inputs
    return w_ih, w_hh, int(w_ih.shape[1]), int(w_hh.shape[1])


# ---------------------------------------------------------------------------------------------
# Layer parameters (shared with the rank-5 backend, rank5/recurrent.py: everything but the blobs)


def fill_rnn(e: NetworkEmitter, op: Op, p: Any) -> None:
    """The SimpleRecurrentLayerParams ``p`` of rnn ``op``."""
    w_ih, w_hh, inp, hid = _sizes(e, op)
    bias = _weight(e, op, "bias")
    p.inputVectorSize, p.outputVectorSize = inp, hid
    set_activation(p.activation, _str(e, op, "activation"))
    p.sequenceOutput = bool(e.const_param(op, "output_sequence"))
    p.reverseInput = _str(e, op, "direction") == "reverse"
    (w,), (r,) = _matrix_blocks(op, "weight_ih", w_ih, 1), _matrix_blocks(op, "weight_hh", w_hh, 1)
    _fill(e, p, ["weight", "recursion"], "Matrix", [w, r])
    if bias is not None:
        p.hasBiasVector = True
        e.weights(p.biasVector, bias)


def check_gru(e: NetworkEmitter, op: Op) -> None:
    """A LoweringError when gru ``op`` has no layer form."""
    if "reset_after" in op.inputs and bool(e.const_param(op, "reset_after")):
        raise LoweringError("reset_after=True (r * (R_o h + b)) has no NeuralNetwork form: the gru layer resets "
                            "the state before the recurrent matmul (R_o (r * h))")


def fill_gru(e: NetworkEmitter, op: Op, p: Any) -> None:
    """The GRULayerParams ``p`` of gru ``op`` (checked by ``check_gru``)."""
    w_ih, w_hh, inp, hid = _sizes(e, op)
    bias, input_bias = _weight(e, op, "bias"), _weight(e, op, "input_bias")
    if input_bias is not None:  # without reset_after both biases are added to every gate's sum
        bias = input_bias if bias is None else np.asarray(bias, np.float32) + np.asarray(input_bias, np.float32)
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


def lstm_directions(e: NetworkEmitter, op: Op) -> int:
    """1 or 2 (bidirectional) for lstm ``op``; a LoweringError when it has no layer form."""
    clip = e.const_param(op, "clip")
    if clip is not None and not float(np.asarray(clip)) > 0:
        raise LoweringError(f"clip {float(np.asarray(clip))} is not positive: cellClipThreshold 0 means the "
                            f"default (50) in NeuralNetwork")
    n_dir = 2 if _str(e, op, "direction") == "bidirectional" else 1
    if n_dir == 2 and (op_input(op, "weight_ih_back") is None or op_input(op, "weight_hh_back") is None):
        raise LoweringError("bidirectional lstm needs weight_ih_back and weight_hh_back")
    return n_dir


def fill_lstm(e: NetworkEmitter, op: Op, p: Any, n_dir: int) -> None:
    """The UniDirectionalLSTMLayerParams / BiDirectionalLSTMLayerParams ``p`` of lstm ``op``
    (``n_dir`` from ``lstm_directions``)."""
    w_ih, w_hh, inp, hid = _sizes(e, op)
    direction = _str(e, op, "direction")
    suffixes = ["", "_back"][:n_dir]
    weights = [(w_ih, w_hh) if s == "" else (_weight(e, op, "weight_ih_back"), _weight(e, op, "weight_hh_back"))
               for s in suffixes]
    biases = [_weight(e, op, "bias" + s) for s in suffixes]
    peeps = [_weight(e, op, "peephole" + s) for s in suffixes]
    clip = e.const_param(op, "clip")
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


# ---------------------------------------------------------------------------------------------
# The ops


@lowering("rnn", kind="decomposed", absorbs=_absorbs, note="expandDims + simpleRecurrent + squeeze (the layer is rank 5); "
                                         + CLIP_NOTE)
def _rnn(e: NetworkEmitter, op: Op) -> None:
    ins = [_sequence(e, op), *_states(e, op, 1)]
    outs = _outputs(e, op, 1)
    fill_rnn(e, op, e.layer("simpleRecurrent", op.name, ins, outs))
    _unwrap(e, op, outs, 1)


@lowering("gru", kind="decomposed", absorbs=_absorbs, note="expandDims + gru + squeeze; iOS18 reset_after=True has no "
                                         "NeuralNetwork form; " + CLIP_NOTE)
def _gru(e: NetworkEmitter, op: Op) -> None:
    check_gru(e, op)
    ins = [_sequence(e, op), *_states(e, op, 1)]
    outs = _outputs(e, op, 1)
    fill_gru(e, op, e.layer("gru", op.name, ins, outs))
    _unwrap(e, op, outs, 1)


@lowering("lstm", kind="decomposed", absorbs=_absorbs, note="expandDims + uniDirectionalLSTM / biDirectionalLSTM (+ splitND, "
                                          "concatND for bidirectional states) + squeeze; " + CLIP_NOTE)
def _lstm(e: NetworkEmitter, op: Op) -> None:
    n_dir = lstm_directions(e, op)
    ins = [_sequence(e, op), *_states(e, op, n_dir)]
    outs = _outputs(e, op, n_dir)
    layer = e.layer("biDirectionalLSTM" if n_dir == 2 else "uniDirectionalLSTM", op.name, ins, outs)
    fill_lstm(e, op, layer, n_dir)
    _unwrap(e, op, outs, n_dir)
