import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { rowsOf } from "../src/api.js";
import {
  allocationsWarning, allocationWhy, reservedNote, compiledWords, floorBytes, graphNote, joinSummary, opTimeWords, outputWhy, ownTime, phaseTimes,
  timeTitle, topDeviceWords,
} from "../src/layer-figures.js";
import { formatShare } from "../src/format.js";

// Real /ops answers (test/fixtures, saved from the plugin over corpus runs): keras-io's BiLSTM under mixed
// precision with MemoryCallback, and keras-io's MNIST convnet profiled by a plain keras.callbacks.TensorBoard
// whose graph_run_metadata_graph holds no graph.
const fixture = async (name) => JSON.parse(await readFile(new URL(`fixtures/${name}`, import.meta.url), "utf8"));
const bilstm = await fixture("ops-bilstm-mp.json");
const plain = await fixture("ops-mnist-plain.json");
const row = (data, layer) => rowsOf(data.layers).find((r) => r.layer === layer);
const group = (data, label) => rowsOf(data.layers).find((r) => !r.layer && r.label === label);

test("a byte sum over ops some of which have no figure is a floor, with how many are unknown", () => {
  const root = row(bilstm, "functional");
  const out = floorBytes(root.output_bytes, root.unknown_output_ops, "output bytes", "no graph");
  assert.equal(out.text, "≥ 170,922,993 (+ 69 ops unknown)");
  assert.equal(out.value, 170922993);
  assert.equal(out.floor, true);
  assert.equal(out.title, "at least 170,922,993 B (163.00 MiB): the output bytes of 69 ops under this row are unknown: no graph");
  const lstm = row(bilstm, "functional/bidirectional/forward_lstm");
  assert.equal(floorBytes(lstm.alloc_bytes, lstm.unknown_alloc_ops, "allocated bytes").text, "≥ 7,372,800 (+ 128 ops unknown)");
  assert.equal(floorBytes(1, 1, "output bytes").title, "at least 1 B: the output bytes of 1 op under this row is unknown");
});

test("a sum no op has a figure for reads unknown, never 0; one with every figure known is exact", () => {
  const conv = row(plain, "sequential/conv2d");
  assert.equal(conv.output_bytes, null);
  const out = floorBytes(conv.output_bytes, conv.unknown_output_ops, "output bytes", outputWhy(plain));
  assert.equal(out.text, "unknown (4 ops)");
  assert.equal(out.value, null);
  assert.match(out.title, /^unknown: no op under this row has known output bytes \(4 ops without a figure\): the run's 'batch_2' /);
  assert.equal(floorBytes(null, 0, "output bytes").text, "unknown");
  assert.deepEqual(floorBytes(401408, 0, "output bytes"), { text: "401,408", value: 401408, floor: false, title: "401,408 B (392.00 KiB)" });
  assert.equal(floorBytes(0, 0, "output bytes").text, "0"); // a layer none of whose ops allocated: a true 0
});

test("why a figure is unknown: the profile's graph note, else the allocator's events", () => {
  assert.match(graphNote(plain), /'batch_2' graph_run_metadata_graph holds no graph .*placed on layers by their names alone$/);
  assert.equal(outputWhy(plain), graphNote(plain));
  assert.equal(graphNote(bilstm), ""); // MemoryCallback's trace: no graph object, nothing missing
  assert.match(outputWhy(bilstm), /^neither measured by the allocator nor derivable from the traced graph/);
  assert.equal(graphNote({ graph: { graphs: 2, note: "" } }), "");
  assert.equal(plain.allocations, "none");
  assert.equal(allocationWhy(plain), "the trace recorded no allocation event");
  assert.equal(bilstm.allocations, "large"); // TF's default CPU allocator
  assert.equal(allocationWhy(bilstm), "the allocator recorded only its large allocations, none of this op's");
  assert.equal(allocationWhy({ allocations: "all" }), "the trace recorded no allocation for it");
});

test("a layer's time per phase: a phase no op of which reached a layer is unknown per layer, not 0", () => {
  const embedding = row(bilstm, "functional/embedding");
  assert.deepEqual(phaseTimes(embedding, bilstm.join.unplaced_time_us).map((p) => p.text),
    ["forward 2.87 ms", "backward 1.83 ms", "optimizer 82.02 ms", "loss unknown", "metrics unknown"]);
  // MNIST without a graph: no Adam op reached a layer, so optimizer time per layer is unknown, not 0 (issue 31 item 8)
  const conv = row(plain, "sequential/conv2d");
  assert.deepEqual(phaseTimes(conv, plain.join.unplaced_time_us).map((p) => [p.phase, p.us]),
    [["forward", 10445.813], ["backward", 20278.41], ["optimizer", null], ["loss", null], ["metrics", null]]);
  // a group row of no layer has its own phase, input and executor included; nothing unknown
  assert.deepEqual(phaseTimes(group(plain, "(input)"), plain.join.unplaced_time_us).map((p) => p.text), ["input 424 µs"]);
  assert.deepEqual(phaseTimes(group(plain, "(optimizer)"), plain.join.unplaced_time_us).map((p) => p.text), ["optimizer 442 µs"]);
});

test("a composite's own time: ops on it and in none of its sublayers", () => {
  assert.equal(ownTime(row(bilstm, "functional/bidirectional")), 3019.07);
  assert.equal(ownTime(row(bilstm, "functional")), 0);
  assert.equal(ownTime(row(bilstm, "functional/embedding")), null); // a leaf: all of it is its own
  assert.equal(ownTime(group(plain, "(loss)")), null);
});

test("the Time cell's tooltip: per phase, the composite's own part, and where the unknown phases' time is", () => {
  assert.equal(timeTitle(row(bilstm, "functional/bidirectional"), bilstm.join), [
    "439.41 ms: forward 154.75 ms · backward 278.82 ms · optimizer 5.85 ms · loss unknown · metrics unknown",
    "3.02 ms of it on \u2068bidirectional\u2069 itself, in none of its sublayers",
    "per layer, loss, metrics time is unknown: none of those ops was placed on a layer (on no layer: loss 37 µs, metrics 87 µs)",
  ].join("\n"));
  assert.equal(timeTitle(row(bilstm, "functional"), bilstm.join).split("\n")[1], "all of it in its sublayers");
  assert.equal(timeTitle(row(plain, "sequential/conv2d"), plain.join), [
    "30.72 ms: forward 10.45 ms · backward 20.28 ms · optimizer unknown · loss unknown · metrics unknown",
    "per layer, optimizer, loss, metrics time is unknown: none of those ops was placed on a layer "
      + "(on no layer: optimizer 442 µs, loss 81 µs, metrics 4.12 µs)",
  ].join("\n"));
  assert.equal(timeTitle(group(plain, "(executor)"), plain.join), "197 µs: executor 197 µs");
});

test("a share that is not all never reads 100%, one that is not none never 0%", () => {
  assert.equal(formatShare(bilstm.join.fraction), "99.9%");
  assert.equal(formatShare(0.99999), "99.9%");
  assert.equal(formatShare(1), "100%");
  assert.equal(formatShare(0.0003), "<0.1%");
  assert.equal(formatShare(0), "0.0%");
  assert.equal(formatShare(null), "");
});

test("the join: on layers, on leaf layers, and what is on no layer by phase (issue 31 item 6)", () => {
  const j = joinSummary(bilstm);
  assert.equal(j.fraction, "99.9%");
  assert.equal(j.leaf, "99.7%");
  assert.equal(j.of, "all but 878 µs of 1.20 s"); // not "1.20 s of 1.20 s"
  assert.deepEqual(j.unplaced.map((p) => p.text), ["forward 430 µs", "optimizer 74 µs", "loss 37 µs", "metrics 87 µs"]);
  assert.equal(j.text, "99.9% of op time on the model's layers (all but 878 µs of 1.20 s), 99.7% on leaf layers; "
    + "on no layer: forward 430 µs, optimizer 74 µs, loss 37 µs, metrics 87 µs");
  assert.equal(joinSummary(plain).text, "99.1% of op time on the model's layers (178.13 ms of 179.72 ms), 99.1% on leaf layers; "
    + "on no layer: forward 413 µs, backward 31 µs, optimizer 442 µs, loss 81 µs, metrics 4.12 µs");
  assert.equal(joinSummary({}).text, "");
});

test("a torch.compile graph's layers are named in the join, and why their sublayers are unknown", () => {
  const compiled = { ...plain, join: { ...plain.join, compiled_layers: ["Net"] } };
  assert.match(joinSummary(compiled).text, /; Net ran as a torch\.compile graph: its sublayers' ops ran inside, where no module is named \(their figures unknown\)$/);
  assert.equal(compiledWords(["enc", "dec"]).split(":")[0], "enc, dec ran as torch.compile graphs");
  assert.equal(compiledWords(undefined), "");
});

test("the join's note on where the layers come from follows its first figure", () => {
  assert.match(joinSummary(plain, " (layers from the trace's own scopes)").text,
    /^99\.1% of op time on the model's layers \(178\.13 ms of 179\.72 ms\) \(layers from the trace's own scopes\), 99\.1% on leaf layers; /);
});

test("the two durations are named: op time summed over threads, the wall time the Timeline spans, their ratio", () => {
  // issue 39: demo_logs' lenet_trace read "47.12 ms" beside a Timeline of 28.75 ms, neither named
  assert.equal(opTimeWords({ timed: true, total_time_us: 47_120, timeline_span_us: 28_750 }),
    "47.12 ms of op time, summed over ops on all threads · the Timeline spans 28.75 ms of wall time"
    + " (op time 1.64x it: ops ran side by side)");
  assert.equal(opTimeWords({ timed: true, total_time_us: 20_000, timeline_span_us: 25_000 }),
    "20.00 ms of op time, summed over ops on all threads · the Timeline spans 25.00 ms of wall time (op time 0.80x it)");
  assert.equal(opTimeWords({ timed: true, total_time_us: 47_120, timeline_span_us: null }),
    "47.12 ms of op time, summed over ops on all threads");
  assert.equal(opTimeWords({ timed: false, total_time_us: 0, timeline_span_us: 10 }), "");
});

test("a trace of the default CPU allocator leads with what to do, then why; one that saw everything says nothing", () => {
  const note = "TensorFlow's default CPU allocator records only its large allocations: ...";
  const large = allocationsWarning({ allocations: "large", allocations_note: note });
  assert.ok(large.startsWith("To see this peak split to the byte, call tb_modelmem.enable_full_memory_trace() first thing"));
  assert.ok(large.endsWith(`Why: ${note}`));
  assert.equal(allocationsWarning({ allocations: "all", allocations_note: "" }), "");
  assert.equal(allocationsWarning({ allocations: "none", allocations_note: "" }),
    "This trace recorded no allocations: the peak and its split are unknown.");
});

test("XLA's plan standing in for allocations: an info note, no warning, and why an op has none at the peak", async () => {
  const { allocationsWarning, allocationWhy, isPlanned, plannedNote } = await import("../src/layer-figures.js");
  const data = { allocations: "planned", allocations_note: "XLA's plan, not a measurement" };
  assert.equal(plannedNote(data), "Planned by XLA's buffer assignment, per device: XLA's plan, not a measurement");
  assert.equal(plannedNote({ allocations: "planned" }), "Planned by XLA's buffer assignment, per device.");
  assert.equal(allocationsWarning(data), "");
  assert.ok(isPlanned(data));
  assert.match(allocationWhy(data), /buffer assignment/);
  assert.equal(plannedNote({ allocations: "none" }), "");
  assert.ok(!isPlanned({ allocations: "all" }));
});

test("topDeviceWords names the device whose ops the top charts list, only when the answer has one", () => {
  assert.equal(topDeviceWords({ top_device: null, devices: ["cpu"] }), "");
  assert.equal(topDeviceWords({ top_device: "/device:CPU:3", devices: ["/device:CPU:0", "/device:CPU:3"] }),
    "the top ops are /device:CPU:3's, the busiest of the 2 devices (an XLA step runs the same instructions on each)");
});

test("a caching allocator's reserved memory beyond the tensors is said, with its share", () => {
  // the H100 ResNet50 trace's cuda:0, as the reader gives it (tests/integration/test_torch_trace.py checks those)
  const allocators = [{ name: "cpu", peak_bytes: 8, counted: false },
    { name: "cuda:0", peak_bytes: 3182946816, reserved_at_peak_bytes: 3720347648, max_reserved_bytes: 3720347648,
      counted: true }];
  const note = reservedNote({ allocators });
  assert.match(note, /^cuda:0's caching allocator held 3\.46 GiB reserved at the peak: 512\.51 MiB \(14\.4%\)/);
  assert.ok(!note.includes("at most"), note);
  assert.equal(reservedNote({ allocators: [{ name: "GPU_0_bfc", peak_bytes: 10, fragmentation_at_peak: 0.1 }] }), "");
  assert.equal(reservedNote({}), "");
});
