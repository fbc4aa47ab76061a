"""Running an ONNX model FILE with onnxruntime as it is: not read into the IR and exported again.

`converter verify` and ``convert --check`` use it for the side of a comparison that is an ``.onnx``
file when the runtime is onnxruntime: an ONNX source is then run from the user's own file (the
reference is the original model, not our reading of it), and an ONNX output is run as written
(the check is of the file the user gets). External data files are read by onnxruntime from beside
the model.

Feeds are the arrays the other side's program takes (`runtime_io.adapt_feeds` of the reference's
function: images as the [1, C, H, W] tensor, int64 inputs as int32 ...); each is cast to the
element type the file declares and, when the file declares a scalar where the IR holds a [1]
tensor, reshaped. Outputs come back as onnxruntime gives them (an ONNX-ML ZipMap's one-element
list of dicts as the dict).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import EvaluationError
from .ort import _ORT_TYPES, OrtCannotRun, _one_line, session_options


def is_onnx_file(model: Any) -> bool:
    """A path naming an ``.onnx`` file."""
    return isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".onnx")


class OnnxFileRunner:
    """One onnxruntime session of the ONNX file ``path``; `OrtCannotRun` when onnxruntime refuses it."""

    def __init__(self, path: str | os.PathLike) -> None:
        import onnxruntime as ort

        self.path = os.fspath(path)
        try:
            self.session = ort.InferenceSession(self.path, session_options(), providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's own exception types (Fail, InvalidGraph, ...)
            raise OrtCannotRun(_one_line(f"onnxruntime cannot load the model: {e}")) from None
        self.inputs = {i.name: (_ORT_TYPES.get(i.type), i.shape) for i in self.session.get_inputs()}
        self.input_names = list(self.inputs)
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.fp16 = any("float16" in x.type for x in (*self.session.get_inputs(), *self.session.get_outputs()))

    def run(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs for ``feeds`` ({input name: array}, see the module docstring)."""
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise EvaluationError(f"no value for input{'s' * (len(missing) > 1)} {', '.join(missing)}")
        ort_feeds = {}
        for name, (dt, shape) in self.inputs.items():
            x = np.asarray(feeds[name])
            if dt is not None and x.dtype != dt:
                x = x.astype(dt)
            if shape is not None and len(shape) == 0 and x.shape != () and x.size == 1:
                x = x.reshape(())
            ort_feeds[name] = x
        try:
            values = self.session.run(self.output_names, ort_feeds)
        except Exception as e:  # onnxruntime's own exception types
            raise EvaluationError(_one_line(f"onnxruntime failed to run the model: {e}")) from None
        return {name: _output(v) for name, v in zip(self.output_names, values)}


def _output(x: Any) -> Any:
    if isinstance(x, list) and len(x) == 1 and isinstance(x[0], dict):  # ZipMap: [{label: probability}]
        return {k: float(v) for k, v in x[0].items()}
    x = np.asarray(x)
    return x.astype(str) if x.dtype.kind == "O" else x


__all__ = ["OnnxFileRunner", "OrtCannotRun", "is_onnx_file"]
