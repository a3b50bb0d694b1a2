import { test } from "node:test";
import assert from "node:assert/strict";
import { compareTotals, largestLayers, loadBars, peakParts, replicaBytes, replicaSpan, splitBaseline, topN } from "../src/aggregate.js";

test("compare rows: totals by role per run, ratio to the smallest run", () => {
  const sgd = { run: "sgd", tag: "vars", step: 1, optimizer: { class_name: "SGD" },
    totals: { weight: 100, non_trainable: 0, optimizer_slot: 0, other: 8 }, total_bytes: 108 };
  const adam = { run: "adam", tag: "vars", step: 1, optimizer: { class_name: "Adam" },
    totals: { weight: 100, non_trainable: 0, optimizer_slot: 200, other: 16 }, total_bytes: 316 };
  const rows = compareTotals([adam, sgd]);
  assert.equal(rows[0].optimizer_slot, 200);
  assert.equal(rows[0].optimizer, "Adam");
  assert.equal(rows[1].ratio, 1);
  assert.ok(Math.abs(rows[0].ratio - 316 / 108) < 1e-12);
});

test("compare falls back to summing roles and tolerates missing totals", () => {
  const rows = compareTotals([{ run: "a", totals: { weight: 4, other: 1 } }, { run: "b" }]);
  assert.equal(rows[0].total, 5);
  assert.equal(rows[0].non_trainable, 0);
  assert.equal(rows[1].total, 0);
  assert.equal(rows[1].ratio, 0);
  assert.equal(compareTotals([{ run: "empty" }])[0].ratio, null);
});

test("topN keeps the largest positive rows", () => {
  const ops = [{ n: "a", t: 3 }, { n: "b", t: 0 }, { n: "c", t: 9 }, { n: "d", t: 3 }];
  assert.deepEqual(topN(ops, "t", 3).map((o) => o.n), ["c", "a", "d"]);
  assert.deepEqual(topN(ops, "t", 1).map((o) => o.n), ["c"]);
});

test("load results become one bar per load on its own label, errors as gaps", () => {
  const results = [
    { format: "keras", mode: "compile=True", file_bytes: 10, load_seconds: 2 },
    { format: "keras", mode: "compile=False", file_bytes: 10, load_seconds: 1 },
    { format: "tflite", mode: "interpreter", file_bytes: 5, load_seconds: 0.1, error: "" },
    { format: "h5", mode: "compile=True", error: "not supported" },
  ];
  const { bars, modes } = loadBars(results, "load_seconds");
  assert.deepEqual(bars.map((b) => b.label), ["keras · compile=True", "keras · compile=False", "tflite · interpreter", "h5 · compile=True"]);
  assert.deepEqual(bars.map((b) => b.value), [2, 1, 0.1, null]);
  assert.equal(bars[3].error, "not supported");
  assert.deepEqual(modes, ["compile=True", "compile=False", "interpreter"]);
});

test("peak parts: display order, unknown parts null with their reason, shares of the total", () => {
  const peak = {
    weights: null, non_trainable: null, optimizer_slots: null, gradients: 30, activations: 50, optimizer_temporaries: 0,
    inputs: 0, temporaries: 20, unattributed: 100, total: 200, step_peak_bytes: 100,
    unknown: { weights: "no variable breakdown in this run", non_trainable: "no breakdown", optimizer_slots: "no breakdown" },
  };
  const parts = peakParts(peak);
  assert.deepEqual(parts.map((p) => p.category), ["weights", "non_trainable", "optimizer_slots", "inputs", "activations",
    "gradients", "optimizer_temporaries", "temporaries", "unattributed"]);
  assert.deepEqual(parts[0], { category: "weights", bytes: null, reason: "no variable breakdown in this run", share: null });
  assert.equal(parts.find((p) => p.category === "activations").share, 0.25);
  assert.equal(parts.filter((p) => p.bytes !== null).reduce((s, p) => s + p.bytes, 0), 200);
  // A category a newer backend adds still shows; the totals and notes are not parts.
  assert.deepEqual(peakParts({ ...peak, pinned_host: 7 }).map((p) => p.category).slice(-1), ["pinned_host"]);
  assert.deepEqual(peakParts(null), []);
});

test("peak parts: what was held from before the trace shows where the trace names it, not as a zero", () => {
  const runMetadata = { weights: 4, gradients: 6, earlier_steps: 0, held_between_steps: 0, unattributed: 0, total: 10,
    unknown: {} };
  assert.deepEqual(peakParts(runMetadata).map((p) => p.category), ["weights", "gradients", "unattributed"]);
  const bfc = { ...runMetadata, earlier_steps: 2, held_between_steps: 3, total: 15 };
  assert.deepEqual(peakParts(bfc).map((p) => p.category), ["weights", "gradients", "earlier_steps", "held_between_steps",
    "unattributed"]);
});

test("the import-only baseline is split off and subtracted from peak RSS", () => {
  const { baseline, results } = splitBaseline([
    { format: "baseline", mode: "import tensorflow", peak_rss_bytes: 500 },
    { format: "keras", mode: "compile=True", peak_rss_bytes: 700 },
    { format: "h5", mode: "compile=True", peak_rss_bytes: 0, error: "cannot save" },
  ]);
  assert.equal(baseline.mode, "import tensorflow");
  assert.deepEqual(results.map((r) => [r.format, r.rss_above_baseline]), [["keras", 200], ["h5", null]]);
  assert.equal(splitBaseline([{ format: "tflite", peak_rss_bytes: 9 }]).results[0].rss_above_baseline, null);
});

test("the layer chart keeps the largest layers in model order", () => {
  const layers = [{ layer: "a", total_bytes: 5 }, { layer: "b", total_bytes: 50 }, { layer: "c", total_bytes: 0 }, { layer: "d", total_bytes: 20 }];
  assert.deepEqual(largestLayers(layers, 2).map((l) => l.layer), ["b", "d"]);
  assert.equal(largestLayers(layers, 4), layers);
});

test("seed-001 fixtures (real API answers): Adam keeps two slots per weight, SGD with momentum one", async () => {
  const { readFile } = await import("node:fs/promises");
  const load = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));
  const [adam, sgd] = compareTotals([await load("breakdown-adam.json"), await load("breakdown-sgd.json")]);
  assert.equal(adam.weight, 13098536);
  assert.equal(adam.optimizer_slot, 26197072);
  assert.equal(sgd.optimizer_slot, 13098536);
  assert.equal(adam.optimizer, "Adam");
  assert.ok(adam.ratio > 1.49 && adam.ratio < 1.51);
});

test("mirrored variables: how many replicas, and bytes as replicas times one copy", () => {
  assert.deepEqual(replicaSpan([{ replicas: 2 }, { replicas: 2 }]), { min: 2, max: 2 });
  assert.deepEqual(replicaSpan([{ replicas: 1 }, { replicas: 4 }, {}]), { min: 1, max: 4 });
  assert.deepEqual(replicaSpan([]), { min: 1, max: 1 });
  const fmt = (n) => n.toLocaleString("en-US");
  assert.equal(replicaBytes(2768896, 2, fmt), "2 × 1,384,448 = 2,768,896"); // a [5408,64] float32 kernel on 2 devices
  assert.equal(replicaBytes(1384448, 1, fmt), "1,384,448");
});
