import { test } from "node:test";
import assert from "node:assert/strict";
import { filterRows, nextSort, rowMatcher, serverFilter, sortRows } from "../src/table-model.js";

const columns = [
  { key: "name" },
  { key: "role" },
  { key: "bytes", numeric: true },
];
const rows = [
  { name: "conv2d/kernel", role: "weight", bytes: 3200 },
  { name: "adam/m/conv2d_kernel", role: "optimizer_slot", bytes: 3200 },
  { name: "dense/bias", role: "weight", bytes: 40 },
  { name: "iteration", role: "other", bytes: null },
];

test("filter matches every term, case-insensitively", () => {
  assert.deepEqual(filterRows(rows, "CONV2D", columns).map((r) => r.name), ["conv2d/kernel", "adam/m/conv2d_kernel"]);
  assert.deepEqual(filterRows(rows, "conv2d weight", columns).map((r) => r.name), ["conv2d/kernel"]);
  assert.equal(filterRows(rows, "  ", columns), rows);
});

test("column:term restricts a term to that column", () => {
  assert.deepEqual(filterRows(rows, "role:slot", columns).map((r) => r.name), ["adam/m/conv2d_kernel"]);
  assert.deepEqual(filterRows(rows, "name:weight", columns), []);
  const labelled = [{ key: "op_type", label: "Type" }, { key: "slot_of", label: "Slot of" }];
  const ops = [{ op_type: "_MklNativeFusedConv2D", slot_of: "a" }, { op_type: "MatMul", slot_of: "b" }];
  assert.equal(filterRows(ops, "type:fused", labelled).length, 1);
  assert.equal(filterRows(ops, "slot_of:b", labelled).length, 1);
});

test("sort is stable, numeric, empty values last both ways", () => {
  const bytes = columns[2];
  assert.deepEqual(sortRows(rows, bytes, "desc").map((r) => r.bytes), [3200, 3200, 40, null]);
  assert.deepEqual(sortRows(rows, bytes, "asc").map((r) => r.bytes), [40, 3200, 3200, null]);
  assert.deepEqual(sortRows(rows, bytes, "desc").slice(0, 2).map((r) => r.name), ["conv2d/kernel", "adam/m/conv2d_kernel"]);
});

test("strings sort naturally", () => {
  const names = [{ name: "dense_10" }, { name: "dense_2" }, { name: "Conv" }];
  assert.deepEqual(sortRows(names, { key: "name" }, "asc").map((r) => r.name), ["Conv", "dense_2", "dense_10"]);
});

test("header clicks toggle direction; numbers start largest first", () => {
  assert.deepEqual(nextSort({}, columns[2]), { key: "bytes", direction: "desc" });
  assert.deepEqual(nextSort({}, columns[0]), { key: "name", direction: "asc" });
  assert.deepEqual(nextSort({ key: "name", direction: "asc" }, columns[0]), { key: "name", direction: "desc" });
});

test("filter + sort of 20,000 rows stays fast", () => {
  const many = Array.from({ length: 20000 }, (_, i) => ({ name: `op_${i}`, role: i % 2 ? "a" : "b", bytes: (i * 7919) % 10007 }));
  const t0 = performance.now();
  const out = sortRows(filterRows(many, "op_1", columns), columns[2], "desc");
  assert.ok(out.length > 1000);
  assert.ok(performance.now() - t0 < 500);
});

test("the server gets the same filter, column labels turned into its field names", () => {
  const opColumns = [{ key: "name", label: "Op" }, { key: "op_type", label: "Type" }, { key: "slot_of", label: "Slot of" },
    { key: "output_bytes", label: "Output", filterKey: "output_shape" }];
  assert.equal(serverFilter("  conv  type:Fused layer:dense/kernel ", opColumns), "conv op_type:Fused layer:dense/kernel");
  assert.equal(serverFilter("op:relu slot_of:fc1 output:28,28", opColumns), "name:relu slot_of:fc1 output_shape:28,28");
  assert.equal(serverFilter("output_bytes:100352", opColumns), "output_bytes:100352");
  assert.equal(serverFilter("", opColumns), "");
  assert.equal(rowMatcher(" ", opColumns), null);
});

test("a table filtered here reads terms as the server does: exact, under a path, quoted", () => {
  const ops = [
    { name: "aten::div (optimizer)", layer: "model/block_1/attn" },
    { name: "aten::div", layer: "model/block_10" },
    { name: "aten::mul (optimizer)", layer: "" },
  ];
  const opColumns = [{ key: "name", label: "Op" }, { key: "layer" }];
  const names = (query) => filterRows(ops, query, opColumns).map((r) => r.name);
  assert.deepEqual(names('name="aten::div (optimizer)"'), ["aten::div (optimizer)"]);
  assert.deepEqual(names("op=aten::div"), ["aten::div"]);
  assert.deepEqual(names("layer^=model/block_1"), ["aten::div (optimizer)"]);
  assert.deepEqual(names("layer="), ["aten::mul (optimizer)"]);
  assert.deepEqual(names('"div (opt"'), ["aten::div (optimizer)"]);
  assert.deepEqual(names("nosuch=thing"), []);
});

test("the server gets quoted terms whole, their field renamed", () => {
  const opColumns = [{ key: "name", label: "Op" }, { key: "op_type", label: "Type" }];
  assert.equal(serverFilter('op="aten::div (optimizer)"  type:fused', opColumns),
    'name="aten::div (optimizer)" op_type:fused');
  assert.equal(serverFilter('"a b" c', opColumns), '"a b" c');
});
