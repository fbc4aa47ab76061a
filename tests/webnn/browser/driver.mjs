// Real-browser WebNN driver for the test suite (issue 9, point 3).
//
// Launches Chromium 153 (npm @sparticuz/chromium, driven by puppeteer-core) headless with WebNN
// enabled, serves local folders over a private HTTP server on 127.0.0.1 (so ES modules and fetch()
// of model.bin work), and answers requests read from stdin as JSON lines, one JSON line each on
// stdout. One driver (one browser) serves a whole pytest session; tests/webnn/conftest.py starts it.
//
//   node driver.mjs [--no-webnn]      (--no-webnn: launch without the WebNN feature flag)
//
// First line written: {"ready": true, "browser_pid", "browser_version", "launch_ms"} or
// {"ready": false, "error"}.
// Request:  {"id", "page": "/abs/dir", "module": "model.js", "feeds": {name: base64 bytes},
//            "runs": 1, "via": "build"|"load", "device": "cpu", "timeout_ms": 60000}
//   via "build": the driver fetches model.bin beside the module (none -> empty ArrayBuffer) and
//   calls build(context, weights); via "load": it calls load(context, urlOfModelBin).
// Answer:   {"id", "ok": true, "outputs": {name: {"dataType", "shape", "data": base64}},
//            "fetch_ms", "build_ms", "run_ms": [per run], "page_ms", "console": [...]}
//        or {"id", "ok": false, "error": "message", "console": [...]}.
// Page request: {"id", "page": "/abs/dir", "visit": "index.html", "steps": [step, ...],
//            "text": [selector, ...], "timeout_ms"}: opens the page (served from "page") and performs
//   the steps in order; a step is {"wait_for": selector}, {"click": selector},
//   {"select": selector, "value": v} or {"upload": selector, "files": ["/abs/file", ...]}.
// Answer:   {"id", "ok": true, "text": {selector: [textContent of each match]}, "page_errors": [...],
//            "console": [...]} or {"id", "ok": false, "error", "text", "page_errors", "console"}
//   (on failure "text" still holds what the selectors show, to say why).
// Request to open a page of our own (benchmarks/webnn/ uses it): {"id", "open": "/abs/page.html",
//            "mounts": {name: "/abs/dir"}, "query": {key: value}, "timeout_ms"}
//   the driver serves the page's folder and each mounted folder, opens the page with the query
//   ?name=<URL of that folder, ending in />&key=value..., and waits until the page sets
//   globalThis.__pageResult to a JSON-serialisable value (an uncaught page error ends the wait).
// Answer:   {"id", "ok": true, "result": <that value>, "page_ms", "console": [...]}, or {"id", "ok": false,
//            "error", "console"} (also when the result itself is {"ok": false, "error"}).
// {"cmd": "quit"} or end of stdin closes the browser and exits. Every step has a timeout.

import { createReadStream, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { basename, dirname, extname, join, resolve, sep } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import chromium from "@sparticuz/chromium";
import puppeteer from "puppeteer-core";

const WEBNN_FLAG = "--enable-features=WebMachineLearningNeuralNetwork";
const LAUNCH_TIMEOUT_MS = 60_000;
const CLOSE_TIMEOUT_MS = 5_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
const withWebnn = !process.argv.includes("--no-webnn");

function write(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The browser is unpacked once per package version into a folder of the system's temporary
// directory, through a staging folder renamed into place: concurrent drivers (pytest-xdist workers)
// never see a half-written browser, and an interrupted unpack leaves only a stale staging folder.
async function browserExecutable() {
  const entry = fileURLToPath(import.meta.resolve("@sparticuz/chromium")); // <package>/build/index.js
  const { version } = JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8"));
  const target = join(tmpdir(), `converter-webnn-chromium-${version}`);
  if (existsSync(join(target, "chromium"))) return join(target, "chromium");
  const staging = mkdtempSync(`${target}.staging-`);
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = staging; // @sparticuz/chromium unpacks into os.tmpdir()
  try {
    await chromium.executablePath();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  try {
    renameSync(staging, target);
  } catch (err) {
    if (!existsSync(join(target, "chromium"))) throw err;
    rmSync(staging, { recursive: true, force: true }); // another driver won the race
  }
  return join(target, "chromium");
}

// --- static server: /m/<mount id>/<file> serves <file> of a registered folder, nothing else ---
const MIME = {
  ".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html", ".json": "application/json",
  ".bin": "application/octet-stream", ".css": "text/css", ".png": "image/png", ".jpg": "image/jpeg",
  ".wasm": "application/wasm", // needed for WebAssembly.instantiateStreaming (e.g. onnxruntime-web)
};
const mounts = new Map(); // id -> absolute folder
const mountIds = new Map(); // absolute folder -> id

function mount(dir) {
  const abs = resolve(dir);
  if (!mountIds.has(abs)) {
    const id = String(mountIds.size);
    mountIds.set(abs, id);
    mounts.set(id, abs);
  }
  return mountIds.get(abs);
}

const server = createServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  const parts = url.pathname.split("/");
  const root = parts[1] === "m" ? mounts.get(parts[2]) : undefined;
  if (url.pathname === "/") {
    res.writeHead(200, { "content-type": "text/html", "cache-control": "no-store" });
    res.end("<!doctype html><meta charset=utf-8><title>webnn test harness</title>");
    return;
  }
  if (root === undefined) {
    res.writeHead(404).end();
    return;
  }
  const file = resolve(root, decodeURIComponent(parts.slice(3).join("/")));
  if (!(file === root || file.startsWith(root + sep)) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, {
    "content-type": MIME[extname(file)] ?? "application/octet-stream",
    "content-length": statSync(file).size, // not chunked: the browser knows the size up front
    "cache-control": "no-store",
  });
  createReadStream(file, { highWaterMark: 1 << 20 }).pipe(res);
});

// --- what runs in the page ---
async function runInPage({ moduleUrl, feedList, runs, via, device }) {
  // [name, base64] pairs rebuilt without a prototype: a feature may be named "__proto__"
  const feeds = Object.create(null);
  for (const [name, data] of feedList) feeds[name] = data;
  const setStage = (s) => { globalThis.__webnnHarnessStage = s; };
  const t = () => performance.now();
  const CTORS = {
    float32: Float32Array, float16: globalThis.Float16Array, int32: Int32Array, uint32: Uint32Array,
    int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array,
  };
  const fromBase64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const toBase64 = (view) => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(text);
  };
  try {
    setStage("checking navigator.ml");
    if (!("ml" in navigator) || !navigator.ml) {
      throw new Error("WebNN is not available in this browser: navigator.ml is undefined "
        + "(Chromium needs --enable-features=WebMachineLearningNeuralNetwork)");
    }
    setStage("importing the module");
    const mod = await import(moduleUrl);
    for (const name of ["build", "load", "run"]) {
      if (typeof mod[name] !== "function") throw new Error(`the module does not export a function '${name}'`);
    }
    for (const name of ["inputs", "outputs"]) {
      if (typeof mod[name] !== "object" || mod[name] === null) throw new Error(`the module does not export '${name}'`);
    }
    setStage("createContext");
    const context = await navigator.ml.createContext({ deviceType: device });
    const weightsUrl = new URL("model.bin", moduleUrl).href;
    let t0 = t();
    let graph;
    let fetchMs = 0;
    if (via === "load") {
      setStage("load");
      graph = await mod.load(context, weightsUrl);
    } else {
      setStage("fetching model.bin");
      const response = await fetch(weightsUrl);
      const weights = response.ok ? await response.arrayBuffer() : new ArrayBuffer(0);
      fetchMs = t() - t0;
      t0 = t();
      setStage("build");
      graph = await mod.build(context, weights);
    }
    const buildMs = t() - t0;
    setStage("decoding feeds");
    const inputs = Object.create(null); // no prototype: a feature may be named "__proto__"
    for (const [name, desc] of Object.entries(mod.inputs)) {
      if (!(name in feeds)) throw new Error(`no feed for input '${name}'`);
      const Ctor = CTORS[desc.dataType];
      if (!Ctor) throw new Error(`input '${name}': data type '${desc.dataType}' has no typed array here`);
      const bytes = fromBase64(feeds[name]);
      if (bytes.byteLength % Ctor.BYTES_PER_ELEMENT) throw new Error(`input '${name}': ${bytes.byteLength} bytes is not a whole number of ${desc.dataType}`);
      inputs[name] = new Ctor(bytes.buffer, 0, bytes.byteLength / Ctor.BYTES_PER_ELEMENT);
    }
    const runMs = [];
    let results;
    for (let i = 0; i < runs; i++) {
      setStage(`run ${i + 1} of ${runs}`);
      const r0 = t();
      results = await mod.run(context, graph, inputs);
      runMs.push(t() - r0);
    }
    setStage("encoding outputs");
    const outputs = Object.create(null);
    for (const [name, desc] of Object.entries(mod.outputs)) {
      const value = results?.[name];
      if (!ArrayBuffer.isView(value)) throw new Error(`run() returned no typed array for output '${name}'`);
      outputs[name] = { dataType: desc.dataType, shape: desc.shape, data: toBase64(value) };
    }
    setStage("done");
    return { ok: true, outputs, fetch_ms: fetchMs, build_ms: buildMs, run_ms: runMs };
  } catch (err) {
    const what = err && err.name ? `${err.name}: ${err.message}` : String(err);
    return { ok: false, error: `${what} (at: ${globalThis.__webnnHarnessStage})` };
  }
}

// Opens one of our own pages (see "open" above) and waits for the result it publishes.
async function openPage(page, origin, request, timeoutMs, pageErrors) {
  const file = resolve(request.open);
  const params = new URLSearchParams();
  for (const [name, dir] of Object.entries(request.mounts ?? {})) params.set(name, `${origin}/m/${mount(dir)}/`);
  for (const [key, value] of Object.entries(request.query ?? {})) params.set(key, String(value));
  const url = `${origin}/m/${mount(dirname(file))}/${encodeURIComponent(basename(file))}?${params}`;
  await page.goto(url, { timeout: timeoutMs });
  const published = page.waitForFunction(() => globalThis.__pageResult !== undefined,
    { timeout: 0, polling: 50 });
  await Promise.race([published, pageErrors]);
  const result = await page.evaluate(() => JSON.stringify(globalThis.__pageResult));
  const value = JSON.parse(result);
  if (value && typeof value === "object" && value.ok === false) {
    return { ok: false, error: String(value.error ?? "the page reported a failure"), result: value };
  }
  return { ok: true, result: value };
}

async function handle(browser, origin, request) {
  const consoleLines = [];
  const page = await withTimeout(browser.newPage(), CLOSE_TIMEOUT_MS * 2, "opening a page");
  page.on("console", (msg) => consoleLines.push(`${msg.type()}: ${msg.text()}`));
  let pageFailed;
  const pageErrors = new Promise((_, reject) => { pageFailed = reject; });
  pageErrors.catch(() => {}); // only awaited by "open" requests
  page.on("pageerror", (err) => {
    consoleLines.push(`pageerror: ${err.message}`);
    pageFailed(new Error(`uncaught error in the page: ${err.message}`));
  });
  const timeoutMs = request.timeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const p0 = performance.now();
  try {
    const work = (async () => {
      if (request.open !== undefined) return openPage(page, origin, request, timeoutMs, pageErrors);
      const moduleUrl = `${origin}/m/${mount(request.page)}/${request.module ?? "model.js"}`;
      await page.goto(`${origin}/`, { timeout: timeoutMs });
      return page.evaluate(runInPage, {
        moduleUrl, feedList: Object.entries(request.feeds ?? {}), runs: request.runs ?? 1,
        via: request.via ?? "build", device: request.device ?? "cpu",
      });
    })();
    let result;
    try {
      result = await withTimeout(work, timeoutMs, `request ${request.id ?? ""}`.trim());
    } catch (err) {
      let stage = "unknown";
      try {
        stage = (await withTimeout(page.evaluate(() => globalThis.__webnnHarnessStage), 1000, "stage")) ?? stage;
      } catch { /* the page is stuck: keep 'unknown' */ }
      result = { ok: false, error: `${err.message} (at: ${stage})` };
    }
    return { ...result, page_ms: performance.now() - p0, console: consoleLines };
  } finally {
    await withTimeout(page.close(), CLOSE_TIMEOUT_MS, "closing the page").catch(() => {});
  }
}

async function pageTexts(page, selectors) {
  const text = {};
  for (const selector of selectors) {
    text[selector] = await page.$$eval(selector, (nodes) => nodes.map((n) => n.textContent));
  }
  return text;
}

async function handlePageRequest(browser, origin, request) {
  const consoleLines = [];
  const pageErrors = [];
  const page = await withTimeout(browser.newPage(), CLOSE_TIMEOUT_MS * 2, "opening a page");
  page.on("console", (msg) => consoleLines.push(`${msg.type()}: ${msg.text()}`));
  page.on("pageerror", (err) => pageErrors.push(err.message));
  const timeoutMs = request.timeout_ms ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const selectors = request.text ?? [];
  try {
    const url = `${origin}/m/${mount(request.page)}/${request.visit}`;
    const work = (async () => {
      await page.goto(url, { timeout: timeoutMs });
      for (const step of request.steps ?? []) {
        if (step.wait_for) await page.waitForSelector(step.wait_for, { timeout: timeoutMs });
        else if (step.click) await page.click(step.click);
        else if (step.select) await page.select(step.select, step.value);
        else if (step.upload) {
          const input = await page.waitForSelector(step.upload, { timeout: timeoutMs });
          await input.uploadFile(...step.files);
        } else throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    })();
    let error = null;
    try {
      await withTimeout(work, timeoutMs, `page request ${request.id ?? ""}`.trim());
    } catch (err) {
      error = err.message;
    }
    let text = {};
    try {
      text = await withTimeout(pageTexts(page, selectors), 5000, "reading the page");
    } catch (err) {
      error = error ?? err.message;
    }
    const answer = { ok: error === null, text, page_errors: pageErrors, console: consoleLines };
    return error === null ? answer : { ...answer, error };
  } finally {
    await withTimeout(page.close(), CLOSE_TIMEOUT_MS, "closing the page").catch(() => {});
  }
}

async function main() {
  const t0 = performance.now();
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const origin = `http://127.0.0.1:${server.address().port}`;
  let browser;
  try {
    const executablePath = await withTimeout(browserExecutable(), LAUNCH_TIMEOUT_MS, "unpacking the browser");
    const args = ["--no-sandbox", "--no-zygote", "--disable-dev-shm-usage"];
    if (withWebnn) args.push(WEBNN_FLAG);
    browser = await puppeteer.launch({
      executablePath, headless: "shell", args, timeout: LAUNCH_TIMEOUT_MS, protocolTimeout: 300_000,
      pipe: true,
    });
  } catch (err) {
    write({ ready: false, error: `could not start the browser: ${err.message}` });
    server.close();
    process.exit(1);
  }
  let closing = false;
  const shutdown = async (code) => {
    if (closing) return;
    closing = true;
    await withTimeout(browser.close(), CLOSE_TIMEOUT_MS, "closing the browser").catch(() => {
      browser.process()?.kill("SIGKILL");
    });
    server.close();
    process.exit(code);
  };
  process.on("SIGTERM", () => shutdown(0));
  process.on("SIGINT", () => shutdown(0));
  write({
    ready: true, browser_pid: browser.process()?.pid ?? null, browser_version: await browser.version(),
    webnn_flag: withWebnn, launch_ms: performance.now() - t0,
  });

  // Requests are answered one at a time, in order.
  let queue = Promise.resolve();
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    queue = queue.then(async () => {
      if (closing || !line.trim()) return;
      let request;
      try {
        request = JSON.parse(line);
      } catch (err) {
        write({ ok: false, error: `request is not JSON: ${err.message}` });
        return;
      }
      if (request.cmd === "quit") return shutdown(0);
      try {
        const answer = request.visit !== undefined ? await handlePageRequest(browser, origin, request)
          : await handle(browser, origin, request);
        write({ id: request.id ?? null, ...answer });
      } catch (err) {
        write({ id: request.id ?? null, ok: false, error: `driver error: ${err.message}` });
      }
    });
  });
  lines.on("close", () => { queue = queue.then(() => shutdown(0)); });
}

main();
