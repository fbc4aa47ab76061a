"""Shared helpers for the MIL program tests: the shared models, random feeds, program comparison,
and coremltools' MIL proto loader (imported lazily: importing coremltools takes seconds)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from converter.ir.builder import Builder, new_program
from converter.ir.core import Function, Program
from converter.ir.runtime import ListValue
from converter.ir.text import print_program
from converter.ir.types import StateType, Symbol, TensorType, tensor
from tests.conftest import MODELS

TORCH = MODELS / "torch"
# Every mlProgram model of the shared data (the manifest says which files are ML programs).
MLPROGRAM_PACKAGES = sorted([*MODELS.glob("real/*.mlpackage"), *MODELS.glob("torch/*.mlpackage")])
# Above this many elements a constant is compared as bytes rather than as printed text (printing
# every float of a 2 MB weight with its shortest round-trip repr takes seconds).
ELIDE_ABOVE = 256


def model_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def dim_size(d: Any) -> int:
    """A size for a dimension: static dims as they are, a symbol its upper bound (or lower + 1)."""
    if not isinstance(d, Symbol):
        return int(d)
    if d.choices:
        return int(d.choices[-1])
    return int(d.upper) if d.upper is not None else int(d.lower) + 1


def random_feeds(prog: Program, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs of the declared shapes (flexible dims at their upper bound, which differs
    from the lower bound of every flexible model here). Magnitude inputs (spectra) are
    non-negative, as the model's own log/sqrt expect."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in prog.main.inputs:
        t = v.type.wrapped if isinstance(v.type, StateType) else v.type
        assert isinstance(t, TensorType) and t.shape is not None, f"{v.name}: {t}"
        shape = [dim_size(d) for d in t.shape]
        if t.dtype.is_float:
            x = rng.uniform(-1.0, 1.0, shape)
            if "magnitude" in v.name:
                x = np.abs(x)
        else:
            x = rng.integers(0, 100, shape)
        feeds[v.name] = x.astype(t.dtype.storage)
    return feeds


def program_text(prog: Program) -> str:
    return print_program(prog, elide_above=ELIDE_ABOVE)


def large_constants(prog: Program) -> list[tuple[str, str, tuple, bytes]]:
    """(op name, dtype, shape, bytes) of every constant the elided text leaves out, in program order."""
    out = []
    for op in prog.walk():
        val = op.attributes.get("val")
        if op.type in ("const", "_const_symbolic") and isinstance(val, np.ndarray) and val.size > ELIDE_ABOVE:
            out.append((op.name, str(val.dtype), val.shape, np.ascontiguousarray(val).tobytes()))
    return out


def assert_same_program(a: Program, b: Program) -> None:
    """The two programs print identically. Text of large constants is replaced by a comparison of
    their bytes (dtype, shape and bits equal <=> the printed text of the value is equal)."""
    ta, tb = program_text(a), program_text(b)
    if ta != tb:
        import difflib

        diff = "\n".join(list(difflib.unified_diff(ta.splitlines(), tb.splitlines(), lineterm="", n=1))[:40])
        raise AssertionError(f"program text differs:\n{diff}")
    ca, cb = large_constants(a), large_constants(b)
    assert [c[:3] for c in ca] == [c[:3] for c in cb]
    for x, y in zip(ca, cb):
        assert x[3] == y[3], f"constant '{x[0]}' differs"


def same_bits(a: Any, b: Any) -> bool:
    """Bit-identical run-time values (NaN payloads included), dicts and lists element-wise."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_bits(a[k], b[k]) for k in a)
    if isinstance(a, ListValue):
        return isinstance(b, ListValue) and len(a.items) == len(b.items) and all(
            same_bits(x, y) for x, y in zip(a.items, b.items))
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "USO":
        return a.dtype.kind == b.dtype.kind and a.shape == b.shape and bool(np.all(a == b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def tree_digest(root: Path) -> str:
    """A digest of every file name, mode and content under ``root`` (to prove it was not modified)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        st = p.lstat()
        h.update(str(st.st_mode).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def torch_results() -> dict[str, Any]:
    return json.loads((TORCH / "RESULTS.json").read_text())["models"]


def torch_conversions() -> list[tuple[str, str, dict[str, Any]]]:
    """(model name, conversion kind, record) of every torch-derived .mlpackage that exists."""
    out = []
    for name, rec in torch_results().items():
        for kind, conv in rec.items():
            if isinstance(conv, dict) and str(conv.get("path", "")).endswith(".mlpackage") and (
                    MODELS / conv["path"]).is_dir():
                out.append((name, kind, conv))
    return out


def multifunction_program():
    """Two functions (iOS18): main(x) -> relu, second(y) -> linear with a blob weight."""
    prog = new_program({"x": tensor("fp32", [2, 3])}, lambda b, x: [b.relu(x=x, name="r")], opset="iOS18")
    fn = prog.add_function(Function("second", "iOS18"))
    y = fn.block.new_input("y", tensor("fp32", [4]))
    b = Builder(fn.block)
    fn.block.set_outputs([b.linear(x=b.expand_dims(x=y, axes=[0]), weight=np.ones((12, 4), np.float32), name="l")])
    return prog


# -- coremltools ---------------------------------------------------------------------------------


class CoremltoolsLoader:
    """coremltools' MIL proto loader, which re-runs coremltools' type inference on every op."""

    def __init__(self) -> None:
        import logging
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.getLogger("coremltools").setLevel(logging.ERROR)
            from coremltools import proto
            from coremltools.converters.mil.frontend.milproto.load import load

        self._load = load
        self._proto = proto

    def load(self, path: Path):
        """The coremltools Program of one of our packages or bare .mlmodel files (raises what
        coremltools raises)."""
        if path.is_dir():
            model, weights = path / "Data" / "com.apple.CoreML" / "model.mlmodel", path / "Data" / "com.apple.CoreML" / "weights"
        else:
            model, weights = path, None
        spec = self._proto.Model_pb2.Model()
        spec.ParseFromString(model.read_bytes())
        return self._load(spec, spec.specificationVersion, str(weights) if weights else "")

    @staticmethod
    def op_types(program) -> set[str]:
        out: set[str] = set()

        def walk(block) -> None:
            for op in block.operations:
                out.add(op.op_type)
                for b in op.blocks:
                    walk(b)

        for fn in program.functions.values():
            walk(fn)
        return out
