"""The re-targeting step shared by every op whose signature changed: parameters and dtypes.

- A parameter added in a later opset is dropped when going to an earlier one if its value is what
  the earlier opset does without it (``ADDED_PARAMETERS``); any other value is refused, except
  ``validate_indices=True``, which only adds a run-time range check: it is dropped with a note.
- Constant parameters are re-typed when the target wants another dtype that holds their values
  exactly (``int8`` ``shape`` -> ``int32``; an fp32 ``alpha`` -> fp16 when fp16 holds every value;
  iOS17 lets weights, biases and activation constants have another dtype than ``x``, iOS15/16 do
  not). A compressed (constexpr) weight of the wrong dtype is stored as the constant it computes,
  with a note. Values computed at run time are never re-typed (that would change the arithmetic).
- Then the op must pass the target's signature check and infer the same output types under the
  target's definition; else it is refused with the check's message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConverterError
from ...ir.core import Op, Value
from ...ir.opdef import OpDef, get_opdef
from ...ir.types import DTYPES, DType, TensorType, types_compatible
from .causes import without_value_names
from .constexpr import operand
from .context import Context, Refusal, is_constexpr


@dataclass(frozen=True)
class Added:
    """A parameter an op gained in ``since``: ``implicit(ctx, op, value)`` says whether ``value``
    is what earlier opsets do without it."""

    since: str
    implicit: Callable[[Context, Op, Any], bool]
    meaning: str  # the implicit behaviour, for messages
    note_only: bool = False  # another value is dropped with a note instead of refused


def _equals(expected: Any) -> Callable[[Context, Op, Any], bool]:
    return lambda ctx, op, v: v is not None and np.asarray(v).shape == () and np.asarray(v).item() == expected


def _all_zero(ctx: Context, op: Op, v: Any) -> bool:
    return v is not None and not np.any(np.asarray(v))


def _half_pixel_default(ctx: Context, op: Op, v: Any) -> bool:
    align = op.inputs.get("align_corners")
    align_val = True if align is None else bool(np.asarray(ctx.value(align)))
    return v is not None and bool(np.asarray(v)) == (not align_val)


_VALIDATE = Added("iOS17", _equals(False), "no run-time index check", note_only=True)

ADDED_PARAMETERS: dict[tuple[str, str], Added] = {
    ("crop_resize", "pad_value"): Added("iOS16", _equals(0.0), "padding with 0"),
    ("gather", "batch_dims"): Added("iOS16", _equals(0), "no batch dims"),
    ("gather_nd", "batch_dims"): Added("iOS16", _equals(0), "no batch dims"),
    ("topk", "sort"): Added("iOS16", _equals(True), "sorted results"),
    ("topk", "return_indices"): Added("iOS16", _equals(True), "returning indices"),
    ("upsample_bilinear", "half_pixel_centers"): Added("iOS16", _half_pixel_default,
                                                       "half-pixel centres exactly when not align_corners"),
    ("topk", "output_indices_dtype"): Added("iOS17", _equals("int32"), "int32 indices"),
    ("reduce_argmax", "output_dtype"): Added("iOS17", _equals("int32"), "int32 indices"),
    ("reduce_argmin", "output_dtype"): Added("iOS17", _equals("int32"), "int32 indices"),
    **{(op, "validate_indices"): _VALIDATE for op in ("gather", "gather_along_axis", "gather_nd", "scatter",
                                                       "scatter_along_axis", "scatter_nd")},
    ("gru", "reset_after"): Added("iOS18", _equals(False), "resetting before the hidden projection"),
    ("gru", "input_bias"): Added("iOS18", _all_zero, "no separate input bias"),
}


def drop_added_parameters(ctx: Context, op: Op, target: OpDef) -> None:
    for key in list(op.inputs):
        if key in target.signature.inputs:
            continue
        added = ADDED_PARAMETERS.get((op.type, key))
        if added is None:
            continue  # the signature check below reports it
        v = op.inputs[key]
        assert isinstance(v, Value)
        val = ctx.value(v) if ctx.is_const(v) else None
        if not added.implicit(ctx, op, val):
            shown = "a run-time value" if val is None else repr(np.asarray(val).tolist())
            if not added.note_only:
                raise Refusal(f"{key}={shown} has no {ctx.target} form ({key} was added in {added.since}; "
                              f"earlier opsets mean {added.meaning})")
            ctx.note(f"{op.type}: {key}={shown} dropped ({ctx.target} has no {key}: {added.meaning}; "
                     "results for valid indices are unchanged)", op)
        ctx.set_input(op, key, None)


# ---------------------------------------------------------------------------------------------
# dtypes


def _exact(val: np.ndarray, dt: DType) -> np.ndarray | None:
    """``val`` as ``dt`` if that holds every value exactly (NaN stays NaN), else None."""
    if not dt.has_native_numpy or not dt.is_numeric:
        return None
    src = np.asarray(val)
    if src.dtype.kind not in "biuf":
        return None
    if dt.is_int:
        if src.dtype.kind == "f" and not np.all(np.isfinite(src)):
            return None
        lo, hi = dt.value_range()
        if src.size and (src.min() < lo or src.max() > hi):
            return None
    with np.errstate(over="ignore", invalid="ignore"):
        out = src.astype(dt.storage)
        back = out.astype(src.dtype)
    same = (back == src) | (np.isnan(back) & np.isnan(src)) if src.dtype.kind == "f" else back == src
    return out if bool(np.all(same)) else None


def _retype(ctx: Context, op: Op, key: str, v: Value, want: DType, why: str) -> None:
    """Bind a constant holding ``v``'s value as ``want`` (exactly) in place of ``v``."""
    if not ctx.is_const(v):
        raise Refusal(f"'{key}' is {v.type} computed at run time, and {ctx.target} {why}")
    converted = _exact(np.asarray(ctx.value(v)), want)
    if converted is None:
        raise Refusal(f"'{key}' holds values {want.name} cannot represent exactly, and {ctx.target} {why}")
    if is_constexpr(v.producer):
        ctx.note(f"{op.type}: the compressed '{key}' must be {want.name} in {ctx.target} ({why}): it is stored "
                 "decompressed", op)
    ctx.set_input(op, key, ctx.const(op, converted, want, f"{op.name}_{key}"))


def fit_dtypes(ctx: Context, op: Op, target: OpDef) -> None:
    """Re-type constant parameters the target's signature wants in another dtype (see module doc)."""
    sig = target.signature
    domains: dict[str, list[tuple[str, Value]]] = {}
    for spec in sig.value_inputs():
        v = op.inputs.get(spec.name)
        if not isinstance(v, Value) or not isinstance(v.type, TensorType):
            continue
        if spec.types is not None and v.type.dtype.name not in spec.types and ctx.is_const(v):
            val = np.asarray(ctx.value(v))
            want = next((DTYPES[t] for t in spec.types if _exact(val, DTYPES[t]) is not None), None)
            if want is None:
                continue  # the signature check reports it
            _retype(ctx, op, spec.name, v, want, f"{op.type} takes no {v.type.dtype.name} '{spec.name}'")
            v = op.inputs[spec.name]
            assert isinstance(v, Value)
        if spec.domain is not None:
            domains.setdefault(spec.domain, []).append((spec.name, v))
    for members in domains.values():
        dtypes = {v.type.dtype for _, v in members}
        if len(dtypes) < 2:
            continue
        run_time = {v.type.dtype for _, v in members if not ctx.is_const(v)}
        if len(run_time) != 1:
            continue  # the signature check reports it
        want = run_time.pop()
        names = "', '".join(k for k, _ in members)
        for key, v in members:
            if v.type.dtype != want:
                _retype(ctx, op, key, v, want, f"needs one dtype for '{names}'")


def check_and_repoint(ctx: Context, op: Op, target: OpDef) -> None:
    """The op as it now is must fit the target's signature and infer the same output types."""
    try:
        target.check_inputs(op, ctx.is_const)
        probe = Op(op.type, target, dict(op.inputs), name=op.name, attributes=op.attributes)
        try:
            types = target.infer_op(probe, ctx.is_const)
        finally:
            probe.drop_all_inputs()
    except ConverterError as e:
        raise Refusal(without_value_names(e.message, op)) from None
    old = [v.type for v in op.outputs]
    if len(types) != len(old) or not all(types_compatible(o, n) for o, n in zip(old, types)):
        raise Refusal(f"the {ctx.target} definition gives {', '.join(map(str, types))} where the program has "
                      f"{', '.join(map(str, old))}")
    ctx.repoint(op)


def generic(ctx: Context, op: Op) -> None:
    """Drop added parameters at their implicit values, re-type constants, check, re-point. A
    constexpr op reading another one's result in a target that cannot chain them reads the
    constant it computes instead (with a note)."""
    target = get_opdef(op.type, ctx.target)
    if is_constexpr(op) and not ctx.chains_constexpr():
        for key, v in list(op.inputs.items()):
            if isinstance(v, Value) and not v.is_const:
                ctx.set_input(op, key, operand(ctx, op, key))
    drop_added_parameters(ctx, op, target)
    fit_dtypes(ctx, op, target)
    check_and_repoint(ctx, op, target)
