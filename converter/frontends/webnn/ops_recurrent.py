"""WebNN lstm, lstmCell, gru and gruCell, unrolled into IR matmul/activation/elementwise ops.

Why not the IR's lstm/gru: WebNN allows what MIL's fused ops cannot say exactly (a separate
recurrent bias with resetAfter=true GRU, non-constant weights and states, per-direction initial
states) and its gate orders (lstm ``iofg``/``ifgo``, gru ``zrn``/``rzn``) are given per call, so
the cells are written out from the spec's formulas, one step at a time (``steps`` is static):

- gru: ``z = f(x Wz' + bz + h Rz' + rbz)``, ``r`` alike, ``n = g(x Wn' + bn + r * (h Rn' + rbn))``
  (resetAfter) or ``g(x Wn' + bn + (r * h) Rn' + rbn)``, ``h' = (1 - z) * n + z * h``;
- lstm: ``i = f(.. + pi * c)``, ``f = f(.. + pf * c)``, ``g = g(..)``, ``o = f(.. + po * c)``,
  ``c' = f * c + i * g``, ``h' = o * h(c')``; peephole weights are packed ``[i, o, f]``. The output
  gate's peephole sees the *previous* cell state ``c`` (unlike ONNX's ``Ct``): so does the WebNN
  reference implementation (webnn-baseline lstm_cell.js) and Chromium 153, measured.

Direction ``backward`` walks the steps from the last; its entries of the returned sequence are
placed at the position of the input step they came from (the WebNN reference implementation's
convention).
"""

from __future__ import annotations

import numpy as np

from ...ir.core import Value
from .context import Ctx
from .graph import Operator
from .registry import maps

FLOATS = ("fp32", "fp16")


def _act(ctx: Ctx, name: str, x: Value) -> Value:
    return ctx.b.add_op(name, {"x": x}).outputs[0]


def _row(ctx: Ctx, v: Value, index: int) -> Value:
    """``v[index]`` (first axis), one rank lower."""
    shape = ctx.shape(v)
    begin = [index] + [0] * (len(shape) - 1)
    end = [index + 1, *shape[1:]]
    s = ctx.b.slice_by_index(x=v, begin=np.asarray(begin, np.int32), end=np.asarray(end, np.int32))
    return ctx.b.reshape(x=s, shape=np.asarray(shape[1:], np.int32))


def _gates(ctx: Ctx, v: Value, order: str, axis: int = -1) -> dict[str, Value]:
    """Split ``axis`` of ``v`` (default the last) into one part per gate letter of ``order``."""
    parts = ctx.b.split(x=v, num_splits=len(order), axis=axis % len(ctx.shape(v)))
    return dict(zip(order, parts))


def _project(ctx: Ctx, x: Value, w: Value, bias: Value | None) -> Value:
    y = ctx.b.matmul(x=x, y=w, transpose_y=True)
    return y if bias is None else ctx.b.add(x=y, y=bias)


def _opt(ctx: Ctx, op: Operator, key: str) -> Value | None:
    return ctx.operand(op.options[key], FLOATS) if key in op.options else None


def _gru_cell(ctx: Ctx, x: Value, h: Value, w: Value, r: Value, bias: Value | None, rbias: Value | None,
              layout: str, reset_after: bool, acts: list[str]) -> Value:
    b = ctx.b
    xg = _gates(ctx, _project(ctx, x, w, bias), layout)
    hh = b.matmul(x=h, y=r, transpose_y=True)
    rb = _gates(ctx, rbias, layout) if rbias is not None else {}
    rw = _gates(ctx, r, layout, axis=0) if not reset_after else {}
    hg = _gates(ctx, hh, layout)

    def with_rb(g: str, v: Value) -> Value:
        return b.add(x=v, y=rb[g]) if g in rb else v

    z = _act(ctx, acts[0], b.add(x=xg["z"], y=with_rb("z", hg["z"])))
    rr = _act(ctx, acts[0], b.add(x=xg["r"], y=with_rb("r", hg["r"])))
    if reset_after:
        n_in = b.add(x=xg["n"], y=b.mul(x=rr, y=with_rb("n", hg["n"])))
    else:
        n_in = b.add(x=xg["n"], y=with_rb("n", b.matmul(x=b.mul(x=rr, y=h), y=rw["n"], transpose_y=True)))
    n = _act(ctx, acts[1], n_in)
    one = ctx.const(1.0, x)
    return b.add(x=b.mul(x=b.sub(x=one, y=z), y=n), y=b.mul(x=z, y=h))


def _lstm_cell(ctx: Ctx, x: Value, h: Value, c: Value, w: Value, r: Value, bias: Value | None,
               rbias: Value | None, peep: Value | None, layout: str, acts: list[str]) -> tuple[Value, Value]:
    b = ctx.b
    pre = b.add(x=_project(ctx, x, w, bias), y=_project(ctx, h, r, rbias))
    g = _gates(ctx, pre, layout)
    p = _gates(ctx, peep, "iof") if peep is not None else {}

    def peeped(gate: str, cell: Value) -> Value:
        return b.add(x=g[gate], y=b.mul(x=p[gate], y=cell)) if gate in p else g[gate]

    i = _act(ctx, acts[0], peeped("i", c))
    f = _act(ctx, acts[0], peeped("f", c))
    cand = _act(ctx, acts[1], g["g"])
    o = _act(ctx, acts[0], peeped("o", c))
    c2 = b.add(x=b.mul(x=f, y=c), y=b.mul(x=i, y=cand))
    return b.mul(x=o, y=_act(ctx, acts[2], c2)), c2


@maps("gruCell")
def gru_cell(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    acts = list(op.options.get("activations", ["sigmoid", "tanh"]))
    return [_gru_cell(ctx, x, ctx.operand(op.args["hiddenState"], FLOATS), ctx.operand(op.args["weight"], FLOATS),
                      ctx.operand(op.args["recurrentWeight"], FLOATS), _opt(ctx, op, "bias"),
                      _opt(ctx, op, "recurrentBias"), op.options.get("layout", "zrn"),
                      op.options.get("resetAfter", True), acts)]


@maps("lstmCell")
def lstm_cell(ctx: Ctx, op: Operator) -> list[Value]:
    x = ctx.operand(op.args["input"], FLOATS)
    acts = list(op.options.get("activations", ["sigmoid", "tanh", "tanh"]))
    h, c = _lstm_cell(ctx, x, ctx.operand(op.args["hiddenState"], FLOATS), ctx.operand(op.args["cellState"], FLOATS),
                      ctx.operand(op.args["weight"], FLOATS), ctx.operand(op.args["recurrentWeight"], FLOATS),
                      _opt(ctx, op, "bias"), _opt(ctx, op, "recurrentBias"), _opt(ctx, op, "peepholeWeight"),
                      op.options.get("layout", "iofg"), acts)
    return [h, c]


def _unrolled(ctx: Ctx, op: Operator, lstm: bool) -> list[Value]:
    b = ctx.b
    x = ctx.operand(op.args["input"], FLOATS)
    steps, batch, _ = ctx.shape(x)
    hidden = op.args["hiddenSize"]
    direction = op.options.get("direction", "forward")
    dirs = [False, True] if direction == "both" else [direction == "backward"]
    zeros = ctx.const(np.zeros((batch, hidden)), x)
    xs = [_row(ctx, x, t) for t in range(steps)]
    last_h, last_c = [], []
    seq: list[list[Value]] = [[None] * len(dirs) for _ in range(steps)]  # type: ignore[list-item]
    for d, backward in enumerate(dirs):
        w, r = _row(ctx, ctx.operand(op.args["weight"], FLOATS), d), _row(ctx, ctx.operand(op.args["recurrentWeight"], FLOATS), d)
        per_dir = {k: _row(ctx, v, d) for k in ("bias", "recurrentBias", "peepholeWeight", "initialHiddenState",
                                               "initialCellState") if (v := _opt(ctx, op, k)) is not None}
        h = per_dir.get("initialHiddenState", zeros)
        c = per_dir.get("initialCellState", zeros)
        for t in (range(steps - 1, -1, -1) if backward else range(steps)):
            if lstm:
                h, c = _lstm_cell(ctx, xs[t], h, c, w, r, per_dir.get("bias"), per_dir.get("recurrentBias"),
                                  per_dir.get("peepholeWeight"), op.options.get("layout", "iofg"),
                                  list(op.options.get("activations", ["sigmoid", "tanh", "tanh"])))
            else:
                h = _gru_cell(ctx, xs[t], h, w, r, per_dir.get("bias"), per_dir.get("recurrentBias"),
                              op.options.get("layout", "zrn"), op.options.get("resetAfter", True),
                              list(op.options.get("activations", ["sigmoid", "tanh"])))
            seq[t][d] = h
        last_h.append(h)
        last_c.append(c)
    outs = [b.stack(values=tuple(last_h), axis=0)]
    if lstm:
        outs.append(b.stack(values=tuple(last_c), axis=0))
    if op.options.get("returnSequence", False):
        outs.append(b.stack(values=tuple(b.stack(values=tuple(s), axis=0) for s in seq), axis=0))
    return outs


@maps("gru")
def gru(ctx: Ctx, op: Operator) -> list[Value]:
    return _unrolled(ctx, op, lstm=False)


@maps("lstm")
def lstm(ctx: Ctx, op: Operator) -> list[Value]:
    return _unrolled(ctx, op, lstm=True)
