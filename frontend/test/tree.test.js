import { test } from "node:test";
import assert from "node:assert/strict";
import { allComposites, defaultExpanded, treeIndex, treeKey, visibleTree } from "../src/tree.js";
import { rowComparator, rowMatcher } from "../src/table-model.js";

// The backend's depth-first rows: a model holding a TransformerBlock (composite) and a dense head.
const rows = [
  { layer: "model", label: "model", depth: 0, leaf: false, bytes: 60 },
  { layer: "model/embed", label: "embed", depth: 1, leaf: true, bytes: 10 },
  { layer: "model/block", label: "block", depth: 1, leaf: false, bytes: 45 },
  { layer: "model/block/attention", label: "attention", depth: 2, leaf: true, bytes: 40 },
  { layer: "model/block/norm", label: "norm", depth: 2, leaf: true, bytes: 5 },
  { layer: "model/head", label: "head", depth: 1, leaf: true, bytes: 5 },
  { layer: "", group: "loss", label: "(loss)", depth: 0, leaf: true, bytes: 0 },
  { layer: "", group: "metrics", label: "(metrics)", depth: 0, leaf: true, bytes: 1 },
];
const labels = (shown) => shown.map((s) => `${"  ".repeat(s.depth)}${s.row.label}${s.hasChildren ? (s.expanded ? " -" : " +") : ""}`);
const columns = [{ key: "layer", text: (r) => r.layer || r.label }, { key: "bytes", numeric: true }];
const isGroup = (r) => !r.layer;

test("children follow their parent in model order", () => {
  const { roots, children } = treeIndex(rows);
  assert.deepEqual(roots, [0, 6, 7]);
  assert.deepEqual(children[0], [1, 2, 5]);
  assert.deepEqual(children[2], [3, 4]);
  assert.equal(treeKey(rows[3]), "model/block/attention");
  assert.equal(treeKey(rows[6]), "(group)loss");
});

test("collapsed composites hide their subtree; expanding shows one level", () => {
  assert.deepEqual(labels(visibleTree(rows)), ["model +", "(loss)", "(metrics)"]);
  assert.deepEqual(labels(visibleTree(rows, { expanded: new Set(["model"]) })),
    ["model -", "  embed", "  block +", "  head", "(loss)", "(metrics)"]);
  assert.deepEqual(labels(visibleTree(rows, { expanded: allComposites(rows) })),
    ["model -", "  embed", "  block -", "    attention", "    norm", "  head", "(loss)", "(metrics)"]);
});

test("sorting orders siblings only; subtrees stay under their parent; groups stay last", () => {
  const shown = visibleTree(rows, { expanded: allComposites(rows), compare: rowComparator(columns[1], "desc"), pinLast: isGroup });
  assert.deepEqual(labels(shown), ["model -", "  block -", "    attention", "    norm", "  embed", "  head", "(metrics)", "(loss)"]);
});

test("a filter shows matching rows with their ancestors opened, whatever was collapsed", () => {
  const shown = visibleTree(rows, { expanded: new Set(), match: rowMatcher("norm", columns) });
  assert.deepEqual(labels(shown), ["model -", "  block -", "    norm"]);
  assert.deepEqual(visibleTree(rows, { match: rowMatcher("nothing", columns) }), []);
  assert.deepEqual(labels(visibleTree(rows, { match: rowMatcher("layer:model/block", columns) })),
    ["model -", "  block -", "    attention", "    norm"]);
});

test("default expansion opens the model, then levels while they fit", () => {
  assert.deepEqual([...defaultExpanded(rows, 40)].sort(), ["model", "model/block"]);
  assert.deepEqual([...defaultExpanded(rows, 6)], ["model"]); // the block's two layers would pass 6 rows
  // A lone model root with 300 layers still opens (the rows are virtualised).
  const wide = [{ layer: "m", depth: 0 }, ...Array.from({ length: 300 }, (_, i) => ({ layer: `m/l${i}`, depth: 1 }))];
  assert.deepEqual([...defaultExpanded(wide, 40)], ["m"]);
  // Many composite roots too big to open together stay closed.
  const many = Array.from({ length: 5 }, (_, r) => [{ layer: `r${r}`, depth: 0 },
    ...Array.from({ length: 20 }, (_, i) => ({ layer: `r${r}/l${i}`, depth: 1 }))]).flat();
  assert.equal(defaultExpanded(many, 40).size, 0);
});

test("a deep tree (thousands of levels) is walked without recursion", () => {
  const deep = Array.from({ length: 5000 }, (_, i) => ({ layer: Array.from({ length: i + 1 }, (_, j) => `l${j}`).join("/"), depth: i }));
  assert.equal(visibleTree(deep, { expanded: allComposites(deep) }).length, 5000);
});
