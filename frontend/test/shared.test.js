import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { rowsOf } from "../src/api.js";
import { sharedMarks } from "../src/shared.js";

// A real /breakdown answer (test/fixtures/breakdown-two-towers.json): one Dense(8) on 4 inputs ("shared", 40
// parameters) in two towers of one model; Keras counts 85 for the model, 58 for tower_a, 67 for tower_b.
const fixture = async (name) => JSON.parse(await readFile(new URL(`fixtures/${name}`, import.meta.url), "utf8"));

test("a layer shared by two parents: counted once, the second path marked, its parent says +N shared", async () => {
  const data = await fixture("breakdown-two-towers.json");
  const rows = rowsOf(data.layers);
  const at = (layer) => rows.find((r) => r.layer === layer);
  assert.equal(at("two_towers").params, 85); // the model: the shared layer once
  assert.equal(data.total_params, 85);
  const marks = sharedMarks(rows);
  assert.deepEqual([...marks.keys()], ["two_towers/tower_b/shared", "two_towers/tower_b"]);
  const leaf = marks.get("two_towers/tower_b/shared");
  assert.equal(leaf.text, "shared");
  assert.equal(leaf.owner, "two_towers/tower_a/shared");
  assert.equal(leaf.title, "the same layer as \u2068two_towers/tower_a/shared\u2069, which holds its variables: its 40 parameters "
    + "are counted there, and once in every layer above both");
  const parent = marks.get("two_towers/tower_b");
  assert.equal(parent.text, "+40 shared");
  assert.equal(at("two_towers/tower_b").params + parent.shared, 67); // Keras' tower_b.count_params()
  assert.equal(parent.keras, 67);
  assert.match(parent.title, /Keras counts them in this layer too: 27 \+ 40 = 67$/);
  assert.ok(!marks.has("two_towers") && !marks.has("two_towers/tower_a")); // above both paths, or the owner's
});

test("nothing shared: no marks", async () => {
  for (const name of ["breakdown-bilstm-mp.json", "breakdown-adam.json"]) {
    assert.equal(sharedMarks(rowsOf((await fixture(name)).layers)).size, 0, name);
  }
  assert.equal(sharedMarks(undefined).size, 0);
});

test("where the owning path cannot be told (two layers alike), the served count stands", () => {
  const rows = [
    { layer: "m", label: "m", depth: 0, leaf: false, params: 20, shared_params: 10 },
    { layer: "m/a", label: "a", depth: 1, leaf: false, params: 20, shared_params: 0 },
    { layer: "m/a/d", label: "d", depth: 2, leaf: true, params: 10, shared_params: 0, class_name: "Dense" },
    { layer: "m/a/e", label: "d", depth: 2, leaf: true, params: 10, shared_params: 0, class_name: "Dense" },
    { layer: "m/b", label: "b", depth: 1, leaf: false, params: 0, shared_params: 10 },
    { layer: "m/b/d", label: "d", depth: 2, leaf: true, params: 10, shared_params: 10, class_name: "Dense" },
  ];
  const marks = sharedMarks(rows);
  assert.equal(marks.get("m/b/d").owner, "");
  assert.match(marks.get("m/b/d").title, /another path of the model/);
  assert.equal(marks.get("m/b").text, "+10 shared");
  assert.equal(marks.get("m").text, "+10 shared"); // not known to be under it: the served count
});
