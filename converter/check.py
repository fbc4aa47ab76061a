"""Checking a conversion: run the source and the converted program on the same random inputs.

``random_feeds`` makes inputs an app could pass (images as H x W x 3 uint8, flexible dimensions at
a size inside their bounds); ``compare`` runs both programs and reports the largest difference of
each output (dict outputs, e.g. classifier probabilities, compared per key).

Inputs and outputs of the two programs are paired by position, not by name: a backend may rename
features (the MIL backend writes ``x.1`` as ``x_1``), but keeps the order of a function's inputs
and outputs. Results are keyed by the source program's output names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ConverterError, EvaluationError, UnsupportedError
from .formats import description as desc
from .ir.core import Function, Program
from .ir.types import Symbol, TensorType, is_static_dim
from .limits import DEFAULT_MAX_TENSOR_BYTES, size_text


def _symbol_size(s: Symbol) -> int:
    if s.choices:
        return s.choices[0]
    return max(s.lower, min(s.upper or 4, 4))


def _size(d: Any) -> int:
    if is_static_dim(d):
        return int(d)
    if isinstance(d, Symbol):
        return _symbol_size(d)
    return max(int(d.evaluate({s.name: _symbol_size(s) for s in d.symbols()})), 0)


def _cannot_fake(fn: Function, name: str, t: Any) -> UnsupportedError:
    return UnsupportedError(
        f"cannot make a random value for input '{name}' of type {t}, so the conversion cannot be checked",
        function=fn.name,
        field=f"inputs.{name}",
    )


def random_feeds(fn: Function, seed: int = 0, *, max_tensor_bytes: int | None = None) -> dict[str, Any]:
    """{input name: random value} for every input of ``fn``; `UnsupportedError` naming the input
    when one cannot be made up (a list or state input, a tensor of unknown rank or of strings, or
    one larger than ``max_tensor_bytes``, default `limits.DEFAULT_MAX_TENSOR_BYTES`)."""
    rng = np.random.default_rng(seed)
    limit = DEFAULT_MAX_TENSOR_BYTES if max_tensor_bytes is None else max_tensor_bytes
    feeds: dict[str, Any] = {}
    for v in fn.inputs:
        t = v.type
        if not isinstance(t, TensorType) or t.shape is None:
            raise _cannot_fake(fn, v.name, t)
        shape = [_size(d) for d in t.shape]
        nbytes = int(np.prod(shape, dtype=object)) * max(t.dtype.storage.itemsize, 1)
        if nbytes > limit:
            raise UnsupportedError(
                f"a random value for input '{v.name}' of shape {shape} would take {size_text(nbytes)}, more than "
                f"the limit of {size_text(limit)} per tensor (max_tensor_bytes), so the conversion cannot be checked",
                function=fn.name, field=f"inputs.{v.name}")
        info = fn.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        index_range = info.extra.get("index_range") if info is not None else None
        if index_range:
            feeds[v.name] = rng.integers(0, index_range, shape).astype(t.dtype.storage)
        elif ft is not None and desc.feature_kind(ft) == "imageType":
            h, w = shape[-2], shape[-1]
            img_shape = (h, w) if desc.image_channels(ft) == 1 else (h, w, 3)
            feeds[v.name] = rng.integers(0, 256, img_shape, dtype=np.uint8)
        elif t.dtype.is_float:
            feeds[v.name] = rng.standard_normal(shape).astype(t.dtype.storage)
        elif t.dtype.name == "bool":
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        elif t.dtype.is_int:
            feeds[v.name] = rng.integers(0, 4, shape).astype(t.dtype.storage)
        else:
            raise _cannot_fake(fn, v.name, t)
    return feeds


def difference(a: Any, b: Any) -> float:
    """Largest absolute difference between two outputs (inf when shapes or keys disagree)."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or list(a) != list(b):
            return float("inf")
        return max((difference(np.asarray(a[k]), np.asarray(b[k])) for k in a), default=0.0)
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return float("inf")
    if x.dtype.kind in "USO" or y.dtype.kind in "USO":
        return 0.0 if np.array_equal(x, y) else float("inf")
    if x.size == 0:
        return 0.0
    xs, ys = x.reshape(-1), y.reshape(-1)
    worst = 0.0
    for start in range(0, xs.size, _CHUNK):  # in chunks: float64 copies of a whole large output add up
        xf, yf = xs[start:start + _CHUNK].astype(np.float64), ys[start:start + _CHUNK].astype(np.float64)
        both_nan = np.isnan(xf) & np.isnan(yf)
        diff = np.where(both_nan | (xf == yf), 0.0, np.abs(xf - yf))
        worst = max(worst, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
    return worst


_CHUNK = 1 << 20


def compare(source: Program, converted: Program, *, seed: int = 0, source_file: str | None = None,
            converted_file: str | None = None, max_loop_iterations: int | None = None,
            max_tensor_bytes: int | None = None) -> dict[str, float]:
    """{source output name: largest absolute difference} on one random input.

    The default functions of both programs are run; their inputs and outputs are paired by
    position (see the module docstring). An output the converted program lacks counts as ``inf``.
    ``source_file``/``converted_file``, when given, are named by the errors about each program.
    The runs are bounded like `converter.run`'s (``max_loop_iterations``, ``max_tensor_bytes``).
    """
    from functools import partial

    from .api import run as run_program
    from .ir.interpreter import lookup_function

    run = partial(run_program, max_loop_iterations=max_loop_iterations, max_tensor_bytes=max_tensor_bytes)
    try:
        src_fn = lookup_function(source)
        feeds = random_feeds(src_fn, seed, max_tensor_bytes=max_tensor_bytes)
        a = run(source, feeds, function=src_fn.name)
    except ConverterError as e:
        raise e.with_location(file=source_file) from None
    try:
        conv_fn = lookup_function(converted)
        if len(src_fn.inputs) != len(conv_fn.inputs):
            raise EvaluationError(
                f"cannot compare: the source has {len(src_fn.inputs)} inputs "
                f"({', '.join(v.name for v in src_fn.inputs)}), the converted program {len(conv_fn.inputs)} "
                f"({', '.join(v.name for v in conv_fn.inputs)})",
                function=conv_fn.name,
            )
        b = run(converted, {c.name: feeds[s.name] for s, c in zip(src_fn.inputs, conv_fn.inputs)},
                function=conv_fn.name)
    except ConverterError as e:
        raise e.with_location(file=converted_file) from None
    out: dict[str, float] = {}
    for i, v in enumerate(src_fn.outputs):
        if i < len(conv_fn.outputs) and conv_fn.outputs[i].name in b:
            out[v.name] = difference(a[v.name], b[conv_fn.outputs[i].name])
        else:
            out[v.name] = float("inf")
    return out
