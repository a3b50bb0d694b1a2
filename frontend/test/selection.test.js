import { test } from "node:test";
import assert from "node:assert/strict";
import {
  availableViews, breakdownTags, compareTag, followRun, itemKey, passedOverNote, reconcile, runsOfKind, tagErrors, tagLabel,
} from "../src/selection.js";

const listing = {
  runs: [
    { run: "adam", tags: [
      { tag: "variables", kind: "breakdown", origin: "modelmem", max_step: 3, error: null },
      { tag: "trace", kind: "ops", origin: "modelmem", max_step: 3, error: null },
    ] },
    { run: "bad", tags: [{ tag: "future", kind: null, origin: "modelmem", max_step: 0, error: "written by a newer tb_modelmem" }] },
    { run: "gan", tags: [
      { tag: "discriminator", kind: "breakdown", origin: "modelmem", max_step: 5 },
      { tag: "generator", kind: "breakdown", origin: "modelmem", max_step: 5 },
      { tag: "profile/2026_11_22", kind: "ops", origin: "profile", max_step: null, hosts: ["worker_0", "worker_1"] },
    ] },
    { run: "sgd", tags: [{ tag: "weights", kind: "breakdown", origin: "modelmem", max_step: 1 }] },
  ],
};
const none = { host: "", breakdown: "" };

test("only views with data are offered", () => {
  assert.deepEqual(availableViews(listing).map((v) => v.id), ["storage", "ops", "timeline", "whatif"]);
  assert.deepEqual(availableViews({ runs: [] }), []);
});

test("runs of a kind skip unreadable tags; errors are listed separately", () => {
  assert.deepEqual(runsOfKind(listing, "breakdown").map((r) => r.run), ["adam", "gan", "sgd"]);
  assert.deepEqual(tagErrors(listing), [{ run: "bad", tag: "future", error: "written by a newer tb_modelmem" }]);
  assert.deepEqual(breakdownTags(listing, "gan"), ["discriminator", "generator"]);
});

test("reconcile keeps a valid selection including the chosen step", () => {
  assert.deepEqual(reconcile({ run: "sgd", tag: "weights", step: 1 }, listing, "breakdown"), { run: "sgd", tag: "weights", step: 1, ...none });
});

test("reconcile keeps a host of the session and a breakdown of the run, else the server's default", () => {
  const picked = { run: "gan", tag: "profile/2026_11_22", step: "", host: "worker_1", breakdown: "generator" };
  assert.deepEqual(reconcile(picked, listing, "ops"), picked);
  assert.deepEqual(reconcile({ ...picked, host: "gone", breakdown: "gone" }, listing, "ops"), { ...picked, ...none });
  assert.deepEqual(reconcile({ ...picked, run: "adam" }, listing, "ops"), { run: "adam", tag: "trace", step: "", ...none });
});

test("a tag picked for the user that could not be read gives way to the run's next; the user's own pick stays", () => {
  const failed = new Set(["gan\0discriminator"]);
  assert.deepEqual(reconcile({ run: "gan", tag: "" }, listing, "breakdown", failed), { run: "gan", tag: "generator", step: "", ...none });
  assert.deepEqual(reconcile({ run: "gan", tag: "discriminator", step: 5 }, listing, "breakdown", failed),
    { run: "gan", tag: "discriminator", step: 5, ...none });
  const both = new Set(["gan\0discriminator", "gan\0generator"]); // none readable: the first, whose error is said
  assert.equal(reconcile({ run: "gan", tag: "" }, listing, "breakdown", both).tag, "discriminator");
});

test("reconcile falls back to the first run/tag and the latest step", () => {
  assert.deepEqual(reconcile(undefined, listing, "breakdown"), { run: "adam", tag: "variables", step: "", ...none });
  assert.deepEqual(reconcile({ run: "gone", tag: "x", step: 5 }, listing, "ops"), { run: "adam", tag: "trace", step: "", ...none });
  assert.deepEqual(reconcile({ run: "adam", tag: "gone", step: 5 }, listing, "breakdown"), { run: "adam", tag: "variables", step: "", ...none });
  assert.deepEqual(reconcile({}, { runs: [] }, "loadbench"), { run: "", tag: "", step: "", ...none });
});

test("an answer's key changes with a new latest step or a new breakdown to join, not otherwise", () => {
  const sel = { run: "adam", tag: "trace", step: "", host: "", breakdown: "" };
  const info = listing.runs[0].tags[1];
  const key = itemKey("ops", sel, info, listing);
  assert.equal(itemKey("ops", { ...sel }, { ...info }, listing), key);
  assert.notEqual(itemKey("ops", sel, { ...info, max_step: 4 }, listing), key);
  const newer = { runs: [{ run: "adam", tags: [{ ...listing.runs[0].tags[0], max_step: 9 }, info] }] };
  assert.notEqual(itemKey("ops", sel, info, newer), key);
  assert.equal(itemKey("breakdown", sel, info, newer), itemKey("breakdown", sel, info, listing));
  assert.notEqual(itemKey("ops", { ...sel, step: 3 }, info, listing), key);
  assert.notEqual(itemKey("timeline", sel, info, listing), key);
});

test("memory samples get the Growth view; their answer follows new samples and joins nothing", () => {
  const memory = { tag: "memory", kind: "memory", origin: "modelmem", max_step: 7, error: null };
  const withMemory = { runs: [...listing.runs, { run: "builds", tags: [memory] }] };
  assert.deepEqual(availableViews(withMemory).map((v) => v.id), ["storage", "ops", "timeline", "whatif", "growth"]);
  assert.deepEqual(availableViews({ runs: [{ run: "builds", tags: [memory] }] }).map((v) => v.label), ["Growth"]);
  assert.deepEqual(reconcile({}, withMemory, "memory"), { run: "builds", tag: "memory", step: "", ...none });
  const sel = { run: "adam", tag: "memory", step: "", host: "", breakdown: "" };
  const key = itemKey("growth", sel, memory, listing);
  assert.equal(itemKey("growth", sel, memory, { runs: [{ run: "adam", tags: [{ ...listing.runs[0].tags[0], max_step: 9 }] }] }), key);
  assert.notEqual(itemKey("growth", sel, { ...memory, max_step: 8 }, listing), key);
});

test("tags say what they are when their name does not", () => {
  assert.equal(tagLabel(listing.runs[2].tags[2]), "profile/2026_11_22 (TF2 profile, 2 hosts)");
  assert.equal(tagLabel({ tag: "step_1", origin: "run_metadata" }), "step_1 (RunMetadata)");
  assert.equal(tagLabel({ tag: "storage", origin: "modelmem" }), "storage");
});

test("compare uses the same tag name where a run has it", () => {
  assert.equal(compareTag(listing, "adam", "variables"), "variables");
  assert.equal(compareTag(listing, "sgd", "variables"), "weights");
  assert.equal(compareTag(listing, "bad", "variables"), null);
});

test("a view follows the run last picked in another view, where it has that run", () => {
  // picked "gan" on Storage; What if (ops) was on "adam": it moves to gan's first trace
  const ops = { run: "adam", tag: "trace", step: "3", host: "", breakdown: "variables" };
  assert.deepEqual(reconcile(followRun(ops, "gan", listing, "ops"), listing, "ops"),
    { run: "gan", tag: "profile/2026_11_22", step: "", host: "", breakdown: "" });
  // "sgd" has no trace: What if stays where it was, its picks kept
  assert.equal(followRun(ops, "sgd", listing, "ops"), ops);
  // already on it, or nothing picked yet: unchanged (its tag and step kept)
  assert.equal(followRun(ops, "adam", listing, "ops"), ops);
  assert.equal(followRun(ops, "", listing, "ops"), ops);
});

test("a breakdown passed over as not readable is named with why, beside the one joined instead", () => {
  const error = "run/z_broken.pt: unreadable zip (BadZipFile: File is not a zip file)";
  assert.equal(passedOverNote({ breakdown: { tag: "storage", step: 1 }, breakdowns_unreadable: [{ tag: "z_broken.pt", step: null, error }] }),
    `Passed over, not readable: ${error}. The ops are joined with storage at step 1 instead.`);
  assert.equal(passedOverNote({ breakdown: null, breakdowns_unreadable: [{ tag: "storage", step: 3000, error: "bad" }] }),
    "Passed over, not readable: storage at step 3,000: bad. The ops are joined with no breakdown.");
  assert.equal(passedOverNote({ breakdown: { tag: "storage", step: 1 }, breakdowns_unreadable: [] }), "");
  assert.equal(passedOverNote({}), ""); // an answer from before the field: nothing to say
  // a checkpoint folder's tag ends in "/": named, its error does not say it
  assert.equal(passedOverNote({ breakdown: null, breakdowns_unreadable: [{ tag: "torch/checkpoint-6/", step: null, error: "a shard cut short" }] }),
    "Passed over, not readable: torch/checkpoint-6/: a shard cut short. The ops are joined with no breakdown.");
});
