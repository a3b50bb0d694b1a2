import { test } from "node:test";
import assert from "node:assert/strict";
import { createStepList } from "../src/components/item-view.js";
import { createLoader } from "../src/loader.js";

test("an older item's steps answered last do not replace the newer item's", async () => {
  const answers = {};
  const api = { steps: (selection) => new Promise((resolve) => { answers[selection.run] = resolve; }) };
  const list = createStepList(api, createLoader());
  let latest = "a";
  const first = list.fetch("steps a", { run: "a" }, () => latest === "a");
  latest = "b"; // the user picked run b while a's steps were on the way
  const second = list.fetch("steps b", { run: "b" }, () => latest === "b");
  answers.b({ steps: [{ step: 7 }] });
  assert.equal(await second, true);
  answers.a({ steps: [{ step: 1 }, { step: 2 }] });
  assert.equal(await first, false);
  assert.deepEqual(list.steps, [{ step: 7 }]);
  assert.equal(list.key, "steps b");
});
