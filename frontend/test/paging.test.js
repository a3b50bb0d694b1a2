import { test } from "node:test";
import assert from "node:assert/strict";
import { createPageCache, pagesFor } from "../src/paging.js";
import { createLocalSource, createRemoteSource, createTreeSource } from "../src/table-sources.js";

test("pages covering a row range", () => {
  assert.deepEqual(pagesFor(0, 30, 100), [0]);
  assert.deepEqual(pagesFor(95, 130, 100), [0, 1]);
  assert.deepEqual(pagesFor(199_980, 200_000, 100), [1999]);
  assert.deepEqual(pagesFor(10, 10, 100), []);
});

test("the page cache drops the least recently used past its bound", () => {
  const cache = createPageCache(2);
  cache.set(0, ["a"]);
  cache.set(1, ["b"]);
  cache.get(0); // 0 is now the most recent
  cache.set(2, ["c"]);
  assert.deepEqual([cache.has(0), cache.has(1), cache.has(2), cache.size], [true, false, true, 2]);
});

const COLUMNS = [{ key: "name", label: "Op" }, { key: "op_type", label: "Type" }, { key: "time_us", numeric: true }];
const view = (query = "", key = "time_us", direction = "desc") => ({ query, sort: { key, direction }, columns: COLUMNS });

/** A server of `n` rows answering pages by hand. */
function fakeServer(n) {
  const asked = [];
  const answers = [];
  const fetchPage = (page) => new Promise((resolve) => {
    asked.push(page);
    answers.push(() => resolve({ total: n, matched: page.filter ? 1 : n, offset: page.offset, sort: page.sort, order: page.order,
      rows: Array.from({ length: Math.min(page.limit, n - page.offset) }, (_, i) => ({ name: `op_${page.offset + i}` })) }));
  });
  return { asked, answers, fetchPage };
}
const tick = () => new Promise((r) => setImmediate(r));

test("remote: the item's own first page is used; scrolling fetches only the pages in view, once each", async () => {
  const server = fakeServer(200_000);
  let changes = 0;
  const source = createRemoteSource({ onChange: () => changes++, pageSize: 100 });
  source.update(view());
  source.setItem("trace@4", server.fetchPage, { total: 200_000, matched: 200_000, offset: 0, sort: "time_us", order: "desc",
    rows: [{ name: "first" }] });
  assert.deepEqual([source.count(), source.total(), source.row(0).name, source.note()], [200_000, 200_000, "first", ""]);
  source.want(0, 30);
  assert.equal(server.asked.length, 0); // the first screen came with the item
  source.want(150_010, 150_050);
  source.want(150_010, 150_050); // a second paint before the answer: no second request
  assert.deepEqual(server.asked, [{ offset: 150_000, limit: 100, filter: "", sort: "time_us", order: "desc" }]);
  assert.equal(source.row(150_020), undefined); // a placeholder until it comes
  server.answers[0]();
  await tick();
  assert.equal(source.row(150_020).name, "op_150020");
  assert.equal(changes, 1);
});

test("remote: sort and filter go to the server (labels become fields); older answers are dropped", async () => {
  const server = fakeServer(20_000);
  const source = createRemoteSource({ onChange: () => {}, pageSize: 100 });
  source.update(view());
  source.setItem("trace", server.fetchPage, null);
  source.want(0, 20);
  assert.deepEqual(server.asked[0], { offset: 0, limit: 100, filter: "", sort: "time_us", order: "desc" });
  source.update(view("conv type:fused", "name", "asc")); // the user typed before the first answer came
  source.want(0, 20);
  assert.deepEqual(server.asked[1], { offset: 0, limit: 100, filter: "conv op_type:fused", sort: "name", order: "asc" });
  server.answers[0](); // the stale answer to the old query
  await tick();
  assert.equal(source.row(0), undefined);
  assert.equal(source.note(), "loading…");
  server.answers[1]();
  await tick();
  assert.deepEqual([source.count(), source.total(), source.row(0).name], [1, 20_000, "op_0"]);
});

test("remote: a new item drops the old pages; a failure is shown, not swallowed", async () => {
  const failing = () => Promise.reject(new Error("422 corrupt trace"));
  const source = createRemoteSource({ onChange: () => {} });
  source.update(view());
  source.setItem("a", failing, null);
  source.want(0, 10);
  await tick();
  assert.equal(source.note(), "could not load rows: 422 corrupt trace");
  const server = fakeServer(5);
  source.setItem("b", server.fetchPage, null);
  assert.equal(source.note(), "loading…");
  source.want(0, 10);
  server.answers[0]();
  await tick();
  assert.deepEqual([source.count(), source.row(4).name], [5, "op_4"]);
});

test("local and tree sources keep their rows in memory", () => {
  const local = createLocalSource();
  local.setRows([{ name: "b", op_type: "X", time_us: 1 }, { name: "a", op_type: "Fused", time_us: 9 }]);
  local.update(view("type:fus"));
  assert.deepEqual([local.count(), local.total(), local.row(0).name], [1, 2, "a"]);

  const tree = createTreeSource();
  const rows = [{ layer: "m", label: "m", depth: 0 }, { layer: "m/a", label: "a", depth: 1 }];
  tree.setRows(rows, true);
  tree.update({ query: "", sort: {}, columns: [{ key: "layer" }] });
  assert.equal(tree.count(), 2); // the lone model opens by default
  tree.toggle("m");
  tree.update({ query: "", sort: {}, columns: [{ key: "layer" }] });
  assert.equal(tree.count(), 1);
  tree.setRows(rows, false); // a refresh of the same tree keeps it closed
  tree.update({ query: "", sort: {}, columns: [{ key: "layer" }] });
  assert.deepEqual([tree.count(), tree.node(0).expanded], [1, false]);
});
