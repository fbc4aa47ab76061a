"""converter: Core ML NeuralNetwork models, MIL programs, ONNX models and WebNN graphs through one SSA IR.

Public API:
    load(src) -> Program             read a model: a path (.mlmodel / .mlpackage / .onnx / WebNN graph),
                                     .mlmodel or .onnx bytes, a Model message, an onnx.ModelProto, or
                                     a coremltools MLModel (get_spec())
    save(program, path, target=...)  write a model (never over anything unless overwrite=True)
    convert(src, to=..., out=...)    load + optimize (the default pass pipeline) + save in one call
                                     (out=None: the converted program stays in memory)
    export(program, to=...)          the Core ML model in memory (ConvertedModel: .spec, .to_bytes(), .save())
    migrate(src_dir, dst_dir, ...)   convert a folder of models in parallel, resumably -> MigrationReport
    optimize(program, pipeline=...)  run a pass pipeline in place; returns statistics per pass
    explain(program, op_name)        which rewrite rules fire at an op, and why the others do not
    run(program, feeds) -> outputs   the reference interpreter, or onnxruntime (runtime="onnxruntime"|"auto")
"""

from __future__ import annotations

from .api import convert, explain, load, optimize, run, save
from .destination import DestinationError
from .errors import (
    ConversionWarning,
    ConverterError,
    FormatError,
    InputWarning,
    RuntimeFallbackWarning,
    UnsupportedError,
)
from .exported import ConvertedModel, export
from .ir.core import Block, Function, Op, Program, Value
from .migration import MigrationReport, migrate

__version__ = "0.1.0"

__all__ = [
    "Block",
    "ConversionWarning",
    "ConvertedModel",
    "ConverterError",
    "DestinationError",
    "FormatError",
    "InputWarning",
    "RuntimeFallbackWarning",
    "MigrationReport",
    "Function",
    "Op",
    "Program",
    "UnsupportedError",
    "Value",
    "__version__",
    "convert",
    "explain",
    "export",
    "load",
    "migrate",
    "optimize",
    "run",
    "save",
]
