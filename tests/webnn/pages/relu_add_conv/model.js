// Hand-written module following issue 9's model.js contract (the converter's WebNN backend will
// generate modules like this one); tests/webnn/test_browser_harness.py writes model.bin beside it.
// model.bin: c float32[2,2] at 0, filter float32[3,3,3,2] (ohwi) at 16, bias float32[3] at 240.

export const inputs = {
  x: { dataType: "float32", shape: [2, 2] },
  image: { dataType: "float32", shape: [1, 5, 5, 2] },
};
export const outputs = {
  y: { dataType: "float32", shape: [2, 2] },
  features: { dataType: "float32", shape: [1, 5, 4, 3] },
};

const CONSTANTS = {
  c: { offset: 0, shape: [2, 2] },
  filter: { offset: 16, shape: [3, 3, 3, 2] },
  bias: { offset: 240, shape: [3] },
};

function constant(builder, weights, name) {
  const { offset, shape } = CONSTANTS[name];
  const count = shape.reduce((a, b) => a * b, 1);
  return builder.constant({ dataType: "float32", shape }, new Float32Array(weights, offset, count));
}

export async function build(context, weights) {
  const builder = new MLGraphBuilder(context);
  const x = builder.input("x", inputs.x);
  const image = builder.input("image", inputs.image);
  const c = constant(builder, weights, "c");
  const filter = constant(builder, weights, "filter");
  const bias = constant(builder, weights, "bias");
  const sum = builder.add(x, c); // add
  const y = builder.relu(sum); // relu
  const features = builder.conv2d(image, filter, { // conv: padding [top, bottom, left, right]
    inputLayout: "nhwc", filterLayout: "ohwi", padding: [1, 1, 0, 1], strides: [1, 1], dilations: [1, 1], bias,
  });
  return builder.build({ y, features });
}

export async function load(context, url = new URL("model.bin", import.meta.url)) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return build(context, await response.arrayBuffer());
}

export async function run(context, graph, feeds) {
  const inputTensors = {};
  for (const [name, desc] of Object.entries(inputs)) {
    inputTensors[name] = await context.createTensor({ ...desc, writable: true });
    context.writeTensor(inputTensors[name], feeds[name]);
  }
  const outputTensors = {};
  for (const [name, desc] of Object.entries(outputs)) {
    outputTensors[name] = await context.createTensor({ ...desc, readable: true });
  }
  context.dispatch(graph, inputTensors, outputTensors);
  const results = {};
  for (const name of Object.keys(outputs)) {
    results[name] = new Float32Array(await context.readTensor(outputTensors[name]));
    outputTensors[name].destroy();
  }
  for (const tensor of Object.values(inputTensors)) tensor.destroy();
  return results;
}
