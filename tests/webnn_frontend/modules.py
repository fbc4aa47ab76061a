"""Test helpers: build graph documents (our format, constants inline) and the model.js that makes
the same graph through MLGraphBuilder calls, so one test graph runs both routes (JSON reader, and
Node recorder -> JSON reader)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

import converter
from converter.frontends.webnn.graph import FORMAT_NAME, FORMAT_VERSION, graph_from_dict
from converter.frontends.webnn.record import record_graph_file
from converter.frontends.webnn.signatures import signatures
from converter.frontends.webnn.to_ir import graph_to_program
from converter.ir.interpreter import Interpreter

WEBNN_TYPES = {np.dtype("float32"): "float32", np.dtype("float16"): "float16", np.dtype("int32"): "int32",
               np.dtype("uint32"): "uint32", np.dtype("int64"): "int64", np.dtype("uint64"): "uint64",
               np.dtype("int8"): "int8", np.dtype("uint8"): "uint8"}
JS_ARRAYS = {"float32": "Float32Array", "float16": "Uint16Array", "int32": "Int32Array", "uint32": "Uint32Array",
             "int64": "BigInt64Array", "uint64": "BigUint64Array", "int8": "Int8Array", "uint8": "Uint8Array"}


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def graph_doc(operators: list[dict], outputs: dict[str, str], *, inputs: dict[str, np.ndarray] | None = None,
              constants: dict[str, np.ndarray] | None = None) -> dict:
    """A graph document: ``inputs``/``constants`` are example arrays keyed by operand id (= name)."""
    def desc(a: np.ndarray) -> dict:
        return {"dataType": WEBNN_TYPES[a.dtype], "shape": list(a.shape)}

    return {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "inputs": {k: {"descriptor": desc(v)} for k, v in (inputs or {}).items()},
        "constants": {k: {"descriptor": desc(v), "data": [_json_number(x) for x in v.reshape(-1).tolist()]}
                      for k, v in (constants or {}).items()},
        "operators": operators, "outputs": outputs,
    }


def op(name: str, *args: tuple[str, Any], options: dict | None = None, outputs: str | list[str]) -> dict:
    arguments = [{k: v} for k, v in args]
    if options:
        arguments.append({"options": options})
    return {"name": name, "arguments": arguments, "outputs": outputs}


def run_doc(doc: dict, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    prog = graph_to_program(graph_from_dict(doc, "<test graph>"))
    return Interpreter(prog).run(feeds)


def _js(v: Any, operands: set[str]) -> str:
    if isinstance(v, str):
        return f"v[{json.dumps(v)}]" if v in operands else json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_js(x, operands) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_js(x, operands)}" for k, x in v.items()) + "}"
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return json.dumps(v)


def module_source(doc: dict) -> str:
    """model.js building ``doc``'s graph with one builder call per operator."""
    lines = ["export async function build(context) {", "  const b = new MLGraphBuilder(context);", "  const v = {};"]
    operands: set[str] = set()
    for oid, raw in doc["inputs"].items():
        lines.append(f"  v[{json.dumps(oid)}] = b.input({json.dumps(raw.get('name', oid))}, {json.dumps(raw['descriptor'])});")
        operands.add(oid)
    for oid, raw in doc["constants"].items():
        d = raw["descriptor"]
        values = raw["data"]
        if d["dataType"] == "float16":
            values = np.asarray(values, np.float16).view(np.uint16).tolist()
        elif d["dataType"] in ("int64", "uint64"):
            values = [f"{int(x)}n" for x in values]
        items = ", ".join(str(x) if not isinstance(x, str) or x.endswith("n") else {"NaN": "NaN", "Infinity": "Infinity",
                                                                               "-Infinity": "-Infinity"}[x] for x in values)
        lines.append(f"  v[{json.dumps(oid)}] = b.constant({json.dumps(d)}, new {JS_ARRAYS[d['dataType']]}([{items}]));")
        operands.add(oid)
    table = signatures()
    for o in doc["operators"]:
        sig = table[o["name"]]
        args = {k: x for a in o["arguments"] for k, x in a.items()}
        call = [_js(args[name], operands) for name, _ in sig.args]
        if "options" in args:
            call.append(_js(args["options"], operands))
        outs = o["outputs"] if isinstance(o["outputs"], list) else [o["outputs"]]
        multi = isinstance(o["outputs"], list)
        target = "[" + ", ".join(f"v[{json.dumps(x)}]" for x in outs) + "]" if multi else f"v[{json.dumps(outs[0])}]"
        lines.append(f"  {target} = b.{o['name']}({', '.join(call)});")
        operands.update(outs)
    out = ", ".join(f"{json.dumps(k)}: v[{json.dumps(x)}]" for k, x in doc["outputs"].items())
    lines += [f"  return b.build({{{out}}});", "}"]
    return "\n".join(lines) + "\n"


_RUN_JS = """
export async function load(context) { return build(context, new ArrayBuffer(0)); }
export async function run(context, graph, feeds) {
  const CTORS = {float32: Float32Array, float16: globalThis.Float16Array, int32: Int32Array, uint32: Uint32Array,
                 int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array};
  const ins = {}, outs = {}, results = {};
  for (const [n, d] of Object.entries(inputs)) {
    ins[n] = await context.createTensor({...d, writable: true});
    context.writeTensor(ins[n], feeds[n]);
  }
  for (const [n, d] of Object.entries(outputs)) outs[n] = await context.createTensor({...d, readable: true});
  context.dispatch(graph, ins, outs);
  for (const [n, d] of Object.entries(outputs)) results[n] = new CTORS[d.dataType](await context.readTensor(outs[n]));
  return results;
}
"""


def browser_module_source(doc: dict, outputs: dict[str, dict]) -> str:
    """``module_source(doc)`` plus the ``inputs``/``outputs``/``load``/``run`` exports of issue 9's
    model.js contract, for the real-browser harness (``outputs``: name -> WebNN descriptor)."""
    inputs = {raw.get("name", oid): raw["descriptor"] for oid, raw in doc["inputs"].items()}
    return (f"export const inputs = {json.dumps(inputs)};\nexport const outputs = {json.dumps(outputs)};\n"
            + module_source(doc) + _RUN_JS)


def run_recorded(doc: dict, feeds: dict[str, np.ndarray], folder: Path) -> dict[str, np.ndarray]:
    """Write ``doc`` as model.js, record it under Node, load the recorded graph and run it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.js").write_text(module_source(doc))
    record_graph_file(folder / "model.js", folder / "graph.webnn.json")
    prog = converter.load(folder / "graph.webnn.json")
    return Interpreter(prog).run(feeds)
