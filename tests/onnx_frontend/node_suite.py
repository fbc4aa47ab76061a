"""ONNX's operator test suite, run through ONNX -> IR -> our interpreter.

Cases: the node tests that ship in the ``onnx`` package as code
(``onnx.backend.test.case.node.collect_testcases()``: one-node models, or the function-expanded
``*_expanded`` variants, each with inputs and the outputs written by ONNX's authors), generated
in the session, plus the model folders shipped under ``onnx/backend/test/data/{pytorch-converted,
pytorch-operator,simple}`` (``model.onnx`` + ``test_data_set_*/{input,output}_*.pb``).

Each case gets one status:
- ``pass``: every output matches (shape, and values with the case's rtol/atol, onnx's defaults
  1e-3 / 1e-7; integer outputs compare by value, since int64 is held as int32);
- ``fail``: converted and ran, wrong shape or values;
- ``unsupported``: the converter refused it with an UnsupportedError (the reason is kept);
- ``error``: any other error (a FormatError on a valid ONNX test model is our bug).

Parameter inputs: many node tests feed parameters that real models hold as constants (Squeeze's
axes, Slice's starts, Pad's pads, ...) as graph inputs. The IR needs those at conversion time, so
when the converter refuses a case because an input must be known at conversion time (an
UnsupportedError whose ``details`` name it), the harness binds that graph input to the data
set's value as an initializer and converts again (per data set); such results are marked
``frozen`` (the names of the inputs bound) and counted separately in the report.

A case's ``ops`` are the op types its model holds; it counts as "supported" when every one of
them is in the frontend's registry (whatever version).
"""

from __future__ import annotations

import glob
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from converter.errors import ConverterError, UnsupportedError

DATA_SUITES = ("pytorch-converted", "pytorch-operator", "simple")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7


@dataclass
class Case:
    name: str
    suite: str  # "node" or one of DATA_SUITES
    model: onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]  # (inputs in graph-input order, outputs in graph-output order)
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    ops: tuple[str, ...] = ()


@dataclass
class Result:
    name: str
    suite: str
    ops: tuple[str, ...]
    status: str  # pass | fail | unsupported | error
    detail: str = ""
    supported: bool = field(default=False)
    frozen: tuple[str, ...] = ()  # graph inputs bound to constants (see module doc)


def _op_types(graph: onnx.GraphProto) -> set[str]:
    out: set[str] = set()
    for n in graph.node:
        out.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= _op_types(a.g)
            for g in a.graphs:
                out |= _op_types(g)
    return out


def node_cases() -> list[Case]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            raw = collect_testcases(None)
    return [Case(c.name, "node", c.model, [(list(i), list(o)) for i, o in c.data_sets], c.rtol, c.atol,
                 tuple(sorted(_op_types(c.model.graph)))) for c in raw]


def _read_pb(path: str) -> Any:
    data = Path(path).read_bytes()
    t = onnx.TensorProto()
    t.ParseFromString(data)
    if t.data_type:
        return numpy_helper.to_array(t)
    seq = onnx.SequenceProto()
    seq.ParseFromString(data)
    return [numpy_helper.to_array(x) for x in seq.tensor_values]


def data_cases(root: str | os.PathLike | None = None) -> list[Case]:
    base = Path(root) if root is not None else Path(onnx.__file__).parent / "backend" / "test" / "data"
    cases = []
    for suite in DATA_SUITES:
        for d in sorted((base / suite).iterdir()):
            mpath = d / "model.onnx"
            if not mpath.is_file():
                continue
            model = onnx.load(str(mpath), load_external_data=False)
            sets = []
            for ds in sorted(glob.glob(str(d / "test_data_set_*"))):
                n_in = len(glob.glob(os.path.join(ds, "input_*.pb")))
                n_out = len(glob.glob(os.path.join(ds, "output_*.pb")))
                sets.append(([_read_pb(os.path.join(ds, f"input_{i}.pb")) for i in range(n_in)],
                             [_read_pb(os.path.join(ds, f"output_{i}.pb")) for i in range(n_out)]))
            cases.append(Case(d.name, suite, model, sets, ops=tuple(sorted(_op_types(model.graph)))))
    return cases


def all_cases() -> list[Case]:
    return node_cases() + data_cases()


def _plain(x: Any) -> Any:
    """A test value as a numpy array of a numpy dtype: TensorProtos are read, ml_dtypes' bf16 /
    float8 / float4 arrays become fp32 and int4 / int2 (uint4 / uint2) int8 (uint8), how the dtype
    policy holds them (their values are exact there)."""
    if isinstance(x, onnx.TensorProto):
        x = numpy_helper.to_array(x)
    if isinstance(x, np.ndarray) and x.dtype.kind == "V":
        narrow_int = {"int4": np.int8, "int2": np.int8, "uint4": np.uint8, "uint2": np.uint8}
        x = x.astype(narrow_int.get(x.dtype.name, np.float32))
    return x


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "OUS":
        return "string output"
    if want.dtype.kind == "b" or want.dtype.kind in "iu":
        if got.dtype.kind == "f":
            return f"dtype {got.dtype}, expected {want.dtype}"
        if not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
            bad = int(np.sum(got.astype(np.int64) != want.astype(np.int64)))
            return f"{bad} of {want.size} values differ"
        return None
    if got.dtype.kind != "f":
        return f"dtype {got.dtype}, expected {want.dtype}"
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        ok = np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        i = int(np.argmin(ok.reshape(-1)))
        return f"{int((~ok).sum())} of {want.size} values differ (e.g. got {g64.reshape(-1)[i]!r}, expected {w64.reshape(-1)[i]!r})"
    return None


def run_case(case: Case, supported_ops: set[str] | None = None, *, via_mil: bool = False) -> Result:
    """Convert and run one case; never raises for a converter or interpreter error. ``via_mil``:
    ONNX -> IR -> MIL ``.mlpackage`` (a temporary folder) -> IR -> interpreter instead."""
    from converter.ir.interpreter import run

    if supported_ops is None:
        from converter.frontends.onnx import ops  # noqa: F401  (fills the registry)
        from converter.frontends.onnx.registry import MAPPINGS

        supported_ops = set(MAPPINGS)
    res = Result(case.name, case.suite, case.ops, "error", supported=set(case.ops) <= supported_ops)
    graph = case.model.graph
    init = {t.name for t in graph.initializer}
    in_names = [vi.name for vi in graph.input if vi.name not in init]
    out_names = [vi.name for vi in graph.output]
    frozen: list[str] = []
    prog = None
    for k, (inputs, outputs) in enumerate(case.data_sets):
        feeds = {}
        for name, x in zip(in_names, inputs):
            if x is None or isinstance(x, list):
                res.status, res.detail = "unsupported", f"input '{name}' is a sequence or optional value"
                return res
            feeds[name] = _plain(x)
        if prog is None or frozen:
            prog = _load(case.model, feeds, frozen, res)
            if prog is None:
                return res
            if via_mil:
                prog = _through_mlpackage(prog, res)
                if prog is None:
                    return res
        res.frozen = tuple(frozen)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = _run_positional(run, prog, [v for n, v in feeds.items() if n not in frozen], out_names)
        except Exception as e:  # noqa: BLE001
            res.detail = f"run: {type(e).__name__}: {e}"[:400]
            return res
        for name, want in zip(out_names, outputs):
            if isinstance(want, list) or want is None:
                res.status, res.detail = "unsupported", f"output '{name}' is a sequence or optional value"
                return res
            why = _compare(got[name], _plain(want), case.rtol, case.atol)
            if why:
                res.status, res.detail = "fail", f"data set {k}, output '{name}': {why}"
                return res
    res.status = "pass"
    return res


def _load(model: onnx.ModelProto, feeds: dict[str, np.ndarray], frozen: list[str], res: Result) -> Any:
    """Convert ``model`` (with the inputs in ``frozen`` bound to their feeds, growing ``frozen`` while
    the converter asks for constants); None with ``res`` filled in when it cannot be converted."""
    from converter.frontends.onnx import load_onnx

    while True:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return load_onnx(_freeze(model, feeds, frozen) if frozen else model)
        except UnsupportedError as e:
            need = e.details.get("needs_constant") if isinstance(e.details, dict) else None
            new = [n for n in _input_ancestors(model.graph, need, feeds) if n not in frozen] if need else []
            if new:
                frozen.extend(new)
                continue
            res.status, res.detail = "unsupported", e.message
        except ConverterError as e:
            res.detail = f"load: {type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - a crash is a result to report, not a harness failure
            res.detail = f"load crashed: {type(e).__name__}: {e}"
        return None


def _run_positional(run: Any, prog: Any, inputs: list[Any], out_names: list[str]) -> dict[str, Any]:
    """Run with inputs and outputs matched by position (a Core ML writer may rename features that
    are not valid identifiers, e.g. ONNX's "0"); scalar feeds of [1]-declared inputs are reshaped."""
    fn = prog.main
    feeds = {}
    for v, x in zip(fn.inputs, inputs):
        x = np.asarray(x)
        if x.ndim == 0 and v.type.shape == (1,):
            x = x.reshape(1)
        feeds[v.name] = x
    got = run(prog, feeds)
    return {name: got[v.name] for name, v in zip(out_names, fn.outputs)}


def _through_mlpackage(prog: Any, res: Result) -> Any:
    """``prog`` written as an ``.mlpackage`` and read back (None with ``res`` filled on error)."""
    import tempfile

    import converter

    with tempfile.TemporaryDirectory(prefix="onnx_node_") as tmp:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # features renamed to MIL identifiers ("0" -> "_0")
                path = converter.save(prog, Path(tmp) / "m.mlpackage")
                return converter.load(path)
        except Exception as e:  # noqa: BLE001 - reported per case
            res.detail = f"mlpackage round trip: {type(e).__name__}: {e}"[:400]
            return None


def _input_ancestors(graph: onnx.GraphProto, name: str, feeds: dict[str, np.ndarray]) -> list[str]:
    """The graph inputs value ``name`` is computed from (itself if it is one)."""
    producer = {o: n for n in graph.node for o in n.output}
    out, todo, seen = [], [name], set()
    while todo:
        v = todo.pop()
        if v in seen or not v:
            continue
        seen.add(v)
        if v in feeds:
            out.append(v)
        elif v in producer:
            todo.extend(producer[v].input)
    return sorted(out)


def _freeze(model: onnx.ModelProto, feeds: dict[str, np.ndarray], names: list[str]) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in names]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.graph.initializer.extend(numpy_helper.from_array(np.asarray(feeds[n]), n) for n in names)
    return m


def run_all(cases: list[Case] | None = None) -> Iterator[Result]:
    for case in cases if cases is not None else all_cases():
        yield run_case(case)


@dataclass
class Summary:
    results: list[Result]

    def count(self, status: str, supported_only: bool = False) -> int:
        return sum(r.status == status and (r.supported or not supported_only) for r in self.results)

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def supported_total(self) -> int:
        return sum(r.supported for r in self.results)

    def line(self) -> str:
        p, ps = self.count("pass"), self.count("pass", True)
        frozen = sum(r.status == "pass" and bool(r.frozen) for r in self.results)
        return (f"{p}/{self.total} cases pass ({100 * p / max(self.total, 1):.1f}%); of the {self.supported_total} "
                f"cases whose ops are all supported: {ps} pass ({100 * ps / max(self.supported_total, 1):.1f}%); "
                f"fail {self.count('fail')}, error {self.count('error')}, unsupported {self.count('unsupported')}; "
                f"{frozen} of the passes bind parameter inputs as constants")


#: The cases known to pass, one ``suite/name`` a line (benchmarks/onnx_node_tests.py --write-passing).
PASSING_LIST = Path(__file__).with_name("passing_cases.txt")
