"""Cast, CastLike, Identity, Constant, ConstantOfShape.

Constants are returned as numpy arrays in their ONNX dtype (the driver keeps them as compile-time
arrays; see registry.py), so shape-like constants stay exact int64 and become IR ``const`` ops
only where a tensor operand needs them. Cast's ``saturate``/``round_mode`` only concern float8 /
float4 targets, which the IR cannot hold (refused by the dtype policy).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ...ir.core import Value
from ...ir.types import dtype
from .context import Ctx, Node, ir_dtype, narrow
from .model_file import tensor_array
from .registry import onnx_op

#: ConstantOfShape results up to this many elements are built at conversion time; larger ones
#: (or run-time shapes) become an IR ``fill``, so a huge declared shape costs nothing until run.
FOLD_MAX_ELEMENTS = 1 << 16


def cast_to(ctx: Ctx, x: Value, elem_type: int) -> Value:
    want = ir_dtype(elem_type, "a cast target")
    return x if x.type.dtype.name == want else ctx.b.cast(x=x, dtype=want)


@onnx_op("Cast", versions=(6, 28))
def cast(ctx: Ctx, node: Node) -> list[Value]:
    return [cast_to(ctx, ctx.input(0), int(ctx.required_attr("to")))]


@onnx_op("CastLike", versions=(15, 25))
def cast_like(ctx: Ctx, node: Node) -> list[Value]:
    target = ctx.input_elem_type(1)
    if target is None:
        raise ctx.unsupported("the type of target_type is unknown")
    return [cast_to(ctx, ctx.input(0), target)]


@onnx_op("Identity", versions=(1, 25))
def identity(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    name = node.inputs[0]
    if name in ctx.arrays and name not in ctx.values:
        return [ctx.arrays[name]]
    return [ctx.input(0)]


@onnx_op("Constant", versions=(1, 25))
def constant(ctx: Ctx, node: Node) -> list[np.ndarray]:
    given = [k for k in node.attrs]
    if len(given) != 1:
        raise ctx.format_error(f"needs exactly one value attribute, has {given or 'none'}")
    key = given[0]
    a = node.attrs[key]
    if key == "value":
        return [tensor_array(a.t, ctx.source)]
    if key == "value_float":
        return [np.asarray(a.f, dtype=np.float32)]
    if key == "value_floats":
        return [np.asarray(list(a.floats), dtype=np.float32)]
    if key == "value_int":
        return [np.asarray(a.i, dtype=np.int64)]
    if key == "value_ints":
        return [np.asarray(list(a.ints), dtype=np.int64)]
    if key == "sparse_value":
        raise ctx.unsupported("sparse constants are not supported")
    raise ctx.unsupported(f"constant attribute '{key}' (strings are not supported)")


@onnx_op("ConstantOfShape", versions=(9, 25))
def constant_of_shape(ctx: Ctx, node: Node) -> list[Value | np.ndarray]:
    a = node.attrs.get("value")
    fill = numpy_helper.to_array(a.t).reshape(-1) if a is not None else np.zeros(1, np.float32)
    if fill.size != 1:
        raise ctx.format_error(f"'value' must hold one element, holds {fill.size}")
    shape = ctx.const_input(0)
    if shape is not None:
        dims = [int(d) for d in np.asarray(shape).reshape(-1)]
        if any(d < 0 for d in dims):
            raise ctx.format_error(f"negative size in shape {dims}")
        if int(np.prod(dims, dtype=np.int64)) <= FOLD_MAX_ELEMENTS:
            return [np.full(dims, fill[0], dtype=fill.dtype)]
    held = ir_dtype(onnx.helper.np_dtype_to_tensor_dtype(fill.dtype), "the fill value")
    target = held if held in ("fp16", "fp32", "int32", "bool") else "int32"  # what IR fill takes
    value = narrow(fill, "the fill value").astype(dtype(target).storage)[0]
    return [ctx.b.fill(shape=ctx.input(0, ("int32",)), value=value)]
