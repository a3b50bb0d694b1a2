import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { tempAllocations, xlaSummary } from "../src/xla.js";

const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("an XLA step says its program, its runs and how its kernels were tied to instructions", async () => {
  const lenet = await fixture("ops-xla-lenet.json"); // Keras on JAX on an H100, kernels in command buffers
  const summary = xlaSummary(lenet.xla);
  assert.equal(summary.headline, "XLA program jit_train_step, 2 runs; kernels in command buffers, tied to instructions "
    + "by graph node (54%), by HLO op name (46%)");
  assert.match(summary.note, /XLA_FLAGS=--xla_gpu_enable_command_buffer=$/);
  assert.equal(summary.unattributed, "");
  const one = { ...lenet.xla, command_buffers: true, time_us_by_method: { graph_node: 5202.026 } };
  assert.equal(xlaSummary(one).headline, "XLA program jit_train_step, 2 runs; kernels in command buffers, tied to instructions "
    + "by graph node (100%)");
  const stripped = { ...lenet.xla, command_buffers: true, time_us_by_method: { kernel_name: 3927.146, schedule_gap: 1010.139, unattributed: 264.741 } };
  assert.equal(xlaSummary(stripped).headline, "XLA program jit_train_step, 2 runs; kernels in command buffers, tied to instructions "
    + "by kernel name (75%), by place in the schedule (19%)");
  assert.equal(xlaSummary(stripped).unattributed, "5% of kernel time not attributed to an instruction");
  assert.match(xlaSummary({ ...one, command_buffers: false }).headline, /kernels launched one by one/);
  assert.equal(xlaSummary(null), null); // a step TF's executor ran op by op
  assert.equal(xlaSummary(undefined), null); // an older backend
});

test("a program's temp allocation and how much of it is live at once", async () => {
  const lenet = await fixture("ops-xla-lenet.json");
  const [temp] = tempAllocations(lenet.xla);
  assert.equal(temp.program, "jit_train_step");
  assert.equal(temp.text, "one 21.38 MiB allocation, at most 21.25 MiB of it live at once (20 buffers)");
  assert.match(temp.title, /^22,422,312 B \(21\.38 MiB\) allocated .* 22,285,444 B \(21\.25 MiB\) of it live at once at most \(from the heap-simulator trace\)$/);
  const [unknown] = tempAllocations({ temp_allocations: [{ program: "p", allocation_bytes: 1024, live_bytes: null, buffers: 1 }] });
  assert.equal(unknown.text, "one 1.00 KiB allocation, how much of it is live at once unknown (1 buffer)");
});
