"""The rank-5 lowering table: IR ops that legacy layers (specification versions 1-3) compute
exactly, on values whose leading (batch, sequence) axes are 1 (see layout.py).

Covered: conv / conv_transpose (constant weights), max/avg/l2 pooling (ceil_mode as
includeLastPixel where the sizes agree), reductions and argmax along C, H, W (global pooling for
max/mean over H and W), batch_norm, lrn, linear / matmul with a constant matrix (innerProduct), the
activation kinds, prelu, unary functions, clip/relu6 and silu (decomposed), add/sub/mul/div with
constants (alpha, ``bias``, ``scale``) and add/sub/mul/max/min of equal shapes, concat, softmax
along C, transpose of C/H/W (permute), padding, nearest and bilinear upsampling (resizeBilinear,
version 3, when the factors are not integers or the sampling is not DEFAULT), and reshape /
squeeze / expand_dims / identity / casts (no layer: the same blob). Anything else raises
LoweringError with why, and the backend lists every such op in one error.

Sequences (layout.py): the lowerings registered ``per_step`` take them — the reshapes, casts,
activations, unary functions, clip/silu, add/sub/mul with a per-step constant, binary ops of two
sequences, innerProduct, the embedding (one index per step) and the recurrent layers
(recurrent.py); any other op reading a sequence is refused. Flexible H and W: convolution,
pooling (not ceil_mode), batch_norm, prelu, activations, unary functions, scalar add/mul, binary
ops of equal shapes and the reshapes keep them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....errors import LoweringError
from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Op, Value
from ..lowering._common import scalar
from ..lowering._embedding import plan_embedding
from ..lowering.cast import read_only_as_indices
from ..lowering.quant import recorded_fp16
from .layout import (
    Layout,
    Rank5Emitter,
    channel_layout,
    chw_layout,
    dims,
    is_static,
    natural_layout,
    op_value,
    sequence_split,
    shape_text,
    spatial_layout,
    static_shape,
    vector_layout,
)

Rank5Fn = Callable[[Rank5Emitter, Op], None]
RANK5_LOWERINGS: dict[str, Rank5Fn] = {}
#: op types whose lowering reads sequences (module docstring); the others refuse them
PER_STEP: set[str] = set()


def rank5(*op_types: str, per_step: bool = False) -> Callable[[Rank5Fn], Rank5Fn]:
    def register(fn: Rank5Fn) -> Rank5Fn:
        for t in op_types:
            RANK5_LOWERINGS[t] = fn
            if per_step:
                PER_STEP.add(t)
        return fn
    return register


def step_shape(e: Rank5Emitter, v: Value) -> list:
    """The shape of one step of ``v`` (``[1, ..]`` for a sequence ``[S, 1, ..]``), else its shape;
    symbolic H and W included."""
    shape = dims(v)
    return shape[1:] if e.seq(v) is not None else shape


def _x(op: Op, key: str = "x") -> Value:
    v = op_value(op, key)
    if v is None:
        raise LoweringError(f"input '{key}' is missing")
    return v


def _float_tensor(v: Value) -> None:
    dtype = getattr(v.type, "dtype", None)
    if dtype is None or dtype.name not in ("fp16", "fp32", "fp64"):
        raise LoweringError(f"'{v.name}' is {v.type}; rank-5 networks compute on float tensors only")


# ---------------------------------------------------------------------------------------------
# no layer: the same blob


@rank5("reshape", "squeeze", "expand_dims", "identity", per_step=True)
def _same_elements(e: Rank5Emitter, op: Op) -> None:
    e.alias(op.outputs[0], _x(op))


@rank5("cast", per_step=True)
def _cast(e: Rank5Emitter, op: Op) -> None:
    """A cast to a float type, or to an integer type of a value that holds integers (an index from
    argmax, say) or that only gather indices read (lowering/cast.py): the same blob (blobs hold
    fp32; Core ML converts an INT32 output feature)."""
    x = _x(op)
    if str(e.const_param(op, "dtype")) not in ("fp16", "fp32") and not _integral(x) \
            and not read_only_as_indices(op.outputs[0]):  # the embedding layer truncates its float indices
        raise LoweringError("a cast to a non-float type (rank-5 blobs hold floats; no legacy rounding layer)")
    e.alias(op.outputs[0], x)


def _integral(v: Value) -> bool:
    """Whether ``v`` holds whole numbers: an int or bool value, or a float cast or reshape of one."""
    while True:
        dtype = getattr(v.type, "dtype", None)
        if dtype is not None and dtype.name.startswith(("int", "uint", "bool")):
            return True
        op = v.producer
        if op is None or op.type not in ("cast", "reshape", "squeeze", "expand_dims", "identity"):
            return False
        v = _x(op)


@rank5("transpose")
def _transpose(e: Rank5Emitter, op: Op) -> None:
    """``permute`` of C, H, W of a value whose leading axes are 1 (Seq stays axis 0)."""
    x = _x(op)
    shape = static_shape(x)
    perm = [int(a) % len(shape) for a in np.asarray(e.const_param(op, "perm")).reshape(-1)]
    rank = len(shape)
    lead = rank - 3
    layout = chw_layout(x, "transpose input")
    moved = [a for i, a in enumerate(perm) if a != i]
    if any(a < lead and shape[a] != 1 for a in moved) or any(perm[i] < lead for i in range(lead, rank)):
        raise LoweringError(f"transpose {perm} of shape {shape} moves a leading axis (legacy permute reorders "
                            f"C, H and W)")
    axes = [perm[i] - lead for i in range(lead, rank)]  # the order of C, H, W
    out_layout = tuple(layout[a] for a in axes)
    params = e.layer("permute", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.axis.extend([0] + [a + 1 for a in axes])


# ---------------------------------------------------------------------------------------------
# activations and unary functions: any layout, kept


def _unary_layer(e: Rank5Emitter, op: Op, kind: str):
    x = _x(op)
    _float_tensor(x)
    blob = e.get(x)
    return e.layer(kind, op.name, [blob], [e.put(op.outputs[0], e.layouts[x], e.seq(x))])


_PLAIN = {"relu": "ReLU", "tanh": "tanh", "sigmoid": "sigmoid", "softsign": "softsign", "softplus": "softplus"}
_ALPHA = {"leaky_relu": "leakyReLU", "elu": "ELU", "thresholded_relu": "thresholdedReLU"}
_ALPHA_BETA = {"linear_activation": "linear", "scaled_tanh": "scaledTanh", "sigmoid_hard": "sigmoidHard"}


@rank5(*_PLAIN, *_ALPHA, *_ALPHA_BETA, per_step=True)
def _activation(e: Rank5Emitter, op: Op) -> None:
    params = _unary_layer(e, op, "activation")
    t = op.type
    if t in _PLAIN:
        getattr(params, _PLAIN[t]).SetInParent()
    elif t in _ALPHA:
        getattr(params, _ALPHA[t]).alpha = scalar(e.const_param(op, "alpha"), "alpha")
    else:
        msg = getattr(params, _ALPHA_BETA[t])
        msg.alpha = scalar(e.const_param(op, "alpha"), "alpha")
        msg.beta = scalar(e.const_param(op, "beta"), "beta")


@rank5("prelu")
def _prelu(e: Rank5Emitter, op: Op) -> None:
    x = _x(op)
    layout = spatial_layout(x, "prelu input", flexible=True)
    alpha = np.asarray(e.const_array(_x(op, "alpha"), "prelu alpha")).reshape(-1)
    if alpha.size not in (1, layout[0]):
        raise LoweringError(f"prelu alpha has {alpha.size} values for {layout[0]} channels")
    params = e.layer("activation", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    e.weights(params.PReLU.alpha, alpha)


@rank5("clip", "relu6", per_step=True)
def _clip(e: Rank5Emitter, op: Op) -> None:
    """min(max(x, lo), hi) without the ``clip`` layer (version 4): ``unary`` THRESHOLD computes
    ``max(scale * x + shift, alpha)``, so max(x, lo), then max(-y, -hi) = -min(y, hi), then * -1."""
    lo, hi = (0.0, 6.0) if op.type == "relu6" else (scalar(e.const_param(op, k), k) for k in ("alpha", "beta"))
    x = _x(op)
    _float_tensor(x)
    layout = e.layout(x)
    low, neg = e.fresh(f"{op.name}_low"), e.fresh(f"{op.name}_neg_high")
    for name, src, dst, scale, alpha in ((f"{op.name}_low", e.get(x), low, 1.0, lo),
                                         (f"{op.name}_neg_high", low, neg, -1.0, -hi)):
        params = e.layer("unary", name, [src], [dst])
        params.type = nn.UnaryFunctionLayerParams.THRESHOLD
        params.scale, params.alpha = scale, alpha
    e.layer("multiply", op.name, [neg], [e.put(op.outputs[0], layout, e.seq(x))]).alpha = -1.0


@rank5("silu", per_step=True)
def _silu(e: Rank5Emitter, op: Op) -> None:
    """x * sigmoid(x): an activation and a multiply."""
    x = _x(op)
    _float_tensor(x)
    blob, layout = e.get(x), e.layout(x)
    sig = e.fresh(f"{op.name}_sigmoid")
    e.layer("activation", f"{op.name}_sigmoid", [blob], [sig]).sigmoid.SetInParent()
    e.layer("multiply", op.name, [blob, sig], [e.put(op.outputs[0], layout, e.seq(x))])


_UNARY = {"abs": "ABS", "sqrt": "SQRT", "rsqrt": "RSQRT", "inverse": "INVERSE", "log": "LOG", "exp": "EXP",
          "threshold": "THRESHOLD", "square": "POWER"}


@rank5(*_UNARY, per_step=True)
def _unary_function(e: Rank5Emitter, op: Op) -> None:
    """UnaryFunctionLayerParams ``f(scale * x + shift)``: scale 1 always (proto3's default is 0);
    epsilon for RSQRT, INVERSE and LOG, alpha for THRESHOLD (max(x, alpha)) and POWER."""
    params = _unary_layer(e, op, "unary")
    params.scale = 1.0
    params.type = nn.UnaryFunctionLayerParams.Operation.Value(_UNARY[op.type])
    if op.type in ("rsqrt", "inverse", "log"):
        params.epsilon = float(e.const_param(op, "epsilon"))
    elif op.type == "threshold":
        params.alpha = float(e.const_param(op, "alpha"))
    elif op.type == "square":
        params.alpha = 2.0


# ---------------------------------------------------------------------------------------------
# binary elementwise


def _affine_with_constant(e: Rank5Emitter, op: Op) -> bool:
    """add/sub/mul/real_div of a run-time value and a constant as ``a * x + b`` layers: ``add`` or
    ``multiply`` with alpha for a scalar, else ``bias`` / ``scale`` with a parameter of shape [C]
    (per channel), [1, H, W] or [C, H, W] in the blob's layout. False when neither side is constant."""
    x, y = _x(op), _x(op, "y")
    cx, cy = e.const(x), e.const(y)
    if (cx is None) == (cy is None):
        return False
    var, const = (x, np.asarray(cy)) if cy is not None else (y, np.asarray(cx))
    seq = e.seq(var)
    out_shape = dims(op.outputs[0])[1:] if seq is not None else dims(op.outputs[0])
    if dims(var) != dims(op.outputs[0]):
        raise LoweringError(f"the constant broadcasts '{var.name}' from {shape_text(dims(var))} to "
                            f"{shape_text(dims(op.outputs[0]))}: "
                            f"legacy layers cannot enlarge a blob")
    if seq is not None:  # one value per step: the constant may not vary along Seq
        if const.ndim > len(out_shape):
            if const.ndim > len(out_shape) + 1 or const.shape[0] != 1:
                raise LoweringError(f"a constant of shape {list(const.shape)} varies along the sequence axis")
            const = const.reshape(const.shape[1:])
    if not is_static(out_shape):  # flexible H, W: a scalar constant only (add / multiply alpha)
        if const.size != 1:
            raise LoweringError(f"a constant of shape {list(const.shape)} on flexible sizes {shape_text(out_shape)} (only a "
                                f"scalar is written without the sizes)")
        out_shape = [1] * len(out_shape)
    full = np.broadcast_to(const.astype(np.float64), out_shape)
    ones, zeros = np.ones(out_shape), np.zeros(out_shape)
    t, const_first = op.type, cx is not None
    if t == "add":
        a, b = ones, full
    elif t == "mul":
        a, b = full, zeros
    elif t == "sub":
        a, b = (-ones, full) if const_first else (ones, -full)
    elif t == "real_div" and not const_first:
        if np.any(full == 0):
            raise LoweringError("division by a constant holding 0")
        a, b = 1.0 / full, zeros
    else:
        raise LoweringError(f"{t} with a constant first operand has no legacy layer")
    _float_tensor(var)
    layout = e.layout(var)
    blob = e.get(var)
    out = e.put(op.outputs[0], layout, seq)
    shape = layout if is_static(layout) else (1, 1, 1)
    a, b = a.reshape(shape), b.reshape(shape)
    if np.all(a == 1) and np.all(b == b.flat[0]):
        e.layer("add", op.name, [blob], [out]).alpha = float(b.flat[0])
    elif np.all(b == 0) and np.all(a == a.flat[0]):
        e.layer("multiply", op.name, [blob], [out]).alpha = float(a.flat[0])
    elif np.all(a == 1):
        params = e.layer("bias", op.name, [blob], [out])
        shape, data = _compact(b)
        params.shape.extend(shape)
        e.weights(params.bias, data)
    else:
        params = e.layer("scale", op.name, [blob], [out])
        shape, data = _compact(a)
        params.shapeScale.extend(shape)
        e.weights(params.scale, data)
        if np.any(b != 0):
            params.hasBias = True
            shape, data = _compact(b)
            params.shapeBias.extend(shape)
            e.weights(params.bias, data)
    return True


def _compact(p: np.ndarray) -> tuple[list[int], np.ndarray]:
    """A [C, H, W] parameter in the smallest form the bias/scale layers broadcast: [1], [C],
    [1, H, W] or [C, H, W]."""
    c, h, w = p.shape
    p32 = p.astype(np.float32)
    if np.all(p32 == p32.flat[0]):
        return [1], p32.reshape(-1)[:1]
    if np.all(p32 == p32[:, :1, :1]):
        return [c], p32[:, 0, 0]
    if np.all(p32 == p32[:1]):
        return [1, h, w], p32[:1].reshape(-1)
    return [c, h, w], p32.reshape(-1)


_TWO_BLOBS = {"add": "add", "mul": "multiply", "maximum": "max", "minimum": "min"}


@rank5("add", "sub", "mul", "real_div", "maximum", "minimum", per_step=True)
def _binary(e: Rank5Emitter, op: Op) -> None:
    if op.type in ("add", "sub", "mul", "real_div") and _affine_with_constant(e, op):
        return
    x, y = _x(op), _x(op, "y")
    sx, sy = dims(x), dims(y)
    if e.seq(x) is not None or e.seq(y) is not None:
        if e.seq(x) != e.seq(y) or sx != sy:
            raise LoweringError(f"operands of shapes {shape_text(sx)} and {shape_text(sy)}: legacy "
                                f"layers combine two sequences of equal shapes only")
    elif sx != sy:
        if op.type in ("add", "mul"):
            _broadcast(e, op, x, y)
            return
        raise LoweringError(f"operands of shapes {sx} and {sy}: legacy {op.type} layers need equal shapes")
    if op.type == "real_div":
        raise LoweringError("division of two run-time values (legacy layers have no exact divide)")
    _float_tensor(x)
    layout = e.layout(x)
    bx, by = e.get(x), e.get(y, layout)
    if op.type == "sub":
        neg = e.fresh(f"{op.name}_neg")
        e.layer("multiply", f"{op.name}_neg", [by], [neg]).alpha = -1.0
        by = neg
    kind = "add" if op.type == "sub" else _TWO_BLOBS[op.type]
    e.layer(kind, op.name, [bx, by], [e.put(op.outputs[0], layout, e.seq(x))])


def _broadcast(e: Rank5Emitter, op: Op, x: Value, y: Value) -> None:
    """add / multiply of a [C, H, W] blob and one of shape [C], [1, H, W] or [1] (the legacy
    layers' broadcasting: the output has the first input's shape), e.g. a squeeze-excitation
    block's per-channel gate."""
    out = static_shape(op.outputs[0])
    big, small = (x, y) if static_shape(x) == out else (y, x)
    layout = natural_layout(out)
    if static_shape(big) != out or layout is None:
        raise LoweringError(f"operands of shapes {static_shape(x)} and {static_shape(y)}: legacy layers "
                            f"broadcast [C], [1, H, W] or [1] onto [C, H, W] only")
    shape = static_shape(small)
    padded = [1] * (len(out) - len(shape)) + shape
    tail = tuple(([1, 1] + padded)[-3:]) if len(out) >= 3 else (padded[-1], 1, 1)
    forms = {layout, (layout[0], 1, 1), (1, layout[1], layout[2]), (1, 1, 1)}
    if len(padded) != len(out) or any(d != 1 for d in padded[:-3]) or tail not in forms:
        raise LoweringError(f"operands of shapes {static_shape(x)} and {static_shape(y)}: legacy layers "
                            f"broadcast [C], [1, H, W] or [1] onto [C, H, W] only")
    _float_tensor(big)
    blobs = [e.get(big, layout), e.get(small, tail)]  # type: ignore[arg-type]
    e.layer(_TWO_BLOBS[op.type], op.name, blobs, [e.put(op.outputs[0], layout)])


# ---------------------------------------------------------------------------------------------
# convolution and pooling


def _pairs(v, what: str) -> list[int]:
    vals = [int(d) for d in np.asarray(v).reshape(-1)]
    if len(vals) != 2:
        raise LoweringError(f"{what} {vals}: rank-5 layers have two spatial axes")
    return vals


def _set_padding(e: Rank5Emitter, op: Op, params, kernel: list[int], strides: list[int],
                 dilations: list[int]) -> None:
    """ValidPadding (with amounts) or SamePadding of a conv/pool for MIL's pad_type and pad."""
    pad_type = str(e.const_param(op, "pad_type"))
    if pad_type == "same":
        params.same.asymmetryMode = nn.SamePadding.BOTTOM_RIGHT_HEAVY
        return
    if pad_type == "same_lower":
        params.same.asymmetryMode = nn.SamePadding.TOP_LEFT_HEAVY
        return
    params.valid.SetInParent()
    if pad_type == "valid":
        return
    if pad_type != "custom":
        raise LoweringError(f"pad_type '{pad_type}' has no legacy form")
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)]
    if len(pad) != 4:
        raise LoweringError(f"pad {pad}: rank-5 layers have two spatial axes")
    for start, end in ((pad[0], pad[1]), (pad[2], pad[3])):
        edge = params.valid.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = start, end


def _conv_common(e: Rank5Emitter, op: Op, what: str):
    x = _x(op)
    flexible = what == "conv"  # conv_transpose computes with the sizes
    layout = spatial_layout(x, f"{what} input", flexible=flexible)
    out_layout = spatial_layout(op.outputs[0], f"{what} output", flexible=flexible)
    if e.const(op_value(op, "weight")) is None:
        raise LoweringError(f"{what} with a run-time weight (a second input needs specification version 4)")
    weight = np.asarray(e.const(op_value(op, "weight")))
    bias_v = op_value(op, "bias")
    bias = None if bias_v is None else e.const_array(bias_v, f"{what} bias")
    params = e.layer("convolution", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    groups = int(e.const_param(op, "groups"))
    params.nGroups = groups
    params.kernelSize.extend(int(d) for d in weight.shape[2:])
    params.stride.extend(_pairs(e.const_param(op, "strides"), "strides"))
    return x, layout, out_layout, weight, bias, groups, params


@rank5("conv")
def _conv(e: Rank5Emitter, op: Op) -> None:
    """convolution: weights [C_out, C_in / groups, kH, kW] as MIL's; kernelChannels = C_in / groups."""
    x, layout, out_layout, weight, bias, groups, params = _conv_common(e, op, "conv")
    dilations = _pairs(e.const_param(op, "dilations"), "dilations")
    params.outputChannels = weight.shape[0]
    params.kernelChannels = weight.shape[1]
    params.dilationFactor.extend(dilations)
    _set_padding(e, op, params, list(weight.shape[2:]), list(params.stride), dilations)
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


@rank5("conv_transpose")
def _conv_transpose(e: Rank5Emitter, op: Op) -> None:
    """Deconvolution: weights [C_in, C_out / groups, kH, kW] (MIL's layout is the layer's). The
    crop of the full ``(D - 1) * s + K`` result is written as ValidPadding amounts (before, after),
    whose output size ``(D - 1) * s + K - before - after`` is the op's; ``outputShape`` is not
    written: the spec says the padding is ignored when it is set, so where the crop falls would be
    up to the runtime (onnxmltools then centres it)."""
    x, layout, out_layout, weight, bias, groups, params = _conv_common(e, op, "conv_transpose")
    if _pairs(e.const_param(op, "dilations"), "dilations") != [1, 1]:
        raise LoweringError("a dilated conv_transpose (the legacy deconvolution ignores dilation)")
    params.isDeconvolution = True
    params.kernelChannels = weight.shape[0]
    params.outputChannels = weight.shape[1] * groups
    pad_type = str(e.const_param(op, "pad_type"))
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)] if pad_type == "custom" else [0] * 4
    params.valid.SetInParent()
    for i, (n, k, s, out) in enumerate(zip(layout[1:], weight.shape[2:], params.stride, out_layout[1:])):
        excess = (n - 1) * s + int(k) - out
        before = excess // 2 if pad_type == "same" else pad[2 * i]
        if excess < 0 or not 0 <= before <= excess:
            raise LoweringError(f"conv_transpose output size {out} is larger than its full result "
                                f"{(n - 1) * s + int(k)} minus the padding (no legacy form)")
        edge = params.valid.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = before, excess - before
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


_POOL = {"max_pool": nn.PoolingLayerParams.MAX, "avg_pool": nn.PoolingLayerParams.AVERAGE,
         "l2_pool": nn.PoolingLayerParams.L2}


@rank5(*_POOL)
def _pool(e: Rank5Emitter, op: Op) -> None:
    x = _x(op)
    layout = spatial_layout(x, "pooling input", flexible=True)
    out_layout = spatial_layout(op.outputs[0], "pooling output", flexible=True)
    kernel = _pairs(e.const_param(op, "kernel_sizes"), "kernel_sizes")
    strides = _pairs(e.const_param(op, "strides"), "strides")
    ceil = bool(np.asarray(e.const_param(op, "ceil_mode")).reshape(-1)[0])
    if ceil and not is_static(layout + out_layout):
        raise LoweringError("ceil_mode pooling of flexible sizes (includeLastPixel is checked against the sizes)")
    amounts = _include_last_pixel(e, op, layout, out_layout, kernel, strides) if ceil else None
    params = e.layer("pooling", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.type = _POOL[op.type]
    params.kernelSize.extend(kernel)
    params.stride.extend(strides)
    if amounts is not None:
        params.includeLastPixel.paddingAmounts.extend(amounts)
    else:
        _set_padding(e, op, params, kernel, strides, [1, 1])
    if op.type == "avg_pool":
        params.avgPoolExcludePadding = bool(np.asarray(e.const_param(op, "exclude_padding_from_average")).reshape(-1)[0])


def _include_last_pixel(e: Rank5Emitter, op: Op, layout: Layout, out_layout: Layout, kernel: list[int],
                        strides: list[int]) -> list[int]:
    """The [H, W] padding of ``includeLastPixel`` pooling for MIL's ceil_mode pooling with valid or
    symmetric custom padding: Caffe's windows, ``ceil((D + 2p - K) / s) + 1`` of them, the last one
    dropped when it starts past ``D + p`` while either axis is padded (MIL drops it per padded axis:
    the output sizes must agree). Averages never count the ceil-mode overhang in either."""
    pad_type = str(e.const_param(op, "pad_type"))
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)] if pad_type == "custom" else [0] * 4
    if pad_type not in ("valid", "custom") or pad[0] != pad[1] or pad[2] != pad[3]:
        raise LoweringError(f"ceil_mode pooling with {pad_type} padding {pad} (legacy ceil-mode pooling, "
                            f"includeLastPixel, pads symmetrically)")
    amounts = [pad[0], pad[2]]
    for n, k, s, p, want in zip(layout[1:], kernel, strides, amounts, out_layout[1:]):
        out = -(-(n + 2 * p - k) // s) + 1
        if any(amounts) and (out - 1) * s >= n + p:
            out -= 1
        if out != want:
            raise LoweringError(f"ceil_mode pooling whose output size {want} differs from the legacy "
                                f"includeLastPixel size {out}")
    return amounts


_REDUCE = {"reduce_sum": "SUM", "reduce_mean": "AVG", "reduce_prod": "PROD", "reduce_sum_square": "SUMSQUARE",
           "reduce_l1_norm": "L1", "reduce_l2_norm": "L2", "reduce_max": "MAX", "reduce_min": "MIN"}
_REDUCE_AXES = {frozenset("CHW"): "CHW", frozenset("HW"): "HW", frozenset("C"): "C", frozenset("H"): "H",
                frozenset("W"): "W"}


@rank5(*_REDUCE)
def _reduce(e: Rank5Emitter, op: Op) -> None:
    """Reductions over C, H, W of [.., C, H, W] (or C of a vector): ``pooling`` with globalPooling
    for max/mean over H and W, the ``reduce`` layer otherwise. The layer keeps reduced axes as 1,
    which is the same blob as MIL's keep_dims=False result."""
    x = _x(op)
    shape = static_shape(x)
    rank = len(shape)
    axes_v = e.const_param(op, "axes")
    axes = list(range(rank)) if axes_v is None else [int(a) % rank for a in np.asarray(axes_v).reshape(-1)]
    if rank >= 3:
        layout = channel_layout(x, -3, op.type)
        names = {rank - 3: "C", rank - 2: "H", rank - 1: "W"}
    else:
        layout = vector_layout(x, f"{op.type} input")
        names = {rank - 1: "C"}
    picked = {names[a] for a in axes if a in names}
    if any(a not in names and shape[a] != 1 for a in axes) or not picked:
        raise LoweringError(f"{op.type} over axes {axes} of shape {shape}: legacy reductions cover C, H and W")
    out_layout = tuple(1 if n in picked else d for n, d in zip("CHW", layout))
    blob = e.get(x, layout)
    out = e.put(op.outputs[0], out_layout)
    if picked == {"H", "W"} and op.type in ("reduce_max", "reduce_mean"):
        params = e.layer("pooling", op.name, [blob], [out])
        params.type = nn.PoolingLayerParams.MAX if op.type == "reduce_max" else nn.PoolingLayerParams.AVERAGE
        params.globalPooling = True
        params.valid.SetInParent()
        return
    params = e.layer("reduce", op.name, [blob], [out])
    params.mode = nn.ReduceLayerParams.ReduceOperation.Value(_REDUCE[op.type])
    params.axis = nn.ReduceLayerParams.ReduceAxis.Value(_REDUCE_AXES[frozenset(picked)])


@rank5("reduce_argmax")
def _argmax(e: Rank5Emitter, op: Op) -> None:
    """``reduce`` ARGMAX along C, H or W: the index of the first maximum, as a float."""
    x = _x(op)
    shape = static_shape(x)
    rank = len(shape)
    layout = channel_layout(x, -3, op.type) if rank >= 3 else vector_layout(x, f"{op.type} input")
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(())) % rank
    names = {rank - 3: "C", rank - 2: "H", rank - 1: "W"} if rank >= 3 else {rank - 1: "C"}
    if axis not in names:
        raise LoweringError(f"{op.type} along axis {axis} of shape {shape}: legacy ARGMAX covers C, H or W")
    out_layout = tuple(1 if n == names[axis] else d for n, d in zip("CHW", layout))
    params = e.layer("reduce", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.mode = nn.ReduceLayerParams.ARGMAX
    params.axis = nn.ReduceLayerParams.ReduceAxis.Value(names[axis])


# ---------------------------------------------------------------------------------------------
# normalization, dense, softmax, concat


@rank5("batch_norm")
def _batch_norm(e: Rank5Emitter, op: Op) -> None:
    x = _x(op)
    layout = spatial_layout(x, "batch_norm input", flexible=True)
    c = layout[0]
    params = e.layer("batchnorm", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    params.channels = c
    eps = float(e.const_param(op, "epsilon"))
    # 0 is proto3's "unset", which readers take as 1e-5: the smallest positive fp32 instead
    params.epsilon = eps if eps != 0 else float(np.nextafter(np.float32(0), np.float32(1)))
    for key, default in (("gamma", 1.0), ("beta", 0.0), ("mean", None), ("variance", None)):
        v = op_value(op, key)
        arr = np.full(c, default, np.float32) if v is None else e.const_array(v, f"batch_norm {key}").reshape(-1)
        e.weights(getattr(params, key), np.broadcast_to(arr, (c,)))


@rank5("local_response_norm")
def _lrn(e: Rank5Emitter, op: Op) -> None:
    """``lrn``: x / (k + alpha / size * sum of squares over ``size`` channels) ** beta, as MIL's."""
    x = _x(op)
    layout = chw_layout(x, "local_response_norm input")
    params = e.layer("lrn", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])
    params.localSize = int(np.asarray(e.const_param(op, "size")).reshape(()))
    params.alpha = scalar(e.const_param(op, "alpha"), "alpha")
    params.beta = scalar(e.const_param(op, "beta"), "beta")
    params.k = scalar(e.const_param(op, "k"), "k")
    if params.k == 0:
        raise LoweringError("k = 0 (proto3's unset value, which readers take as 1)")


_PAD_MODES = {"constant": "constant", "reflect": "reflection", "replicate": "replication"}


@rank5("pad")
def _pad(e: Rank5Emitter, op: Op) -> None:
    """``padding`` of H and W (constant, reflection, replication) of a [1, C, H, W] value."""
    x = _x(op)
    layout = chw_layout(x, "pad input")
    pad = [int(d) for d in np.asarray(e.const_param(op, "pad")).reshape(-1)]
    if len(pad) > 4 and any(pad[:-4]):
        raise LoweringError(f"padding {pad} of N or C (legacy padding covers H and W)")
    pad = ([0] * 4 + pad)[-4:]  # MIL pads the last len(pad) / 2 axes
    mode = str(e.const_param(op, "mode"))
    out_layout = chw_layout(op.outputs[0], "pad output")
    params = e.layer("padding", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    kind = getattr(params, _PAD_MODES[mode])
    kind.SetInParent()
    if mode == "constant":
        kind.value = scalar(e.const_param(op, "constant_val"), "constant_val")
    for start, end in ((pad[0], pad[1]), (pad[2], pad[3])):
        edge = params.paddingAmounts.borderAmounts.add()
        edge.startEdgeSize, edge.endEdgeSize = start, end


def _inner_product(e: Rank5Emitter, op: Op, x: Value, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """innerProduct of a vector ([.., C_in] with leading 1s) by ``weight`` [C_out, C_in]."""
    c_out, c_in = weight.shape
    seq = e.seq(x)
    if seq is None:
        vector_layout(x, f"{op.type} input")
        out = e.put(op.outputs[0], vector_layout(op.outputs[0], f"{op.type} output"))
    else:  # each step [1, C_in] -> [1, C_out]
        split = sequence_split(dims(op.outputs[0]), seq)
        if split is None or split[1] != (c_out, 1, 1) or len(dims(x)) > 3:
            raise LoweringError(f"{op.type} of a sequence of shape {shape_text(dims(x))}: innerProduct "
                                f"takes [Seq, 1, C]")
        out = e.put(op.outputs[0], (c_out, 1, 1), seq)
    params = e.layer("innerProduct", op.name, [e.get(x, (c_in, 1, 1))], [out])
    params.inputChannels, params.outputChannels = c_in, c_out
    e.weights(params.weights, weight)
    if bias is not None:
        params.hasBias = True
        e.weights(params.bias, bias)


@rank5("linear", per_step=True)
def _linear(e: Rank5Emitter, op: Op) -> None:
    weight = e.const_array(_x(op, "weight"), "linear weight")
    bias_v = op_value(op, "bias")
    bias = None if bias_v is None else e.const_array(bias_v, "linear bias")
    if bias is not None and not np.any(bias):
        bias = None
    _inner_product(e, op, _x(op), weight, bias)


@rank5("matmul", per_step=True)
def _matmul(e: Rank5Emitter, op: Op) -> None:
    """x [.., C_in] @ a constant [C_in, C_out] matrix: innerProduct with the matrix transposed."""
    y = e.const(op_value(op, "y"))
    if y is None or np.ndim(y) != 2:
        raise LoweringError("matmul of a run-time or batched right operand (innerProduct needs a constant matrix)")
    if bool(np.asarray(e.param(op, "transpose_x")).reshape(-1)[0]):
        raise LoweringError("matmul with transpose_x")
    w = np.asarray(y)
    weight = w if bool(np.asarray(e.param(op, "transpose_y")).reshape(-1)[0]) else w.T
    _inner_product(e, op, _x(op), np.ascontiguousarray(weight), None)


@rank5("gather", per_step=True)
def _gather(e: Rank5Emitter, op: Op) -> None:
    """The legacy ``embedding`` layer (version 1): a row of a constant [V, E] table, at ONE index
    (the layer reads its indices along Seq/Batch, which this mode holds at 1) known to be in
    [0, V) (the rules of lowering/_embedding.py). Weights fp32, or fp16 where the program held them
    so; compressed tables are written dense here."""
    plan = plan_embedding(op)
    if plan is None:
        raise LoweringError("only a gather of rows of a constant 2-D table at indices known to be >= 0 has a "
                            "legacy form (embedding)")
    indices = _x(op, "indices")
    seq = e.seq(indices)
    vocab, size = (int(d) for d in plan.table.shape)
    if seq is not None:  # one index per step: [S, 1] -> [S, 1, E]
        split = sequence_split(dims(op.outputs[0]), seq)
        if len(dims(indices)) != 2 or split is None or split[1] != (size, 1, 1):
            raise LoweringError(f"gather at indices of shape {shape_text(dims(indices))}: the rank-5 "
                                f"embedding layer reads one index per step ([Seq, 1])")
        out = e.put(op.outputs[0], (size, 1, 1), seq)
    else:
        if any(d != 1 for d in static_shape(indices)):
            raise LoweringError(f"gather at indices of shape {static_shape(indices)}: the rank-5 embedding layer "
                                f"reads several indices along Seq/Batch, which holds one step here")
        out = e.put(op.outputs[0], vector_layout(op.outputs[0], "embedding output"))
    params = e.layer("embedding", op.name, [e.get(indices, (1, 1, 1))], [out])
    params.inputDim, params.outputChannels = vocab, size
    stored, _ = recorded_fp16(op, "x", plan.table.T)  # [outputChannels, inputDim]
    e.weights(params.weights, stored)


@rank5("softmax")
def _softmax(e: Rank5Emitter, op: Op) -> None:
    x = _x(op)
    layout = channel_layout(x, int(e.const_param(op, "axis")), "softmax")
    e.layer("softmax", op.name, [e.get(x, layout)], [e.put(op.outputs[0], layout)])


@rank5("concat")
def _concat(e: Rank5Emitter, op: Op) -> None:
    values = op.inputs.get("values")
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if bool(np.asarray(e.param(op, "interleave")).reshape(-1)[0]):
        raise LoweringError("interleaved concat (needs specification version 5)")
    axis = int(e.const_param(op, "axis"))
    blobs: list[str] = []
    for v in values:
        blobs.append(e.get(v, channel_layout(v, axis, "concat")))
    out_layout = channel_layout(op.outputs[0], axis, "concat")
    if len(blobs) == 1:
        e.alias(op.outputs[0], values[0])
        return
    e.layer("concat", op.name, blobs, [e.put(op.outputs[0], out_layout)])
    e.parts[op.outputs[0]] = [(b, e.layouts[v]) for b, v in zip(blobs, values) if e.lookup(v) is not None]


@rank5("split", per_step=True)
def _split(e: Rank5Emitter, op: Op) -> None:
    """``split`` into equal parts along C (the legacy split layer, per step)."""
    x = _x(op)
    outs = list(op.outputs)
    seq = e.seq(x)
    shape = step_shape(e, x)
    axis = int(np.asarray(e.const_param(op, "axis")).reshape(()))
    axis = axis + len(dims(x)) if axis < 0 else axis
    step_axis = axis - 1 if seq is not None else axis
    if seq is not None and axis == 0:
        raise LoweringError("split along the sequence axis (the legacy split layer splits C)")
    layout = _channel_step_layout(x, shape, step_axis, "split")
    sizes = {int(dims(o)[axis]) for o in outs} if is_static([dims(o)[axis] for o in outs]) else set()
    if len(sizes) != 1:
        raise LoweringError(f"split into parts of sizes {[str(dims(o)[axis]) for o in outs]} (the legacy split "
                            f"layer makes equal parts)")
    part = (sizes.pop(), layout[1], layout[2])
    parts = e.parts.get(x, [])
    if seq is None and len(parts) == len(outs) and all(lay == part for _, lay in parts):
        for o, (blob, lay) in zip(outs, parts):  # the split undoes a concat: its parts
            e.bind(o, blob)
            e.layouts[o] = lay
        return
    blobs = [e.put(o, part, seq) for o in outs]
    e.layer("split", op.name, [e.get(x, layout)], blobs).nOutputs = len(outs)


def _channel_step_layout(x: Value, shape: list, axis: int, what: str) -> Layout:
    """``channel_layout`` of one step's shape ``shape`` (C at ``axis``)."""
    rank = len(shape)
    if rank >= 3 and axis == rank - 3 and natural_layout(shape) is not None:
        return tuple(shape[-3:])  # type: ignore[return-value]
    if rank >= 1 and axis == rank - 1 and all(d == 1 for d in shape[:-1]):
        return (shape[-1], 1, 1)
    raise LoweringError(f"{what} along axis {axis} of shape {shape_text(shape)}: rank-5 layers work along "
                        f"C only")


def natural(v: Value) -> Layout:
    """The layout of a model feature (the simple rule; flexible H and W allowed, not C);
    LoweringError when it has none. A sequence input's layout is ``natural_step``'s."""
    shape = dims(v)
    layout = natural_layout(shape)
    if layout is None:
        raise LoweringError(f"'{v.name}' of shape {shape_text(shape)} has a batch axis > 1")
    if not is_static(layout[:1]) or (len(shape) < 3 and not is_static(layout)):
        raise LoweringError(f"'{v.name}' of shape {shape_text(shape)}: a flexible channel count "
                            f"(rank-5 features may vary in Seq, H and W only)")
    return layout


# ---------------------------------------------------------------------------------------------
# resizing


@rank5("upsample_nearest_neighbor")
def _upsample(e: Rank5Emitter, op: Op) -> None:
    """``upsample`` (NN mode) by integer factors: every pixel repeated (all nearest rules agree)."""
    x = _x(op)
    layout = chw_layout(x, "upsample input")
    factors = [float(np.asarray(e.const_param(op, k)).reshape(())) for k in ("scale_factor_height",
                                                                             "scale_factor_width")]
    if any(f != int(f) or f < 1 for f in factors):
        raise LoweringError(f"upsampling by {factors} (fractional factors need specification version 5)")
    out_layout = chw_layout(op.outputs[0], "upsample output")
    params = e.layer("upsample", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.scalingFactor.extend(int(f) for f in factors)
    params.mode = nn.UpsampleLayerParams.NN


_SAMPLING = {"STRICT_ALIGN_CORNERS": nn.SamplingMode.STRICT_ALIGN_ENDPOINTS_MODE,
             "ALIGN_CORNERS": nn.SamplingMode.ALIGN_ENDPOINTS_MODE, "DEFAULT": nn.SamplingMode.UPSAMPLE_MODE,
             "OFFSET_CORNERS": nn.SamplingMode.ROI_ALIGN_MODE}


@rank5("resize_bilinear")
def _resize_bilinear(e: Rank5Emitter, op: Op) -> None:
    """``resizeBilinear`` (specification version 3, iOS 12): MIL's sampling modes are the layer's
    SamplingMode methods, but UNALIGN_CORNERS (half-pixel centres), which it does not have."""
    x = _x(op)
    layout = chw_layout(x, "resize_bilinear input")
    mode = str(e.const_param(op, "sampling_mode"))
    out_layout = chw_layout(op.outputs[0], "resize_bilinear output")
    factors = [o // i for o, i in zip(out_layout[1:], layout[1:])]
    if mode == "DEFAULT" and all(f >= 1 and f * i == o for f, i, o in zip(factors, layout[1:], out_layout[1:])):
        # integer factors: upsample BILINEAR in DEFAULT mode samples i * in / out from 0 (version 1)
        params = e.layer("upsample", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
        params.scalingFactor.extend(factors)
        params.mode = nn.UpsampleLayerParams.BILINEAR
        return
    if mode not in _SAMPLING:
        raise LoweringError(f"sampling_mode {mode} (resizeBilinear has no half-pixel-centre mode)")
    params = e.layer("resizeBilinear", op.name, [e.get(x, layout)], [e.put(op.outputs[0], out_layout)])
    params.targetSize.extend(out_layout[1:])
    params.mode.samplingMethod = _SAMPLING[mode]
