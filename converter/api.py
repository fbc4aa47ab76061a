"""The library entry points: load, save, convert, run.

``load`` picks the frontend from the model's type; ``save`` picks the backend from the path and
options; ``run`` feeds a program the way a Core ML app would (declared shapes, any numeric dtype,
images as H x W x 3 uint8 RGB arrays) and returns outputs as Core ML reports them (classifier
probabilities as a dict).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import UnsupportedError
from .formats.model_file import read_model_file
from .ir.core import Program

# Model types a frontend reads, by the name of the Model.Type oneof member.
_NEURAL_NETWORK_TYPES = ("neuralNetwork", "neuralNetworkClassifier", "neuralNetworkRegressor",
                         "pipeline", "pipelineClassifier", "pipelineRegressor")


def load(path: str | os.PathLike) -> Program:
    """Read a Core ML model (``.mlmodel`` file or ``.mlpackage`` directory) into the IR."""
    mf = read_model_file(path)
    kind = mf.model.WhichOneof("Type")
    if kind == "mlProgram":
        from .frontends.mil import load_mil_program

        return load_mil_program(mf)
    if kind in _NEURAL_NETWORK_TYPES:
        from .frontends.neuralnetwork import load_neural_network

        return load_neural_network(mf)
    what = f"model type '{kind}' cannot be converted" if kind else "the model has no model type, so it cannot be converted"
    raise UnsupportedError(
        f"{what}: only neural networks (NeuralNetwork, classifier, regressor, pipelines of them) and ML "
        "programs are supported",
        file=str(path),
    )


def save(program: Program, path: str | os.PathLike, *, target: str | None = None, to: str | None = None,
         durable: bool = False) -> Path:
    """Write ``program``. ``to``: "mil" (default; ``.mlpackage``, or a bare ``.mlmodel`` when the path
    ends in .mlmodel and every value can be immediate). ``target``: MIL opset "iOS15".."iOS18".
    Writing is atomic; ``durable=True`` also fsyncs before publishing (power-loss safety)."""
    output_format(to)
    from .backends.mil import save_mlprogram

    return save_mlprogram(program, path, target=target, durable=durable)


def output_format(to: str | None) -> str:
    """The output format ``to`` names for `save` ("mil" when None); `UnsupportedError` if none."""
    fmt = (to or "mil").lower() if isinstance(to, (str, type(None))) else None
    if fmt in ("mil", "mlprogram", "mlpackage"):
        return "mil"
    raise UnsupportedError(f"unknown output format '{to}' (supported: mil)")


def convert(src: str | os.PathLike | Program, *, to: str = "mil", out: str | os.PathLike | None = None,
            target: str | None = None) -> Program:
    """Load ``src`` (a path or a Program), and write it as ``to`` at ``out`` when given."""
    prog = src if isinstance(src, Program) else load(src)
    if out is not None:
        save(prog, out, target=target, to=to)
    return prog


def run(program: Program, feeds: Mapping[str, Any], *, function: str | None = None, seed: int = 0,
        max_loop_iterations: int | None = None, max_tensor_bytes: int | None = None) -> dict[str, Any]:
    """Run ``program`` on ``feeds`` as a Core ML app would (see module docstring). The run is bounded
    (an untrusted model may loop forever or declare huge tensors): ``max_loop_iterations`` per loop
    and ``max_tensor_bytes`` per tensor, defaults in `converter.limits`; beyond them, an
    `EvaluationError`."""
    from .ir.interpreter import Interpreter, lookup_function
    from .runtime_io import adapt_feeds, adapt_outputs

    fn = lookup_function(program, function)
    interpreter = Interpreter(program, seed=seed, max_loop_iterations=max_loop_iterations,
                              max_tensor_bytes=max_tensor_bytes)
    out = interpreter.run(adapt_feeds(fn, feeds, max_tensor_bytes=max_tensor_bytes), fn.name)
    return adapt_outputs(fn, out)
