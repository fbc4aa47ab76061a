"""Verifying a conversion: run the source and the converted model on the same inputs and judge each
output against a tolerance chosen by its dtype.

``verify(source, converted)`` is the one check every caller uses (``converter verify``,
``convert --check``, batch migration): it takes paths or already loaded Programs, feeds both the
same inputs (given, or ``random_feeds``: values an app could pass: images as H x W x 3 uint8,
flexible dimensions at a size inside their bounds), and returns a `VerifyReport`: per output the
max absolute and relative error, the tolerance, pass/fail, and an overall verdict.

Pairing. Features are paired by name first, then the rest by position (a backend may rename
features: the MIL backend writes ``x.1`` as ``x_1``, but keeps the order of a function's inputs and
outputs); the report notes which were paired by position. Rows are keyed by the source's names.

Tolerances (`tolerance_for`). Errors are measured against the output's scale, its largest finite
magnitude in the source (the max-norm, as numerical error bounds are stated): an output passes when
every element has ``|converted - source| <= atol + rtol * scale``, NaN matching NaN. The max
relative error reported is ``max |converted - source| / scale``. Element-wise relative error would
be the wrong yardstick: a conversion reorders sums (fused batch norms, folded constants, decomposed
layers), and a sum's rounding error scales with the magnitudes summed, not with the result, so an
element that cancels to near 0 legitimately carries an error of the output's scale times epsilon.

- float32 (and float64): ``rtol 1e-4, atol 1e-5``. Core ML computes in float32 at best (a float64
  output, e.g. a NeuralNetwork's DOUBLE output or a classifier's probabilities, is a float32 result
  widened), and a conversion legitimately reorders float32 arithmetic (fused batch norms, folded
  constants, decomposed layers): float32's epsilon is 1.2e-7, and a few hundred reordered roundings
  in a deep network stay well inside 1e-4 relative (measured: the shared models' conversions stay
  below 2e-5 of their scale); ``atol`` covers an output that is all but 0 (scale ~0).
- float16 (an fp16 output, or either model computing in fp16): ``rtol 1e-2, atol 1e-3``: fp16's
  epsilon is 9.8e-4, so a single reordered rounding is already ~1e-3 relative (measured: the fp16
  DTLN_AEC part 2 model, with its optimized conversion, differs by 7e-4 of its scale).
- integers, booleans and strings (class labels, argmax indices): exact.

``rtol``/``atol`` given to `verify` replace both numbers for every float output (exact outputs stay
exact).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ConverterError, EvaluationError, UnsupportedError
from .formats import description as desc
from .ir.core import Function, Program
from .ir.types import Symbol, TensorType, is_static_dim
from .limits import DEFAULT_MAX_TENSOR_BYTES, size_text

#: (rtol, atol) by tolerance class; see the module docstring for why.
TOLERANCES: dict[str, tuple[float, float]] = {"fp32": (1e-4, 1e-5), "fp16": (1e-2, 1e-3), "exact": (0.0, 0.0)}

# -- inputs ---------------------------------------------------------------------------------------


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


# -- comparing two values -------------------------------------------------------------------------

_CHUNK = 1 << 20  # elements per step: float64 copies of a whole large output add up


@dataclass
class _Errors:
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatched: int = 0
    elements: int = 0
    note: str = ""


def _numeric_errors(x: np.ndarray, y: np.ndarray, rtol: float, atol: float) -> _Errors:
    """Errors of ``y`` against the reference ``x`` (same shape, numeric), in chunks: the scale (the
    largest finite magnitude of ``x``) first, then the differences."""
    e = _Errors(elements=int(x.size))
    xs, ys = x.reshape(-1), y.reshape(-1)
    chunks = [slice(start, start + _CHUNK) for start in range(0, xs.size, _CHUNK)]
    scale = 0.0
    for c in chunks:
        xa = np.abs(xs[c].astype(np.float64))
        xa = xa[np.isfinite(xa)]
        if xa.size:
            scale = max(scale, float(xa.max()))
    bound = atol + rtol * scale
    for c in chunks:
        xf, yf = xs[c].astype(np.float64), ys[c].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            same = (xf == yf) | (np.isnan(xf) & np.isnan(yf))
            diff = np.where(same, 0.0, np.abs(xf - yf))
        diff = np.where(np.isnan(diff), np.inf, diff)  # one NaN, or inf - inf
        e.mismatched += int(np.count_nonzero(diff > bound))
        if diff.size:
            e.max_abs = max(e.max_abs, float(diff.max()))
    e.max_rel = e.max_abs / scale if scale > 0 else (0.0 if e.max_abs == 0 else math.inf)
    return e


def _errors(a: Any, b: Any, rtol: float, atol: float) -> _Errors:
    """Errors of output ``b`` (converted) against ``a`` (source); dicts per key, labels exactly."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return _Errors(math.inf, math.inf, 1, 1, "one model gives a dictionary, the other does not")
        if set(a) != set(b):
            only_a, only_b = sorted(map(str, set(a) - set(b))), sorted(map(str, set(b) - set(a)))
            return _Errors(math.inf, math.inf, len(only_a) + len(only_b), len(a),
                           f"labels differ: only in the source {only_a[:5]}, only in the converted {only_b[:5]}")
        keys = list(a)
        return _errors(np.asarray([a[k] for k in keys]), np.asarray([b[k] for k in keys]), rtol, atol)
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return _Errors(math.inf, math.inf, max(x.size, 1), int(x.size),
                       f"shapes differ: {list(x.shape)} (source) vs {list(y.shape)} (converted)")
    if x.dtype.kind in "USO" or y.dtype.kind in "USO":
        try:
            wrong = int(np.count_nonzero(x.astype(str) != y.astype(str)))
        except (TypeError, ValueError):
            wrong = int(x.size)
        return _Errors(math.inf if wrong else 0.0, math.inf if wrong else 0.0, wrong, int(x.size))
    if x.dtype.kind not in "biuf" or y.dtype.kind not in "biuf":
        return _Errors(math.inf, math.inf, int(x.size), int(x.size), f"cannot compare {x.dtype} with {y.dtype}")
    return _numeric_errors(x, y, rtol, atol)


def difference(a: Any, b: Any) -> float:
    """Largest absolute difference between two outputs (inf when shapes or keys disagree)."""
    return _errors(a, b, 0.0, 0.0).max_abs


def tolerance_for(value: Any, *, fp16_compute: bool = False) -> str:
    """The tolerance class ("fp32", "fp16" or "exact") of an output value (see the module docstring)."""
    if isinstance(value, dict):
        return "fp16" if fp16_compute else "fp32"
    kind = np.asarray(value).dtype
    if kind.kind != "f":
        return "exact"
    return "fp16" if fp16_compute or kind == np.float16 else "fp32"


def computes_in_fp16(fn: Function) -> bool:
    """Whether any op of ``fn`` makes an fp16 tensor (its outputs then carry fp16 rounding)."""
    for op in fn.walk():
        for v in op.outputs:
            if isinstance(v.type, TensorType) and v.type.dtype.name == "fp16":
                return True
    return False


# -- the report -----------------------------------------------------------------------------------


@dataclass
class OutputCheck:
    """One output of the source, judged against its pair in the converted model."""

    name: str
    #: the paired output of the converted model; None when it has none
    converted_name: str | None
    #: "name", "position", or None (no pair: the output fails)
    paired_by: str | None
    #: "fp32", "fp16" or "exact" (see `TOLERANCES`)
    tolerance: str
    rtol: float
    atol: float
    max_abs_error: float
    max_rel_error: float
    #: elements outside the tolerance, of ``elements``
    mismatched: int
    elements: int
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.converted_name is not None and self.mismatched == 0 and not self.note

    def tolerance_text(self) -> str:
        return "exact" if self.tolerance == "exact" else f"rtol {self.rtol:g} atol {self.atol:g}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "converted_name": self.converted_name, "paired_by": self.paired_by,
                "tolerance": self.tolerance, "rtol": self.rtol, "atol": self.atol,
                "max_abs_error": _finite(self.max_abs_error), "max_rel_error": _finite(self.max_rel_error),
                "mismatched": self.mismatched, "elements": self.elements, "ok": self.ok, "note": self.note}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass
class VerifyReport:
    """What `verify` found: one `OutputCheck` per source output, notes (pairing by position, extra
    outputs), and the verdict ``ok``. ``to_json()`` follows docs/schemas/verify.schema.json."""

    source: str
    converted: str
    #: "random (seed N)" or where the inputs came from
    inputs: str
    seed: int | None
    outputs: list[OutputCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def failed(self) -> list[OutputCheck]:
        return [o for o in self.outputs if not o.ok]

    def verdict(self) -> str:
        n = len(self.outputs)
        if self.ok:
            return f"PASS: {n} output{'s' * (n != 1)} within tolerance"
        bad = self.failed
        return f"FAIL: {len(bad)} of {n} outputs outside tolerance ({', '.join(o.name for o in bad)})"

    def table(self) -> list[str]:
        """The report as text lines: a header, one row per output, the notes."""
        rows = [("output", "max abs err", "max rel err", "tolerance", "")]
        for o in self.outputs:
            rows.append((o.name, _num(o.max_abs_error), _num(o.max_rel_error), o.tolerance_text(),
                         "ok" if o.ok else "FAIL"))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
        lines = [line.rstrip() for line in lines]
        for o in self.outputs:
            if o.note:
                lines.append(f"note: output '{o.name}': {o.note}")
        lines += [f"note: {n}" for n in self.notes]
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "converted": self.converted, "inputs": self.inputs, "seed": self.seed,
                "ok": self.ok, "verdict": self.verdict(), "outputs": [o.to_json() for o in self.outputs],
                "notes": list(self.notes)}


def _num(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "inf"


# -- pairing --------------------------------------------------------------------------------------


def pair_names(source: list[str], converted: list[str]) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    """Pairs ``(source name, converted name, "name"|"position")``: same names first, then the rest
    in order; and the source and converted names left without a pair."""
    taken = set(source) & set(converted)
    rest_s = [n for n in source if n not in taken]
    rest_c = [n for n in converted if n not in taken]
    by_pos = dict(zip(rest_s, rest_c))
    pairs = []
    for n in source:
        if n in taken:
            pairs.append((n, n, "name"))
        elif n in by_pos:
            pairs.append((n, by_pos[n], "position"))
    return pairs, rest_s[len(by_pos):], rest_c[len(by_pos):]


def _position_note(what: str, pairs: list[tuple[str, str, str]]) -> str | None:
    moved = [f"'{s}' -> '{c}'" for s, c, how in pairs if how == "position"]
    return f"{what} paired by position (no {what[:-1]} of that name): {', '.join(moved)}" if moved else None


# -- verify ---------------------------------------------------------------------------------------

ModelRef = str | os.PathLike | Program


def _onnx_file_runner(model: Any, runtime: str, notes: list[str], side: str, *, required: bool = False,
                      label: str | None = None) -> Any:
    """An `OnnxFileRunner` of ``model`` when it is an ``.onnx`` file and ``runtime`` onnxruntime
    (None otherwise). A source onnxruntime refuses is read into the IR instead (with a note); an
    output it refuses (``required``) is an error: the file written is what the check is about."""
    from .runtimes.onnx_file import OnnxFileRunner, OrtCannotRun, is_onnx_file

    if runtime != "onnxruntime" or not is_onnx_file(model):
        return None
    try:
        return OnnxFileRunner(model)
    except OrtCannotRun as e:
        if required:
            raise EvaluationError(str(e), file=label or str(model)) from None
        notes.append(f"{side}: {e}; its reading into the IR runs instead")
        return None


def _as_comparable(a: Any, b: Any) -> tuple[Any, Any]:
    """Outputs of an ONNX file and of a program in one form: a probabilities tensor against a
    classifier's {label: probability} dict becomes the dict (class order is label order), and a
    size-1 array against a scalar takes the reference's shape."""
    if isinstance(a, dict) and not isinstance(b, dict):
        flat = np.asarray(b).reshape(-1)
        return (a, dict(zip(a, flat.tolist()))) if flat.size == len(a) else (a, b)
    if isinstance(b, dict) and not isinstance(a, dict):
        flat = np.asarray(a).reshape(-1)
        return (dict(zip(b, flat.tolist())), b) if flat.size == len(b) else (a, b)
    if isinstance(a, dict):
        return a, b
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape and x.size == 1 and y.size == 1:
        return a, y.reshape(x.shape)
    return a, b


def _load(model: ModelRef, label: str | None) -> tuple[Program, str]:
    from .api import SOURCE_PATH, load

    if isinstance(model, Program):
        return model, label or model.meta.get(SOURCE_PATH) or "<program>"
    return load(model), label or str(model)


def verify(source: ModelRef, converted: ModelRef, *, inputs: Mapping[str, Any] | str | os.PathLike | None = None,
           seed: int = 0, rtol: float | None = None, atol: float | None = None,
           max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None,
           source_file: str | None = None, converted_file: str | None = None,
           progress: Callable[[str], None] | None = None, runtime: str | None = "interpreter",
           source_onnx: str | os.PathLike | None = None) -> VerifyReport:
    """Run ``source`` and ``converted`` (paths or loaded Programs, default functions) on the same
    inputs and judge each output (see the module docstring).

    ``inputs``: {source input name: array} or an ``.npz`` file of them; default: `random_feeds` of
    the source with ``seed``. ``rtol``/``atol`` replace the dtype's tolerance for float outputs.
    The runs are bounded like `converter.run`'s (``max_loop_iterations``, ``max_tensor_bytes``).
    ``source_file``/``converted_file`` name the models in errors and in the report (default: their
    paths). ``progress`` is called with "running NAME ..." as each model starts (a deep model takes
    seconds). ``runtime``: what runs both models, "interpreter" (the reference, default),
    "onnxruntime" or "auto" (converter/runtimes); a model onnxruntime cannot run is run by the
    interpreter, and the report's notes say so. Errors (a model that cannot be read or run, inputs that do not fit) are
    `ConverterError`s naming the file; a mismatch is not an error but a failing report.

    ONNX files run as they are on onnxruntime (converter/runtimes/onnx_file.py): when the runtime
    is onnxruntime, a model given as an ``.onnx`` path is run from its file by onnxruntime (an
    ONNX source is the user's original model; an ONNX output the file written), not read into the
    IR and exported again; so is ``source_onnx``, the ONNX file the source Program was read from
    unchanged (``convert --check``). The inputs are then the source's, as its program takes them
    (cast to the file's element types), and a size-1 output compares with a scalar.
    """
    from .ir.interpreter import lookup_function
    from .runtime_io import adapt_feeds, check_names
    from .runtimes import prepare, resolve

    for what, x in (("rtol", rtol), ("atol", atol)):
        if x is not None and not (x >= 0 and math.isfinite(x)):
            raise UnsupportedError(f"{what} must be a finite number >= 0, got {x}")
    runtime = resolve(runtime)
    notes: list[str] = []

    def run(program: Program, feeds: Mapping[str, Any], label: str, side: str, *, function: str) -> dict[str, Any]:
        prepared = prepare(program, runtime=runtime, function=function, max_loop_iterations=max_loop_iterations,
                           max_tensor_bytes=max_tensor_bytes)
        say(f"running {label} ...")
        out = prepared.run(feeds)
        if prepared.note:
            notes.append(f"{side}: {prepared.note}")
        return out

    say = progress or (lambda _line: None)
    src_prog, src_label = _load(source, source_file)
    src_direct = _onnx_file_runner(source if source_onnx is None else source_onnx, runtime, notes, "the source")
    try:
        src_fn = lookup_function(src_prog)
        if inputs is None:
            feeds, where = random_feeds(src_fn, seed, max_tensor_bytes=max_tensor_bytes), f"random (seed {seed})"
        elif isinstance(inputs, Mapping):
            feeds, where = dict(inputs), "given"
        else:
            from .npz import read_arrays

            feeds, where = read_arrays(str(inputs)), str(inputs)
        check_names(src_fn, feeds)  # before anything runs: every unknown and missing input at once
        adapted: dict[str, Any] | None = None
        if src_direct is not None:
            adapted = adapt_feeds(src_fn, feeds, max_tensor_bytes=max_tensor_bytes)
            say(f"running {src_label} ...")
            a = src_direct.run(adapted)
        else:
            a = run(src_prog, feeds, src_label, "the source", function=src_fn.name)
    except ConverterError as e:
        raise e.with_location(file=source_file or (None if isinstance(source, Program) else str(source))) from None
    conv_direct = _onnx_file_runner(converted, runtime, notes, "the converted model", required=True,
                                    label=converted_file)
    if conv_direct is not None:
        conv_prog, conv_label, conv_fn = None, converted_file or str(converted), None
        conv_inputs, conv_outputs = conv_direct.input_names, conv_direct.output_names
    else:
        conv_prog, conv_label = _load(converted, converted_file)
    report = VerifyReport(src_label, conv_label, where, seed if inputs is None else None)
    try:
        if conv_prog is not None:
            conv_fn = lookup_function(conv_prog)
            conv_inputs, conv_outputs = [v.name for v in conv_fn.inputs], [v.name for v in conv_fn.outputs]
        if len(src_fn.inputs) != len(conv_inputs):
            raise EvaluationError(
                f"cannot compare: the source has {len(src_fn.inputs)} inputs "
                f"({', '.join(v.name for v in src_fn.inputs)}), the converted model {len(conv_inputs)} "
                f"({', '.join(conv_inputs)})",
                function=None if conv_fn is None else conv_fn.name,
            )
        in_pairs, _, _ = pair_names([v.name for v in src_fn.inputs], conv_inputs)
        note = _position_note("inputs", in_pairs)
        if note:
            report.notes.append(note)
        if conv_direct is not None:
            if adapted is None:
                adapted = adapt_feeds(src_fn, feeds, max_tensor_bytes=max_tensor_bytes)
            say(f"running {conv_label} ...")
            b = conv_direct.run({c: adapted[s] for s, c, _ in in_pairs if s in adapted})
        else:
            b = run(conv_prog, {c: feeds[s] for s, c, _ in in_pairs if s in feeds}, conv_label,
                    "the converted model", function=conv_fn.name)
    except ConverterError as e:
        raise e.with_location(file=converted_file or (None if isinstance(converted, Program) else str(converted))) \
            from None
    out_pairs, _unpaired, extra = pair_names([v.name for v in src_fn.outputs], conv_outputs)
    fp16 = (computes_in_fp16(src_fn) or (conv_direct.fp16 if conv_direct is not None else computes_in_fp16(conv_fn))
            or (src_direct is not None and src_direct.fp16))
    paired = {s: (c, how) for s, c, how in out_pairs}
    if src_direct is not None or conv_direct is not None:
        for s, c, _ in out_pairs:
            if s in a and c in b:
                a[s], b[c] = _as_comparable(a[s], b[c])
    for v in src_fn.outputs:
        value = a.get(v.name)
        cls = tolerance_for(value, fp16_compute=fp16)
        r, t = TOLERANCES[cls]
        if cls != "exact":
            r, t = (r if rtol is None else rtol), (t if atol is None else atol)
        c, how = paired.get(v.name, (None, None))
        if c is None or c not in b:
            report.outputs.append(OutputCheck(v.name, None, None, cls, r, t, math.inf, math.inf, 1, 0,
                                              "the converted model has no such output"))
            continue
        e = _errors(value, b[c], r, t)
        report.outputs.append(OutputCheck(v.name, c, how, cls, r, t, e.max_abs, e.max_rel, e.mismatched,
                                          e.elements, e.note))
    note = _position_note("outputs", out_pairs)
    if note:
        report.notes.append(note)
    if len(notes) == 2 and notes[0].split(": ", 1)[1] == notes[1].split(": ", 1)[1]:
        notes = [f"both models: {notes[0].split(': ', 1)[1]}"]
    report.notes += notes
    if extra:
        report.notes.append(f"the converted model has outputs the source has not: {', '.join(extra)}")
    return report
