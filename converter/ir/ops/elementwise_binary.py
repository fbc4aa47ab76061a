"""Elementwise binary ops with numpy broadcasting: arithmetic, comparison, logical."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..shapes import ShapeError, broadcast_shapes
from ..types import TensorType, Type, bool_


class _Binary(OpDef):
    """Broadcasting binary op: output dtype is the inputs' dtype (or bool for comparisons)."""

    traits = frozenset({"pure", "elementwise"})
    bool_output = False

    def infer(self, a: InferArgs) -> list[Type]:
        x, y = a.tensor_type("x"), a.tensor_type("y")
        if x.shape is None or y.shape is None:
            shape = None
        else:
            try:
                shape = broadcast_shapes(x.shape, y.shape)
            except ShapeError as e:
                raise a.fail(str(e)) from None
        return [TensorType(bool_ if self.bool_output else x.dtype, shape)]

    def kernel(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, a: EvalArgs) -> list[Any]:
        x, y = a["x"], a["y"]
        out_dt = a.out_types[0].dtype.storage
        with np.errstate(all="ignore"):
            r = self.kernel(x, y)
        return [np.asarray(r).astype(out_dt, copy=False)]


def _binary(op_type: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], *, bool_output: bool = False,
            commutative: bool = False, doc: str = "") -> type[OpDef]:
    traits = {"pure", "elementwise"} | ({"commutative"} if commutative else set())
    cls = type(
        op_type.title().replace("_", ""),
        (_Binary,),
        {
            "op_type": op_type,
            "bool_output": bool_output,
            "traits": frozenset(traits),
            "kernel": staticmethod(fn),
            "__doc__": doc or f"``{op_type}(x, y)`` elementwise with broadcasting.",
        },
    )
    return register(cls)


def _int_floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        return np.floor_divide(x, y)
    return np.floor(x / y)


def _real_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The real quotient, cast back to the input dtype by evaluate() (truncation for int32).
    return np.true_divide(x, y)


def _mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # MIL mod: x - floor(x / y) * y, the sign of the divisor (Python's %); numpy's mod computes it
    # exactly (fmod plus a sign fix) instead of through a rounded quotient.
    return np.mod(x, y)


_binary("add", np.add, commutative=True)
_binary("sub", np.subtract)
_binary("mul", np.multiply, commutative=True)
_binary("real_div", _real_div)
_binary("floor_div", _int_floor_div)
_binary("mod", _mod)
_binary("pow", np.power)
_binary("maximum", np.maximum, commutative=True)
_binary("minimum", np.minimum, commutative=True)
_binary("equal", np.equal, bool_output=True, commutative=True)
_binary("not_equal", np.not_equal, bool_output=True, commutative=True)
_binary("greater", np.greater, bool_output=True)
_binary("greater_equal", np.greater_equal, bool_output=True)
_binary("less", np.less, bool_output=True)
_binary("less_equal", np.less_equal, bool_output=True)
_binary("logical_and", np.logical_and, bool_output=True, commutative=True)
_binary("logical_or", np.logical_or, bool_output=True, commutative=True)
_binary("logical_xor", np.logical_xor, bool_output=True, commutative=True)
