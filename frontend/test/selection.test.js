import { test } from "node:test";
import assert from "node:assert/strict";
import { availableViews, compareTag, reconcile, runsOfKind, tagErrors } from "../src/selection.js";

const listing = {
  runs: [
    { run: "adam", tags: [
      { tag: "variables", kind: "breakdown", origin: "modelmem", max_step: 3, error: null },
      { tag: "trace", kind: "ops", origin: "modelmem", max_step: 3, error: null },
    ] },
    { run: "bad", tags: [{ tag: "future", kind: null, origin: "modelmem", max_step: 0, error: "written by a newer tb_modelmem" }] },
    { run: "sgd", tags: [{ tag: "weights", kind: "breakdown", origin: "modelmem", max_step: 1 }] },
  ],
};

test("only views with data are offered", () => {
  assert.deepEqual(availableViews(listing).map((v) => v.id), ["storage", "ops", "timeline"]);
  assert.deepEqual(availableViews({ runs: [] }), []);
});

test("runs of a kind skip unreadable tags; errors are listed separately", () => {
  assert.deepEqual(runsOfKind(listing, "breakdown").map((r) => r.run), ["adam", "sgd"]);
  assert.deepEqual(tagErrors(listing), [{ run: "bad", tag: "future", error: "written by a newer tb_modelmem" }]);
});

test("reconcile keeps a valid selection including the chosen step", () => {
  assert.deepEqual(reconcile({ run: "sgd", tag: "weights", step: 1 }, listing, "breakdown"), { run: "sgd", tag: "weights", step: 1 });
});

test("reconcile falls back to the first run/tag and the latest step", () => {
  assert.deepEqual(reconcile(undefined, listing, "breakdown"), { run: "adam", tag: "variables", step: "" });
  assert.deepEqual(reconcile({ run: "gone", tag: "x", step: 5 }, listing, "ops"), { run: "adam", tag: "trace", step: "" });
  assert.deepEqual(reconcile({ run: "adam", tag: "gone", step: 5 }, listing, "breakdown"), { run: "adam", tag: "variables", step: "" });
  assert.deepEqual(reconcile({}, { runs: [] }, "loadbench"), { run: "", tag: "", step: "" });
});

test("compare uses the same tag name where a run has it", () => {
  assert.equal(compareTag(listing, "adam", "variables"), "variables");
  assert.equal(compareTag(listing, "sgd", "variables"), "weights");
  assert.equal(compareTag(listing, "bad", "variables"), null);
});
