"""Choosing what runs a program: the reference interpreter, or onnxruntime on the program exported
to ONNX in memory (converter/runtimes/ort.py).

- ``"interpreter"``: converter/ir/interpreter.py, the reference: every IR op, bounded runs.
- ``"onnxruntime"``: native speed, when the optional extra is installed (``pip install
  converter[ort]``) and the ONNX backend can express the program; otherwise the interpreter runs
  it and `Prepared.note` says why (one line naming the ops ONNX cannot express).
- ``"auto"`` (the commands' default): onnxruntime when installed, else the interpreter.

`prepare` makes a runner once (export and session creation are the slow part of a first run);
``runner(feeds)`` runs it as often as needed. ``converter.run``, ``converter.verify``,
``converter run/verify``, ``convert --check`` and ``migrate`` all choose through here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import UnsupportedError
from ..ir.core import Program

#: the runtimes a caller may name ("auto" picks one of them)
RUNTIMES = ("onnxruntime", "interpreter")
CHOICES = ("auto", *RUNTIMES)

Runner = Callable[[Mapping[str, Any]], dict[str, Any]]


def onnxruntime_installed() -> bool:
    """Whether the ``onnxruntime`` package can be imported (without importing it)."""
    return importlib.util.find_spec("onnxruntime") is not None


def resolve(runtime: str | None) -> str:
    """The runtime ``runtime`` names: "auto" (or None) is onnxruntime when installed, else the
    interpreter; naming onnxruntime when it is not installed is an `UnsupportedError`."""
    name = "auto" if runtime is None else runtime
    if name not in CHOICES:
        raise UnsupportedError(f"unknown runtime {runtime!r} (one of {', '.join(CHOICES)})")
    if name == "auto":
        return "onnxruntime" if onnxruntime_installed() else "interpreter"
    if name == "onnxruntime" and not onnxruntime_installed():
        raise UnsupportedError("the onnxruntime runtime needs the onnxruntime package: pip install 'converter[ort]' "
                               "(or use --runtime interpreter)")
    return name


class Prepared:
    """A program ready to run: ``prepared.run(feeds) -> outputs`` (as `converter.run` gives them).
    ``runtime`` is the runtime that runs it; ``note`` says, in one line, why it is not the one asked
    for (empty when it is). A run onnxruntime fails (a shape only known at run time that the
    exported model gets wrong, say) is run again by the interpreter, which from then on runs
    every call (its error, if any, is the reference's). ``ort``: the `ort.OrtRunner` when
    onnxruntime runs it (its exported ``model`` and ``timings``), else None."""

    def __init__(self, runtime: str, run: Runner, fallback: Runner | None = None, note: str = "",
                 ort: Any = None) -> None:
        self.runtime = runtime
        self.note = note
        self.ort = ort
        self._run = run
        self._fallback = fallback

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        if self._fallback is None:
            return self._run(feeds)
        from .ort import OrtCannotRun

        try:
            return self._run(feeds)
        except OrtCannotRun as e:
            self.runtime, self.note = "interpreter", f"onnxruntime failed to run this model ({e}); the interpreter runs it"
            self._run, self._fallback, self.ort = self._fallback, None, None
            return self._run(feeds)


def prepare(program: Program, *, runtime: str | None = "interpreter", function: str | None = None, seed: int = 0,
            max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None) -> Prepared:
    """A runner of ``program``'s ``function`` (default: the default function) on ``runtime``
    (see the module docstring); onnxruntime falls back to the interpreter with a note when it
    cannot run the program. ``seed``, ``max_loop_iterations``, ``max_tensor_bytes``: as for
    `converter.run` (onnxruntime does not bound a run, so a program it could not be trusted to
    keep within them runs in the interpreter: see converter/runtimes/ort.py)."""
    from ..ir.interpreter import lookup_function

    name = resolve(runtime)
    fn = lookup_function(program, function)
    interpreter = _interpreter_runner(program, fn.name, seed, max_loop_iterations, max_tensor_bytes)
    if name == "interpreter":
        return Prepared("interpreter", interpreter)
    from .ort import OrtCannotRun, OrtRunner

    try:
        ort_runner = OrtRunner(program, fn.name, max_tensor_bytes=max_tensor_bytes)
    except OrtCannotRun as e:
        return Prepared("interpreter", interpreter, note=f"onnxruntime cannot run this model ({e}); the interpreter "
                        "runs it")
    return Prepared("onnxruntime", ort_runner.run, fallback=interpreter, ort=ort_runner)


def _interpreter_runner(program: Program, function: str, seed: int, max_loop_iterations: int | None,
                        max_tensor_bytes: int | None) -> Runner:
    from ..ir.interpreter import Interpreter, lookup_function
    from ..runtime_io import adapt_feeds, adapt_outputs

    fn = lookup_function(program, function)

    def run(feeds: Mapping[str, Any]) -> dict[str, Any]:
        interpreter = Interpreter(program, seed=seed, max_loop_iterations=max_loop_iterations,
                                  max_tensor_bytes=max_tensor_bytes)
        return adapt_outputs(fn, interpreter.run(adapt_feeds(fn, feeds, max_tensor_bytes=max_tensor_bytes), fn.name))
    return run


__all__ = ["CHOICES", "RUNTIMES", "Prepared", "Runner", "onnxruntime_installed", "prepare", "resolve"]
