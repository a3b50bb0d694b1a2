import { test } from "node:test";
import assert from "node:assert/strict";
import { isSnapshot, isTorch, noLayersNote, noModuleRangesNote, recordsOutputShapes, stepKind, untimedNote } from "../src/framework.js";

const tf = { source: "xplane", xla: null, timed: true };
const torch = { source: "torch profiler", xla: null, timed: true }; // a .pt.trace.json, or Keras on torch
const snapshot = { source: "torch memory snapshot", xla: null, timed: false };

test("a PyTorch trace is not TensorFlow's executor; a snapshot runs no ops", () => {
  assert.equal(stepKind(tf), "op by op (TensorFlow's executor)");
  assert.equal(stepKind(torch), "op by op (PyTorch)");
  assert.equal(stepKind(snapshot), "");
  assert.equal(stepKind({ source: "xplane", xla: { programs: [] } }), "XLA-compiled");
  assert.equal(stepKind({ source: "xplane" }), ""); // an answer that does not say
  assert.ok(isTorch({ source: "pytorch checkpoint" }) && !isTorch({ source: "run_metadata" }));
  // the sources whose name says no framework: a Trainer or Accelerate folder's, a safetensors file's
  for (const source of ["transformers Trainer checkpoint", "Accelerate save_state folder", "safetensors"]) {
    assert.ok(isTorch({ source }), source);
  }
  assert.ok(isSnapshot(snapshot) && !isSnapshot(torch));
});

test("no op times and no layers are said in the words of the trace's framework", () => {
  assert.equal(untimedNote(torch), "");
  assert.match(untimedNote(snapshot), /^A PyTorch memory snapshot records the allocator's actions/);
  assert.match(untimedNote({ source: "memory_profile", timed: false }), /TF 2\.3–2\.10 memory profile/);
  assert.match(noLayersNote(torch), /with_stack=True/);
  assert.doesNotMatch(noLayersNote(torch), /summary\.variables/);
  assert.match(noLayersNote(tf), /summary\.variables/);
  assert.ok(recordsOutputShapes(tf) && !recordsOutputShapes(torch) && !recordsOutputShapes(snapshot));
});

test("a PyTorch trace joined to a checkpoint's layers but on none of them says why: no module ranges", () => {
  const none = { ...torch, join: { vocabulary: "breakdown", fraction: 0 } };
  assert.match(noModuleRangesNote(none), /^0% of op time on the model's layers: .*with_stack=True/);
  assert.equal(noModuleRangesNote({ ...none, join: { vocabulary: "breakdown", fraction: 0.93 } }), "");
  assert.equal(noModuleRangesNote({ ...tf, join: { vocabulary: "breakdown", fraction: 0 } }), "");
});
