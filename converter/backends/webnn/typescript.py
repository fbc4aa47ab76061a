"""model.d.ts: TypeScript declarations of model.js, so a typed web app gets its feature names and
typed arrays checked. Names are string-literal keys (escaped), never identifiers."""

from __future__ import annotations

from .graph import LoweredGraph
from .jsliteral import js_string

_ARRAY = {"float32": "Float32Array", "float16": "Float16Array", "int32": "Int32Array", "uint32": "Uint32Array",
          "int64": "BigInt64Array", "uint64": "BigUint64Array", "int8": "Int8Array", "uint8": "Uint8Array"}


def _descriptors(features: dict[str, dict]) -> str:
    rows = [f"  readonly {js_string(n)}: {{ readonly dataType: {js_string(d['dataType'])}; "
            f"readonly shape: readonly number[] }};" for n, d in features.items()]
    return "{\n" + "\n".join(rows) + "\n}" if rows else "{}"


def _arrays(features: dict[str, dict], optional_extra: str = "") -> str:
    rows = [f"  {js_string(n)}: {_ARRAY[d['dataType']]};" for n, d in features.items()]
    if optional_extra:
        rows.append(optional_extra)
    return "{\n" + "\n".join(rows) + "\n}" if rows else "{}"


def render_declarations(g: LoweredGraph) -> str:
    label_row = ""
    label_type = "string | number"
    if g.classifier is not None and g.classifier.label_output is not None:
        label_row = f"  {js_string(g.classifier.label_output)}: {label_type};"
    lines = [
        "// TypeScript declarations of model.js (generated).",
        "// MLContext, MLGraph: WebNN's own types (e.g. from @webgpu/types-style WebNN typings).",
        "type MLContext = any; // eslint-disable-line @typescript-eslint/no-explicit-any",
        "type MLGraph = any; // eslint-disable-line @typescript-eslint/no-explicit-any",
        f"export declare const inputs: {_descriptors(g.inputs)};",
        f"export declare const outputs: {_descriptors(g.outputs)};",
        f"export declare const labels: {'readonly (' + label_type + ')[]' if g.classifier else 'null'};",
        "export declare const classifier: "
        + ("{ readonly probabilityOutput: string; readonly labelOutput: string | null };" if g.classifier else "null;"),
        f"export type Feeds = {_arrays(g.inputs)};",
        f"export type Results = {_arrays(g.outputs, label_row)};",
        "export declare function build(context: MLContext, weights: ArrayBuffer): Promise<MLGraph>;",
        "export declare function load(context: MLContext, url?: string | URL): Promise<MLGraph>;",
        "export declare function run(context: MLContext, graph: MLGraph, feeds: Feeds): Promise<Results>;",
        "",
    ]
    return "\n".join(lines)
