"""IR -> WebNN: a folder with model.js (graph-builder JavaScript), model.bin, model.d.ts, index.html.

- WebNN graphs are static: symbolic sizes are fixed first (``input_shapes``, else each flexible
  input's model-declared default shape; none -> `UnsupportedError`), then constants are folded.
- ``layout``: "nhwc" (default: the layout Chromium reports as preferred, `opSupportLimits().
  preferredInputLayout`; its CPU backend builds and runs convolutions in it without transposes of
  its own: ResNet-18 builds in about half the time) or "nchw" (the IR's) inside the graph; inputs
  and outputs keep their shapes either way.
- ``precision``: "fp32", or "fp16" (weights stored and computed as float16; float32 inputs and
  outputs are cast at the graph's edges).
- Every op that cannot be lowered is listed in one `UnsupportedError`.
- The folder is written beside its destination and renamed into place when complete; the program
  given is not modified.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConversionWarning, UnsupportedError
from ...formats import description as desc
from ...formats.atomic import fsync_tree, replace_path, temp_name_beside
from ...ir.clone import clone_program
from ...ir.core import Function, Op, Program
from ...ir.types import TensorType, is_static_shape
from .demo_page import render_demo_page
from .graph import LoweredGraph, lower_function
from .module_js import render_module
from .typescript import render_declarations
from .weights import WeightFile

LAYOUTS = ("nchw", "nhwc")
PRECISIONS = ("fp32", "fp16")


def default_input_shape(fn: Function, name: str) -> list[int] | None:
    """The model-declared default shape of a flexible input (None if it declares none)."""
    info = fn.input_info.get(name)
    ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
    if ft is None:
        return None
    kind = desc.feature_kind(ft)
    if kind == "multiArrayType" and len(ft.multiArrayType.shape):
        return [int(d) for d in ft.multiArrayType.shape]
    if kind == "imageType" and ft.imageType.width and ft.imageType.height:
        return [1, desc.image_channels(ft), int(ft.imageType.height), int(ft.imageType.width)]
    return None


def _aligned_default(t: TensorType, declared: list[int] | None) -> list[int] | None:
    """The declared default as a full IR shape: a NeuralNetwork input declared [C] or [C, H, W]
    is the IR tensor [Seq, B, C, H, W] whose leading flexible dims default to 1 (Core ML's default
    sequence length and batch)."""
    if declared is None or t.shape is None or len(declared) > len(t.shape):
        return None
    # NeuralNetwork rank-5 tensors are [Seq, Batch, C, H, W]: a declared [C] or [C, H, W] starts at C
    lead = 2 if len(t.shape) == 5 and len(declared) in (1, 3) else len(t.shape) - len(declared)
    shape: list[int] = []
    for i, d in enumerate(t.shape):
        if lead <= i < lead + len(declared):
            shape.append(declared[i - lead])
        elif isinstance(d, int):
            shape.append(d)
        elif getattr(d, "lower", 2) <= 1:
            shape.append(1)
        else:
            return None
    return shape


def _static_sizes(fn: Function, input_shapes: Mapping[str, Sequence[int]], source: str | None = None
                  ) -> dict[str, list[int]]:
    unknown = sorted(set(input_shapes) - {v.name for v in fn.inputs})
    if unknown:
        raise UnsupportedError(f"--input-shape names no input of the model: {', '.join(map(repr, unknown))} "
                               f"(inputs: {', '.join(repr(v.name) for v in fn.inputs)})", file=source)
    sizes: dict[str, list[int]] = {}
    problems = []
    for v in fn.inputs:
        t = v.type
        if not isinstance(t, TensorType):
            continue
        given = input_shapes.get(v.name)
        if given is not None:
            given = [int(d) for d in given]
            if t.rank is not None and len(given) != t.rank:
                problems.append(f"input '{v.name}': --input-shape has {len(given)} sizes for rank {t.rank}")
                continue
            sizes[v.name] = given
        elif not is_static_shape(t.shape):
            default = _aligned_default(t, default_input_shape(fn, v.name))
            if default is None:
                problems.append(f"input '{v.name}' has a flexible shape {t} and no declared default; "
                                f"give one with --input-shape {v.name}=...")
                continue
            sizes[v.name] = default
    if problems:
        raise UnsupportedError("WebNN graphs are static: " + "; ".join(problems), file=source)
    return sizes


def prepare_program(program: Program, input_shapes: Mapping[str, Sequence[int]] | None = None,
                    source: str | None = None) -> Program:
    """A copy of ``program`` with static shapes, its constants folded and its control flow
    flattened where its course is known at conversion time (what lowering needs)."""
    return _prepare(program, input_shapes, source)[0]


def _prepare(program: Program, input_shapes: Mapping[str, Sequence[int]] | None, source: str | None = None
             ) -> tuple[Program, dict[Op, str]]:
    """`prepare_program`, and the ops whose control flow could not be flattened, with why."""
    from ...api import optimize
    from ...passes.canonicalize import Canonicalize
    from ...passes.dce import DeadCodeElimination
    from ...passes.fold_constants import FoldConstants
    from ...passes.specialize import SpecializeShapes
    from ...passes.unroll import UnrollControlFlow

    prog = clone_program(program)[0]
    fn = prog.main
    sizes = _static_sizes(fn, input_shapes or {}, source)
    if sizes:
        SpecializeShapes(inputs={k: list(v) for k, v in sizes.items()}, function=fn.name).run(prog)
    # WebNN has no compressed weights and no ops on constants worth keeping: fold everything
    def cleanup() -> list:
        return [FoldConstants(expand_constexpr=True, max_bytes=1 << 31), Canonicalize(), DeadCodeElimination()]

    optimize(prog, cleanup())
    # WebNN graphs have no branches or loops: unroll loops with a known trip count, select between
    # the branches of a cond, lists with known indices as tensors; then fold what that made constant
    unroll = UnrollControlFlow()
    if unroll.run(prog).modified:
        optimize(prog, cleanup())
    return prog, unroll.refused


def write_webnn(program: Program, out: str | os.PathLike, *, layout: str = "nhwc", precision: str = "fp32",
                input_shapes: Mapping[str, Sequence[int]] | None = None, overwrite: bool = False,
                source: str | None = None, durable: bool = False) -> Path:
    """Write ``program``'s main function as a WebNN folder at ``out`` (see the module docstring);
    ``durable``: fsync before publishing, as `converter.save` does."""
    if layout not in LAYOUTS:
        raise UnsupportedError(f"unknown layout '{layout}' (one of: {', '.join(LAYOUTS)})")
    if precision not in PRECISIONS:
        raise UnsupportedError(f"unknown precision '{precision}' (one of: {', '.join(PRECISIONS)})")
    prog, refused = _prepare(program, input_shapes, source)
    fn = prog.main
    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name_beside(dest)
    tmp.mkdir()
    try:
        with open(tmp / "model.bin", "w+b") as f:  # read back only to compare same-sized constants
            weights = WeightFile(f)
            graph = lower_function(fn, weights, layout=layout, precision=precision, source=source,
                                   refused=refused)
        if graph.unused_inputs:
            names = ", ".join(repr(n) for n in graph.unused_inputs)
            warnings.warn(ConversionWarning(f"input(s) {names} are read by no output: the WebNN graph does not take "
                                            "them"), stacklevel=2)
        header = _header(program, source, layout, precision, graph, weights)
        (tmp / "model.js").write_text(render_module(graph, header=header, weight_bytes=weights.size), encoding="utf-8")
        (tmp / "model.d.ts").write_text(render_declarations(graph), encoding="utf-8")
        (tmp / "index.html").write_text(render_demo_page(graph, title=_title(source), image_inputs=_images(fn)),
                                        encoding="utf-8")
        if durable:
            fsync_tree(tmp)
        replace_path(tmp, dest, overwrite=overwrite or _is_empty_dir(dest))
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _is_empty_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and not any(p.name != ".DS_Store" for p in path.iterdir())


def _title(source: str | None) -> str:
    return Path(source).stem if source else "model"


def _images(fn: Function) -> dict[str, Any]:
    """Image inputs: name -> {colorSpace, height, width, channels} (the demo page fills them from a
    picture: a [1, C, H, W] tensor of the input's static size, in the model's colour order)."""
    from ...formats.proto import FeatureTypes_pb2

    images = {}
    for v in fn.inputs:
        info = fn.input_info.get(v.name)
        ft = desc.feature_from_bytes(info.feature_type) if info is not None else None
        if ft is None or desc.feature_kind(ft) != "imageType":
            continue
        shape = v.type.shape if isinstance(v.type, TensorType) else None
        if shape is None or len(shape) < 3 or not is_static_shape(shape):
            continue  # the page fills it with random values
        space = FeatureTypes_pb2.ImageFeatureType.ColorSpace.Name(ft.imageType.colorSpace)
        images[v.name] = {"colorSpace": space, "height": int(shape[-2]), "width": int(shape[-1]),
                          "channels": int(shape[-3])}
    return images


def _header(program: Program, source: str | None, layout: str, precision: str, graph: LoweredGraph,
            weights: WeightFile) -> list[str]:
    from ... import __version__

    return [
        f"Generated by converter {__version__} (WebNN backend): {Path(source).name if source else 'a program'}",
        f"layout {layout}, precision {precision}; {graph.stats.get('calls', 0)} builder calls, "
        f"{weights.count} constants ({weights.size} bytes in model.bin)",
        "Exports: inputs, outputs, labels, classifier, build(context, weights), load(context, url), "
        "run(context, graph, feeds).",
    ]


__all__ = ["LAYOUTS", "PRECISIONS", "default_input_shape", "prepare_program", "write_webnn"]
