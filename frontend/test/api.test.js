import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { api, getJson, isPending, rowsOf } from "../src/api.js";

function stubFetch(respond) {
  const calls = [];
  globalThis.fetch = async (url) => {
    calls.push(url);
    return respond(url);
  };
  return calls;
}

test("requests are relative (work under --path_prefix) and skip empty parameters", async () => {
  const calls = stubFetch(() => new Response('{"ok":1}', { status: 200 }));
  assert.deepEqual(await api.breakdown({ run: "run a/b", tag: "storage", step: "" }), { ok: 1, layers: [] });
  await api.ops({ run: "r", tag: "t", step: 0, host: "", breakdown: "generator" });
  await api.opRows({ run: "r", tag: "t", step: 3, host: "worker_1" }, { offset: 200, limit: 100, sort: "time_us", order: "desc", filter: "layer:dense" });
  await api.variables({ run: "r", tag: "v" }, { offset: 0, limit: 100, sort: "bytes", order: "asc", filter: "" });
  await api.runs();
  assert.deepEqual(calls, [
    "./breakdown?run=run+a%2Fb&tag=storage",
    "./ops?run=r&tag=t&step=0&breakdown=generator",
    "./op_rows?run=r&tag=t&step=3&host=worker_1&offset=200&limit=100&sort=time_us&order=desc&filter=layer%3Adense",
    "./variables?run=r&tag=v&offset=0&limit=100&sort=bytes&order=asc",
    "./runs",
  ]);
});

test("202 is a Pending carrying the server's progress, not data", async () => {
  stubFetch(() => new Response('{"state":"reducing","progress":0.4,"message":"parsing","elapsed_s":3.2}', { status: 202 }));
  const answer = await api.timeline({ run: "r", tag: "profile/s" });
  assert.ok(isPending(answer));
  assert.deepEqual([answer.progress, answer.message, answer.elapsed_s], [0.4, "parsing", 3.2]);
  stubFetch(() => new Response("not json", { status: 202 }));
  assert.equal((await getJson("ops")).progress, 0);
});

test("a non-2xx answer becomes an error carrying the server's text", async () => {
  stubFetch(() => new Response("written by a newer tb_modelmem; upgrade\n", { status: 422, statusText: "Unprocessable" }));
  await assert.rejects(getJson("breakdown", { run: "x" }), (e) => e.message === "written by a newer tb_modelmem; upgrade" && e.status === 422);
  stubFetch(() => new Response("", { status: 500, statusText: "Internal Server Error" }));
  await assert.rejects(getJson("runs"), /500 Internal Server Error/);
});

test("an unreachable server says so", async () => {
  stubFetch(() => { throw new TypeError("Failed to fetch"); });
  await assert.rejects(getJson("runs"), /TensorBoard did not answer \(Failed to fetch\)/);
});

test("a layer tree sent column by column comes back as the rows the views read", async () => {
  const answer = JSON.parse(await readFile(new URL("./fixtures/breakdown-adam.json", import.meta.url), "utf8"));
  stubFetch(() => new Response(JSON.stringify(answer), { status: 200 }));
  const { layers } = await api.breakdown({ run: "adam", tag: "storage" });
  const columns = answer.layers.columns;
  assert.equal(layers.length, answer.layers.length);
  assert.ok(layers.length > 3);
  layers.forEach((row, i) => {
    assert.equal(row.layer, columns.layer[i]);
    assert.equal(row.total_bytes, columns.total_bytes[i]);
    assert.deepEqual(row.bytes, Object.fromEntries(Object.entries(columns.bytes).map(([role, v]) => [role, v[i]])));
  });
  // a leaf's total is its roles' sum; the model row totals the leaves under it
  const leaves = layers.filter((row) => row.leaf);
  for (const row of leaves) assert.equal(row.total_bytes, Object.values(row.bytes).reduce((a, b) => a + b, 0));
  const under = leaves.filter((row) => row.layer.startsWith(`${layers[0].layer}/`));
  assert.ok(under.length > 1);
  assert.equal(layers[0].total_bytes, under.reduce((sum, row) => sum + row.total_bytes, 0));
});

test("rowsOf: a field a row lacks is null there, a nested one too; junk gives no rows", () => {
  const rows = rowsOf({ length: 2, columns: { layer: ["a", "b"], group: [null, "loss"], bytes: { weight: [4, null], other: [0, null] } } });
  assert.deepEqual(rows, [{ layer: "a", group: null, bytes: { weight: 4, other: 0 } }, { layer: "b", group: "loss", bytes: null }]);
  assert.deepEqual(rowsOf(null), []);
  assert.deepEqual(rowsOf({ length: "9", columns: { a: [1] } }), []);
  assert.deepEqual(rowsOf({ length: 1, columns: "x" }), [{}]);
});
