"""Spatial layers: convolution (2-D, 3-D, deconvolution), pooling (2-D, 3-D, global), padding,
crop, upsample, resizeBilinear, cropResize, reorganizeData and slidingWindows.

Conventions shared by the 2-D layers: they act on the last three axes ``[C, H, W]`` and every
leading axis is batch (rank 5 ``[Seq, Batch, C, H, W]`` in legacy networks), so the same lowering
serves legacy and ND networks. MIL's conv and pool ops read ``[N, C, *spatial]`` and would take a
rank-5 tensor for 3-D data, so leading axes are folded into one batch axis and restored after.

Padding follows the ValidPadding / SamePadding messages: valid padding amounts become MIL custom
pads, BOTTOM_RIGHT_HEAVY 'same' is MIL's 'same', and TOP_LEFT_HEAVY is spelled out as custom pads
(MIL's 'same_lower' needs iOS16). Deconvolution crops its full result
``(D - 1) * stride + kernel`` by the padding before it and cuts or zero-extends the end to the
output size; the spec's output-shape rules are in ``_transposed``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ....formats.proto import NeuralNetwork_pb2 as nn
from ....ir.core import Value
from ....ir.types import Dim, is_static_dim
from ..context import LayerContext
from ..registry import lowers

Pads = list[tuple[int, int]]  # (before, after) per spatial dim


# ---------------------------------------------------------------------------------------------
# Shared helpers


class _Batched:
    """``x`` viewed as ``[N, C, *spatial]`` for a MIL conv/pool op, and the way back.

    Rank ``n_spatial + 2`` passes through; one less gains a batch axis. More leading axes become
    one: size-1 axes are squeezed (and expanded after) when at most one leading axis is not 1,
    which keeps every dim's type; otherwise they are folded by a reshape (static sizes where
    known, otherwise computed with shape ops).
    """

    def __init__(self, ctx: LayerContext, x: Value, n_spatial: int) -> None:
        self.ctx, self.source = ctx, x
        self.shape = ctx.shape(x)
        self.core = n_spatial + 1  # C and the spatial axes
        rank = len(self.shape)
        if rank < self.core:
            raise ctx.fail(f"needs an input of rank >= {self.core}, got shape {list(self.shape)}")
        self.lead = tuple(self.shape[:rank - self.core])
        ones = [i for i, d in enumerate(self.lead) if is_static_dim(d) and int(d) == 1]
        self.squeezed: list[int] | None = None  # axes squeezed away (restored by expand_dims)
        b, n = ctx.b, ctx.name
        if len(self.lead) == 1:
            self.x = x
        elif not self.lead:
            self.squeezed = [0]
            self.x = b.expand_dims(x=x, axes=[0], name=f"{n}_batched")
        elif len(self.lead) - len(ones) <= 1:
            self.squeezed = ones[:-1] if len(ones) == len(self.lead) else ones
            self.x = b.squeeze(x=x, axes=self.squeezed, name=f"{n}_batched")
        else:
            batch = int(np.prod(self.lead)) if all(is_static_dim(d) for d in self.lead) else None
            target = _literal_shape([batch, *self.shape[rank - self.core:]])
            if target is None:
                target = b.concat(values=[np.array([-1], np.int32), self._tail(x, rank - self.core, rank)], axis=0,
                                  name=f"{n}_batched_shape")
            self.x = b.reshape(x=x, shape=target, name=f"{n}_batched")

    @property
    def name(self) -> str:
        """Name of the op producing the result: the layer's own when nothing follows it."""
        return self.ctx.name if self.x is self.source else f"{self.ctx.name}_core"

    def _tail(self, v: Value, begin: int, end: int) -> Value:
        shape = self.ctx.b.shape(x=v, name=f"{self.ctx.name}_{v.name}_shape")
        return self.ctx.b.slice_by_index(x=shape, begin=[begin], end=[end], name=f"{shape.name}_{begin}_{end}")

    def restore(self, y: Value) -> Value:
        """``y`` (``[N, C', *spatial']``) with the input's leading axes back."""
        b, n = self.ctx.b, self.ctx.name
        if self.x is self.source:
            return y
        if self.squeezed is not None:
            if self.squeezed == [0] and not self.lead:
                return b.squeeze(x=y, axes=[0], name=n)
            return b.expand_dims(x=y, axes=self.squeezed, name=n)
        target = _literal_shape([*self.lead, *self.ctx.shape(y)[1:]])
        if target is None:
            rank = len(self.shape)
            target = b.concat(values=[self._tail(self.source, 0, rank - self.core), self._tail(y, 1, self.core + 1)],
                              axis=0, name=f"{n}_shape")
        return b.reshape(x=y, shape=target, name=n)


def _literal_shape(dims: Sequence[Dim | None]) -> list[int] | None:
    """A reshape target for ``dims`` (None = unknown): static sizes, -1 for at most one other."""
    target = [int(d) if d is not None and is_static_dim(d) else -1 for d in dims]
    return target if target.count(-1) <= 1 else None


def _ints(ctx: LayerContext, values: Sequence[int], n: int, default: Sequence[int], field: str,
          *, minimum: int = 1) -> list[int]:
    """A repeated size field: ``default`` when empty, else exactly ``n`` values >= ``minimum``."""
    if not len(values):
        return list(default)
    if len(values) != n:
        raise ctx.fail(f"{field} must hold {n} values, has {len(values)}", field=field)
    out = [int(v) for v in values]
    if any(v < minimum for v in out):
        raise ctx.fail(f"{field} must be >= {minimum}, got {out}", field=field)
    return out


def _border(ctx: LayerContext, amounts: nn.BorderAmounts, field: str) -> Pads:
    """BorderAmounts as [(top, bottom), (left, right)]; unset means no border."""
    edges = amounts.borderAmounts
    if not edges:
        return [(0, 0), (0, 0)]
    if len(edges) != 2:
        raise ctx.fail(f"{field} must hold 2 edge sizes ([H, W]), has {len(edges)}", field=field)
    return [(int(e.startEdgeSize), int(e.endEdgeSize)) for e in edges]


def _split(total: int, before_heavy: bool) -> tuple[int, int]:
    """A 'same' padding total split in two; the odd unit goes after unless ``before_heavy``."""
    small = total // 2
    return (total - small, small) if before_heavy else (small, total - small)


def _same_pads(ctx: LayerContext, dims: Sequence[Dim], kernel: Sequence[int], strides: Sequence[int],
               before_heavy: bool) -> Pads:
    """SamePadding amounts: total ``max(0, (ceil(D / s) - 1) * s + K - D)`` per dim, split."""
    pads = []
    for d, k, s in zip(dims, kernel, strides):
        if is_static_dim(d):
            n = int(d)
            total = max(0, (-(-n // s) - 1) * s + k - n)
        elif s == 1:
            total = k - 1  # independent of the size
        else:
            raise ctx.unsupported("TOP_LEFT_HEAVY same padding of a flexible spatial dim with stride > 1: the "
                                  "split depends on the run-time size and iOS15 has no 'same_lower'")
        pads.append(_split(total, before_heavy))
    return pads


def _pad_args(pads: Pads) -> dict[str, object]:
    """MIL pad_type / pad for explicit amounts."""
    if not any(b or a for b, a in pads):
        return {"pad_type": "valid"}
    return {"pad_type": "custom", "pad": [v for pair in pads for v in pair]}


def _window_padding(ctx: LayerContext, kind: str | None, params: nn.ValidPadding | nn.SamePadding | None,
                    dims: Sequence[Dim], kernel: Sequence[int], strides: Sequence[int]) -> dict[str, object]:
    """pad_type / pad of a 2-D conv or pool for its ValidPadding or SamePadding message."""
    if kind == "same":
        assert isinstance(params, nn.SamePadding)
        if params.asymmetryMode == nn.SamePadding.BOTTOM_RIGHT_HEAVY:
            return {"pad_type": "same"}
        if params.asymmetryMode != nn.SamePadding.TOP_LEFT_HEAVY:
            raise ctx.fail(f"unknown same-padding asymmetry mode {params.asymmetryMode}", field="asymmetryMode")
        return _pad_args(_same_pads(ctx, dims, kernel, strides, before_heavy=True))
    if kind == "valid":
        assert isinstance(params, nn.ValidPadding)
        return _pad_args(_border(ctx, params.paddingAmounts, "paddingAmounts"))
    return {"pad_type": "valid"}


def _bias(ctx: LayerContext, params: nn.ConvolutionLayerParams | nn.Convolution3DLayerParams,
          c_out: int) -> Value | None:
    return ctx.weight(params.bias, (c_out,), "bias") if params.hasBias else None


def _check_channels(ctx: LayerContext, x: Value, expected: int, what: str) -> None:
    c = ctx.shape(x)[1]
    if is_static_dim(c) and int(c) != expected:
        raise ctx.fail(f"the input has {c} channels, {what} says {expected}")


def _transposed(ctx: LayerContext, x: Value, weight: Value, bias: Value | None, *, groups: int,
                kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], amounts: Pads | None,
                before_heavy: bool, output_shape: Sequence[int] | None, name: str) -> Value:
    """Deconvolution of ``[N, C, *D]``: the full result ``(D - 1) * s + K`` cropped to the output.

    Output size: ``output_shape`` when given (which overrides the padding type's size rule), else
    ``full - before - after`` for explicit ``amounts`` (ValidPadding, 3-D custom/valid) or
    ``D * s`` for 'same' (``amounts`` None). The crop at the start is the explicit before-amount,
    or for 'same' the before share of ``max(full - out, 0)``; the end is cut, or zero-extended
    (bias included) when the output is longer than what remains. coremltools writes
    ``outputShape`` together with the padding amounts of the crop, so the amounts still place the
    output when ``outputShape`` is set.
    """
    before, after = [], []
    for i, d in enumerate(ctx.shape(x)[2:]):
        k, s = (kernel[i] - 1) * dilations[i] + 1, strides[i]
        if output_shape is None and amounts is not None:
            before.append(amounts[i][0])
            after.append(amounts[i][1])
            continue
        if output_shape is None:
            excess = k - s  # full - D * s, whatever D is
        elif is_static_dim(d):
            excess = (int(d) - 1) * s + k - int(output_shape[i])
        else:
            raise ctx.unsupported("deconvolution outputShape with a flexible spatial input size: the crop "
                                  "depends on the run-time size")
        first = amounts[i][0] if amounts is not None else _split(max(excess, 0), before_heavy)[0]
        before.append(first)
        after.append(excess - first)
    extend = [max(-a, 0) for a in after]
    y = ctx.b.conv_transpose(x=x, weight=weight, bias=None if any(extend) else bias, strides=list(strides),
                             dilations=list(dilations), groups=groups, pad_type="custom",
                             pad=[v for b, a in zip(before, after) for v in (b, max(a, 0))],
                             name=f"{name}_full" if any(extend) else name)
    if not any(extend):
        return y
    y = ctx.b.pad(x=y, pad=[v for e in extend for v in (0, e)], mode="constant", constant_val=np.float32(0),
                  name=f"{name}_extended" if bias is not None else name)
    if bias is None:
        return y
    spatial_ones = [1] * len(kernel)
    return ctx.b.add(x=y, y=ctx.b.reshape(x=bias, shape=[-1, *spatial_ones], name=f"{name}_bias_bcast"), name=name)


# ---------------------------------------------------------------------------------------------
# Convolution


@lowers("convolution")
def convolution(ctx: LayerContext) -> Value:
    """2-D convolution / deconvolution, grouped, strided, dilated; weights from the layer or (spec 4+,
    convolution only) from a second input ``[C_out, C_in / groups, kH, kW]``."""
    p: nn.ConvolutionLayerParams = ctx.params
    ctx.expect_inputs(1, 2)
    groups = int(p.nGroups) or 1
    kernel = _ints(ctx, p.kernelSize, 2, (3, 3), "kernelSize")
    strides = _ints(ctx, p.stride, 2, (1, 1), "stride")
    dilations = _ints(ctx, p.dilationFactor, 2, (1, 1), "dilationFactor")
    c_out, k_c = int(p.outputChannels), int(p.kernelChannels)
    if c_out < 1 or k_c < 1 or c_out % groups:
        raise ctx.fail(f"outputChannels ({c_out}) and kernelChannels ({k_c}) must be positive and outputChannels "
                       f"divisible by nGroups ({groups})")
    bx = _Batched(ctx, ctx.input(0), 2)
    bias = _bias(ctx, p, c_out)
    pad_kind = p.WhichOneof("ConvolutionPaddingType")
    pad_params = getattr(p, pad_kind) if pad_kind else None
    if p.isDeconvolution:
        if len(ctx.inputs) == 2:
            raise ctx.fail("a second (weight) input is only allowed when isDeconvolution is false")
        _check_channels(ctx, bx.x, k_c, "kernelChannels (= input channels of a deconvolution)")
        if dilations != [1, 1]:
            ctx.note(f"layer '{ctx.name}': dilationFactor {dilations} of a deconvolution is ignored, as the spec says")
        output_shape = _ints(ctx, p.outputShape, 2, (), "outputShape") or None
        weight = ctx.weight(p.weights, (k_c, c_out // groups, *kernel), "weights", axis=1)
        same = pad_kind == "same"
        amounts = None if same else _border(ctx, p.valid.paddingAmounts, "paddingAmounts")
        before_heavy = same and p.same.asymmetryMode == nn.SamePadding.TOP_LEFT_HEAVY
        y = _transposed(ctx, bx.x, weight, bias, groups=groups, kernel=kernel, strides=strides, dilations=[1, 1],
                        amounts=amounts, before_heavy=before_heavy, output_shape=output_shape, name=bx.name)
        return bx.restore(y)
    _check_channels(ctx, bx.x, k_c * groups, f"kernelChannels * nGroups ({k_c} * {groups})")
    if len(ctx.inputs) == 2:
        weight = _weight_input(ctx, (c_out, k_c, *kernel))
    else:
        weight = ctx.weight(p.weights, (c_out, k_c, *kernel), "weights")
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    pads = _window_padding(ctx, pad_kind, pad_params, ctx.shape(bx.x)[2:], effective, strides)
    y = ctx.b.conv(x=bx.x, weight=weight, bias=bias, strides=strides, dilations=dilations, groups=groups,
                   name=bx.name, **pads)
    return bx.restore(y)


def _weight_input(ctx: LayerContext, expected: tuple[int, ...]) -> Value:
    """The run-time weight input: rank 4 (a rank-5 blob with leading size 1 is squeezed)."""
    w = ctx.input(1)
    shape = ctx.shape(w)
    if len(shape) == 5 and is_static_dim(shape[0]) and int(shape[0]) == 1:
        w = ctx.b.squeeze(x=w, axes=[0], name=f"{ctx.name}_weights")
        shape = shape[1:]
    if len(shape) != 4 or any(is_static_dim(d) and int(d) != e for d, e in zip(shape, expected)):
        raise ctx.fail(f"the weight input must have shape {list(expected)} (from the layer's parameters), "
                       f"got {list(shape)}")
    return w


@lowers("convolution3d")
def convolution3d(ctx: LayerContext) -> Value:
    """3-D convolution / deconvolution of ``[N, C, D, H, W]`` with CUSTOM, VALID or SAME padding.

    Deconvolution weights are stored ``[C_in, C_out / groups, kD, kH, kW]``, like the 2-D layer's
    (the layout coremltools' builder writes; the field's own comment names the other order).
    """
    p: nn.Convolution3DLayerParams = ctx.params
    groups = int(p.nGroups) or 1
    kernel = _ints(ctx, [p.kernelDepth, p.kernelHeight, p.kernelWidth], 3, (), "kernel sizes")
    strides = _ints(ctx, [p.strideDepth, p.strideHeight, p.strideWidth], 3, (), "strides")
    dilations = _ints(ctx, [p.dilationDepth, p.dilationHeight, p.dilationWidth], 3, (), "dilations")
    c_in, c_out = int(p.inputChannels), int(p.outputChannels)
    if c_in < 1 or c_out < 1 or c_in % groups or c_out % groups:
        raise ctx.fail(f"inputChannels ({c_in}) and outputChannels ({c_out}) must be positive multiples of "
                       f"nGroups ({groups})")
    bx = _Batched(ctx, ctx.input(), 3)
    _check_channels(ctx, bx.x, c_in, "inputChannels")
    bias = _bias(ctx, p, c_out)
    amounts = _pads3d(ctx, p.paddingType, p)
    if p.isDeconvolution:
        output_shape = _ints(ctx, p.outputShape, 3, (), "outputShape") or None
        weight = ctx.weight(p.weights, (c_in, c_out // groups, *kernel), "weights", axis=1)
        y = _transposed(ctx, bx.x, weight, bias, groups=groups, kernel=kernel, strides=strides,
                        dilations=dilations, amounts=amounts, before_heavy=False, output_shape=output_shape,
                        name=bx.name)
        return bx.restore(y)
    weight = ctx.weight(p.weights, (c_out, c_in // groups, *kernel), "weights")
    pads = {"pad_type": "same"} if amounts is None else _pad_args(amounts)
    y = ctx.b.conv(x=bx.x, weight=weight, bias=bias, strides=strides, dilations=dilations, groups=groups,
                   name=bx.name, **pads)
    return bx.restore(y)


def _pads3d(ctx: LayerContext, kind: int, p: nn.Convolution3DLayerParams | nn.Pooling3DLayerParams) -> Pads | None:
    """Explicit (front, back), (top, bottom), (left, right) amounts, or None for SAME."""
    enum = type(p)
    if kind == enum.SAME:
        return None
    if kind == enum.VALID:
        return [(0, 0)] * 3
    if kind != enum.CUSTOM:
        raise ctx.fail(f"unknown paddingType {kind}", field="paddingType")
    pads = [(p.customPaddingFront, p.customPaddingBack), (p.customPaddingTop, p.customPaddingBottom),
            (p.customPaddingLeft, p.customPaddingRight)]
    if any(v < 0 for pair in pads for v in pair):
        raise ctx.fail(f"custom padding must be non-negative, got {pads}")
    return [(int(b), int(a)) for b, a in pads]


# ---------------------------------------------------------------------------------------------
# Pooling


_POOL_OPS = {nn.PoolingLayerParams.MAX: "max_pool", nn.PoolingLayerParams.AVERAGE: "avg_pool",
             nn.PoolingLayerParams.L2: "l2_pool"}
_GLOBAL_OPS = {nn.PoolingLayerParams.MAX: "reduce_max", nn.PoolingLayerParams.AVERAGE: "reduce_mean",
               nn.PoolingLayerParams.L2: "reduce_l2_norm"}


@lowers("pooling")
def pooling(ctx: LayerContext) -> Value:
    """MAX / AVERAGE / L2 pooling over H and W; global pooling reduces them to 1.

    includeLastPixel (ValidCompletePadding) is ceil-mode pooling with symmetric padding. Its
    spec formula drops a last window that starts past ``H_in + pad`` whenever *either* axis is
    padded, where MIL's ceil_mode checks each axis's own padding: an unpadded axis of a padded
    layer gets that window cut off explicitly. Averages count explicit padding (unless
    avgPoolExcludePadding) but never the ceil-mode overhang, as Caffe, whose formula this is.
    """
    p: nn.PoolingLayerParams = ctx.params
    if p.type not in _POOL_OPS:
        raise ctx.fail(f"unknown pooling type {p.type}", field="type")
    x = ctx.input()
    b = ctx.b
    if p.globalPooling:
        if ctx.rank(x) < 2:
            raise ctx.fail(f"needs an input of rank >= 2, got shape {list(ctx.shape(x))}")
        return getattr(b, _GLOBAL_OPS[p.type])(x=x, axes=[-2, -1], keep_dims=True, name=ctx.name)
    kernel = _ints(ctx, p.kernelSize, 2, (3, 3), "kernelSize")
    strides = _ints(ctx, p.stride, 2, (1, 1), "stride")
    bx = _Batched(ctx, x, 2)
    dims = ctx.shape(bx.x)[2:]
    kind = p.WhichOneof("PoolingPaddingType")
    args: dict[str, object]
    cut = [0, 0]
    if kind == "includeLastPixel":
        amounts = _ints(ctx, p.includeLastPixel.paddingAmounts, 2, (0, 0), "paddingAmounts", minimum=0)
        args = {**_pad_args([(a, a) for a in amounts]), "ceil_mode": True}
        if any(amounts):
            cut = _dropped_last_windows(ctx, dims, kernel, strides, amounts)
    else:
        args = _window_padding(ctx, kind, getattr(p, kind) if kind else None, dims, kernel, strides)
    if p.type == nn.PoolingLayerParams.AVERAGE:
        args["exclude_padding_from_average"] = bool(p.avgPoolExcludePadding)
    y = getattr(b, _POOL_OPS[p.type])(x=bx.x, kernel_sizes=kernel, strides=strides,
                                      name=f"{bx.name}_ceil" if any(cut) else bx.name, **args)
    if any(cut):
        y = b.crop(x=y, crop_height=[0, cut[0]], crop_width=[0, cut[1]], name=bx.name)
    return bx.restore(y)


def _dropped_last_windows(ctx: LayerContext, dims: Sequence[Dim], kernel: Sequence[int], strides: Sequence[int],
                          amounts: Sequence[int]) -> list[int]:
    """Per axis, 1 where the spec drops a last window that MIL's ceil_mode keeps: on an unpadded axis
    of a padded layer, a window starting at or after the input's end (so stride > kernel)."""
    cut = []
    for d, k, s, pad in zip(dims, kernel, strides, amounts):
        if pad or s <= k:
            cut.append(0)
            continue
        if not is_static_dim(d):
            raise ctx.unsupported("includeLastPixel pooling with one axis unpadded, stride > kernel and a flexible "
                                  "size: whether the last window is dropped depends on the run-time size")
        n = int(d)
        out = -(-(n - k) // s) + 1
        cut.append(1 if (out - 1) * s >= n else 0)
    return cut


@lowers("pooling3d")
def pooling3d(ctx: LayerContext) -> Value:
    """MAX / AVERAGE pooling of ``[N, C, D, H, W]`` with CUSTOM, VALID or SAME padding.

    SAME gives ``ceil(D / stride)`` outputs, the extra padding unit at the back/bottom/right, as for
    3-D convolution (the message's comment says "the same spatial dimensions as the input", which
    only holds for stride 1).
    """
    p: nn.Pooling3DLayerParams = ctx.params
    ops = {nn.Pooling3DLayerParams.MAX: "max_pool", nn.Pooling3DLayerParams.AVERAGE: "avg_pool"}
    if p.type not in ops:
        raise ctx.fail(f"unknown pooling type {p.type}", field="type")
    kernel = _ints(ctx, [p.kernelDepth, p.kernelHeight, p.kernelWidth], 3, (), "kernel sizes")
    strides = _ints(ctx, [p.strideDepth, p.strideHeight, p.strideWidth], 3, (), "strides")
    bx = _Batched(ctx, ctx.input(), 3)
    amounts = _pads3d(ctx, p.paddingType, p)
    args: dict[str, object] = {"pad_type": "same"} if amounts is None else _pad_args(amounts)
    if p.type == nn.Pooling3DLayerParams.AVERAGE:
        args["exclude_padding_from_average"] = bool(p.countExcludePadding)
    y = getattr(ctx.b, ops[p.type])(x=bx.x, kernel_sizes=kernel, strides=strides, name=bx.name, **args)
    return bx.restore(y)


@lowers("globalPooling3d")
def global_pooling3d(ctx: LayerContext) -> Value:
    """MAX / AVERAGE over the last three axes (D, H, W), kept as size 1."""
    p: nn.GlobalPooling3DLayerParams = ctx.params
    ops = {nn.GlobalPooling3DLayerParams.MAX: "reduce_max", nn.GlobalPooling3DLayerParams.AVERAGE: "reduce_mean"}
    if p.type not in ops:
        raise ctx.fail(f"unknown pooling type {p.type}", field="type")
    x = ctx.input()
    if ctx.rank(x) < 3:
        raise ctx.fail(f"needs an input of rank >= 3, got shape {list(ctx.shape(x))}")
    return getattr(ctx.b, ops[p.type])(x=x, axes=[-3, -2, -1], keep_dims=True, name=ctx.name)


# ---------------------------------------------------------------------------------------------
# Padding and cropping


_PAD_MODES = {"constant": "constant", "reflection": "reflect", "replication": "replicate"}


@lowers("padding")
def padding(ctx: LayerContext) -> Value:
    """Pad H and W (the last two axes) with a constant, by reflection (edge not repeated) or by
    replication of the edge."""
    p: nn.PaddingLayerParams = ctx.params
    kind = p.WhichOneof("PaddingType")
    if kind is None:
        raise ctx.fail("no padding type (constant, reflection or replication) is set", field="PaddingType")
    x = ctx.input()
    if ctx.rank(x) < 2:
        raise ctx.fail(f"needs an input of rank >= 2, got shape {list(ctx.shape(x))}")
    pads = _border(ctx, p.paddingAmounts, "paddingAmounts")
    value = np.float32(p.constant.value if kind == "constant" else 0.0)
    return ctx.b.pad(x=x, pad=[v for pair in pads for v in pair], mode=_PAD_MODES[kind], constant_val=value,
                     name=ctx.name)


@lowers("crop")
def crop(ctx: LayerContext) -> Value:
    """Crop H and W: by cropAmounts (one input), or to the second input's H and W starting at
    ``offset`` (two inputs)."""
    p: nn.CropLayerParams = ctx.params
    ctx.expect_inputs(1, 2)
    x = ctx.input(0)
    shape = ctx.shape(x)
    if len(shape) < 3:
        raise ctx.fail(f"needs inputs of rank >= 3, got shape {list(shape)}")
    if len(ctx.inputs) == 1:
        (top, bottom), (left, right) = _border(ctx, p.cropAmounts, "cropAmounts")
        return ctx.b.crop(x=x, crop_height=[top, bottom], crop_width=[left, right], name=ctx.name)
    ref = ctx.shape(ctx.input(1))
    if len(ref) != len(shape):
        raise ctx.fail(f"both inputs must have the same rank, got shapes {list(shape)} and {list(ref)}")
    oh, ow = _ints(ctx, p.offset, 2, (0, 0), "offset", minimum=0)
    (h_in, w_in), (h_out, w_out) = shape[-2:], ref[-2:]
    if all(is_static_dim(d) for d in (h_in, w_in, h_out, w_out)):
        bottom, right = int(h_in) - oh - int(h_out), int(w_in) - ow - int(w_out)
        if bottom < 0 or right < 0:
            raise ctx.fail(f"a [{h_out}, {w_out}] window at offset [{oh}, {ow}] does not fit the input's "
                           f"[{h_in}, {w_in}]", field="offset")
        return ctx.b.crop(x=x, crop_height=[oh, bottom], crop_width=[ow, right], name=ctx.name)
    b, n, r = ctx.b, ctx.name, len(shape)
    ref_hw = b.slice_by_index(x=b.shape(x=ctx.input(1), name=f"{n}_ref_shape"), begin=[r - 2], end=[r],
                              name=f"{n}_ref_hw")
    size = b.concat(values=[np.full(r - 2, -1, np.int32), ref_hw], axis=0, name=f"{n}_size")
    return b.slice_by_size(x=x, begin=[0] * (r - 2) + [oh, ow], size=size, name=n)


# ---------------------------------------------------------------------------------------------
# Resampling


@lowers("upsample")
def upsample(ctx: LayerContext) -> Value:
    """Scale H and W up by integer (scalingFactor) or fractional (fractionalScalingFactor) factors;
    output sizes ``floor(size * factor)``.

    NN repeats each pixel. BILINEAR samples ``i * spacing`` as LinearUpsampleMode says:
    ALIGN_CORNERS_TRUE spacing ``(in - 1) / (out - 1)``; ALIGN_CORNERS_FALSE ``in / out`` from
    half-pixel centres; DEFAULT ``in / out`` from 0 (which only resize_bilinear expresses in
    iOS15, so it needs static H and W).
    """
    p: nn.UpsampleLayerParams = ctx.params
    if len(p.scalingFactor) and len(p.fractionalScalingFactor):
        raise ctx.fail("scalingFactor and fractionalScalingFactor are mutually exclusive")
    x = ctx.input()
    if ctx.rank(x) < 3:
        raise ctx.fail(f"needs an input of rank >= 3, got shape {list(ctx.shape(x))}")
    b, n = ctx.b, ctx.name
    fractional = bool(len(p.fractionalScalingFactor))
    if fractional:
        if len(p.fractionalScalingFactor) != 2 or min(p.fractionalScalingFactor) <= 0:
            raise ctx.fail(f"fractionalScalingFactor must hold 2 positive values, got "
                           f"{list(p.fractionalScalingFactor)}", field="fractionalScalingFactor")
        scales: list = [np.float32(s) for s in p.fractionalScalingFactor]
    else:
        scales = _ints(ctx, p.scalingFactor, 2, (1, 1), "scalingFactor")
    if p.mode == nn.UpsampleLayerParams.NN:
        if fractional:
            raise ctx.unsupported("nearest-neighbour upsampling by fractional factors has no defined sampling rule "
                                  "(Core ML allows fractional factors only with BILINEAR ALIGN_CORNERS_*)")
        return b.upsample_nearest_neighbor(x=x, scale_factor_height=scales[0], scale_factor_width=scales[1], name=n)
    if p.mode != nn.UpsampleLayerParams.BILINEAR:
        raise ctx.fail(f"unknown interpolation mode {p.mode}", field="mode")
    mode = p.linearUpsampleMode
    if mode in (nn.UpsampleLayerParams.ALIGN_CORNERS_TRUE, nn.UpsampleLayerParams.ALIGN_CORNERS_FALSE):
        return b.upsample_bilinear(x=x, scale_factor_height=scales[0], scale_factor_width=scales[1],
                                   align_corners=mode == nn.UpsampleLayerParams.ALIGN_CORNERS_TRUE, name=n)
    if mode != nn.UpsampleLayerParams.DEFAULT:
        raise ctx.fail(f"unknown linearUpsampleMode {mode}", field="linearUpsampleMode")
    h, w = ctx.shape(x)[-2:]
    if not (is_static_dim(h) and is_static_dim(w)):
        raise ctx.unsupported("BILINEAR upsampling in DEFAULT mode of a flexible-size input: iOS15 expresses "
                              "its sampling only with a fixed target size")
    size = [int(np.floor(int(d) * np.float32(s))) for d, s in zip((h, w), scales)]
    return b.resize_bilinear(x=x, target_size_height=size[0], target_size_width=size[1], sampling_mode="DEFAULT",
                             name=n)


# SamplingMode.Method -> MIL sampling_mode (same grids: see the ops' docstrings)
_SAMPLING = {nn.SamplingMode.STRICT_ALIGN_ENDPOINTS_MODE: "STRICT_ALIGN_CORNERS",
             nn.SamplingMode.ALIGN_ENDPOINTS_MODE: "ALIGN_CORNERS",
             nn.SamplingMode.UPSAMPLE_MODE: "DEFAULT",
             nn.SamplingMode.ROI_ALIGN_MODE: "OFFSET_CORNERS"}


def _sampling(ctx: LayerContext, mode: nn.SamplingMode) -> str:
    if mode.samplingMethod not in _SAMPLING:
        raise ctx.fail(f"unknown sampling method {mode.samplingMethod}", field="mode")
    return _SAMPLING[mode.samplingMethod]


@lowers("resizeBilinear")
def resize_bilinear(ctx: LayerContext) -> Value:
    """Bilinear resize of H and W to targetSize on the SamplingMode grid."""
    p: nn.ResizeBilinearLayerParams = ctx.params
    x = ctx.input()
    if ctx.rank(x) < 3:
        raise ctx.fail(f"needs an input of rank >= 3, got shape {list(ctx.shape(x))}")
    h, w = _ints(ctx, p.targetSize, 2, (1, 1), "targetSize")
    return ctx.b.resize_bilinear(x=x, target_size_height=h, target_size_width=w,
                                 sampling_mode=_sampling(ctx, p.mode), name=ctx.name)


_BOX_MODES = {nn.BoxCoordinatesMode.CORNERS_HEIGHT_FIRST: "CORNERS_HEIGHT_FIRST",
              nn.BoxCoordinatesMode.CORNERS_WIDTH_FIRST: "CORNERS_WIDTH_FIRST",
              nn.BoxCoordinatesMode.CENTER_SIZE_HEIGHT_FIRST: "CENTER_SIZE_HEIGHT_FIRST",
              nn.BoxCoordinatesMode.CENTER_SIZE_WIDTH_FIRST: "CENTER_SIZE_WIDTH_FIRST"}


@lowers("cropResize")
def crop_resize(ctx: LayerContext) -> Value:
    """RoIs of ``[1, B, C, H, W]`` resized bilinearly to targetSize: ``[N, B, C, h, w]`` for
    ``[N, 1, 4, 1, 1]`` boxes (each on every image), ``[N, 1, C, h, w]`` for ``[N, 1, 5, 1, 1]``
    (image index first). boxIndicesMode is the coordinate convention of the boxes;
    spatialScale multiplies them as given (0 included: the spec gives it no default)."""
    p: nn.CropResizeLayerParams = ctx.params
    ctx.expect_inputs(2)
    x, roi = ctx.input(0), ctx.input(1)
    shape = ctx.shape(x)
    if len(shape) == 5:
        if not (is_static_dim(shape[0]) and int(shape[0]) == 1):
            raise ctx.fail(f"the feature map must have shape [1, B, C, H, W], got {list(shape)}")
        x = ctx.b.squeeze(x=x, axes=[0], name=f"{ctx.name}_images")
    elif len(shape) != 4:
        raise ctx.fail(f"the feature map must have shape [1, B, C, H, W], got {list(shape)}")
    if ctx.rank(roi) != 5:
        raise ctx.fail(f"the boxes must have shape [N, 1, 4 or 5, 1, 1], got {list(ctx.shape(roi))}")
    if p.boxIndicesMode.boxMode not in _BOX_MODES:
        raise ctx.fail(f"unknown box coordinates mode {p.boxIndicesMode.boxMode}", field="boxIndicesMode")
    h, w = _ints(ctx, p.targetSize, 2, (1, 1), "targetSize")
    return ctx.b.crop_resize(x=x, roi=roi, target_height=h, target_width=w,
                             normalized_coordinates=bool(p.normalizedCoordinates),
                             spatial_scale=np.float32(p.spatialScale),
                             box_coordinate_mode=_BOX_MODES[p.boxIndicesMode.boxMode],
                             sampling_mode=_sampling(ctx, p.mode), name=ctx.name)


# ---------------------------------------------------------------------------------------------
# Rearrangement


_REORGANIZE = {nn.ReorganizeDataLayerParams.SPACE_TO_DEPTH: ("space_to_depth", "block_size"),
               nn.ReorganizeDataLayerParams.DEPTH_TO_SPACE: ("depth_to_space", "block_size"),
               nn.ReorganizeDataLayerParams.PIXEL_SHUFFLE: ("pixel_shuffle", "upscale_factor")}


@lowers("reorganizeData")
def reorganize_data(ctx: LayerContext) -> Value:
    """Blocks of H x W moved to channels and back. Channel order, as the spec's example shows:
    DEPTH_TO_SPACE (and its inverse SPACE_TO_DEPTH) takes the block offset as the outer part of
    the channel index (``c_in = (bh * block + bw) * C_out + c``), PIXEL_SHUFFLE the inner part
    (``c_in = c * block^2 + bh * block + bw``)."""
    p: nn.ReorganizeDataLayerParams = ctx.params
    if p.mode not in _REORGANIZE:
        raise ctx.fail(f"unknown mode {p.mode}", field="mode")
    if p.blockSize < 1:
        raise ctx.fail("blockSize must be positive", field="blockSize")
    op, factor = _REORGANIZE[p.mode]
    bx = _Batched(ctx, ctx.input(), 2)
    y = getattr(ctx.b, op)(x=bx.x, name=bx.name, **{factor: int(p.blockSize)})
    return bx.restore(y)


@lowers("slidingWindows")
def sliding_windows(ctx: LayerContext) -> Value:
    """Windows of windowSize elements every step along axis: ``[.., L, ..]`` -> ``[.., M, W, ..]``,
    ``M = (L - W) / step + 1``."""
    p: nn.SlidingWindowsLayerParams = ctx.params
    x = ctx.input()
    rank = ctx.rank(x)
    if not -rank <= p.axis < rank:
        raise ctx.fail(f"axis {p.axis} is out of range for rank {rank}", field="axis")
    if p.windowSize < 1 or p.step < 1:
        raise ctx.fail(f"windowSize ({p.windowSize}) and step ({p.step}) must be positive")
    return ctx.b.sliding_windows(x=x, axis=int(p.axis), size=int(p.windowSize), stride=int(p.step), name=ctx.name)
