"""conv, conv_transpose and pooling (max/avg/l2) over 1 to 3 spatial dims.

Layouts match (MIL conv weights [C_out, C_in/groups, *K], conv_transpose [C_in, C_out/groups, *K],
as ONNX). Padding: MIL's ``pad`` [b0, e0, b1, e1, ...] is ONNX's [b0, b1, ..., e0, e1, ...];
'same' / 'same_lower' are explicit pads for static sizes (MIL's split of an odd total, extra after
/ before), ``auto_pad`` SAME_UPPER / SAME_LOWER (the same rule) for symbolic ones.

ceil_mode (pooling): MIL's last window may hang over the padded input, and that overhang never
counts towards an average's divisor. It is written as extra end padding with ceil_mode off where
that gives the same values (max: padding never wins; l2: padding adds zeros; avg excluding
padding: padding is not counted); an average that counts its explicit padding keeps ONNX's
ceil_mode, whose divisor also stops at the explicit padding (checked: the output sizes must agree).

conv_transpose: the full result is cropped at the start by MIL's before-padding and cut or
zero-extended at the end to the output size: ONNX ``pads`` for the cut, ``output_padding`` for the
extension (a longer extension than ONNX allows is a Pad after the op, the bias added after it).
"""

from __future__ import annotations

from ....errors import LoweringError
from ....ir.core import Op
from ....ir.ops.conv import Window
from ....ir.types import is_static_dim
from ..emitter import OnnxEmitter
from ._common import bool_param, input_as, int_list, int_param, str_param
from .registry import lowering


def _window(e: OnnxEmitter, op: Op, kernel: list[int], *, dilations: bool = True, ceil_mode: bool = False) -> Window:
    n = len(kernel)
    pad_type = str_param(e, op, "pad_type")
    custom = ((0, 0),) * n
    if pad_type == "custom":
        pad = int_list(e, op, "pad")
        custom = tuple((pad[2 * i], pad[2 * i + 1]) for i in range(n))
    dil = tuple(int_list(e, op, "dilations")) if dilations else (1,) * n
    return Window(tuple(kernel), tuple(int_list(e, op, "strides")), dil, pad_type, custom, ceil_mode)


def _spatial(e: OnnxEmitter, op: Op) -> list:
    return list(e.tensor_type(op.inputs["x"]).shape[2:])


def _pads(e: OnnxEmitter, op: Op, win: Window) -> dict:
    """``pads`` or ``auto_pad`` attributes for ``win`` over ``op``'s input."""
    sizes = _spatial(e, op)
    if win.pad_type in ("same", "same_lower") and not all(is_static_dim(d) for d in sizes):
        return {"auto_pad": "SAME_UPPER" if win.pad_type == "same" else "SAME_LOWER"}
    pairs = win.pads(tuple(int(d) if is_static_dim(d) else 0 for d in sizes)) if win.pad_type != "custom" \
        else list(win.custom_pad)
    return {"pads": [b for b, _ in pairs] + [a for _, a in pairs]}


@lowering("conv", note="Conv (pads reordered; same/same_lower as explicit pads, or auto_pad for symbolic sizes)")
def _conv(e: OnnxEmitter, op: Op) -> None:
    conv_node(e, op, input_as(e, op, "weight", e.dtype(op.inputs["x"])))


def conv_node(e: OnnxEmitter, op: Op, weight: str) -> None:
    """The Conv node of conv-like ``op`` with the weight ``weight`` (in x's dtype)."""
    dt = e.dtype(op.inputs["x"])
    w_shape = e.tensor_type(op.inputs["weight"]).shape
    kernel = [int(k) for k in w_shape[2:]]
    win = _window(e, op, kernel)
    inputs = [e.input(op), weight]
    if "bias" in op.inputs:
        inputs.append(input_as(e, op, "bias", dt))
    e.node("Conv", inputs, [e.out(op)], kernel_shape=kernel, strides=list(win.strides),
           dilations=list(win.dilations), group=int_param(e, op, "groups"), **_pads(e, op, win))


@lowering("conv_transpose", note="ConvTranspose (MIL's crop as pads and output_padding)")
def _conv_transpose(e: OnnxEmitter, op: Op) -> None:
    xv = op.inputs["x"]
    dt = e.dtype(xv)
    kernel = [int(k) for k in e.tensor_type(op.inputs["weight"]).shape[2:]]
    win = _window(e, op, kernel)
    if win.pad_type not in ("valid", "same", "custom"):
        raise LoweringError(f"pad_type '{win.pad_type}'")
    sizes = _spatial(e, op)
    given = int_list(e, op, "output_shape")[2:] if "output_shape" in op.inputs else None
    begins, ends, extra = [], [], []
    for i, n in enumerate(sizes):
        s, eff = win.strides[i], int(win.effective(i))
        if given is not None:
            if not is_static_dim(n):
                raise LoweringError("output_shape with a symbolic input size")
            full, out = (int(n) - 1) * s + eff, given[i]
            before = max(full - out, 0) // 2 if win.pad_type == "same" else win.custom_pad[i][0]
            after = full - before - out  # negative: zeros past the full result
        elif win.pad_type == "same":  # out = n * s: full - out = eff - s whatever n
            before = max(eff - s, 0) // 2
            after = eff - s - before
        else:
            before, after = win.custom_pad[i]
        begins.append(before)
        ends.append(max(after, 0))
        extra.append(max(-after, 0))
    fits = all(x < max(s, d) for x, s, d in zip(extra, win.strides, win.dilations))
    inputs = [e.input(op), input_as(e, op, "weight", dt)]
    bias = input_as(e, op, "bias", dt) if "bias" in op.inputs else None
    if fits and bias is not None:
        inputs.append(bias)
    attrs = dict(kernel_shape=kernel, strides=list(win.strides), dilations=list(win.dilations),
                 group=int_param(e, op, "groups"), pads=begins + ends,
                 output_padding=extra if fits and any(extra) else None)
    if fits:
        e.node("ConvTranspose", inputs, [e.out(op)], **attrs)
        return
    y = e.node("ConvTranspose", inputs, **attrs)
    rank = e.rank(xv)
    y = e.node("Pad", [y, e.int64s([0] * rank + [0, 0] + extra)], mode="constant")
    if bias is None:
        e.node("Identity", [y], [e.out(op)])
        return
    shaped = e.node("Reshape", [bias, e.int64s([-1] + [1] * (rank - 2))])
    e.node("Add", [y, shaped], [e.out(op)])


# -- pooling ------------------------------------------------------------------------------------------


def _pool_window(e: OnnxEmitter, op: Op) -> tuple[Window, list[int]]:
    kernel = int_list(e, op, "kernel_sizes")
    return _window(e, op, kernel, dilations=False, ceil_mode=bool_param(e, op, "ceil_mode")), kernel


def _overhang_pads(e: OnnxEmitter, op: Op, win: Window) -> list[int]:
    """Explicit pads with ceil_mode's overhang added at the end (static sizes)."""
    sizes = _spatial(e, op)
    if not all(is_static_dim(d) for d in sizes):
        raise LoweringError("ceil_mode with a symbolic spatial size")
    sizes = [int(d) for d in sizes]
    pairs = win.pads(tuple(sizes))
    outs = win.out_sizes(tuple(sizes))
    ends = [a + max((o - 1) * s + int(k) - (n + b + a), 0)
            for (b, a), o, s, k, n in zip(pairs, outs, win.strides, win.kernel, sizes)]
    return [b for b, _ in pairs] + ends


def _pool_attrs(e: OnnxEmitter, op: Op, win: Window, kernel: list[int]) -> dict:
    attrs = {"kernel_shape": kernel, "strides": list(win.strides)}
    attrs.update({"pads": _overhang_pads(e, op, win)} if win.ceil_mode else _pads(e, op, win))
    return attrs


@lowering("max_pool", note="MaxPool (ceil_mode as extra end padding)")
def _max_pool(e: OnnxEmitter, op: Op) -> None:
    win, kernel = _pool_window(e, op)
    e.node("MaxPool", [e.input(op)], [e.out(op)], **_pool_attrs(e, op, win, kernel))


@lowering("l2_pool", note="LpPool(p=2) (ceil_mode as extra end padding)")
def _l2_pool(e: OnnxEmitter, op: Op) -> None:
    win, kernel = _pool_window(e, op)
    e.node("LpPool", [e.input(op)], [e.out(op)], p=2, **_pool_attrs(e, op, win, kernel))


@lowering("avg_pool", note="AveragePool (count_include_pad = not exclude_padding_from_average; ceil_mode as "
                           "extra end padding when it is not counted)")
def _avg_pool(e: OnnxEmitter, op: Op) -> None:
    win, kernel = _pool_window(e, op)
    exclude = bool_param(e, op, "exclude_padding_from_average")
    padded = win.pad_type != "valid" and (win.pad_type != "custom" or any(b or a for b, a in win.custom_pad))
    if win.ceil_mode and padded and not exclude:
        attrs = {"kernel_shape": kernel, "strides": list(win.strides), "ceil_mode": 1, "count_include_pad": 1,
                 **_pads(e, op, win)}
        _check_onnx_ceil_sizes(e, op, win)
    else:
        attrs = _pool_attrs(e, op, win, kernel)
        attrs["count_include_pad"] = 0 if exclude or win.ceil_mode else 1
    e.node("AveragePool", [e.input(op)], [e.out(op)], **attrs)


def _check_onnx_ceil_sizes(e: OnnxEmitter, op: Op, win: Window) -> None:
    """ONNX's ceil_mode drops a last window starting in the right padding, as MIL does with padding."""
    sizes = _spatial(e, op)
    if not all(is_static_dim(d) for d in sizes):
        raise LoweringError("ceil_mode with a symbolic spatial size")
    for i, n in enumerate(int(d) for d in sizes):
        b, a = win.custom_pad[i]
        k, s = int(win.kernel[i]), win.strides[i]
        out = -(-(n + b + a - k) // s) + 1
        if (out - 1) * s >= n + b:
            out -= 1
        if out != win.out_size(i, n):
            raise LoweringError(f"ceil_mode output size {win.out_size(i, n)} has no ONNX form (ONNX gives {out})")

