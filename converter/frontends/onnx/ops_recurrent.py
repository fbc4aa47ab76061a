"""RNN, GRU and LSTM (opsets 7-22), unrolled over the time steps in IR ops.

MIL's rnn/gru/lstm take compile-time weights in their own gate orders (lstm ifoz vs ONNX iofc,
gru roz vs ONNX zrh), fixed activations and no per-batch sequence lengths; ONNX's ops take
run-time weights, any activation (with ``activation_alpha/beta``), ``clip`` on the gate inputs,
``linear_before_reset``, ``input_forget``, ``layout`` and ``sequence_lens``. So each direction is
written out step by step in ONNX's own equations and gate order (no reordering can go wrong):
input projections for all steps in one matmul, then per step ``H R^T``, the gates, and the
state update. With ``sequence_lens``, a batch entry's state stops changing and its outputs are
zero past its length, and the reverse direction runs over each entry's valid steps reversed
(``reverse_sequence``). Needs a static sequence length (the unroll count).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...ir.core import Value
from .context import FLOATS, Ctx, Node
from .registry import onnx_op
from .shape_util import dims

#: ONNX activation name -> (number of alpha/beta parameters it takes, defaults).
_ACT_PARAMS: dict[str, tuple[float, ...]] = {
    "relu": (), "tanh": (), "sigmoid": (), "softsign": (), "softplus": (),
    "affine": (1.0, 0.0), "leakyrelu": (0.01,), "thresholdedrelu": (1.0,), "scaledtanh": (1.0, 1.0),
    "hardsigmoid": (0.2, 0.5), "elu": (1.0,),
}

Act = Callable[[Value], Value]


def _activations(ctx: Ctx, defaults: list[str], num_dir: int) -> list[list[Act]]:
    given = "activations" in ctx.node.attrs  # (RNN's schema default lists two, for any direction)
    names = ctx.attr("activations") if given else defaults * num_dir
    if len(names) != len(defaults) * num_dir:
        raise ctx.format_error(f"activations must list {len(defaults) * num_dir} functions, lists {len(names)}")
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    acts = []
    for name in names:
        key = name.lower()
        if key not in _ACT_PARAMS:
            raise ctx.unsupported(f"activation '{name}' is not supported")
        params = list(_ACT_PARAMS[key])
        if len(params) >= 1 and alphas:
            params[0] = float(alphas.pop(0))
        if len(params) >= 2 and betas:
            params[1] = float(betas.pop(0))
        acts.append(_act(ctx, key, params))
    return [acts[i * len(defaults):(i + 1) * len(defaults)] for i in range(num_dir)]


def _act(ctx: Ctx, key: str, p: list[float]) -> Act:
    b = ctx.b

    def c(v: float, like: Value) -> Value:
        return ctx.const(v, like)

    table: dict[str, Act] = {
        "relu": lambda x: b.relu(x=x),
        "tanh": lambda x: b.tanh(x=x),
        "sigmoid": lambda x: b.sigmoid(x=x),
        "softsign": lambda x: b.softsign(x=x),
        "softplus": lambda x: b.softplus(x=x),
        "affine": lambda x: b.add(x=b.mul(x=x, y=c(p[0], x)), y=c(p[1], x)),
        "leakyrelu": lambda x: b.leaky_relu(x=x, alpha=c(p[0], x)),
        "thresholdedrelu": lambda x: b.select(cond=b.greater(x=x, y=c(p[0], x)), a=x, b=c(0.0, x)),
        "scaledtanh": lambda x: b.mul(x=b.tanh(x=b.mul(x=x, y=c(p[1], x))), y=c(p[0], x)),
        "hardsigmoid": lambda x: b.sigmoid_hard(x=x, alpha=c(p[0], x), beta=c(p[1], x)),
        "elu": lambda x: b.elu(x=x, alpha=c(p[0], x)),
    }
    return table[key]


class _Rec:
    """What one ONNX recurrent node gives each direction."""

    def __init__(self, ctx: Ctx, gates: int, n_states: int) -> None:
        b = self.b = ctx.b
        self.ctx = ctx
        x = ctx.input(0, FLOATS)
        self.layout = int(ctx.attr("layout", 0) or 0)
        if self.layout:
            x = b.transpose(x=x, perm=[1, 0, 2])
        self.x = x
        self.dt = x.type.dtype.name
        self.seq, self.batch, _ = dims(x)
        direction = ctx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.format_error(f"direction '{direction}' is not valid")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        self.w, self.r = self._cast(ctx.input(1, FLOATS)), self._cast(ctx.input(2, FLOATS))
        self.hidden = int(dims(self.r)[-1])
        hs = ctx.attr("hidden_size")
        if hs is not None and int(hs) != self.hidden:
            raise ctx.format_error(f"hidden_size {hs} does not match R's last dim {self.hidden}")
        self.gates = gates
        self.bias = self._cast(ctx.input(3, FLOATS)) if ctx.has(3) else None
        self.lens = ctx.input(4, ("int32",)) if ctx.has(4) else None
        self.init = [self._cast(ctx.input(5 + i, FLOATS)) if ctx.has(5 + i) else None for i in range(n_states)]
        if self.layout:  # states [B, D, H] -> [D, B, H]
            self.init = [None if v is None else b.transpose(x=v, perm=[1, 0, 2]) for v in self.init]
        clip = ctx.attr("clip")
        self.clip = None if clip is None else float(clip)

    def _cast(self, v: Value) -> Value:
        return v if v.type.dtype.name == self.dt else self.b.cast(x=v, dtype=self.dt)

    def take(self, v: Value, d: int) -> Value:
        """``v[d]`` of a [num_directions, ...] tensor."""
        return self.b.squeeze(x=self.b.slice_by_size(x=v, begin=[d] + [0] * (self.ctx.rank(v) - 1),
                                                     size=[1] + [-1] * (self.ctx.rank(v) - 1)), axes=[0])

    def part(self, v: Value, k: int, width: int | None = None) -> Value:
        """Block ``k`` of the last axis in blocks of ``hidden`` (or ``width``)."""
        w = width or self.hidden
        r = self.ctx.rank(v)
        return self.b.slice_by_size(x=v, begin=[0] * (r - 1) + [k * w], size=[-1] * (r - 1) + [w])

    def state0(self, i: int, d: int) -> Value:
        if self.init[i] is not None:
            return self.take(self.init[i], d)
        b = self.b
        if isinstance(self.batch, int):
            return b.const(np.zeros((self.batch, self.hidden), self.x.type.dtype.storage))
        zeros_like = b.reduce_sum(x=b.mul(x=self.step_x(self.x, 0), y=self.ctx.const(0.0, self.x)), axes=[-1],
                                  keep_dims=True)  # [B, 1] zeros (the batch may be symbolic)
        return b.tile(x=zeros_like, reps=[1, self.hidden])

    def step_x(self, xs: Value, t: int) -> Value:
        return self.b.squeeze(x=self.b.slice_by_size(x=xs, begin=[t, 0, 0], size=[1, -1, -1]), axes=[0])

    def clipped(self, v: Value) -> Value:
        if self.clip is None:
            return v
        return self.b.clip(x=v, alpha=self.ctx.const(-self.clip, v), beta=self.ctx.const(self.clip, v))

    def run(self, step: Callable[[int, Value, list[Value], int], list[Value]], n_states: int) -> list[Value]:
        """Both directions; returns [Y, final state 0, final state 1...] in ONNX's layouts."""
        b = self.b
        if not isinstance(self.seq, int):
            raise self.ctx.unsupported("the sequence length must be static to unroll the steps (MIL's recurrent ops "
                                       "need constant weights, standard activations, no clip and no sequence_lens)")
        ys_dirs, finals = [], [[] for _ in range(n_states)]
        for d, direction in enumerate(self.directions):
            xs = self.x
            if direction == "reverse":
                xs = b.reverse_sequence(x=xs, lengths=self.lens, seq_axis=0, batch_axis=1) if self.lens is not None \
                    else b.reverse(x=xs, axes=[0])
            w = self.take(self.w, d)
            proj = b.matmul(x=xs, y=w, transpose_y=True)  # [S, B, G*H]
            if self.bias is not None:
                bd = self.take(self.bias, d)
                gh = self.gates * self.hidden
                bias = self.part(bd, 0, gh)
                if not self.split_bias:
                    bias = b.add(x=bias, y=self.part(bd, 1, gh))
                proj = b.add(x=proj, y=bias)
            states = [self.state0(i, d) for i in range(n_states)]
            outs = []
            for t in range(self.seq):
                new = step(d, self.step_x(proj, t), states, t)
                if self.lens is not None:
                    live = b.expand_dims(x=b.less(x=b.const(np.int32(t)), y=self.lens), axes=[1])  # [B, 1]
                    new = [b.select(cond=live, a=n, b=s) for n, s in zip(new, states)]
                    outs.append(b.select(cond=live, a=new[0], b=self.ctx.const(0.0, new[0])))
                else:
                    outs.append(new[0])
                states = new
            y = b.stack(values=tuple(outs), axis=0)  # [S, B, H]
            if direction == "reverse":
                y = b.reverse_sequence(x=y, lengths=self.lens, seq_axis=0, batch_axis=1) if self.lens is not None \
                    else b.reverse(x=y, axes=[0])
            ys_dirs.append(y)
            for i in range(n_states):
                finals[i].append(states[i])
        return self.finish([b.expand_dims(x=y, axes=[1]) for y in ys_dirs], finals)

    def finish(self, ys: list[Value], finals: list[list[Value]]) -> list[Value]:
        """Per direction outputs [S, 1, B, H] and final states [B, H] -> ONNX's Y, Y_h (, Y_c)."""
        b = self.b
        y = ys[0] if len(ys) == 1 else b.concat(values=tuple(ys), axis=1)  # [S, D, B, H]
        out_states = [b.stack(values=tuple(f), axis=0) for f in finals]  # [D, B, H]
        if self.layout:
            y = b.transpose(x=y, perm=[2, 0, 1, 3])
            out_states = [b.transpose(x=s, perm=[1, 0, 2]) for s in out_states]
        return [y, *out_states]

    split_bias = False  # GRU with linear_before_reset keeps the recurrent bias apart


@onnx_op("RNN", versions=(7, 22))
def rnn(ctx: Ctx, node: Node) -> list[Value]:
    rec = _Rec(ctx, 1, 1)
    mil = via_mil(ctx, rec, "RNN", ["Tanh"])
    if mil is not None:
        return mil
    acts = _activations(ctx, ["Tanh"], len(rec.directions))
    b = rec.b
    rs = [rec.take(rec.r, d) for d in range(len(rec.directions))]

    def step(d: int, xp: Value, states: list[Value], t: int) -> list[Value]:
        pre = b.add(x=xp, y=b.matmul(x=states[0], y=rs[d], transpose_y=True))
        return [acts[d][0](rec.clipped(pre))]

    return rec.run(step, 1)


@onnx_op("GRU", versions=(7, 22))
def gru(ctx: Ctx, node: Node) -> list[Value]:
    """z = f(x Wz + h Rz + b), r = f(x Wr + h Rr + b), n = g(x Wh + (r*h) Rh + Rbh + Wbh) or, with
    linear_before_reset, g(x Wh + Wbh + r * (h Rh + Rbh)); h' = (1 - z) * n + z * h."""
    rec = _Rec(ctx, 3, 1)
    mil = via_mil(ctx, rec, "GRU", ["Sigmoid", "Tanh"])
    if mil is not None:
        return mil
    lbr = bool(ctx.attr("linear_before_reset", 0))
    rec.split_bias = True  # input bias on the projections; recurrent bias added per gate below
    acts = _activations(ctx, ["Sigmoid", "Tanh"], len(rec.directions))
    b = rec.b
    hsz = rec.hidden
    per_dir = []
    for d in range(len(rec.directions)):
        r = rec.take(rec.r, d)
        rb = rec.part(rec.take(rec.bias, d), 1, 3 * hsz) if rec.bias is not None else None
        per_dir.append((r, rb))

    def step(d: int, xp: Value, states: list[Value], t: int) -> list[Value]:
        h = states[0]
        r_w, rb = per_dir[d]
        f, g = acts[d]
        hr = b.matmul(x=h, y=r_w, transpose_y=True)  # [B, 3H]: z, r, h blocks
        if rb is not None:
            hr = b.add(x=hr, y=rb)
        z = f(rec.clipped(b.add(x=rec.part(xp, 0), y=rec.part(hr, 0))))
        rr = f(rec.clipped(b.add(x=rec.part(xp, 1), y=rec.part(hr, 1))))
        if lbr:
            cand = b.add(x=rec.part(xp, 2), y=b.mul(x=rr, y=rec.part(hr, 2)))
        else:
            rh = b.matmul(x=b.mul(x=rr, y=h), y=_rows(rec, r_w, 2), transpose_y=True)
            cand = b.add(x=rec.part(xp, 2), y=rh)
            if rb is not None:
                cand = b.add(x=cand, y=rec.part(rb, 2))
        n = g(rec.clipped(cand))
        one = ctx.const(1.0, z)
        return [b.add(x=b.mul(x=b.sub(x=one, y=z), y=n), y=b.mul(x=z, y=h))]

    return rec.run(step, 1)


def _rows(rec: _Rec, w: Value, k: int) -> Value:
    """Rows ``k*H .. (k+1)*H`` of a [G*H, H] weight."""
    return rec.b.slice_by_size(x=w, begin=[k * rec.hidden, 0], size=[rec.hidden, -1])


@onnx_op("LSTM", versions=(7, 22))
def lstm(ctx: Ctx, node: Node) -> list[Value]:
    """ONNX gate order i, o, f, c; peepholes P = [Pi, Po, Pf]; i = f(.. + Pi*c), f = f(.. + Pf*c)
    (or 1 - i with input_forget), c' = f*c + i*g(..), o = f(.. + Po*c'), h' = o * h(c')."""
    rec = _Rec(ctx, 4, 2)
    mil = via_mil(ctx, rec, "LSTM", ["Sigmoid", "Tanh", "Tanh"])
    if mil is not None:
        return mil
    acts = _activations(ctx, ["Sigmoid", "Tanh", "Tanh"], len(rec.directions))
    coupled = bool(ctx.attr("input_forget", 0))
    b = rec.b
    peep = ctx.input(7, FLOATS) if ctx.has(7) else None
    per_dir = []
    for d in range(len(rec.directions)):
        p = rec.take(rec._cast(peep), d) if peep is not None else None
        per_dir.append((rec.take(rec.r, d), [rec.part(p, k) for k in range(3)] if p is not None else None))

    def step(d: int, xp: Value, states: list[Value], t: int) -> list[Value]:
        h, c = states
        r_w, ps = per_dir[d]
        f, g, hh = acts[d]
        pre = b.add(x=xp, y=b.matmul(x=h, y=r_w, transpose_y=True))
        gi, go, gf, gc = (rec.part(pre, k) for k in range(4))
        if ps is not None:
            gi = b.add(x=gi, y=b.mul(x=ps[0], y=c))
            gf = b.add(x=gf, y=b.mul(x=ps[2], y=c))
        i = f(rec.clipped(gi))
        fg = b.sub(x=ctx.const(1.0, i), y=i) if coupled else f(rec.clipped(gf))
        c_new = b.add(x=b.mul(x=fg, y=c), y=b.mul(x=i, y=g(rec.clipped(gc))))
        if ps is not None:
            go = b.add(x=go, y=b.mul(x=ps[1], y=c_new))
        o = f(rec.clipped(go))
        return [b.mul(x=o, y=hh(c_new)), c_new]

    return rec.run(step, 2)


# -- MIL's recurrent ops, where they say the same thing -------------------------------------------

#: ONNX activation (with its default parameters) -> MIL activation name.
_MIL_ACTS = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu"}
#: Gate blocks of MIL's layout, as indices of ONNX's: lstm ifoz from iofc, gru roz(h) from zrh.
_MIL_ORDER = {"RNN": [0], "GRU": [1, 2, 0], "LSTM": [0, 2, 1, 3]}


def _mil_activation_names(ctx: Ctx, n_per_dir: int, num_dir: int) -> list[str] | None:
    """MIL names of the node's activations; None when it gives none (the defaults), [] when MIL
    has no match (parameters, other functions, different ones per direction)."""
    if "activation_alpha" in ctx.node.attrs or "activation_beta" in ctx.node.attrs:
        return []
    names = [n.lower() for n in ctx.attr("activations")] if "activations" in ctx.node.attrs else None
    if names is None:
        return None  # the caller's defaults
    if any(n not in _MIL_ACTS for n in names) or len(names) != n_per_dir * num_dir:
        return []
    per_dir = [names[i * n_per_dir:(i + 1) * n_per_dir] for i in range(num_dir)]
    if any(p != per_dir[0] for p in per_dir):
        return []  # MIL shares one set between directions
    return [_MIL_ACTS[n] for n in per_dir[0]]


def _blocks(w: np.ndarray, order: list[int]) -> np.ndarray:
    """Reorder the gate blocks on axis 0."""
    return np.concatenate([np.split(w, len(order))[k] for k in order], axis=0)


def via_mil(ctx: Ctx, rec: _Rec, kind: str, defaults: list[str]) -> list[Value] | None:
    """The node as MIL rnn / gru / lstm ops when their semantics cover it: constant W, R, B (and P),
    no sequence_lens, no clip (MIL's lstm clips the cell state, ONNX the gate inputs), sigmoid /
    tanh / relu activations without parameters, no input_forget. None otherwise."""
    num_dir = len(rec.directions)
    consts = [ctx.const_input(i) for i in (1, 2, 3)]
    peep = ctx.const_input(7) if kind == "LSTM" else None
    if consts[0] is None or consts[1] is None or (ctx.has(3) and consts[2] is None) or rec.lens is not None \
            or rec.clip is not None or (kind == "LSTM" and (bool(ctx.attr("input_forget", 0))
                                                           or (ctx.has(7) and peep is None))):
        return None
    acts = _mil_activation_names(ctx, len(defaults), num_dir)
    if acts is None:
        acts = [_MIL_ACTS[d.lower()] for d in defaults]
    if not acts:
        return None
    b, hsz, dt = rec.b, rec.hidden, np.dtype(rec.x.type.dtype.storage)
    order = _MIL_ORDER[kind]
    w, r = (np.asarray(c, np.float32) for c in consts[:2])
    gh = rec.gates * hsz
    bias = np.asarray(consts[2], np.float32) if consts[2] is not None else np.zeros((num_dir, 2 * gh), np.float32)
    n_states = 2 if kind == "LSTM" else 1

    def weights(d: int) -> dict:
        wb, rb = bias[d, :gh], bias[d, gh:]
        out = {"weight_ih": _blocks(w[d], order).astype(dt), "weight_hh": _blocks(r[d], order).astype(dt)}
        if kind == "GRU":  # iOS18 gru: input_bias on the projections, bias on the hidden side
            out["input_bias"] = _blocks(wb, order).astype(dt)
            out["bias"] = _blocks(rb, order).astype(dt)
            out["reset_after"] = bool(ctx.attr("linear_before_reset", 0))
        else:
            out["bias"] = _blocks(wb + rb, order).astype(dt)
        if kind == "LSTM" and peep is not None:
            p = np.asarray(peep, np.float32)[d]
            out["peephole"] = np.concatenate([p[:hsz], p[2 * hsz:], p[hsz:2 * hsz]]).astype(dt)  # iof -> ifo
        return out

    def state(i: int, d: int) -> Value:
        return rec.take(rec.init[i], d) if rec.init[i] is not None else rec.state0(i, d)

    act_args = dict(zip({"RNN": ["activation"], "GRU": ["recurrent_activation", "activation"],
                         "LSTM": ["recurrent_activation", "cell_activation", "activation"]}[kind], acts))
    op = {"RNN": b.rnn, "GRU": b.gru, "LSTM": b.lstm}[kind]
    if kind == "LSTM" and num_dir == 2:
        back = {f"{k}_back": v for k, v in weights(1).items()}
        y, h, c = op(x=rec.x, initial_h=b.concat(values=(state(0, 0), state(0, 1)), axis=-1),
                     initial_c=b.concat(values=(state(1, 0), state(1, 1)), axis=-1), **weights(0), **back,
                     direction="bidirectional", output_sequence=True, **act_args)
        halves = [(rec.part(y, 0), rec.part(h, 0), rec.part(c, 0)), (rec.part(y, 1), rec.part(h, 1), rec.part(c, 1))]
        return rec.finish([b.expand_dims(x=yy, axes=[1]) for yy, _, _ in halves],
                          [[hh for _, hh, _ in halves], [cc for _, _, cc in halves]])
    ys, finals = [], [[] for _ in range(n_states)]
    for d, direction in enumerate(rec.directions):
        states = {"initial_h": state(0, d)}
        if kind == "LSTM":
            states["initial_c"] = state(1, d)
        outs = op(x=rec.x, **states, **weights(d), direction=direction, output_sequence=True, **act_args)
        y = outs[0]
        if direction == "reverse":  # MIL gives the outputs in processing order; ONNX aligns them to x
            y = b.reverse(x=y, axes=[0])
        ys.append(b.expand_dims(x=y, axes=[1]))
        for i in range(n_states):
            finals[i].append(outs[1 + i])
    return rec.finish(ys, finals)
