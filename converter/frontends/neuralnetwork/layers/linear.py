"""Dense layers: innerProduct, batchedMatmul, embedding, embeddingND.

Weight layout: innerProduct stores [C_out, C_in] (its field comment; the message's header says
"(C_in, C_out)", which no producer or reader follows); the one-input batchedMatmul stores its (X1, X2)
matrix transposed, [X2, X1] (coremltools' builder writes ``W.T``, and Core ML's validator counts
X2 quantization channels), so both become ``linear(x, weight=[out, in])``. embedding and
embeddingND store [outputChannels, inputDim]: the lookup gathers rows of the transposed table.

``int8DynamicQuantize``: Core ML quantizes the activations to int8 at run time with a scheme the
spec does not define, then multiplies with the int8 weights. The weights are dequantized exactly
here and the product is computed in float, so results differ from Core ML's by the activation
quantization noise only (coremltools' own device tests accept that as a 40 dB SNR).
"""

from __future__ import annotations

from ....formats.proto import NeuralNetwork_pb2
from ....ir.core import INDICES_IN_RANGE, Value
from ....ir.types import is_static_dim, num_elements
from ..context import LayerContext
from ..registry import lowers
from .shape import reshape_target


def _check_int8_dynamic(ctx: LayerContext, wp: NeuralNetwork_pb2.WeightParams) -> None:
    """The weights ``int8DynamicQuantize`` needs: int8RawValue codes with linear quantization."""
    q = wp.quantization if wp.HasField("quantization") else None
    if (ctx.weight_encoding(wp, "weights") != "int8RawValue" or q is None
            or q.WhichOneof("QuantizationType") != "linearQuantization"):
        raise ctx.fail("int8DynamicQuantize needs int8RawValue weights with linear quantization parameters",
                       field="weights")
    ctx.note(f"layer '{ctx.name}': int8DynamicQuantize: weights are dequantized exactly; Core ML's run-time int8 "
             f"quantization of the activations is not reproduced (its results differ by that quantization noise)")


def _dense_params(ctx: LayerContext, n_in: int, n_out: int) -> tuple[Value, Value | None]:
    """Weight [n_out, n_in] and optional bias [n_out] of innerProduct / one-input batchedMatmul."""
    p = ctx.params
    if n_in <= 0 or n_out <= 0:
        raise ctx.fail(f"weight matrix of {n_in} inputs x {n_out} outputs is empty")
    if p.int8DynamicQuantize:
        _check_int8_dynamic(ctx, p.weights)
    weight = ctx.weight(p.weights, (n_out, n_in), "weights")
    bias = ctx.weight(p.bias, (n_out,), "bias") if p.hasBias else None
    return weight, bias


@lowers("innerProduct")
def inner_product(ctx: LayerContext) -> Value:
    """Rank 1-3: product over the last axis. Rank 4 (x1, x2, x3, x4) -> (x1, C_out, 1, 1) and rank 5
    (x1, x2, x3, x4, x5) -> (x1, x2, C_out, 1, 1): the last three axes are flattened into C_in."""
    ctx.expect_inputs(1)
    p = ctx.params
    x = ctx.input()
    shape = ctx.shape(x)
    rank = len(shape)
    c_in, c_out = int(p.inputChannels), int(p.outputChannels)
    if not 1 <= rank <= 5:
        raise ctx.fail(f"input must have rank 1 to 5, has rank {rank}")
    weight, bias = _dense_params(ctx, c_in, c_out)
    b, n = ctx.b, ctx.name
    inner = shape[-1:] if rank <= 3 else shape[rank - 3:]
    size = num_elements(inner)
    if size is not None and size != c_in:
        raise ctx.fail(f"input's last {'axis' if rank <= 3 else 'three axes'} hold {size} values, "
                       f"inputChannels is {c_in}", field="inputChannels")
    if rank <= 3:
        return b.linear(x=x, weight=weight, bias=bias, name=n)
    if size is None or not all(is_static_dim(d) and int(d) == 1 for d in shape[-2:]):
        # [..., C, H, W] -> [..., C_in, 1, 1] (also when C * H * W is only known at run time: a
        # sequence permuted into C)
        x = b.reshape(x=x, shape=reshape_target(shape[: rank - 3], [c_in, 1, 1]), name=f"{n}_flat")
    rows = b.squeeze(x=x, axes=[rank - 2, rank - 1], name=f"{n}_rows")
    y = b.linear(x=rows, weight=weight, bias=bias, name=f"{n}_linear")
    return b.expand_dims(x=y, axes=[rank - 2, rank - 1], name=n)


@lowers("batchedMatmul")
def batched_matmul(ctx: LayerContext) -> Value:
    """Two inputs: numpy matmul, except that a 1-D operand keeps its added axis (the output rank is
    max(2, rank a, rank b)); transposes swap the last two axes of operands of rank >= 2 (a vector has
    none, as MIL's matmul documents). One input: ``a @ W + bias`` over a's last axis; transposeA/B
    are ignored there (coremltools' MIL->NN backend transposes the input and the weights itself and
    still sets both flags, on a path its device tests cover)."""
    ctx.expect_inputs(1, 2)
    p = ctx.params
    b, n = ctx.b, ctx.name
    a = ctx.input(0)
    if len(ctx.inputs) == 1:
        x1, x2 = int(p.weightMatrixFirstDimension), int(p.weightMatrixSecondDimension)
        last = ctx.shape(a)[-1] if ctx.rank(a) else None
        if last is None:
            raise ctx.fail("input must have rank >= 1")
        if is_static_dim(last) and int(last) != x1:
            raise ctx.fail(f"input's last axis has {last} values, weightMatrixFirstDimension is {x1}",
                           field="weightMatrixFirstDimension")
        if p.transposeA or p.transposeB:
            ctx.note(f"layer '{ctx.name}': transposeA/transposeB apply to two inputs only; ignored with a weight matrix")
        weight, bias = _dense_params(ctx, x1, x2)
        return b.linear(x=a, weight=weight, bias=bias, name=n)
    if p.hasBias:
        raise ctx.fail("a bias is only allowed with one input (a weight matrix)", field="hasBias")
    y = ctx.input(1)
    ra, ry = ctx.rank(a), ctx.rank(y)
    if ra == 0 or ry == 0:
        raise ctx.fail("inputs must have rank >= 1")
    if ra == 1:
        a = b.expand_dims(x=a, axes=[0], name=f"{n}_a_row")
    if ry == 1:
        y = b.expand_dims(x=y, axes=[1], name=f"{n}_b_column")
    return b.matmul(x=a, y=y, transpose_x=bool(p.transposeA and ra > 1), transpose_y=bool(p.transposeB and ry > 1),
                    name=n)


def _lookup(ctx: LayerContext, indices: Value, vocab: int, size: int, has_bias: bool, name: str) -> Value:
    """Rows of the [size, vocab] table at float ``indices`` (+ bias): shape indices.shape + [size],
    the last op named ``name``."""
    p = ctx.params
    if vocab <= 0 or size <= 0:
        raise ctx.fail(f"embedding table of {vocab} entries x {size} values is empty")
    b = ctx.b
    table = b.transpose(x=ctx.weight(p.weights, (size, vocab), "weights"), perm=[1, 0], name=f"{name}_table")
    idx = b.cast(x=indices, dtype="int32", name=f"{name}_indices")
    rows = b.gather(x=table, indices=idx, axis=0, name=f"{name}_rows" if has_bias else name)
    # the layer's indices must be in [0, vocab): a negative one is undefined, not counted from the end
    rows.producer.attributes[INDICES_IN_RANGE] = True  # type: ignore[union-attr]
    if not has_bias:
        return rows
    return b.add(x=rows, y=ctx.weight(p.bias, (size,), "bias"), name=name)


@lowers("embedding")
def embedding(ctx: LayerContext) -> Value:
    """Indices (x1, 1, 1, 1) -> (x1, C_out, 1, 1), (x1, x2, 1, 1, 1) -> (x1, x2, C_out, 1, 1)."""
    ctx.expect_inputs(1)
    p = ctx.params
    x = ctx.input()
    shape = ctx.shape(x)
    rank = len(shape)
    if rank not in (4, 5):
        raise ctx.fail(f"input must have rank 4 or 5, has rank {rank}")
    if any(is_static_dim(d) and int(d) != 1 for d in shape[-3:]):
        raise ctx.fail(f"input's last three axes must be 1, shape is {list(shape)}")
    b, n = ctx.b, ctx.name
    idx = b.squeeze(x=x, axes=[-3, -2, -1], name=f"{n}_squeezed")
    y = _lookup(ctx, idx, int(p.inputDim), int(p.outputChannels), p.hasBias, f"{n}_lookup")
    return b.expand_dims(x=y, axes=[rank - 2, rank - 1], name=n)


@lowers("embeddingND")
def embedding_nd(ctx: LayerContext) -> Value:
    """Indices (x1, ..., xk, 1) -> (x1, ..., xk, embeddingSize), k >= 1."""
    ctx.expect_inputs(1)
    p = ctx.params
    x = ctx.input()
    shape = ctx.shape(x)
    if len(shape) < 2:
        raise ctx.fail(f"input must have rank >= 2, has rank {len(shape)}")
    if is_static_dim(shape[-1]) and int(shape[-1]) != 1:
        raise ctx.fail(f"input's last axis must be 1, shape is {list(shape)}")
    idx = ctx.b.squeeze(x=x, axes=[-1], name=f"{ctx.name}_squeezed")
    return _lookup(ctx, idx, int(p.vocabSize), int(p.embeddingSize), p.hasBias, ctx.name)

