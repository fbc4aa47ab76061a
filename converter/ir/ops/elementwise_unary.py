"""Elementwise unary ops: math functions, rounding, clip/threshold, the epsilon-guarded
inverse/log/rsqrt, logical_not and cast.

Numerics shared by this family and ``activation``: floating-point inputs and parameters are
computed in float64 and rounded once to the output dtype, so a kernel gives the (nearly)
correctly rounded value of the documented formula at every storage precision (fp16 included),
a single target that every backend is measured against. Intermediate results are therefore
neither rounded nor overflowed at the storage precision (``0 * softplus(3 * 3e38)`` is 0 where an
fp32 evaluation gives NaN). Integer inputs are computed in their own dtype and wrap on overflow
(two's complement), as numpy, coremltools' constant folding and onnxruntime do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..opdef import EvalArgs, InferArgs, OpDef, register
from ..types import DTYPES, DType, TensorType, Type
from ._util import same_as

# -------------------------------------------------------------------------------------------------
# Helpers shared with the activation family


def widen(v: Any) -> np.ndarray:
    """A run-time value in the computation dtype: float64 for floats, unchanged otherwise."""
    arr = np.asarray(v)
    return arr.astype(np.float64) if arr.dtype.kind == "f" else arr


def convert(x: np.ndarray, to: DType) -> np.ndarray:
    """Elementwise conversion to ``to`` with MIL ``cast`` semantics.

    - to bool: ``x != 0`` (NaN is true);
    - float to integer: truncation toward zero; NaN gives 0 and values outside the target range
      (infinities included) saturate to its bounds. MIL leaves this undefined; saturation is what
      the arm64 conversion instruction (fcvtzs) and Metal do on Apple hardware. numpy's astype,
      which coremltools folds constants with, is platform-dependent here (INT_MIN on x86);
    - integer to integer: two's-complement wrap (numpy, coremltools and onnxruntime agree);
    - to float: round to nearest even, overflow to +-inf.
    """
    x = np.asarray(x)
    if to.kind == "bool":
        return x != 0
    if to.is_int and x.dtype.kind == "f":
        lo, hi = to.value_range()
        t = np.trunc(x.astype(np.float64))
        t = np.clip(np.where(np.isnan(t), 0.0, t), lo, hi)
        return t.astype(to.storage)
    return x.astype(to.storage, copy=False)


def string_param(a: InferArgs | EvalArgs, name: str) -> str | None:
    """A const string parameter (Python str or 0-d numpy string array) as ``str``; None if unknown."""
    v = a.value(name)
    return None if v is None else str(np.asarray(v).reshape(()).item())


def require_scalar(a: InferArgs, *names: str) -> None:
    """Fail unless each named parameter, where given, is a scalar (MIL ``const T``)."""
    for name in names:
        if not a.has(name):
            continue
        t = a.tensor_type(name)
        if t.shape is not None and t.shape != ():
            raise a.fail(f"'{name}' must be a scalar, got shape {list(t.shape)}")


class UnaryOp(OpDef):
    """``y = f(x, params)`` with y of x's type; see the module docstring for the numerics.

    Subclasses give ``compute`` (on widened values) and, where needed, ``check`` (constraints on
    constant parameters). ``scalar_params`` names the parameters MIL declares as ``const T``.
    """

    traits = frozenset({"pure", "elementwise"})
    scalar_params: ClassVar[tuple[str, ...]] = ()

    def infer(self, a: InferArgs) -> list[Type]:
        require_scalar(a, *self.scalar_params)
        self.check(a)
        return same_as(a)

    def check(self, a: InferArgs) -> None:
        """Op-specific constraints on parameters (none by default)."""

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        raise NotImplementedError

    def evaluate(self, a: EvalArgs) -> list[Any]:
        with np.errstate(all="ignore"):
            r = self.compute(widen(a["x"]), a)
            return [convert(np.asarray(r), a.out_types[0].dtype)]


def unary(op_type: str, fn: Callable[[np.ndarray], np.ndarray], doc: str, *, module: str = __name__) -> type[OpDef]:
    """Register a parameterless UnaryOp computing ``fn(x)`` (``module``: the defining family)."""
    cls = type(
        "".join(p.title() for p in op_type.split("_")),
        (UnaryOp,),
        {"op_type": op_type, "compute": lambda self, x, a: fn(x), "__doc__": doc, "__module__": module},
    )
    return register(cls)


# -------------------------------------------------------------------------------------------------
# Parameterless math functions

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The Gauss error function through libm (numpy has none; scipy is not a dependency)."""
    return np.asarray(_erf(x), dtype=np.float64)


def _exp2(x: np.ndarray) -> np.ndarray:
    # int32 inputs are computed as reals and converted like cast (2^-1 -> 0, 2^31 -> INT32_MAX).
    return np.exp2(x.astype(np.float64))


def _square(x: np.ndarray) -> np.ndarray:
    return x * x  # int32 wraps on overflow


unary("abs", np.abs, "``|x|``; abs(INT32_MIN) wraps to INT32_MIN.")
unary("acos", np.arccos, "``arccos(x)``; NaN outside [-1, 1].")
unary("asin", np.arcsin, "``arcsin(x)``; NaN outside [-1, 1].")
unary("atan", np.arctan, "``arctan(x)``.")
unary("atanh", np.arctanh, "``arctanh(x)``; +-inf at +-1, NaN outside [-1, 1].")
unary("ceil", np.ceil, "Round toward +inf.")
unary("cos", np.cos, "``cos(x)``.")
unary("cosh", np.cosh, "``cosh(x)``.")
unary("erf", erf, "The Gauss error function.")
unary("exp", np.exp, "``e^x``.")
unary("exp2", _exp2, "``2^x``; for int32, the real power truncated and saturated as in cast.")
unary("floor", np.floor, "Round toward -inf.")
unary("round", np.round, "Round to nearest, ties to even (the MIL doc: ``0.5`` rounds to ``0``).")
unary("sign", np.sign, "-1, 0 or 1 (NaN stays NaN; -0.0 gives 0).")
unary("sin", np.sin, "``sin(x)``.")
unary("sinh", np.sinh, "``sinh(x)``.")
unary("sqrt", np.sqrt, "``sqrt(x)``; NaN for x < 0.")
unary("square", _square, "``x * x``; int32 wraps on overflow.")
unary("tan", np.tan, "``tan(x)``.")
unary("tanh", np.tanh, "``tanh(x)``.")
unary("logical_not", np.logical_not, "Boolean NOT.")


# -------------------------------------------------------------------------------------------------
# Bounds


@register
class Clip(UnaryOp):
    """``min(max(x, alpha), beta)``; NaN propagates.

    iOS15 accepts alpha > beta (every element becomes beta); iOS17 requires alpha < beta, as
    coremltools' type inference does.
    """

    op_type = "clip"
    scalar_params = ("alpha", "beta")

    def check(self, a: InferArgs) -> None:
        if self.signature.since == "iOS15":
            return
        lo, hi = a.value("alpha"), a.value("beta")
        if lo is not None and hi is not None and not float(lo) < float(hi):
            raise a.fail(f"clip needs alpha < beta from iOS17 on, got alpha={float(lo)}, beta={float(hi)}")

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        return np.minimum(np.maximum(x, widen(a["alpha"])), widen(a["beta"]))


@register
class Threshold(UnaryOp):
    """``max(x, alpha)``: a lower bound (NaN propagates)."""

    op_type = "threshold"
    scalar_params = ("alpha",)

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        return np.maximum(x, widen(a["alpha"]))


# -------------------------------------------------------------------------------------------------
# Epsilon-guarded functions


class _WithEpsilon(UnaryOp):
    """``f(x + epsilon)``. The default epsilon is ``default_eps`` in x's dtype, so it can round
    away: fp16(1e-45) and fp16(1e-12) are 0 (log(0) = -inf in fp16, but log(0 + 1e-45) = -103.3
    in fp32, the denormal being kept)."""

    scalar_params = ("epsilon",)
    default_eps: ClassVar[float] = 0.0

    def default_epsilon(self, a: InferArgs | EvalArgs) -> np.generic:
        return a.tensor_type("x").dtype.storage.type(self.default_eps)

    def fn(self, y: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def compute(self, x: np.ndarray, a: EvalArgs) -> np.ndarray:
        return self.fn(x + widen(a["epsilon"]))


@register
class Inverse(_WithEpsilon):
    """``1 / (x + epsilon)``, epsilon defaulting to 1e-4."""

    op_type = "inverse"
    default_eps = 1e-4

    def fn(self, y: np.ndarray) -> np.ndarray:
        return 1.0 / y


@register
class Log(_WithEpsilon):
    """``log(x + epsilon)``, epsilon defaulting to 1e-45."""

    op_type = "log"
    default_eps = 1e-45

    def fn(self, y: np.ndarray) -> np.ndarray:
        return np.log(y)


@register
class Rsqrt(_WithEpsilon):
    """``1 / sqrt(x + epsilon)``, epsilon defaulting to 1e-12."""

    op_type = "rsqrt"
    default_eps = 1e-12

    def fn(self, y: np.ndarray) -> np.ndarray:
        return 1.0 / np.sqrt(y)


# -------------------------------------------------------------------------------------------------
# cast


@register
class Cast(OpDef):
    """Convert x to the dtype named by the const string ``dtype`` (see ``convert`` for the rules).

    The accepted names are the op's input domain in the opset (coremltools' supported_dtypes):
    fp16, fp32, int32, bool; from iOS17 also int8, uint8, int16, uint16.
    """

    op_type = "cast"
    traits = frozenset({"pure", "elementwise"})

    def target(self, a: InferArgs | EvalArgs) -> DType:
        name = string_param(a, "dtype")
        if name is None:
            raise a.fail("'dtype' must be a compile-time constant string")
        allowed = self.signature.inputs["x"].types or ()
        if name not in allowed:
            raise a.fail(f"cast to '{name}' is not supported in {self.opset} (one of: {', '.join(allowed)})")
        return DTYPES[name]

    def infer(self, a: InferArgs) -> list[Type]:
        return [TensorType(self.target(a), a.tensor_type("x").shape)]

    def evaluate(self, a: EvalArgs) -> list[Any]:
        with np.errstate(all="ignore"):
            return [convert(a["x"], a.out_types[0].dtype)]
