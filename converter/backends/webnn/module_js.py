"""model.js: the ES module a web page imports (issue 9's contract).

Exports ``inputs``/``outputs`` (feature name -> {dataType, shape}, exactly the graph's), ``labels``
and ``classifier`` (null unless the model is a classifier), ``build(context, weights)``,
``load(context, url)`` and ``run(context, graph, feeds)``. No dependencies; only the current
WebNN API (MLTensor: createTensor / writeTensor / dispatch / readTensor). Model strings appear
only as escaped literals (`jsliteral.js_string`).
"""

from __future__ import annotations

from .graph import LoweredGraph
from .jsliteral import js_comment, js_json, js_value

_RUNTIME = r"""
const TYPED_ARRAYS = {
  // float16 data as Float16Array where the JavaScript engine has it, else as its raw bits (Uint16Array)
  float32: Float32Array, float16: globalThis.Float16Array ?? Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array,
};

function typedArray(dataType) {
  const T = TYPED_ARRAYS[dataType];
  if (!T) throw new Error(`this browser has no typed array for WebNN data type ${dataType}`);
  return T;
}

function checkWeights(weights) {
  const buffer = ArrayBuffer.isView(weights)
    ? weights.buffer.slice(weights.byteOffset, weights.byteOffset + weights.byteLength) : weights;
  if (typeof buffer?.byteLength !== "number") throw new TypeError("build(context, weights): weights must be the ArrayBuffer of model.bin");
  if (buffer.byteLength !== WEIGHT_BYTES) {
    throw new Error(`the weights have ${buffer.byteLength} bytes; this model.js was written with a model.bin of `
      + `${WEIGHT_BYTES} bytes (is it the model.bin written with it?)`);
  }
  return buffer;
}

function constant(builder, weights, dataType, shape, offset) {
  const T = typedArray(dataType);
  return builder.constant({ dataType, shape }, new T(weights, offset, shape.reduce((a, b) => a * b, 1)));
}

// Fetches model.bin (beside this module unless told) and builds the graph.
export async function load(context, url = new URL("model.bin", import.meta.url)) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return build(context, await response.arrayBuffer());
}

function feedArray(name, desc, value) {
  const T = typedArray(desc.dataType);
  const count = desc.shape.reduce((a, b) => a * b, 1);
  const array = value instanceof T ? value : T.from(value, T === BigInt64Array || T === BigUint64Array ? BigInt : Number);
  if (array.length !== count) {
    throw new Error(`input ${JSON.stringify(name)}: expected ${count} values (shape [${desc.shape}]), got ${array.length}`);
  }
  return array;
}

// Input and output tensors are made once per graph and reused. run() queues the writes, the dispatch
// and the reads in one synchronous step, so the context's timeline keeps overlapping calls apart.
const graphTensors = new WeakMap(); // graph -> {context, tensors: Promise<{inputs, outputs}>}

function tensorsFor(context, graph) {
  const known = graphTensors.get(graph);
  if (known && known.context === context) return known.tensors;
  const make = async (table, usage) => {
    const tensors = Object.create(null); // no prototype: a feature may be named "__proto__" (or "constructor", ...)
    for (const [name, desc] of Object.entries(table)) {
      tensors[name] = await context.createTensor({ dataType: desc.dataType, shape: desc.shape, ...usage });
    }
    return tensors;
  };
  const tensors = (async () => ({ inputs: await make(inputs, { writable: true }), outputs: await make(outputs, { readable: true }) }))();
  graphTensors.set(graph, { context, tensors });
  tensors.catch(() => graphTensors.delete(graph));
  return tensors;
}

export async function run(context, graph, feeds) {
  const missing = Object.keys(inputs).filter((name) => !Object.hasOwn(feeds, name));
  if (missing.length) throw new Error(`missing inputs: ${missing.map((n) => JSON.stringify(n)).join(", ")}`);
  const arrays = Object.entries(inputs).map(([name, desc]) => [name, feedArray(name, desc, feeds[name])]);
  const tensors = await tensorsFor(context, graph);
  for (const [name, array] of arrays) context.writeTensor(tensors.inputs[name], array);
  context.dispatch(graph, tensors.inputs, tensors.outputs);
  const names = Object.keys(outputs);
  const buffers = names.map((name) => context.readTensor(tensors.outputs[name]));
  const results = Object.create(null);
  for (const [i, name] of names.entries()) results[name] = new (typedArray(outputs[name].dataType))(await buffers[i]);
  if (classifier && classifier.labelOutput !== null && classifier.probabilityOutput in results) {
    const p = results[classifier.probabilityOutput];
    let best = 0;
    for (let i = 1; i < p.length; i++) if (p[i] > p[best]) best = i;
    results[classifier.labelOutput] = labels[best];
  }
  return results;
}
"""


def render_module(g: LoweredGraph, *, header: list[str], weight_bytes: int) -> str:
    lines = [f"// {js_comment(h, 200)}" for h in header]
    lines.append("")
    lines.append(f"export const inputs = {_table(g.inputs)};")
    lines.append(f"export const outputs = {_table(g.outputs)};")
    if g.classifier is not None:
        c = g.classifier
        lines.append(f"export const labels = {js_json(c.labels)};")
        lines.append("export const classifier = {probabilityOutput: " + js_value(c.probability_output)
                     + ", labelOutput: " + (js_value(c.label_output) if c.label_output is not None else "null") + "};")
    else:
        lines.append("export const labels = null;")
        lines.append("export const classifier = null;")
    lines.append(f"const WEIGHT_BYTES = {int(weight_bytes)}; // model.bin's size")
    lines.append(_RUNTIME)
    lines.append("// Builds the graph from the ArrayBuffer holding model.bin.")
    lines.append("export async function build(context, weights) {")
    lines.append("  weights = checkWeights(weights);")
    lines.append("  const builder = new MLGraphBuilder(context);")
    lines.extend(g.body)
    lines.append("}")
    lines.append("")
    return "\n".join(lines)


def _table(features: dict[str, dict]) -> str:
    """JSON (a valid JavaScript literal), so tools can read the descriptors without running JS."""
    return js_json({name: {"dataType": d["dataType"], "shape": list(d["shape"])} for name, d in features.items()})
