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


def run_case(case: Case, supported_ops: set[str] | None = None) -> Result:
    """Convert and run one case; never raises for a converter or interpreter error."""
    from converter.frontends.onnx import load_onnx
    from converter.ir.interpreter import run

    if supported_ops is None:
        from converter.frontends.onnx.registry import MAPPINGS

        supported_ops = set(MAPPINGS)
    res = Result(case.name, case.suite, case.ops, "error", supported=set(case.ops) <= supported_ops)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prog = load_onnx(case.model)
    except UnsupportedError as e:
        res.status, res.detail = "unsupported", e.message
        return res
    except ConverterError as e:
        res.detail = f"load: {type(e).__name__}: {e}"
        return res
    except Exception as e:  # noqa: BLE001 - a crash is a result to report, not a harness failure
        res.detail = f"load crashed: {type(e).__name__}: {e}"
        return res
    graph = case.model.graph
    init = {t.name for t in graph.initializer}
    in_names = [vi.name for vi in graph.input if vi.name not in init]
    out_names = [vi.name for vi in graph.output]
    for k, (inputs, outputs) in enumerate(case.data_sets):
        feeds = {}
        for name, x in zip(in_names, inputs):
            if x is None or isinstance(x, list):
                res.status, res.detail = "unsupported", f"input '{name}' is a sequence or optional value"
                return res
            feeds[name] = _plain(x)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                got = run(prog, feeds)
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
        return (f"{p}/{self.total} cases pass ({100 * p / max(self.total, 1):.1f}%); of the {self.supported_total} "
                f"cases whose ops are all supported: {ps} pass ({100 * ps / max(self.supported_total, 1):.1f}%); "
                f"fail {self.count('fail')}, error {self.count('error')}, unsupported {self.count('unsupported')}")


#: The cases known to pass, one ``suite/name`` a line (benchmarks/onnx_node_tests.py --write-passing).
PASSING_LIST = Path(__file__).with_name("passing_cases.txt")
