// In-browser half of benchmarks/webnn.py: times one model in a fresh page, either our converter's
// WebNN module (kind=ours) or the same torch model exported to ONNX and run by ONNX Runtime Web's WebNN
// execution provider (kind=ort), and publishes the numbers in globalThis.__pageResult.
//
// Query: kind=ours|ort, model=<URL of the folder with model.js + model.bin (ours) or model.onnx +
// tiny.onnx (ort)>, data=<URL of the folder with input.bin, the float32 input>, ort=<URL of
// onnxruntime-web's dist/>, input=<input feature name>, shape=<its shape, JSON>, warmup=N, runs=N,
// device=cpu, log=0 (ort: verbose ORT logging, to see where each node was placed), ep=webnn|wasm (ort).
//
// Every WebNN call is counted (MLGraphBuilder ops by name, builds, createContext, dispatch) by wrapping
// the prototypes before anything else runs: that is how the benchmark checks that ORT-Web really ran
// its graph in WebNN and how many transposes our graph holds. The wrappers cost a function call each.

const query = new URLSearchParams(location.search);
const now = () => performance.now();
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// --- WebNN call counts ------------------------------------------------------------------------------
const calls = { builderOps: {}, build: 0, buildMs: 0, createContext: 0, dispatch: 0, compute: 0 };

function countWebnnCalls() {
  if (!globalThis.MLGraphBuilder) return;
  const proto = MLGraphBuilder.prototype;
  for (const name of Object.getOwnPropertyNames(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, name);
    if (name === "constructor" || typeof descriptor.value !== "function") continue;
    const original = descriptor.value;
    proto[name] = function (...args) {
      if (name !== "build") {
        calls.builderOps[name] = (calls.builderOps[name] ?? 0) + 1;
        return original.apply(this, args);
      }
      calls.build += 1; // and the time build() takes (the browser compiling the graph)
      const t0 = now();
      const graph = original.apply(this, args);
      graph.then(() => { calls.buildMs += now() - t0; }, () => {});
      return graph;
    };
  }
  for (const [owner, name] of [[globalThis.MLContext?.prototype, "dispatch"], [globalThis.MLContext?.prototype, "compute"],
    [globalThis.ML?.prototype, "createContext"]]) {
    const original = owner?.[name];
    if (typeof original !== "function") continue;
    owner[name] = function (...args) {
      calls[name] += 1;
      return original.apply(this, args);
    };
  }
}

function snapshotCalls() {
  return JSON.parse(JSON.stringify(calls));
}

// --- helpers ----------------------------------------------------------------------------------------
const TYPED = {
  float32: Float32Array, float16: globalThis.Float16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array,
};

function typedFrom(Ctor, values) {
  if (Ctor === Float32Array) return values;
  if (Ctor === BigInt64Array || Ctor === BigUint64Array) return Ctor.from(values, (v) => BigInt(Math.round(v)));
  return Ctor.from(values);
}

async function fetchFloat32(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return new Float32Array(await response.arrayBuffer());
}

// The first few values and summary of an output, returned to Python for the accuracy check.
function toBase64Float32(values) {
  const f32 = values instanceof Float32Array ? values : Float32Array.from(values, Number);
  const bytes = new Uint8Array(f32.buffer, f32.byteOffset, f32.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

// The step under way, which the driver reports if the page times out.
function stage(what) {
  globalThis.__webnnHarnessStage = `${query.get("kind")}: ${what}`;
}

async function timed(what, fn) {
  stage(what);
  const t0 = now();
  const value = await fn();
  return [value, now() - t0];
}

// Each call's time, and the mean from one timer around the whole loop: without cross-origin isolation
// performance.now() is coarsened to 0.1 ms, too coarse for a sub-millisecond median alone.
async function repeat(what, count, fn) {
  stage(what);
  const times = [];
  const start = now();
  for (let i = 0; i < count; i++) {
    const t0 = now();
    await fn();
    times.push(now() - t0);
  }
  times.mean = count ? (now() - start) / count : 0;
  return times;
}

// --- ours: the converter's model.js -----------------------------------------------------------------
async function benchOurs({ modelUrl, dataUrl, inputName, warmup, runs, device }) {
  const input = await fetchFloat32(new URL("input.bin", dataUrl));
  const t0 = now();
  const [mod, importMs] = await timed("import model.js", () => import(new URL("model.js", modelUrl).href));
  const [context, contextMs] = await timed("createContext", () => navigator.ml.createContext({ deviceType: device }));
  // via=load (default): what a page does, load(context) fetches model.bin and builds.
  // via=build: fetch model.bin, then build(context, weights): the two timed apart.
  let graph, fetchMs = null, buildMs = null, loadMs;
  if ((query.get("via") ?? "load") === "load") {
    [graph, loadMs] = await timed("load", () => mod.load(context, new URL("model.bin", modelUrl)));
  } else {
    let weights;
    [weights, fetchMs] = await timed("fetch model.bin", async () => {
      const response = await fetch(new URL("model.bin", modelUrl));
      if (!response.ok) throw new Error(`cannot fetch model.bin: HTTP ${response.status}`);
      return response.arrayBuffer();
    });
    [graph, buildMs] = await timed("build", () => mod.build(context, weights));
    loadMs = fetchMs + buildMs;
  }
  if (!(inputName in mod.inputs)) {
    throw new Error(`model.js has no input '${inputName}' (it has ${Object.keys(mod.inputs).join(", ")})`);
  }
  // input.bin feeds the named input; any other input gets fixed values in [-1, 1].
  const feeds = {};
  for (const [name, desc] of Object.entries(mod.inputs)) {
    const Ctor = TYPED[desc.dataType];
    if (!Ctor) throw new Error(`input '${name}': no typed array for ${desc.dataType}`);
    const count = desc.shape.reduce((a, b) => a * b, 1);
    const values = name === inputName ? input : Float32Array.from({ length: count }, (_, i) => Math.sin(i + 1));
    if (values.length !== count) throw new Error(`input '${name}': ${values.length} values for shape [${desc.shape}]`);
    feeds[name] = typedFrom(Ctor, values);
  }
  const callsAfterBuild = snapshotCalls();
  const [first, firstRunMs] = await timed("first run", () => mod.run(context, graph, feeds));
  const timeToFirstResultMs = now() - t0;
  const dispatchesBefore = calls.dispatch;
  const warmupMs = await repeat("warm-up runs", warmup, () => mod.run(context, graph, feeds));
  const runMs = await repeat("timed runs", runs, () => mod.run(context, graph, feeds));
  const dispatchesPerRun = (calls.dispatch - dispatchesBefore) / Math.max(1, warmup + runs);

  // Dispatch alone: tensors made once; each iteration writes the input, dispatches, reads the outputs
  // back (reading is how a page waits for the dispatch to finish).
  const inputTensors = {};
  for (const [name, desc] of Object.entries(mod.inputs)) {
    inputTensors[name] = await context.createTensor({ ...desc, writable: true });
  }
  const outputTensors = {};
  for (const [name, out] of Object.entries(mod.outputs)) {
    outputTensors[name] = await context.createTensor({ ...out, readable: true });
  }
  const dispatchOnce = async () => {
    for (const [name, tensor] of Object.entries(inputTensors)) context.writeTensor(tensor, feeds[name]);
    context.dispatch(graph, inputTensors, outputTensors);
    await Promise.all(Object.values(outputTensors).map((t) => context.readTensor(t)));
  };
  await repeat("dispatch warm-up", warmup, dispatchOnce);
  const dispatchMs = await repeat("timed dispatches", runs, dispatchOnce);
  const outputName = Object.keys(mod.outputs)[0];
  return {
    ok: true, kind: "ours", import_ms: importMs, context_ms: contextMs, fetch_ms: fetchMs, build_ms: buildMs, load_ms: loadMs,
    compile_ms: callsAfterBuild.buildMs, first_run_ms: firstRunMs, time_to_first_result_ms: timeToFirstResultMs,
    warmup_ms: warmupMs, run_ms: runMs, median_run_ms: median(runMs),
    mean_run_ms: runMs.mean, dispatch_ms: dispatchMs, median_dispatch_ms: median(dispatchMs),
    mean_dispatch_ms: dispatchMs.mean, dispatches_per_run: dispatchesPerRun, webnn_calls: callsAfterBuild,
    input_data_type: mod.inputs[inputName].dataType, output_name: outputName,
    output_data_type: mod.outputs[outputName].dataType, output_shape: mod.outputs[outputName].shape,
    output: toBase64Float32(first[outputName]),
  };
}

// --- ONNX Runtime Web, WebNN execution provider -----------------------------------------------------
async function benchOrt({ modelUrl, dataUrl, ortUrl, inputName, warmup, runs, device }) {
  const input = await fetchFloat32(new URL("input.bin", dataUrl));
  const ep = query.get("ep") ?? "webnn"; // "wasm": ORT's own CPU kernels, the control
  const options = {
    executionProviders: [ep === "webnn" ? { name: "webnn", deviceType: device } : ep],
    logSeverityLevel: Number(query.get("log") ?? 3), // 0 = verbose: ORT logs where each node runs
  };
  const t0 = now();
  const [ort, importMs] = await timed("import ort.min.mjs", () => import(new URL("ort.min.mjs", ortUrl).href));
  ort.env.logLevel = query.get("log") === "0" ? "verbose" : "warning";
  // ORT starts its wasm runtime and the WebNN EP on the first session; a one-op model (Relu on
  // float32[1, 8]) makes that happen apart from the model's own session.
  const tinyUrl = new URL("tiny.onnx", modelUrl).href;
  const [tiny, initMs] = await timed("first one-op session", () => ort.InferenceSession.create(tinyUrl, options));
  const runtimeMs = now() - t0;
  await tiny.release();
  const [tiny2, tinySessionMs] = await timed("second one-op session", () => ort.InferenceSession.create(tinyUrl, options));
  await tiny2.release();
  const callsBefore = snapshotCalls();
  const [session, sessionMs] = await timed("model session", () => ort.InferenceSession.create(new URL("model.onnx", modelUrl).href, options));
  const callsAfterSession = snapshotCalls();
  const dims = JSON.parse(query.get("shape"));
  const feeds = { [inputName]: new ort.Tensor("float32", input, dims) };
  const [first, firstRunMs] = await timed("first run", () => session.run(feeds));
  const dispatchesBefore = calls.dispatch + calls.compute;
  const warmupMs = await repeat("warm-up runs", warmup, () => session.run(feeds));
  const runMs = await repeat("timed runs", runs, () => session.run(feeds));
  const dispatchesPerRun = (calls.dispatch + calls.compute - dispatchesBefore) / Math.max(1, warmup + runs);
  const outputName = session.outputNames[0];
  const sessionOps = {};
  for (const [name, n] of Object.entries(callsAfterSession.builderOps)) {
    const d = n - (callsBefore.builderOps[name] ?? 0);
    if (d) sessionOps[name] = d;
  }
  return {
    ok: true, kind: "ort", ep, ort_version: ort.env.versions?.web ?? null, import_ms: importMs, init_ms: initMs,
    runtime_ms: runtimeMs, tiny_session_ms: tinySessionMs, session_ms: sessionMs,
    compile_ms: callsAfterSession.buildMs - callsBefore.buildMs, first_run_ms: firstRunMs,
    time_to_first_result_ms: runtimeMs + sessionMs + firstRunMs, warmup_ms: warmupMs, run_ms: runMs,
    median_run_ms: median(runMs), mean_run_ms: runMs.mean, dispatches_per_run: dispatchesPerRun,
    webnn_calls: { builderOps: sessionOps, build: callsAfterSession.build - callsBefore.build,
      buildMs: callsAfterSession.buildMs - callsBefore.buildMs, createContext: callsAfterSession.createContext },
    wasm_threads: ort.env.wasm.numThreads ?? null, cross_origin_isolated: globalThis.crossOriginIsolated,
    output_name: outputName, output_shape: first[outputName].dims, output: toBase64Float32(first[outputName].data),
  };
}

// --- entry ------------------------------------------------------------------------------------------
function publish(result) {
  document.getElementById("result").textContent = JSON.stringify(result, null, 1);
  globalThis.__pageResult = result;
}

try {
  if (!navigator.ml) throw new Error("WebNN is not available in this browser: navigator.ml is undefined");
  countWebnnCalls();
  const settings = {
    modelUrl: query.get("model"), dataUrl: query.get("data"), ortUrl: query.get("ort"), inputName: query.get("input") ?? "x",
    warmup: Number(query.get("warmup") ?? 5), runs: Number(query.get("runs") ?? 50),
    device: query.get("device") ?? "cpu",
  };
  const kind = query.get("kind");
  if (kind === "ours") publish(await benchOurs(settings));
  else if (kind === "ort") publish(await benchOrt(settings));
  else throw new Error(`unknown kind '${kind}' (ours or ort)`);
} catch (err) {
  publish({ ok: false, error: err && err.name ? `${err.name}: ${err.message}` : String(err) });
}
