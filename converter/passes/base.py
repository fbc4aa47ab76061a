"""Pass infrastructure: a pass changes a Program in place and says whether it changed anything.

Pipelines are lists of pass objects (not strings). The manager runs them in order, optionally to a
fixed point with an iteration cap, and runs the verifier after each pass when asked (tests, and
the CLI's --verify), not by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ConverterError, PassError
from ..ir.core import Program
from ..ir.verify import verify


@dataclass(frozen=True)
class PassResult:
    modified: bool


class Pass:
    """Subclasses implement ``run``; ``name`` defaults to the class name."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def run(self, program: Program) -> PassResult:  # pragma: no cover - interface
        raise NotImplementedError

    def __call__(self, program: Program) -> PassResult:
        try:
            return self.run(program)
        except ConverterError:
            raise
        except Exception as e:  # noqa: BLE001 - a pass bug becomes a located error
            raise PassError(f"pass {self.name} failed: {type(e).__name__}: {e}") from e


class PassManager:
    def __init__(self, passes: Sequence[Pass], *, fixed_point: bool = False, max_iterations: int = 10,
                 verify_each: bool = False) -> None:
        self.passes = list(passes)
        self.fixed_point = fixed_point
        self.max_iterations = max_iterations
        self.verify_each = verify_each

    def run(self, program: Program) -> PassResult:
        any_change = False
        for _ in range(self.max_iterations if self.fixed_point else 1):
            changed = False
            for p in self.passes:
                r = p(program)
                changed |= r.modified
                if self.verify_each:
                    verify(program)
            any_change |= changed
            if not changed:
                break
        return PassResult(any_change)
