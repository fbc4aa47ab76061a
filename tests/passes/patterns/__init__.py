"""Fusion patterns for the random-program property test (tests/passes/test_random_fusions.py).

Each module of this package holds the decomposed forms one family of rewrite rules fuses, as
`Sprinkle`s, in a module-level list ``SPRINKLES``. The test draws a random program
(tests/ir/test_random_programs.py), writes sprinkles after random fp32 values (in nested blocks
too), makes some of the value's users read the sprinkle's result, runs the default pipeline with
the verifier after every pass, and compares outputs with the tolerance the sprinkles used ask for.
Modules are found by name: adding a family is adding a file, no list to edit.

A sprinkle's ``make(b, x, draw)`` inserts ops with builder ``b`` that compute a value of exactly
``x``'s type from ``x`` (reshape into the rank the pattern needs and back, if it must), drawing any
choice with ``draw`` (hypothesis' draw), or returns None when ``x`` does not suit it (for example a
symbolic shape where the pattern needs a static one). ``fires`` names the rule the pattern is for
(tests check that the rule exists); ``rtol``/``atol``: 0 for exact rewrites.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from converter.ir.builder import Builder
from converter.ir.core import Value

Make = Callable[[Builder, Value, Callable[[Any], Any]], "Value | None"]


@dataclass(frozen=True)
class Sprinkle:
    name: str
    make: Make
    fires: str  # the rule (or pass) this pattern is written for
    rtol: float = 0.0
    atol: float = 0.0


def all_sprinkles() -> list[Sprinkle]:
    """Every sprinkle of every module of this package, in module-name order."""
    out: list[Sprinkle] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.extend(getattr(module, "SPRINKLES", []))
    return out
