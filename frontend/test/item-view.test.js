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

test("a failed steps request keeps the item's steps and is asked again; another item's shows none", async () => {
  let fail = false;
  const api = { steps: async () => {
    if (fail) throw new Error("503");
    return { steps: [{ step: 1 }, { step: 5 }] };
  } };
  const list = createStepList(api, createLoader());
  assert.equal(await list.fetch("steps a@5", { run: "a", tag: "t" }, () => true), true);
  fail = true; // training wrote step 6; asking for the new list fails once
  assert.equal(await list.fetch("steps a@6", { run: "a", tag: "t" }, () => true), true);
  assert.deepEqual(list.steps, [{ step: 1 }, { step: 5 }]); // step 5 stays pickable
  assert.equal(list.key, "steps a@5"); // so the next update asks for a@6 again
  assert.equal(await list.fetch("steps b@2", { run: "b", tag: "t" }, () => true), true);
  assert.deepEqual(list.steps, []); // a's steps never stand under b
  assert.equal(list.key, "");
});
