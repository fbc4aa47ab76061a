// Records a WebNN graph built by a model.js module, validating every builder call against the spec.
//
//   node recorder.mjs MODEL_JS OUT_JSON
//
// Installs a recording MLGraphBuilder, MLOperand and a fake navigator.ml / MLContext as globals,
// imports MODEL_JS (an ES module exporting `inputs`, `outputs` and `async build(context, weights)`),
// calls build with the bytes of model.bin beside it (an empty ArrayBuffer when there is none) and
// writes OUT_JSON (docs/webnn-graph-format.md) plus its weights file (OUT_JSON's name with `.bin` in
// place of `.json`; every constant at a 16-byte aligned offset).
//
// Chromium silently ignores unknown option keys; here every call is checked (method, argument
// kinds, operand ownership, option keys, enum values, data types, ranks, shapes) and a violation
// throws a TypeError naming the method, the argument and the problem. A violation the module
// catches still fails the recording. Exit status: 0 written, 1 error (one line starting with
// "recorder: " on stderr and in OUT_JSON.error).
import { readFileSync, writeFileSync, existsSync, openSync, writeSync, closeSync, renameSync } from "node:fs";
import { dirname, join, basename } from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";

const TABLE = JSON.parse(readFileSync(join(dirname(fileURLToPath(import.meta.url)), "ops.json"), "utf8"));
const DATA_TYPES = TABLE.dataTypes;
const BYTES = { float32: 4, float16: 2, int32: 4, uint32: 4, int64: 8, uint64: 8, int8: 1, uint8: 1 };
const FLOATS = ["float32", "float16"];
const MAX_RANK = 32;
const MAX_ELEMENTS = 2 ** 40;

let firstViolation = null;

class ValidationError extends TypeError {}

function fail(method, what) {
  const err = new ValidationError(`MLGraphBuilder.${method}: ${what}`);
  if (firstViolation === null) firstViolation = err;
  throw err;
}

const internals = new WeakMap(); // MLOperand -> {builder, id, dataType, shape}

class MLOperand {
  constructor() {
    throw new TypeError("MLOperand has no public constructor: operands come from MLGraphBuilder methods");
  }
  get dataType() { return internals.get(this).dataType; }
  get shape() { return [...internals.get(this).shape]; }
}

function newOperand(builder, id, dataType, shape) {
  const o = Object.create(MLOperand.prototype);
  internals.set(o, { builder, id, dataType, shape: [...shape] });
  return o;
}

class MLGraph {
  constructor() { throw new TypeError("MLGraph has no public constructor"); }
  destroy() {}
}

class MLContext {
  constructor() { throw new TypeError("use navigator.ml.createContext()"); }
  opSupportLimits() {
    const any = { dataTypes: [...DATA_TYPES], rankRange: { min: 0, max: MAX_RANK } };
    const limits = { preferredInputLayout: "nchw", maxTensorByteLength: 2 ** 53 - 1, input: any, constant: any, output: any };
    for (const name of Object.keys(TABLE.ops)) limits[name] = { input: any, output: any };
    return limits;
  }
  async createTensor() { throw new Error("the WebNN recorder only records graphs: tensors cannot be created"); }
  async createConstantTensor() { throw new Error("the WebNN recorder only records graphs: tensors cannot be created"); }
  writeTensor() { throw new Error("the WebNN recorder only records graphs"); }
  async readTensor() { throw new Error("the WebNN recorder only records graphs"); }
  dispatch() { throw new Error("the WebNN recorder only records graphs: nothing can be dispatched"); }
  destroy() {}
}
const theContext = Object.create(MLContext.prototype);

// ---- shapes -------------------------------------------------------------------------------------

const prod = (s) => s.reduce((a, b) => a * b, 1);

function checkShape(method, where, shape) {
  if (!Array.isArray(shape)) fail(method, `${where}: shape must be a sequence of dimensions`);
  if (shape.length > MAX_RANK) fail(method, `${where}: rank ${shape.length} is more than ${MAX_RANK}`);
  for (const d of shape) {
    if (!Number.isInteger(d) || d <= 0 || d > 0xffffffff) fail(method, `${where}: dimension ${String(d)} is not a positive 32-bit integer`);
  }
  if (prod(shape) > MAX_ELEMENTS) fail(method, `${where}: ${prod(shape)} elements is too many`);
}

function checkDescriptor(method, desc) {
  if (desc === null || typeof desc !== "object") fail(method, "descriptor must be an MLOperandDescriptor {dataType, shape}");
  if ("dimensions" in desc) fail(method, "descriptor.dimensions is the old API: use descriptor.shape");
  for (const k of Object.keys(desc)) if (k !== "dataType" && k !== "shape") fail(method, `descriptor has unknown key '${k}'`);
  if (!DATA_TYPES.includes(desc.dataType)) fail(method, `descriptor.dataType '${desc.dataType}' is not one of ${DATA_TYPES.join(", ")}`);
  checkShape(method, "descriptor.shape", desc.shape);
  return { dataType: desc.dataType, shape: [...desc.shape] };
}

function broadcast(method, a, b) {
  const r = Math.max(a.length, b.length);
  const out = [];
  for (let i = 0; i < r; i++) {
    const x = a[a.length - r + i] ?? 1;
    const y = b[b.length - r + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) fail(method, `shapes [${a}] and [${b}] are not broadcastable`);
    out.push(Math.max(x, y));
  }
  return out;
}

function unidirectional(method, from, to) {
  if (broadcast(method, from, to).join() !== to.join() || from.length > to.length) {
    fail(method, `shape [${from}] is not unidirectionally broadcastable to [${to}]`);
  }
}

// ---- argument checking --------------------------------------------------------------------------

function checkValue(builder, method, name, kind, v) {
  const isUint = (x) => Number.isInteger(x) && x >= 0 && x <= 0xffffffff;
  const bad = (what) => fail(method, `${name}: ${what}, got ${describe(v)}`);
  if (kind === "operand") {
    if (!(v instanceof MLOperand) || !internals.has(v)) bad("expected an MLOperand");
    if (internals.get(v).builder !== builder) bad("the operand belongs to another MLGraphBuilder");
    return v;
  }
  if (kind === "operands") {
    if (!Array.isArray(v) || v.length === 0) bad("expected a non-empty sequence of MLOperands");
    v.forEach((x, i) => checkValue(builder, method, `${name}[${i}]`, "operand", x));
    return [...v];
  }
  if (Array.isArray(kind)) {
    if (!kind.includes(v)) bad(`expected one of ${kind.map((k) => `'${k}'`).join(", ")}`);
    return v;
  }
  switch (kind) {
    case "uint": if (!isUint(v)) bad("expected an unsigned 32-bit integer"); return v;
    case "uints": if (!Array.isArray(v) || !v.every(isUint)) bad("expected a sequence of unsigned 32-bit integers"); return [...v];
    case "splits":
      if (isUint(v) || (Array.isArray(v) && v.every(isUint))) return Array.isArray(v) ? [...v] : v;
      bad("expected an unsigned integer or a sequence of them");
      break;
    case "int": if (!Number.isInteger(v) || Math.abs(v) > 0x7fffffff) bad("expected a 32-bit integer"); return v;
    case "float": if (typeof v !== "number") bad("expected a number"); return v;
    case "floats": if (!Array.isArray(v) || !v.every((x) => typeof x === "number")) bad("expected a sequence of numbers"); return [...v];
    case "number": if (typeof v !== "number" && typeof v !== "bigint") bad("expected a number or a bigint"); return v;
    case "bool": if (typeof v !== "boolean") bad("expected a boolean"); return v;
    case "dataType": if (!DATA_TYPES.includes(v)) bad(`expected one of ${DATA_TYPES.join(", ")}`); return v;
    case "activations":
      if (!Array.isArray(v) || !v.every((x) => ["relu", "sigmoid", "tanh"].includes(x))) bad("expected a sequence of 'relu' | 'sigmoid' | 'tanh'");
      return [...v];
    default: throw new Error(`ops.json kind ${kind}`);
  }
}

function describe(v) {
  if (v instanceof MLOperand) return "an MLOperand";
  if (typeof v === "bigint") return `${v}n`;
  try { const s = JSON.stringify(v); return s === undefined ? String(v) : s.slice(0, 80); } catch { return typeof v; }
}

// ---- shape and type inference (spec 8.9), one entry per method ----------------------------------

const info = (o) => internals.get(o);
const axisOk = (method, name, axis, rank) => { if (axis >= rank) fail(method, `${name} ${axis} is out of range for rank ${rank}`); };
const needTypes = (method, name, o, types) => {
  if (!types.includes(info(o).dataType)) fail(method, `${name}: data type '${info(o).dataType}' is not allowed (${types.join(", ")})`);
};
const needRank = (method, name, o, lo, hi = lo) => {
  const r = info(o).shape.length;
  if (r < lo || r > hi) fail(method, `${name}: rank ${r} is not ${lo === hi ? lo : `${lo}..${hi}`}`);
};
const sameType = (method, name, o, ref) => {
  if (info(o).dataType !== info(ref).dataType) fail(method, `${name}: data type '${info(o).dataType}' differs from the input's '${info(ref).dataType}'`);
};
const needShape = (method, name, o, shape) => {
  if (info(o).shape.join() !== shape.join()) fail(method, `${name}: shape [${info(o).shape}] is not [${shape}]`);
};
const out = (dataType, shape) => ({ dataType, shape });
const same = (o) => out(info(o).dataType, info(o).shape);

function reduceShape(method, shape, axes, keep) {
  const ax = axes ?? shape.map((_, i) => i);
  ax.forEach((a) => axisOk(method, "axes", a, shape.length));
  if (new Set(ax).size !== ax.length) fail(method, "axes has duplicates");
  return keep ? shape.map((d, i) => (ax.includes(i) ? 1 : d)) : shape.filter((_, i) => !ax.includes(i));
}

function pool(method, a, o) {
  needTypes(method, "input", a.input, FLOATS); needRank(method, "input", a.input, 4);
  const s = info(a.input).shape;
  const nhwc = o.layout === "nhwc";
  const [h, w] = nhwc ? [s[1], s[2]] : [s[2], s[3]];
  const win = o.windowDimensions ?? [h, w];
  const pad = o.padding ?? [0, 0, 0, 0];
  const st = o.strides ?? [1, 1];
  const dil = o.dilations ?? [1, 1];
  if (win.length !== 2 || pad.length !== 4 || st.length !== 2 || dil.length !== 2) fail(method, "windowDimensions/strides/dilations need 2 values, padding 4");
  if (st.includes(0) || dil.includes(0) || win.includes(0)) fail(method, "windowDimensions, strides and dilations must be positive");
  const sizes = [h, w].map((n, i) => {
    const span = n + pad[2 * i] + pad[2 * i + 1] - ((win[i] - 1) * dil[i] + 1);
    if (span < 0) fail(method, `the window is larger than the padded input on axis ${i}`);
    return span / st[i] + 1;
  });
  let hw = sizes.map((x) => (o.outputShapeRounding === "ceil" ? Math.ceil(x) : Math.floor(x)));
  if (o.outputSizes) {
    if (o.outputSizes.length !== 2) fail(method, "outputSizes needs 2 values");
    o.outputSizes.forEach((v, i) => {
      if (v !== Math.floor(sizes[i]) && v !== Math.ceil(sizes[i])) fail(method, `outputSizes[${i}] ${v} is neither the floor nor the ceil output size`);
    });
    hw = o.outputSizes;
  }
  return [out(info(a.input).dataType, nhwc ? [s[0], hw[0], hw[1], s[3]] : [s[0], s[1], hw[0], hw[1]])];
}

function convShapes(method, a, o, transposed) {
  needTypes(method, "input", a.input, FLOATS); needRank(method, "input", a.input, 4);
  sameType(method, "filter", a.filter, a.input); needRank(method, "filter", a.filter, 4);
  const s = info(a.input).shape;
  const f = info(a.filter).shape;
  const nhwc = o.inputLayout === "nhwc";
  const [n, c, h, w] = nhwc ? [s[0], s[3], s[1], s[2]] : s;
  const layout = o.filterLayout ?? (transposed ? "iohw" : "oihw");
  const dims = Object.fromEntries([...layout].map((k, i) => [k, f[i]]));
  const groups = o.groups ?? 1;
  const pad = o.padding ?? [0, 0, 0, 0];
  const st = o.strides ?? [1, 1];
  const dil = o.dilations ?? [1, 1];
  if (pad.length !== 4 || st.length !== 2 || dil.length !== 2) fail(method, "padding needs 4 values, strides and dilations 2");
  if (groups === 0 || st.includes(0) || dil.includes(0)) fail(method, "groups, strides and dilations must be positive");
  let outC;
  let hw;
  if (!transposed) {
    if (c !== dims.i * groups) fail(method, `filter input channels ${dims.i} x groups ${groups} is not the input's ${c} channels`);
    if (dims.o % groups) fail(method, `filter output channels ${dims.o} are not divisible by groups ${groups}`);
    outC = dims.o;
    hw = [h, w].map((x, i) => {
      const span = x + pad[2 * i] + pad[2 * i + 1] - ((([dims.h, dims.w][i]) - 1) * dil[i] + 1);
      if (span < 0) fail(method, `the filter is larger than the padded input on axis ${i}`);
      return Math.floor(span / st[i]) + 1;
    });
  } else {
    if (c !== dims.i) fail(method, `filter input channels ${dims.i} are not the input's ${c} channels`);
    outC = dims.o * groups;
    const op = o.outputPadding ?? [0, 0];
    hw = o.outputSizes ?? [h, w].map((x, i) => (x - 1) * st[i] + ((([dims.h, dims.w][i]) - 1) * dil[i] + 1) - pad[2 * i] - pad[2 * i + 1] + op[i]);
    if (hw.length !== 2 || hw.some((v) => v <= 0)) fail(method, `output sizes [${hw}] are not 2 positive values`);
  }
  if (o.bias) { sameType(method, "options.bias", o.bias, a.input); needShape(method, "options.bias", o.bias, [outC]); }
  return [out(info(a.input).dataType, nhwc ? [n, hw[0], hw[1], outC] : [n, outC, hw[0], hw[1]])];
}

function recurrentShapes(method, a, o, gates, cell) {
  needTypes(method, "input", a.input, FLOATS);
  const dt = info(a.input).dataType;
  const hs = a.hiddenSize;
  if (hs === 0) fail(method, "hiddenSize must be positive");
  for (const k of ["weight", "recurrentWeight"]) sameType(method, k, a[k], a.input);
  if (cell) {
    needRank(method, "input", a.input, 2);
    const [b, inSize] = info(a.input).shape;
    needShape(method, "weight", a.weight, [gates * hs, inSize]);
    needShape(method, "recurrentWeight", a.recurrentWeight, [gates * hs, hs]);
    needShape(method, "hiddenState", a.hiddenState, [b, hs]);
    if (a.cellState) needShape(method, "cellState", a.cellState, [b, hs]);
    for (const k of ["bias", "recurrentBias"]) if (o[k]) needShape(method, `options.${k}`, o[k], [gates * hs]);
    if (o.peepholeWeight) needShape(method, "options.peepholeWeight", o.peepholeWeight, [3 * hs]);
    return gates === 4 ? [out(dt, [b, hs]), out(dt, [b, hs])] : [out(dt, [b, hs])];
  }
  needRank(method, "input", a.input, 3);
  const [steps, b, inSize] = info(a.input).shape;
  if (a.steps !== steps) fail(method, `steps ${a.steps} is not the input's ${steps}`);
  const d = o.direction === "both" ? 2 : 1;
  needShape(method, "weight", a.weight, [d, gates * hs, inSize]);
  needShape(method, "recurrentWeight", a.recurrentWeight, [d, gates * hs, hs]);
  for (const k of ["bias", "recurrentBias"]) if (o[k]) needShape(method, `options.${k}`, o[k], [d, gates * hs]);
  if (o.peepholeWeight) needShape(method, "options.peepholeWeight", o.peepholeWeight, [d, 3 * hs]);
  for (const k of ["initialHiddenState", "initialCellState"]) if (o[k]) needShape(method, `options.${k}`, o[k], [d, b, hs]);
  const outs = gates === 4 ? [out(dt, [d, b, hs]), out(dt, [d, b, hs])] : [out(dt, [d, b, hs])];
  if (o.returnSequence) outs.push(out(dt, [steps, d, b, hs]));
  return outs;
}

const binary = (method, a) => {
  if (info(a.a).dataType !== info(a.b).dataType) fail(method, `a is ${info(a.a).dataType} but b is ${info(a.b).dataType}`);
  return broadcast(method, info(a.a).shape, info(a.b).shape);
};
const floatUnary = (method, a) => { needTypes(method, "input", a.input, FLOATS); return [same(a.input)]; };

const INFER = {
  add: (m, a) => [out(info(a.a).dataType, binary(m, a))],
  argMax: (m, a, o) => { axisOk(m, "axis", a.axis, info(a.input).shape.length); return [out(o.outputDataType ?? "int32", reduceShape(m, info(a.input).shape, [a.axis], o.keepDimensions))]; },
  averagePool2d: (m, a, o) => pool(m, a, o),
  batchNormalization: (m, a, o) => {
    needTypes(m, "input", a.input, FLOATS);
    const s = info(a.input).shape; const axis = o.axis ?? 1; axisOk(m, "options.axis", axis, s.length);
    for (const k of ["mean", "variance"]) { sameType(m, k, a[k], a.input); needShape(m, k, a[k], [s[axis]]); }
    for (const k of ["scale", "bias"]) if (o[k]) { sameType(m, `options.${k}`, o[k], a.input); needShape(m, `options.${k}`, o[k], [s[axis]]); }
    return [same(a.input)];
  },
  cast: (m, a) => [out(a.dataType, info(a.input).shape)],
  clamp: (m, a, o) => {
    if (typeof o.minValue === "number" && typeof o.maxValue === "number" && o.minValue > o.maxValue) fail(m, "options.minValue is greater than options.maxValue");
    return [same(a.input)];
  },
  concat: (m, a) => {
    const first = info(a.inputs[0]);
    axisOk(m, "axis", a.axis, first.shape.length);
    const shape = [...first.shape];
    shape[a.axis] = 0;
    for (const [i, o] of a.inputs.entries()) {
      const s = info(o).shape;
      if (info(o).dataType !== first.dataType) fail(m, `inputs[${i}] is ${info(o).dataType}, inputs[0] is ${first.dataType}`);
      if (s.length !== first.shape.length || s.some((d, j) => j !== a.axis && d !== first.shape[j])) fail(m, `inputs[${i}] shape [${s}] does not match [${first.shape}] outside axis ${a.axis}`);
      shape[a.axis] += s[a.axis];
    }
    return [out(first.dataType, shape)];
  },
  conv2d: (m, a, o) => convShapes(m, a, o, false),
  convTranspose2d: (m, a, o) => convShapes(m, a, o, true),
  cumulativeSum: (m, a) => { axisOk(m, "axis", a.axis, info(a.input).shape.length); return [same(a.input)]; },
  dequantizeLinear: (m, a) => {
    needTypes(m, "input", a.input, ["int8", "uint8", "int32", "uint32"]); needTypes(m, "scale", a.scale, FLOATS);
    if (info(a.zeroPoint).dataType !== info(a.input).dataType) fail(m, "zeroPoint must have the input's data type");
    return [out(info(a.scale).dataType, info(a.input).shape)];
  },
  elu: (m, a) => floatUnary(m, a),
  expand: (m, a) => { checkShape(m, "newShape", a.newShape); unidirectional(m, info(a.input).shape, a.newShape); return [out(info(a.input).dataType, [...a.newShape])]; },
  gather: (m, a, o) => {
    const s = info(a.input).shape; const axis = o.axis ?? 0; axisOk(m, "options.axis", axis, s.length);
    needTypes(m, "indices", a.indices, ["int32", "uint32", "int64"]);
    return [out(info(a.input).dataType, [...s.slice(0, axis), ...info(a.indices).shape, ...s.slice(axis + 1)])];
  },
  gatherElements: (m, a, o) => {
    const s = info(a.input).shape; const axis = o.axis ?? 0; axisOk(m, "options.axis", axis, s.length);
    needTypes(m, "indices", a.indices, ["int32", "uint32", "int64"]); needRank(m, "indices", a.indices, s.length);
    return [out(info(a.input).dataType, info(a.indices).shape)];
  },
  gatherND: (m, a) => {
    const s = info(a.input).shape; const is = info(a.indices).shape; const k = is[is.length - 1];
    needTypes(m, "indices", a.indices, ["int32", "uint32", "int64"]);
    if (is.length < 1 || k > s.length) fail(m, `indices last dimension ${k} is larger than the input rank ${s.length}`);
    return [out(info(a.input).dataType, [...is.slice(0, -1), ...s.slice(k)])];
  },
  gelu: (m, a) => floatUnary(m, a),
  gemm: (m, a, o) => {
    needTypes(m, "a", a.a, FLOATS); sameType(m, "b", a.b, a.a); needRank(m, "a", a.a, 2); needRank(m, "b", a.b, 2);
    const [am, ak] = o.aTranspose ? [...info(a.a).shape].reverse() : info(a.a).shape;
    const [bk, bn] = o.bTranspose ? [...info(a.b).shape].reverse() : info(a.b).shape;
    if (ak !== bk) fail(m, `inner dimensions ${ak} and ${bk} differ`);
    if (o.c) { sameType(m, "options.c", o.c, a.a); unidirectional(m, info(o.c).shape, [am, bn]); }
    return [out(info(a.a).dataType, [am, bn])];
  },
  gru: (m, a, o) => recurrentShapes(m, a, o, 3, false),
  gruCell: (m, a, o) => recurrentShapes(m, a, o, 3, true),
  hardSigmoid: (m, a) => floatUnary(m, a),
  hardSwish: (m, a) => floatUnary(m, a),
  instanceNormalization: (m, a, o) => {
    needTypes(m, "input", a.input, FLOATS); needRank(m, "input", a.input, 4);
    const c = info(a.input).shape[o.layout === "nhwc" ? 3 : 1];
    for (const k of ["scale", "bias"]) if (o[k]) { sameType(m, `options.${k}`, o[k], a.input); needShape(m, `options.${k}`, o[k], [c]); }
    return [same(a.input)];
  },
  layerNormalization: (m, a, o) => {
    needTypes(m, "input", a.input, FLOATS);
    const s = info(a.input).shape; const axes = o.axes ?? s.map((_, i) => i).slice(1);
    reduceShape(m, s, axes, false);
    for (const k of ["scale", "bias"]) if (o[k]) { sameType(m, `options.${k}`, o[k], a.input); needShape(m, `options.${k}`, o[k], axes.map((x) => s[x])); }
    return [same(a.input)];
  },
  leakyRelu: (m, a) => floatUnary(m, a),
  linear: (m, a) => floatUnary(m, a),
  logicalNot: (m, a) => { needTypes(m, "a", a.a, ["uint8"]); return [out("uint8", info(a.a).shape)]; },
  lstm: (m, a, o) => recurrentShapes(m, a, o, 4, false),
  lstmCell: (m, a, o) => recurrentShapes(m, a, o, 4, true),
  matmul: (m, a) => {
    needTypes(m, "a", a.a, FLOATS); sameType(m, "b", a.b, a.a);
    const sa = info(a.a).shape; const sb = info(a.b).shape;
    if (sa.length < 2 || sb.length < 2) fail(m, "a and b must have rank 2 or more");
    if (sa[sa.length - 1] !== sb[sb.length - 2]) fail(m, `inner dimensions ${sa[sa.length - 1]} and ${sb[sb.length - 2]} differ`);
    return [out(info(a.a).dataType, [...broadcast(m, sa.slice(0, -2), sb.slice(0, -2)), sa[sa.length - 2], sb[sb.length - 1]])];
  },
  pad: (m, a, o) => {
    const s = info(a.input).shape;
    if (a.beginningPadding.length !== s.length || a.endingPadding.length !== s.length) fail(m, `beginningPadding and endingPadding need ${s.length} values`);
    if (o.mode === "reflection" && s.some((d, i) => a.beginningPadding[i] >= d || a.endingPadding[i] >= d)) fail(m, "reflection padding must be smaller than the dimension");
    return [out(info(a.input).dataType, s.map((d, i) => d + a.beginningPadding[i] + a.endingPadding[i]))];
  },
  prelu: (m, a) => { sameType(m, "slope", a.slope, a.input); unidirectional(m, info(a.slope).shape, info(a.input).shape); return [same(a.input)]; },
  quantizeLinear: (m, a) => {
    needTypes(m, "input", a.input, FLOATS); sameType(m, "scale", a.scale, a.input);
    needTypes(m, "zeroPoint", a.zeroPoint, ["int8", "uint8", "int32", "uint32"]);
    return [out(info(a.zeroPoint).dataType, info(a.input).shape)];
  },
  resample2d: (m, a, o) => {
    needTypes(m, "input", a.input, [...FLOATS, "int8", "uint8"]); needRank(m, "input", a.input, 4);
    const s = [...info(a.input).shape]; const axes = o.axes ?? [2, 3];
    if (axes.length !== 2 || axes[0] === axes[1] || axes.some((x) => x > 3)) fail(m, "options.axes needs 2 distinct axes of the 4");
    if (o.sizes) { if (o.sizes.length !== 2 || o.sizes.includes(0)) fail(m, "options.sizes needs 2 positive values"); }
    else if (o.scales && (o.scales.length !== 2 || o.scales.some((x) => !(x > 0)))) fail(m, "options.scales needs 2 positive values");
    axes.forEach((ax, i) => { s[ax] = o.sizes ? o.sizes[i] : Math.floor(s[ax] * (o.scales ?? [1, 1])[i]); });
    if (s.includes(0)) fail(m, "the output would be empty");
    return [out(info(a.input).dataType, s)];
  },
  reshape: (m, a) => {
    checkShape(m, "newShape", a.newShape);
    if (prod(a.newShape) !== prod(info(a.input).shape)) fail(m, `newShape [${a.newShape}] has ${prod(a.newShape)} elements, the input ${prod(info(a.input).shape)}`);
    return [out(info(a.input).dataType, a.newShape)];
  },
  reverse: (m, a, o) => { reduceShape(m, info(a.input).shape, o.axes, true); return [same(a.input)]; },
  scatterElements: (m, a, o) => {
    const s = info(a.input).shape; const axis = o.axis ?? 0; axisOk(m, "options.axis", axis, s.length);
    needTypes(m, "indices", a.indices, ["int32", "uint32", "int64"]); sameType(m, "updates", a.updates, a.input);
    if (info(a.indices).shape.join() !== info(a.updates).shape.join()) fail(m, "indices and updates must have the same shape");
    return [same(a.input)];
  },
  scatterND: (m, a) => {
    needTypes(m, "indices", a.indices, ["int32", "uint32", "int64"]); sameType(m, "updates", a.updates, a.input);
    const s = info(a.input).shape; const is = info(a.indices).shape; const k = is[is.length - 1];
    if (k > s.length) fail(m, "indices last dimension is larger than the input rank");
    const want = [...is.slice(0, -1), ...s.slice(k)];
    if (info(a.updates).shape.join() !== want.join()) fail(m, `updates shape [${info(a.updates).shape}] is not [${want}]`);
    return [same(a.input)];
  },
  slice: (m, a, o) => {
    const s = info(a.input).shape; const st = o.strides ?? s.map(() => 1);
    if (a.starts.length !== s.length || a.sizes.length !== s.length || st.length !== s.length) fail(m, `starts, sizes and strides need ${s.length} values`);
    s.forEach((d, i) => {
      if (a.sizes[i] === 0 || st[i] === 0) fail(m, "sizes and strides must be positive");
      if (a.starts[i] + a.sizes[i] > d) fail(m, `starts[${i}] + sizes[${i}] is beyond dimension ${d}`);
    });
    return [out(info(a.input).dataType, a.sizes.map((n, i) => Math.ceil(n / st[i])))];
  },
  softmax: (m, a) => { needTypes(m, "input", a.input, FLOATS); axisOk(m, "axis", a.axis, info(a.input).shape.length); return [same(a.input)]; },
  split: (m, a, o) => {
    const s = info(a.input).shape; const axis = o.axis ?? 0; axisOk(m, "options.axis", axis, s.length);
    let sizes;
    if (Array.isArray(a.splits)) {
      sizes = a.splits;
      if (sizes.reduce((x, y) => x + y, 0) !== s[axis] || sizes.includes(0)) fail(m, `splits [${sizes}] do not sum to dimension ${s[axis]}`);
    } else {
      if (a.splits === 0 || s[axis] % a.splits) fail(m, `dimension ${s[axis]} is not divisible into ${a.splits} splits`);
      sizes = Array(a.splits).fill(s[axis] / a.splits);
    }
    return sizes.map((n) => out(info(a.input).dataType, s.map((d, i) => (i === axis ? n : d))));
  },
  tile: (m, a) => {
    const s = info(a.input).shape;
    if (a.repetitions.length !== s.length || a.repetitions.includes(0)) fail(m, `repetitions need ${s.length} positive values`);
    return [out(info(a.input).dataType, s.map((d, i) => d * a.repetitions[i]))];
  },
  transpose: (m, a, o) => {
    const s = info(a.input).shape; const p = o.permutation ?? s.map((_, i) => s.length - 1 - i);
    if (p.length !== s.length || [...p].sort((x, y) => x - y).some((v, i) => v !== i)) fail(m, `options.permutation [${p}] is not a permutation of ${s.length} axes`);
    return [out(info(a.input).dataType, p.map((i) => s[i]))];
  },
  triangular: (m, a) => { needRank(m, "input", a.input, 2, MAX_RANK); return [same(a.input)]; },
  where: (m, a) => {
    needTypes(m, "condition", a.condition, ["uint8"]);
    if (info(a.trueValue).dataType !== info(a.falseValue).dataType) fail(m, "trueValue and falseValue must have the same data type");
    const s = broadcast(m, broadcast(m, info(a.condition).shape, info(a.trueValue).shape), info(a.falseValue).shape);
    return [out(info(a.trueValue).dataType, s)];
  },
};
INFER.argMin = INFER.argMax;
INFER.maxPool2d = INFER.averagePool2d;
INFER.l2Pool2d = INFER.averagePool2d;
for (const m of ["sub", "mul", "div", "max", "min", "pow"]) INFER[m] = INFER.add;
for (const m of ["equal", "notEqual", "greater", "greaterOrEqual", "lesser", "lesserOrEqual"]) INFER[m] = (mm, a) => [out("uint8", binary(mm, a))];
for (const m of ["logicalAnd", "logicalOr", "logicalXor"]) {
  INFER[m] = (mm, a) => { needTypes(mm, "a", a.a, ["uint8"]); needTypes(mm, "b", a.b, ["uint8"]); return [out("uint8", binary(mm, a))]; };
}
for (const m of ["isNaN", "isInfinite"]) INFER[m] = (mm, a) => { needTypes(mm, "a", a.a, FLOATS); return [out("uint8", info(a.a).shape)]; };
for (const m of ["ceil", "cos", "erf", "exp", "floor", "log", "reciprocal", "roundEven", "sin", "sqrt", "tan", "tanh", "sigmoid", "softplus", "softsign"]) INFER[m] = floatUnary;
for (const m of ["abs", "neg", "sign", "relu", "identity"]) INFER[m] = (mm, a) => [same(a.input)];
for (const m of Object.keys(TABLE.ops).filter((k) => k.startsWith("reduce"))) {
  INFER[m] = (mm, a, o) => [out(info(a.input).dataType, reduceShape(mm, info(a.input).shape, o.axes, o.keepDimensions))];
}
for (const m of Object.keys(TABLE.ops)) if (!INFER[m]) throw new Error(`no shape inference for ${m}`);

// ---- the builder --------------------------------------------------------------------------------

const F16 = (() => {
  const f = new Float32Array(1); const u = new Uint32Array(f.buffer);
  return (x) => { // float32 -> float16 bits, round to nearest even
    f[0] = x; const b = u[0]; const sign = (b >>> 16) & 0x8000; const exp = (b >>> 23) & 0xff; let mant = b & 0x7fffff;
    if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
    let e = exp - 127 + 15;
    if (e >= 0x1f) return sign | 0x7c00;
    if (e <= 0) {
      if (e < -10) return sign;
      mant |= 0x800000; const shift = 14 - e; const half = 1 << (shift - 1);
      let r = mant >> shift; const rem = mant & ((1 << shift) - 1);
      if (rem > half || (rem === half && (r & 1))) r++;
      return sign | r;
    }
    let r = (e << 10) | (mant >> 13); const rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem === 0x1000 && (r & 1))) r++;
    return sign | r;
  };
})();

// Node before 24 has no Float16Array; modules write float16 weights with it (Chromium warns about
// Uint16Array). This stand-in holds float16 bit patterns: views of a buffer keep their bytes, and
// numbers given to the constructor are rounded to float16 (nearest even).
if (typeof globalThis.Float16Array === "undefined") {
  globalThis.Float16Array = class Float16Array extends Uint16Array {
    constructor(a, b, c) {
      if (a !== null && typeof a === "object" && !(a instanceof ArrayBuffer) && !ArrayBuffer.isView(a)
          && !(typeof SharedArrayBuffer !== "undefined" && a instanceof SharedArrayBuffer)) {
        super(Array.from(a, (v) => F16(Number(v))));
      } else if (typeof a === "number" || a === undefined) super(a ?? 0);
      else super(a, b, c);
    }
  };
}

const TYPED = { float32: Float32Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array, int8: Int8Array, uint8: Uint8Array };

class MLGraphBuilder {
  #state;
  constructor(context) {
    if (!(context instanceof MLContext)) fail("constructor", "context: expected the MLContext from navigator.ml.createContext()");
    this.#state = { ops: [], inputs: {}, constants: {}, chunks: [], size: 0, next: 0, names: new Set(), built: false };
  }

  #live(method) {
    if (this.#state.built) fail(method, "the builder has already built its graph");
  }

  #id(prefix) { return `${prefix}${this.#state.next++}`; }

  input(name, descriptor) {
    this.#live("input");
    if (typeof name !== "string" || name === "") fail("input", "name: expected a non-empty string");
    if (this.#state.names.has(name)) fail("input", `name: '${name}' is already an input of this graph`);
    const desc = checkDescriptor("input", descriptor);
    this.#state.names.add(name);
    const id = this.#id("in");
    this.#state.inputs[id] = { name, descriptor: desc };
    return newOperand(this, id, desc.dataType, desc.shape);
  }

  constant(a, b) {
    this.#live("constant");
    let desc;
    let bytes;
    if (typeof a === "string") { // constant(dataType, value): a scalar
      if (!DATA_TYPES.includes(a)) fail("constant", `type: '${a}' is not one of ${DATA_TYPES.join(", ")}`);
      if (typeof b !== "number" && typeof b !== "bigint") fail("constant", "value: expected a number or a bigint");
      desc = { dataType: a, shape: [] };
      if (a === "float16") bytes = new Uint8Array(new Uint16Array([F16(Number(b))]).buffer);
      else {
        const T = TYPED[a];
        const big = T === BigInt64Array || T === BigUint64Array;
        bytes = new Uint8Array(new T([big ? BigInt(b) : Number(b)]).buffer);
      }
    } else {
      if (a !== null && typeof a === "object" && !("dataType" in a)) fail("constant", "constant(MLTensor) is not supported by the recorder: pass a descriptor and a buffer");
      desc = checkDescriptor("constant", a);
      const want = prod(desc.shape) * BYTES[desc.dataType];
      if (b instanceof ArrayBuffer || (typeof SharedArrayBuffer !== "undefined" && b instanceof SharedArrayBuffer)) bytes = new Uint8Array(b);
      else if (ArrayBuffer.isView(b)) {
        const T = TYPED[desc.dataType];
        const okF16 = desc.dataType === "float16" && (b instanceof Uint16Array || (typeof Float16Array !== "undefined" && b instanceof Float16Array));
        if (!(T && b instanceof T) && !okF16) fail("constant", `buffer: a ${b.constructor.name} does not hold ${desc.dataType} data`);
        bytes = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      } else fail("constant", "buffer: expected an ArrayBuffer or a typed array");
      if (bytes.byteLength !== want) fail("constant", `buffer: ${bytes.byteLength} bytes, but ${desc.dataType} [${desc.shape}] needs ${want}`);
    }
    const offset = Math.ceil(this.#state.size / 16) * 16;
    this.#state.chunks.push({ offset, bytes: new Uint8Array(bytes) });
    this.#state.size = offset + bytes.byteLength;
    const id = this.#id("c");
    this.#state.constants[id] = { descriptor: desc, offset, byteLength: bytes.byteLength };
    return newOperand(this, id, desc.dataType, desc.shape);
  }

  async build(outputs) {
    this.#live("build");
    if (outputs === null || typeof outputs !== "object" || Object.keys(outputs).length === 0) fail("build", "outputs: expected a record of name -> MLOperand with at least one entry");
    const named = {};
    for (const [name, o] of Object.entries(outputs)) {
      checkValue(this, "build", `outputs['${name}']`, "operand", o);
      const id = info(o).id;
      if (id in this.#state.inputs || id in this.#state.constants) fail("build", `outputs['${name}']: an input or constant operand cannot be a graph output`);
      if (this.#state.names.has(name)) fail("build", `outputs['${name}']: the name is also an input's`);
      named[name] = id;
    }
    this.#state.built = true;
    const graph = Object.create(MLGraph.prototype);
    recorded.set(graph, { state: this.#state, outputs: named });
    return graph;
  }

  static _record(builder, method, args) {
    builder.#live(method);
    const sig = TABLE.ops[method];
    const params = sig.args;
    if (args.length > params.length + 1) fail(method, `takes at most ${params.length + 1} arguments, got ${args.length}`);
    const a = {};
    params.forEach(([name, kind], i) => {
      if (i >= args.length || args[i] === undefined) fail(method, `${name}: missing required argument`);
      a[name] = checkValue(builder, method, name, kind, args[i]);
    });
    const rawOptions = args[params.length];
    const o = {};
    let label;
    if (rawOptions !== undefined && rawOptions !== null) {
      if (typeof rawOptions !== "object" || Array.isArray(rawOptions) || rawOptions instanceof MLOperand) fail(method, "options: expected a dictionary");
      for (const [k, v] of Object.entries(rawOptions)) {
        if (v === undefined) continue;
        if (k === "label") { if (typeof v !== "string") fail(method, "options.label: expected a string"); label = v; continue; }
        if (!(k in sig.options)) fail(method, `options.${k}: unknown option (${method} takes ${[...Object.keys(sig.options), "label"].join(", ")})`);
        o[k] = checkValue(builder, method, `options.${k}`, sig.options[k], v);
      }
    }
    const outs = INFER[method](method, a, o);
    const ids = outs.map(() => builder.#id("t"));
    const operands = outs.map((d, i) => {
      checkShape(method, "output", d.shape);
      return newOperand(builder, ids[i], d.dataType, d.shape);
    });
    const toJson = (kind, v) => (kind === "operand" ? info(v).id : kind === "operands" ? v.map((x) => info(x).id)
      : typeof v === "bigint" ? v.toString() : (typeof v === "number" && !Number.isFinite(v)) ? (Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity") : v);
    const argList = params.map(([name, kind]) => ({ [name]: toJson(kind, a[name]) }));
    const optJson = Object.fromEntries(Object.entries(o).map(([k, v]) => [k, toJson(sig.options[k], v)]));
    if (label !== undefined) optJson.label = label;
    if (Object.keys(optJson).length) argList.push({ options: optJson });
    const single = ids.length === 1 && !["split", "gru", "lstm", "lstmCell"].includes(method);
    builder.#state.ops.push({ name: method, arguments: argList, outputs: single ? ids[0] : ids, descriptors: outs });
    return single ? operands[0] : operands;
  }
}

for (const method of Object.keys(TABLE.ops)) {
  Object.defineProperty(MLGraphBuilder.prototype, method, {
    value: function (...args) { return MLGraphBuilder._record(this, method, args); },
    writable: true, configurable: true,
  });
}
const recorded = new WeakMap(); // MLGraph -> {state, outputs}

// ---- main ---------------------------------------------------------------------------------------

function die(message) {
  // also in OUT_JSON.error: a module may flood stderr, and an exit drops queued pipe writes
  const line = `recorder: ${String(message).replace(/[\r\n]+/g, " ").slice(0, 2000)}\n`;
  const outJson = process.argv[3];
  try { if (outJson) writeFileSync(`${outJson}.error`, line); } catch { /* stderr still has it */ }
  try { writeSync(2, line); } catch { /* nothing more to do */ }
  process.exit(1);
}

async function main() {
  const [modulePath, outJson] = process.argv.slice(2);
  if (!modulePath || !outJson) die("usage: node recorder.mjs MODEL_JS OUT_JSON");
  globalThis.MLGraphBuilder = MLGraphBuilder;
  globalThis.MLOperand = MLOperand;
  globalThis.MLContext = MLContext;
  globalThis.MLGraph = MLGraph;
  const ml = { createContext: async () => theContext };
  Object.defineProperty(globalThis, "navigator", { value: { ml }, configurable: true, writable: true });
  const binPath = join(dirname(modulePath), "model.bin");
  const weights = existsSync(binPath) ? (() => { const b = readFileSync(binPath); return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength); })() : new ArrayBuffer(0);
  let mod;
  try { mod = await import(pathToFileURL(modulePath).href); } catch (e) { die(`cannot import the module: ${e && e.message ? e.message : e}`); }
  if (typeof mod.build !== "function") die("the module does not export an async function build(context, weights)");
  let graph;
  try { graph = await mod.build(theContext, weights); } catch (e) {
    die(e instanceof ValidationError ? e.message : `build() threw: ${e && e.message ? e.message : e}`);
  }
  if (firstViolation) die(firstViolation.message);
  const rec = recorded.get(graph);
  if (!rec) die("build() did not return the MLGraph of an MLGraphBuilder.build() call");
  const { state, outputs } = rec;
  for (const [key, kind] of [["inputs", "input"], ["outputs", "output"]]) { // the module's declarations must match the graph
    const declared = mod[key];
    if (declared === undefined) continue;
    const actual = kind === "input" ? Object.fromEntries(Object.values(state.inputs).map((i) => [i.name, i.descriptor]))
      : Object.fromEntries(Object.entries(outputs).map(([n, id]) => [n, null]));
    for (const name of Object.keys(actual)) if (!(name in declared)) die(`the module's '${key}' does not declare the graph ${kind} '${name}'`);
    for (const name of Object.keys(declared)) if (!(name in actual)) die(`the module's '${key}' declares '${name}', which is not a graph ${kind}`);
  }
  const binName = `${basename(outJson).replace(/\.json$/i, "")}.bin`;
  const doc = { format: "converter.webnn-graph", version: 1, weights: binName, inputs: state.inputs, constants: state.constants, operators: state.ops, outputs };
  const binOut = join(dirname(outJson), binName);
  const fd = openSync(`${binOut}.tmp`, "w");
  let pos = 0;
  for (const { offset, bytes } of state.chunks) {
    if (offset > pos) { writeSync(fd, new Uint8Array(offset - pos)); pos = offset; }
    writeSync(fd, bytes); pos += bytes.byteLength;
  }
  closeSync(fd);
  renameSync(`${binOut}.tmp`, binOut);
  writeFileSync(`${outJson}.tmp`, JSON.stringify(doc));
  renameSync(`${outJson}.tmp`, outJson);
}

main().catch((e) => die(e && e.message ? e.message : e));
