import { test } from "node:test";
import assert from "node:assert/strict";
import {
  byteAxisInterval, ellipsize, formatBytesFull, formatBytesKnown, formatHuman, formatHumanShort, formatIntKnown, formatPercent,
  formatProgress, shortDevice, shortDevices, formatInt, formatMicros, formatShape, formatConfigValue, shortClassName,
} from "../src/format.js";

test("exact byte counts get thousands separators", () => {
  assert.equal(formatInt(13098536), "13,098,536");
  assert.equal(formatInt(832), "832");
  assert.equal(formatInt(0), "0");
  assert.equal(formatInt(-1234567), "-1,234,567");
  assert.equal(formatInt(null), "—");
});

test("human sizes use binary units", () => {
  assert.equal(formatHuman(8), "8 B");
  assert.equal(formatHuman(100352), "98.00 KiB");
  assert.equal(formatHuman(13098536), "12.49 MiB");
  assert.equal(formatHuman(39295616), "37.48 MiB");
  assert.equal(formatHuman(5 * 1024 ** 3), "5.00 GiB");
  assert.equal(formatHumanShort(10 * 1048576), "10 MiB");
  assert.equal(formatHumanShort(12.5 * 1048576), "12.5 MiB");
  assert.equal(formatHumanShort(0), "0 B");
});

test("cards show exact and human bytes together", () => {
  assert.equal(formatBytesFull(13098536), "13,098,536 B (12.49 MiB)");
  assert.equal(formatBytesFull(26197072), "26,197,072 B (24.98 MiB)");
  assert.equal(formatBytesFull(8), "8 B");
});

test("durations pick a readable unit", () => {
  assert.equal(formatMicros(850), "850 µs");
  assert.equal(formatMicros(1.234), "1.23 µs");
  assert.equal(formatMicros(12345), "12.35 ms");
  assert.equal(formatMicros(1420000), "1.42 s");
});

test("shapes and config values", () => {
  assert.equal(formatShape([5, 5, 1, 32]), "[5,5,1,32]");
  assert.equal(formatShape([]), "[]");
  assert.equal(formatConfigValue(0.001), "0.001");
  assert.equal(formatConfigValue(null), "None");
  assert.equal(formatConfigValue({ a: 1 }), '{"a":1}');
  assert.equal(formatConfigValue(9.999999747378752e-05), "0.0001");
  assert.equal(formatConfigValue(0.8999999761581421), "0.9");
  assert.equal(formatConfigValue(9.99999993922529e-09), "1e-8");
  assert.equal(formatConfigValue(100), "100");
  assert.equal(formatConfigValue(true), "true");
  assert.equal(shortClassName("tf.compat.v1.train.AdamOptimizer"), "AdamOptimizer");
  assert.equal(shortClassName("Adam"), "Adam");
});

test("long names keep their distinctive end", () => {
  assert.equal(ellipsize("dense", 28), "dense");
  assert.equal(ellipsize("model/block_1/conv2d_3/kernel", 10), "…_3/kernel");
});

test("device names keep the device part", () => {
  assert.equal(shortDevice("/job:localhost/replica:0/task:0/device:CPU:0"), "CPU:0");
  assert.equal(shortDevice("/device:GPU:1"), "GPU:1");
  assert.equal(shortDevice("/job:worker/task:1"), "/job:worker/task:1");
  assert.equal(shortDevice(""), "");
});

test("byte axes tick on round binary units", () => {
  assert.equal(byteAxisInterval(718110720), 200 * 1048576); // 684.8 MiB -> 200 MiB steps
  assert.equal(byteAxisInterval(40 * 1048576), 10 * 1048576);
  assert.equal(byteAxisInterval(100352), 20 * 1024);
  assert.equal(byteAxisInterval(12), 5);
  assert.equal(byteAxisInterval(0), undefined);
});

test("unknown is not zero: a figure the data cannot give reads unknown", () => {
  assert.equal(formatBytesKnown(null), "unknown");
  assert.equal(formatBytesKnown(undefined), "unknown");
  assert.equal(formatBytesKnown(0), "0 B");
  assert.equal(formatBytesKnown(100352), "100,352 B (98.00 KiB)");
  assert.equal(formatIntKnown(null), "unknown");
  assert.equal(formatIntKnown(0), "0");
});

test("shares and progress", () => {
  assert.equal(formatPercent(0.9712), "97%");
  assert.equal(formatPercent(0.0041), "0.4%");
  assert.equal(formatPercent(0), "0%");
  assert.equal(formatPercent(null), "");
  assert.equal(formatProgress({ state: "reducing", progress: 0.4, message: "parsing", elapsed_s: 0.5 }), "Reducing… 40% (parsing)");
  assert.equal(formatProgress({ progress: 0.95, message: "reducing", elapsed_s: 12.4 }), "Reducing… 95% (reducing) · 12 s");
  assert.equal(formatProgress({}), "Reducing… 0%");
});

test("a share that is not 0 never reads 0%; a mirrored variable's devices read short", () => {
  assert.equal(formatPercent(16 / 62022656), "<0.1%");
  assert.equal(formatPercent(0), "0%");
  assert.equal(formatPercent(0.004), "0.4%");
  assert.equal(shortDevices("/job:localhost/replica:0/task:0/device:CPU:0,/job:localhost/replica:0/task:0/device:CPU:1"), "CPU:0, CPU:1");
  assert.equal(shortDevices(""), "");
});
