import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { breakdownAt, countedNote, handedOutNote, peakIndex, stackTimeline, thin } from "../src/stacks.js";

test("categories stack resident first, unattributed last; the total is their sum", () => {
  const timeline = {
    t_us: [0, 10, 20], bytes: [5, 9, 6], op: ["a", "b", ""], peak_time_us: 10,
    stacks: { unattributed: [1, 1, 1], activations: [0, 4, 1], weights: [4, 4, 4], optimizer_slots: [0, 0, 0] },
  };
  const s = stackTimeline(timeline);
  assert.deepEqual(s.series.map((x) => x.category), ["weights", "optimizer_slots", "activations", "unattributed"]);
  assert.deepEqual(s.total, [5, 9, 6]);
  assert.equal(s.peak, 1);
  assert.deepEqual(breakdownAt(s, 1), { t: 10, total: 9, op: "b",
    parts: [{ category: "weights", bytes: 4 }, { category: "activations", bytes: 4 }, { category: "unattributed", bytes: 1 }] });
});

test("RunMetadata: stacks hold the breakdown's weights on top of the step's bytes", () => {
  const s = stackTimeline({ t_us: [0, 1], bytes: [2, 3], stacks: { weights: [100, 100], gradients: [2, 3] } });
  assert.deepEqual(s.total, [102, 103]);
});

test("no stacks: the plain bytes in use; no points: nothing", () => {
  assert.deepEqual(stackTimeline({ t_us: [0, 1], bytes: [7, 3] }).total, [7, 3]);
  assert.deepEqual(stackTimeline({}), { t: [], total: [], op: [], series: [], peak: -1, counted: null });
});

test("thinning keeps the peak, the ends and each bucket's highest point", () => {
  const total = Array.from({ length: 100_000 }, (_, i) => (i * 7919) % 1000);
  total[54_321] = 5000;
  const peak = peakIndex([], total);
  assert.equal(peak, 54_321);
  const keep = thin(total, 500, peak);
  assert.ok(keep.length <= 500);
  assert.ok(keep.includes(54_321) && keep[0] === 0 && keep[keep.length - 1] === 99_999);
  assert.deepEqual(keep, [...keep].sort((a, b) => a - b));
  assert.deepEqual(thin([1, 2, 3], 10), [0, 1, 2]);
});

test("equal highs: the point nearest the reported peak time", () => {
  assert.equal(peakIndex([0, 5, 9], [8, 8, 8], 9.5), 2);
});

test("the LeNet fixture (real profile): stacks add up to the peak the backend reports", async () => {
  const timeline = JSON.parse(await readFile(new URL("./fixtures/timeline-lenet.json", import.meta.url), "utf8"));
  const s = stackTimeline(timeline);
  assert.equal(s.total[s.peak], timeline.peak_bytes);
  assert.equal(s.series[0].category, "weights");
  assert.equal(s.series[s.series.length - 1].category, "unattributed");
});

test("a buffer's bytes are the allocator's chunk: what it asked for beside it, the difference named", async () => {
  // /timeline of seed 002's LeNet, batch 32, Adam, TF's BFC CPU allocator (tests/projection_run.py)
  const data = JSON.parse(await readFile(new URL("./fixtures/timeline-lenet-bfc-handed-out.json", import.meta.url), "utf8"));
  const sqrt = data.buffers.find((b) => b.shape === "[3136,1024]" && b.bytes !== b.requested_bytes);
  assert.equal(sqrt.requested_bytes, 3136 * 1024 * 4);
  assert.ok(sqrt.bytes > sqrt.requested_bytes);
  const note = handedOutNote(data.handed_out, data.allocators);
  assert.match(note, /^Bytes is the chunk the allocator handed out \(these sum to the peak\)/);
  assert.match(note, new RegExp(`For the ${data.handed_out.buffers} buffers whose request the profile recorded: `));
  assert.match(note, /bfc_cpu_allocator_for_gpu reports 17% fragmentation at its peak\.$/);
  assert.equal(handedOutNote(null, data.allocators), "");
});

test("only large allocations recorded: the bands pass the allocator's count by the variables, and say so", async () => {
  // /timeline of keras-io's MNIST convnet under TF's default CPU allocator (oneDNN), joined with its breakdown
  const data = JSON.parse(await readFile(new URL("./fixtures/timeline-mnist-large.json", import.meta.url), "utf8"));
  assert.equal(data.allocations, "large");
  const s = stackTimeline(data);
  assert.deepEqual(s.counted, data.bytes);
  assert.equal(s.total[s.peak], data.peak_bytes); // 41,140,372: the bands, variables whole
  assert.equal(Math.max(...s.counted), 40722432); // the allocator's own peak
  const resident = ["weights", "non_trainable", "optimizer_slots", "other_state"].reduce((sum, c) => sum + data.peak_by_category[c], 0);
  assert.equal(resident, 417940);
  assert.match(countedNote(s), /^The dashed line is the allocator's own count of bytes in use\. The bands pass it by up to 417,940 B \(408\.14 KiB\): /);
  assert.match(countedNote(s), /counts none of the model's small variables/);
  // an allocator that records every allocation: its count is the bands' sum, nothing drawn beside it
  const lenet = JSON.parse(await readFile(new URL("./fixtures/timeline-lenet-bfc-handed-out.json", import.meta.url), "utf8"));
  assert.equal(stackTimeline(lenet).counted, null);
  assert.equal(countedNote(stackTimeline(lenet)), "");
  assert.equal(stackTimeline({ ...data, allocations: "all" }).counted, null);
});

test("a planned timeline (XLA's buffer assignment) is complete: no allocator's count drawn beside its bands", () => {
  const timeline = { t_us: [0, 1, 2], bytes: [0, 0, 0], stacks: { weights: [10, 10, 10], activations: [0, 5, 0] },
    peak_time_us: 1 };
  assert.equal(stackTimeline({ ...timeline, allocations: "planned" }, 100).counted, null);
  assert.deepEqual(stackTimeline({ ...timeline, allocations: "planned" }, 100).total, [10, 15, 10]);
  assert.notEqual(stackTimeline({ ...timeline, allocations: "large" }, 100).counted, null); // as a large-only trace is not
});
