import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { oomBudget, oomDetails, oomHeadline } from "../src/oom.js";

// The /oom answer of a real TensorFlow step that asked the CPU for 256 GiB (a Lambda tiling its input
// 2**22 times, under MemoryCallback): TF's own ResourceExhaustedError text, as recorded.
const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("an out-of-memory step says what it asked for, for which op, where", async () => {
  const answer = await fixture("oom-tf-cpu.json");
  assert.equal(oomHeadline(answer.oom, answer.step),
    "Step 1 ran out of memory allocating 256.00 GiB ([64,1073741824] float32) for functional_1/blowup_1/Tile on CPU:0");
  assert.equal(answer.oom.requested_bytes, 64 * 2 ** 30 * 4);
  assert.deepEqual(oomDetails(answer.oom).slice(0, 1), ["in model.fit, step 1, allocator cpu"]);
  assert.match(oomDetails(answer.oom).at(-1), /^process RSS [\d.]+ MiB$/);
  assert.equal(oomBudget(answer.oom), ""); // a CPU: TensorFlow says no capacity
});

test("what a message does not say is left out, never made up", () => {
  assert.equal(oomHeadline({ error_type: "XlaRuntimeError", requested_bytes: null }, null), "A step ran out of memory");
  const gpu = { devices: [{ name: "/device:GPU:0", current_bytes: 10, peak_bytes: 2 ** 34 }], bytes_limit: null };
  assert.equal(oomBudget(gpu), String(2 ** 34));
  assert.equal(oomBudget({ ...gpu, bytes_limit: 80 * 2 ** 30 }), String(80 * 2 ** 30));
});
