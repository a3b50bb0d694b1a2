import { test } from "node:test";
import assert from "node:assert/strict";
import { hostDevices } from "../src/components/hosts.js";

test("a host row says how many devices ran its ops, or its one device by short name", () => {
  const eight = Array.from({ length: 8 }, (_, i) => `/device:CPU:${i}`);
  assert.equal(hostDevices({ devices: eight }), "8");
  assert.equal(hostDevices({ devices: ["/host:CPU"] }), "CPU");
  assert.equal(hostDevices({ devices: [] }), "");
  assert.equal(hostDevices({}), "");
});
