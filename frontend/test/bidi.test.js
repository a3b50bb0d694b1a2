import { test } from "node:test";
import assert from "node:assert/strict";
import { bidiPieces, hasBidiControls, isolate } from "../src/bidi.js";

const RLO = "\u202E";

test("plain text is one piece, left alone", () => {
  assert.deepEqual(bidiPieces("no step 3 for run 'a'"), [{ text: "no step 3 for run 'a'", isolate: false }]);
  assert.deepEqual(bidiPieces(null), [{ text: "", isolate: false }]);
});

test("an override stays inside the word that holds it", () => {
  const pieces = bidiPieces(`no breakdown data for run 'evil${RLO}gnp.exe' at step 3`);
  assert.deepEqual(pieces, [
    { text: "no breakdown data for run ", isolate: false },
    { text: `'evil${RLO}gnp.exe'`, isolate: true },
    { text: " at step 3", isolate: false },
  ]);
  assert.equal(pieces.map((p) => p.text).join(""), `no breakdown data for run 'evil${RLO}gnp.exe' at step 3`);
});

test("plain-text isolation closes whatever the name leaves open", () => {
  assert.equal(isolate(`a${RLO}b`), `\u2068a${RLO}b\u2069`);
  assert.ok(hasBidiControls(`x\u2067y`));
  assert.ok(!hasBidiControls("שלום")); // right-to-left letters are not controls
});
