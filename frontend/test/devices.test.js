import { test } from "node:test";
import assert from "node:assert/strict";
import {
  busiestRow, deviceFilterTerm, deviceHeadline, deviceRows, devicesOf, devicesWords, isSharded, layoutText, perDevice,
  SHARDING_LABEL, SHARDINGS, shardText, withTerm,
} from "../src/devices.js";

const MiB = 1024 ** 2;
// a 2x4 mesh's breakdown (tests/support/sharded_run.py): the same on every device
const sharded = {
  rows: [0, 1, 2].map((i) => ({ device: `/device:CPU:${i}`, by_role: { weight: 10 * MiB, optimizer_slot: 20 * MiB },
    total_bytes: 30 * MiB })),
  busiest: "/device:CPU:0", logical: { weight: 40 * MiB, optimizer_slot: 80 * MiB }, logical_total: 120 * MiB,
  sharded_variables: 21, replicated_variables: 5,
};

test("per-device rows: every role, a missing one 0; the busiest the answer names", () => {
  const rows = deviceRows(sharded);
  assert.deepEqual(rows[1], { device: "/device:CPU:1", weight: 10 * MiB, non_trainable: 0, optimizer_slot: 20 * MiB, other: 0,
    total_bytes: 30 * MiB });
  const uneven = { ...sharded, busiest: "/device:CPU:2",
    rows: [...sharded.rows.slice(0, 2), { device: "/device:CPU:2", by_role: { weight: 11 * MiB }, total_bytes: 31 * MiB }] };
  assert.equal(busiestRow(uneven).device, "/device:CPU:2");
  assert.equal(busiestRow({ ...uneven, busiest: undefined }).device, "/device:CPU:2");
  assert.equal(devicesOf({ devices: null }), null);
  assert.equal(devicesOf({ devices: { rows: [] } }), null);
  assert.equal(devicesOf({ devices: sharded }), sharded);
});

test("the per-device headline: how many, what the busiest holds by role, every variable once", () => {
  const uneven = { ...sharded, rows: [...sharded.rows, { device: "/device:CPU:3", by_role: { weight: MiB }, total_bytes: MiB }] };
  assert.equal(deviceHeadline(uneven), "4 devices · busiest /device:CPU:0 holds 30.00 MiB (weights 10.00 MiB, "
    + "optimizer slots 20.00 MiB) · every variable once: 120.00 MiB");
  assert.equal(deviceHeadline(sharded), "3 devices · each device holds 30.00 MiB (weights 10.00 MiB, optimizer slots 20.00 MiB)"
    + " · every variable once: 120.00 MiB");
  assert.equal(deviceHeadline({ rows: [] }), "");
  assert.equal(layoutText(sharded), "21 variables sharded, 5 variables replicated");
  assert.equal(layoutText({ sharded_variables: 0, replicated_variables: 1 }), "1 variable replicated");
  assert.ok(isSharded(sharded));
  assert.ok(!isSharded({ ...sharded, sharded_variables: 0 }));
});

test("a sharded variable's cell: shards, replicas and what one device holds", () => {
  const row = { shards: 4, replicas: 2, device_bytes: Array(8).fill(4 * MiB) };
  assert.equal(shardText(row), "4 shards ×2 replicas · 4.00 MiB per device");
  assert.equal(shardText({ shards: 8, replicas: 1, device_bytes: [4, 4, 4, 2] }), "8 shards · up to 4 B per device");
  assert.equal(shardText({ shards: 2, replicas: 1 }), "2 shards");
  assert.equal(shardText({ shards: 1, replicas: 8, device_bytes: [4, 4] }), "");
  assert.equal(shardText({}), "");
  assert.deepEqual(perDevice({ device_bytes: [3, 5] }), { bytes: 5, even: false });
  assert.equal(perDevice({}), null);
});

test("the device filter term goes with what the user typed", () => {
  assert.equal(deviceFilterTerm("/device:CPU:3"), "device=/device:CPU:3");
  assert.equal(deviceFilterTerm(""), "");
  assert.equal(deviceFilterTerm(null), "");
  assert.equal(deviceFilterTerm("a b"), 'device="a b"'); // quoted: one term
  assert.equal(deviceFilterTerm('a"b'), ""); // no term can hold a quote: all devices rather than a wrong filter
  assert.equal(withTerm(" conv type:fusion ", "device=/device:CPU:3"), "conv type:fusion device=/device:CPU:3");
  assert.equal(withTerm("", "device=/device:CPU:3"), "device=/device:CPU:3");
  assert.equal(withTerm("conv", ""), "conv");
});

test("the sharding choices and the headline's words", () => {
  assert.deepEqual(SHARDINGS, ["replicated", "optimizer", "gradients", "weights"]);
  assert.deepEqual(SHARDINGS.map((s) => SHARDING_LABEL[s]), ["replicated (data parallel)", "optimizer state (ZeRO-1)",
    "+ gradients (ZeRO-2)", "+ weights (ZeRO-3 / FSDP)"]);
  assert.equal(devicesWords(8, "optimizer"), "on each of 8 devices, optimizer state sharded");
  assert.equal(devicesWords(4, "weights"), "on each of 4 devices, optimizer state, gradients and weights sharded");
  assert.equal(devicesWords(8, null), "on each of 8 devices");
  assert.equal(devicesWords(8, "replicated"), "on each of 8 devices, each holding the whole state");
  assert.equal(devicesWords(1, null), "");
  assert.equal(devicesWords(1, "gradients"), "on one device, optimizer state and gradients sharded");
});
