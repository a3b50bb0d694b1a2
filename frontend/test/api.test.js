import { test } from "node:test";
import assert from "node:assert/strict";
import { api, getJson } from "../src/api.js";

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
  assert.deepEqual(await api.breakdown("run a/b", "storage", ""), { ok: 1 });
  await api.ops("r", "t", 0);
  await api.runs();
  assert.deepEqual(calls, ["./breakdown?run=run+a%2Fb&tag=storage", "./ops?run=r&tag=t&step=0", "./runs"]);
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
