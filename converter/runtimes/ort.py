"""Running a program with onnxruntime: the function is exported to ONNX in memory
(converter/backends/onnx), one InferenceSession is made from the bytes, and each run feeds and
reads it by feature name.

The export holds the function being run (any function of a multifunction program). A state
input is fed its `StateCell`'s value, and the cell takes the graph's ``S_out`` output after the
run (the export's state convention, converter/backends/onnx/lowering/state.py).

Inputs go through `runtime_io.adapt_feeds` first (exactly as for the interpreter: images as
H x W x 3 uint8 become the [1, C, H, W] tensor Core ML builds, optional inputs get their default,
shapes are fitted), then are cast to the element type the ONNX model's interface declares (fp16,
int8, ... as the program's input types say). Outputs come back under their feature names, in the
program's output shapes; a classifier's probabilities become the dict {label: probability} in
class-label order, as the interpreter gives them.

When onnxruntime is not used (`OrtCannotRun`, with a one-line reason; the caller runs the
interpreter instead):
- an op has no ONNX lowering at the opset (the reason names the op types), or a lowering refuses
  a parameter (the backend's message);
- the function has a loop: onnxruntime cannot stop a loop that never ends, the interpreter bounds
  it (``max_loop_iterations``);
- an op would make a tensor larger than ``max_tensor_bytes``: the interpreter refuses it with
  its error before running;
- the export fails (an internal error), the model is over 2 GB (one protobuf message cannot hold
  it), onnxruntime refuses the exported model, or fails during a run.

Session options: full graph optimization (fusions pay back within one run of a conv net; measured
in benchmarks/runtime.py), worker threads that do not spin while idle, warnings off (the reason of
a failure reaches the user through the note).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.core import Function, Program, Value
from ..ir.runtime import StateCell
from ..ir.types import DictType, StateType, TensorType, is_static_dim
from ..limits import DEFAULT_MAX_TENSOR_BYTES, size_text

#: ops whose run onnxruntime cannot bound (the interpreter stops them after max_loop_iterations)
_UNBOUNDED = ("while_loop",)

#: onnxruntime's input type strings -> numpy dtypes
_ORT_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_, "tensor(string)": np.object_,
}

#: a reason is one line; a backend message listing many ops is cut here
_MAX_REASON = 300


class OrtCannotRun(Exception):
    """onnxruntime cannot run this program (the message says why, in one line)."""


def unexportable_ops(fn: Function, opset: int) -> list[str]:
    """The op types of ``fn`` (nested blocks included) with no ONNX lowering at ``opset``, sorted."""
    from ..backends.onnx.lowering import load_all, select

    load_all()
    return sorted({op.type for op in fn.walk() if op.type != "const" and select(op.type, opset) is None})


def _too_big(fn: Function, limit: int) -> str | None:
    """The first op whose static output type is over ``limit`` bytes, as a reason."""
    for op in fn.walk():
        for v in op.outputs:
            t = v.type
            if isinstance(t, TensorType) and t.shape is not None and all(is_static_dim(d) for d in t.shape):
                nbytes = int(np.prod([int(d) for d in t.shape], dtype=object)) * max(t.dtype.storage.itemsize, 1)
                if nbytes > limit:
                    return (f"{op.type} '{op.name}' makes a tensor of {size_text(nbytes)}, over the limit of "
                            f"{size_text(limit)}")
    return None


def blocker(fn: Function, opset: int, max_tensor_bytes: int | None = None) -> str | None:
    """Why onnxruntime must not run ``fn``, known before exporting it (None: nothing known)."""
    missing = unexportable_ops(fn, opset)
    if missing:
        return f"no ONNX form for op{'s' * (len(missing) > 1)} {', '.join(missing)}"
    loops = sorted({op.type for op in fn.walk() if op.type in _UNBOUNDED})
    if loops:
        return f"it has {', '.join(loops)}, whose iterations only the interpreter bounds"
    return _too_big(fn, DEFAULT_MAX_TENSOR_BYTES if max_tensor_bytes is None else max_tensor_bytes)


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_REASON else line[:_MAX_REASON - 3] + "..."


_intra_op_threads: int | None = None


def set_intra_op_threads(n: int | None) -> None:
    """Threads of every onnxruntime session made from now on in this process (None: onnxruntime's
    default, one per core). A migration's worker takes its share of the cores."""
    global _intra_op_threads
    _intra_op_threads = n


def session_options() -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    if _intra_op_threads:
        so.intra_op_num_threads = _intra_op_threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only: a failure reaches the user as the fallback note
    # idle worker threads sleep instead of spinning: on a machine whose cores are shared (a
    # migration's workers, other jobs) spinning threads take the cores the work needs
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


class OrtRunner:
    """``program``'s function ``function`` exported to ONNX and loaded into one onnxruntime
    session; `run` runs it. `OrtCannotRun` when onnxruntime cannot run it (module docstring).
    ``timings``: seconds spent exporting ("export") and making the session ("session")."""

    def __init__(self, program: Program, function: str, *, opset: int | None = None,
                 max_tensor_bytes: int | None = None) -> None:
        import onnxruntime as ort

        from ..backends.onnx import DEFAULT_OPSET, TWO_GB, program_to_onnx

        start = time.perf_counter()
        self.fn = program.functions[function]
        self.max_tensor_bytes = max_tensor_bytes
        opset = DEFAULT_OPSET if opset is None else opset
        reason = blocker(self.fn, opset, max_tensor_bytes)
        if reason:
            raise OrtCannotRun(reason)
        try:
            model = program_to_onnx(program, opset=opset, check=False, function=function, restore_types=False)
        except UnsupportedError as e:
            raise OrtCannotRun(_one_line(e.message)) from None
        except Exception as e:  # a bug in a lowering: the interpreter still runs the model (the note says why)
            raise OrtCannotRun(_one_line(f"internal error in the ONNX export: {type(e).__name__}: {e}")) from None
        if model.ByteSize() >= TWO_GB:
            raise OrtCannotRun("the ONNX model is over 2 GB")
        self.model = model
        exported = time.perf_counter()
        try:
            self.session = ort.InferenceSession(model.SerializeToString(), session_options(),
                                                providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's own exception types (Fail, InvalidGraph, ...)
            raise OrtCannotRun(_one_line(f"onnxruntime refused the exported model: {e}")) from None
        self.input_types = {i.name: _ORT_TYPES.get(i.type) for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]
        states = [v.name for v in self.fn.inputs if isinstance(v.type, StateType)]
        #: (state input, the graph output holding its value at the end): state outputs come first
        self.state_outputs = list(zip(states, (o.name for o in model.graph.output)))
        self.timings = {"export": exported - start, "session": time.perf_counter() - exported}

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs for ``feeds`` (as `converter.run` takes and gives them)."""
        from ..runtime_io import adapt_feeds, adapt_outputs

        adapted = adapt_feeds(self.fn, feeds, max_tensor_bytes=self.max_tensor_bytes)
        ort_feeds = {}
        cells = {name: adapted[name] for name, _ in self.state_outputs if isinstance(adapted[name], StateCell)}
        for name, dt in self.input_types.items():
            x = np.asarray(cells[name].value if name in cells else adapted[name])
            ort_feeds[name] = x if dt is None or x.dtype == dt else x.astype(dt)
        try:
            values = self.session.run(self.output_names, ort_feeds)
        except Exception as e:  # onnxruntime's own exception types
            raise OrtCannotRun(_one_line(str(e))) from None
        got = dict(zip(self.output_names, values))
        for name, out in self.state_outputs:
            if name in cells:
                cells[name].value = np.asarray(got[out]).astype(np.asarray(cells[name].value).dtype, copy=False)
        return adapt_outputs(self.fn, {v.name: _as_ir_output(v, got[v.name]) for v in self.fn.outputs})


def _as_ir_output(v: Value, x: Any) -> Any:
    """An onnxruntime output as the interpreter gives output ``v``: in its declared static shape
    (strings as numpy strings);
    a classifier's dict {label: probability} (from ZipMap's [dict] or a probabilities tensor) in
    class-label order."""
    if isinstance(v.type, DictType):
        labels = _class_labels(v)
        if isinstance(x, list) and len(x) == 1 and isinstance(x[0], dict):
            d = x[0]
            keys = labels if labels is not None and set(labels) == set(d) else list(d)
            return {k: float(d[k]) for k in keys}
        p = np.asarray(x).reshape(-1)
        if labels is None or len(labels) != p.size:
            raise OrtCannotRun(f"cannot read classifier output '{v.name}' from onnxruntime")
        return {k: float(p_i) for k, p_i in zip(labels, p)}
    x = np.asarray(x)
    t = v.type
    if isinstance(t, TensorType) and t.dtype.name == "string" and x.dtype.kind == "O":
        x = x.astype(t.dtype.storage)  # onnxruntime gives str objects; the interpreter numpy strings
    if isinstance(t, TensorType) and t.shape is not None and all(is_static_dim(d) for d in t.shape):
        shape = tuple(int(d) for d in t.shape)
        if x.shape != shape and x.size == int(np.prod(shape, dtype=np.int64)):
            x = x.reshape(shape)
    return x


def _class_labels(v: Value) -> list[Any] | None:
    """The class labels of the ``classify`` op making ``v`` (None when it is not one)."""
    from ..ir.consteval import compile_time_value
    from ..ir.ops.classify import class_labels

    op = v.producer
    if op is None or op.type != "classify":
        return None
    classes = op.inputs.get("classes")
    value = compile_time_value(classes) if isinstance(classes, Value) else None
    return None if value is None else class_labels(value)


__all__ = ["OrtCannotRun", "OrtRunner", "blocker", "session_options", "unexportable_ops"]
