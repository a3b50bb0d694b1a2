import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { budgetLine, projectionHeadline, projectionRows, tracedLine, whatifParams } from "../src/projection.js";

// /whatif answers of a real run: seed 002's LeNet, Adam, batch 32, traced with the BFC CPU allocator
// (tests/projection_run.py), asked through the plugin; the "unknown" one is the same trace with no breakdown.
const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("a form asks only what it changes", () => {
  assert.deepEqual(whatifParams({ batch: " 128 ", optimizer: "", policy: "mixed_bfloat16", replicas: "1", budget: "" }),
    { batch: "128", policy: "mixed_bfloat16" });
  assert.deepEqual(whatifParams({ batch: "", optimizer: "SGD", policy: "", replicas: "4", budget: "16GiB" }),
    { optimizer: "SGD", replicas: "4", budget: "16GiB" });
});

test("the traced step projects to itself, every category measured or kept", async () => {
  const { whatif } = await fixture("whatif-lenet.json");
  const rows = projectionRows(whatif);
  assert.equal(rows.reduce((sum, r) => sum + r.projected, 0), whatif.peak_bytes);
  assert.equal(whatif.peak_bytes, whatif.traced.peak_bytes);
  assert.deepEqual(rows.map((r) => r.category).slice(0, 4), ["weights", "non_trainable", "optimizer_slots", "other_state"]);
  assert.equal(rows.at(-1).category, "unattributed");
  assert.equal(tracedLine(whatif), "Adam · float32 · batch 32");
  assert.match(projectionHeadline(whatif), /^Projected peak [\d.]+ MiB at batch 32 \(traced: [\d.]+ MiB at batch 32\)$/);
});

test("another batch and optimizer: slots computed, batch-carrying bytes scaled, the largest batch found", async () => {
  const answer = await fixture("whatif-lenet-128.json");
  const rows = Object.fromEntries(projectionRows(answer.whatif).map((r) => [r.category, r]));
  assert.equal(rows.optimizer_slots.how, "computed");
  assert.equal(rows.optimizer_slots.projected, rows.weights.projected); // momentum: one slot per weight
  assert.equal(rows.activations.how, "scaled");
  assert.match(rows.activations.formula, /carry the batch x 4/);
  assert.match(projectionHeadline(answer.whatif), /at batch 128 \(traced: .* at batch 32\)$/);
  assert.equal(budgetLine(answer.budget), `Largest batch within 300.00 MiB: ${answer.budget.largest_batch.toLocaleString("en-US")}`);
});

test("what the trace cannot tell reads unknown, with the reason, never 0", async () => {
  const { whatif } = await fixture("whatif-lenet-unknown.json");
  const rows = Object.fromEntries(projectionRows(whatif).map((r) => [r.category, r]));
  assert.equal(rows.optimizer_slots.projected, null);
  assert.equal(rows.optimizer_slots.how, "unknown");
  assert.match(rows.optimizer_slots.formula, /breakdown/);
  assert.match(projectionHeadline(whatif), /^Projected peak: unknown/);
  assert.equal(budgetLine({ bytes: 2 ** 30, largest_batch: null, note: "the peak cannot be projected: x" }),
    "Largest batch within 1.00 GiB: none (the peak cannot be projected: x)");
});
