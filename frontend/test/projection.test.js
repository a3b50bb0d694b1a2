import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { bandLine, budgetLine, movedLine, projectionHeadline, projectionRows, reservedRow, stepsLine, tracedLine, whatifParams } from "../src/projection.js";

// /whatif answers of a real run: seed 002's LeNet, Adam, batch 32, traced with the BFC CPU allocator
// (tests/projection_run.py), asked through the plugin; the "unknown" one is the same trace with no breakdown.
const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("a form asks only what it changes", () => {
  assert.deepEqual(whatifParams({ batch: " 128 ", optimizer: "", policy: "mixed_bfloat16", replicas: "1", budget: "" }),
    { batch: "128", policy: "mixed_bfloat16" });
  assert.deepEqual(whatifParams({ batch: "", optimizer: "SGD", policy: "", replicas: "4", budget: "16GiB" }),
    { optimizer: "SGD", devices: "4", budget: "16GiB" }); // an older form's replicas: the device count
  assert.deepEqual(whatifParams({ batch: "", devices: "8", shard: "optimizer", replicas: "2" }), { devices: "8", shard: "optimizer" });
  assert.deepEqual(whatifParams({ devices: "1", shard: "" }), {});
  assert.deepEqual(whatifParams({ batch: "", seq: " 512 ", devices: "1" }), { seq: "512" });
});

test("a sequence model's answer says the length, asked and traced", () => {
  const whatif = { peak_bytes: 1024 ** 2, batch_per_replica: 8, seq: 512,
    traced: { peak_bytes: 2 * 1024 ** 2, batch: 8, seq: 128, optimizer: "AdamW", policy: "float32" } };
  assert.equal(projectionHeadline(whatif), "Projected peak 1.00 MiB at batch 8, sequence 512 (traced: 2.00 MiB at batch 8, sequence 128)");
  assert.equal(tracedLine(whatif), "AdamW · float32 · batch 8 · sequence 128");
});

test("the headline says how many devices and what is sharded; an older answer's replicas still read", () => {
  const whatif = { peak_bytes: 1024 ** 2, batch_per_replica: 16, traced: { peak_bytes: 2 * 1024 ** 2, batch: 16 } };
  assert.equal(projectionHeadline({ ...whatif, devices: 8, replicas: 8, shard: "optimizer" }),
    "Projected peak 1.00 MiB at batch 16 on each of 8 devices, optimizer state sharded (traced: 2.00 MiB at batch 16)");
  assert.equal(projectionHeadline({ ...whatif, replicas: 4 }), "Projected peak 1.00 MiB at batch 16 on each of 4 devices (traced: 2.00 MiB at batch 16)");
  assert.equal(projectionHeadline({ ...whatif, devices: 1, shard: null }), "Projected peak 1.00 MiB at batch 16 (traced: 2.00 MiB at batch 16)");
});

test("an asked optimizer is named in the headline beside the traced one", () => {
  const whatif = { peak_bytes: 1024 ** 2, batch_per_replica: 16, optimizer: "AdamW fused",
    traced: { peak_bytes: 2 * 1024 ** 2, batch: 16, optimizer: "SGD" } };
  assert.equal(projectionHeadline(whatif),
    "Projected peak 1.00 MiB at batch 16, under AdamW fused (traced: 2.00 MiB at batch 16, under SGD)");
  assert.equal(projectionHeadline({ ...whatif, optimizer: null }), "Projected peak 1.00 MiB at batch 16 (traced: 2.00 MiB at batch 16)");
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

test("at another size the band's middle is the figure: its signed chunking row comes last, and the band says so", () => {
  const whatif = { peak_bytes: 100, by_category: { activations: 90, unattributed: 30, allocator_chunking: -20 },
    basis: [{ category: "allocator_chunking", traced_bytes: 0, projected_bytes: -20, how: "computed", formula: "-20 B: the middle" }],
    band: { low_bytes: 60, high_bytes: 140, slack_bytes: 60, op: "MatMul", shape: "[8,10]", requested_bytes: 40,
      counted_bytes: 60, most_bytes: 80, copy: false }, traced: {} };
  const rows = projectionRows(whatif);
  assert.deepEqual(rows.map((r) => r.category), ["activations", "unattributed", "allocator_chunking"]);
  assert.equal(rows.reduce((sum, r) => sum + r.projected, 0), whatif.peak_bytes);
  assert.equal(rows.at(-1).label, "Allocator chunking");
  assert.equal(rows.at(-1).how, "computed");
  assert.match(bandLine(whatif), /changes the step or the state, the projected peak is the band's middle \(the Allocator chunking row\)\.$/);
  assert.doesNotMatch(bandLine({ ...whatif, by_category: { activations: 90 } }), /middle/);
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
  assert.equal(budgetLine({ bytes: 2 ** 30, largest_batch: 0, note: "even one sample per device projects to 1.10 GiB" }),
    "Largest batch within 1.00 GiB: none fits (even one sample per device projects to 1.10 GiB)");
  assert.equal(budgetLine({ bytes: 2 ** 30, largest_batch: 782, note: "", cautious_batch: 640 }),
    "Largest batch within 1.00 GiB: 782; 640 with the allocator band's high end within it too");
  assert.equal(budgetLine({ bytes: 2 ** 30, largest_batch: 782, note: "", cautious_batch: 782 }),
    "Largest batch within 1.00 GiB: 782");
  assert.equal(budgetLine({ bytes: 2 ** 30, largest_batch: 782, note: "", cautious_batch: 700, cautious_by: "reserved" }),
    "Largest batch within 1.00 GiB: 782; 700 with what the caching allocator reserves within it too");
  assert.equal(budgetLine({ bytes: 60 * 2 ** 20, largest_batch: 43, note: "", largest_batch_peak_bytes: 59.25 * 2 ** 20 }),
    "Largest batch within 60.00 MiB: 43, projected 59.25 MiB (768.00 KiB to spare)");
});

// The Basis cell's arithmetic, read as a user reads it: "A carry the batch x f = ..., B do not, x g = ..." or a
// leading "N MiB: ..." for a state figure; the figure it gives, and how far the printed rounding may put it off.
const UNIT = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };
const SIZE = String.raw`([\d,]+(?:\.\d+)?) (B|KiB|MiB|GiB)`;
function basisArithmetic(formula) {
  const size = (n, u) => [Number(n.replaceAll(",", "")) * UNIT[u], u === "B" ? 0.5 : 0.005 * UNIT[u]];
  const lead = formula.match(new RegExp(`^${SIZE}: `));
  if (lead) return size(lead[1], lead[2]);
  let total = 0;
  let slack = 0;
  const carried = formula.match(new RegExp(`${SIZE} carry the batch x ([\\d.,]+)`));
  if (carried) {
    const [value, off] = size(carried[1], carried[2]);
    const factor = Number(carried[3].replaceAll(",", ""));
    total += value * factor;
    slack += off * factor + value * 0.0005 * factor; // the factor is printed to 3 significant digits
  }
  const rest = formula.match(new RegExp(`; ${SIZE} do not, (kept|x ([\\d.,]+))`));
  if (rest) {
    const [value, off] = size(rest[1], rest[2]);
    const factor = rest[3] === "kept" ? 1 : Number(rest[4].replaceAll(",", ""));
    total += value * factor;
    slack += off * factor + (rest[3] === "kept" ? 0 : value * 0.0005 * factor);
  }
  assert.ok(carried || rest, `no arithmetic in ${formula}`);
  return [total, slack];
}

test("a projected peak at another moment: every basis is taken there and gives the figure beside it", async () => {
  // demo/make_logdir.py's lenet_peak (Adam, batch 32) asked for SGD at batch 1: the gradients of fc1 no
  // longer dominate, and the peak falls where the optimizer's update runs.
  const { whatif } = await fixture("whatif-lenet-moved.json");
  assert.ok(whatif.peak_moved);
  const rows = projectionRows(whatif);
  assert.equal(rows.reduce((sum, r) => sum + r.projected, 0), whatif.peak_bytes);
  for (const row of rows) {
    const [value, slack] = basisArithmetic(row.formula);
    assert.ok(Math.abs(value - row.projected) <= slack + 1, `${row.category}: ${row.formula} gives ${value}, not ${row.projected}`);
  }
  // Taken where the projected peak falls, not at the traced peak: what the activations' line says was in the
  // trace then (carried + not: 6.42 MiB) is not the traced peak's 8.80 MiB beside it.
  const activations = rows.find((r) => r.category === "activations");
  const then = [...activations.formula.matchAll(new RegExp(`${SIZE} (?:carry|do not)`, "g"))]
    .reduce((sum, m) => sum + Number(m[1]) * UNIT[m[2]], 0);
  assert.ok(activations.traced - then > 2 ** 20, activations.formula);
  assert.equal(movedLine(whatif), `The projected peak falls ${(whatif.peak_time_us / 1000).toFixed(2)} ms into the trace, `
    + `the traced one at ${(whatif.traced.peak_time_us / 1000).toFixed(2)} ms: each Projected figure is what would be in`
    + " use then, and its Basis is taken at that moment, on what the traced step held then (Traced then); each Traced figure is the"
    + " traced peak's (no allocator band: the trace keeps the buffers of its own peak only).");
  assert.equal(movedLine((await fixture("whatif-lenet.json")).whatif), "");
});

test("the traced steps' spread: each step's peak and what it projects to, said only for two or more", () => {
  const whatif = { steps: [{ traced_peak_bytes: 80 * 2 ** 20, peak_bytes: 100 * 2 ** 20 },
    { traced_peak_bytes: 82 * 2 ** 20, peak_bytes: 104 * 2 ** 20 }] };
  assert.equal(stepsLine(whatif), "The 2 traced steps peaked at 80.00 MiB and 82.00 MiB: each projects to "
    + "100.00 MiB–104.00 MiB, a spread of 3.8% (how far one step's trace can be trusted)");
  assert.equal(stepsLine({ steps: whatif.steps.slice(0, 1) }), "");
  assert.equal(stepsLine({}), "");
});

test("the allocator band names the largest buffer and its two figures", () => {
  const band = { low_bytes: 392.5 * 1024 ** 2, high_bytes: 536.5 * 1024 ** 2, slack_bytes: 19 * 1024 ** 2,
    op: "model/dense_4/MatMul", shape: "[1024,8000]", requested_bytes: 125 * 1024 ** 2, counted_bytes: 125 * 1024 ** 2,
    most_bytes: 250 * 1024 ** 2, copy: false };
  assert.equal(bandLine({ band }), "Allocator band: 392.50 MiB–536.50 MiB. A BFC allocator hands a request a free chunk "
    + "whole when it is under twice the request and less than 128 MiB over it, so a buffer holds from its size to the "
    + "lesser of twice it and 128 MiB more, and runs of one setting differ by which it gets: from every buffer at the "
    + "traced peak handed just its request (19.00 MiB less) to the largest, model/dense_4/MatMul ([1024,8000] as "
    + "traced), asking 125.00 MiB here (counted at 125.00 MiB), handed the most BFC would: 250.00 MiB.");
  assert.match(bandLine({ band: { ...band, copy: true } }),
    /to the largest, the loss's float32 copy of model\/dense_4\/MatMul \(\[1024,8000\] as traced\), asking/);
  assert.equal(bandLine({ band: null }), "");
  assert.equal(bandLine({}), "");
});

test("a CUDA step's reserved memory is a row of its own, replayed or unknown with why; none on other allocators", () => {
  const how = "its requests replayed through a model of the CUDA caching allocator: at the traced setting it reads +0.5%";
  const replayed = reservedRow({ reserved: { bytes: 7098859520, traced_bytes: 3720347648, how } });
  assert.deepEqual(replayed, { category: "reserved", label: "Reserved (allocator)", traced: 3720347648,
    projected: 7098859520, how: "replayed", formula: how });
  const asked = reservedRow({ reserved: { bytes: null, traced_bytes: 3720347648, how: "not replayed: another optimizer" } });
  assert.equal(asked.projected, null);
  assert.equal(asked.how, "unknown");
  assert.match(asked.formula, /^not replayed/);
  assert.equal(reservedRow({ peak_bytes: 10 }), null);
});
