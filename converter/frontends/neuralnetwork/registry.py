"""Layer kind -> lowering function. One function per kind (or family of kinds), in layers/*.py.

A lowering receives a LayerContext and returns the layer's output values in the order of
``layer.output``. It builds IR ops (MIL semantics) with ``ctx.b``; everything it needs about the
layer, its inputs, weights and the network's conventions is on the context.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...ir.core import Value
    from .context import LayerContext

Lowering = Callable[["LayerContext"], "Sequence[Value] | Value"]
LOWERINGS: dict[str, Lowering] = {}


def lowers(*kinds: str) -> Callable[[Lowering], Lowering]:
    """Register ``fn`` as the lowering of the given NeuralNetworkLayer kinds (oneof field names)."""

    def deco(fn: Lowering) -> Lowering:
        for kind in kinds:
            if kind in LOWERINGS:
                raise ValueError(f"layer kind '{kind}' lowered twice ({LOWERINGS[kind].__name__}, {fn.__name__})")
            LOWERINGS[kind] = fn
        return fn

    return deco


_loaded = False


def lowering_for(kind: str) -> Lowering | None:
    load_all()
    return LOWERINGS.get(kind)


def load_all() -> dict[str, Lowering]:
    """Import every module of the layers package (each registers its kinds)."""
    global _loaded
    if not _loaded:
        from . import layers

        for info in sorted(pkgutil.iter_modules(layers.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{layers.__name__}.{info.name}")
        _loaded = True
    return LOWERINGS
