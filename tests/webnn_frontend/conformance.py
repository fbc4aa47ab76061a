"""Run WebNN conformance vectors (../shared/data/webnn-conformance) through the WebNN frontend.

A case's graph is rewritten into our graph format (docs/webnn-graph-format.md: constants inline,
non-constant inputs as graph inputs), read by the same reader as recorded files, converted to the
IR and run by the interpreter. Results are compared as the WPT harness does
(webnn/resources/utils.js, summarised in the vectors' README): ULP distance of the bit patterns or
an absolute tolerance, with the per-op budgets and formulas of that README, summed over the
operators of a multi-op graph. The budgets here are written from the README, not from the frontend.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from converter.frontends.webnn.graph import FORMAT_NAME, FORMAT_VERSION, NUMPY_DTYPES, graph_from_dict
from converter.frontends.webnn.signatures import signatures
from converter.frontends.webnn.to_ir import graph_to_program
from converter.ir.interpreter import Interpreter

DATA = (Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "webnn-conformance").resolve()

_FIXED_ULP = {
    "batchNormalization": 6, "clamp": 0, "concat": 0, "add": 1, "sub": 1, "mul": 1, "div": 2, "max": 0, "min": 0,
    "abs": 0, "ceil": 0, "floor": 0, "neg": 0, "identity": 0, "reciprocal": 2, "sqrt": 1, "elu": 18,
    "expand": 0, "gather": 0, "pad": 0, "reshape": 0, "slice": 0, "split": 0, "transpose": 0, "triangular": 0,
    "where": 0, "maxPool2d": 0, "reduceMax": 0, "reduceMin": 0, "relu": 0, "gelu": 18, "hardSigmoid": 2,
    "hardSwish": 4, "leakyRelu": 1, "linear": 2, "prelu": 1, "softplus": 18, "softsign": 3,
}
_PER_TYPE_ULP = {"pow": (32, 2), "exp": (32, 1), "sigmoid": (34, 3), "instanceNormalization": (840, 8400)}
_ATOL = {"cos": (2**-10, 2**-7), "sin": (1 / 1024, 1 / 512), "tan": (1 / 1024, 1 / 512), "erf": (1 / 1024, 1 / 512),
         "log": (1 / 1024, 1 / 1024), "tanh": (1 / 1024, 1 / 512), "layerNormalization": (1 / 1024, 1 / 512)}


@cache
def op_files() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.json") if p.stem != "counts")


@cache
def load_cases(op: str) -> list[dict]:
    return json.loads((DATA / f"{op}.json").read_text())["cases"]


def _descs(graph: dict) -> dict[str, dict]:
    """Descriptors of every named operand of a case (inputs, then operator outputs in order)."""
    out = {k: v["descriptor"] for k, v in graph["inputs"].items()}
    out.update({k: v["descriptor"] for k, v in graph["expectedOutputs"].items()})
    return out


def _reduced_count(shape: list[int], options: dict) -> int:
    axes = options.get("axes", list(range(len(shape))))
    return math.prod(shape[a] for a in axes)


def operator_budget(op: dict, descs: dict[str, dict], out_type: str) -> tuple[str, float]:
    """(metric, budget) of one operator from the README's table."""
    name = op["name"]
    args = {k: v for a in op["arguments"] for k, v in a.items()}
    options = args.get("options", {})
    f16 = out_type == "float16"
    if out_type not in ("float32", "float16"):
        return "ULP", 0
    if name in _ATOL:
        return "ATOL", _ATOL[name][f16]
    if name in _FIXED_ULP:
        return "ULP", _FIXED_ULP[name]
    if name in _PER_TYPE_ULP:
        return "ULP", _PER_TYPE_ULP[name][f16]
    if name == "cast":
        return "ULP", 1
    shape = descs.get(args.get("input") or args.get("a"), {}).get("shape", [])
    if name in ("conv2d", "convTranspose2d"):
        fshape = descs[args["filter"]]["shape"]
        layout = options.get("filterLayout", "oihw" if name == "conv2d" else "iohw")
        dims = dict(zip(layout, fshape))
        in_layout = options.get("inputLayout", "nchw")
        in_c = shape[1] if in_layout == "nchw" else shape[3]
        return "ULP", dims["h"] * dims["w"] * (in_c // options.get("groups", 1)) * 2
    if name == "matmul":
        return "ULP", 2 * shape[-1]
    if name == "gemm":
        k = shape[0] if options.get("aTranspose") else shape[1]
        ulp = 2 * k + (options.get("alpha", 1.0) != 1.0)
        if "c" in options and options.get("beta", 1.0) != 0:
            ulp += 1 + (options.get("beta", 1.0) != 1.0)
        return "ULP", ulp
    if name == "softmax":
        return "ULP", 3 * shape[args["axis"]] + 3
    if name == "cumulativeSum":
        return "ULP", shape[args["axis"]] - 1
    if name.startswith("reduce"):
        n = _reduced_count(shape, options)
        return "ULP", {"reduceL1": n, "reduceProduct": n, "reduceSum": n, "reduceL2": 2 * n + 1, "reduceMean": n + 2,
                       "reduceLogSum": n + 18, "reduceLogSumExp": 2 * n + 18, "reduceSumSquare": 2 * n}[name]
    if name in ("averagePool2d", "l2Pool2d"):
        win = options.get("windowDimensions") or (shape[2:4] if options.get("layout", "nchw") == "nchw" else shape[1:3])
        return "ULP", win[0] * win[1] + 2
    if name == "resample2d":
        return "ULP", (84 if not f16 else 10) if options.get("mode") == "linear" else 0
    return "ULP", 0  # the ops the README lists as compared exactly


def case_budget(graph: dict, out_type: str) -> tuple[str, float]:
    descs = _descs(graph)
    budgets = [operator_budget(op, descs, out_type) for op in graph["operators"]]
    metrics = {m for m, _ in budgets}
    if metrics == {"ULP"}:
        return "ULP", sum(v for _, v in budgets)  # the harness sums per-operator ULP budgets
    return "ATOL", max(v for m, v in budgets if m == "ATOL")


def _bigint_strings(data: Any) -> Any:
    """WPT writes BigInt literals as ``"123n"``; our format writes them as decimal strings."""
    if isinstance(data, list):
        return [_bigint_strings(v) for v in data]
    if isinstance(data, str) and data.endswith("n") and data[:-1].lstrip("-").isdigit():
        return data[:-1]
    return data


def _spec_argument_names(op: dict) -> dict:
    """WPT lists arguments in call order under its own names (``cast``'s ``type``, ``isNaN``'s
    ``input``); our format names them as the spec does (``dataType``, ``a``): rename by position."""
    names = [name for name, _ in signatures()[op["name"]].args]
    args = []
    for i, a in enumerate(op["arguments"]):
        ((key, value),) = a.items()
        args.append({key if key == "options" or i >= len(names) else names[i]: value})
    return dict(op, arguments=args)


def to_graph_doc(graph: dict) -> tuple[dict, dict[str, np.ndarray]]:
    """A case graph in our format, and the feeds of its non-constant inputs."""
    graph = _bigint_strings_in(graph)
    graph = dict(graph, operators=[_spec_argument_names(op) for op in graph["operators"]])
    doc: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "inputs": {}, "constants": {},
                           "operators": graph["operators"], "outputs": {}}
    feeds = {}
    for name, raw in graph["inputs"].items():
        if raw.get("constant"):
            doc["constants"][name] = {"descriptor": raw["descriptor"], "data": raw["data"]}
        else:
            doc["inputs"][name] = {"descriptor": raw["descriptor"]}
            feeds[name] = expected_array(raw["data"], raw["descriptor"])
    doc["outputs"] = {name: name for name in graph["expectedOutputs"]}
    return doc, feeds


def _bigint_strings_in(graph: dict) -> dict:
    inputs = {k: dict(v, data=_bigint_strings(v["data"])) for k, v in graph["inputs"].items()}
    ops = [dict(op, arguments=[{k: ({o: _bigint_strings(x) for o, x in v.items()} if k == "options" else v)
                                for k, v in a.items()} for a in op["arguments"]]) for op in graph["operators"]]
    return dict(graph, inputs=inputs, operators=ops)


def expected_array(data: Any, desc: dict) -> np.ndarray:
    dt = NUMPY_DTYPES[desc["dataType"]]
    data = _bigint_strings(data)
    special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    items = data if isinstance(data, list) else [data]
    items = [special.get(v, v) if isinstance(v, str) and v in special else (int(v) if isinstance(v, str) else v)
             for v in items]
    with np.errstate(over="ignore"):  # float16 vectors hold values beyond its range: they become inf
        arr = np.array(items, dtype=np.float64 if dt.kind == "f" else object).astype(dt)
    shape = desc["shape"]
    return np.full(shape, arr[0], dt) if not isinstance(data, list) else arr.reshape(shape)


def _ulp_distance(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    if expected.dtype == np.float32:
        return np.abs(actual.astype(np.float32).view(np.int32).astype(np.int64)
                      - expected.view(np.int32).astype(np.int64))
    if expected.dtype == np.float16:
        return np.abs(actual.astype(np.float16).view(np.uint16).astype(np.int64)
                      - expected.view(np.uint16).astype(np.int64))
    return np.abs(actual.astype(np.int64) - expected.astype(np.int64))


def case_program(case: dict) -> tuple[Any, dict[str, np.ndarray]]:
    """The case's graph read by the WebNN frontend (an IR program), and its feeds."""
    doc, feeds = to_graph_doc(case["graph"])
    return graph_to_program(graph_from_dict(doc, f"<{case['name']}>")), feeds


def check_case(case: dict) -> str | None:
    """None when the case passes through the frontend and our interpreter, else why not."""
    prog, feeds = case_program(case)
    return compare_outputs(case, Interpreter(prog).run(feeds))


def compare_outputs(case: dict, outs: dict[str, Any]) -> str | None:
    """None when ``outs`` match the case's expected outputs within its tolerance, else why not."""
    graph = case["graph"]
    for name, exp in graph["expectedOutputs"].items():
        desc = exp["descriptor"]
        expected = expected_array(exp["data"], desc)
        actual = np.asarray(outs[name])
        if tuple(actual.shape) != tuple(desc["shape"]):
            return f"{name}: shape {list(actual.shape)}, expected {desc['shape']}"
        metric, budget = case_budget(graph, desc["dataType"])
        a, e = actual.reshape(-1), expected.reshape(-1)
        if not isinstance(exp["data"], list):
            a, e = a[:1000], e[:1000]
        a = a.astype(e.dtype) if e.dtype.kind != "f" else a
        same = a == e
        if e.dtype.kind == "f":
            same |= np.isnan(a.astype(np.float64)) & np.isnan(e.astype(np.float64))
            if metric == "ULP":
                ok = same | (_ulp_distance(a, e) <= budget)
            else:
                ok = same | (np.abs(a.astype(np.float64) - e.astype(np.float64)) <= budget)
        else:
            ok = same | (_ulp_distance(a, e) <= budget)
        if not ok.all():
            i = int(np.argmin(ok))
            return (f"{name}: {int((~ok).sum())} of {ok.size} elements off ({metric} {budget}); "
                    f"first at {i}: {a[i]!r} vs {e[i]!r}")
    return None
