import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import {
  allSteps, axisRange, chartedSeries, explainTables, flaggedCount, formatCount, formatPerStep, growthPhrase, growthSummary, labelsByStep,
  mostFlagged, perStepText, sampleUnit, seriesLabel, seriesPoints, seriesUnit, unknownGrowthNote, unreadableNote,
} from "../src/growth.js";
import { formatHumanTick } from "../src/format.js";

const fixture = async (name) => JSON.parse(await readFile(new URL(`./fixtures/${name}`, import.meta.url), "utf8"));

test("the keep loop: every series flagged, in words and human units per build", async () => {
  const keep = await fixture("growth-keep.json");
  const { word, flagged, none } = growthSummary(keep);
  assert.equal(word, "build");
  assert.equal(none, "");
  assert.deepEqual(flagged.map((f) => f.text), [
    "+10.80 MiB RSS per build",
    "+22 live variables per build",
    "+510.14 KiB live variable bytes per build",
    "+922 graph ops per build",
    "+1 live model per build",
    "+10,224 Python objects per build",
  ]);
  assert.equal(flagged[1].series, "live_variables");
  assert.equal(flagged[1].reason, "grows in 100% of steps after warm-up");
  assert.deepEqual(explainTables(keep.explained_by).map((t) => [t.key, t.rows.length, t.bytes]), [
    ["models", 8, true], ["variables_by_owner", 21, true], ["graph_ops_by_function", 17, false], ["objects_by_type", 10, false],
  ]);
});

test("a plain fit: nothing flagged, samples read as training steps (they are labelled)", async () => {
  const fit = await fixture("growth-fit.json");
  const { word, flagged, none } = growthSummary(fit);
  assert.equal(word, "step");
  assert.deepEqual(flagged, []);
  assert.equal(none, "Nothing keeps growing over 17 samples (steps 0–32).");
  assert.deepEqual(explainTables(fit.explained_by), []);
  assert.equal(labelsByStep(fit.labels).get(32), "train end");
  assert.equal(labelsByStep(fit.labels).get(2), undefined);
});

test("too few samples say so instead of 'nothing grows'", () => {
  const reason = "2 samples: too few to tell a trend (at least 4)";
  const data = { series: { rss_bytes: { unit: "bytes", steps: [0, 1], values: [1, 2] } }, samples: 2,
    growth: [{ series: "rss_bytes", per_step: null, flagged: false, reason }] };
  assert.equal(growthSummary(data).none, `Nothing flagged: ${reason}.`);
});

test("steps or builds: labelled samples are steps; unlabelled consecutive ones builds; gaps steps", () => {
  const at = (steps, labels = []) => ({ labels, series: { rss_bytes: { steps, values: steps } } });
  assert.equal(sampleUnit(at([0, 1, 2, 3])), "build");
  assert.equal(sampleUnit(at([0, 1, 2, 3], [{ step: 0, label: "train begin" }])), "step");
  assert.equal(sampleUnit(at([0, 100, 200])), "step");
  assert.equal(sampleUnit(at([5])), "step");
  assert.deepEqual(allSteps({ series: { a: { steps: [4, 0] }, b: { steps: [0, 2, "x"] } } }), [0, 2, 4]);
});

test("series names in words, devices included", () => {
  assert.equal(seriesLabel("rss_bytes"), "RSS");
  assert.equal(seriesLabel("live_models", 1), "live model");
  assert.equal(seriesLabel("live_models", 3), "live models");
  assert.equal(seriesLabel("GPU:0/bytes_in_use"), "GPU:0 bytes in use");
  assert.equal(seriesLabel("/device:TPU:1/peak_bytes"), "/device:TPU:1 peak bytes");
  assert.equal(seriesLabel("future_series"), "future series");
  assert.equal(seriesUnit({ series: { x: { unit: "count" } } }, "x"), "count");
  assert.equal(seriesUnit({}, "GPU:0/peak_bytes"), "bytes");
  assert.equal(seriesUnit({}, "graph_ops"), "count");
});

test("growth per step in its unit, signed; unknown is not 0", () => {
  assert.equal(formatPerStep(22, "count"), "+22");
  assert.equal(formatPerStep(2.8, "count"), "+2.8");
  assert.equal(formatPerStep(-0.23863636, "count"), "-0.239");
  assert.equal(formatPerStep(10224, "count"), "+10,224");
  assert.equal(formatPerStep(0, "count"), "0");
  assert.equal(formatPerStep(522380, "bytes"), "+510.14 KiB");
  assert.equal(formatPerStep(11321344, "bytes"), "+10.80 MiB");
  assert.equal(formatPerStep(12.3456, "bytes"), "+12.3 B");
  assert.equal(formatPerStep(null, "bytes"), "unknown");
  assert.equal(formatPerStep("NaN", "count"), "unknown");
  assert.equal(formatCount(1234.5), "1,235");
  assert.equal(growthPhrase({ series: "graph_ops", per_step: 1 }, "count", "step"), "+1 graph op per step");
  assert.equal(growthPhrase({ series: "live_variable_bytes", per_step: 1024 }, "bytes", "build"), "+1.00 KiB live variable bytes per build");
});

test("chart points keep a missing value as a gap, never 0", () => {
  assert.deepEqual(seriesPoints({ steps: [2, 0, 1, 3], values: [30, 10, null, "NaN"] }), [[0, 10], [1, null], [2, 30], [3, null]]);
  assert.deepEqual(seriesPoints({ steps: [0, null], values: [1, 2] }), [[0, 1]]);
  assert.deepEqual(seriesPoints(undefined), []);
  assert.deepEqual(chartedSeries({ series: { a: { steps: [1] }, b: { steps: [] }, c: {} } }), ["a"]);
});

test("a chart's value axis spans the data on round byte ticks; a flat series starts at 0", () => {
  const MiB = 2 ** 20;
  assert.deepEqual(axisRange([667590656, 751779840], "bytes"), { min: 600 * MiB, max: 750 * MiB, interval: 50 * MiB });
  assert.deepEqual(axisRange([522380, 4179040], "bytes"), { min: 0, max: 4 * MiB, interval: MiB });
  assert.deepEqual(axisRange([1, 1, null], "count"), { min: 0, minInterval: 1 });
  assert.deepEqual(axisRange([22, 176], "count"), { scale: true, minInterval: 1 });
  assert.deepEqual(axisRange([null], "bytes"), {});
  assert.deepEqual(axisRange([0, 0], "bytes"), { min: 0, minInterval: 1 });
  // ticks 5 MiB apart near 2 GiB must differ
  assert.equal(formatHumanTick(2 * 2 ** 30 + 5 * MiB, 5 * MiB), "2.005 GiB");
  assert.equal(formatHumanTick(2 * 2 ** 30 + 10 * MiB, 5 * MiB), "2.01 GiB");
  assert.equal(formatHumanTick(650 * MiB, 50 * MiB), "650 MiB");
  assert.equal(formatHumanTick(0, MiB), "0 B");
});

test("labels at one step are joined; what explains it skips empty and malformed tables", () => {
  assert.equal(labelsByStep([{ step: 3, label: "a" }, { step: 3, label: "b" }, { step: 4, label: "" }, null]).get(3), "a · b");
  assert.deepEqual(explainTables({ models: [], objects_by_type: [null, { name: "x", count: 2, bytes: null }], graph_ops_by_function: "?" }),
    [{ key: "objects_by_type", rows: [{ name: "x", count: 2, bytes: null }], bytes: false }]);
  assert.deepEqual(explainTables(undefined), []);
});

test("unreadable samples are named with the first reason", () => {
  assert.equal(unreadableNote([]), "");
  assert.equal(unreadableNote(undefined), "");
  assert.equal(unreadableNote([{ step: 5, error: "r/t step 5: corrupt" }]),
    "1 sample could not be read (step 5) and is left out of the series: r/t step 5: corrupt");
  const many = Array.from({ length: 7 }, (_, i) => ({ step: i * 1000, error: "bad" }));
  assert.equal(unreadableNote(many), "7 samples could not be read (steps 0, 1,000, 2,000, 3,000, 4,000, …) and are left out of the series: bad");
});

test("explaining tables: no rate for a line that appeared, the reason for an unknown one", async () => {
  const keep = await fixture("growth-keep.json");
  const owners = keep.explained_by.variables_by_owner;
  const adam = owners.find((r) => r.name === "adam_3");
  assert.equal(adam.per_step, 2.8); // the server's average over the samples after warm-up...
  assert.equal(perStepText(adam), "appeared"); // ...of an optimizer built once: not a rate per build
  assert.equal(perStepText(owners.find((r) => r.name === "loss")), "2");
  const unknown = { name: "adam_3_sequential_3_conv2d_6_bias_momentum_cond_false_4084", count: 6, bytes: null, grown: null,
    per_step: null, new: null };
  assert.equal(perStepText(unknown), "unknown");
  assert.equal(unknownGrowthNote([unknown, { ...unknown, name: "b" }, adam]).slice(0, 40), '2 rows read "unknown": missing from the ');
  assert.match(unknownGrowthNote([unknown]), /^1 row read "unknown": .*largest lines.*"\(other\)"/);
  assert.equal(unknownGrowthNote(owners), "");
});

test("Growth opens on the item with the most series flagged", async () => {
  const keep = await fixture("growth-keep.json");
  const fit = await fixture("growth-fit.json");
  assert.equal(flaggedCount(keep), 6);
  assert.equal(flaggedCount(fit), 0);
  assert.equal(flaggedCount(null), 0);
  const scanned = [{ run: "convnet/train", tag: "memory", flagged: 0 }, { run: "clear/builds", tag: "memory", flagged: 2 },
    { run: "keep/builds", tag: "memory", flagged: 6 }, { run: "other", tag: "memory", flagged: 6 }];
  assert.deepEqual(mostFlagged(scanned), scanned[2]);
  assert.equal(mostFlagged(scanned.slice(0, 1)), null);
});
