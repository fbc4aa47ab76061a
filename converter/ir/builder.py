"""Builder: ``b.conv(x=x, weight=w, strides=[2, 2])`` appends a typed op to a block.

Op methods are generated from the registry: any registered op type is a method. Python literals
and numpy arrays passed as parameters become ``const`` ops whose dtype follows the parameter's
signature (and the dtype of the other inputs of its type domain), as MIL requires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import TypeInferenceError
from .core import Block, Function, Op, Program, Value
from .names import NameScope
from .opdef import InputSpec, get_opdef
from .rng import RNG_KEY, next_rng_key
from .runtime import ListValue
from .types import DType, ListType, Type, dtype, type_of_array
from .verify import is_compile_time_const


def const_type(val: Any, dt: DType | None = None) -> Type:
    """The IR type of a constant value (numpy array, or a ListValue for list constants)."""
    if isinstance(val, ListValue):
        return ListType(val.elem_type, len(val.items), dynamic_length=False)
    return type_of_array(np.asarray(val), dt)


def _literal_dtype(spec: InputSpec | None, val: Any, domain_dtype: DType | None) -> DType | None:
    """Pick the dtype a Python literal takes for a parameter."""
    if isinstance(val, np.ndarray) or isinstance(val, np.generic):
        return None  # keep the array's own dtype
    if domain_dtype is not None:
        return domain_dtype
    flat = np.asarray(val)
    allowed = list(spec.types) if spec is not None and spec.types else []
    if flat.size == 0 and allowed:
        return dtype(allowed[0])  # an empty list has no element type of its own
    if flat.dtype.kind == "b":
        return dtype("bool")
    if flat.dtype.kind in ("U", "S", "O"):
        return dtype("string")
    if flat.dtype.kind == "f":
        for cand in ("fp32", "fp16", "fp64"):
            if not allowed or cand in allowed:
                return dtype(cand)
    if flat.dtype.kind in "iu":
        for cand in ("int32", "int64", "int16", "int8", "uint8", "uint16", "uint32"):
            if cand in allowed:
                return dtype(cand)
        for cand in ("fp32", "fp16"):
            if cand in allowed:
                return dtype(cand)
        return dtype("int32")
    return None


class Builder:
    """Appends ops to a block (at the end, or before ``insert_before``)."""

    def __init__(self, block: Block, *, insert_before: Op | None = None, names: NameScope | None = None,
                 function: Function | None = None, opset: str | None = None) -> None:
        """``function``/``opset`` default to those of the function owning ``block`` (a nested block
        under construction is not attached yet: its builder is given them explicitly)."""
        self.block = block
        fn = function or block.owning_function()
        self.function = fn
        self.opset = opset or (fn.opset if fn is not None else "iOS18")
        self.insert_before = insert_before
        self.names = names if names is not None else fn.names if fn is not None else NameScope()
        self._const_memo: dict[Value, bool] = {}

    # -- generic op creation ---------------------------------------------------------------------

    def const(self, val: Any, dt: str | DType | None = None, name: str | None = None) -> Value:
        """A const op holding ``val`` (converted to ``dt`` when given)."""
        if isinstance(val, ListValue):
            arr: Any = val
            t = const_type(val)
        else:
            d = dtype(dt) if dt is not None else None
            try:
                arr = np.asarray(val) if d is None else np.asarray(val, dtype=d.storage)
            except (OverflowError, ValueError, TypeError) as e:  # e.g. a parameter of 3.4e38 for an int64 input
                shown = repr(val) if np.size(val) <= 8 else f"an array of {np.size(val)} values"
                raise TypeInferenceError(f"constant {shown} does not fit dtype {d.name if d else '?'}: {e}",
                                         op=name) from None
            if d is None and not isinstance(val, (np.ndarray, np.generic)):
                # Python literals: floats are fp32 and ints int32 (MIL's defaults), unless asked
                if arr.dtype == np.float64:
                    arr = arr.astype(np.float32)
                elif arr.dtype == np.int64:
                    arr = arr.astype(np.int32)
            if arr.dtype.kind in ("U", "S", "O"):
                arr = arr.astype(np.str_)
            t = const_type(arr, d)
        op = Op("const", get_opdef("const", self.opset), name=self.names.unique(name or "const"),
                attributes={"val": arr})
        op.create_outputs([t], [op.name])
        self._insert(op)
        return op.outputs[0]

    def add_op(
        self,
        op_type: str,
        inputs: dict[str, Any],
        *,
        name: str | None = None,
        blocks: Sequence[Block] = (),
        attributes: dict[str, Any] | None = None,
        output_names: Sequence[str] | None = None,
        output_types: Sequence[Type] | None = None,
    ) -> Op:
        """Create, type and insert an op. Literal inputs become const ops."""
        opdef = get_opdef(op_type, self.opset)
        sig = opdef.signature
        name = self.names.unique(name or op_type)
        # dtype of each type domain, from inputs that are already values
        domain_dtypes: dict[str, DType] = {}
        for key, arg in inputs.items():
            spec = sig.inputs.get(key)
            if spec is not None and spec.domain and isinstance(arg, Value) and hasattr(arg.type, "dtype"):
                domain_dtypes.setdefault(spec.domain, arg.type.dtype)
        bound: dict[str, Any] = {}
        for key, arg in inputs.items():
            if arg is None:
                continue
            spec = sig.inputs.get(key)
            if spec is None:
                raise TypeInferenceError(
                    f"unknown parameter '{key}' for {op_type} in opset {self.opset}",
                    op=name, op_type=op_type, field=key,
                )
            if spec.kind == "tuple":
                bound[key] = tuple(self._as_value(x, None, None, f"{name}_{key}_{i}") for i, x in enumerate(arg))
            else:
                dd = domain_dtypes.get(spec.domain) if spec.domain else None
                bound[key] = self._as_value(arg, spec, dd, f"{name}_{key}")
        op = Op(op_type, opdef, name=name, attributes=attributes, blocks=blocks)
        if "random" in opdef.traits and RNG_KEY not in op.attributes and self.function is not None:
            op.attributes[RNG_KEY] = next_rng_key(self.function)  # its draws follow this, not its name
        for key, v in bound.items():
            op.set_input(key, v)
        self._insert(op)
        if output_types is None:
            try:
                output_types = opdef.infer_op(op, lambda v: is_compile_time_const(v, self._const_memo))
            except Exception:
                self.block.remove_op(op, force=True)
                raise
        if output_names is None and len(output_types) > 1:
            output_names = [self.names.unique(f"{name}_{i}") for i in range(len(output_types))]
        op.create_outputs(output_types, output_names or [name])
        return op

    def _as_value(self, x: Any, spec: InputSpec | None, domain_dtype: DType | None, name: str) -> Value:
        if isinstance(x, Value):
            return x
        if isinstance(x, ListValue):
            return self.const(x, name=name)
        return self.const(x, _literal_dtype(spec, x, domain_dtype), name=name)

    def _insert(self, op: Op) -> None:
        if self.insert_before is not None:
            self.block.insert_before(self.insert_before, op)
        else:
            self.block.append(op)

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        get_opdef(op_type, self.opset)  # raises UnsupportedError for unknown ops

        def make(name: str | None = None, **inputs: Any) -> Any:
            op = self.add_op(op_type, inputs, name=name)
            return op.outputs[0] if len(op.outputs) == 1 else tuple(op.outputs)

        make.__name__ = op_type
        return make

    # -- control flow ----------------------------------------------------------------------------

    def nested(self, block: Block) -> Builder:
        """A builder for a nested block sharing this builder's function, opset and name scope."""
        return Builder(block, names=self.names, function=self.function, opset=self.opset)

    def cond(
        self,
        pred: Value,
        true_fn: Callable[[Builder], Sequence[Value]],
        false_fn: Callable[[Builder], Sequence[Value]],
        name: str | None = None,
    ) -> tuple[Value, ...]:
        """``cond``: run one of two blocks; each returns the same number of values."""
        blocks = []
        for fn in (true_fn, false_fn):
            blk = Block()
            outs = fn(self.nested(blk))
            blk.set_outputs(list(outs))
            blocks.append(blk)
        op = self.add_op("cond", {"pred": pred}, name=name, blocks=blocks)
        return tuple(op.outputs)

    def while_loop(
        self,
        loop_vars: Sequence[Value],
        cond_fn: Callable[..., Value],
        body_fn: Callable[..., Sequence[Value]],
        name: str | None = None,
    ) -> tuple[Value, ...]:
        """``while_loop``: ``cond_fn(b, *vars) -> bool``, ``body_fn(b, *vars) -> new vars``."""
        blocks = []
        base = name or "while_loop"
        for i, fn in enumerate((cond_fn, body_fn)):
            blk = Block()
            args = [blk.new_input(self.names.unique(f"{base}_{'cond' if i == 0 else 'body'}_{v.name}"), v.type)
                    for v in loop_vars]
            outs = fn(self.nested(blk), *args)
            blk.set_outputs([outs] if isinstance(outs, Value) else list(outs))
            blocks.append(blk)
        op = self.add_op("while_loop", {"loop_vars": tuple(loop_vars)}, name=name, blocks=blocks)
        return tuple(op.outputs)


def new_program(
    inputs: dict[str, Type] | Sequence[tuple[str, Type]],
    body: Callable[..., Any],
    *,
    opset: str = "iOS15",
    function: str = "main",
) -> Program:
    """Build a one-function program: ``body(builder, *input_values)`` returns the outputs."""
    prog = Program()
    fn = Function(function, opset)
    items = list(inputs.items()) if isinstance(inputs, dict) else list(inputs)
    args = [fn.block.new_input(n, t) for n, t in items]
    prog.add_function(fn)
    b = Builder(fn.block)
    outs = body(b, *args)
    if isinstance(outs, Value):
        outs = [outs]
    fn.block.set_outputs(list(outs))
    return prog
