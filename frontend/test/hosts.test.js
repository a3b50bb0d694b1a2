import { test } from "node:test";
import assert from "node:assert/strict";
import { collectiveText, hostDevices } from "../src/components/hosts.js";

test("a host row says how many devices ran its ops, or its one device by short name", () => {
  const eight = Array.from({ length: 8 }, (_, i) => `/device:CPU:${i}`);
  assert.equal(hostDevices({ devices: eight }), "8");
  assert.equal(hostDevices({ devices: ["/host:CPU"] }), "CPU");
  assert.equal(hostDevices({ devices: [] }), "");
  assert.equal(hostDevices({}), "");
});

test("a rank's collectives: their time and share of its op time, nothing where it moved no tensor", () => {
  assert.equal(collectiveText({ time_us: 37210, collective_us: 21460 }), "21.46 ms (58%)");
  assert.equal(collectiveText({ time_us: 1000, collective_us: 0 }), "");
  assert.equal(collectiveText({ time_us: null, collective_us: null }), "");
  assert.equal(collectiveText({ collective_us: 500 }), "500 µs");
});
