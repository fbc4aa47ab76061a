"""specialize_shapes: fix symbolic dimensions to given sizes and re-infer every type.

Backends without flexible shapes (WebNN) need static shapes. Sizes are given per symbol name
(``{"s0": 224}``) or per function input and axis (``{"image": {2: 224, 3: 224}}``, or a whole
shape with None where the dim stays as it is). Each size must be one the symbol allows (its
range or enumerated choices). Every type of the function has the symbols replaced (expressions
then evaluate to sizes where all their symbols are fixed), then `reinfer` recomputes the types op
by op, keeping sizes the program declared where inference alone cannot know them. The model
description of the inputs and outputs is narrowed to match (flexible ranges pinned, enumerated
shapes reduced), so a written model declares the static shapes it now has.

Sizes that are data (non_zero's count, a reshape to a computed shape) stay symbols: the result is
static wherever the given sizes determine the shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import PassError
from ..formats import description as desc
from ..ir.core import FeatureInfo, Function, Program
from ..ir.reinfer import reinfer
from ..ir.symbols import map_type, type_symbols
from ..ir.types import DimExpr, StateType, Symbol, TensorType, Type, is_static_dim
from .base import Pass, PassResult

InputSizes = Mapping[int, int] | Sequence[int | None]


class SpecializeShapes(Pass):
    """Fix symbols to sizes: ``sizes`` by symbol name, ``inputs`` by function input name and axis;
    ``function`` limits the pass to one function (default: all, each binding what it has)."""

    def __init__(self, sizes: Mapping[str, int] | None = None, *, inputs: Mapping[str, InputSizes] | None = None,
                 function: str | None = None) -> None:
        self.sizes = dict(sizes or {})
        self.inputs = dict(inputs or {})
        self.function = function

    @property
    def name(self) -> str:
        return "specialize_shapes"

    def run(self, program: Program) -> PassResult:
        if self.function is not None and self.function not in program.functions:
            raise PassError(f"{self.name}: no function '{self.function}' (the program has: "
                            f"{', '.join(program.functions)})")
        functions = [program.functions[self.function]] if self.function else list(program.functions.values())
        seen_symbols = {s.name for fn in functions for v in fn.values() for s in type_symbols(v.type)}
        unknown = sorted(set(self.sizes) - seen_symbols)
        if unknown:
            raise PassError(f"{self.name}: no symbol named {', '.join(map(repr, unknown))} in the program")
        seen_inputs = {v.name for fn in functions for v in fn.inputs}
        missing = sorted(set(self.inputs) - seen_inputs)
        if missing:
            raise PassError(f"{self.name}: no input named {', '.join(map(repr, missing))}")
        plans = [(fn, self._bindings(fn)) for fn in functions]  # every request checked before any change
        for fn, bindings in plans:
            for v in fn.inputs:  # the inputs' descriptions must allow the sizes (enumerated shapes)
                infos = fn.state_info if v.name in fn.state_info else fn.input_info
                self._narrowed(fn, infos, v.name, map_type(v.type, lambda s, b=bindings: b.get(s.name, s)))
        modified = False
        for fn, bindings in plans:
            if bindings:
                self._specialize(fn, bindings)
                modified = True
        return PassResult(modified)

    def _specialize(self, fn: Function, bindings: dict[str, int]) -> None:

        def fix(s: Symbol) -> Any:
            return bindings.get(s.name, s)

        before = {v: v.type for v in fn.inputs}
        outputs_before = [v.type for v in fn.outputs]
        for v in fn.values():
            v.type = map_type(v.type, fix)
        reinfer(fn, keep_declared_sizes=True)
        for v in fn.inputs:
            if v.type != before[v]:
                self._narrow(fn, fn.state_info if v.name in fn.state_info else fn.input_info, v.name, v.type)
        for v, old in zip(fn.outputs, outputs_before):
            if v.type != old:
                self._narrow(fn, fn.output_info, v.name, v.type)

    def _bindings(self, fn: Function) -> dict[str, int]:
        """{symbol name: size} for this function, checked against each symbol's allowed sizes."""
        symbols = {s.name: s for v in fn.values() for s in type_symbols(v.type)}
        bindings: dict[str, int] = {}

        def bind(name: str, size: Any, what: str) -> None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise PassError(f"{self.name}: {what}: the size must be a non-negative int, got {size!r}",
                                function=fn.name)
            s = symbols[name]
            if s.choices and size not in s.choices:
                raise PassError(f"{self.name}: {what}: {size} is not one of the sizes {name} allows "
                                f"({', '.join(map(str, s.choices))})", function=fn.name)
            if size < s.lower or (s.upper is not None and size > s.upper):
                upper = "?" if s.upper is None else s.upper
                raise PassError(f"{self.name}: {what}: {size} is outside the range [{s.lower}, {upper}] of {name}",
                                function=fn.name)
            if bindings.setdefault(name, size) != size:
                raise PassError(f"{self.name}: {what}: {name} is already fixed to {bindings[name]}, not {size}",
                                function=fn.name)

        for name, size in self.sizes.items():
            if name in symbols:
                bind(name, size, f"symbol {name}")
        for v in fn.inputs:
            given = self.inputs.get(v.name)
            if given is None:
                continue
            t = v.type.wrapped if isinstance(v.type, StateType) else v.type
            if not isinstance(t, TensorType) or t.shape is None:
                raise PassError(f"{self.name}: input '{v.name}' has no shape to specialize ({v.type})", function=fn.name)
            axes = dict(given) if isinstance(given, Mapping) else dict(enumerate(given))
            if not isinstance(given, Mapping) and len(given) != len(t.shape):
                raise PassError(f"{self.name}: input '{v.name}' has rank {len(t.shape)}, {len(given)} sizes given",
                                function=fn.name)
            for axis, size in axes.items():
                if size is None:
                    continue
                if not -len(t.shape) <= axis < len(t.shape):
                    raise PassError(f"{self.name}: input '{v.name}' has no axis {axis} (rank {len(t.shape)})",
                                    function=fn.name)
                d = t.shape[axis]
                what = f"input '{v.name}' axis {axis}"
                if is_static_dim(d):
                    if int(d) != size:
                        raise PassError(f"{self.name}: {what} is {d}, not {size}", function=fn.name)
                elif isinstance(d, Symbol):
                    bind(d.name, size, what)
                elif isinstance(d, DimExpr):
                    raise PassError(f"{self.name}: {what} is {d}: fix its symbols by name instead", function=fn.name)
        return bindings

    def _narrowed(self, fn: Function, infos: dict[str, FeatureInfo], name: str, t: Type) -> bytes | None:
        """The feature description of ``name`` narrowed to ``t`` (None without one)."""
        info = infos.get(name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        if ft is None:
            return None
        try:
            return desc.narrow_feature(ft, t).SerializeToString()
        except desc.DescriptionError as e:
            raise PassError(f"{self.name}: feature '{name}': {e}", function=fn.name) from None

    def _narrow(self, fn: Function, infos: dict[str, FeatureInfo], name: str, t: Type) -> None:
        narrowed = self._narrowed(fn, infos, name, t)
        if narrowed is not None:
            infos[name] = replace(infos[name], feature_type=narrowed)  # a clone may share the FeatureInfo


def specialize_shapes(program: Program, sizes: Mapping[str, int] | None = None, *,
                      inputs: Mapping[str, InputSizes] | None = None, function: str | None = None) -> bool:
    """Library call: run `SpecializeShapes` on ``program`` in place; whether anything changed."""
    return SpecializeShapes(sizes, inputs=inputs, function=function)(program).modified

