"""Running a converted ONNX program on ONNX-style feeds, whatever interface the frontend declares."""

from __future__ import annotations

from typing import Any

import numpy as np

from converter.ir.interpreter import run


def run_program(program: Any, feeds: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """``interpreter.run`` with a rank-0 feed reshaped to [1] where the program declares the input
    [1] (Core ML inputs have rank >= 1, so a frontend may declare ONNX scalar inputs that way)."""
    fn = program.functions["main"]
    declared = {v.name: v.type.shape for v in fn.block.inputs}
    fixed = {}
    for name, x in feeds.items():
        x = np.asarray(x)
        fixed[name] = x.reshape(1) if x.ndim == 0 and declared.get(name) == (1,) else x
    return run(program, fixed, **kwargs)
