// Refresh test/fixtures/ from a running TensorBoard on the demo log dir
// (python demo/make_logdir.py --logdir L; tensorboard --logdir L --samples_per_plugin modelmem=0):
//   node dev/make-fixtures.mjs http://127.0.0.1:6006
// Paged tables are saved whole (limit 2000): the dev server pages them itself.
//
// The Growth fixtures come from the seed-004 loops of tests/growth_loops.py, each in its own run:
//   python -m tests.growth_loops keep G/keep /tmp/keep.json; python -m tests.growth_loops fit G/fit /tmp/fit.json
//   tensorboard --logdir G --port 6007 --samples_per_plugin modelmem=0
//   node dev/make-fixtures.mjs --growth http://127.0.0.1:6007

//
// The XLA fixture is the Keras-on-JAX LeNet profiled on an H100 (../shared/fixtures/gpu_h100/keras_jax_lenet):
//   tensorboard --logdir L --port 6008 (L holding keras_jax_lenet/); node dev/make-fixtures.mjs --xla http://127.0.0.1:6008

import { writeFileSync } from "node:fs";

const growthOnly = process.argv[2] === "--growth";
const xlaOnly = process.argv[2] === "--xla";
const base = `${process.argv[growthOnly || xlaOnly ? 3 : 2] || "http://127.0.0.1:6006"}/data/plugin/modelmem`;
const out = (name, data) => writeFileSync(new URL(`../test/fixtures/${name}`, import.meta.url), `${JSON.stringify(data, null, 1)}\n`);

async function get(route, params) {
  for (;;) {
    const response = await fetch(`${base}/${route}?${new URLSearchParams(params)}`);
    if (!response.ok) throw new Error(`${route}: ${response.status} ${await response.text()}`);
    if (response.status !== 202) return response.json();
    await new Promise((resolve) => setTimeout(resolve, 500)); // still reducing: a progress body is no fixture
  }
}

if (xlaOnly) {
  const runs = (await get("runs", {})).runs;
  const tag = runs.find((r) => r.run === "keras_jax_lenet/train").tags.find((t) => t.kind === "ops").tag;
  out("ops-xla-lenet.json", await get("ops", { run: "keras_jax_lenet/train", tag }));
  console.log("xla fixture written");
  process.exit(0);
}

if (growthOnly) {
  out("growth-keep.json", await get("growth", { run: "keep/builds", tag: "memory" }));
  out("growth-fit.json", await get("growth", { run: "fit/train", tag: "memory" }));
  console.log("growth fixtures written");
  process.exit(0);
}

const whole = { limit: 2000 };
out("runs.json", await get("runs", {}));
out("steps.json", await get("steps", { run: "convnet_adam/train", tag: "storage" }));
for (const [name, run, tag] of [["adam", "convnet_adam/train", "storage"], ["sgd", "convnet_sgd/train", "storage"],
  ["ckpt", "tf1_convnet_adam", "checkpoint"]]) {
  out(`breakdown-${name}.json`, await get("breakdown", { run, tag, ...whole }));
}
for (const [name, run, tag] of [["lenet", "lenet_trace", "ops"], ["tf1", "tf1_convnet_adam", "step_1"]]) {
  out(`ops-${name}.json`, await get("ops", { run, tag, ...whole }));
  out(`timeline-${name}.json`, await get("timeline", { run, tag }));
}
out("loadbench-mobilenet.json", await get("loadbench", { run: "loadbench", tag: "loadbench" }));
console.log("fixtures written");
