"""Recurrent layers: simpleRecurrent, gru, uniDirectionalLSTM, biDirectionalLSTM.

Layout (legacy rank 5, in every network): ``x`` is ``[Seq, Batch, inputVectorSize, 1, 1]``; the
optional extra inputs are initial states ``[1, Batch, H, 1, 1]`` (zeros when absent: ``h`` for
simpleRecurrent and gru, ``h, c`` for the LSTM, ``h_f, c_f, h_b, c_b`` for the bidirectional LSTM);
the outputs are ``[Seq or 1, Batch, H (2H bidirectional), 1, 1]`` followed by the final states
``[1, Batch, H, 1, 1]`` in the order of the inputs. A layer may list fewer outputs.

Gate blocks (the spec's equations):

- simpleRecurrent ``y_t = f(clip(W x_t + R y_{t-1} + b))``.
- gru ``z = f(clip(W_z x + R_z y + b_z))``, ``r = f(clip(W_r x + R_r y + b_r))``,
  ``o = g(clip(W_o x + R_o (y * r) + b_o))``, ``y_t = (1 - z) * o + z * y`` (MIL's gru, iOS15).
- LSTM ``i = f(clip(W_i x + R_i y + p_i c + b_i))``, ``f_t`` likewise (``1 - i`` when
  coupledInputAndForgetGate), ``z = g(clip(W_z x + R_z y + b_z))``, ``c_t = c f_t + i z`` clipped to
  ``+-cellClipThreshold`` (0 means 50), ``o = f(clip(W_o x + R_o y + p_o c_t + b_o))``,
  ``y_t = h(c_t) o``; forgetBias adds 1 to ``b_f`` (also when hasBiasVectors is false: b_f is then 0).

``clip`` bounds every gate pre-activation to [-50, 50]. reverseInput processes ``x[S-1] .. x[0]`` and
emits the outputs in processing order (coremltools checks MIL ``direction="reverse"``, which its
NeuralNetwork backend writes as reverseInput, against the runtime that way); the bidirectional
layer aligns the backward outputs with the input positions (the spec's example) and concatenates
forward and backward along C.

Activations: Linear, Sigmoid, Tanh, ReLU, ScaledTanh, SigmoidHard (the only ones the spec allows
here), computed by the spec's formulas in their fields. An empty message (both fields 0, which is
what coremltools' builder writes for every recurrent activation) takes the values the Core ML
runtime uses for it: ``linear {}`` is the identity (1, 0), ``sigmoidHard {}`` is (0.2, 0.5) and
``scaledTanh {}`` is (1, 1), i.e. tanh (what coremltools' tests of the runtime expect; the proto
comment names 1.7159 and 2/3 as the only supported values, which those tests contradict). A message
with any field set is read as written, a 0 included: ``linear {alpha: 0, beta: 1}`` is the
constant 1, as the formula says (proto3 cannot tell an unset field from a 0, and no evidence
gives a single 0 field another meaning).

Lowering: the MIL op (rnn, gru, lstm) where it computes exactly this function: every activation has
a MIL name, the gate activations saturate before +-50 (so the pre-activation clip changes no fp32
value by more than 2e-22), and the gates are not coupled. Otherwise a while_loop over the time
steps that follows the equations above literally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ....formats.proto import NeuralNetwork_pb2
from ....ir.builder import Builder
from ....ir.core import Value
from ....ir.types import is_static_dim
from ..context import LayerContext
from ..registry import lowers

PRE_CLIP = 50.0  # the spec's clip() of every gate pre-activation
DEFAULT_CELL_CLIP = 50.0  # cellClipThreshold = 0
ACTIVATIONS = ("linear", "sigmoid", "tanh", "ReLU", "scaledTanh", "sigmoidHard")


# ---------------------------------------------------------------------------------------------
# Activations


@dataclass(frozen=True)
class Act:
    """A recurrent activation with its effective parameters."""

    kind: str
    alpha: float = 0.0
    beta: float = 0.0

    @property
    def mil_name(self) -> str | None:
        """The MIL recurrent-op activation computing exactly this function, if any."""
        if self.kind in ("sigmoid", "tanh"):
            return self.kind
        if self.kind == "ReLU":
            return "relu"
        if self.kind == "linear" and (self.alpha, self.beta) == (1.0, 0.0):
            return "linear"
        if self.kind == "scaledTanh" and (self.alpha, self.beta) == (1.0, 1.0):
            return "tanh"
        if self.kind == "sigmoidHard" and (np.float32(self.alpha), np.float32(self.beta)) == (
                np.float32(0.2), np.float32(0.5)):
            return "hard_sigmoid"
        return None

    @property
    def saturates(self) -> bool:
        """Whether ``f(clip(x, -50, 50)) == f(x)`` for fp32 ``x`` (within 2e-22 for sigmoid):
        then the spec's pre-activation clip can be left out."""
        if self.kind in ("sigmoid", "tanh"):
            return True
        if self.kind == "scaledTanh":
            return bool(np.tanh(np.float32(abs(self.beta) * PRE_CLIP)) == np.float32(1))
        if self.kind == "sigmoidHard":
            ends = (self.alpha * PRE_CLIP + self.beta, -self.alpha * PRE_CLIP + self.beta)
            return min(ends) <= 0.0 and max(ends) >= 1.0
        return False

    def apply(self, b: Builder, x: Value, name: str) -> Value:
        if self.kind == "sigmoid":
            return b.sigmoid(x=x, name=name)
        if self.kind == "tanh":
            return b.tanh(x=x, name=name)
        if self.kind == "ReLU":
            return b.relu(x=x, name=name)
        alpha, beta = np.float32(self.alpha), np.float32(self.beta)
        if self.kind == "linear":
            return b.linear_activation(x=x, alpha=alpha, beta=beta, name=name)
        if self.kind == "scaledTanh":
            return b.scaled_tanh(x=x, alpha=alpha, beta=beta, name=name)
        return b.sigmoid_hard(x=x, alpha=alpha, beta=beta, name=name)

    def gate(self, b: Builder, pre: Value, name: str) -> Value:
        """``f(clip(pre))``: the activation of a gate pre-activation."""
        if not self.saturates:
            pre = b.clip(x=pre, alpha=np.float32(-PRE_CLIP), beta=np.float32(PRE_CLIP), name=f"{name}_clip")
        return self.apply(b, pre, name)


# alpha, beta of an empty message (both fields 0): the runtime's values (module docstring)
_EMPTY = {"linear": (1.0, 0.0), "scaledTanh": (1.0, 1.0), "sigmoidHard": (0.2, 0.5)}


def parse_activation(ctx: LayerContext, p: NeuralNetwork_pb2.ActivationParams, what: str) -> Act:
    kind = p.WhichOneof("NonlinearityType")
    if kind is None:
        raise ctx.fail(f"{what} has no activation type", field=what)
    if kind not in ACTIVATIONS:
        raise ctx.fail(f"{what} is {kind}; recurrent layers take {', '.join(ACTIVATIONS)}", field=what)
    if kind not in _EMPTY:
        return Act(kind)
    msg = getattr(p, kind)
    alpha, beta = float(msg.alpha), float(msg.beta)
    if alpha == 0.0 and beta == 0.0:
        alpha, beta = _EMPTY[kind]
    return Act(kind, alpha, beta)


def parse_activations(ctx: LayerContext, acts: Sequence[NeuralNetwork_pb2.ActivationParams], count: int,
                      what: str) -> tuple[Act, ...]:
    if len(acts) != count:
        raise ctx.fail(f"{what} lists {len(acts)} activations, {count} expected", field=what)
    return tuple(parse_activation(ctx, a, f"{what}[{i}]") for i, a in enumerate(acts))


# ---------------------------------------------------------------------------------------------
# The layers, parsed


@dataclass
class Direction:
    """One direction's parameters; gate blocks stacked on axis 0 in the layer's order
    (rnn: one; gru: z, r, o; LSTM: i, f, o, z)."""

    w: np.ndarray  # [G*H, I]
    r: np.ndarray  # [G*H, H]
    bias: np.ndarray | None  # [G*H]
    peephole: np.ndarray | None  # [3*H]: i, f, o
    acts: tuple[Act, ...]


@dataclass
class Recurrent:
    """A recurrent layer, parsed: everything the two lowerings need."""

    kind: str  # "rnn", "gru" or "lstm"
    input_size: int
    hidden: int
    directions: list[Direction]
    sequence_output: bool
    reverse: bool = False
    coupled: bool = False
    cell_clip: float = DEFAULT_CELL_CLIP

    @property
    def n_states(self) -> int:
        return 2 if self.kind == "lstm" else 1


def _sizes(ctx: LayerContext) -> tuple[int, int]:
    p = ctx.params
    i, h = int(p.inputVectorSize), int(p.outputVectorSize)
    if i <= 0 or h <= 0:
        raise ctx.fail(f"inputVectorSize ({i}) and outputVectorSize ({h}) must be positive",
                       field="outputVectorSize" if i > 0 else "inputVectorSize")
    return i, h


def _weights(ctx: LayerContext, wp: NeuralNetwork_pb2.WeightParams, shape: tuple[int, ...], what: str) -> np.ndarray:
    """Dense fp32 values: the gate blocks are re-laid out, so fp16 or quantized storage is not kept."""
    w = ctx.weight_data(wp, shape, what)
    if w.dense is None or w.dense.dtype != np.float32:
        ctx.note(f"'{ctx.name}': recurrent weights are stored as fp32 (their gate blocks are re-laid out)")
    return w.decompressed()


def _stack(ctx: LayerContext, owner: object, fields: Sequence[str], shape: tuple[int, ...], prefix: str) -> np.ndarray:
    """The WeightParams ``fields`` of ``owner`` (each of ``shape``) stacked on axis 0."""
    return np.concatenate([_weights(ctx, getattr(owner, f), shape, f"{prefix}{f}") for f in fields], axis=0)


def _lstm_direction(ctx: LayerContext, wp: NeuralNetwork_pb2.LSTMWeightParams, params: NeuralNetwork_pb2.LSTMParams,
                    acts: tuple[Act, ...], inp: int, hid: int, prefix: str) -> Direction:
    gates = ("inputGate", "forgetGate", "outputGate", "blockInput")  # MIL's ifoz order
    w = _stack(ctx, wp, [f"{g}WeightMatrix" for g in gates], (hid, inp), prefix)
    r = _stack(ctx, wp, [f"{g}RecursionMatrix" for g in gates], (hid, hid), prefix)
    bias = _stack(ctx, wp, [f"{g}BiasVector" for g in gates], (hid,), prefix) if params.hasBiasVectors else None
    if params.forgetBias:
        bias = np.zeros(4 * hid, np.float32) if bias is None else bias.copy()
        bias[hid:2 * hid] += np.float32(1)
    peep = None
    if params.hasPeepholeVectors:
        peep = _stack(ctx, wp, [f"{g}PeepholeVector" for g in gates[:3]], (hid,), prefix)
    return Direction(w, r, bias, peep, acts)


def _lstm_common(ctx: LayerContext, params: NeuralNetwork_pb2.LSTMParams) -> dict:
    clip = float(params.cellClipThreshold)
    if clip < 0 or not np.isfinite(clip):
        raise ctx.fail(f"cellClipThreshold {clip} must be a non-negative number", field="params.cellClipThreshold")
    return {"sequence_output": params.sequenceOutput, "coupled": params.coupledInputAndForgetGate,
            "cell_clip": clip or DEFAULT_CELL_CLIP}


@lowers("simpleRecurrent")
def simple_recurrent(ctx: LayerContext) -> list[Value]:
    p = ctx.params
    inp, hid = _sizes(ctx)
    w = _weights(ctx, p.weightMatrix, (hid, inp), "weightMatrix")
    r = _weights(ctx, p.recursionMatrix, (hid, hid), "recursionMatrix")
    bias = _weights(ctx, p.biasVector, (hid,), "biasVector") if p.hasBiasVector else None
    act = parse_activation(ctx, p.activation, "activation")
    layer = Recurrent("rnn", inp, hid, [Direction(w, r, bias, None, (act,))], p.sequenceOutput, p.reverseInput)
    return lower(ctx, layer)


@lowers("gru")
def gru(ctx: LayerContext) -> list[Value]:
    p = ctx.params
    inp, hid = _sizes(ctx)
    gates = ("updateGate", "resetGate", "outputGate")  # z, r, o
    w = _stack(ctx, p, [f"{g}WeightMatrix" for g in gates], (hid, inp), "")
    r = _stack(ctx, p, [f"{g}RecursionMatrix" for g in gates], (hid, hid), "")
    bias = _stack(ctx, p, [f"{g}BiasVector" for g in gates], (hid,), "") if p.hasBiasVectors else None
    acts = parse_activations(ctx, p.activations, 2, "activations")
    layer = Recurrent("gru", inp, hid, [Direction(w, r, bias, None, acts)], p.sequenceOutput, p.reverseInput)
    return lower(ctx, layer)


@lowers("uniDirectionalLSTM")
def uni_lstm(ctx: LayerContext) -> list[Value]:
    p = ctx.params
    inp, hid = _sizes(ctx)
    acts = parse_activations(ctx, p.activations, 3, "activations")
    d = _lstm_direction(ctx, p.weightParams, p.params, acts, inp, hid, "weightParams.")
    return lower(ctx, Recurrent("lstm", inp, hid, [d], reverse=p.reverseInput, **_lstm_common(ctx, p.params)))


@lowers("biDirectionalLSTM")
def bi_lstm(ctx: LayerContext) -> list[Value]:
    p = ctx.params
    inp, hid = _sizes(ctx)
    if len(p.weightParams) != 2:
        raise ctx.fail(f"weightParams holds {len(p.weightParams)} entries, 2 expected (forward, backward)",
                       field="weightParams")
    fwd = parse_activations(ctx, p.activationsForwardLSTM, 3, "activationsForwardLSTM")
    bwd = parse_activations(ctx, p.activationsBackwardLSTM, 3, "activationsBackwardLSTM")
    dirs = [_lstm_direction(ctx, wp, p.params, acts, inp, hid, f"weightParams[{i}].")
            for i, (wp, acts) in enumerate(zip(p.weightParams, (fwd, bwd)))]
    return lower(ctx, Recurrent("lstm", inp, hid, dirs, **_lstm_common(ctx, p.params)))


# ---------------------------------------------------------------------------------------------
# Lowering


def lower(ctx: LayerContext, layer: Recurrent) -> list[Value]:
    n_dir, n_st = len(layer.directions), layer.n_states
    ctx.expect_inputs(1, 1 + n_dir * n_st)
    if not 1 <= len(ctx.layer.output) <= 1 + n_dir * n_st:
        raise ctx.fail(f"has {len(ctx.layer.output)} outputs, 1 to {1 + n_dir * n_st} expected")
    b, name = ctx.b, ctx.name
    x = _sequence(ctx, layer)
    states = [[_state(ctx, x, layer, 1 + d * n_st + k) for k in range(n_st)] for d in range(n_dir)]
    if _mil_exact(layer):
        y, finals = _mil_op(ctx, layer, x, states)
    else:
        y, finals = _loops(ctx, layer, x, states)
    outs = [b.expand_dims(x=y, axes=[3, 4], name=name)]
    for d, fin in enumerate(finals):
        for k, v in enumerate(fin):
            outs.append(b.expand_dims(x=v, axes=[0, 3, 4], name=f"{name}_{'hc'[k]}{'fb'[d] if n_dir == 2 else ''}"))
    return outs[: len(ctx.layer.output)]


def _sequence(ctx: LayerContext, layer: Recurrent) -> Value:
    """The input sequence as ``[Seq, Batch, I]``."""
    x = ctx.input(0)
    shape = ctx.shape(x)
    if len(shape) != 5:
        raise ctx.fail(f"takes a rank-5 [Seq, Batch, {layer.input_size}, 1, 1] sequence, got shape {list(shape)}")
    c, h, w = shape[2:]
    if any(is_static_dim(d) and int(d) != n for d, n in ((c, layer.input_size), (h, 1), (w, 1))):
        raise ctx.fail(f"input shape {list(shape)} does not hold vectors of inputVectorSize {layer.input_size} "
                       f"([Seq, Batch, {layer.input_size}, 1, 1])", field="inputVectorSize")
    return ctx.b.squeeze(x=x, axes=[3, 4], name=f"{ctx.name}_x")


def _state(ctx: LayerContext, x: Value, layer: Recurrent, index: int) -> Value:
    """Initial state ``index`` as ``[Batch, H]``: the input when given, else zeros."""
    b, hid = ctx.b, layer.hidden
    tag = f"{ctx.name}_state{index}"
    if index < len(ctx.inputs):
        return b.reshape(x=ctx.input(index), shape=[-1, hid], name=tag)
    batch = ctx.shape(x)[1]
    if is_static_dim(batch):
        return b.const(np.zeros((int(batch), hid), np.float32), name=tag)
    dims = b.concat(values=(b.slice_by_index(x=b.shape(x=x, name=f"{tag}_xshape"), begin=[1], end=[2],
                                             name=f"{tag}_batch"), np.array([hid], np.int32)),
                    axis=0, name=f"{tag}_shape")
    return b.fill(shape=dims, value=np.float32(0), name=tag)


# -- the MIL ops --------------------------------------------------------------------------------


def _mil_exact(layer: Recurrent) -> bool:
    """Whether MIL's rnn / gru / lstm compute the layer's function exactly (module docstring)."""
    if layer.coupled:
        return False
    for d in layer.directions:
        gates = d.acts[:2] if layer.kind == "lstm" else d.acts
        if any(a.mil_name is None or not a.saturates for a in gates) or any(a.mil_name is None for a in d.acts):
            return False
    return len(layer.directions) == 1 or layer.directions[0].acts == layer.directions[1].acts


def _blocks(a: np.ndarray | None, order: Sequence[int], n: int) -> np.ndarray | None:
    """``a``'s ``n`` gate blocks (axis 0) in ``order``."""
    if a is None:
        return None
    parts = np.split(a, n, axis=0)
    return np.ascontiguousarray(np.concatenate([parts[i] for i in order], axis=0))


def _mil_op(ctx: LayerContext, layer: Recurrent, x: Value,
            states: list[list[Value]]) -> tuple[Value, list[list[Value]]]:
    b, name = ctx.b, ctx.name
    d = layer.directions[0]
    names = [a.mil_name for a in d.acts]
    common = {"x": x, "output_sequence": layer.sequence_output,
              "direction": "reverse" if layer.reverse else "forward"}
    if layer.kind == "rnn":
        y, h = b.rnn(initial_h=states[0][0], weight_ih=d.w, weight_hh=d.r, bias=d.bias, activation=names[0],
                     name=f"{name}_rnn", **common)
        return y, [[h]]
    if layer.kind == "gru":
        roz = (1, 2, 0)  # z, r, o -> MIL's r, o, z
        y, h = b.gru(initial_h=states[0][0], weight_ih=_blocks(d.w, roz, 3), weight_hh=_blocks(d.r, roz, 3),
                     bias=_blocks(d.bias, roz, 3), recurrent_activation=names[0], activation=names[1],
                     name=f"{name}_gru", **common)
        return y, [[h]]
    lstm = {"recurrent_activation": names[0], "cell_activation": names[1], "activation": names[2],
            "clip": np.float32(layer.cell_clip), "weight_ih": d.w, "weight_hh": d.r, "bias": d.bias,
            "peephole": d.peephole}
    if len(layer.directions) == 1:
        y, h, c = b.lstm(initial_h=states[0][0], initial_c=states[0][1], name=f"{name}_lstm", **common, **lstm)
        return y, [[h, c]]
    back = layer.directions[1]
    init = [b.concat(values=(states[0][k], states[1][k]), axis=1, name=f"{name}_init_{'hc'[k]}") for k in range(2)]
    common["direction"] = "bidirectional"
    # hasBiasVectors, forgetBias and hasPeepholeVectors are shared: both directions have them or neither
    y, h, c = b.lstm(initial_h=init[0], initial_c=init[1], weight_ih_back=back.w, weight_hh_back=back.r,
                     bias_back=back.bias, peephole_back=back.peephole, name=f"{name}_lstm", **common, **lstm)
    hf, hb = b.split(x=h, num_splits=2, axis=1, name=f"{name}_h_split")
    cf, cb = b.split(x=c, num_splits=2, axis=1, name=f"{name}_c_split")
    return y, [[hf, cf], [hb, cb]]


# -- the time loop ------------------------------------------------------------------------------


def _loops(ctx: LayerContext, layer: Recurrent, x: Value,
           states: list[list[Value]]) -> tuple[Value, list[list[Value]]]:
    b, name = ctx.b, ctx.name
    if len(layer.directions) == 1:
        ys, fin = _scan(ctx, layer, layer.directions[0], x, states[0], layer.reverse, "")
        return (ys if ys is not None else b.expand_dims(x=fin[0], axes=[0], name=f"{name}_last")), [fin]
    yf, ff = _scan(ctx, layer, layer.directions[0], x, states[0], False, "_fwd")
    yb, fb = _scan(ctx, layer, layer.directions[1], x, states[1], True, "_bwd")
    if yf is not None and yb is not None:
        aligned = b.reverse(x=yb, axes=[0], name=f"{name}_bwd_aligned")
        y = b.concat(values=(yf, aligned), axis=2, name=f"{name}_y")
    else:
        y = b.expand_dims(x=b.concat(values=(ff[0], fb[0]), axis=1, name=f"{name}_h"), axes=[0], name=f"{name}_last")
    return y, [ff, fb]


Step = Callable[[Builder, Value, list[Value]], list[Value]]


def _scan(ctx: LayerContext, layer: Recurrent, d: Direction, x: Value, init: list[Value], reverse: bool,
          tag: str) -> tuple[Value | None, list[Value]]:
    """One direction as a while_loop: the output sequence in processing order (None without
    sequenceOutput) and the final states."""
    b = ctx.b
    name = f"{ctx.name}{tag}"
    xs = b.reverse(x=x, axes=[0], name=f"{name}_reversed") if reverse else x
    proj = b.matmul(x=xs, y=np.ascontiguousarray(d.w.T), name=f"{name}_wx")  # [S, B, G*H]: all steps at once
    if d.bias is not None:
        proj = b.add(x=proj, y=d.bias, name=f"{name}_wx_b")
    steps = b.gather(x=b.shape(x=xs, name=f"{name}_xshape"), indices=np.int32(0), name=f"{name}_steps")
    step = _STEPS[layer.kind](ctx, layer, d, name)
    seq = layer.sequence_output
    loop_vars = [b.const(np.int32(0), name=f"{name}_t0"), *init]
    if seq:
        loop_vars.append(b.fill(shape=_seq_shape(b, proj, layer.hidden, name), value=np.float32(0),
                                name=f"{name}_ys0"))

    def cond(bb: Builder, t: Value, *_: Value) -> Value:
        return bb.less(x=t, y=steps, name=f"{name}_more")

    def body(bb: Builder, t: Value, *carried: Value) -> list[Value]:
        xt = bb.gather(x=proj, indices=t, axis=0, name=f"{name}_xt")
        new = step(bb, xt, list(carried[: len(init)]))
        out = [bb.add(x=t, y=np.int32(1), name=f"{name}_next"), *new]
        if seq:
            out.append(bb.scatter(data=carried[-1], indices=bb.expand_dims(x=t, axes=[0], name=f"{name}_at"),
                                  updates=bb.expand_dims(x=new[0], axes=[0], name=f"{name}_yt"), axis=0,
                                  mode="update", name=f"{name}_ys"))
        return out

    res = b.while_loop(loop_vars, cond, body, name=f"{name}_loop")
    finals = list(res[1: 1 + len(init)])
    return (res[-1] if seq else None), finals


def _seq_shape(b: Builder, proj: Value, hidden: int, name: str) -> Value:
    """``[Seq, Batch, H]`` of the projected sequence ``[Seq, Batch, G*H]`` (dynamic when needed)."""
    shape = proj.type.shape
    if all(is_static_dim(d) for d in shape[:2]):
        return b.const(np.array([int(shape[0]), int(shape[1]), hidden], np.int32), name=f"{name}_yshape")
    lead = b.slice_by_index(x=b.shape(x=proj, name=f"{name}_pshape"), begin=[0], end=[2], name=f"{name}_lead")
    return b.concat(values=(lead, np.array([hidden], np.int32)), axis=0, name=f"{name}_yshape")


def _rnn_step(ctx: LayerContext, layer: Recurrent, d: Direction, name: str) -> Step:
    r = ctx.b.const(np.ascontiguousarray(d.r.T), name=f"{name}_rT")
    (act,) = d.acts

    def step(bb: Builder, xt: Value, st: list[Value]) -> list[Value]:
        pre = bb.add(x=xt, y=bb.matmul(x=st[0], y=r, name=f"{name}_rh"), name=f"{name}_pre")
        return [act.gate(bb, pre, f"{name}_h")]

    return step


def _gru_step(ctx: LayerContext, layer: Recurrent, d: Direction, name: str) -> Step:
    hid = layer.hidden
    r_zr = ctx.b.const(np.ascontiguousarray(d.r[: 2 * hid].T), name=f"{name}_rT_zr")
    r_o = ctx.b.const(np.ascontiguousarray(d.r[2 * hid:].T), name=f"{name}_rT_o")
    f, g = d.acts

    def step(bb: Builder, xt: Value, st: list[Value]) -> list[Value]:
        (h,) = st
        xz, xr, xo = bb.split(x=xt, num_splits=3, axis=1, name=f"{name}_x_zro")
        hz, hr = bb.split(x=bb.matmul(x=h, y=r_zr, name=f"{name}_rh_zr"), num_splits=2, axis=1, name=f"{name}_rh_split")
        z = f.gate(bb, bb.add(x=xz, y=hz, name=f"{name}_z_pre"), f"{name}_z")
        r = f.gate(bb, bb.add(x=xr, y=hr, name=f"{name}_r_pre"), f"{name}_r")
        reset = bb.mul(x=h, y=r, name=f"{name}_reset")
        o = g.gate(bb, bb.add(x=xo, y=bb.matmul(x=reset, y=r_o, name=f"{name}_rc_o"), name=f"{name}_o_pre"), f"{name}_o")
        keep = bb.mul(x=z, y=h, name=f"{name}_keep")
        new = bb.mul(x=bb.sub(x=np.float32(1), y=z, name=f"{name}_1mz"), y=o, name=f"{name}_new")
        return [bb.add(x=new, y=keep, name=f"{name}_h")]

    return step


def _lstm_step(ctx: LayerContext, layer: Recurrent, d: Direction, name: str) -> Step:
    b = ctx.b
    r = b.const(np.ascontiguousarray(d.r.T), name=f"{name}_rT")
    peep = None if d.peephole is None else [b.const(p, name=f"{name}_p{g}")
                                             for p, g in zip(np.split(d.peephole, 3), "ifo")]
    f_act, g_act, h_act = d.acts
    clip = np.float32(layer.cell_clip)

    def step(bb: Builder, xt: Value, st: list[Value]) -> list[Value]:
        h, c = st
        pre = bb.add(x=xt, y=bb.matmul(x=h, y=r, name=f"{name}_rh"), name=f"{name}_pre")
        gi, gf, go, gz = bb.split(x=pre, num_splits=4, axis=1, name=f"{name}_gates")
        if peep is not None:
            gi = bb.add(x=gi, y=bb.mul(x=c, y=peep[0], name=f"{name}_pc_i"), name=f"{name}_i_pre")
            gf = bb.add(x=gf, y=bb.mul(x=c, y=peep[1], name=f"{name}_pc_f"), name=f"{name}_f_pre")
        i = f_act.gate(bb, gi, f"{name}_i")
        z = g_act.gate(bb, gz, f"{name}_z")
        forget = (bb.sub(x=np.float32(1), y=i, name=f"{name}_f") if layer.coupled
                  else f_act.gate(bb, gf, f"{name}_f"))
        c_new = bb.add(x=bb.mul(x=c, y=forget, name=f"{name}_cf"), y=bb.mul(x=i, y=z, name=f"{name}_iz"),
                       name=f"{name}_c_raw")
        c_new = bb.clip(x=c_new, alpha=-clip, beta=clip, name=f"{name}_c")
        if peep is not None:
            go = bb.add(x=go, y=bb.mul(x=c_new, y=peep[2], name=f"{name}_pc_o"), name=f"{name}_o_pre")
        o = f_act.gate(bb, go, f"{name}_o")
        return [bb.mul(x=h_act.apply(bb, c_new, f"{name}_hc"), y=o, name=f"{name}_h"), c_new]

    return step


_STEPS: dict[str, Callable[[LayerContext, Recurrent, Direction, str], Step]] = {
    "rnn": _rnn_step, "gru": _gru_step, "lstm": _lstm_step,
}
