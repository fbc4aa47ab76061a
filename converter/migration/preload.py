"""Imported once by each worker factory (zygote.py), so that every worker forked from it
starts with the converter loaded (readers, writers, passes, interpreter, the ONNX export of the
onnxruntime check) instead of importing it again per model. onnxruntime itself is imported in the
worker: importing it starts a thread, and a process should not fork while other threads run."""

from __future__ import annotations

import converter.api  # noqa: F401
import converter.backends.mil  # noqa: F401
import converter.backends.neuralnetwork  # noqa: F401
import converter.check  # noqa: F401
import converter.formats.package  # noqa: F401
import converter.frontends.mil  # noqa: F401
import converter.frontends.neuralnetwork  # noqa: F401
import converter.ir.interpreter  # noqa: F401
import converter.migration.worker  # noqa: F401
import converter.passes.pipelines  # noqa: F401
import converter.runtimes.ort  # noqa: F401 (onnxruntime is imported when a session is made)
from converter.backends.onnx.lowering import load_all

load_all()
