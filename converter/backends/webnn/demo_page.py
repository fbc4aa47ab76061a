"""index.html: a demo page for the converted model (issue 9).

The page imports ``./model.js``, lets the user pick the device type (cpu, gpu, npu; cpu by
default), builds the graph (``model.load``), fills every input (random values, or for an image
input a picture the user chooses), runs the model and shows a short summary of each output
(shape, first values, min/max), the top-5 labels of a classifier and the build and inference
times. Without WebNN (``navigator.ml`` missing, or ``createContext`` rejecting) it says so in the
page and throws nothing.

Images: the IR program already holds the model's own preprocessing (scale/bias) after the image
input, so the page only produces what the graph input expects: a float32 [1, C, H, W] tensor of
pixel values 0..255 in the model's colour order (RGB, BGR or grayscale), the picture drawn onto a
canvas of the input's size.

Security: every model string (title, feature names, labels) reaches the page only as an escaped
JavaScript literal (`jsliteral.js_string` / `js_json`) or, at run time, as a DOM text node
(``textContent``); the page has no ``innerHTML`` and no ``eval``.
"""

from __future__ import annotations

from typing import Any

from .graph import LoweredGraph
from .jsliteral import js_json, js_string

_STATIC = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>WebNN demo</title>
<style>
body { font: 15px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 60em; padding: 0 1em; }
#status[data-state=unavailable], #status[data-state=error] { color: #a00; font-weight: bold; }
.feature { margin: 0.4em 0; }
.name { font-family: monospace; font-weight: bold; }
pre { background: #f4f4f4; padding: 0.5em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
</style>
</head>
<body>
<h1 id="title">WebNN demo</h1>
<p id="status" data-state="loading">Loading the model module... (a page opened from a file:// address
cannot import modules: serve this folder over HTTP, e.g. <code>python3 -m http.server</code>)</p>
<p><label>Device type <select id="device">
<option value="cpu" selected>cpu</option><option value="gpu">gpu</option><option value="npu">npu</option>
</select></label>
<button id="run" type="button" disabled>Run</button></p>
<h2>Inputs</h2>
<div id="inputs"></div>
<h2>Outputs</h2>
<p id="times"></p>
<ol id="top5"></ol>
<div id="outputs"></div>
"""

_SCRIPT = r"""
import * as model from "./model.js";

const $ = (id) => document.getElementById(id);
const statusLine = $("status");
const runButton = $("run");
const deviceSelect = $("device");

function setStatus(state, text) {
  statusLine.dataset.state = state;
  statusLine.textContent = text;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = String(text);
  return node;
}

const count = (shape) => shape.reduce((a, b) => a * b, 1);
const errorText = (err) => (err && err.message ? `${err.name || "Error"}: ${err.message}` : String(err));

// --- inputs: one row per feature; image inputs get a file chooser ---
const fileChoosers = new Map();
for (const [name, desc] of Object.entries(model.inputs)) {
  const row = element("div", "feature");
  row.append(element("span", "name", name), document.createTextNode(` ${desc.dataType} [${desc.shape.join(", ")}] `));
  const image = IMAGE_INPUTS.get(name);
  if (image) {
    const chooser = element("input");
    chooser.type = "file";
    chooser.accept = "image/*";
    chooser.className = "image-file";
    chooser.dataset.input = name;
    fileChoosers.set(name, chooser);
    row.append(document.createTextNode(`image (${image.colorSpace}, ${image.width}x${image.height}): `), chooser,
      document.createTextNode(" (no picture chosen: random pixels)"));
  } else {
    row.append(document.createTextNode("random values"));
  }
  $("inputs").append(row);
}

function randomInput(desc, isImage) {
  const n = count(desc.shape);
  switch (desc.dataType) {
    case "float32": {
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = isImage ? Math.floor(Math.random() * 256) : Math.random() * 2 - 1;
      return a;
    }
    case "float16": {
      const T = globalThis.Float16Array;
      if (!T) throw new Error("this browser has no Float16Array for a float16 input");
      const a = new T(n);
      for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
      return a;
    }
    case "int64": return BigInt64Array.from({ length: n }, () => BigInt(Math.floor(Math.random() * 2)));
    case "uint64": return BigUint64Array.from({ length: n }, () => BigInt(Math.floor(Math.random() * 2)));
    default: {
      const T = { int32: Int32Array, uint32: Uint32Array, int8: Int8Array, uint8: Uint8Array }[desc.dataType];
      if (!T) throw new Error(`no random values for data type ${desc.dataType}`);
      return T.from({ length: n }, () => Math.floor(Math.random() * 2));
    }
  }
}

// A picture as the graph input expects it: [1, C, H, W] float32, values 0..255, in the model's colour
// order, resized to the input's size on a canvas (the graph applies the model's own preprocessing).
async function imageInput(file, desc, image) {
  const { height, width, channels, colorSpace } = image;
  if (desc.dataType !== "float32" || count(desc.shape) !== channels * height * width) {
    throw new Error(`image input: expected a float32 tensor of ${channels}x${height}x${width} values`);
  }
  const bitmap = await createImageBitmap(file);
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  const rgba = ctx.getImageData(0, 0, width, height).data;
  const plane = height * width;
  const out = new Float32Array(channels * plane);
  const order = colorSpace === "BGR" ? [2, 1, 0] : [0, 1, 2];
  for (let i = 0; i < plane; i++) {
    const r = rgba[4 * i], g = rgba[4 * i + 1], b = rgba[4 * i + 2];
    if (channels === 1) {
      out[i] = 0.299 * r + 0.587 * g + 0.114 * b; // grayscale: ITU-R BT.601 luma
    } else {
      for (let c = 0; c < 3; c++) out[c * plane + i] = rgba[4 * i + order[c]];
    }
  }
  return out;
}

async function fillInputs() {
  const feeds = {};
  for (const [name, desc] of Object.entries(model.inputs)) {
    const chooser = fileChoosers.get(name);
    const file = chooser && chooser.files && chooser.files[0];
    feeds[name] = file ? await imageInput(file, desc, IMAGE_INPUTS.get(name)) : randomInput(desc, Boolean(chooser));
  }
  return feeds;
}

// --- outputs ---
function formatNumber(x) {
  if (typeof x === "bigint") return x.toString();
  return Number.isInteger(x) ? String(x) : x.toPrecision(6);
}

function summary(name, desc, values) {
  const box = element("div", "feature output");
  box.dataset.output = name;
  box.append(element("span", "name", name), document.createTextNode(` ${desc.dataType} [${desc.shape.join(", ")}]`));
  const lines = [`first values: ${Array.from(values.subarray(0, 8), formatNumber).join(", ")}${values.length > 8 ? ", ..." : ""}`];
  if (values.length) {
    let min = values[0], max = values[0];
    for (const v of values) { if (v < min) min = v; if (v > max) max = v; }
    lines.push(`min ${formatNumber(min)}, max ${formatNumber(max)}`);
  }
  box.append(element("pre", "", lines.join("\n")));
  return box;
}

function showTop5(results) {
  const list = $("top5");
  list.replaceChildren();
  const c = model.classifier;
  if (!c || !model.labels || !(c.probabilityOutput in results)) return;
  const p = results[c.probabilityOutput];
  const order = Array.from(p.keys()).sort((a, b) => p[b] - p[a]).slice(0, 5);
  for (const i of order) {
    const item = element("li", "label");
    item.append(element("span", "label-name", model.labels[i]), document.createTextNode(`: ${p[i].toFixed(4)}`));
    list.append(item);
  }
}

// --- the graph, built once per device type (a pending build is shared, not repeated) ---
let built = null; // {device, promise of {context, graph, buildMs} or null (no context)}

async function buildFor(device) {
  let context;
  try {
    context = await navigator.ml.createContext({ deviceType: device });
  } catch (err) {
    setStatus("unavailable", `WebNN cannot run here: it could not create a ${device} context (${errorText(err)}).`);
    return null;
  }
  setStatus("building", `Building the graph for ${device}...`);
  const t0 = performance.now();
  const graph = await model.load(context);
  return { device, context, graph, buildMs: performance.now() - t0 };
}

function ensureGraph() {
  const device = deviceSelect.value;
  if (!built || built.device !== device) {
    const promise = buildFor(device);
    built = { device, promise };
    promise.then((b) => { if (!b && built && built.promise === promise) built = null; },
      () => { if (built && built.promise === promise) built = null; });
  }
  return built.promise;
}

async function runOnce() {
  runButton.disabled = true;
  try {
    const b = await ensureGraph();
    if (!b) return;
    setStatus("running", "Running...");
    const feeds = await fillInputs();
    const t0 = performance.now();
    const results = await model.run(b.context, b.graph, feeds);
    const runMs = performance.now() - t0;
    $("times").textContent = `build: ${b.buildMs.toFixed(1)} ms, inference: ${runMs.toFixed(1)} ms (device ${b.device})`;
    showTop5(results);
    $("outputs").replaceChildren(...Object.entries(model.outputs).map(([n, d]) => summary(n, d, results[n])));
    setStatus("done", "Done.");
  } catch (err) {
    setStatus("error", `The model failed: ${errorText(err)}`);
  } finally {
    runButton.disabled = false;
  }
}

async function start() {
  document.title = `${TITLE} (WebNN)`;
  $("title").textContent = TITLE;
  if (!("ml" in navigator) || !navigator.ml) {
    setStatus("unavailable", "This browser does not support WebNN (navigator.ml is missing), so the model cannot run "
      + "here. Try a browser with WebNN enabled (e.g. Chrome with the WebNN flag).");
    return;
  }
  runButton.disabled = true;
  try {
    if (!(await ensureGraph())) return;
    setStatus("ready", "Ready: choose inputs and press Run.");
    runButton.disabled = false;
  } catch (err) {
    setStatus("error", `The model failed to build: ${errorText(err)}`);
  }
}

runButton.addEventListener("click", () => { runOnce(); });
deviceSelect.addEventListener("change", () => { start(); });
start();
"""


def render_demo_page(g: LoweredGraph, *, title: str, image_inputs: dict[str, dict[str, Any]] | None = None) -> str:
    """The page's HTML. ``image_inputs``: input name -> {colorSpace, height, width, channels}."""
    images = [[name, info] for name, info in (image_inputs or {}).items() if name in g.inputs]
    # a Map, not an object literal: a feature named "__proto__" must stay an ordinary key
    data = f"const TITLE = {js_string(title)};\nconst IMAGE_INPUTS = new Map({js_json(images)});\n"
    return _STATIC + '<script type="module">\n' + data + _SCRIPT + "</script>\n</body>\n</html>\n"
