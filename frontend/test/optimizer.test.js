import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { optimizerSections, optimizerSource, sectionHeading } from "../src/optimizer.js";

// Real /breakdown answers (test/fixtures): keras-io's BiLSTM under mixed precision (a LossScaleOptimizer
// wrapping Adam), one Dense shared by two towers (Adam), the demo convnet (Adam).
const fixture = async (name) => JSON.parse(await readFile(new URL(`fixtures/${name}`, import.meta.url), "utf8"));

test("a LossScaleOptimizer reads as itself, then the Adam it wraps: no raw JSON (issue 31 item 13)", async () => {
  const { optimizer_summary: summary } = await fixture("breakdown-bilstm-mp.json");
  const { text, sections } = optimizerSections(summary);
  assert.equal(text, "LossScaleOptimizer(initial_scale=32768, dynamic_growth_steps=2000); inner_optimizer: "
    + "Adam(learning_rate=0.001, use_ema=False, ema_momentum=0.99, beta_1=0.9, beta_2=0.999, epsilon=1e-07, amsgrad=False)");
  assert.deepEqual(sections.map((s) => [s.depth, sectionHeading(s)]), [[0, "LossScaleOptimizer"], [1, "inner_optimizer: Adam"]]);
  assert.deepEqual(sections[0].settings, [["initial_scale", "32768"], ["dynamic_growth_steps", "2000"]]);
  // a float32 learning rate as 0.001, not 0.0010000000474974513
  assert.deepEqual(sections[1].settings.slice(0, 2), [["learning_rate", "0.001"], ["use_ema", "false"]]);
  assert.ok(!sections.some((s) => s.settings.some(([, v]) => v.startsWith("{"))));
});

test("one optimizer is one section; its name is left out where it only repeats the class", async () => {
  const { optimizer_summary: summary } = await fixture("breakdown-two-towers.json");
  const { sections } = optimizerSections(summary);
  assert.equal(sections.length, 1);
  assert.equal(sectionHeading(sections[0]), "Adam"); // named "adam"
  assert.deepEqual(sections[0].settings[0], ["learning_rate", "0.001"]);
  assert.equal(sectionHeading({ key: "", class_name: "SGD", name: "my_sgd" }), "SGD (my_sgd)");
});

test("several optimizers (a GAN's) are one top-level section each, under their name", () => {
  const adam = (lr) => ({ class_name: "Adam", settings: { learning_rate: lr }, nested: {} });
  const { sections } = optimizerSections({ text: "d: Adam(...); g: Adam(...)",
    optimizers: [{ ...adam(0.0002), name: "discriminator" }, { ...adam(0.001), name: "generator" }] });
  assert.deepEqual(sections.map(sectionHeading), ["discriminator: Adam", "generator: Adam"]);
  assert.deepEqual(sections.map((s) => s.depth), [0, 0]);
});

test("no summary: null (the panel falls back on the config)", () => {
  assert.equal(optimizerSections(null), null);
  assert.equal(optimizerSections({ text: "x" }), null);
});

test("a PyTorch optimizer is not said to come from compile(), a Keras one is", () => {
  assert.equal(optimizerSource({ class_name: "SGD" }, "pytorch"), "as the training script built it");
  assert.equal(optimizerSource({ class_name: "AdamW" }, "pytorch checkpoint"), "as the training script built it");
  assert.equal(optimizerSource({ class_name: "Adam" }, "keras"), "how the model was compiled");
  assert.equal(optimizerSource({ class_name: "Adam", recorded_in: "model.keras" }, "pytorch"), "recorded in model.keras");
});
