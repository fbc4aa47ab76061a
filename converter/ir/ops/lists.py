"""Lists of tensors (MIL's TensorArray): make_list, list_length, list_read, list_write,
list_gather, list_scatter.

Lists are values: list_write and list_scatter return a new ``ListValue`` and leave their input
unchanged, so the ops are pure. A list made with ``dynamic_length=True`` grows when written past
its end (the gap is left unwritten); a fixed-length list rejects such writes. Reading an element
that was never written gives zeros when the element shape is fully known (TensorArray's rule),
and is an error otherwise.

A list's type records its element type and, when known, its length: ``init_length`` after
make_list, unknown after a write that may have grown a dynamic list.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import EvaluationError
from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..runtime import ListValue
from ..types import DTYPES, ListType, Symbol, TensorType, Type, dims_compatible, int32

ELEM_DTYPES = ("bool", "fp16", "fp32", "int32")


def _list_type(a: InferArgs) -> ListType:
    t = a.type("ls")
    if not isinstance(t, ListType):
        raise a.fail(f"'ls' must be a list, got {t}")
    if not isinstance(t.elem, TensorType):
        raise a.fail(f"list elements must be tensors, got {t.elem}")
    return t


def _check_elem(a: InferArgs, elem: TensorType, value: TensorType, what: str) -> None:
    if value.dtype != elem.dtype:
        raise a.fail(f"{what} has dtype {value.dtype}, the list holds {elem.dtype}")
    if value.shape is None or elem.shape is None:
        return
    if len(value.shape) != len(elem.shape) or not all(dims_compatible(x, y) for x, y in zip(value.shape, elem.shape)):
        raise a.fail(f"{what} has shape {list(value.shape)}, list elements {[str(d) for d in elem.shape]}")


def _after_write(a: InferArgs, ls: ListType, indices: str) -> ListType:
    """Type of the list after writing at ``indices``: a dynamic list may have grown."""
    idx = a.value(indices)
    if not ls.dynamic_length:
        return ls
    if idx is not None and isinstance(ls.length, int) and np.all(np.asarray(idx) < ls.length):
        return ls
    return ListType(ls.elem, None, True)


def _index(i: Any, length: int) -> int:
    i = int(np.asarray(i).reshape(()))
    if not 0 <= i < length:
        raise EvaluationError(f"index {i} is out of range for a list of length {length}")
    return i


def _item(ls: ListValue, i: int) -> np.ndarray:
    item = ls.items[i]
    if item is not None:
        return item
    elem = ls.elem_type
    if isinstance(elem, TensorType) and elem.is_static:
        return np.zeros(elem.shape, elem.dtype.storage)
    raise EvaluationError(f"list element {i} was never written and its shape {elem} is not static")


def _write(ls: ListValue, i: Any, value: np.ndarray) -> None:
    """Write in place into ``ls`` (a fresh copy owned by the caller)."""
    i = int(np.asarray(i).reshape(()))
    if i < 0:
        raise EvaluationError(f"list index {i} is negative")
    if i >= len(ls.items):
        if not ls.dynamic_length:
            raise EvaluationError(f"index {i} is past the end of a fixed-length list of length {len(ls.items)}")
        ls.items.extend([None] * (i + 1 - len(ls.items)))
    ls.items[i] = np.array(value, copy=True)


@register
class MakeList(OpDef):
    """A list of ``init_length`` unwritten elements of dtype ``dtype`` and shape ``elem_shape``.

    ``elem_shape`` is a tuple of scalars: int32 sizes, or strings naming a symbolic size; a size
    computed at run time is a fresh symbol in the type.
    """

    op_type = "make_list"

    def infer(self, a: InferArgs) -> list[Type]:
        dtype = str(np.asarray(a.value("dtype")))
        if dtype not in ELEM_DTYPES:
            raise a.fail(f"dtype must be one of {', '.join(ELEM_DTYPES)}, got '{dtype}'")
        dims = []
        for v in a.op.inputs.get("elem_shape", ()):
            val = v.const_val
            if val is None:
                dims.append(a.new_symbol())
            elif np.asarray(val).dtype.kind in "USO":
                dims.append(Symbol(str(np.asarray(val).reshape(()))))
            elif np.ndim(val) == 0:
                dims.append(int(val))
            else:
                raise a.fail(f"elem_shape entries must be scalars, got shape {list(np.shape(val))}")
        length = a.value("init_length")
        length = a.new_symbol() if length is None else int(np.asarray(length))
        if isinstance(length, int) and length < 0:
            raise a.fail(f"init_length must not be negative, got {length}")
        dynamic = bool(np.asarray(a.value("dynamic_length")))
        return [ListType(TensorType(DTYPES[dtype], tuple(dims)), length, dynamic)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        declared = a.out_types[0].elem
        sizes = [np.asarray(s) for s in a["elem_shape"]]
        dims = tuple(int(s) if s.dtype.kind in "iu" else d for s, d in zip(sizes, declared.shape))
        n = int(np.asarray(a.value("init_length")))
        dynamic = bool(np.asarray(a.value("dynamic_length")))
        return [ListValue(TensorType(declared.dtype, dims), [None] * n, dynamic)]


@register
class ListLength(OpDef):
    """The number of elements (int32 scalar)."""

    op_type = "list_length"

    def infer(self, a: InferArgs) -> list[Type]:
        _list_type(a)
        return [TensorType(int32, ())]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        return [np.array(len(a["ls"]), np.int32)]


@register
class ListRead(OpDef):
    """The element at ``index`` (in ``[0, length)``)."""

    op_type = "list_read"

    def infer(self, a: InferArgs) -> list[Type]:
        return [_list_type(a).elem]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        ls = a["ls"]
        return [_item(ls, _index(a["index"], len(ls)))]


@register
class ListWrite(OpDef):
    """A new list equal to ``ls`` with ``value`` at ``index``."""

    op_type = "list_write"

    def infer(self, a: InferArgs) -> list[Type]:
        ls = _list_type(a)
        _check_elem(a, ls.elem, a.tensor_type("value"), "value")
        return [_after_write(a, ls, "index")]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        out = a["ls"].copy()
        _write(out, a["index"], a["value"])
        return [out]


@register
class ListGather(OpDef):
    """The elements at ``indices`` stacked on a new leading axis: ``[len(indices), *elem_shape]``."""

    op_type = "list_gather"

    def infer(self, a: InferArgs) -> list[Type]:
        elem = _list_type(a).elem
        idx = a.tensor_type("indices")
        if idx.shape is not None and len(idx.shape) != 1:
            raise a.fail(f"indices must be a vector, got shape {list(idx.shape)}")
        if elem.shape is None:
            return [TensorType(elem.dtype, None)]
        n = idx.shape[0] if idx.shape is not None else a.new_symbol()
        return [TensorType(elem.dtype, (n,) + tuple(elem.shape))]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        ls = a["ls"]
        items = [_item(ls, _index(i, len(ls))) for i in np.asarray(a["indices"]).reshape(-1)]
        if items:
            return [np.stack(items)]
        elem = ls.elem_type
        if not elem.is_static:
            raise EvaluationError(f"gathering no elements from a list of {elem} leaves the shape unknown")
        return [np.zeros((0,) + tuple(elem.shape), elem.dtype.storage)]


@register
class ListScatter(OpDef):
    """A new list with ``value[k]`` written at ``indices[k]``, in order (a later write wins)."""

    op_type = "list_scatter"

    def infer(self, a: InferArgs) -> list[Type]:
        ls = _list_type(a)
        value, idx = a.tensor_type("value"), a.tensor_type("indices")
        if idx.shape is not None and len(idx.shape) != 1:
            raise a.fail(f"indices must be a vector, got shape {list(idx.shape)}")
        if value.shape is not None:
            if len(value.shape) < 1:
                raise a.fail("value must have a leading axis of one element per index")
            if idx.shape is not None and not dims_compatible(value.shape[0], idx.shape[0]):
                raise a.fail(f"{value.shape[0]} values for {idx.shape[0]} indices")
        elem_value = TensorType(value.dtype, None if value.shape is None else tuple(value.shape[1:]))
        _check_elem(a, ls.elem, elem_value, "value[k]")
        return [_after_write(a, ls, "indices")]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        out = a["ls"].copy()
        values = a["value"]
        for k, i in enumerate(np.asarray(a["indices"]).reshape(-1)):
            _write(out, i, values[k])
        return [out]
