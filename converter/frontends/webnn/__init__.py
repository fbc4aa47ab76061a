"""WebNN frontend: a WebNN graph -> the IR.

Two inputs: a ``model.js`` ES module following the contract of our WebNN backend (exports
``inputs``, ``outputs`` and ``async build(context, weights)``), which is run under Node with a
recording, validating ``MLGraphBuilder`` (recorder.mjs); and the JSON graph file that recorder
writes (``*.webnn.json``, docs/webnn-graph-format.md), read without Node.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...ir.core import Program
from .graph import GRAPH_SUFFIX, read_graph
from .to_ir import graph_to_program

#: Suffixes of WebNN JavaScript modules `converter.load` runs through the recorder.
MODULE_SUFFIXES = (".js", ".mjs")


def is_webnn_path(path: str | os.PathLike) -> bool:
    name = Path(path).name.lower()
    return name.endswith(GRAPH_SUFFIX) or name.endswith(MODULE_SUFFIXES)


def load_webnn(path: str | os.PathLike) -> Program:
    """Read a WebNN graph (``model.js`` through Node, or a ``.webnn.json`` graph file) into the IR."""
    p = Path(path)
    if p.name.lower().endswith(GRAPH_SUFFIX):
        return graph_to_program(read_graph(p))
    from .record import record_module

    return record_module(p, graph_to_program)


__all__ = ["GRAPH_SUFFIX", "MODULE_SUFFIXES", "is_webnn_path", "load_webnn"]
