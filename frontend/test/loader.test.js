import { test } from "node:test";
import assert from "node:assert/strict";
import { Pending } from "../src/api.js";
import { createLoader } from "../src/loader.js";

/** A request whose answers the test hands out one by one. */
function scripted() {
  const calls = [];
  const request = () => new Promise((resolve, reject) => calls.push({ resolve, reject }));
  return { calls, request };
}

/** Waits the test releases by hand, instead of timers. */
function manualWait() {
  const waits = [];
  return { waits, wait: (ms) => new Promise((resolve) => waits.push({ ms, resolve })) };
}

const tick = () => new Promise((r) => setImmediate(r));

test("an item in flight is never asked for twice; every caller gets the one answer", async () => {
  const { calls, request } = scripted();
  const loader = createLoader();
  const first = loader.get("ops|a", request);
  const second = loader.get("ops|a", request); // the 20 s poll, while the answer is still on its way
  assert.equal(calls.length, 1);
  assert.equal(loader.inFlight("ops|a"), true);
  calls[0].resolve({ rows: 1 });
  assert.deepEqual(await first, { rows: 1 });
  assert.deepEqual(await second, { rows: 1 });
  assert.equal(loader.inFlight("ops|a"), false);
  loader.get("ops|a", request); // answered: a later ask is a new request
  assert.equal(calls.length, 2);
});

test("a slow answer is delivered however long it takes; other items go their own way", async () => {
  const { calls, request } = scripted();
  const loader = createLoader();
  const slow = loader.get("slow", request);
  const fast = loader.get("fast", request);
  calls[1].resolve("fast answer");
  assert.equal(await fast, "fast answer");
  for (let i = 0; i < 9; i++) loader.get("slow", request); // nine polls later
  assert.equal(calls.length, 2);
  calls[0].resolve("slow answer");
  assert.equal(await slow, "slow answer");
});

test("202 reports progress and asks again after the retry delay, one request at a time", async () => {
  const { calls, request } = scripted();
  const { waits, wait } = manualWait();
  const loader = createLoader({ retryMs: 1000, wait });
  const seen = [];
  const answer = loader.get("big", request, { onProgress: (p) => seen.push([p.progress, p.message]) });
  calls[0].resolve(new Pending({ progress: 0.4, message: "parsing", elapsed_s: 3 }));
  await tick();
  assert.deepEqual(seen, [[0.4, "parsing"]]);
  assert.deepEqual(waits.map((w) => w.ms), [1000]);
  assert.equal(calls.length, 1); // nothing asked again before the delay
  const late = [];
  loader.get("big", request, { onProgress: (p) => late.push(p.progress) }); // a caller arriving now sees the last state
  assert.deepEqual(late, [0.4]);
  waits[0].resolve();
  await tick();
  assert.equal(calls.length, 2);
  calls[1].resolve({ done: true });
  assert.deepEqual(await answer, { done: true });
});

test("a still-reducing item nobody wants any more is not asked for again", async () => {
  const { calls, request } = scripted();
  const { waits, wait } = manualWait();
  const loader = createLoader({ wait });
  let wanted = true;
  const answer = loader.get("big", request, { keep: () => wanted });
  calls[0].resolve(new Pending({ progress: 0.1 }));
  await tick();
  wanted = false; // the user picked another run
  waits[0].resolve();
  await assert.rejects(answer, (e) => e.name === "Cancelled");
  assert.equal(calls.length, 1);
  assert.equal(loader.size(), 0);
});

test("a failure reaches every caller and is not retried", async () => {
  const { calls, request } = scripted();
  const loader = createLoader();
  const a = loader.get("bad", request);
  const b = loader.get("bad", request);
  calls[0].reject(new Error("422 corrupt"));
  await assert.rejects(a, /corrupt/);
  await assert.rejects(b, /corrupt/);
  assert.equal(calls.length, 1);
});
