"""Pass infrastructure: a pass changes a Program in place and reports what it did.

A pass has a ``name`` and ``run(program) -> PassResult(modified, stats)``; ``stats`` is a small dict
of what it did (a rewrite pass: rewrites by rule). Pipelines are lists of pass objects (not
strings; ``pipelines.py`` builds the named ones). `PassManager` runs them in order, optionally to a
fixed point with an iteration cap, records per pass the op counts before and after, the pass's own
statistics and the time (``--pass-stats``), and with ``verify_each`` (tests, the CLI's
``--verify``) runs the verifier after every pass and names the pass that broke the program. The
full verifier never runs otherwise: passes keep the IR valid by construction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConverterError, PassError, VerifyError
from ..gcpause import paused_gc
from ..ir.core import Program
from ..ir.verify import verify


@dataclass(frozen=True)
class PassResult:
    modified: bool
    #: what the pass did, for ``--pass-stats`` (e.g. ``{"rewrites": {"add_zero": 3}}``); keep it small
    stats: dict[str, Any] = field(default_factory=dict)


class Pass:
    """Subclasses set ``name`` (the name ``--passes`` knows it by; default: the class name) and
    implement ``run``. A pass object may be run many times (each run is independent)."""

    name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    def run(self, program: Program) -> PassResult:  # pragma: no cover - interface
        raise NotImplementedError

    def __call__(self, program: Program) -> PassResult:
        try:
            return self.run(program)
        except ConverterError:
            raise
        except Exception as e:  # noqa: BLE001 - a pass bug becomes a located error
            raise PassError(f"pass {self.name} failed: {type(e).__name__}: {e}") from e

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


def count_ops(program: Program) -> tuple[int, int]:
    """(ops other than ``const``, ``const`` ops), nested blocks included: one walk."""
    ops = consts = 0
    for op in program.walk():
        if op.type == "const":
            consts += 1
        else:
            ops += 1
    return ops, consts


@dataclass
class PassStats:
    """One run of one pass inside a pipeline."""

    name: str
    iteration: int  # 1-based round of the pipeline (fixed-point pipelines run several)
    modified: bool
    ops_before: int  # ops other than const, nested blocks included
    ops_after: int
    consts_before: int
    consts_after: int
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    #: not run: it had run since the program last changed, and changed nothing then
    skipped: bool = False


@dataclass
class PipelineStats:
    """What a `PassManager` run did, pass by pass."""

    passes: list[PassStats] = field(default_factory=list)
    iterations: int = 0

    @property
    def modified(self) -> bool:
        return any(p.modified for p in self.passes)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.passes)

    def rewrites(self) -> dict[str, int]:
        """Rewrites by rule, summed over every pass of the run."""
        out: dict[str, int] = {}
        for p in self.passes:
            for rule, n in p.stats.get("rewrites", {}).items():
                out[rule] = out.get(rule, 0) + n
        return out

    def summary(self) -> str:
        if not self.passes:
            return "no passes run"
        first, last = self.passes[0], self.passes[-1]
        skipped = sum(1 for p in self.passes if p.skipped)
        runs = f"{len(self.passes) - skipped} pass runs" + (f" ({skipped} skipped)" if skipped else "")
        return (f"ops {first.ops_before} -> {last.ops_after} (const ops {first.consts_before} -> "
                f"{last.consts_after}) in {self.seconds:.3f} s, {runs}, "
                f"{self.iterations} round{'s' * (self.iterations != 1)}")

    def format(self) -> str:
        """A table: one line per pass run (ops before -> after, const ops, time, what it did)."""
        lines = [f"{'pass':<24} {'round':>5} {'ops':>15} {'const ops':>15} {'ms':>9}  details"]
        for p in self.passes:
            ops = f"{p.ops_before}->{p.ops_after}"
            consts = f"{p.consts_before}->{p.consts_after}"
            details = "skipped: nothing changed since its last run" if p.skipped else _format_details(p.stats)
            lines.append(f"{p.name:<24} {p.iteration:>5} {ops:>15} {consts:>15} {p.seconds * 1e3:>9.1f}  {details}")
        lines.append(self.summary())
        return "\n".join(lines)


def _format_details(stats: dict[str, Any]) -> str:
    parts = []
    for key, val in stats.items():
        if isinstance(val, dict):
            if val:
                inner = ", ".join(f"{k} {v}" for k, v in sorted(val.items(), key=lambda kv: (-_num(kv[1]), kv[0])))
                parts.append(f"{key}: {inner}")
        elif val:
            parts.append(f"{key} {val}")
    return "; ".join(parts) or "-"


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else 0.0


class PassManager:
    """Runs ``passes`` in order: once, or with ``fixed_point`` until a round changes nothing (at most
    ``max_iterations`` rounds). ``verify_each``: the verifier before the first pass and after each
    pass; a failure raises `PassError` naming the pass that broke the program.

    A pass whose last run changed nothing, with no pass changing the program since, is not run
    again (it would see the same program: its run would change nothing again); it is recorded as
    ``skipped``. So the last round runs only the passes before the last change of the round
    before, not the whole list."""

    def __init__(self, passes: Sequence[Pass], *, fixed_point: bool = False, max_iterations: int = 10,
                 verify_each: bool = False) -> None:
        self.passes = list(passes)
        self.fixed_point = fixed_point
        self.max_iterations = max_iterations
        self.verify_each = verify_each

    def run(self, program: Program) -> PipelineStats:
        """Run the passes (see the class docstring). Python's cyclic garbage collector is paused
        meanwhile: its full collections walk every live object, so on a program of 100k ops they
        made the passes' time per op grow with the program; the garbage the passes make (removed ops)
        is collected when it resumes."""
        with paused_gc():
            return self._run(program)

    def _run(self, program: Program) -> PipelineStats:
        out = PipelineStats()
        if self.verify_each:
            self._verify(program, None)
        ops, consts = count_ops(program) if self.passes else (0, 0)
        runs = 0  # pass runs so far
        last_change = -1  # the run that last changed the program
        unchanged_at: dict[int, int] = {}  # position in the list -> the last run of that pass that changed nothing
        for iteration in range(1, (self.max_iterations if self.fixed_point else 1) + 1):
            out.iterations = iteration
            changed = False
            for position, p in enumerate(self.passes):
                runs += 1
                if unchanged_at.get(position, -1) > last_change:
                    out.passes.append(PassStats(p.name, iteration, False, ops, ops, consts, consts, 0.0, skipped=True))
                    continue
                start = time.perf_counter()
                result = p(program)
                seconds = time.perf_counter() - start
                # an unchanged program keeps its counts: only a pass that changed something is recounted
                ops_after, consts_after = count_ops(program) if result.modified else (ops, consts)
                out.passes.append(PassStats(p.name, iteration, result.modified, ops, ops_after, consts,
                                            consts_after, seconds, dict(result.stats)))
                ops, consts = ops_after, consts_after
                changed |= result.modified
                if result.modified:
                    last_change = runs
                else:
                    unchanged_at[position] = runs
                if self.verify_each:
                    self._verify(program, p)
            if not changed:
                break
        return out

    @staticmethod
    def _verify(program: Program, after: Pass | None) -> None:
        try:
            verify(program)
        except VerifyError as e:
            when = f"after pass {after.name}" if after is not None else "before the first pass"
            raise PassError(f"the program is invalid {when}: {e.message}", function=e.function, op=e.op,
                            op_type=e.op_type, field=e.field) from e
