"""Recurrent ops as the legacy layers (specification version 1): rnn -> simpleRecurrent, gru ->
gru, lstm -> uniDirectionalLSTM / biDirectionalLSTM.

In a rank-5 network these layers read the blobs as they are: the sequence ``[Seq, 1, I, 1, 1]``
(an IR ``[S, 1, I]`` sequence, layout.py, or one step ``[1, 1, I]``; a static ``[S, 1, I]``
value is permuted into Seq), each initial state
``[1, 1, H, 1, 1]`` (IR ``[1, H]``), and write ``[Seq or 1, 1, H (2H bidirectional), 1, 1]`` then
the final states, per direction h (and c). The layer parameters (gate blocks, activations, clip)
are the N-dimensional lowering's (lowering/recurrent.py ``fill_*``), so both write the same layer.
All-zero constant initial states are left out (the layers start from zeros); otherwise every state
is an input (the layers take all or none). A bidirectional lstm's ``[1, 2H]`` states are split
into the directions' halves with a ``split`` layer (along C) and its final ones joined with a
``concat`` layer, where something reads them; where the program itself concatenates (splits) the
halves, the layer reads (writes) them and the concat/split layers are dropped (``Rank5Emitter.parts``).

Where results can differ from the IR op: every NeuralNetwork recurrent layer clips each gate
pre-activation to [-50, 50] (lowering/recurrent.py CLIP_NOTE): invisible for sigmoid, tanh,
scaled_tanh and hard_sigmoid gates, not for relu or linear ones.
"""

from __future__ import annotations

import numpy as np

from ....errors import LoweringError
from ....ir.core import Op, Value
from ..lowering.recurrent import check_gru, fill_gru, fill_lstm, fill_rnn, lstm_directions
from .layout import Rank5Emitter, blob_axes, dims, permutation, sequence_split, shape_text, static_shape
from .lowering import rank5


def _sequence(e: Rank5Emitter, op: Op) -> tuple[str, object]:
    """The blob of the op's ``x`` ``[S, 1, I]`` and its Seq (None: one step)."""
    x = op.inputs["x"]
    shape = dims(x)
    seq = e.seq(x)
    if len(shape) != 3 or shape[1] != 1:
        raise LoweringError(f"{op.type} input of shape {shape_text(shape)}: the rank-5 layer takes "
                            f"[Seq, 1, I] (batch 1)")
    if seq is None and static_shape(x)[0] != 1:  # a [S, 1, I] value made by the program: into Seq
        s = int(shape[0])
        axis = permutation(blob_axes(shape, False), blob_axes(shape, True))
        return e.permuted(e.get(x, (s, 1, int(shape[2]))), axis, f"{op.name}_sequence"), s
    return e.get(x, (int(shape[2]), 1, 1)), seq


def _states(e: Rank5Emitter, op: Op, hidden: int, n_dir: int) -> list[str]:
    """The initial-state blobs in the layer's order (per direction: h[, c]); none when every state
    is a constant zero."""
    keys = ["initial_h", "initial_c"] if op.type == "lstm" else ["initial_h"]
    values: list[Value] = [op.inputs[k] for k in keys]
    consts = [e.const(v) for v in values]
    if all(c is not None and not np.any(np.asarray(c)) for c in consts):
        return []
    per_key: list[list[str]] = []
    for k, v, c in zip(keys, values, consts):
        if e.seq(v) is not None or dims(v) != [1, hidden * n_dir]:
            raise LoweringError(f"{op.type} state '{k}' of shape {shape_text(dims(v))}: the rank-5 layer "
                                f"takes [1, H] (batch 1)")
        if c is not None:
            halves = np.split(np.asarray(c, np.float32).reshape(-1), n_dir)
            per_key.append([e.load_constant(None, h, f"{op.name}_{k}{i}", layout=(hidden, 1, 1))
                            for i, h in enumerate(halves)])
            continue
        parts = e.parts.get(v, [])
        if n_dir == 2 and len(parts) == 2 and all(lay == (hidden, 1, 1) for _, lay in parts):
            per_key.append([b for b, _ in parts])  # the directions' states, concatenated by the program
            continue
        blob = e.get(v, (hidden * n_dir, 1, 1))
        if n_dir == 1:
            per_key.append([blob])
            continue
        parts = [e.fresh(f"{op.name}_{k}_{d}") for d in ("fwd", "bwd")]
        e.layer("split", f"{op.name}_{k}_split", [blob], parts).nOutputs = 2
        per_key.append(parts)
    return [per_key[k][d] for d in range(n_dir) for k in range(len(keys))]


def _outputs(e: Rank5Emitter, op: Op, hidden: int, n_dir: int, seq: object) -> list[str]:
    """The layer's output blobs (the sequence, then per direction h[, c]); a bidirectional final
    state that something reads is joined by a concat layer written after the layer
    (``_join_finals``)."""
    y = op.outputs[0]
    sequence_output = bool(np.asarray(e.const_param(op, "output_sequence")).reshape(()))
    out_seq = seq if sequence_output else None
    split = sequence_split(dims(y), out_seq)
    fits = (split is not None and split == (out_seq, (hidden * n_dir, 1, 1))) if out_seq is not None \
        else dims(y) == [1, 1, hidden * n_dir]
    if not fits:
        raise LoweringError(f"{op.type} output of shape {shape_text(dims(y))}: the rank-5 layer writes "
                            f"[Seq or 1, 1, {hidden * n_dir}]")
    blobs = [e.put(y, (hidden * n_dir, 1, 1), out_seq)]
    finals = op.outputs[1:]
    for d in range(n_dir):
        for k, r in enumerate(finals):
            if n_dir == 1:
                blobs.append(e.put(r, (hidden, 1, 1)))
            else:
                blobs.append(e.fresh(f"{op.name}_{'hc'[k]}_{('fwd', 'bwd')[d]}"))
    return blobs


def _join_finals(e: Rank5Emitter, op: Op, blobs: list[str], hidden: int) -> None:
    """A bidirectional lstm's final states ``[1, 2H]``: the two directions' blobs concatenated along C."""
    finals = op.outputs[1:]
    n = len(finals)
    for k, r in enumerate(finals):
        if len(r.uses):  # a model output counts as a use
            halves = [blobs[1 + k], blobs[1 + n + k]]
            e.layer("concat", f"{op.name}_{'hc'[k]}", halves, [e.put(r, (2 * hidden, 1, 1))])
            e.parts[r] = [(b, (hidden, 1, 1)) for b in halves]


@rank5("rnn", "gru", "lstm", per_step=True)
def _recurrent(e: Rank5Emitter, op: Op) -> None:
    if op.type == "gru":
        check_gru(e, op)
    n_dir = lstm_directions(e, op) if op.type == "lstm" else 1
    if op.type != "lstm" and str(np.asarray(e.const_param(op, "direction")).reshape(())) == "bidirectional":
        raise LoweringError(f"a bidirectional {op.type} (the legacy layer runs one direction)")
    w_hh = e.const_array(op.inputs["weight_hh"], "weight_hh")
    hidden = int(w_hh.shape[1])
    x, seq = _sequence(e, op)
    ins = [x, *_states(e, op, hidden, n_dir)]
    outs = _outputs(e, op, hidden, n_dir, seq)
    kind = {"rnn": "simpleRecurrent", "gru": "gru"}.get(op.type) or \
        ("biDirectionalLSTM" if n_dir == 2 else "uniDirectionalLSTM")
    params = e.layer(kind, op.name, ins, outs)
    if op.type == "rnn":
        fill_rnn(e, op, params)
    elif op.type == "gru":
        fill_gru(e, op, params)
    else:
        fill_lstm(e, op, params, n_dir)
    if n_dir == 2:
        _join_finals(e, op, outs, hidden)
