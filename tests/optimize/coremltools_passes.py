"""coremltools' default pass pipeline applied to a loaded MIL program, as ``ct.convert`` applies it.

``ct.convert(..., compute_precision=FLOAT32)`` runs ``PassPipeline.DEFAULT`` without its two fp16
passes (``add_fp16_cast``, ``add_int16_cast``), then the ``backend_mlprogram`` pipeline. Applied in
that form to coremltools' own reading of an EMPTY-pipeline package, it yields the same program
(op for op, constants included) as ``ct.convert`` with the DEFAULT pipeline:
tests/optimize/test_sources.py checks that, so the two can be used interchangeably as "coremltools'
default pipeline on the same program".

``PassTimer`` times each pass of a run of ``PassPipelineManager.apply_pipeline`` (coremltools'
own loop, which also re-validates the whole program after every pass; the time between passes is
that validation).
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

FP16_PASSES = frozenset({"common::add_fp16_cast", "common::add_int16_cast"})


def _coremltools_passes() -> Any:
    warnings.simplefilter("ignore")
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    from coremltools.converters.mil.mil.passes import pass_pipeline

    return pass_pipeline


def default_pipelines() -> list[Any]:
    """[the fp32 main DEFAULT pipeline, the backend_mlprogram pipeline]."""
    pp = _coremltools_passes()
    main = pp.PassPipeline.DEFAULT
    main.remove_passes(FP16_PASSES)
    return [main, pp.PassPipeline.get_pipeline("backend_mlprogram")]


def apply_default(program: Any, *, backend: bool = True) -> Any:
    """Run coremltools' default pipeline (and its ML program backend pipeline) on ``program`` in place."""
    pp = _coremltools_passes()
    for pipeline in default_pipelines()[: 2 if backend else 1]:
        pp.PassPipelineManager.apply_pipeline(program, pipeline)
    return program


class PassTimer:
    """While active, records (pass name, start, end) of every pass coremltools' pipeline manager runs
    (``perf_counter`` seconds). ``on_pass`` is called after each pass (progress reports)."""

    def __init__(self, on_pass: Any = None) -> None:
        self.records: list[tuple[str, float, float]] = []
        self.on_pass = on_pass
        self._pp = _coremltools_passes()
        self._registry = self._pp.PASS_REGISTRY

    def __enter__(self) -> PassTimer:
        timer, registry = self, self._registry

        class TimedRegistry:
            def __getitem__(self, name: str) -> Any:
                return _TimedPass(name, registry[name], timer)

            def __contains__(self, name: str) -> bool:
                return name in registry

            def __getattr__(self, attr: str) -> Any:
                return getattr(registry, attr)

        self._pp.PASS_REGISTRY = TimedRegistry()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pp.PASS_REGISTRY = self._registry


class _TimedPass:
    def __init__(self, name: str, inner: Any, timer: PassTimer) -> None:
        self.name, self.inner, self.timer = name, inner, timer

    def set_options(self, options: Any) -> None:
        self.inner.set_options(options)

    def __call__(self, program: Any) -> None:
        start = time.perf_counter()
        self.inner(program)
        end = time.perf_counter()
        self.timer.records.append((self.name, start, end))
        if self.timer.on_pass is not None:
            self.timer.on_pass(self.name, start, end)


def pass_effects(program: Any) -> list[tuple[str, dict[str, int]]]:
    """Run coremltools' default + backend pipelines on ``program`` in place; (pass name, {op type:
    change in count}) for every pass that changed the op histogram (consts not counted), in order.
    The map of which coremltools pass removed what, for the pass writers."""
    from .counting import ct_op_histogram

    effects: list[tuple[str, dict[str, int]]] = []
    last = [ct_op_histogram(program)]

    def record(name: str, start: float, end: float) -> None:
        now = ct_op_histogram(program)
        delta = {k: now[k] - last[0][k] for k in sorted(set(now) | set(last[0])) if now[k] != last[0][k]}
        if delta:
            effects.append((name, delta))
        last[0] = now

    with PassTimer(record):
        apply_default(program)
    return effects
